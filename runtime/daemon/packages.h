/* The Python distributions a rootfs profile offers (GET /v1/packages,
 * GET /packages): the Name and Version headers of each *.dist-info and
 * *.egg-info in the dirs Debian's python3 imports them from. The stdlib
 * is not a distribution and is not listed. Lists are cached per profile
 * until one of those dirs changes (a package added or removed, the rootfs
 * rebuilt). */
#ifndef SRD_PACKAGES_H
#define SRD_PACKAGES_H

#include <stdbool.h>
#include <stddef.h>

#include "json.h"

typedef struct srd_package {
	char name[128]; /* as its metadata spells it: "PyYAML" */
	char version[64];
} srd_package;

/* The packages of profile ("host": the host's own /usr; otherwise
 * rootfs_dir/profile, rootfs_dir NULL: the library's default), sorted by
 * name, one per name (case, '-', '_' and '.' do not tell names apart).
 * *out is malloc'd (NULL when there are none). A profile that is not
 * built is a 500 naming the path and how to build it. */
int srd_packages_list(const char *rootfs_dir, const char *profile, srd_package **out, size_t *n,
		      srd_ferr *e);

/* The default policy's profile's packages: {profile, packages: [{name,
 * version}], count}, or names_only: {packages: [name], count}. NULL: e. */
struct srd_ctx;
cJSON *srd_packages_json(struct srd_ctx *ctx, bool names_only, srd_ferr *e);

#endif

/* A run's Python dependencies (docs/dependencies.md): requirements
 * checked against policy.dependencies, met by the profile's rootfs where
 * it can, else installed by pip in a sandbox of its own into a layer that
 * the run's sandbox mounts read-only over /usr/local/lib/python3.X/
 * dist-packages (on sys.path, before the profile's packages). Finished
 * layers are kept in a cache keyed by everything that went into them. */
#ifndef SR_DEPS_H
#define SR_DEPS_H

#include <stddef.h>
#include <stdint.h>

#include "mounts.h"
#include "saferun.h"

/* One requirement: a PEP 508 name and optional version specifiers, no
 * extras, markers, URLs, paths or options. norm gets the normalised name
 * (lower case, runs of -_. as one -). 0, or -1 with err naming
 * requirements[index] and the value. */
int sr_deps_check_requirement(const char *req, size_t index, char *norm, size_t norm_size,
			      sr_error *err);

/* policy.dependencies.index_url: http:// or https://, a host (a DNS name
 * or an IPv4 address), an optional port, a path; no credentials (they
 * would end up in logs and results), no query, no fragment, no spaces.
 * 0 with host and port (443 for https, 80 for http, or the URL's), or -1
 * with *why saying what is wrong (never quoting the URL's credentials). */
int sr_deps_parse_index_url(const char *url, char *host, size_t host_size, uint16_t *port,
			    const char **why);

/* The bind of layer over /usr/local/lib/python3.X/dist-packages of the
 * policy's profile in rootfs_dir (NULL: the default). */
int sr_deps_bind(const sr_policy *p, const char *rootfs_dir, const char *layer, sr_bind *out,
		 sr_error *err);
void sr_deps_bind_free(sr_bind *b);

void sr_deps_result_free(struct sr_deps_result *d);
#endif

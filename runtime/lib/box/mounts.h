/* The sandbox's filesystem: planned in the supervisor, applied in the child.
 *
 * The plan is a flat list of mount operations computed with full error
 * reporting before anything is cloned; the child only executes it (no
 * allocation, so it is safe after clone in a threaded process). */
#ifndef SR_MOUNTS_H
#define SR_MOUNTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "child/child.h"
#include "saferun.h"

/* A host path bound into the sandbox over an existing dst (a dir or file
 * of the rootfs or of the working dir); read-only unless rw. */
typedef struct sr_bind {
	const char *src, *dst;
	bool rw;
} sr_bind;

typedef struct sr_fs_spec {
	const char *rootfs;  /* built profile root on the host, or NULL: host profile */
	const char *workdir; /* inside the sandbox */
	/* A host dir bound read-write as the working dir (a session's
	 * workspace), or NULL: the working dir is part of the tmpfs. */
	const char *workdir_host;
	char *const *writable;
	size_t n_writable;
	uint64_t tmpfs_bytes;
	uid_t uid; /* run-as user inside the sandbox */
	gid_t gid;
	const char *code;      /* written to WORKDIR/code_name; NULL: none (a kernel) */
	const char *code_name; /* NULL: "main.py" */
	size_t code_size;
	const sr_file *files;
	size_t n_files;
	/* /etc/resolv.conf's text (network egress with DNS), or NULL: the
	 * rootfs's own (the host profile has none) */
	const char *resolv_conf;
	/* /etc/hosts's text (network egress with names in its allow list), or
	 * NULL: the rootfs's own (the host profile: localhost only) */
	const char *hosts;
	const sr_bind *binds; /* after the writable dirs, in order */
	size_t n_binds;
} sr_fs_spec;

/* Where the profile lives: NULL rootfs for "host"; otherwise DIR/PROFILE,
 * checked to hold a python3. Caller frees *rootfs. */
int sr_mounts_find_profile(const char *dir, const char *profile, char **rootfs, sr_error *err);
/* Check a file name for the working dir: relative, no "..", no empty parts. */
int sr_mounts_check_name(const char *name, sr_error *err);
/* Every name checked, and none is main.py (the code's). */
int sr_mounts_check_files(const sr_file *files, size_t n, sr_error *err);
/* The same for code written to code_name (main.js, main.sh). */
int sr_mounts_check_files_for(const sr_file *files, size_t n, const char *code_name, sr_error *err);
int sr_mounts_plan(const sr_fs_spec *spec, sr_mount_plan *plan, sr_error *err);
void sr_mounts_plan_free(sr_mount_plan *plan);

#endif

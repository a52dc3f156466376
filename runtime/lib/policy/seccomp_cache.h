/* Compiled seccomp programs kept on disk, so a cold CLI run does not pay
 * libseccomp's ~3 ms compile for a policy it has seen before. */
#ifndef SR_SECCOMP_CACHE_H
#define SR_SECCOMP_CACHE_H

#include "saferun.h"
#include "seccomp_bpf.h"

#define SR_DEFAULT_CACHE_DIR "/var/cache/saferun"

/* Load the program for p from DIR/seccomp, or compile it and store it
 * there. The cache key is the complete rule set plus the libseccomp
 * version and arch, compared byte for byte on load, so a stale or
 * colliding entry is never used. A cache that cannot be read or written
 * only costs the compile. dir NULL: $SAFERUN_CACHE_DIR, else
 * SR_DEFAULT_CACHE_DIR; "off" compiles every time. */
int sr_seccomp_compile_cached(const sr_seccomp_policy *p, const char *dir, sr_bpf *out,
			      sr_error *err);

/* The cache's directory: dir, else $SAFERUN_CACHE_DIR, else
 * SR_DEFAULT_CACHE_DIR; NULL when that is "off". */
const char *sr_cache_dir(const char *dir);
/* Write parts to path (in sub, made 0700 under dir) through a temporary
 * file renamed into place: readers see all or nothing. Failures only
 * cost the next reader a miss. */
struct iovec;
void sr_cache_store(const char *dir, const char *sub, const char *path, const struct iovec *parts,
		    int n);

#endif

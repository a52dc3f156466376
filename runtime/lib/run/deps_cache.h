/* The cache of finished dependency layers, and trees on the host
 * (docs/dependencies.md, "How it works"): keys, entries locked while in
 * use, stored by copying a layer out of pip's workspace without following
 * anything, evicted least recently used first. */
#ifndef SR_DEPS_CACHE_H
#define SR_DEPS_CACHE_H

#include <stddef.h>
#include <sys/types.h>

#include "box/box.h"
#include "saferun.h"

struct sr_deps_layer {
	char *path;       /* the layer dir */
	int lock_fd;      /* a cache entry, shared-locked while in use, or -1 */
	sr_workspace *ws; /* a private layer: pip's workspace, removed after */
};

/* Append printf output to a growing string; -1 when out of memory. */
int sr_deps_append(char **s, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The whole key text of a layer (caller frees), and its hash (the entry's name). */
char *sr_deps_cache_key(const sr_deps_policy *d, const char *rootfs, const char *pip,
			char *const *reqs, size_t n);
void sr_deps_key_hash(const char *key, char out[33]);
/* A finished entry whose key matches, shared-locked; NULL: a miss. */
sr_deps_layer *sr_deps_cache_open(const char *entry, const char *key);
/* Copy src_layer into dir as entry (atomic rename), then open it. */
sr_deps_layer *sr_deps_cache_store(const char *dir, const char *entry, const char *key,
				   const char *src_layer, sr_error *err);
/* Keep at most max entries: the least recently used no one holds go. */
void sr_deps_cache_evict(const char *dir, unsigned max);
/* mkdir -p with exact modes. */
int sr_deps_make_dirs(const char *path, mode_t mode);
/* rm -r that never follows a symlink. */
void sr_deps_remove_tree(const char *path);
#endif

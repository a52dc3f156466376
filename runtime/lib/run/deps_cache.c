/* The cache of finished dependency layers: see deps_cache.h. */
#include "deps_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

#define TREE_DEPTH  64
#define KEY_VERSION "saferun-deps 1"

/* ---- trees on the host: copy out of a workspace, remove ----------------------- */

static int copy_file(int sdir, int ddir, const char *name, mode_t mode)
{
	cleanup_close int in = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (in < 0)
		return -errno;
	cleanup_close int out = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	/* exact modes, whatever the caller's umask: sandboxes read these */
	int rc = out < 0 || fchmod(out, mode) < 0 ? -errno : 0;
	char buf[65536];
	for (ssize_t got; rc == 0 && (got = read(in, buf, sizeof buf)) != 0;)
		rc = got < 0 ? -errno : sr_write_all(out, buf, (size_t)got) < 0 ? -errno : 0;
	return rc;
}

/* Dirs, regular files and symlinks of sdir into ddir, owned by root,
 * 0755/0644 (0755 for an executable file); anything else is skipped. */
static int copy_tree(int sdir, int ddir, int depth)
{
	if (depth > TREE_DEPTH)
		return -ELOOP;
	int fd = dup(sdir);
	cleanup_closedir DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	int rc = 0;
	for (struct dirent *e; rc == 0 && (e = readdir(d));) {
		struct stat st;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (fstatat(sdir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = -errno;
		} else if (S_ISDIR(st.st_mode)) {
			cleanup_close int s2 = -1, d2 = -1;
			if (mkdirat(ddir, e->d_name, 0755) < 0 ||
			    (s2 = openat(sdir, e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
			    (d2 = openat(ddir, e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
				rc = -errno;
			else if (fchmod(d2, 0755) < 0)
				rc = -errno;
			else
				rc = copy_tree(s2, d2, depth + 1);
		} else if (S_ISREG(st.st_mode)) {
			rc = copy_file(sdir, ddir, e->d_name, st.st_mode & 0111 ? 0755 : 0644);
		} else if (S_ISLNK(st.st_mode)) {
			char target[4096];
			ssize_t n = readlinkat(sdir, e->d_name, target, sizeof target - 1);
			if (n < 0)
				rc = -errno;
			else if ((target[n] = '\0'), symlinkat(target, ddir, e->d_name) < 0)
				rc = -errno;
		}
	}
	return rc;
}

static void remove_tree_at(int dir, const char *name, int depth)
{
	int fd = depth > TREE_DEPTH
		     ? -1
		     : openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (d) {
		for (struct dirent *e; (e = readdir(d));)
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
			    unlinkat(fd, e->d_name, 0) < 0 && errno == EISDIR)
				remove_tree_at(fd, e->d_name, depth + 1);
		closedir(d);
	} else if (fd >= 0) {
		close(fd);
	}
	unlinkat(dir, name, AT_REMOVEDIR);
}

void sr_deps_remove_tree(const char *path)
{
	remove_tree_at(AT_FDCWD, path, 0);
}

/* ---- the cache ----------------------------------------------------------------- */

/* Two FNV-1a 64 hashes with different bases: the entry's name. The entry
 * also holds the whole key text, compared on every hit. */
void sr_deps_key_hash(const char *s, char out[33])
{
	uint64_t a = 14695981039346656037ull, b = 0x6c62272e07bb0142ull;
	for (; *s; s++) {
		a = (a ^ (unsigned char)*s) * 1099511628211ull;
		b = (b ^ (unsigned char)*s) * 1099511628211ull;
		b ^= b >> 29;
	}
	snprintf(out, 33, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
}

int sr_deps_append(char **s, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int sr_deps_append(char **s, size_t *len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *g = n < 0 ? NULL : realloc(*s, *len + (size_t)n + 1);
	if (!g)
		return -1;
	va_start(ap, fmt);
	vsnprintf(g + *len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	*s = g;
	*len += (size_t)n;
	return 0;
}

static int cmp_dirent_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Everything a layer depends on: the profile's tree (its profile.json),
 * pip, the wheelhouse's files (name, size, mtime), the index's URL, the
 * requirements. What an index serves is not in the key: an entry built
 * from an index stays until evicted (docs/dependencies.md). */
char *sr_deps_cache_key(const sr_deps_policy *d, const char *rootfs, const char *pip,
			char *const *reqs, size_t n)
{
	cleanup_free char *s = NULL;
	char path[4096];
	size_t len = 0;
	struct stat st = { 0 };
	snprintf(path, sizeof path, "%s/etc/saferun/profile.json", rootfs);
	stat(path, &st);
	int bad = sr_deps_append(&s, &len, "%s\nrootfs %s %lld.%09ld\npip %s\n", KEY_VERSION,
				 *rootfs ? rootfs : "host", (long long)st.st_mtim.tv_sec,
				 st.st_mtim.tv_nsec, pip);
	if (d->index_url)
		bad |= sr_deps_append(&s, &len, "index %s\n", d->index_url);
	if (d->wheelhouse) {
		bad |= sr_deps_append(&s, &len, "wheelhouse %s\n", d->wheelhouse);
		struct dirent **ents = NULL;
		int k = scandir(d->wheelhouse, &ents, NULL, cmp_dirent_name);
		for (int i = 0; i < k; i++) {
			snprintf(path, sizeof path, "%s/%s", d->wheelhouse, ents[i]->d_name);
			if (ents[i]->d_name[0] != '.' && stat(path, &st) == 0)
				bad |= sr_deps_append(&s, &len, "file %s %lld %lld.%09ld\n",
						      ents[i]->d_name, (long long)st.st_size,
						      (long long)st.st_mtim.tv_sec,
						      st.st_mtim.tv_nsec);
			free(ents[i]);
		}
		free(ents);
	}
	for (size_t i = 0; i < n; i++)
		bad |= sr_deps_append(&s, &len, "req %s\n", reqs[i]);
	return bad ? NULL : sr_take_ptr(&s);
}

int sr_deps_make_dirs(const char *path, mode_t mode)
{
	char buf[4096];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || !*p) {
			char c = *p;
			*p = '\0';
			if (mkdir(buf, mode) == 0 ? chmod(buf, mode) < 0 : errno != EEXIST)
				return -1;
			if (!(*p = c))
				return 0;
		}
	}
}

/* A finished entry whose key matches, shared-locked: the layer, or NULL. */
sr_deps_layer *sr_deps_cache_open(const char *entry, const char *key)
{
	cleanup_close int fd = open(entry, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat a, b;
	char kpath[4200];
	cleanup_free char *text = NULL;
	snprintf(kpath, sizeof kpath, "%s/key", entry);
	size_t klen = strlen(key);
	bool ok = flock(fd, LOCK_SH) == 0 && fstat(fd, &a) == 0 && stat(entry, &b) == 0 &&
		  a.st_ino == b.st_ino && a.st_dev == b.st_dev && (text = malloc(klen + 2)) &&
		  sr_read_file(kpath, text, klen + 2) == (ssize_t)klen &&
		  memcmp(text, key, klen) == 0;
	cleanup_free sr_deps_layer *l = ok ? calloc(1, sizeof *l) : NULL;
	if (!l || asprintf(&l->path, "%s/layer", entry) < 0)
		return NULL;
	futimens(fd, NULL); /* last used: eviction removes the oldest */
	l->lock_fd = sr_take_fd(&fd);
	return sr_take_ptr(&l);
}

struct entry_age {
	char name[64];
	struct timespec used;
};

static int cmp_age(const void *a, const void *b)
{
	const struct timespec *x = &((const struct entry_age *)a)->used,
			      *y = &((const struct entry_age *)b)->used;
	return x->tv_sec != y->tv_sec ? (x->tv_sec < y->tv_sec ? -1 : 1)
				      : (x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec);
}

/* Keep at most max entries: the least recently used that no run holds go. */
void sr_deps_cache_evict(const char *dir, unsigned max)
{
	cleanup_free struct entry_age *v = NULL;
	size_t n = 0, cap = 0;
	cleanup_closedir DIR *d = opendir(dir);
	for (struct dirent *e; d && (e = readdir(d));) {
		struct stat st;
		if (e->d_name[0] == '.' || strlen(e->d_name) >= 64 ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		if (n == cap) {
			struct entry_age *g = realloc(v, (cap = cap ? cap * 2 : 32) * sizeof *v);
			if (!g)
				break;
			v = g;
		}
		snprintf(v[n].name, sizeof v[n].name, "%s", e->d_name);
		v[n++].used = st.st_mtim;
	}
	qsort(v, n, sizeof *v, cmp_age);
	for (size_t i = 0; n - i > max && i < n; i++) {
		char path[4200], trash[4200];
		snprintf(path, sizeof path, "%s/%s", dir, v[i].name);
		cleanup_close int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		char hex[17] = "0";
		sr_random_hex(hex, 8);
		snprintf(trash, sizeof trash, "%s/.trash-%s", dir, hex);
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 && rename(path, trash) == 0)
			sr_deps_remove_tree(trash);
	}
}

/* The install's layer and key into tmp, renamed to entry: 0, or -1 with
 * err filled (the caller removes tmp). */
static int store_entry(const char *tmp, const char *entry, const char *key, const char *src_layer,
		       sr_error *err)
{
	cleanup_close int td = -1, ld = -1, sd = -1, kfd = -1;
	int rc;
	if (mkdir(tmp, 0755) < 0 ||
	    (td = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    mkdirat(td, "layer", 0755) < 0 ||
	    (ld = openat(td, "layer", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    fchmod(td, 0755) < 0 || fchmod(ld, 0755) < 0 ||
	    (sd = open(src_layer, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return sr_fail(err, errno, "create cache entry %s", tmp);
	if ((rc = copy_tree(sd, ld, 0)) < 0)
		return sr_fail(err, -rc, "copy the installed packages into %s", tmp);
	if ((kfd = openat(td, "key", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0 ||
	    sr_write_all(kfd, key, strlen(key)) < 0)
		return sr_fail(err, errno, "write %s/key", tmp);
	if (rename(tmp, entry) < 0 && errno != EEXIST && errno != ENOTEMPTY)
		return sr_fail(err, errno, "rename %s to %s", tmp, entry);
	return 0; /* ours, or an identical one another install stored first */
}

/* Copy the finished install into the cache under key; the entry, locked. */
sr_deps_layer *sr_deps_cache_store(const char *dir, const char *entry, const char *key,
				   const char *src_layer, sr_error *err)
{
	char tmp[4200], hex[17] = "0";
	sr_random_hex(hex, 8);
	snprintf(tmp, sizeof tmp, "%s/.tmp-%s", dir, hex);
	int rc = store_entry(tmp, entry, key, src_layer, err);
	sr_deps_remove_tree(tmp); /* gone already when the rename was ours */
	if (rc < 0)
		return NULL;
	sr_deps_layer *l = sr_deps_cache_open(entry, key);
	if (!l)
		sr_fail(err, EIO, "open cache entry %s", entry);
	return l;
}

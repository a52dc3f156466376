#include "packages.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "saferun.h"

#define META_MAX_BYTES (64u << 10)
#define META_MAX_LINES 50
#define MAX_SITE_DIRS  8

/* Where a profile's python3 finds distributions, in its sys.path order
 * (the first of two same-named ones is the one imported), and a
 * signature of those dirs and their parents: it changes when an entry is
 * added or removed, or a dir is replaced. */
struct sites {
	char dir[MAX_SITE_DIRS][PATH_MAX];
	size_t n;
	uint64_t sig;
};

/* One profile's list, valid while its sites keep the signature. */
struct cached {
	char *root;
	bool filled;
	uint64_t sig;
	srd_package *pkgs;
	size_t n;
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cached *cache;
static size_t n_cache;

struct found {
	srd_package pkg;
	char key[128]; /* the PEP 503 name: "pyyaml" for "PyYAML" */
	size_t order;
};

struct scan {
	struct found *items;
	size_t n, cap;
	char *buf; /* META_MAX_BYTES + 1 */
};

static uint64_t mix(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull; /* FNV-1a */
	return h;
}

static uint64_t mix_dir(uint64_t h, const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return mix(h, "-", 1);
	/* nlink too: mtime ticks are coarse, a dist-info dir counts in it */
	uint64_t v[5] = { st.st_dev, st.st_ino, st.st_nlink, (uint64_t)st.st_mtim.tv_sec,
			  (uint64_t)st.st_mtim.tv_nsec };
	return mix(h, v, sizeof v);
}

static int is_python_dir(const struct dirent *d)
{
	const char *v = d->d_name + 8;
	return strncmp(d->d_name, "python3.", 8) == 0 && *v && strspn(v, "0123456789") == strlen(v);
}

/* lib/python3.X/dist-packages for each python3.X in lib. */
static void add_versioned(struct sites *s, const char *lib)
{
	struct dirent **names;
	int n = scandir(lib, &names, is_python_dir, alphasort);
	s->sig = mix_dir(s->sig, lib);
	for (int i = 0; i < n; i++) {
		if (s->n < MAX_SITE_DIRS)
			snprintf(s->dir[s->n++], sizeof s->dir[0], "%s/%s/dist-packages", lib,
				 names[i]->d_name);
		free(names[i]);
	}
	if (n >= 0)
		free(names);
}

/* Debian's python3 imports from /usr/local/lib/python3.X/dist-packages,
 * /usr/lib/python3/dist-packages and /usr/lib/python3.X/dist-packages;
 * /usr/lib/python3.X itself is the stdlib, not distributions. */
static void find_sites(const char *root, struct sites *s)
{
	char lib[PATH_MAX];
	snprintf(lib, sizeof lib, "%s/usr/local/lib", root);
	add_versioned(s, lib);
	snprintf(s->dir[s->n++], sizeof s->dir[0], "%s/usr/lib/python3/dist-packages", root);
	snprintf(lib, sizeof lib, "%s/usr/lib", root);
	add_versioned(s, lib);
	for (size_t i = 0; i < s->n; i++)
		s->sig = mix_dir(s->sig, s->dir[i]);
}

/* Only what is valid in the JSON and in a name: a metadata file is
 * data from the rootfs, not trusted text. */
static bool valid_name(const char *s)
{
	size_t len = strlen(s);
	return len &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
		   len;
}

static bool valid_version(const char *s)
{
	for (const char *p = s; *p; p++)
		if (*p <= ' ' || *p > '~')
			return false;
	return *s != '\0';
}

static void set_field(char *dst, size_t size, const char *value, bool (*valid)(const char *))
{
	value += strspn(value, " \t");
	size_t len = strlen(value);
	while (len && (value[len - 1] == ' ' || value[len - 1] == '\t'))
		len--;
	char tmp[256];
	if (dst[0] || len == 0 || len >= size || len >= sizeof tmp)
		return;
	memcpy(tmp, value, len);
	tmp[len] = '\0';
	if (valid(tmp))
		memcpy(dst, tmp, len + 1);
}

/* Name and Version from the header block of a METADATA or PKG-INFO file
 * (RFC 822 style: the first lines, up to the first blank one). */
static void parse_headers(char *text, srd_package *pkg)
{
	char *line = text, *next;
	for (int i = 0; i < META_MAX_LINES && line; i++, line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		line[strcspn(line, "\r")] = '\0';
		if (!*line)
			break;
		if (strncasecmp(line, "Name:", 5) == 0)
			set_field(pkg->name, sizeof pkg->name, line + 5, valid_name);
		else if (strncasecmp(line, "Version:", 8) == 0)
			set_field(pkg->version, sizeof pkg->version, line + 8, valid_version);
	}
}

/* The first bytes of entry (an egg-info file) or of entry/inner. Not a
 * regular file (a fifo, a symlink): nothing. */
static void read_meta(int dirfd, const char *entry, const char *inner, char *buf, srd_package *pkg)
{
	int fl = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
	int fd = openat(dirfd, entry, fl);
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		int in = openat(fd, inner, fl);
		close(fd);
		fd = in;
	}
	if (fd < 0)
		return;
	size_t len = 0;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		for (ssize_t n;
		     len < META_MAX_BYTES && (n = read(fd, buf + len, META_MAX_BYTES - len)) > 0;)
			len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	parse_headers(buf, pkg);
}

/* When the metadata does not say: "numpy-1.24.2.egg-info",
 * "crit-3.17.1-py3.11.egg-info", "attrs-22.2.0.dist-info". */
static void from_entry_name(const char *entry, size_t stem_len, srd_package *pkg)
{
	char stem[256], *version;
	if (stem_len >= sizeof stem)
		return;
	memcpy(stem, entry, stem_len);
	stem[stem_len] = '\0';
	version = strchr(stem, '-');
	if (version) {
		*version++ = '\0';
		version[strcspn(version, "-")] = '\0';
		set_field(pkg->version, sizeof pkg->version, version, valid_version);
	}
	set_field(pkg->name, sizeof pkg->name, stem, valid_name);
}

/* PEP 503: lower case, every run of '-', '_', '.' one '-'. */
static void normalize(const char *name, char *key, size_t size)
{
	size_t n = 0;
	for (const char *p = name; *p && n + 1 < size; p++) {
		bool sep = strchr("-_.", *p) != NULL;
		if (sep && n && key[n - 1] == '-')
			continue;
		key[n++] = sep ? '-' : (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
	}
	key[n] = '\0';
}

static int add_found(struct scan *sc, const srd_package *pkg)
{
	if (sc->n == sc->cap) {
		size_t cap = sc->cap ? sc->cap * 2 : 64;
		struct found *grown = realloc(sc->items, cap * sizeof *grown);
		if (!grown)
			return -1;
		sc->items = grown;
		sc->cap = cap;
	}
	struct found *f = &sc->items[sc->n];
	f->pkg = *pkg;
	normalize(pkg->name, f->key, sizeof f->key);
	f->order = sc->n++;
	return 0;
}

/* "name-1.0.dist-info" -> "METADATA" (stem 8 bytes), "*.egg-info" ->
 * "PKG-INFO"; NULL for anything else. */
static const char *metadata_file(const char *entry, size_t *stem)
{
	size_t len = strlen(entry);
	if (len > 10 && strcmp(entry + len - 10, ".dist-info") == 0)
		return *stem = len - 10, "METADATA";
	if (len > 9 && strcmp(entry + len - 9, ".egg-info") == 0)
		return *stem = len - 9, "PKG-INFO";
	return NULL;
}

static int is_metadata(const struct dirent *d)
{
	size_t stem;
	return metadata_file(d->d_name, &stem) != NULL;
}

/* In name order: of two same-named entries in one dir, the same one
 * always wins. */
static int scan_dir(const char *dir, struct scan *sc, srd_ferr *e)
{
	struct dirent **names;
	int n = scandir(dir, &names, is_metadata, alphasort);
	if (n < 0 && (errno == ENOENT || errno == ENOTDIR))
		return 0;
	int dfd = n < 0 ? -1 : open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = dfd < 0
		     ? srd_fail(e, 500, NULL, "list the packages in %s: %s", dir, strerror(errno))
		     : 0;
	for (int i = 0; i < n; i++) {
		size_t stem = 0;
		const char *inner = metadata_file(names[i]->d_name, &stem);
		srd_package pkg = { 0 };
		if (rc == 0) {
			read_meta(dfd, names[i]->d_name, inner, sc->buf, &pkg);
			from_entry_name(names[i]->d_name, stem, &pkg);
		}
		if (rc == 0 && pkg.name[0] && add_found(sc, &pkg))
			rc = srd_fail(e, 500, NULL, "list the packages in %s: out of memory", dir);
		free(names[i]);
	}
	if (n >= 0)
		free(names);
	if (dfd >= 0)
		close(dfd);
	return rc;
}

static int by_key_then_order(const void *a, const void *b)
{
	const struct found *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	return c ? c : (x->order > y->order) - (x->order < y->order);
}

/* Sorted, the first of each name kept. */
static int collect(struct scan *sc, srd_package **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (!sc->n)
		return 0;
	qsort(sc->items, sc->n, sizeof *sc->items, by_key_then_order);
	if (!(*out = malloc(sc->n * sizeof **out)))
		return -1;
	for (size_t i = 0; i < sc->n; i++)
		if (i == 0 || strcmp(sc->items[i].key, sc->items[i - 1].key) != 0)
			(*out)[(*n)++] = sc->items[i].pkg;
	return 0;
}

static int read_sites(const struct sites *s, srd_package **out, size_t *n, srd_ferr *e)
{
	struct scan sc = { .buf = malloc(META_MAX_BYTES + 1) };
	int rc = sc.buf ? 0 : srd_fail(e, 500, NULL, "list the packages: out of memory");
	for (size_t i = 0; i < s->n && rc == 0; i++)
		rc = scan_dir(s->dir[i], &sc, e);
	if (rc == 0 && collect(&sc, out, n))
		rc = srd_fail(e, 500, NULL, "list the packages: out of memory");
	free(sc.items);
	free(sc.buf);
	return rc;
}

/* "host" is the host's own /usr (root ""), any other profile a dir below
 * rootfs_dir, as sr_mounts_find_profile finds it for a run. */
static int profile_root(const char *rootfs_dir, const char *profile, char *root, size_t size,
			srd_ferr *e)
{
	if (strcmp(profile, "host") == 0) {
		root[0] = '\0';
		return 0;
	}
	snprintf(root, size, "%s/%s", rootfs_dir ? rootfs_dir : SR_DEFAULT_ROOTFS_DIR, profile);
	struct stat st;
	if (!profile[0] || strchr(profile, '/') || profile[0] == '.' || stat(root, &st) < 0 ||
	    !S_ISDIR(st.st_mode))
		return srd_fail(e, 500, NULL,
				"rootfs profile \"%s\" is not built at %s (build it with "
				"saferun rootfs build %s)",
				profile, root, profile);
	return 0;
}

static struct cached *find_cached(const char *root)
{
	for (size_t i = 0; i < n_cache; i++)
		if (strcmp(cache[i].root, root) == 0)
			return &cache[i];
	struct cached *grown = realloc(cache, (n_cache + 1) * sizeof *grown);
	char *copy = strdup(root);
	if (!grown || !copy) {
		free(copy);
		cache = grown ? grown : cache;
		return NULL;
	}
	cache = grown;
	cache[n_cache] = (struct cached){ .root = copy };
	return &cache[n_cache++];
}

/* Under the lock: read the sites again when they changed. */
static int refresh(struct cached *c, const struct sites *s, srd_ferr *e)
{
	if (c->filled && c->sig == s->sig)
		return 0;
	srd_package *pkgs;
	size_t n;
	if (read_sites(s, &pkgs, &n, e))
		return -1;
	free(c->pkgs);
	c->pkgs = pkgs;
	c->n = n;
	c->sig = s->sig;
	c->filled = true;
	return 0;
}

int srd_packages_list(const char *rootfs_dir, const char *profile, srd_package **out, size_t *n,
		      srd_ferr *e)
{
	char root[PATH_MAX];
	*out = NULL;
	*n = 0;
	if (profile_root(rootfs_dir, profile, root, sizeof root, e))
		return -1;
	struct sites *s = calloc(1, sizeof *s);
	if (!s)
		return srd_fail(e, 500, NULL, "list the packages: out of memory");
	s->sig = 0xcbf29ce484222325ull;
	find_sites(root, s);
	pthread_mutex_lock(&cache_lock);
	struct cached *c = find_cached(root);
	int rc = c ? refresh(c, s, e) : srd_fail(e, 500, NULL, "list the packages: out of memory");
	if (rc == 0 && c->n && !(*out = malloc(c->n * sizeof **out)))
		rc = srd_fail(e, 500, NULL, "list the packages: out of memory");
	if (rc == 0 && c->n) {
		memcpy(*out, c->pkgs, c->n * sizeof **out);
		*n = c->n;
	}
	pthread_mutex_unlock(&cache_lock);
	free(s);
	return rc;
}

cJSON *srd_packages_json(srd_ctx *ctx, bool names_only, srd_ferr *e)
{
	sr_policy *p = NULL;
	srd_package *list = NULL;
	size_t n = 0;
	if (srd_policies_get(ctx->policies, ctx->cfg->default_policy, NULL, &p, e) ||
	    srd_packages_list(ctx->cfg->rootfs_dir, p->profile, &list, &n, e)) {
		sr_policy_free(p);
		return NULL;
	}
	cJSON *j = cJSON_CreateObject();
	if (!names_only) {
		cJSON_AddStringToObject(j, "profile", p->profile);
		cJSON *langs = cJSON_AddArrayToObject(j, "languages");
		for (sr_language l = SR_LANG_PYTHON; l <= SR_LANG_BASH; l++)
			if (sr_profile_has_language(ctx->cfg->rootfs_dir, p->profile, l))
				cJSON_AddItemToArray(langs,
						     cJSON_CreateString(sr_language_name(l)));
	}
	cJSON *arr = cJSON_AddArrayToObject(j, "packages");
	for (size_t i = 0; i < n; i++) {
		cJSON *item = cJSON_CreateString(list[i].name);
		if (!names_only) {
			cJSON *name = item;
			item = cJSON_CreateObject();
			cJSON_AddItemToObject(item, "name", name);
			cJSON_AddStringToObject(item, "version", list[i].version);
		}
		cJSON_AddItemToArray(arr, item);
	}
	cJSON_AddNumberToObject(j, "count", (double)n);
	free(list);
	sr_policy_free(p);
	return j;
}

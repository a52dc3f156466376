#include "policies.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define POLICY_FILE_MAX (1u << 20)
#define NAME_MAX_LEN    64

/* A policy is loaded once, when its dir is read; each run gets a copy
 * (sr_policy_dup: a fraction of parsing it again with the defaults). */
struct entry {
	char *name;
	sr_policy *policy;
};

struct set {
	struct entry *e;
	size_t n;
};

struct srd_policies {
	pthread_mutex_t lock;
	struct set *cur;
	char *dir;
	bool required;
};

static bool valid_name(const char *s, size_t len)
{
	if (len == 0 || len > NAME_MAX_LEN || s[0] == '.' || s[0] == '-')
		return false;
	for (size_t i = 0; i < len; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-",
			    s[i]))
			return false;
	return true;
}

static void set_free(struct set *s)
{
	for (size_t i = 0; s && i < s->n; i++) {
		free(s->e[i].name);
		sr_policy_free(s->e[i].policy);
	}
	if (s)
		free(s->e);
	free(s);
}

/* Takes p (freed on failure); its name becomes the policy's name, as
 * runs and logs know it. */
static int add(struct set *s, const char *name, size_t name_len, sr_policy *p)
{
	struct entry *grown = realloc(s->e, (s->n + 1) * sizeof *grown);
	char *n = strndup(name, name_len);
	if (!grown || !n || !p) {
		s->e = grown ? grown : s->e;
		free(n);
		sr_policy_free(p);
		return -1;
	}
	s->e = grown;
	free(p->name);
	p->name = n;
	s->e[s->n] = (struct entry){ strdup(n), p };
	if (!s->e[s->n].name) {
		sr_policy_free(p);
		return -1;
	}
	s->n++;
	return 0;
}

static struct entry *find(struct set *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->e[i].name, name) == 0)
			return &s->e[i];
	return NULL;
}

static int read_policy(int dirfd, const char *file, char **text, size_t *len)
{
	int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) < 0)
		rc = -errno;
	else if (!S_ISREG(st.st_mode))
		rc = -EINVAL;
	else if (st.st_size > POLICY_FILE_MAX)
		rc = -EFBIG;
	if (rc) {
		close(fd);
		return rc;
	}
	*text = malloc((size_t)st.st_size + 1);
	ssize_t n = *text ? read(fd, *text, (size_t)st.st_size) : -1;
	close(fd);
	if (n != st.st_size) {
		free(*text);
		return -EIO;
	}
	(*text)[n] = '\0';
	*len = (size_t)n;
	return 0;
}

/* Validate one file by loading it the way a run will. */
static int load_one(struct set *s, const char *dir, int dirfd, const char *file, char *msg,
		    size_t size)
{
	size_t flen = strlen(file);
	char *text = NULL, path[4096];
	size_t len = 0;
	snprintf(path, sizeof path, "%s/%s", dir, file);
	if (!valid_name(file, flen - 5)) {
		snprintf(msg, size,
			 "policy %s: the name must be letters, digits, '_', '.', '-' "
			 "(at most %d)",
			 path, NAME_MAX_LEN);
		return -1;
	}
	int rc = read_policy(dirfd, file, &text, &len);
	if (rc < 0) {
		snprintf(msg, size, "policy %s: %s", path, strerror(-rc));
		return -1;
	}
	sr_policy *p = NULL;
	sr_error err = { 0 };
	rc = sr_policy_load_json(text, len, path, &p, &err);
	free(text);
	if (rc) {
		snprintf(msg, size, "%s", err.msg);
		return -1;
	}
	if (add(s, file, flen - 5, p)) {
		snprintf(msg, size, "policy %s: out of memory", path);
		return -1;
	}
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

static int load_set(const char *dir, bool required, struct set **out, char *msg, size_t size)
{
	struct set *s = calloc(1, sizeof *s);
	if (!s)
		return snprintf(msg, size, "policies: out of memory"), -1;
	int rc = 0;
	DIR *d = opendir(dir);
	if (!d && (errno != ENOENT || required))
		rc = (snprintf(msg, size, "policies dir %s: %s", dir, strerror(errno)), -1);
	for (struct dirent *e; rc == 0 && d && (e = readdir(d));) {
		size_t n = strlen(e->d_name);
		if (e->d_name[0] != '.' && n > 5 && strcmp(e->d_name + n - 5, ".json") == 0)
			rc = load_one(s, dir, dirfd(d), e->d_name, msg, size);
	}
	if (d)
		closedir(d);
	if (rc == 0 && !find(s, "default")) {
		sr_policy *p = NULL;
		sr_error err = { 0 };
		if (sr_policy_default(&p, &err))
			rc = (snprintf(msg, size, "the built-in default policy: %s", err.msg), -1);
		else if (add(s, "default", 7, p))
			rc = (snprintf(msg, size, "policies: out of memory"), -1);
	}
	if (rc) {
		set_free(s);
		return -1;
	}
	qsort(s->e, s->n, sizeof *s->e, by_name);
	*out = s;
	return (int)s->n;
}

int srd_policies_open(const char *dir, bool required, srd_policies **out, char *msg, size_t size)
{
	srd_policies *reg = calloc(1, sizeof *reg);
	if (!reg || !(reg->dir = strdup(dir)) || pthread_mutex_init(&reg->lock, NULL)) {
		if (reg)
			free(reg->dir);
		free(reg);
		return snprintf(msg, size, "policies: out of memory"), -1;
	}
	reg->required = required;
	if (load_set(dir, required, &reg->cur, msg, size) < 0) {
		srd_policies_close(reg);
		return -1;
	}
	*out = reg;
	return 0;
}

int srd_policies_reload(srd_policies *reg, char *msg, size_t size)
{
	struct set *fresh, *old;
	int n = load_set(reg->dir, reg->required, &fresh, msg, size);
	if (n < 0)
		return -1;
	pthread_mutex_lock(&reg->lock);
	old = reg->cur;
	reg->cur = fresh;
	pthread_mutex_unlock(&reg->lock);
	set_free(old);
	return n;
}

void srd_policies_close(srd_policies *reg)
{
	if (!reg)
		return;
	set_free(reg->cur);
	pthread_mutex_destroy(&reg->lock);
	free(reg->dir);
	free(reg);
}

bool srd_policies_has(srd_policies *reg, const char *name)
{
	pthread_mutex_lock(&reg->lock);
	bool found = find(reg->cur, name) != NULL;
	pthread_mutex_unlock(&reg->lock);
	return found;
}

int srd_policies_get(srd_policies *reg, const char *name, const char *field, sr_policy **out,
		     srd_ferr *e)
{
	char known[512] = "";
	bool found = false;
	pthread_mutex_lock(&reg->lock);
	struct entry *en = find(reg->cur, name);
	if (en) {
		found = true;
		*out = sr_policy_dup(en->policy);
	}
	for (size_t i = 0; !found && i < reg->cur->n; i++)
		snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
			 reg->cur->e[i].name);
	pthread_mutex_unlock(&reg->lock);
	if (!found)
		return srd_fail(e, 400, field, "unknown policy \"%s\" (known: %s)", name, known);
	if (!*out)
		return srd_fail(e, 500, NULL, "out of memory loading policy %s", name);
	return 0;
}

cJSON *srd_policies_names(srd_policies *reg)
{
	cJSON *arr = cJSON_CreateArray();
	pthread_mutex_lock(&reg->lock);
	for (size_t i = 0; i < reg->cur->n; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(reg->cur->e[i].name));
	pthread_mutex_unlock(&reg->lock);
	return arr;
}

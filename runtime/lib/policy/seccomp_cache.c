#include "seccomp_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/base.h"

/* Bump when the compiler's attributes or output change. */
#define CACHE_FORMAT 1
#define CACHE_MAGIC  "saferun-bpf\n"

/* The key: every input of the compile, in a fixed textual form. */
static char *cache_key(const sr_seccomp_policy *p, size_t *len)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	if (!f)
		return NULL;
	const struct scmp_version *v = seccomp_version();
	fprintf(f, "format %d libseccomp %u.%u.%u arch %u\ndefault %d %u\n", CACHE_FORMAT, v->major,
		v->minor, v->micro, seccomp_arch_native(), (int)p->default_action.kind,
		p->default_action.errno_ret);
	for (size_t i = 0; i < p->n_rules; i++) {
		const sr_seccomp_rule *r = &p->rules[i];
		fprintf(f, "rule %d %u", (int)r->action.kind, r->action.errno_ret);
		for (size_t a = 0; a < r->n_args; a++)
			fprintf(f, " arg %u %d %llu %llu", r->args[a].index, (int)r->args[a].op,
				(unsigned long long)r->args[a].value,
				(unsigned long long)r->args[a].value_two);
		for (size_t n = 0; n < r->n_names; n++)
			fprintf(f, " %s", r->names[n]);
		fputc('\n', f);
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	*len = size;
	return buf;
}

/* File: magic, key length, key, program length (insns), program. */
static int load(const char *path, const char *key, size_t key_len, sr_bpf *out)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	char magic[sizeof CACHE_MAGIC - 1];
	cleanup_free char *stored = malloc(key_len);
	uint64_t klen = 0;
	uint16_t n = 0;
	if (!stored || sr_read_all(fd, magic, sizeof magic) ||
	    memcmp(magic, CACHE_MAGIC, sizeof magic) || sr_read_all(fd, &klen, sizeof klen) ||
	    klen != key_len || sr_read_all(fd, stored, key_len) || memcmp(stored, key, key_len) ||
	    sr_read_all(fd, &n, sizeof n) || n == 0 || n > BPF_MAXINSNS)
		return -1;
	out->insns = malloc(n * sizeof *out->insns);
	if (!out->insns || sr_read_all(fd, out->insns, n * sizeof *out->insns)) {
		sr_bpf_free(out);
		return -1;
	}
	out->len = n;
	return 0;
}

const char *sr_cache_dir(const char *dir)
{
	const char *env = getenv("SAFERUN_CACHE_DIR");
	dir = dir ? dir : env && *env ? env : SR_DEFAULT_CACHE_DIR;
	return strcmp(dir, "off") == 0 ? NULL : dir;
}

void sr_cache_store(const char *dir, const char *sub, const char *path, const struct iovec *parts,
		    int n)
{
	char tmp[PATH_MAX];
	/* Unique per thread: a daemon stores from several at once. */
	snprintf(tmp, sizeof tmp, "%s.%d.%d.tmp", path, getpid(), gettid());
	mkdir(dir, 0755);
	if (mkdir(sub, 0700) < 0 && errno != EEXIST)
		return;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return;
	bool ok = true;
	for (int i = 0; ok && i < n; i++)
		ok = sr_write_all(fd, parts[i].iov_base, parts[i].iov_len) == 0;
	close(fd);
	if (!ok || rename(tmp, path) < 0)
		unlink(tmp);
}

int sr_seccomp_compile_cached(const sr_seccomp_policy *p, const char *dir, sr_bpf *out,
			      sr_error *err)
{
	if (!(dir = sr_cache_dir(dir)))
		return sr_seccomp_compile(p, out, err);
	size_t key_len;
	cleanup_free char *key = cache_key(p, &key_len);
	char sub[PATH_MAX], path[PATH_MAX];
	if (!key)
		return sr_seccomp_compile(p, out, err);
	snprintf(sub, sizeof sub, "%s/seccomp", dir);
	snprintf(path, sizeof path, "%s/%016llx.bpf", sub,
		 (unsigned long long)sr_fnv1a(key, key_len));
	int rc = 0;
	if (load(path, key, key_len, out) < 0) {
		rc = sr_seccomp_compile(p, out, err);
		if (rc == 0) {
			uint64_t klen = key_len;
			uint16_t n = out->len;
			struct iovec parts[] = {
				{ CACHE_MAGIC, sizeof CACHE_MAGIC - 1 },
				{ &klen, sizeof klen },
				{ key, key_len },
				{ &n, sizeof n },
				{ out->insns, n * sizeof *out->insns },
			};
			sr_cache_store(dir, sub, path, parts, 5);
		}
	}
	return rc;
}

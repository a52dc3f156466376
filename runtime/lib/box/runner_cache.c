#include "runner_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/base.h"
#include "policy/policy.h"

extern const unsigned char sr_embedded_runner[];
extern const size_t sr_embedded_runner_len;

/* Bump when the file layout or the code's format (see the stub) changes. */
#define CACHE_FORMAT 1
#define CACHE_MAGIC  "saferun-runner\n"
#define MAX_CODE     (4u << 20)
#define STR_(x)      #x
#define STR(x)       STR_(x)

/* The python a sandbox of this rootfs runs: /usr/bin/python3 resolved
 * inside the tree (an imported rootfs's symlinks never reach the host). */
static int python_identity(const char *rootfs, struct stat *st)
{
	cleanup_close int root =
	    open(rootfs && *rootfs ? rootfs : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -1;
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT };
	cleanup_close int fd = (int)syscall(SYS_openat2, root, "usr/bin/python3", &how, sizeof how);
	return fd < 0 ? -1 : fstat(fd, st);
}

/* The key: the runner's whole source and everything that identifies the
 * interpreter that compiled it, so an entry is never used by another
 * python or for another runner. */
static char *cache_key(const char *rootfs, size_t *len)
{
	struct stat st;
	if (python_identity(rootfs, &st) < 0)
		return NULL;
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	if (!f)
		return NULL;
	fprintf(f,
		"format %d\nrootfs %s\npython %llu %llu %lld %lld.%09ld %lld.%09ld\nrunner %zu\n",
		CACHE_FORMAT, rootfs && *rootfs ? rootfs : "/", (unsigned long long)st.st_dev,
		(unsigned long long)st.st_ino, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
		st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec,
		sr_embedded_runner_len);
	fwrite(sr_embedded_runner, 1, sr_embedded_runner_len, f);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	*len = size;
	return buf;
}

static char *entry_path(const char *dir, const char *key, size_t key_len, char *sub, size_t size)
{
	snprintf(sub, size, "%s/runner", dir);
	char *path = malloc(PATH_MAX);
	if (path)
		snprintf(path, PATH_MAX, "%s/%016llx.code", sub,
			 (unsigned long long)sr_fnv1a(key, key_len));
	return path;
}

/* File: magic, key length, key, code length, code. */
int sr_runner_cache_open(const char *rootfs, bool *miss)
{
	*miss = false;
	const char *dir = sr_cache_dir(NULL);
	size_t key_len;
	char sub[PATH_MAX], magic[sizeof CACHE_MAGIC - 1];
	cleanup_free char *key = dir ? cache_key(rootfs, &key_len) : NULL;
	cleanup_free char *path = key ? entry_path(dir, key, key_len, sub, sizeof sub) : NULL;
	cleanup_free char *stored = key ? malloc(key_len) : NULL;
	uint64_t klen = 0, clen = 0;
	int fd = path && stored ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
	*miss = path && stored && fd < 0 && errno == ENOENT;
	if (fd >= 0 &&
	    (sr_read_all(fd, magic, sizeof magic) || memcmp(magic, CACHE_MAGIC, sizeof magic) ||
	     sr_read_all(fd, &klen, sizeof klen) || klen != key_len ||
	     sr_read_all(fd, stored, key_len) || memcmp(stored, key, key_len) ||
	     sr_read_all(fd, &clen, sizeof clen) || clen == 0 || clen > MAX_CODE)) {
		/* Another key with the same name, or a torn file: make it again. */
		close(fd);
		fd = -1;
		*miss = true;
	}
	return fd;
}

void sr_runner_cache_store(const char *rootfs, const void *code, size_t len)
{
	const char *dir = sr_cache_dir(NULL);
	size_t key_len;
	char sub[PATH_MAX];
	cleanup_free char *key = dir && len && len <= MAX_CODE ? cache_key(rootfs, &key_len) : NULL;
	cleanup_free char *path = key ? entry_path(dir, key, key_len, sub, sizeof sub) : NULL;
	if (path) {
		uint64_t klen = key_len, clen = len;
		struct iovec parts[] = {
			{ CACHE_MAGIC, sizeof CACHE_MAGIC - 1 },
			{ &klen, sizeof klen },
			{ key, key_len },
			{ &clen, sizeof clen },
			{ (void *)code, len },
		};
		sr_cache_store(dir, sub, path, parts, 5);
	}
}

/* The magic number guards against an entry from another python that
 * the key missed: that run fails with this message instead of crashing. */
// clang-format off
const char sr_runner_stub[] =
    "def _saferun_load():\n"
    "    import marshal, _frozen_importlib_external as e\n"
    "    with open(" STR(SR_RUNNER_FD) ", 'rb') as f:\n"
    "        b = f.read()\n"
    "    if b[:4] != e.MAGIC_NUMBER:\n"
    "        raise SystemExit('saferun: the cached runner was compiled by another python')\n"
    "    return marshal.loads(b[4:])\n"
    "exec(globals().pop('_saferun_load')())\n";
// clang-format on

/* "<string>", like python -c: the runner's frames look the same either way. */
const char sr_runner_compile_py[] =
    "import sys, marshal, _frozen_importlib_external as e\n"
    "code = compile(sys.stdin.buffer.read(), '<string>', 'exec')\n"
    "sys.stdout.buffer.write(e.MAGIC_NUMBER + marshal.dumps(code))\n";

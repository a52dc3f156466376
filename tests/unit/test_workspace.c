/* Workspaces (as root): the tmpfs is mounted, capped, owned by the sandbox
 * user and gone after destroy; files round-trip; no path the sandbox can
 * plant (symlinks to host files and dirs, fifos, mounts, deep trees) leads
 * a file operation out of the workspace or blocks it; a full workspace
 * says so and leaves nothing behind; stale workspaces are cleaned up. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/base.h"
#include "box/box.h"
#include "check.h"
#include "saferun.h"

/* CHECK, and give up on the test when it failed (cond is evaluated once). */
#define REQUIRE(cond)                                                                          \
	do {                                                                                   \
		if (cond) {                                                                    \
			check_passed++;                                                        \
		} else {                                                                       \
			check_failed++;                                                        \
			fprintf(stderr, "%s:%d: %s: REQUIRE(%s) failed\n", __FILE__, __LINE__, \
				__func__, #cond);                                              \
			return;                                                                \
		}                                                                              \
	} while (0)

static char base[64]; /* a fresh base dir under /tmp */

/* The host uid of the sandbox user of the workspace made last. */
static uid_t sandbox_host_uid;

static sr_workspace *make(const char *id, uint64_t size)
{
	sr_error err = { 0 };
	sr_workspace *ws = NULL;
	if (sr_workspace_create(base, id, size, &ws, &err) < 0)
		fprintf(stderr, "create %s: %s\n", id, err.msg);
	else
		sandbox_host_uid = sr_workspace_ids(ws)->base + SR_SANDBOX_UID;
	return ws;
}

/* The host path of rel inside ws (for planting what a sandbox could). */
static const char *host(const sr_workspace *ws, const char *rel)
{
	static char buf[4096];
	snprintf(buf, sizeof buf, "%s/%s", sr_workspace_path(ws), rel);
	return buf;
}

/* Whether path is a mount point in this namespace, and its options. */
static int mounted(const char *path, char *opts, size_t opts_size)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[4096], point[4096], options[1024];
	int found = 0;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "%*s %*s %*s %*s %4095s %1023s", point, options) == 2 &&
		    strcmp(point, path) == 0) {
			found = 1;
			if (opts)
				snprintf(opts, opts_size, "%s", options);
		}
	if (f)
		fclose(f);
	return found;
}

static int exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static int write_str(sr_workspace *ws, const char *path, const char *s, sr_error *err)
{
	return sr_workspace_write(ws, path, s, strlen(s), err);
}

/* Reads path and compares; "" for a file that must be empty. */
static int content_is(sr_workspace *ws, const char *path, const char *want)
{
	sr_error err = { 0 };
	void *data = NULL;
	size_t size = 0;
	if (sr_workspace_read(ws, path, 1 * MIB, &data, &size, &err) < 0) {
		fprintf(stderr, "read %s: %s\n", path, err.msg);
		return 0;
	}
	int same = size == strlen(want) && memcmp(data, want, size) == 0;
	free(data);
	return same;
}

static int read_errno(sr_workspace *ws, const char *path, size_t max)
{
	sr_error err = { 0 };
	void *data = (void *)&err;
	size_t size = 7;
	int rc = sr_workspace_read(ws, path, max, &data, &size, &err);
	if (rc == 0) {
		free(data);
		return 0;
	}
	CHECK(data == NULL && size == 0);
	return err.errnum;
}

static int owned_by_sandbox(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && st.st_uid == sandbox_host_uid &&
	       st.st_gid == sandbox_host_uid;
}

static void test_create_mounts_a_capped_tmpfs_owned_by_the_sandbox_user(void)
{
	sr_error err = { 0 };
	char opts[1024] = "", path[512];
	sr_workspace *ws = make("s1", 1 * MIB);
	REQUIRE(ws);
	snprintf(path, sizeof path, "%s/s1", base);
	CHECK_STR(sr_workspace_path(ws), path);
	CHECK(mounted(path, opts, sizeof opts));
	CHECK(strstr(opts, "nosuid") && strstr(opts, "nodev"));
	/* A slot of its own, never host root's ids nor below the pool. */
	CHECK(sandbox_host_uid >= SR_HOST_ID_BASE + SR_SANDBOX_UID &&
	      (sandbox_host_uid - SR_SANDBOX_UID) % SR_HOST_ID_COUNT == 0);

	struct stat st;
	CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0755);
	CHECK(owned_by_sandbox(path));
	CHECK(owned_by_sandbox(host(ws, "src")));
	CHECK(owned_by_sandbox(host(ws, "artifacts")));

	uint64_t used = 1, cap = 0;
	CHECK_INT(sr_workspace_usage(ws, &used, &cap, &err), 0);
	CHECK_INT(cap, 1 * MIB);
	CHECK_INT(used, 0);
	CHECK_INT(write_str(ws, "src/a", "x", &err), 0);
	CHECK_INT(sr_workspace_usage(ws, &used, &cap, &err), 0);
	CHECK(used > 0 && used <= 8192);

	sr_workspace_destroy(ws);
	CHECK(!mounted(path, NULL, 0));
	CHECK(!exists(path));
	sr_workspace_destroy(NULL);
}

static void test_write_read_round_trip_creates_dirs_owned_by_the_sandbox_user(void)
{
	sr_error err = { 0 };
	sr_workspace *ws = make("s2", 1 * MIB);
	REQUIRE(ws);
	CHECK_INT(write_str(ws, "src/a/b/c.txt", "hello\n", &err), 0);
	CHECK(content_is(ws, "src/a/b/c.txt", "hello\n"));
	CHECK(owned_by_sandbox(host(ws, "src/a")));
	CHECK(owned_by_sandbox(host(ws, "src/a/b")));
	CHECK(owned_by_sandbox(host(ws, "src/a/b/c.txt")));
	struct stat st;
	CHECK(stat(host(ws, "src/a/b/c.txt"), &st) == 0 && S_ISREG(st.st_mode) &&
	      (st.st_mode & 0777) == 0644);

	CHECK_INT(sr_workspace_write(ws, "top.bin", "\0\1\2", 3, &err), 0);
	void *data = NULL;
	size_t size = 0;
	CHECK_INT(sr_workspace_read(ws, "top.bin", 3, &data, &size, &err), 0);
	CHECK(size == 3 && data && memcmp(data, "\0\1\2", 3) == 0);
	free(data);

	CHECK_INT(sr_workspace_write(ws, "empty", "", 0, &err), 0);
	CHECK(content_is(ws, "empty", ""));
	CHECK_INT(read_errno(ws, "empty", 0), 0);
	sr_workspace_destroy(ws);
}

static void test_write_replaces_content_and_leaves_no_temp_file(void)
{
	sr_error err = { 0 };
	sr_workspace *ws = make("s3", 1 * MIB);
	REQUIRE(ws);
	CHECK_INT(write_str(ws, "src/f", "a much longer first version\n", &err), 0);
	CHECK_INT(write_str(ws, "src/f", "v2\n", &err), 0);
	CHECK(content_is(ws, "src/f", "v2\n"));

	sr_workspace_entry *e = NULL;
	size_t n = 0;
	CHECK_INT(sr_workspace_list(ws, "src", 100, &e, &n, &err), 0);
	CHECK_INT(n, 1);
	if (n == 1)
		CHECK_STR(e[0].path, "src/f");
	sr_workspace_entries_free(e, n);

	/* A dir is never replaced by a file; a file is not a dir on the way. */
	CHECK_INT(write_str(ws, "src", "x", &err), -1);
	CHECK_INT(err.errnum, EISDIR);
	CHECK_INT(write_str(ws, "src/f/g", "x", &err), -1);
	CHECK_INT(err.errnum, ENOTDIR);
	CHECK(content_is(ws, "src/f", "v2\n"));
	sr_workspace_destroy(ws);
}

static void test_bad_paths_are_einval_and_named(void)
{
	char long_path[SR_WORKSPACE_PATH_MAX + 2], long_part[300];
	for (size_t i = 0; i < sizeof long_path - 1; i++)
		long_path[i] = i % 100 == 99 ? '/' : 'a';
	long_path[sizeof long_path - 1] = '\0';
	memset(long_part, 'p', sizeof long_part - 1);
	long_part[sizeof long_part - 1] = '\0';
	const char *bad[] = {
		"/etc/passwd", "..", "../x", "a/../b", "a/..",  "",     "a//b",    ".",       "./a",
		"a/.",         "a/", "/",    "a\nb",   "a\x01", "\x7f", long_path, long_part,
	};
	sr_workspace *ws = make("s4", 1 * MIB);
	REQUIRE(ws);
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		sr_error err = { 0 };
		sr_workspace_entry *e = NULL;
		size_t n = 0;
		CHECK_INT(write_str(ws, bad[i], "x", &err), -1);
		CHECK_INT(err.errnum, EINVAL);
		if (strcspn(bad[i], "\n\x01\x7f") == strlen(bad[i]) && strlen(bad[i]) < 64)
			CHECK(strstr(err.msg, bad[i]) != NULL);
		CHECK_INT(read_errno(ws, bad[i], 100), EINVAL);
		CHECK_INT(sr_workspace_remove(ws, bad[i], &err), -1);
		CHECK_INT(err.errnum, EINVAL);
		if (bad[i][0]) {
			CHECK_INT(sr_workspace_list(ws, bad[i], 100, &e, &n, &err), -1);
			CHECK_INT(err.errnum, EINVAL);
		}
	}
	sr_error err = { 0 };
	CHECK_INT(write_str(ws, "a\nb", "x", &err), -1);
	CHECK(strstr(err.msg, "\"a\\x0ab\"") && !strchr(err.msg, '\n'));
	/* The limit itself is fine. */
	long_path[SR_WORKSPACE_PATH_MAX] = '\0';
	if (long_path[SR_WORKSPACE_PATH_MAX - 1] == '/')
		long_path[SR_WORKSPACE_PATH_MAX - 1] = 'a';
	CHECK_INT(write_str(ws, long_path, "x", &err), 0);
	sr_workspace_destroy(ws);
}

/* A host dir with a file "passwd" in it, as a symlink target. */
static void make_host_dir(char *dir, const char *content)
{
	char file[128];
	strcpy(dir, "/tmp/sr-ws-host-XXXXXX");
	REQUIRE(mkdtemp(dir));
	snprintf(file, sizeof file, "%s/passwd", dir);
	FILE *f = fopen(file, "w");
	if (f) {
		fputs(content, f);
		fclose(f);
	}
}

static int host_file_is(const char *dir, const char *name, const char *want)
{
	char path[256], got[256] = "";
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(got, 1, sizeof got - 1, f);
	fclose(f);
	got[n] = '\0';
	return strcmp(got, want) == 0;
}

static void remove_host_dir(const char *dir)
{
	char file[128];
	snprintf(file, sizeof file, "%s/passwd", dir);
	unlink(file);
	rmdir(dir);
}

static void test_symlinks_are_never_followed(void)
{
	sr_error err = { 0 };
	char hostdir[64], target[128];
	sr_workspace *ws = make("s5", 1 * MIB);
	REQUIRE(ws);
	make_host_dir(hostdir, "host secret\n");
	snprintf(target, sizeof target, "%s/passwd", hostdir);

	/* The last part is a symlink to a host file. */
	CHECK(symlink("/etc/shadow", host(ws, "src/shadow")) == 0);
	CHECK_INT(read_errno(ws, "src/shadow", 1 * MIB), ELOOP);
	CHECK(symlink(target, host(ws, "src/secret")) == 0);
	CHECK_INT(read_errno(ws, "src/secret", 1 * MIB), ELOOP);
	/* Writing refuses a link as the last part too (docs/api.md: 403): the
	 * link and what it points to stay as they were. */
	struct stat lst;
	CHECK_INT(write_str(ws, "src/secret", "mine\n", &err), -1);
	CHECK_INT(err.errnum, ELOOP);
	CHECK(strstr(err.msg, "src/secret") && strstr(err.msg, "symlink"));
	CHECK(host_file_is(hostdir, "passwd", "host secret\n"));
	CHECK(lstat(host(ws, "src/secret"), &lst) == 0 && S_ISLNK(lst.st_mode));

	/* A dir on the way is a symlink to a host dir. */
	CHECK(symlink("/etc", host(ws, "src/link")) == 0);
	CHECK_INT(read_errno(ws, "src/link/passwd", 1 * MIB), ELOOP);
	CHECK_INT(read_errno(ws, "src/link/.", 1 * MIB), EINVAL);
	CHECK_INT(write_str(ws, "src/link/saferun-workspace-test-probe", "x", &err), -1);
	CHECK_INT(err.errnum, ELOOP);
	CHECK(strstr(err.msg, "src/link/saferun-workspace-test-probe") &&
	      strstr(err.msg, "symlink"));
	CHECK(!exists("/etc/saferun-workspace-test-probe"));
	CHECK(symlink(hostdir, host(ws, "src/hostdir")) == 0);
	CHECK_INT(write_str(ws, "src/hostdir/passwd", "pwned\n", &err), -1);
	CHECK_INT(err.errnum, ELOOP);
	CHECK_INT(write_str(ws, "src/hostdir/new/file", "pwned\n", &err), -1);
	CHECK_INT(err.errnum, ELOOP);
	CHECK_INT(sr_workspace_remove(ws, "src/hostdir/passwd", &err), -1);
	CHECK_INT(err.errnum, ELOOP);
	sr_workspace_entry *e = NULL;
	size_t n = 0;
	CHECK_INT(sr_workspace_list(ws, "src/hostdir", 100, &e, &n, &err), -1);
	CHECK_INT(err.errnum, ELOOP);
	CHECK(host_file_is(hostdir, "passwd", "host secret\n"));
	CHECK(!exists("/tmp/pwned"));

	/* A relative link that climbs out, and one that stays inside. */
	CHECK(symlink("../../../../../../etc/passwd", host(ws, "src/up")) == 0);
	CHECK_INT(read_errno(ws, "src/up", 1 * MIB), ELOOP);
	CHECK(symlink("secret", host(ws, "src/inside")) == 0);
	CHECK_INT(read_errno(ws, "src/inside", 1 * MIB), ELOOP);

	/* Removing a link removes the link. */
	CHECK_INT(sr_workspace_remove(ws, "src/hostdir", &err), 0);
	CHECK(!exists(host(ws, "src/hostdir")));
	CHECK(host_file_is(hostdir, "passwd", "host secret\n"));
	sr_workspace_destroy(ws);
	remove_host_dir(hostdir);
}

struct flipper {
	int dir_fd; /* the workspace's src/ */
	volatile int stop;
	long flips;
};

/* A sandbox racing us: swap src/race (a dir) and src/alt (a symlink to a
 * host dir) back and forth as fast as it can. */
static void *flip(void *arg)
{
	struct flipper *f = arg;
	while (!f->stop)
		if (renameat2(f->dir_fd, "race", f->dir_fd, "alt", RENAME_EXCHANGE) == 0)
			f->flips++;
	return NULL;
}

static void test_swapping_a_dir_for_a_symlink_mid_call_never_escapes(void)
{
	sr_error err = { 0 };
	char hostdir[64];
	sr_workspace *ws = make("s12", 4 * MIB);
	REQUIRE(ws);
	make_host_dir(hostdir, "host secret\n");
	CHECK_INT(write_str(ws, "src/race/passwd", "inside\n", &err), 0);
	CHECK(symlink(hostdir, host(ws, "src/alt")) == 0);
	struct flipper f = { .dir_fd = open(host(ws, "src"), O_RDONLY | O_DIRECTORY) };
	pthread_t t;
	REQUIRE(f.dir_fd >= 0 && pthread_create(&t, NULL, flip, &f) == 0);
	int wrote = 0, read_ok = 0, leaked = 0;
	for (int i = 0; i < 3000; i++) {
		void *data = NULL;
		size_t size = 0;
		wrote += write_str(ws, "src/race/dropped", "x", &err) == 0;
		if (sr_workspace_read(ws, "src/race/passwd", 100, &data, &size, &err) == 0) {
			read_ok++;
			leaked += size != 7 || memcmp(data, "inside\n", 7) != 0;
			free(data);
		}
		sr_workspace_remove(ws, "src/race/dropped", &err);
	}
	f.stop = 1;
	pthread_join(t, NULL);
	close(f.dir_fd);
	CHECK(f.flips > 100);
	CHECK(wrote > 0 && read_ok > 0); /* the race was run, both ways */
	CHECK_INT(leaked, 0);
	CHECK(host_file_is(hostdir, "passwd", "host secret\n"));
	char dropped[128];
	snprintf(dropped, sizeof dropped, "%s/dropped", hostdir);
	CHECK(!exists(dropped));
	unlink(dropped);
	sr_workspace_destroy(ws);
	remove_host_dir(hostdir);
}

static void alarm_fired(int sig)
{
	(void)sig;
	static const char msg[] = "test_workspace: a read blocked\n";
	ssize_t n = write(2, msg, sizeof msg - 1);
	(void)n;
	_exit(2);
}

static void test_special_files_and_sizes(void)
{
	sr_error err = { 0 };
	sr_workspace *ws = make("s6", 1 * MIB);
	REQUIRE(ws);
	CHECK(mkfifo(host(ws, "src/fifo"), 0666) == 0);
	signal(SIGALRM, alarm_fired);
	alarm(10);
	CHECK_INT(read_errno(ws, "src/fifo", 100), EINVAL);
	alarm(0);
	int sock = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", host(ws, "src/sock"));
	CHECK(sock >= 0 && bind(sock, (struct sockaddr *)&sa, sizeof sa) == 0);
	CHECK_INT(read_errno(ws, "src/sock", 100), EINVAL);
	if (sock >= 0)
		close(sock);
	CHECK_INT(read_errno(ws, "src", 100), EISDIR);
	CHECK_INT(read_errno(ws, "src/missing", 100), ENOENT);
	CHECK_INT(read_errno(ws, "nodir/missing", 100), ENOENT);

	char buf[100];
	memset(buf, 'z', sizeof buf);
	CHECK_INT(sr_workspace_write(ws, "src/100", buf, sizeof buf, &err), 0);
	CHECK_INT(read_errno(ws, "src/100", 99), EFBIG);
	CHECK_INT(read_errno(ws, "src/100", 100), 0);
	CHECK_INT(read_errno(ws, "src/100", SIZE_MAX), 0);
	void *data = NULL;
	size_t size = 0;
	CHECK_INT(sr_workspace_read(ws, "src/100", 10, &data, &size, &err), -1);
	CHECK(strstr(err.msg, "src/100") && strstr(err.msg, "10-byte"));
	sr_workspace_destroy(ws);
}

static void test_full_workspace_is_enospc_and_leaves_nothing_behind(void)
{
	sr_error err = { 0 };
	sr_workspace *ws = make("s7", 1 * MIB);
	REQUIRE(ws);
	size_t big = 2 * MIB;
	char *data = calloc(1, big);
	REQUIRE(data);
	CHECK_INT(sr_workspace_write(ws, "src/big.bin", data, big, &err), -1);
	CHECK_INT(err.errnum, ENOSPC);
	CHECK(strstr(err.msg, "src/big.bin") && strstr(err.msg, "1048576"));

	sr_workspace_entry *e = NULL;
	size_t n = 0;
	CHECK_INT(sr_workspace_list(ws, "", 100, &e, &n, &err), 0);
	CHECK_INT(n, 2); /* artifacts, src: no temp file */
	sr_workspace_entries_free(e, n);
	uint64_t used = 1, cap = 0;
	CHECK_INT(sr_workspace_usage(ws, &used, &cap, &err), 0);
	CHECK_INT(used, 0);

	/* What fits still does. */
	CHECK_INT(sr_workspace_write(ws, "src/half.bin", data, MIB / 2, &err), 0);
	free(data);
	sr_workspace_destroy(ws);
}

/* Empty files cost no bytes: the inode cap (one per 4 KiB, at least 1024)
 * is what stops a run from pinning kernel memory with millions of them. */
static void test_empty_files_are_capped_by_inodes(void)
{
	sr_error err = { 0 };
	sr_workspace *ws = make("s7i", 1 * MIB);
	REQUIRE(ws);
	int rc = 0, made = 0;
	for (; made < 1100 && rc == 0; made++) {
		char name[32];
		snprintf(name, sizeof name, "src/e%d", made);
		rc = sr_workspace_write(ws, name, "", 0, &err);
	}
	CHECK_INT(rc, -1);
	CHECK_INT(err.errnum, ENOSPC);
	CHECK(made > 1000 && made <= 1024);
	sr_workspace_destroy(ws);
}

static void test_remove_takes_links_not_their_targets(void)
{
	sr_error err = { 0 };
	char hostdir[64];
	sr_workspace *ws = make("s8", 1 * MIB);
	REQUIRE(ws);
	make_host_dir(hostdir, "keep me\n");
	CHECK_INT(write_str(ws, "src/tree/a/b/c.txt", "c", &err), 0);
	CHECK_INT(write_str(ws, "src/tree/top.txt", "t", &err), 0);
	CHECK(symlink(hostdir, host(ws, "src/tree/a/hostlink")) == 0);
	CHECK(mkfifo(host(ws, "src/tree/a/fifo"), 0600) == 0);

	CHECK_INT(sr_workspace_remove(ws, "src/tree", &err), 0);
	CHECK(!exists(host(ws, "src/tree")));
	CHECK(exists(host(ws, "src")));
	CHECK(host_file_is(hostdir, "passwd", "keep me\n"));

	CHECK_INT(write_str(ws, "src/f", "f", &err), 0);
	CHECK_INT(sr_workspace_remove(ws, "src/f", &err), 0);
	CHECK(!exists(host(ws, "src/f")));
	CHECK_INT(sr_workspace_remove(ws, "src/f", &err), -1);
	CHECK_INT(err.errnum, ENOENT);
	CHECK(strstr(err.msg, "src/f") != NULL);
	CHECK_INT(sr_workspace_remove(ws, "", &err), -1);
	CHECK_INT(err.errnum, EINVAL);
	CHECK(exists(host(ws, "artifacts")));
	sr_workspace_destroy(ws);
	remove_host_dir(hostdir);
}

static void test_list_is_sorted_with_types_and_sizes(void)
{
	sr_error err = { 0 };
	sr_workspace *ws = make("s9", 1 * MIB);
	REQUIRE(ws);
	CHECK_INT(write_str(ws, "src/b.txt", "bbb", &err), 0);
	CHECK_INT(write_str(ws, "src/a/x", "xxxxx", &err), 0);
	CHECK_INT(write_str(ws, "src/a.txt", "", &err), 0);
	CHECK(symlink("/etc", host(ws, "src/l")) == 0);
	CHECK(mkfifo(host(ws, "src/p"), 0600) == 0);

	const struct {
		const char *path;
		char type;
		uint64_t size;
	} want[] = {
		{ "artifacts", 'd', 0 }, { "src", 'd', 0 },       { "src/a", 'd', 0 },
		{ "src/a/x", 'f', 5 },   { "src/a.txt", 'f', 0 }, { "src/b.txt", 'f', 3 },
		{ "src/l", 'l', 4 },     { "src/p", 'o', 0 },
	};
	size_t n_want = sizeof want / sizeof *want;
	sr_workspace_entry *e = NULL;
	size_t n = 0;
	CHECK_INT(sr_workspace_list(ws, "", 100, &e, &n, &err), 0);
	CHECK_INT(n, n_want);
	for (size_t i = 0; i < n && i < n_want; i++) {
		CHECK_STR(e[i].path, want[i].path);
		CHECK_INT(e[i].type, want[i].type);
		CHECK_INT(e[i].size, want[i].size);
	}
	sr_workspace_entries_free(e, n);

	/* Below a dir: paths still from the root; the limit is exact. */
	CHECK_INT(sr_workspace_list(ws, "src", n_want - 2, &e, &n, &err), 0);
	CHECK_INT(n, n_want - 2);
	if (n > 0)
		CHECK_STR(e[0].path, "src/a");
	sr_workspace_entries_free(e, n);
	CHECK_INT(sr_workspace_list(ws, "src", n_want - 3, &e, &n, &err), -1);
	CHECK_INT(err.errnum, E2BIG);
	CHECK(e == NULL && n == 0);
	CHECK_INT(sr_workspace_list(ws, NULL, 0, &e, &n, &err), -1);
	CHECK_INT(err.errnum, E2BIG);
	CHECK_INT(sr_workspace_list(ws, "src/a/x", 10, &e, &n, &err), -1);
	CHECK_INT(err.errnum, ENOTDIR);
	CHECK_INT(sr_workspace_list(ws, "src/l", 10, &e, &n, &err), -1);
	CHECK_INT(err.errnum, ELOOP);
	CHECK_INT(sr_workspace_list(ws, "src/none", 10, &e, &n, &err), -1);
	CHECK_INT(err.errnum, ENOENT);
	sr_workspace_destroy(ws);
}

static void test_trees_deeper_than_the_limit_are_refused(void)
{
	sr_error err = { 0 };
	sr_workspace *ws = make("s10", 1 * MIB);
	REQUIRE(ws);
	/* As a sandbox would: mkdir one level at a time, far past the limit. */
	int fd = open(host(ws, "src"), O_RDONLY | O_DIRECTORY);
	for (int i = 0; fd >= 0 && i < SR_WORKSPACE_MAX_DEPTH + 10; i++) {
		int next =
		    mkdirat(fd, "d", 0755) == 0 ? openat(fd, "d", O_RDONLY | O_DIRECTORY) : -1;
		close(fd);
		fd = next;
	}
	CHECK(fd >= 0);
	close(fd);
	sr_workspace_entry *e = NULL;
	size_t n = 0;
	CHECK_INT(sr_workspace_list(ws, "", 100000, &e, &n, &err), -1);
	CHECK_INT(err.errnum, ELOOP);
	CHECK(strstr(err.msg, "deeper") != NULL);
	CHECK_INT(sr_workspace_remove(ws, "src/d", &err), -1);
	CHECK_INT(err.errnum, ELOOP);
	CHECK_INT(sr_workspace_list(ws, "src/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d", 100000,
				    &e, &n, &err),
		  0);
	sr_workspace_entries_free(e, n);
	CHECK_INT(
	    sr_workspace_remove(ws, "src/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d", &err), 0);
	CHECK_INT(sr_workspace_remove(ws, "src/d", &err), 0);
	CHECK_INT(sr_workspace_list(ws, "src", 10, &e, &n, &err), 0);
	CHECK_INT(n, 0);
	sr_workspace_entries_free(e, n);
	sr_workspace_destroy(ws);
}

/* A dir chain of depth levels of name below dir_fd (closed); the fd of
 * the last one, or -1. */
static int make_chain(int fd, const char *name, int depth)
{
	for (int i = 0; fd >= 0 && i < depth; i++) {
		int next =
		    mkdirat(fd, name, 0755) == 0 ? openat(fd, name, O_RDONLY | O_DIRECTORY) : -1;
		close(fd);
		fd = next;
	}
	return fd;
}

static size_t listing_bytes(const sr_workspace_entry *e, size_t n)
{
	size_t bytes = 0;
	for (size_t i = 0; i < n; i++)
		bytes += sizeof *e + strlen(e[i].path) + 1;
	return bytes;
}

static void test_a_partial_listing_is_bounded_in_bytes_and_says_why(void)
{
	sr_error err = { 0 };
	sr_list_cut cut;
	sr_workspace *ws = make("s15", 8 * MIB);
	REQUIRE(ws);
	/* 100 levels of 250-byte names, 200 files at the bottom: ~25 KB a path,
	 * ~5 MB of paths in all. */
	char name[251];
	memset(name, 'd', 250);
	name[250] = '\0';
	int fd = make_chain(open(host(ws, "src"), O_RDONLY | O_DIRECTORY), name, 100);
	REQUIRE(fd >= 0);
	for (int i = 0; i < 200; i++) {
		char file[32];
		snprintf(file, sizeof file, "f%03d", i);
		int f = openat(fd, file, O_WRONLY | O_CREAT | O_EXCL, 0644);
		CHECK(f >= 0);
		close(f);
	}
	close(fd);
	sr_workspace_entry *e = NULL;
	size_t n = 0, cap = 2 * MIB; /* the dirs alone take ~1.3 MB */
	CHECK_INT(sr_workspace_list_partial(ws, "src", 100000, cap, &e, &n, &cut, &err), 0);
	CHECK_INT(cut, SR_LIST_CUT_BYTES);
	CHECK(n > 100 && n < 100 + 200);
	CHECK(listing_bytes(e, n) <= cap);
	for (size_t i = 1; i < n; i++)
		CHECK(strcmp(e[i - 1].path, e[i].path) < 0);
	sr_workspace_entries_free(e, n);
	/* The all-or-nothing listing fails at its own byte cap. */
	CHECK_INT(sr_workspace_list(ws, "src", 100000, &e, &n, &err), -1);
	CHECK_INT(err.errnum, E2BIG);
	CHECK(strstr(err.msg, "bytes") != NULL);
	/* Entries: the first ones, exactly as many as asked. */
	CHECK_INT(sr_workspace_list_partial(ws, "src", 50, SIZE_MAX, &e, &n, &cut, &err), 0);
	CHECK_INT(cut, SR_LIST_CUT_ENTRIES);
	CHECK_INT(n, 50);
	sr_workspace_entries_free(e, n);
	/* Everything fits: whole. */
	CHECK_INT(sr_workspace_list_partial(ws, "", 1000, 16 * MIB, &e, &n, &cut, &err), 0);
	CHECK_INT(cut, SR_LIST_WHOLE);
	CHECK_INT(n, 2 + 100 + 200);
	sr_workspace_entries_free(e, n);
	CHECK_INT(sr_workspace_remove(ws, "src", &err), 0);
	/* Past the depth: the rest is listed, the deep part left out. */
	fd = make_chain(open(host(ws, "artifacts"), O_RDONLY | O_DIRECTORY), "d",
			SR_WORKSPACE_MAX_DEPTH + 10);
	CHECK(fd >= 0);
	close(fd);
	CHECK_INT(sr_workspace_list_partial(ws, "", 100000, SIZE_MAX, &e, &n, &cut, &err), 0);
	CHECK_INT(cut, SR_LIST_CUT_DEPTH);
	CHECK_INT(n, 1 + SR_WORKSPACE_MAX_DEPTH); /* artifacts, then 128 levels of d */
	sr_workspace_entries_free(e, n);
	sr_workspace_destroy(ws);
}

static void test_a_mount_inside_is_not_crossed(void)
{
	sr_error err = { 0 };
	char path[512], root[512];
	sr_workspace *ws = make("s11", 1 * MIB);
	REQUIRE(ws);
	CHECK_INT(write_str(ws, "src/m/f", "under", &err), 0);
	snprintf(path, sizeof path, "%s", host(ws, "src/m"));
	CHECK(mount("tmpfs", path, "tmpfs", 0, "size=64k") == 0);
	FILE *f = fopen(host(ws, "src/m/f"), "w");
	if (f) {
		fputs("over", f);
		fclose(f);
	}
	CHECK_INT(read_errno(ws, "src/m/f", 100), EXDEV);
	CHECK_INT(write_str(ws, "src/m/g", "x", &err), -1);
	CHECK_INT(err.errnum, EXDEV);
	snprintf(root, sizeof root, "%s", sr_workspace_path(ws));
	sr_workspace_destroy(ws); /* detaches the mount below too */
	CHECK(!mounted(path, NULL, 0) && !mounted(root, NULL, 0));
	CHECK(!exists(root));
}

static void test_bad_and_taken_ids_are_refused(void)
{
	const char *bad[] = {
		"",
		"..",
		"a/b",
		"a b",
		"ä",
		"x\n",
		"0123456789012345678901234567890123456789012345678901234567890123456789",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		sr_error err = { 0 };
		sr_workspace *ws = (sr_workspace *)&err;
		CHECK_INT(sr_workspace_create(base, bad[i], MIB, &ws, &err), -1);
		CHECK_INT(err.errnum, EINVAL);
		CHECK(ws == NULL);
	}
	sr_error err = { 0 };
	sr_workspace *ws = NULL, *again = NULL;
	CHECK_INT(sr_workspace_create(base, "A-z_09", 0, &ws, &err), -1);
	CHECK_INT(err.errnum, EINVAL);
	CHECK_INT(sr_workspace_create("relative/dir", "x", MIB, &ws, &err), -1);
	CHECK_INT(err.errnum, EINVAL);

	ws = make("A-z_09", MIB);
	REQUIRE(ws);
	CHECK_INT(write_str(ws, "src/keep", "k", &err), 0);
	CHECK_INT(sr_workspace_create(base, "A-z_09", MIB, &again, &err), -1);
	CHECK_INT(err.errnum, EEXIST);
	CHECK(again == NULL && strstr(err.msg, "A-z_09"));
	/* The refused create left the first one alone. */
	CHECK(mounted(sr_workspace_path(ws), NULL, 0));
	CHECK(content_is(ws, "src/keep", "k"));
	sr_workspace_destroy(ws);
}

static void test_cleanup_stale_removes_abandoned_workspaces(void)
{
	sr_error err = { 0 };
	char stale[128], p1[256], p2[256];
	snprintf(stale, sizeof stale, "%s/stale/nested", base);
	sr_workspace *a = NULL, *b = NULL;
	CHECK_INT(sr_workspace_create(stale, "one", MIB, &a, &err), 0);
	CHECK_INT(sr_workspace_create(stale, "two", MIB, &b, &err), 0);
	REQUIRE(a && b);
	struct stat st;
	CHECK(stat(stale, &st) == 0 && (st.st_mode & 07777) == 0711);
	snprintf(p1, sizeof p1, "%s", sr_workspace_path(a));
	snprintf(p2, sizeof p2, "%s", sr_workspace_path(b));
	CHECK_INT(write_str(a, "src/x/y", "y", &err), 0);
	/* A dir that was never mounted (a crash between mkdir and mount). */
	char bare[256];
	snprintf(bare, sizeof bare, "%s/bare", stale);
	CHECK(mkdir(bare, 0700) == 0);

	CHECK_INT(sr_workspace_cleanup_stale(stale, &err), 3);
	CHECK(!mounted(p1, NULL, 0) && !mounted(p2, NULL, 0));
	CHECK(!exists(p1) && !exists(p2) && !exists(bare));
	CHECK(exists(stale));
	sr_workspace_forget(a);
	sr_workspace_forget(b);
	CHECK_INT(sr_workspace_cleanup_stale(stale, &err), 0);
	rmdir(stale);
	snprintf(stale, sizeof stale, "%s/stale", base);
	rmdir(stale);
	CHECK_INT(sr_workspace_cleanup_stale(stale, &err), 0); /* missing: nothing to do */
}

/* stat, mkdir, rename and open_dir (E2B's envd): the same path rules, a
 * symlink reported as one and never followed, nothing moved outside. */
static void test_stat_mkdir_rename_and_open_dir(void)
{
	sr_error err = { 0 };
	sr_workspace_entry en;
	struct stat st;
	sr_workspace *ws = make("s12", 1 * MIB);
	REQUIRE(ws);
	CHECK_INT(sr_workspace_mkdir(ws, "a/b/c", &err), 0);
	CHECK(stat(host(ws, "a/b/c"), &st) == 0 && S_ISDIR(st.st_mode) &&
	      st.st_uid == sandbox_host_uid);
	CHECK_INT(sr_workspace_mkdir(ws, "a/b/c", &err), -1);
	CHECK_INT(err.errnum, EEXIST);
	CHECK_INT(sr_workspace_stat(ws, "a/b", &en, &err), 0);
	CHECK(en.type == 'd' && en.mode == 0755);
	CHECK_INT(sr_workspace_stat(ws, "", &en, &err), 0); /* the root */
	CHECK(en.type == 'd');
	CHECK_INT(write_str(ws, "a/f.txt", "12345", &err), 0);
	CHECK_INT(sr_workspace_stat(ws, "a/f.txt", &en, &err), 0);
	CHECK(en.type == 'f' && en.size == 5 && en.mode == 0644 && en.mtime_ns > 0);
	CHECK_INT(sr_workspace_stat(ws, "a/none", &en, &err), -1);
	CHECK_INT(err.errnum, ENOENT);
	CHECK_INT(sr_workspace_stat(ws, "a/../x", &en, &err), -1);
	CHECK_INT(err.errnum, EINVAL);
	/* a link is itself; through one is ELOOP */
	CHECK(symlink("/etc", host(ws, "a/etc")) == 0);
	CHECK_INT(sr_workspace_stat(ws, "a/etc", &en, &err), 0);
	CHECK(en.type == 'l');
	CHECK_INT(sr_workspace_stat(ws, "a/etc/passwd", &en, &err), -1);
	CHECK_INT(err.errnum, ELOOP);
	CHECK_INT(sr_workspace_mkdir(ws, "a/etc/new", &err), -1);
	CHECK_INT(err.errnum, ELOOP);
	CHECK(!exists("/etc/new"));
	CHECK_INT(sr_workspace_open_dir(ws, "a/etc", &err), -1);
	CHECK_INT(err.errnum, ELOOP);
	int fd = sr_workspace_open_dir(ws, "a/b", &err);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	/* rename: parents made, the target replaced, never a dir into itself,
	 * never through a link */
	CHECK_INT(sr_workspace_rename(ws, "a/f.txt", "x/y/g.txt", &err), 0);
	CHECK(!exists(host(ws, "a/f.txt")) && exists(host(ws, "x/y/g.txt")));
	CHECK_INT(sr_workspace_rename(ws, "a", "a/b/inside", &err), -1);
	CHECK_INT(err.errnum, EINVAL);
	CHECK_INT(sr_workspace_rename(ws, "x/y/g.txt", "a/etc/moved", &err), -1);
	CHECK_INT(err.errnum, ELOOP);
	CHECK(!exists("/etc/moved"));
	CHECK_INT(sr_workspace_rename(ws, "a/etc", "etc-link", &err), 0); /* the link moves */
	CHECK(lstat(host(ws, "etc-link"), &st) == 0 && S_ISLNK(st.st_mode));
	CHECK_INT(sr_workspace_rename(ws, "missing", "there", &err), -1);
	CHECK_INT(err.errnum, ENOENT);
	sr_workspace_destroy(ws);
}

int main(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "test_workspace mounts tmpfs: run it as root\n");
		return 1;
	}
	strcpy(base, "/tmp/sr-ws-test-XXXXXX");
	if (!mkdtemp(base)) {
		perror("mkdtemp");
		return 1;
	}
	test_create_mounts_a_capped_tmpfs_owned_by_the_sandbox_user();
	test_write_read_round_trip_creates_dirs_owned_by_the_sandbox_user();
	test_write_replaces_content_and_leaves_no_temp_file();
	test_bad_paths_are_einval_and_named();
	test_symlinks_are_never_followed();
	test_special_files_and_sizes();
	test_full_workspace_is_enospc_and_leaves_nothing_behind();
	test_empty_files_are_capped_by_inodes();
	test_remove_takes_links_not_their_targets();
	test_list_is_sorted_with_types_and_sizes();
	test_trees_deeper_than_the_limit_are_refused();
	test_a_partial_listing_is_bounded_in_bytes_and_says_why();
	test_a_mount_inside_is_not_crossed();
	test_swapping_a_dir_for_a_symlink_mid_call_never_escapes();
	test_bad_and_taken_ids_are_refused();
	test_cleanup_stale_removes_abandoned_workspaces();
	test_stat_mkdir_rename_and_open_dir();
	/* Every test destroyed its workspaces: the base dir is empty. */
	CHECK(rmdir(base) == 0);
	return check_report();
}

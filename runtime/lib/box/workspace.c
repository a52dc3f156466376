/* Workspaces: a size-capped tmpfs per session, mounted on the host at
 * BASE/ID and owned by the sandbox user.
 *
 * We are root and the sandboxed code owns everything inside, so no file
 * operation ever uses a host path below the mount: each starts from an
 * O_PATH fd on the mount's root and opens one dir at a time with openat2
 * (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV). A symlink or a mount point anywhere on the way fails
 * the call (ELOOP, EXDEV) instead of leading out; the last part is only
 * ever unlinked or renamed relative to its dir fd, which never follows it.
 */
#include "workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "idslot.h"

#define WS_RESOLVE  (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
#define WS_ID_MAX   64
#define WS_ID_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
#define WS_STR_(x)  #x
#define WS_STR(x)   WS_STR_(x)

struct sr_workspace {
	char *path;           /* BASE/ID on the host */
	const char *id;       /* the last part of path */
	uint64_t cap;         /* bytes, as asked for */
	int root_fd;          /* O_PATH on the mounted root */
	bool made_dir, mount; /* what teardown undoes */
	/* Its host ids, held for its life: every kernel over it maps to
	 * them, so its files keep one owner (the slot's uid 1000). */
	sr_idslot ids;
};

/* ---- paths ---------------------------------------------------------------- */

/* openat2 beneath dirfd. With O_PATH, flags must not hold O_NOFOLLOW: that
 * pair hands back a trailing symlink itself instead of failing (ELOOP). */
static int ws_open(int dirfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = WS_RESOLVE,
	};
	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

/* s as a message can show it: control characters escaped, long ones cut. */
static const char *printable(const char *s, char *buf, size_t size)
{
	size_t o = 0;
	for (; *s && o + 8 < size; s++) {
		unsigned char c = (unsigned char)*s;
		if (c < 0x20 || c == 0x7f)
			o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
		else
			buf[o++] = (char)c;
	}
	strcpy(buf + o, *s ? "..." : "");
	return buf;
}

/* What is wrong with a workspace path, or NULL. */
static const char *path_problem(const char *path)
{
	size_t len = strlen(path);
	if (len == 0)
		return "is empty";
	if (len > SR_WORKSPACE_PATH_MAX)
		return "is longer than " WS_STR(SR_WORKSPACE_PATH_MAX) " bytes";
	if (path[0] == '/')
		return "is absolute (paths are relative to the workspace root, e.g. src/data.csv)";
	for (const unsigned char *c = (const unsigned char *)path; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			return "has a control character";
	for (const char *part = path;; part += strcspn(part, "/") + 1) {
		size_t plen = strcspn(part, "/");
		if (plen == 0)
			return "has an empty part";
		if ((plen == 1 && part[0] == '.') || (plen == 2 && strncmp(part, "..", 2) == 0))
			return "has a \".\" or \"..\" part";
		if (plen > NAME_MAX)
			return "has a part longer than " WS_STR(NAME_MAX) " bytes";
		if (part[plen] == '\0')
			return NULL;
	}
}

static int check_path(const char *path, sr_error *err)
{
	const char *why = path_problem(path);
	char shown[128];
	if (!why)
		return 0;
	return sr_refuse(err, EINVAL, "workspace path \"%s\" %s",
			 printable(path, shown, sizeof shown), why);
}

/* A failed file operation, naming the path; the errnos whose strerror text
 * would mislead get words of their own. */
static int ws_fail(const sr_workspace *ws, sr_error *err, int errnum, const char *what,
		   const char *path)
{
	switch (errnum) {
	case ENOSPC:
		return sr_refuse(err, errnum,
				 "%s \"%s\": workspace %s is full (its cap is %" PRIu64
				 " bytes; remove files from it or use a larger one)",
				 what, path, ws->id, ws->cap);
	case ELOOP:
		return sr_refuse(err, errnum,
				 "%s \"%s\" in workspace %s: the path is or goes through a "
				 "symlink (workspace paths never follow symlinks)",
				 what, path, ws->id);
	case EXDEV:
		return sr_refuse(err, errnum,
				 "%s \"%s\" in workspace %s: the path crosses a mount point", what,
				 path, ws->id);
	default: return sr_fail(err, errnum, "%s \"%s\" in workspace %s", what, path, ws->id);
	}
}

/* The sandbox user as the host sees it: the owner of ws's files. */
static uid_t sandbox_uid(const sr_workspace *ws)
{
	return ws->ids.base + SR_SANDBOX_UID;
}

static gid_t sandbox_gid(const sr_workspace *ws)
{
	return ws->ids.base + SR_SANDBOX_GID;
}

/* The dir name below dirfd as an O_PATH fd; with create, made first when
 * missing (0755, owned by the sandbox user). -errno on failure. */
static int open_dir(const sr_workspace *ws, int dirfd, const char *name, bool create)
{
	int fd = ws_open(dirfd, name, O_PATH | O_DIRECTORY, 0);
	if (fd >= 0 || errno != ENOENT || !create)
		return fd >= 0 ? fd : -errno;
	bool made = mkdirat(dirfd, name, 0755) == 0;
	if (!made && errno != EEXIST)
		return -errno;
	if ((fd = ws_open(dirfd, name, O_PATH | O_DIRECTORY, 0)) < 0)
		return -errno;
	/* Through the fd: whatever the sandbox may have swapped in at the name
	 * since, it is a dir on this mount. */
	if (made && fchownat(fd, "", sandbox_uid(ws), sandbox_gid(ws), AT_EMPTY_PATH) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

/* The dir holding path's last part, walked one part at a time (the missing
 * ones made with create); *name points at the last part. -errno on failure. */
static int open_parent(const sr_workspace *ws, const char *path, bool create, const char **name)
{
	char part[NAME_MAX + 1];
	int fd = fcntl(ws->root_fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	for (;;) {
		size_t len = strcspn(path, "/"); /* <= NAME_MAX: check_path */
		if (path[len] == '\0') {
			*name = path;
			return fd;
		}
		memcpy(part, path, len);
		part[len] = '\0';
		int next = open_dir(ws, fd, part, create);
		close(fd);
		if (next < 0)
			return next;
		fd = next;
		path += len + 1;
	}
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in the dir at fd, sorted, without "." and ".."; -E2BIG when
 * there are more than limit, -ENOBUFS when they take more than max_bytes
 * (*bytes: what they take). -errno on failure. */
static int read_names(int fd, size_t limit, size_t max_bytes, char ***out, size_t *n, size_t *bytes)
{
	/* A fresh open of ".": works from an O_PATH fd and has its own offset. */
	int dfd = ws_open(fd, ".", O_RDONLY | O_DIRECTORY, 0);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	char **names = NULL;
	size_t count = 0, cap = 0, used = 0;
	int rc = 0;
	if (!d) {
		rc = -errno;
		if (dfd >= 0)
			close(dfd);
		return rc;
	}
	errno = 0;
	for (struct dirent *e; (e = readdir(d)); errno = 0) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (count == limit) {
			rc = -E2BIG;
			break;
		}
		used += strlen(e->d_name) + 1 + sizeof *names;
		if (used > max_bytes) {
			rc = -ENOBUFS;
			break;
		}
		if (count == cap) {
			char **grown = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof *names);
			if (!grown) {
				rc = -ENOMEM;
				break;
			}
			names = grown;
		}
		if (!(names[count] = strdup(e->d_name))) {
			rc = -ENOMEM;
			break;
		}
		count++;
	}
	if (!rc && errno)
		rc = -errno;
	closedir(d);
	if (rc < 0) {
		while (count)
			free(names[--count]);
		free(names);
		return rc;
	}
	if (count > 1)
		qsort(names, count, sizeof *names, cmp_names);
	*out = names;
	*n = count;
	if (bytes)
		*bytes = used;
	return 0;
}

/* Remove name below dirfd: unlink it or, a dir, empty it and rmdir it.
 * unlinkat never follows the name: a symlink goes, its target stays. */
static int remove_entry(int dirfd, const char *name, int depth)
{
	if (unlinkat(dirfd, name, 0) == 0)
		return 0;
	if (errno != EISDIR)
		return -errno;
	if (depth >= SR_WORKSPACE_MAX_DEPTH)
		return -ELOOP;
	int fd = ws_open(dirfd, name, O_PATH | O_DIRECTORY, 0);
	if (fd < 0)
		return -errno;
	char **names = NULL;
	size_t n = 0;
	int rc = read_names(fd, SIZE_MAX, SIZE_MAX, &names, &n, NULL);
	for (size_t i = 0; i < n; i++) {
		if (rc == 0)
			rc = remove_entry(fd, names[i], depth + 1);
		free(names[i]);
	}
	free(names);
	close(fd);
	if (rc == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
		rc = -errno;
	return rc;
}

/* ---- creating and destroying ---------------------------------------------- */

static int check_id(const char *id, sr_error *err)
{
	size_t len = strlen(id);
	if (len == 0 || len > WS_ID_MAX || strspn(id, WS_ID_CHARS) != len) {
		char shown[128];
		return sr_refuse(err, EINVAL,
				 "workspace id \"%s\" is not 1 to %d letters, digits, '-' or '_'",
				 printable(id, shown, sizeof shown), WS_ID_MAX);
	}
	return 0;
}

/* mkdir -p base. The dirs it makes are 0711 whatever the umask: the
 * sandbox's creds (nobody on the host) must get through to BASE/ID to
 * bind it. */
static int make_base(const char *base, sr_error *err)
{
	if (base[0] != '/')
		return sr_refuse(err, EINVAL, "workspace base dir \"%s\" is not an absolute path",
				 base);
	char *dir = strdup(base);
	if (!dir)
		return sr_fail(err, ENOMEM, "workspace base dir");
	int rc = 0;
	for (char *p = dir + 1; rc == 0; p++) {
		bool last = *p == '\0';
		if (*p != '/' && !last)
			continue;
		*p = '\0';
		if (mkdir(dir, 0711) == 0 ? chmod(dir, 0711) < 0 : errno != EEXIST)
			rc = sr_fail(err, errno, "create workspace base dir %s", dir);
		if (last)
			break;
		*p = '/';
	}
	free(dir);
	return rc;
}

static int make_mount_point(sr_workspace *ws, const char *base, const char *id, sr_error *err)
{
	int len = (int)strlen(base);
	while (len > 1 && base[len - 1] == '/')
		len--;
	if (asprintf(&ws->path, "%.*s/%s", len, base, id) < 0) {
		ws->path = NULL;
		return sr_fail(err, ENOMEM, "workspace path");
	}
	ws->id = strrchr(ws->path, '/') + 1;
	if (mkdir(ws->path, 0700) < 0)
		return errno == EEXIST
			   ? sr_refuse(err, EEXIST,
				       "workspace %s already exists at %s (pick another "
				       "id, or destroy that one first)",
				       id, ws->path)
			   : sr_fail(err, errno, "create workspace dir %s", ws->path);
	ws->made_dir = true;
	return 0;
}

static int mount_tmpfs(sr_workspace *ws, sr_error *err)
{
	/* Empty files cost no bytes but pin kernel memory: one inode per
	 * 4 KiB of the cap (at least 1024) bounds them too. */
	uint64_t inodes = ws->cap / 4096 > 1024 ? ws->cap / 4096 : 1024;
	char data[160];
	snprintf(data, sizeof data,
		 "size=%" PRIu64 ",nr_inodes=%" PRIu64 ",mode=0755,uid=%u,gid=%u", ws->cap, inodes,
		 sandbox_uid(ws), sandbox_gid(ws));
	if (mount("tmpfs", ws->path, "tmpfs", MS_NOSUID | MS_NODEV, data) < 0)
		return sr_fail(err, errno, "mount a tmpfs (%s) on %s", data, ws->path);
	ws->mount = true;
	ws->root_fd = open(ws->path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ws->root_fd < 0)
		return sr_fail(err, errno, "open workspace %s", ws->path);
	return 0;
}

static int make_layout(sr_workspace *ws, sr_error *err)
{
	static const char *const dirs[] = { "src", "artifacts" };
	for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
		int fd = open_dir(ws, ws->root_fd, dirs[i], true);
		if (fd == -ENOSYS)
			return sr_refuse(err, ENOSYS,
					 "workspaces need openat2 (Linux 5.6 or later)");
		if (fd < 0)
			return sr_fail(err, -fd, "create %s/%s", ws->path, dirs[i]);
		close(fd);
	}
	return 0;
}

static void teardown(sr_workspace *ws)
{
	if (ws->root_fd >= 0)
		close(ws->root_fd);
	/* Detached: an open fd or a sandbox's bind of it cannot keep it busy. */
	if (ws->mount)
		umount2(ws->path, MNT_DETACH | UMOUNT_NOFOLLOW);
	if (ws->made_dir)
		rmdir(ws->path);
	sr_idslot_release(&ws->ids, false); /* kernels over it are not ours to see */
	free(ws->path);
	free(ws);
}

int sr_workspace_create(const char *base_dir, const char *id, uint64_t size_bytes,
			sr_workspace **out, sr_error *err)
{
	const char *base = base_dir ? base_dir : SR_WORKSPACE_BASE_DIR;
	*out = NULL;
	if (check_id(id, err))
		return -1;
	/* tmpfs reads size=0 as no cap at all. */
	if (size_bytes == 0)
		return sr_refuse(err, EINVAL, "workspace %s: size 0 (give a size in bytes)", id);
	if (make_base(base, err))
		return -1;
	sr_workspace *ws = calloc(1, sizeof *ws);
	if (!ws)
		return sr_fail(err, ENOMEM, "allocate workspace %s", id);
	ws->root_fd = -1;
	ws->cap = size_bytes;
	ws->ids = SR_IDSLOT_NONE;
	if (sr_idslot_take(&ws->ids, err) || make_mount_point(ws, base, id, err) ||
	    mount_tmpfs(ws, err) || make_layout(ws, err)) {
		teardown(ws);
		return -1;
	}
	*out = ws;
	return 0;
}

void sr_workspace_destroy(sr_workspace *ws)
{
	if (ws)
		teardown(ws);
}

void sr_workspace_forget(sr_workspace *ws)
{
	if (!ws)
		return;
	ws->mount = ws->made_dir = false;
	teardown(ws);
}

sr_workspace *sr_workspace_view(int root_fd, const char *label)
{
	sr_workspace *ws = calloc(1, sizeof *ws);
	if (!ws || !(ws->path = strdup(label))) {
		free(ws);
		close(root_fd);
		return NULL;
	}
	ws->id = ws->path;
	ws->root_fd = root_fd;
	ws->ids = SR_IDSLOT_NONE; /* a run's working dir: read, never written */
	return ws;
}

const char *sr_workspace_path(const sr_workspace *ws)
{
	return ws->path;
}

int sr_workspace_usage(sr_workspace *ws, uint64_t *used, uint64_t *cap, sr_error *err)
{
	struct statvfs sv;
	if (fstatvfs(ws->root_fd, &sv) < 0)
		return sr_fail(err, errno, "statfs workspace %s", ws->path);
	*cap = (uint64_t)sv.f_blocks * sv.f_frsize;
	*used = (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
	return 0;
}

bool sr_workspace_full(const sr_workspace *ws)
{
	struct statvfs sv;
	return fstatvfs(ws->root_fd, &sv) == 0 &&
	       (sv.f_bavail == 0 || (sv.f_files > 0 && sv.f_favail == 0));
}

/* ---- files ---------------------------------------------------------------- */

/* Write data to a fresh temp file in dir, then rename it over name: a
 * reader sees the old or the new content, and a full workspace leaves
 * nothing behind. -errno on failure. */
/* What is at name may be replaced: nothing, or not a dir (rename would
 * refuse one only after the whole write) and not a symlink (-ELOOP, as one
 * on the way: the code's link is not the client's file to replace). */
static int check_target(int dir, const char *name)
{
	struct stat st;
	int fd = ws_open(dir, name, O_PATH, 0); /* RESOLVE_NO_SYMLINKS: a link is ELOOP */
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	int rc = fstat(fd, &st) < 0 ? -errno : S_ISDIR(st.st_mode) ? -EISDIR : 0;
	close(fd);
	return rc;
}

static int replace_file(const sr_workspace *ws, int dir, const char *name, const void *data,
			size_t size)
{
	char tmp[40] = ".sr-write-";
	int rc = check_target(dir, name);
	if (rc == 0)
		rc = sr_random_hex(tmp + strlen(tmp), 8);
	if (rc < 0)
		return rc;
	int fd = ws_open(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	if (fchown(fd, sandbox_uid(ws), sandbox_gid(ws)) < 0)
		rc = -errno;
	for (size_t off = 0; rc == 0 && off < size;) {
		ssize_t n = write(fd, (const char *)data + off, size - off);
		if (n < 0 && errno != EINTR)
			rc = -errno;
		else if (n > 0)
			off += (size_t)n;
	}
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	/* A symlink swapped in since check_target is replaced, never followed. */
	if (rc == 0 && renameat(dir, tmp, dir, name) < 0)
		rc = -errno;
	if (rc < 0)
		unlinkat(dir, tmp, 0);
	return rc;
}

int sr_workspace_write(sr_workspace *ws, const char *path, const void *data, size_t size,
		       sr_error *err)
{
	const char *name = NULL;
	if (check_path(path, err))
		return -1;
	int dir = open_parent(ws, path, true, &name);
	if (dir < 0)
		return ws_fail(ws, err, -dir, "write", path);
	int rc = replace_file(ws, dir, name, data, size);
	close(dir);
	return rc < 0 ? ws_fail(ws, err, -rc, "write", path) : 0;
}

/* The whole file, at most max bytes (reads one more to catch a file that
 * grew since fstat); NUL-terminated for convenience. -errno on failure. */
static int read_all(int fd, size_t max, size_t hint, char **out, size_t *size)
{
	size_t cap = hint + 1, n = 0; /* hint <= max */
	char *buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (n == cap) {
			if (cap > max) {
				free(buf);
				return -EFBIG;
			}
			size_t grown = cap > (max + 1) / 2 ? max + 1 : cap * 2;
			char *bigger = realloc(buf, grown + 1);
			if (!bigger) {
				free(buf);
				return -ENOMEM;
			}
			buf = bigger;
			cap = grown;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(buf);
			return -e;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	*out = buf;
	*size = n;
	return 0;
}

/* path as an fd to read, if it is a regular file of at most max bytes;
 * -errno otherwise (-EISDIR, -EINVAL for anything else, -EFBIG). */
static int open_regular(int root_fd, const char *path, size_t max, size_t *size)
{
	struct stat st;
	/* O_NONBLOCK: a fifo the sandbox left here opens without a writer. */
	int fd = ws_open(root_fd, path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW, 0);
	if (fd < 0)
		return errno == ENXIO ? -EINVAL : -errno; /* ENXIO: a unix socket */
	int rc = fstat(fd, &st) < 0           ? -errno
		 : S_ISDIR(st.st_mode)        ? -EISDIR
		 : !S_ISREG(st.st_mode)       ? -EINVAL
		 : (uint64_t)st.st_size > max ? -EFBIG
					      : 0;
	if (rc < 0) {
		close(fd);
		return rc;
	}
	*size = (size_t)st.st_size;
	return fd;
}

int sr_workspace_read(const sr_workspace *ws, const char *path, size_t max, void **data,
		      size_t *size, sr_error *err)
{
	size_t hint = 0;
	*data = NULL;
	*size = 0;
	if (check_path(path, err))
		return -1;
	if (max > SIZE_MAX - 2)
		max = SIZE_MAX - 2; /* room for the byte past max and the NUL */
	char *buf = NULL;
	int fd = open_regular(ws->root_fd, path, max, &hint);
	int rc = fd < 0 ? fd : read_all(fd, max, hint, &buf, size);
	if (fd >= 0)
		close(fd);
	if (rc == 0) {
		*data = buf;
		return 0;
	}
	switch (rc) {
	case -EISDIR:
		return sr_refuse(err, EISDIR, "read \"%s\" in workspace %s: it is a directory",
				 path, ws->id);
	case -EINVAL:
		return sr_refuse(err, EINVAL,
				 "read \"%s\" in workspace %s: not a regular file (a fifo, socket "
				 "or device)",
				 path, ws->id);
	case -EFBIG:
		return sr_refuse(err, EFBIG, "read \"%s\" in workspace %s: over the %zu-byte limit",
				 path, ws->id, max);
	default: return ws_fail(ws, err, -rc, "read", path);
	}
}

int sr_workspace_remove(sr_workspace *ws, const char *path, sr_error *err)
{
	const char *name = NULL;
	if (check_path(path, err)) /* never "": the root stays */
		return -1;
	int dir = open_parent(ws, path, false, &name);
	if (dir < 0)
		return ws_fail(ws, err, -dir, "remove", path);
	int rc = remove_entry(dir, name, 0);
	close(dir);
	/* The way to path had no symlink (open_parent): the tree is too deep, or
	 * the sandbox swapped a dir below for a symlink while we removed it. */
	if (rc == -ELOOP)
		return sr_refuse(err, ELOOP,
				 "remove \"%s\" in workspace %s: nested deeper than %d levels, or "
				 "changed while being removed",
				 path, ws->id, SR_WORKSPACE_MAX_DEPTH);
	return rc < 0 ? ws_fail(ws, err, -rc, "remove", path) : 0;
}

/* ---- single entries: stat, mkdir, rename, a dir's fd ------------------------ */

int sr_workspace_stat(const sr_workspace *ws, const char *path, sr_workspace_entry *out,
		      sr_error *err)
{
	struct stat st;
	memset(out, 0, sizeof *out);
	if (*path && check_path(path, err))
		return -1;
	/* O_PATH without O_NOFOLLOW's help: RESOLVE_NO_SYMLINKS refuses a link
	 * on the way (ELOOP); a link at the end is handed back as itself. */
	int fd = ws_open(ws->root_fd, *path ? path : ".", O_PATH | O_NOFOLLOW, 0);
	if (fd < 0)
		return ws_fail(ws, err, errno, "stat", path);
	int rc = fstatat(fd, "", &st, AT_EMPTY_PATH) < 0 ? -errno : 0;
	close(fd);
	if (rc < 0)
		return ws_fail(ws, err, -rc, "stat", path);
	out->type = S_ISREG(st.st_mode)   ? 'f'
		    : S_ISDIR(st.st_mode) ? 'd'
		    : S_ISLNK(st.st_mode) ? 'l'
					  : 'o';
	out->size = out->type == 'd' ? 0 : (uint64_t)st.st_size;
	out->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
	out->mode = (uint32_t)(st.st_mode & 07777);
	return 0;
}

int sr_workspace_mkdir(sr_workspace *ws, const char *path, sr_error *err)
{
	const char *name = NULL;
	if (check_path(path, err))
		return -1;
	int dir = open_parent(ws, path, true, &name);
	if (dir < 0)
		return ws_fail(ws, err, -dir, "make dir", path);
	int fd = ws_open(dir, name, O_PATH, 0);
	int rc = fd >= 0 ? -EEXIST : errno != ENOENT ? -errno : 0;
	if (fd >= 0)
		close(fd);
	if (rc == 0) {
		fd = open_dir(ws, dir, name, true);
		rc = fd < 0 ? fd : 0;
		if (fd >= 0)
			close(fd);
	}
	close(dir);
	if (rc == -EEXIST)
		return sr_refuse(err, EEXIST, "make dir \"%s\" in workspace %s: it already exists",
				 path, ws->id);
	return rc < 0 ? ws_fail(ws, err, -rc, "make dir", path) : 0;
}

int sr_workspace_rename(sr_workspace *ws, const char *from, const char *to, sr_error *err)
{
	const char *fname = NULL, *tname = NULL;
	if (check_path(from, err) || check_path(to, err))
		return -1;
	size_t flen = strlen(from);
	if (strncmp(to, from, flen) == 0 && to[flen] == '/')
		return sr_refuse(err, EINVAL,
				 "move \"%s\" to \"%s\": a dir cannot go inside itself", from, to);
	int fdir = open_parent(ws, from, false, &fname);
	if (fdir < 0)
		return ws_fail(ws, err, -fdir, "move", from);
	int tdir = open_parent(ws, to, true, &tname);
	if (tdir < 0) {
		close(fdir);
		return ws_fail(ws, err, -tdir, "move to", to);
	}
	/* renameat never follows either name: a symlink moves as itself, and
	 * one at the destination is replaced, never written through. */
	int rc = renameat(fdir, fname, tdir, tname) < 0 ? -errno : 0;
	close(fdir);
	close(tdir);
	return rc < 0 ? ws_fail(ws, err, -rc, "move", from) : 0;
}

int sr_workspace_open_dir(const sr_workspace *ws, const char *path, sr_error *err)
{
	if (*path && check_path(path, err))
		return -1;
	int fd = ws_open(ws->root_fd, *path ? path : ".", O_PATH | O_DIRECTORY, 0);
	return fd >= 0 ? fd : ws_fail(ws, err, errno, "open dir", path);
}

/* ---- listing -------------------------------------------------------------- */

/* A listing's memory is bounded in bytes as well as entries: each path
 * holds every dir above it, so a deep tree of long names would cost depth
 * x 256 bytes an entry (hundreds of MB in the caller, outside any run's
 * cgroup). Counted: the entries, their paths and the names of the dirs
 * being walked. */
struct lister {
	const sr_workspace *ws;
	const char *top; /* the dir asked for */
	sr_workspace_entry *e;
	size_t n, cap, max;
	size_t bytes, max_bytes;
	sr_list_cut *cut; /* NULL: a cap fails the listing (sr_workspace_list) */
	sr_error *err;
};

/* A cap reached: 1 (stop, keep what is listed) for a partial listing,
 * -1 and E2BIG otherwise. */
static int cap_reached(struct lister *l, sr_list_cut why)
{
	if (l->cut) {
		*l->cut = why;
		return 1;
	}
	if (why == SR_LIST_CUT_BYTES)
		return sr_refuse(l->err, E2BIG,
				 "list \"%s\" in workspace %s: the names take more than %zu bytes "
				 "(list a dir below it)",
				 l->top, l->ws->id, l->max_bytes);
	return sr_refuse(l->err, E2BIG,
			 "list \"%s\" in workspace %s: more than %zu entries (list a dir below "
			 "it, or raise the limit)",
			 l->top, l->ws->id, l->max);
}

/* Keeps path on success; 1: a cap was reached (path not kept). */
static int list_add(struct lister *l, char *path, const struct stat *st)
{
	size_t cost = sizeof *l->e + strlen(path) + 1;
	if (l->n == l->max)
		return cap_reached(l, SR_LIST_CUT_ENTRIES);
	if (l->bytes + cost > l->max_bytes)
		return cap_reached(l, SR_LIST_CUT_BYTES);
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		sr_workspace_entry *grown = realloc(l->e, cap * sizeof *grown);
		if (!grown)
			return sr_fail(l->err, ENOMEM, "list \"%s\"", l->top);
		l->e = grown;
		l->cap = cap;
	}
	l->bytes += cost;
	sr_workspace_entry *e = &l->e[l->n++];
	e->path = path;
	e->type = S_ISREG(st->st_mode)   ? 'f'
		  : S_ISDIR(st->st_mode) ? 'd'
		  : S_ISLNK(st->st_mode) ? 'l'
					 : 'o';
	e->size = e->type == 'd' ? 0 : (uint64_t)st->st_size;
	e->mtime_ns = (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
	e->mode = (uint32_t)(st->st_mode & 07777);
	return 0;
}

static int list_dir(struct lister *l, int fd, const char *prefix, int depth);

/* Too deep to go on: a partial listing leaves the dir's content out and
 * goes on with the rest. */
static int too_deep(struct lister *l, const char *path)
{
	if (l->cut) {
		if (*l->cut == SR_LIST_WHOLE)
			*l->cut = SR_LIST_CUT_DEPTH;
		return 0;
	}
	return sr_refuse(l->err, ELOOP,
			 "list \"%s\" in workspace %s: \"%s\" is nested deeper than %d "
			 "levels (list a dir further down)",
			 l->top, l->ws->id, path, SR_WORKSPACE_MAX_DEPTH);
}

/* One entry below the dir at fd and, for a dir, what is in it. */
static int list_one(struct lister *l, int fd, const char *prefix, const char *name, int depth)
{
	struct stat st;
	char *path;
	if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : ws_fail(l->ws, l->err, errno, "list", l->top);
	if (asprintf(&path, "%s%s%s", prefix, *prefix ? "/" : "", name) < 0)
		return sr_fail(l->err, ENOMEM, "list \"%s\"", l->top);
	int rc = list_add(l, path, &st);
	if (rc != 0) {
		free(path);
		return rc;
	}
	if (!S_ISDIR(st.st_mode))
		return 0;
	if (depth >= SR_WORKSPACE_MAX_DEPTH)
		return too_deep(l, path);
	int sub = ws_open(fd, name, O_PATH | O_DIRECTORY, 0);
	if (sub < 0) /* gone, or swapped for something else since the fstatat */
		return errno == ENOENT || errno == ENOTDIR || errno == ELOOP
			   ? 0
			   : ws_fail(l->ws, l->err, errno, "list", path);
	rc = list_dir(l, sub, path, depth + 1);
	close(sub);
	return rc;
}

/* Each entry of the dir at fd, each dir followed by what is in it;
 * siblings in strcmp order, so the paths come sorted part by part.
 * 0, 1 when a cap was reached (stop), -1 on failure. */
static int list_dir(struct lister *l, int fd, const char *prefix, int depth)
{
	char **names = NULL;
	size_t n = 0, held = 0;
	int rc = read_names(fd, l->max - l->n, l->max_bytes - l->bytes, &names, &n, &held);
	if (rc == -E2BIG || rc == -ENOBUFS)
		return cap_reached(l, rc == -E2BIG ? SR_LIST_CUT_ENTRIES : SR_LIST_CUT_BYTES);
	if (rc < 0)
		return ws_fail(l->ws, l->err, -rc, "list", *prefix ? prefix : l->top);
	l->bytes += held; /* the names are held while the dirs below are walked */
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = list_one(l, fd, prefix, names[i], depth);
	l->bytes -= held;
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

static int list(const sr_workspace *ws, struct lister *l, sr_workspace_entry **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (*l->top && check_path(l->top, l->err))
		return -1;
	int fd = ws_open(ws->root_fd, *l->top ? l->top : ".", O_PATH | O_DIRECTORY, 0);
	if (fd < 0)
		return ws_fail(ws, l->err, errno, "list", l->top);
	int rc = list_dir(l, fd, l->top, 0);
	close(fd);
	if (rc < 0) {
		sr_workspace_entries_free(l->e, l->n);
		return -1;
	}
	*out = l->e;
	*n = l->n;
	return 0;
}

int sr_workspace_list(const sr_workspace *ws, const char *dir, size_t max_entries,
		      sr_workspace_entry **out, size_t *n, sr_error *err)
{
	struct lister l = { .ws = ws,
			    .top = dir ? dir : "",
			    .max = max_entries,
			    .max_bytes = SR_WORKSPACE_LIST_MAX_BYTES,
			    .err = err };
	return list(ws, &l, out, n);
}

int sr_workspace_list_partial(const sr_workspace *ws, const char *dir, size_t max_entries,
			      size_t max_bytes, sr_workspace_entry **out, size_t *n,
			      sr_list_cut *cut, sr_error *err)
{
	struct lister l = { .ws = ws,
			    .top = dir ? dir : "",
			    .max = max_entries,
			    .max_bytes = max_bytes,
			    .cut = cut,
			    .err = err };
	*cut = SR_LIST_WHOLE;
	return list(ws, &l, out, n);
}

void sr_workspace_entries_free(sr_workspace_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(e[i].path);
	free(e);
}

/* ---- stale workspaces ----------------------------------------------------- */

/* Unmount whatever is stacked on path; 0 once it is no mount point. */
static int detach_all(const char *path)
{
	for (int i = 0; i < 64; i++)
		if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
			return errno == EINVAL ? 0 : -errno;
	return -EBUSY;
}

/* 1: base/name was a workspace and is gone; 0: not a dir, not ours. */
static int remove_stale(int base_fd, const char *base, const char *name, sr_error *err)
{
	struct stat st;
	char path[PATH_MAX];
	if (fstatat(base_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	if ((size_t)snprintf(path, sizeof path, "%s/%s", base, name) >= sizeof path)
		return sr_refuse(err, ENAMETOOLONG, "stale workspace path %s/%s is too long", base,
				 name);
	int rc = detach_all(path);
	if (rc == 0)
		rc = remove_entry(base_fd, name, 0);
	return rc < 0 ? sr_fail(err, -rc, "remove stale workspace %s", path) : 1;
}

int sr_workspace_cleanup_stale(const char *base_dir, sr_error *err)
{
	const char *base = base_dir ? base_dir : SR_WORKSPACE_BASE_DIR;
	int fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : sr_fail(err, errno, "open workspace dir %s", base);
	char **names = NULL;
	size_t n = 0;
	int rc = read_names(fd, SIZE_MAX, SIZE_MAX, &names, &n, NULL), removed = 0;
	if (rc < 0)
		sr_fail(err, -rc, "list stale workspaces in %s", base);
	for (size_t i = 0; i < n; i++) {
		int one = remove_stale(fd, base, names[i], rc < 0 ? NULL : err);
		if (one < 0)
			rc = -1; /* the first error is the one reported */
		removed += one > 0;
		free(names[i]);
	}
	free(names);
	close(fd);
	return rc < 0 ? -1 : removed;
}

const sr_idslot *sr_workspace_ids(const sr_workspace *ws)
{
	return ws->ids.fd >= 0 ? &ws->ids : NULL;
}

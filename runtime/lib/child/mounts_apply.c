#include "mounts_ops.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

const char *const sr_proc_masked[] = {
	"kcore",         "keys",        "timer_list",  "sched_debug", "sysrq-trigger", "kallsyms",
	"latency_stats", "acpi",        "scsi",        "asound",      "firmware",      "kpagecount",
	"kpageflags",    "kpagecgroup", "vmallocinfo", "config.gz",
};
const size_t sr_n_proc_masked = sizeof sr_proc_masked / sizeof *sr_proc_masked;
const char *const sr_proc_readonly[] = { "sys", "irq", "bus", "fs", "pressure" };
const size_t sr_n_proc_readonly = sizeof sr_proc_readonly / sizeof *sr_proc_readonly;

/* ---- applying (child side: no allocation) ------------------------------- */

/* Read-only, nosuid, nodev (unless devices), recursively. mount_setattr
 * keeps the flags the kernel locked for a less privileged namespace; the
 * remount fallback must repeat them or the kernel refuses with EPERM. */
static int make_readonly(const char *path, bool dev, bool recursive)
{
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | (dev ? 0 : MOUNT_ATTR_NODEV),
	};
	unsigned flags = recursive ? AT_RECURSIVE : 0;
	if (syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &attr, sizeof attr) == 0)
		return 0;
	if (errno != ENOSYS)
		return -errno;
	struct statvfs sv;
	if (statvfs(path, &sv) < 0)
		return -errno;
	unsigned long fl = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | (dev ? 0 : MS_NODEV) |
			   (recursive ? MS_REC : 0);
	fl |= (sv.f_flag & ST_NODEV ? MS_NODEV : 0) | (sv.f_flag & ST_NOEXEC ? MS_NOEXEC : 0) |
	      (sv.f_flag & ST_NOATIME ? MS_NOATIME : 0) |
	      (sv.f_flag & ST_NODIRATIME ? MS_NODIRATIME : 0) |
	      (sv.f_flag & ST_RELATIME ? MS_RELATIME : 0);
	return mount(NULL, path, NULL, fl, NULL) < 0 ? -errno : 0;
}

static int write_file(const sr_mount_op *op)
{
	int fd = open(op->dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, op->mode);
	if (fd < 0)
		return -errno;
	const char *d = op->data;
	size_t left = op->len;
	int rc = 0;
	while (left && rc == 0) {
		ssize_t n = write(fd, d, left);
		if (n < 0 && errno != EINTR)
			rc = -errno;
		else if (n > 0) {
			d += n;
			left -= (size_t)n;
		}
	}
	if (rc == 0 && (op->flags & OPF_OWN) && fchown(fd, op->uid, op->gid) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* /dev/null over a file, an empty read-only tmpfs over a dir. */
static int mask(const char *dst, const char *devnull)
{
	struct stat st;
	if (stat(dst, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return mount("tmpfs", dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			     "size=0,nr_inodes=1,mode=0555") < 0
			   ? -errno
			   : 0;
	return mount(devnull, dst, NULL, MS_BIND, NULL) < 0 ? -errno : 0;
}

static int apply_one(const sr_mount_op *op)
{
	char src[PATH_MAX], data[96];
	switch (op->kind) {
	case OP_TMPFS:
		snprintf(data, sizeof data, "size=%llu,nr_inodes=%llu,mode=%o",
			 (unsigned long long)op->size,
			 (unsigned long long)sr_tmpfs_inodes(op->size), op->mode);
		return mount("tmpfs", op->dst, "tmpfs", MS_NOSUID | MS_NODEV, data) < 0 ? -errno
											: 0;
	case OP_BIND:
	case OP_BIND_NEW:
		snprintf(src, sizeof src, "%s%s", op->kind == OP_BIND ? OLDROOT : "",
			 op->src ? op->src : op->dst);
		if (mount(src, op->dst, NULL, MS_BIND | MS_REC, NULL) < 0)
			return -errno;
		/* Recursive: submounts of the source come along read-only too. */
		return op->flags & OPF_RW ? 0 : make_readonly(op->dst, op->flags & OPF_DEV, true);
	case OP_MKDIR:
		if (mkdir(op->dst, op->mode) < 0)
			return errno == EEXIST ? 0 : -errno;
		if (chmod(op->dst, op->mode) < 0)
			return -errno;
		return op->flags & OPF_OWN && chown(op->dst, op->uid, op->gid) < 0 ? -errno : 0;
	case OP_TOUCH: {
		int fd = open(op->dst, O_WRONLY | O_CREAT | O_CLOEXEC, op->mode ? op->mode : 0644);
		return fd < 0 ? -errno : close(fd);
	}
	case OP_SYMLINK: return symlink(op->src, op->dst) < 0 ? -errno : 0;
	case OP_WRITE: return write_file(op);
	case OP_PROC:
		return mount("proc", op->dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0
			   ? -errno
			   : 0;
	case OP_MASK: return mask(op->dst, NEWROOT "/dev/null");
	case OP_READONLY:
		/* Only this mount: the writable binds below it stay writable. */
		return make_readonly(op->dst, op->flags & OPF_DEV, false);
	}
	return -EINVAL;
}

/* A step of a set-up sequence: on failure, say which in `what` and return
 * the -errno (the functions below have rc, what and what_size). */
#define STEP(call, ...)                                         \
	do {                                                    \
		if ((rc = (call)) < 0) {                        \
			snprintf(what, what_size, __VA_ARGS__); \
			return rc;                              \
		}                                               \
	} while (0)
#define SYS(call) ((call) < 0 ? -errno : 0)

static const char *op_name(enum op_kind k)
{
	static const char *const names[] = {
		"mount tmpfs on", "bind read-only", "bind",          "create dir", "create file",
		"create symlink", "write",          "mount proc on", "mask",       "make read-only",
	};
	return names[k];
}

int sr_mounts_apply(const sr_mount_plan *plan, const char *workdir, char *what, size_t what_size)
{
	int rc;
	/* Nothing we mount may propagate back to the host. */
	STEP(SYS(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)), "make mounts private");
	STEP(SYS(mount("tmpfs", STAGE, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")),
	     "mount the staging tmpfs");
	STEP(SYS(mkdir(STAGE OLDROOT, 0755)), "create " OLDROOT);
	STEP(SYS(mkdir(STAGE NEWROOT, 0755)), "create " NEWROOT);
	STEP(SYS(mkdir(STAGE RW, 0755)), "create " RW);
	/* First pivot: the host root moves to /oldroot, so bind sources are
	 * reached through it and nothing we stage can shadow them. */
	STEP(SYS(syscall(SYS_pivot_root, STAGE, STAGE OLDROOT)), "pivot into the staging tmpfs");
	STEP(SYS(chdir("/")), "chdir to the staging root");
	for (size_t i = 0; i < plan->n; i++) {
		const sr_mount_op *op = &plan->ops[i];
		struct stat st;
		if ((op->flags & OPF_OPTIONAL) && op->kind != OP_MKDIR && stat(op->dst, &st) < 0)
			continue;
		rc = apply_one(op);
		if (rc == -EEXIST && op->kind == OP_MKDIR)
			continue;
		STEP(rc, "%s %s", op_name(op->kind), op->dst);
	}
	/* Second pivot: the new root becomes /, and the stage with the host
	 * root under it is detached, unreachable from inside. */
	STEP(SYS(chdir(NEWROOT)), "chdir to the new root");
	STEP(SYS(syscall(SYS_pivot_root, ".", ".")), "pivot into the new root");
	STEP(SYS(umount2(".", MNT_DETACH)), "detach the old root");
	STEP(SYS(chdir("/")), "chdir to /");
	STEP(SYS(chdir(workdir)), "chdir to %s", workdir);
	return 0;
}

/* Dir `name` of the fresh tmpfs (staged at /proc), owned by the sandbox
 * user, replaces whatever is mounted at dst. */
static int bind_dir(const char *name, mode_t mode, const sr_renew_spec *s, const char *dst)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "/proc/%s", name);
	if (mkdir(path, mode) < 0 || chmod(path, mode) < 0 || chown(path, s->uid, s->gid) < 0)
		return -errno;
	/* The zygote's own mount goes (its tmpfs stays its own). */
	if (umount2(dst, MNT_DETACH) < 0 && errno != EINVAL)
		return -errno;
	return mount(path, dst, NULL, MS_BIND, NULL) < 0 ? -errno : 0;
}

int sr_mounts_renew(const sr_renew_spec *s, char *what, size_t what_size)
{
	char path[PATH_MAX];
	int rc;
	/* Staged over the zygote's /proc (a dir that exists in every root and
	 * is replaced below anyway), its dirs bound into place, then detached:
	 * nothing of it is reachable but those dirs. */
	snprintf(path, sizeof path, "size=%llu,nr_inodes=%llu,mode=755",
		 (unsigned long long)s->tmpfs_bytes,
		 (unsigned long long)sr_tmpfs_inodes(s->tmpfs_bytes));
	STEP(SYS(mount("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV, path)),
	     "mount the writable tmpfs");
	for (size_t i = 0; i < s->n_writable; i++) {
		const char *w = s->writable[i];
		char name[32];
		snprintf(name, sizeof name, "%zu", i);
		STEP(bind_dir(name, strcmp(w, s->workdir) == 0 ? 0755 : 01777, s, w),
		     "mount a fresh %s", w);
	}
	STEP(bind_dir("shm", 01777, s, "/dev/shm"), "mount a fresh /dev/shm");
	STEP(SYS(umount2("/proc", MNT_DETACH)), "detach the staged tmpfs");
	/* Over the zygote's /proc: the kernel lets a user namespace mount a
	 * proc only where one is already fully visible, and the new one shows
	 * this pid namespace. Then the same masks as a cold sandbox's. */
	STEP(mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ? -errno
											: 0,
	     "mount proc on /proc");
	for (size_t i = 0; i < sr_n_proc_masked; i++) {
		struct stat st;
		snprintf(path, sizeof path, "/proc/%s", sr_proc_masked[i]);
		if (stat(path, &st) == 0)
			STEP(mask(path, "/dev/null"), "mask %s", path);
	}
	for (size_t i = 0; i < sr_n_proc_readonly; i++) {
		struct stat st;
		snprintf(path, sizeof path, "/proc/%s", sr_proc_readonly[i]);
		if (stat(path, &st) < 0)
			continue;
		STEP(mount(path, path, NULL, MS_BIND | MS_REC, NULL) < 0 ? -errno : 0, "bind %s",
		     path);
		STEP(make_readonly(path, false, true), "make read-only %s", path);
	}
	STEP(SYS(chdir(s->workdir)), "chdir to %s", s->workdir);
	return 0;
}

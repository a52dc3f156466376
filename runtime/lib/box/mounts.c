#include "mounts.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"

#include "child/child.h"

/* ---- planning (supervisor side) ---------------------------------------- */

static sr_mount_op *add(sr_mount_plan *p, enum op_kind kind, unsigned flags, const char *src,
			const char *dst_fmt, ...) __attribute__((format(printf, 5, 6)));

static sr_mount_op *add(sr_mount_plan *p, enum op_kind kind, unsigned flags, const char *src,
			const char *dst_fmt, ...)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 64;
		sr_mount_op *ops = realloc(p->ops, cap * sizeof *ops);
		if (!ops)
			return NULL;
		p->ops = ops;
		p->cap = cap;
	}
	sr_mount_op *op = &p->ops[p->n];
	memset(op, 0, sizeof *op);
	op->kind = kind;
	op->flags = flags;
	va_list ap;
	va_start(ap, dst_fmt);
	int n = vasprintf(&op->dst, dst_fmt, ap);
	va_end(ap);
	if (n < 0 || (src && !(op->src = strdup(src)))) {
		free(n < 0 ? NULL : op->dst);
		return NULL;
	}
	p->n++;
	return op;
}

void sr_mounts_plan_free(sr_mount_plan *plan)
{
	for (size_t i = 0; i < plan->n; i++) {
		free(plan->ops[i].src);
		free(plan->ops[i].dst);
	}
	free(plan->ops);
	memset(plan, 0, sizeof *plan);
}

int sr_mounts_check_name(const char *name, sr_error *err)
{
	size_t len = strlen(name);
	if (len == 0 || len >= PATH_MAX / 2)
		return sr_refuse(err, EINVAL, "file name \"%s\" is empty or too long", name);
	if (name[0] == '/')
		return sr_refuse(err, EINVAL,
				 "file name \"%s\" must be relative to the working dir", name);
	for (const char *part = name; part;
	     part = strchr(part, '/') ? strchr(part, '/') + 1 : NULL) {
		size_t plen = strcspn(part, "/");
		if (plen == 0 || (plen == 1 && part[0] == '.') ||
		    (plen == 2 && strncmp(part, "..", 2) == 0))
			return sr_refuse(err, EINVAL,
					 "file name \"%s\" has an empty, \".\" or \"..\" part",
					 name);
		if (plen > NAME_MAX)
			return sr_refuse(err, EINVAL, "file name \"%s\" has a part over %d bytes",
					 name, NAME_MAX);
	}
	return 0;
}

int sr_mounts_check_files_for(const sr_file *files, size_t n, const char *code_name, sr_error *err)
{
	for (size_t i = 0; i < n; i++) {
		if (sr_mounts_check_name(files[i].name, err))
			return -1;
		if (strcmp(files[i].name, code_name) == 0)
			return sr_refuse(err, EEXIST,
					 "file name \"%s\" is taken by the code itself", code_name);
	}
	return 0;
}

int sr_mounts_check_files(const sr_file *files, size_t n, sr_error *err)
{
	return sr_mounts_check_files_for(files, n, "main.py", err);
}

int sr_mounts_find_profile(const char *dir, const char *profile, char **rootfs, sr_error *err)
{
	*rootfs = NULL;
	/* The name becomes a path: no "..", no "/", no hidden build dirs. */
	size_t len = strlen(profile),
	       ok = strspn(profile, "abcdefghijklmnopqrstuvwxyz0123456789_-");
	if (len == 0 || len > 64 || ok != len || profile[0] == '-')
		return sr_refuse(err, EINVAL,
				 "profile \"%s\" is not a profile name (lowercase letters, "
				 "digits, '-' and '_'; e.g. host, minimal, datascience)",
				 profile);
	if (strcmp(profile, "host") == 0) {
		if (access("/usr/bin/python3", X_OK) < 0)
			return sr_refuse(err, errno,
					 "the host profile needs the host's /usr/bin/python3 "
					 "(apt-get install python3, or build a rootfs: saferun "
					 "rootfs build minimal)");
		return 0;
	}
	char *path, py[PATH_MAX];
	if (asprintf(&path, "%s/%s", dir, profile) < 0)
		return sr_refuse(err, ENOMEM, "rootfs path");
	struct stat st;
	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
		int e = errno ? errno : ENOTDIR;
		sr_refuse(err, e,
			  "rootfs profile \"%s\" is not built at %s (build it with "
			  "saferun rootfs build %s, or use --profile host)",
			  profile, path, profile);
		free(path);
		return -1;
	}
	snprintf(py, sizeof py, "%s/usr/bin/python3", path);
	if (access(py, X_OK) < 0) {
		sr_refuse(err, errno,
			  "rootfs %s has no usable %s (rebuild it with scripts/build-rootfs "
			  "--force %s)",
			  path, "/usr/bin/python3", profile);
		free(path);
		return -1;
	}
	*rootfs = path;
	return 0;
}

/* The host profile: an empty read-only root with the host's /usr and the
 * few /etc files Python needs, nothing else of the host. */
static const char *const host_top[] = { "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
static const char *const host_etc[] = {
	"ld.so.cache",     "ld.so.conf",   "ld.so.conf.d", "localtime",  "ssl",
	"ca-certificates", "alternatives", "python3",      "python3.11", "python3.12",
	"python3.13",      "matplotlibrc", "fonts",        "mime.types",
};
static const char etc_passwd[] = "root:x:0:0:root:/root:/usr/sbin/nologin\n"
				 "sandbox:x:1000:1000:sandbox:/work:/usr/sbin/nologin\n"
				 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char etc_group[] = "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n";
static const char etc_hosts[] = "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n";

/* One host path in the skeleton: symlinks are recreated (their targets
 * resolve inside the sandbox), dirs and files are bound read-only. */
static int plan_host_entry(sr_mount_plan *p, const char *host)
{
	char target[PATH_MAX];
	struct stat st;
	if (lstat(host, &st) < 0)
		return 0;
	if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlink(host, target, sizeof target - 1);
		if (n < 0)
			return 0;
		target[n] = '\0';
		return add(p, OP_SYMLINK, 0, target, NEWROOT "%s", host) ? 0 : -1;
	}
	bool dir = S_ISDIR(st.st_mode);
	if (!dir && !S_ISREG(st.st_mode))
		return 0;
	sr_mount_op *op = add(p, dir ? OP_MKDIR : OP_TOUCH, 0, NULL, NEWROOT "%s", host);
	if (!op)
		return -1;
	op->mode = dir ? 0755 : 0644;
	return add(p, OP_BIND, 0, host, NEWROOT "%s", host) ? 0 : -1;
}

static int plan_host_root(sr_mount_plan *p, const char *hosts)
{
	sr_mount_op *op = add(p, OP_TMPFS, 0, NULL, NEWROOT);
	if (!op)
		return -1;
	op->size = 1 << 20;
	op->mode = 0755;
	char host[PATH_MAX];
	for (size_t i = 0; i < sizeof host_top / sizeof *host_top; i++) {
		snprintf(host, sizeof host, "/%s", host_top[i]);
		if (plan_host_entry(p, host))
			return -1;
	}
	if (!(op = add(p, OP_MKDIR, 0, NULL, NEWROOT "/etc")))
		return -1;
	op->mode = 0755;
	for (size_t i = 0; i < sizeof host_etc / sizeof *host_etc; i++) {
		snprintf(host, sizeof host, "/etc/%s", host_etc[i]);
		if (plan_host_entry(p, host))
			return -1;
	}
	const struct {
		const char *name, *text;
	} files[] = {
		{ "passwd", etc_passwd },
		{ "group", etc_group },
		{ "hosts", hosts ? hosts : etc_hosts },
	};
	for (size_t i = 0; i < 3; i++) {
		if (!(op = add(p, OP_WRITE, 0, NULL, NEWROOT "/etc/%s", files[i].name)))
			return -1;
		op->data = files[i].text;
		op->len = strlen(files[i].text);
		op->mode = 0644;
	}
	static const char *const dirs[] = { "/proc", "/dev", "/root", "/var", "/var/tmp" };
	for (size_t i = 0; i < 5; i++) {
		if (!(op = add(p, OP_MKDIR, 0, NULL, NEWROOT "%s", dirs[i])))
			return -1;
		op->mode = 0755;
	}
	return 0;
}

/* The mount point for a writable dir in the skeleton root, with every
 * parent ("/home/user/work" needs /home and /home/user too). */
static int plan_mkdir_parents(sr_mount_plan *p, const char *path)
{
	for (const char *slash = strchr(path + 1, '/');; slash = strchr(slash + 1, '/')) {
		int len = slash ? (int)(slash - path) : (int)strlen(path);
		sr_mount_op *op = add(p, OP_MKDIR, 0, NULL, NEWROOT "%.*s", len, path);
		if (!op)
			return -1;
		op->mode = 0755;
		if (!slash)
			return 0;
	}
}

static int plan_writable(sr_mount_plan *p, const sr_fs_spec *s, bool skeleton)
{
	sr_mount_op *op = add(p, OP_TMPFS, 0, NULL, RW);
	if (!op)
		return -1;
	op->size = s->tmpfs_bytes;
	op->mode = 0755;
	for (size_t i = 0; i < s->n_writable; i++) {
		bool work = strcmp(s->writable[i], s->workdir) == 0;
		if (skeleton && plan_mkdir_parents(p, s->writable[i]))
			return -1;
		if (work && s->workdir_host) {
			if (!add(p, OP_BIND, OPF_RW, s->workdir_host, NEWROOT "%s", s->workdir))
				return -1;
			continue;
		}
		if (!(op = add(p, OP_MKDIR, OPF_OWN, NULL, RW "/%zu", i)))
			return -1;
		op->mode = work ? 0755 : 01777;
		char src[64];
		snprintf(src, sizeof src, RW "/%zu", i);
		if (!add(p, OP_BIND_NEW, OPF_RW, src, NEWROOT "%s", s->writable[i]))
			return -1;
	}
	return 0;
}

static int plan_dev(sr_mount_plan *p)
{
	static const char *const devs[] = { "null", "zero", "full", "random", "urandom" };
	sr_mount_op *op = add(p, OP_TMPFS, 0, NULL, NEWROOT "/dev");
	if (!op)
		return -1;
	op->size = 64 << 10;
	op->mode = 0755;
	for (size_t i = 0; i < 5; i++) {
		char host[32];
		snprintf(host, sizeof host, "/dev/%s", devs[i]);
		if (!add(p, OP_TOUCH, 0, NULL, NEWROOT "%s", host) ||
		    !add(p, OP_BIND, OPF_RW | OPF_DEV, host, NEWROOT "%s", host))
			return -1;
	}
	static const char *const links[][2] = {
		{ "/proc/self/fd", "fd" },
		{ "/proc/self/fd/0", "stdin" },
		{ "/proc/self/fd/1", "stdout" },
		{ "/proc/self/fd/2", "stderr" },
	};
	for (size_t i = 0; i < 4; i++)
		if (!add(p, OP_SYMLINK, 0, links[i][0], NEWROOT "/dev/%s", links[i][1]))
			return -1;
	/* POSIX semaphores (multiprocessing) live in /dev/shm: give it a dir
	 * of the writable tmpfs so it shares the size cap. */
	if (!(op = add(p, OP_MKDIR, OPF_OWN, NULL, RW "/shm")))
		return -1;
	op->mode = 01777;
	if (!(op = add(p, OP_MKDIR, 0, NULL, NEWROOT "/dev/shm")))
		return -1;
	op->mode = 0755;
	return add(p, OP_BIND_NEW, OPF_RW, RW "/shm", NEWROOT "/dev/shm") &&
		       add(p, OP_READONLY, OPF_DEV, NULL, NEWROOT "/dev")
		   ? 0
		   : -1;
}

/* /proc of the sandbox's own pid namespace, with the host-wide files that
 * leak kernel state or accept writes masked (as runc and crun do). */
static int plan_proc(sr_mount_plan *p)
{
	if (!add(p, OP_PROC, 0, NULL, NEWROOT "/proc"))
		return -1;
	for (size_t i = 0; i < sr_n_proc_masked; i++)
		if (!add(p, OP_MASK, OPF_OPTIONAL, NULL, NEWROOT "/proc/%s", sr_proc_masked[i]))
			return -1;
	for (size_t i = 0; i < sr_n_proc_readonly; i++)
		if (!add(p, OP_BIND_NEW, OPF_OPTIONAL, NULL, NEWROOT "/proc/%s",
			 sr_proc_readonly[i]))
			return -1;
	return 0;
}

static int plan_files(sr_mount_plan *p, const sr_fs_spec *s, size_t work_index)
{
	sr_mount_op *op;
	if (!s->code)
		return 0; /* a kernel: code comes over its control socket */
	if (!(op = add(p, OP_WRITE, OPF_OWN, NULL, RW "/%zu/%s", work_index,
		       s->code_name ? s->code_name : "main.py")))
		return -1;
	op->data = s->code;
	op->len = s->code_size;
	op->mode = 0644;
	for (size_t i = 0; i < s->n_files; i++) {
		const char *name = s->files[i].name;
		/* Parent directories of nested names, made owned by the user. */
		for (const char *slash = strchr(name, '/'); slash; slash = strchr(slash + 1, '/')) {
			if (!(op = add(p, OP_MKDIR, OPF_OWN | OPF_OPTIONAL, NULL, RW "/%zu/%.*s",
				       work_index, (int)(slash - name), name)))
				return -1;
			op->mode = 0755;
		}
		if (!(op = add(p, OP_WRITE, OPF_OWN, NULL, RW "/%zu/%s", work_index, name)))
			return -1;
		op->data = s->files[i].data;
		op->len = s->files[i].size;
		op->mode = 0644;
	}
	return 0;
}

/* The allow list's names pinned to their addresses (egress): on a built
 * rootfs written into the stage and bound over its /etc/hosts (the host
 * profile's skeleton writes them in plan_host_root). */
static int plan_hosts(sr_mount_plan *p, const sr_fs_spec *s, bool host)
{
	if (!s->hosts || host)
		return 0;
	sr_mount_op *op = add(p, OP_WRITE, 0, NULL, "%s", "/hosts");
	if (!op)
		return -1;
	op->data = s->hosts;
	op->len = strlen(s->hosts);
	op->mode = 0644;
	return add(p, OP_BIND_NEW, OPF_OPTIONAL, "/hosts", NEWROOT "/etc/hosts") ? 0 : -1;
}

/* The resolvers an egress policy opens: written into the skeleton's /etc,
 * or, on a (read-only) built rootfs, into the stage and bound over its
 * /etc/resolv.conf. */
static int plan_resolv_conf(sr_mount_plan *p, const sr_fs_spec *s, bool host)
{
	if (!s->resolv_conf)
		return 0;
	sr_mount_op *op =
	    add(p, OP_WRITE, 0, NULL, "%s", host ? NEWROOT "/etc/resolv.conf" : "/resolv.conf");
	if (!op)
		return -1;
	op->data = s->resolv_conf;
	op->len = strlen(s->resolv_conf);
	op->mode = 0644;
	if (host)
		return 0;
	return add(p, OP_BIND_NEW, OPF_OPTIONAL, "/resolv.conf", NEWROOT "/etc/resolv.conf") ? 0
											     : -1;
}

static int check_spec(const sr_fs_spec *s, size_t *work_index, sr_error *err)
{
	*work_index = SIZE_MAX;
	for (size_t i = 0; i < s->n_writable; i++) {
		const char *w = s->writable[i];
		if (w[0] != '/' || strstr(w, "/..") || strcmp(w, "/") == 0)
			return sr_refuse(err, EINVAL,
					 "writable dir \"%s\" must be an absolute path below /", w);
		if (strcmp(w, s->workdir) == 0)
			*work_index = i;
		if (s->rootfs) {
			char path[PATH_MAX];
			struct stat st;
			snprintf(path, sizeof path, "%s%s", s->rootfs, w);
			if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
				return sr_refuse(
				    err, ENOENT,
				    "writable dir %s does not exist in rootfs %s "
				    "(rebuild the rootfs or change filesystem.writable)",
				    w, s->rootfs);
		}
	}
	if (*work_index == SIZE_MAX)
		return sr_refuse(err, EINVAL, "working dir %s is not one of the writable dirs",
				 s->workdir);
	if (s->n_files && !s->code)
		return sr_refuse(
		    err, EINVAL,
		    "files cannot be given to a kernel (write them into its workspace)");
	return sr_mounts_check_files_for(s->files, s->n_files,
					 s->code_name ? s->code_name : "main.py", err);
}

int sr_mounts_plan(const sr_fs_spec *s, sr_mount_plan *p, sr_error *err)
{
	size_t work_index;
	memset(p, 0, sizeof *p);
	if (check_spec(s, &work_index, err))
		return -1;
	bool host = s->rootfs == NULL;
	int rc =
	    host ? plan_host_root(p, s->hosts) : (add(p, OP_BIND, 0, s->rootfs, NEWROOT) ? 0 : -1);
	if (!rc)
		rc = plan_writable(p, s, host);
	for (size_t i = 0; !rc && i < s->n_binds; i++)
		if (!add(p, OP_BIND, s->binds[i].rw ? OPF_RW : 0, s->binds[i].src, NEWROOT "%s",
			 s->binds[i].dst))
			rc = -1;
	if (!rc)
		rc = plan_dev(p);
	if (!rc)
		rc = plan_proc(p);
	if (!rc)
		rc = plan_files(p, s, work_index);
	if (!rc)
		rc = plan_resolv_conf(p, s, host);
	if (!rc)
		rc = plan_hosts(p, s, host);
	if (!rc && host && !add(p, OP_READONLY, 0, NULL, NEWROOT))
		rc = -1;
	for (size_t i = 0; i < p->n; i++) {
		p->ops[i].uid = s->uid;
		p->ops[i].gid = s->gid;
	}
	if (rc) {
		sr_mounts_plan_free(p);
		return sr_fail(err, ENOMEM, "plan the sandbox filesystem");
	}
	return 0;
}

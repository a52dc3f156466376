/* The warm path's zygote: a Python module (stable ABI) that the runner
 * loads in the zygote interpreter after the preload list is imported.
 * serve() turns every spawn request from the supervisor into a new
 * sandbox: clone into fresh mount, pid, network, IPC and UTS namespaces
 * (sharing the zygote's memory until the child execs: no copy of it is
 * made for pid 1), then in the child the same steps a cold sandbox takes
 * (contain.c): its own cgroup, its own writable dirs and /proc, every
 * privilege dropped, the seccomp filter; then python as pid 2 (a fork: a
 * copy of the zygote's interpreter, with the imports done), which returns
 * from serve() into the interpreter to wait for the run's code, and pid 1
 * execs a small static init (init.c) from a sealed memfd. The zygote itself never
 * runs code that was sent to it. Protocol: runtime/lib/child/zygote_proto.h. */
#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x03080000
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child/child.h"

#define MAX_WRITABLE 32
#define MAX_FDS      (SR_ZSPAWN_FDS + 8)

struct spec {
	sr_zspec h;
	sr_bpf filter;
	const char *workdir;
	const char *writable[MAX_WRITABLE];
};

static int parse_spec(const char *buf, size_t len, struct spec *s)
{
	if (len < sizeof s->h)
		return -1;
	memcpy(&s->h, buf, sizeof s->h);
	size_t bpf_bytes = (size_t)s->h.bpf_len * sizeof(struct sock_filter);
	if (s->h.magic != SR_ZSPEC_MAGIC || s->h.n_writable > MAX_WRITABLE || s->h.bpf_len == 0 ||
	    s->h.bpf_len > 0xffff || len != sizeof s->h + bpf_bytes + s->h.strings_len ||
	    s->h.strings_len == 0 || buf[len - 1] != '\0')
		return -1;
	/* The buffer is the Python bytes object, alive for serve()'s call. */
	s->filter.insns = (struct sock_filter *)(uintptr_t)(buf + sizeof s->h);
	s->filter.len = (unsigned short)s->h.bpf_len;
	const char *str = buf + sizeof s->h + bpf_bytes, *end = buf + len;
	s->workdir = str;
	for (uint32_t i = 0; i < s->h.n_writable; i++) {
		str += strlen(str) + 1;
		if (str >= end)
			return -1;
		s->writable[i] = str;
	}
	return 0;
}

static int recv_request(int ctl, char *tag, int fds[MAX_FDS], int *n_fds)
{
	char buf[8];
	union {
		char b[CMSG_SPACE(sizeof(int) * MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof buf };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof u.b
	};
	ssize_t n = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return n < 0 ? -errno : -EPIPE;
	*n_fds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			memcpy(fds + *n_fds, CMSG_DATA(c), (size_t)k * sizeof(int));
			*n_fds += k;
		}
	*tag = buf[0];
	if (n < 2 || (mh.msg_flags & MSG_CTRUNC) || buf[0] != 'S' ||
	    *n_fds != SR_ZSPAWN_FDS + (unsigned char)buf[1])
		return -EBADMSG;
	return 0;
}

static void reply(int ctl, char tag, int32_t num, const char *what, int fd)
{
	char msg[256];
	msg[0] = tag;
	memcpy(msg + 1, &num, sizeof num);
	size_t len = 5;
	if (what) {
		size_t w = strnlen(what, sizeof msg - 6);
		memcpy(msg + 5, what, w);
		len += w;
	}
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u = { 0 };
	struct iovec iov = { .iov_base = msg, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (fd >= 0) {
		mh.msg_control = u.b;
		mh.msg_controllen = sizeof u.b;
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof fd);
	}
	ssize_t n = sendmsg(ctl, &mh, MSG_NOSIGNAL);
	(void)n;
}

/* The new sandbox's first process (pid 1 of its namespace), which shares
 * the zygote's memory (CLONE_VM|CLONE_VFORK: nothing is copied; the zygote
 * waits until this process has exec'd its init). Returns only in its
 * python child, locked down, a copy of the zygote. */
static void build(const struct spec *s, int fds[MAX_FDS], int n_fds, int init_fd)
{
	char what[200];
	int rc;
	sr_child c = {
		.fsize_limit = s->h.tmpfs_bytes,
		.nofile_limit = s->h.open_files,
		.uid = s->h.uid,
		.gid = s->h.gid,
		.filter = &s->filter,
		.join_fds = fds + SR_ZSPAWN_FDS,
		.n_join_fds = n_fds - SR_ZSPAWN_FDS,
		.sync_fd = -1,
		.report_fd = fds[0],
		.wd_fd = fds[4],
		.stdio = { -1, fds[1], fds[2], fds[3] },
		.init_fd = init_fd,
		.runner_fd = -1,
	};
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGCHLD, SIG_DFL);
	if ((rc = sr_cgroup_join_self(c.join_fds, c.n_join_fds)) < 0)
		sr_child_fail(&c, -rc, "join the sandbox cgroup");
	if (unshare(CLONE_NEWCGROUP) < 0)
		sr_child_fail(&c, errno, "create the cgroup namespace");
	sr_renew_spec rs = { .workdir = s->workdir,
			     .writable = s->writable,
			     .n_writable = s->h.n_writable,
			     .tmpfs_bytes = s->h.tmpfs_bytes,
			     .uid = s->h.uid,
			     .gid = s->h.gid };
	if ((rc = sr_mounts_renew(&rs, what, sizeof what)) < 0)
		sr_child_fail(&c, -rc, "%s", what);
	sr_child_send_workdir(&c);
	if (sethostname("sandbox", 7) < 0)
		sr_child_fail(&c, errno, "set the hostname");
	if ((c.stdio[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		sr_child_fail(&c, errno, "open /dev/null");
	sr_child_lock_down(&c);
	sr_child_exec_init(&c);
}

struct pid1 {
	const struct spec *s;
	int *fds, n_fds, init_fd;
	sigjmp_buf *python; /* where python goes on: serve()'s frame, in its copy */
};

static int pid1_main(void *arg)
{
	struct pid1 *a = arg;
	build(a->s, a->fds, a->n_fds, a->init_fd);
	siglongjmp(*a->python, 1);
}

/* The fds the preload and the warmup left open, which Python objects of
 * the zygote own (matplotlib keeps the font files it rendered with open).
 * A sandbox's lock-down closes every inherited fd; its python gets
 * /dev/null in their place before the interpreter's at-fork hooks run, so
 * an object that closes or reads its fd there finds one, not a closed
 * number or one the run reuses. (matplotlib's hook drops its fonts in the
 * child: closing an already closed font file crashed matplotlib 3.6's
 * FT2Font, which killed every sandbox of a zygote that ran savefig.) */
__attribute__((noinline)) static int owned_fds(int ctl, int init_fd, int **out)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0, cap = 0, *fds = NULL;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		int fd = atoi(e->d_name);
		if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd <= 2 || fd == ctl ||
		    fd == init_fd || fd == dirfd(d))
			continue;
		if (n == cap) {
			int *m = realloc(fds, (size_t)(cap = cap ? cap * 2 : 8) * sizeof *fds);
			if (!m)
				break;
			fds = m;
		}
		fds[n++] = fd;
	}
	if (d)
		closedir(d);
	*out = fds;
	return n;
}

__attribute__((noinline)) static void hold_owned_fds(const int *fds, int n)
{
	int null = -1;
	for (int i = 0; i < n; i++) {
		if (fcntl(fds[i], F_GETFD) >= 0 || errno != EBADF)
			continue; /* the sandbox's own (stdio, its sockets) */
		if (null < 0 && (null = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
			return;
		if (null != fds[i])
			dup3(null, fds[i], O_CLOEXEC);
		else
			null = -1; /* it took that very number */
	}
	if (null >= 0)
		close(null);
}

/* The first process's stack: it runs in the zygote's memory, so not on
 * the zygote's own stack (which the zygote's frames are using). */
#define PID1_STACK (512u << 10)

static PyObject *serve(PyObject *self, PyObject *args)
{
	(void)self;
	int ctl, init_fd;
	const char *buf;
	Py_ssize_t len;
	struct spec s;
	if (!PyArg_ParseTuple(args, "iy#i", &ctl, &buf, &len, &init_fd))
		return NULL;
	if (parse_spec(buf, (size_t)len, &s) < 0) {
		PyErr_SetString(PyExc_ValueError, "saferun zygote: malformed spec");
		return NULL;
	}
	int *owned, n_owned = owned_fds(ctl, init_fd, &owned);
	/* A guard page below it. */
	char *stack = mmap(NULL, PID1_STACK, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED || mprotect(stack, 4096, PROT_NONE) < 0) {
		PyErr_SetFromErrno(PyExc_OSError);
		free(owned);
		return NULL;
	}
	/* The sandboxes' inits are our children: each is reaped as it ends,
	 * so no zombie outlives its sandbox (a group holding one may not be
	 * removable). SIGCHLD arrives through a signalfd (a 200 ms poll if
	 * there is none); each sandbox unblocks it again. */
	sigset_t chld, old;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	for (;;) {
		struct signalfd_siginfo si;
		while (sfd >= 0 && read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
			;
		while (waitpid(-1, NULL, WNOHANG | __WALL) > 0)
			;
		struct pollfd p[2] = { { .fd = ctl, .events = POLLIN },
				       { .fd = sfd, .events = POLLIN } };
		if (poll(p, sfd >= 0 ? 2 : 1, sfd >= 0 ? -1 : 200) <= 0 || !(p[0].revents))
			continue;
		char tag;
		int fds[MAX_FDS], n_fds = 0;
		int rc = recv_request(ctl, &tag, fds, &n_fds);
		if (rc == -EPIPE || rc == -ECONNRESET) {
			/* the supervisor is gone: so is the zygote */
			if (sfd >= 0)
				close(sfd);
			sigprocmask(SIG_SETMASK, &old, NULL);
			munmap(stack, PID1_STACK);
			free(owned);
			Py_RETURN_NONE;
		}
		if (rc == -EINTR)
			continue;
		if (rc < 0) {
			reply(ctl, 'F', -rc, "a malformed spawn request", -1);
			for (int i = 0; i < n_fds; i++)
				close(fds[i]);
			continue;
		}
		int pidfd = -1;
		sigjmp_buf python;
		struct pid1 a = { &s, fds, n_fds, init_fd, &python };
		PyOS_BeforeFork();
		if (sigsetjmp(python, 0)) {
			/* Python, pid 2 of the new sandbox (its own copy of this
			 * frame): back to the runner. */
			hold_owned_fds(owned, n_owned);
			free(owned);
			PyOS_AfterFork_Child();
			return PyLong_FromLong(3);
		}
		pid_t pid =
		    clone(pid1_main, stack + PID1_STACK,
			  CLONE_VM | CLONE_VFORK | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
			      CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD | SIGCHLD,
			  &a, &pidfd);
		int e = errno;
		PyOS_AfterFork_Parent();
		for (int i = 0; i < n_fds; i++)
			close(fds[i]);
		if (pid < 0) {
			reply(ctl, 'F', e, "clone the sandbox namespaces", -1);
			continue;
		}
		reply(ctl, 'P', pid, NULL, pidfd);
		close(pidfd);
	}
}

static PyMethodDef methods[] = {
	{ "serve", serve, METH_VARARGS,
	  "serve(fd, spec, init_fd): build a sandbox per request; returns 3 in each sandbox's "
	  "python" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT, "_saferun_zygote", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__saferun_zygote(void)
{
	return PyModule_Create(&module);
}

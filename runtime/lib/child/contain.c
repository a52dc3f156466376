#include "contain.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "caps.h"

void sr_child_fail(const sr_child *c, int errnum, const char *fmt, ...)
{
	sr_report r = { .kind = SR_REPORT_FAILED, .errnum = errnum };
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r.what, sizeof r.what, fmt, ap);
	va_end(ap);
	ssize_t n = write(c->report_fd, &r, sizeof r);
	(void)n;
	_exit(127);
}

int sr_cgroup_join_self(const int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (write(fds[i], "0", 1) != 1)
			return -errno;
	return 0;
}

int sr_seccomp_load(const sr_bpf *prog)
{
	struct sock_fprog fprog = { .len = prog->len, .filter = prog->insns };

	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) < 0)
		return -errno;
	return 0;
}

static void set_rlimits(const sr_child *c)
{
	const struct {
		int res;
		rlim_t val;
		const char *name;
	} limits[] = {
		{ RLIMIT_CORE, 0, "RLIMIT_CORE" },
		{ RLIMIT_FSIZE, c->fsize_limit, "RLIMIT_FSIZE" },
		{ RLIMIT_NOFILE, c->nofile_limit, "RLIMIT_NOFILE" },
		{ RLIMIT_STACK, 8u << 20, "RLIMIT_STACK" },
		{ RLIMIT_MEMLOCK, 0, "RLIMIT_MEMLOCK" },
		/* Per-user kernel counts the sandbox's uid is charged: queued
		 * signals and POSIX message-queue bytes. */
		{ RLIMIT_SIGPENDING, 1024, "RLIMIT_SIGPENDING" },
		{ RLIMIT_MSGQUEUE, 1u << 20, "RLIMIT_MSGQUEUE" },
	};
	for (size_t i = 0; i < sizeof limits / sizeof *limits; i++) {
		struct rlimit rl = { limits[i].val, limits[i].val }, cur;
		/* Only ever lowered: what the supervisor was given is the
		 * ceiling (raising a hard limit needs host CAP_SYS_RESOURCE). */
		if (getrlimit(limits[i].res, &cur) == 0 && cur.rlim_max < rl.rlim_max)
			rl.rlim_cur = rl.rlim_max = cur.rlim_max;
		if (setrlimit(limits[i].res, &rl) < 0)
			sr_child_fail(c, errno, "set %s", limits[i].name);
	}
}

/* The fds python gets: 0, 1, 2, a control socket (3), the compiled
 * runner (SR_RUNNER_FD, 4); -1 where there is none. */
static int child_fds(const sr_child *c, int fds[5])
{
	memcpy(fds, c->stdio, 4 * sizeof *fds);
	fds[SR_RUNNER_FD] = c->runner_fd;
	return c->runner_fd >= 0 ? 5 : c->stdio[3] >= 0 ? 4 : 3;
}

/* Out of the way first: a source may already sit on a target number
 * (dup2 onto itself would keep close-on-exec), and so may the report pipe. */
static void setup_stdio(sr_child *c)
{
	int want[5], high[5], n = child_fds(c, want);
	if ((c->report_fd = fcntl(c->report_fd, F_DUPFD_CLOEXEC, 10)) < 0)
		sr_child_fail(c, errno, "move the report pipe");
	if (c->init_fd >= 0 &&
	    (c->init_fd = fcntl(c->init_fd, F_DUPFD_CLOEXEC, c->report_fd + 1)) < 0)
		sr_child_fail(c, errno, "move the init's memfd");
	for (int fd = 0; fd < n; fd++)
		if (want[fd] >= 0 && (high[fd] = fcntl(want[fd], F_DUPFD_CLOEXEC, 10)) < 0)
			sr_child_fail(c, errno, "set up fd %d", fd);
	/* A gap (no control socket but a runner) is closed, not inherited. */
	for (int fd = 0; fd < n; fd++)
		if (want[fd] >= 0 ? dup2(high[fd], fd) < 0 : close(fd) < 0 && errno != EBADF)
			sr_child_fail(c, errno, "set up fd %d", fd);
}

/* Keep python's fds (child_fds), the report pipe and pid 1's program;
 * everything else the parent had open (other sandboxes'
 * pipes in a daemon, the cgroup fd, a zygote's own sockets) goes. */
static void close_other_fds(const sr_child *c)
{
	int want[5];
	unsigned first = (unsigned)child_fds(c, want);
	/* >= 10, and the init's above the report pipe: setup_stdio */
	int keep[2] = { c->report_fd, c->init_fd }, n = c->init_fd >= 0 ? 2 : 1;
	for (int i = 0; i < n; i++) {
		if ((unsigned)keep[i] > first &&
		    syscall(SYS_close_range, first, (unsigned)keep[i] - 1, 0u) < 0)
			sr_child_fail(c, errno, "close inherited fds");
		first = (unsigned)keep[i] + 1;
	}
	if (syscall(SYS_close_range, first, ~0u, 0u) < 0)
		sr_child_fail(c, errno, "close inherited fds");
}

void sr_child_send_workdir(sr_child *c)
{
	int fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || sr_send_fd(c->wd_fd, "W", 1, fd, 0) != 1)
		sr_child_fail(c, errno, "hand over the working dir");
	close(fd);
	close(c->wd_fd);
	c->wd_fd = -1;
}

/* The per-user counts of the sandbox's own user namespace, set by its root
 * (the kernel lets a namespace's CAP_SYS_RESOURCE holder set them) before
 * the code runs: the code's uid may hold this much, and every count is
 * charged again to the namespace's owner on the host. A missing file (an
 * older kernel) is skipped. */
void sr_child_bound_user_counts(const sr_child *c)
{
	static const struct {
		const char *name, *value;
		bool any; /* also for a zygote, whose sandboxes need the rest */
	} counts[] = {
		/* clang-format off */
		{ "max_inotify_instances", "128", true },
		{ "max_inotify_watches", "8192", true },
		{ "max_user_namespaces", "0", true },
		{ "max_fanotify_groups", "0", true },
		{ "max_fanotify_marks", "0", true },
		{ "max_mnt_namespaces", "0", false },
		{ "max_pid_namespaces", "0", false },
		{ "max_net_namespaces", "0", false },
		{ "max_ipc_namespaces", "0", false },
		{ "max_uts_namespaces", "0", false },
		{ "max_cgroup_namespaces", "0", false },
		{ "max_time_namespaces", "0", false },
		/* clang-format on */
	};
	for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
		if (c->keep_privileges && !counts[i].any)
			continue;
		char path[64];
		snprintf(path, sizeof path, "/proc/sys/user/%s", counts[i].name);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT)
			continue;
		size_t n = strlen(counts[i].value);
		if (fd < 0 || write(fd, counts[i].value, n) != (ssize_t)n)
			sr_child_fail(c, errno, "write %s", path);
		close(fd);
	}
}

void sr_child_lock_down(sr_child *c)
{
	int rc;
	set_rlimits(c);
	setup_stdio(c);
	if (!c->keep_privileges) {
		const char *step;
		if ((rc = sr_caps_drop_all(c->uid, c->gid, &step)) < 0)
			sr_child_fail(c, -rc, "%s", step);
	}
	/* Every id switch above cleared the parent-death signal: arm it again
	 * now that the ids are final. */
	if (c->pdeath && syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		sr_child_fail(c, errno, "set the parent-death signal");
	close_other_fds(c);
	/* Last: from here on only the policy's syscalls are possible. */
	if (!c->keep_privileges && (rc = sr_seccomp_load(c->filter)) < 0)
		sr_child_fail(c, -rc, "load the seccomp filter");
}

/* Become c->init_fd, the small static init (runtime/zygote/init.c), with
 * python's pid; returns only if the exec failed (errno), with the report
 * pipe close-on-exec again. */
static void exec_init(const sr_child *c, pid_t py)
{
	char fd[16], pid[16];
	snprintf(fd, sizeof fd, "%d", c->report_fd);
	snprintf(pid, sizeof pid, "%d", (int)py);
	char *const argv[] = { "saferun-init", fd, pid, NULL }, *const envp[] = { NULL };
	for (int i = 0; i <= SR_RUNNER_FD; i++)
		close(i);
	if (fcntl(c->report_fd, F_SETFD, 0) < 0)
		return;
	syscall(SYS_execveat, c->init_fd, "", argv, envp, AT_EMPTY_PATH);
	int e = errno;
	fcntl(c->report_fd, F_SETFD, FD_CLOEXEC);
	errno = e;
}

pid_t sr_child_exec_init(const sr_child *c)
{
	pid_t py = fork();
	if (py < 0)
		sr_child_fail(c, errno, "start python");
	if (py == 0) {
		close(c->report_fd);
		close(c->init_fd);
		syscall(SYS_prctl, PR_SET_NAME, "python3", 0, 0, 0);
		return 0;
	}
	exec_init(c, py);
	/* Python is pid 2 of a namespace whose pid 1 ends here: it goes too. */
	sr_child_fail(c, errno,
		      "exec the sandbox's init (does the policy's seccomp filter allow execveat?)");
}

/* Pid 1 of the sandbox: start python, reap orphans, report python's wait
 * status, exit (which ends every other process of the namespace). It runs
 * after seccomp and the privilege drop like everything else. */
pid_t sr_child_become_init(const sr_child *c, bool python_forks)
{
	/* Raw, like the id switches (caps.c): the sanitizers' prctl wrapper
	 * takes a thread-registry lock another thread may have held at clone. */
	syscall(SYS_prctl, PR_SET_NAME, "saferun-init", 0, 0, 0);
	/* A cold run's python execs at once: it borrows this process's memory
	 * until then (vfork) instead of copying it. */
	pid_t py = c->argv        ? vfork()
		   : python_forks ? fork()
				  : (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (py < 0)
		sr_child_fail(c, errno, "start python");
	if (py == 0) {
		if (!c->argv) {
			/* No exec to close it: the report pipe is init's alone. */
			close(c->report_fd);
			syscall(SYS_prctl, PR_SET_NAME, "python3", 0, 0, 0);
			return 0;
		}
		const char *path = c->exec_path ? c->exec_path : "/usr/bin/python3";
		execve(path, c->argv, c->envp);
		sr_child_fail(c, errno, "exec %s", path);
	}
	/* Pid 1 of a cold run is a copy of the supervisor (a daemon's holds
	 * other runs' requests): it becomes the small static init instead,
	 * keeping none of that. Where the policy's seccomp filter refuses
	 * execveat, the copy stays and waits below. */
	if (c->argv && c->init_fd >= 0)
		exec_init(c, py);
	/* The copy that stays is not the code's to read or trace either (the
	 * exec'd init is non-dumpable by its exec: sr_exec_only_memfd). */
	syscall(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0);
	for (int fd = 0; fd <= SR_RUNNER_FD; fd++)
		close(fd);
	for (;;) {
		int st;
		pid_t pid = wait4(-1, &st, 0, NULL);
		if (pid == py) {
			sr_report r = { .kind = SR_REPORT_EXIT, .wstatus = st };
			ssize_t n = write(c->report_fd, &r, sizeof r);
			_exit(n == (ssize_t)sizeof r ? 0 : 126);
		}
		if (pid < 0 && errno != EINTR)
			_exit(125);
	}
}

/* Commands in a kernel's sandbox (sr_kernel_exec, saferun.h).
 *
 * The daemon is many threads; entering a user namespace needs one. So a
 * copy of the caller (A, a clone without CLONE_VM that only makes raw,
 * async-signal-safe calls) joins the kernel's cgroup while it is still
 * host root, enters every namespace of the kernel's pid 1 through its
 * pidfd, and clones the command (B) as the caller's child (CLONE_PARENT):
 * setns(CLONE_NEWPID) places only children in the new pid namespace. B
 * then takes the sandbox's own lock-down steps (contain.c) and execs.
 *
 * Neither is the sandbox's to read or trace while it still holds
 * privileges: both are non-dumpable from the start (runc's CVE-2016-9962
 * and CVE-2019-5736: a process entering a container is a target), and B
 * drops to the sandbox uid before it runs anything of the sandbox's.
 *
 * Both report on one pipe (close-on-exec): A the host pid of B, B its
 * pid inside, or either the step that failed. EOF: B has exec'd. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "box/box.h"
#include "child/child.h"
#include "run.h"

#define REPORT_HOST_PID 10 /* wstatus holds B's pid on the host */
#define REPORT_NS_PID   11 /* wstatus holds B's pid in the sandbox */

#define ENTER_FLAGS                                                                                \
	(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | \
	 CLONE_NEWCGROUP)

struct exec_plan {
	const sr_box *box;
	const sr_exec_options *o;
	const char *cwd;
	char *const *envp;
	int join_fds[SR_CGROUP_MAX_FDS], n_join_fds;
	int report[2];
};

static void report_value(int fd, int kind, int value)
{
	sr_report r = { .kind = kind, .wstatus = value };
	ssize_t n = write(fd, &r, sizeof r);
	(void)n;
}

static __attribute__((noreturn)) void run_command(const struct exec_plan *x)
{
	const sr_policy *p = x->box->p;
	sr_child c = {
		.fsize_limit = p->limits.tmpfs_bytes,
		.nofile_limit = p->limits.open_files,
		.uid = SR_SANDBOX_UID,
		.gid = SR_SANDBOX_GID,
		.filter = &x->box->filter,
		.sync_fd = -1,
		.report_fd = x->report[1],
		.wd_fd = -1,
		.stdio = { x->o->stdio[0], x->o->stdio[1], x->o->stdio[2], -1 },
		.init_fd = -1,
		.runner_fd = -1,
	};
	/* Its own process group: a signal for the command reaches what it
	 * started too. */
	if (setsid() < 0)
		sr_child_fail(&c, errno, "start a session for the command");
	/* The sandbox's root (setns(CLONE_NEWNS) left us at the namespace's
	 * root), then the steps every process of the sandbox took. */
	if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0)
		sr_child_fail(&c, errno, "become root of the sandbox's user namespace");
	sr_child_lock_down(&c); /* moves the report fd, drops everything, seccomp */
	if (chdir(x->cwd) < 0)
		sr_child_fail(&c, errno, "change to the working dir %s", x->cwd);
	report_value(c.report_fd, REPORT_NS_PID, (int)syscall(SYS_getpid));
	execve(x->o->path, x->o->argv, x->envp);
	sr_child_fail(&c, errno, "exec %s", x->o->path);
}

/* A: returns never; B is cloned from here. */
static __attribute__((noreturn)) void enter(const struct exec_plan *x)
{
	sr_child c = { .report_fd = x->report[1] };
	close(x->report[0]);
	if (syscall(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		sr_child_fail(&c, errno, "make the entering process non-dumpable");
	int rc = sr_cgroup_join_self(x->join_fds, x->n_join_fds);
	if (rc < 0)
		sr_child_fail(&c, -rc, "join the sandbox's cgroup");
	for (int i = 0; i < x->n_join_fds; i++)
		close(x->join_fds[i]);
	if (syscall(SYS_setns, x->box->pidfd, ENTER_FLAGS) < 0)
		sr_child_fail(&c, errno, "enter the sandbox's namespaces");
	struct clone_args ca = { .flags = CLONE_PARENT, .exit_signal = 0 };
	pid_t pid = (pid_t)syscall(SYS_clone3, &ca, sizeof ca);
	if (pid < 0)
		sr_child_fail(&c, errno, "start the command in the sandbox");
	if (pid == 0)
		run_command(x);
	report_value(x->report[1], REPORT_HOST_PID, (int)pid);
	_exit(0);
}

/* What A and B reported, until EOF (B exec'd or everyone failed). */
static int read_reports(int fd, sr_exec_proc *out, sr_error *err)
{
	sr_report r;
	bool failed = false;
	for (;;) {
		ssize_t n = read(fd, &r, sizeof r);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (n != (ssize_t)sizeof r)
			continue;
		if (r.kind == REPORT_HOST_PID)
			out->pid = r.wstatus;
		else if (r.kind == REPORT_NS_PID)
			out->ns_pid = r.wstatus;
		else if (r.kind == SR_REPORT_FAILED && !failed) {
			r.what[sizeof r.what - 1] = '\0';
			failed = true;
			sr_fail(err, r.errnum, "start a command in the sandbox: %s", r.what);
		}
	}
	if (failed)
		return -1;
	if (out->pid <= 0 || out->ns_pid <= 0)
		return sr_fail(err, EIO, "start a command in the sandbox: no word from it");
	return 0;
}

/* sr_kernel_start returns once the sandbox's first process is released;
 * it mounts its filesystem, pivots into it and locks itself down after
 * that. Entered before then, a command would share a mount namespace that
 * is still the host's copy and a /proc that is the host's. Its seccomp
 * filter is the last step: once /proc shows it, everything is in place. */
static int wait_locked_down(const sr_box *b, sr_error *err)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/status", (int)b->pid);
	for (int tries = 0; tries < 5000; tries++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
		if (fd >= 0)
			close(fd);
		if (n <= 0)
			return sr_fail(err, ESRCH, "the sandbox has ended");
		buf[n] = '\0';
		const char *s = strstr(buf, "\nSeccomp:");
		if (s && strtol(s + 9, NULL, 10) == 2)
			return 0;
		usleep(1000);
	}
	return sr_fail(err, ETIMEDOUT, "the sandbox did not finish setting itself up");
}

/* B is our child (CLONE_PARENT) and not reaped: its pid stays its own. */
static void reap_failed(pid_t pid)
{
	if (pid > 0) {
		siginfo_t si;
		waitid(P_PID, (id_t)pid, &si, WEXITED);
	}
}

int sr_kernel_exec(sr_kernel *k, const sr_exec_options *o, sr_exec_proc *out, sr_error *err)
{
	*out = (sr_exec_proc){ .pidfd = -1 };
	if (!sr_kernel_alive(k))
		return sr_refuse(err, ESRCH, "the sandbox has ended");
	if (!o->path || o->path[0] != '/' || !o->argv || !o->argv[0])
		return sr_refuse(err, EINVAL, "a command needs an absolute path and an argv");
	sr_box *b = sr_kernel_box(k);
	if (wait_locked_down(b, err))
		return -1;
	struct exec_plan x = { .box = b,
			       .o = o,
			       .cwd = o->cwd ? o->cwd : b->p->workdir,
			       .envp = o->envp ? o->envp : b->envp };
	x.n_join_fds = sr_cgroup_open_join_fds(b->cg, x.join_fds, true, err);
	if (x.n_join_fds < 0)
		return -1;
	int rc = -1, pidfd = -1;
	if (pipe2(x.report, O_CLOEXEC) < 0) {
		sr_fail(err, errno, "a pipe for the command's start");
		goto out;
	}
	struct clone_args ca = { .flags = CLONE_PIDFD,
				 .pidfd = (uint64_t)(uintptr_t)&pidfd,
				 .exit_signal = SIGCHLD };
	pid_t a = (pid_t)syscall(SYS_clone3, &ca, sizeof ca);
	if (a == 0)
		enter(&x);
	close(x.report[1]);
	if (a < 0) {
		close(x.report[0]);
		sr_fail(err, errno, "start the process that enters the sandbox");
		goto out;
	}
	rc = read_reports(x.report[0], out, err);
	close(x.report[0]);
	siginfo_t si;
	waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED);
	close(pidfd);
	if (rc == 0 && (out->pidfd = (int)syscall(SYS_pidfd_open, out->pid, 0)) < 0)
		rc = sr_fail(err, errno, "a pidfd for the command");
	if (rc < 0) {
		if (out->pid > 0)
			kill(out->pid, SIGKILL);
		reap_failed(out->pid);
		*out = (sr_exec_proc){ .pidfd = -1 };
	}
out:
	for (int i = 0; i < x.n_join_fds; i++)
		close(x.join_fds[i]);
	return rc;
}

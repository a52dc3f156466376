/* The confined checker process, parent side (checker_confine.h). */
#include "checker_confine.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "util.h"

/* In the clone: fds 0 and 1 become the input and the output pipe, then
 * the program replaces this copy of the caller. Only async-signal-safe
 * calls: the caller may have threads. Exit statuses 15 and 16 say which
 * step failed (seen only when one does). */
static __attribute__((noreturn)) void exec_child(int prog_fd, const char *name, int in_fd, int wfd)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Either may sit on 0 or 1 already: both above 2 first. */
	int in = fcntl(in_fd, F_DUPFD_CLOEXEC, 3), out = fcntl(wfd, F_DUPFD_CLOEXEC, 3);
	if (in < 0 || out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0)
		_exit(15);
	char *const argv[] = { (char *)name, NULL }, *const envp[] = { NULL };
	syscall(SYS_execveat, prog_fd, "", argv, envp, AT_EMPTY_PATH);
	_exit(16);
}

/* Read the child's output until EOF or the deadline. */
static int collect(int rfd, uint64_t deadline, char *out, size_t out_size, size_t *got)
{
	char sink[4096];
	for (;;) {
		/* Past the deadline, what the child already wrote still counts
		 * (sr_confine_finish may come late): a last look without waiting. */
		uint64_t now = sr_now_ms();
		struct pollfd pfd = { rfd, POLLIN, 0 };
		int rc = poll(&pfd, 1, now >= deadline ? 0 : (int)(deadline - now));
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -errno;
		if (rc == 0) {
			if (now >= deadline)
				return -ETIMEDOUT;
			continue;
		}
		char *dst = *got < out_size ? out + *got : sink;
		size_t room = *got < out_size ? out_size - *got : sizeof sink;
		ssize_t n = read(rfd, dst, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : 0;
		*got += (size_t)n;
	}
}

static int explain(int rc, const siginfo_t *si, size_t got, size_t out_size,
		   const sr_confine_limits *lim, sr_error *err)
{
	if (rc == -ETIMEDOUT)
		return sr_refuse(err, ETIMEDOUT,
				 "the checker ran out of time (%llu ms) and was killed",
				 (unsigned long long)lim->timeout_ms);
	if (rc < 0)
		return sr_fail(err, -rc, "read the checker's output");
	if (si->si_code == CLD_KILLED || si->si_code == CLD_DUMPED)
		return sr_refuse(
		    err, ECHILD, "the checker process was killed by signal %d (%s)%s",
		    si->si_status, strsignal(si->si_status),
		    si->si_status == SIGKILL ? " (a seccomp violation or a resource limit)" : "");
	if (si->si_status != 0)
		return sr_refuse(err, ECHILD, "the checker process failed (exit status %d)",
				 si->si_status);
	if (got > out_size)
		return sr_refuse(err, EPROTO,
				 "the checker process wrote %zu bytes, expected at most %zu", got,
				 out_size);
	return 0;
}

int sr_confine_start(int prog_fd, const char *name, int in_fd, const sr_confine_limits *lim,
		     sr_confined *c, sr_error *err)
{
	int p[2];
	c->rfd = c->pidfd = -1;
	if (pipe2(p, O_CLOEXEC) < 0)
		return sr_fail(err, errno, "create the checker's pipe");
	c->deadline = sr_now_ms() + lim->timeout_ms;
	c->timeout_ms = lim->timeout_ms;
	/* A raw clone: no atfork handlers in a caller's threads, and a pidfd
	 * to wait on even if the caller reaps children with waitpid(-1). */
	pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD | CLONE_PIDFD, NULL, &c->pidfd, NULL, 0);
	if (pid == 0)
		exec_child(prog_fd, name, in_fd, p[1]);
	int saved = errno;
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		c->pidfd = -1;
		return sr_fail(err, saved, "start the checker process");
	}
	c->rfd = p[0];
	return 0;
}

/* After its output's EOF the child is exiting: this long at least. */
#define EXIT_GRACE_MS 1000

/* Close the pipe, kill the child if asked, wait for its end into *si.
 * Bounded: a child that closed its output without exiting (it cannot,
 * confined, but the bound costs nothing) is killed at the deadline. */
static void reap(sr_confined *c, bool kill, siginfo_t *si)
{
	close(c->rfd);
	uint64_t now = sr_now_ms();
	int wait_ms = now + EXIT_GRACE_MS >= c->deadline ? EXIT_GRACE_MS : (int)(c->deadline - now);
	struct pollfd pfd = { c->pidfd, POLLIN, 0 };
	if (kill || poll(&pfd, 1, wait_ms) != 1)
		syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
	while (waitid((idtype_t)P_PIDFD, (id_t)c->pidfd, si, WEXITED) < 0 && errno == EINTR)
		;
	close(c->pidfd);
	c->rfd = c->pidfd = -1;
}

int sr_confine_finish(sr_confined *c, void *out, size_t out_size, size_t *got, sr_error *err)
{
	*got = 0;
	int rc = collect(c->rfd, c->deadline, out, out_size, got);
	siginfo_t si = { 0 };
	reap(c, rc < 0, &si);
	sr_confine_limits lim = { .timeout_ms = c->timeout_ms };
	return explain(rc, &si, *got, out_size, &lim, err);
}

void sr_confine_abort(sr_confined *c)
{
	if (c->pidfd >= 0)
		reap(c, true, &(siginfo_t){ 0 });
}

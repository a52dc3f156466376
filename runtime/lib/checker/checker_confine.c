/* The confined checker process, parent side (checker_confine.h). */
#include "checker_confine.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"

/* fd moved above 1 (the child's fd 0 and 1 are set by dup2 in order, so
 * neither source may sit on a target); *tmp is the copy to close, if any. */
static int above_stdio(int fd, int *tmp)
{
	*tmp = fd > 1 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 3);
	return fd > 1 ? fd : *tmp;
}

/* The child execs the program at once, so it need not copy the caller:
 * posix_spawn's vfork-like clone shares the caller's memory only until
 * the exec (a daemon's page tables are not copied for every check), runs
 * no atfork handlers, and the program sets its own parent-death signal. */
static int spawn(int prog_fd, const char *name, int in_fd, int wfd, pid_t *pid)
{
	char path[32];
	int tin, tout, in = above_stdio(in_fd, &tin), out = above_stdio(wfd, &tout), rc;
	snprintf(path, sizeof path, "/proc/self/fd/%d", prog_fd);
	char *const argv[] = { (char *)name, NULL }, *const envp[] = { NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none;
	sigemptyset(&none);
	if (in < 0 || out < 0)
		rc = errno;
	else if ((rc = posix_spawn_file_actions_init(&fa)) == 0) {
		posix_spawnattr_init(&at);
		/* a caller's blocked signals (a daemon blocks SIGTERM) not kept */
		posix_spawnattr_setsigmask(&at, &none);
		posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
		if ((rc = posix_spawn_file_actions_adddup2(&fa, in, 0)) == 0 &&
		    (rc = posix_spawn_file_actions_adddup2(&fa, out, 1)) == 0)
			rc = posix_spawn(pid, path, &fa, &at, argv, envp);
		posix_spawnattr_destroy(&at);
		posix_spawn_file_actions_destroy(&fa);
	}
	if (tin >= 0)
		close(tin);
	if (tout >= 0)
		close(tout);
	return rc;
}

/* The CPU time (user + system) the child has used, in ms, or -1. It is
 * our unreaped child, so its pid is still its own. */
static int64_t child_cpu_ms(pid_t pid)
{
	char path[40], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	/* after the comm's ")": state is field 3, utime 14 and stime 15 */
	char *p = strrchr(buf, ')');
	unsigned long long utime, stime;
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
			 &stime) != 2)
		return -1;
	long hz = sysconf(_SC_CLK_TCK);
	return (int64_t)((utime + stime) * 1000 / (unsigned long long)(hz > 0 ? hz : 100));
}

/* At the deadline: -ETIMEDOUT once the child has used its CPU time,
 * -ETIME at the wall-clock cap, else 0 and the deadline moved to when the
 * CPU time could run out at the earliest. */
static int past_deadline(sr_confined *c, uint64_t now)
{
	if (now >= c->wall_limit)
		return -ETIME;
	int64_t cpu = child_cpu_ms(c->pid);
	if (cpu < 0 || (uint64_t)cpu >= c->timeout_ms)
		return -ETIMEDOUT;
	uint64_t left = c->timeout_ms - (uint64_t)cpu;
	c->deadline = now + (left < 10 ? 10 : left);
	if (c->deadline > c->wall_limit)
		c->deadline = c->wall_limit;
	return 0;
}

/* Read the child's output until EOF or its time is up. */
static int collect(sr_confined *c, char *out, size_t out_size, size_t *got)
{
	char sink[4096];
	for (;;) {
		/* Past the deadline, what the child already wrote still counts
		 * (sr_confine_finish may come late): a last look without waiting. */
		uint64_t now = sr_now_ms();
		struct pollfd pfd = { c->rfd, POLLIN, 0 };
		int rc = poll(&pfd, 1, now >= c->deadline ? 0 : (int)(c->deadline - now));
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -errno;
		if (rc == 0) {
			if (now >= c->deadline && (rc = past_deadline(c, now)) < 0)
				return rc;
			continue;
		}
		char *dst = *got < out_size ? out + *got : sink;
		size_t room = *got < out_size ? out_size - *got : sizeof sink;
		ssize_t n = read(c->rfd, dst, room);
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
				 "the checker ran out of time (%llu ms of CPU) and was killed",
				 (unsigned long long)lim->timeout_ms);
	if (rc == -ETIME)
		return sr_refuse(err, ETIMEDOUT,
				 "the checker did not finish within %llu ms of wall-clock time "
				 "(%d times its %llu ms of CPU, plus %d ms) and was killed",
				 (unsigned long long)lim->timeout_ms * SR_CONFINE_WALL_FACTOR +
				     SR_CONFINE_WALL_SLACK_MS,
				 SR_CONFINE_WALL_FACTOR, (unsigned long long)lim->timeout_ms,
				 SR_CONFINE_WALL_SLACK_MS);
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
	uint64_t start = sr_now_ms();
	c->deadline = start + lim->timeout_ms;
	c->wall_limit = start + lim->timeout_ms * SR_CONFINE_WALL_FACTOR + SR_CONFINE_WALL_SLACK_MS;
	c->timeout_ms = lim->timeout_ms;
	/* The pidfd is taken before anything is likely to reap the child (it
	 * runs until it has read its input), and it must name a child of ours
	 * not yet reaped: else a caller's waitpid(-1) took it and the pid may
	 * be another process's by now, which the deadline must not kill. */
	pid_t pid = -1;
	siginfo_t si;
	int rc = spawn(prog_fd, name, in_fd, p[1], &pid);
	close(p[1]);
	if (rc == 0 &&
	    ((c->pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0 ||
	     waitid((idtype_t)P_PIDFD, (id_t)c->pidfd, &si, WEXITED | WNOHANG | WNOWAIT) < 0)) {
		rc = errno;
		if (c->pidfd >= 0)
			close(c->pidfd);
	}
	if (rc) {
		close(p[0]);
		c->pidfd = -1;
		return sr_fail(err, rc, "start the checker process");
	}
	c->rfd = p[0];
	c->pid = pid;
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
	int rc = collect(c, out, out_size, got);
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

/* The confined child (checker_confine.h). */
#include "checker_confine.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"

#define STACK_MAX (8u << 20) /* the checker needs far less; the usual default */

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* In the child: lock down, compute, write, exit. Exit codes say which
 * step failed (seen only when one does). */
static __attribute__((noreturn)) void child(sr_confined_fn fn, void *arg,
					    const sr_confine_limits *lim, int wfd, size_t out_size)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Strict mode still allows read and write on any open fd: keep one. */
	if ((wfd > 0 && syscall(SYS_close_range, 0u, (unsigned)wfd - 1, 0u) < 0) ||
	    syscall(SYS_close_range, (unsigned)wfd + 1, ~0u, 0u) < 0)
		_exit(10);
	size_t head = (out_size + 4095) & ~(size_t)4095; /* the arena starts page-aligned */
	void *mem = mmap(NULL, head + lim->memory_bytes, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED)
		_exit(11);
	/* Strict mode allows no mmap or brk: past the arena, only the stack
	 * can grow, and RLIMIT_STACK bounds that (cheaper than an RLIMIT_AS
	 * computed from /proc/self/statm, which was a tenth of the overhead). */
	struct rlimit no_core = { 0, 0 },
		      cpu = { lim->timeout_ms / 1000 + 1, lim->timeout_ms / 1000 + 1 }, stack;
	if (getrlimit(RLIMIT_STACK, &stack) < 0)
		_exit(12);
	stack.rlim_cur = stack.rlim_cur < STACK_MAX ? stack.rlim_cur : STACK_MAX;
	stack.rlim_max = stack.rlim_max < STACK_MAX ? stack.rlim_max : STACK_MAX;
	if (setrlimit(RLIMIT_CORE, &no_core) < 0 || setrlimit(RLIMIT_CPU, &cpu) < 0 ||
	    setrlimit(RLIMIT_STACK, &stack) < 0)
		_exit(12);
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0) < 0)
		_exit(13);
	sr_arena a;
	sr_arena_init_fixed(&a, (char *)mem + head, lim->memory_bytes);
	size_t n = fn(arg, &a, mem, out_size);
	/* exit, not exit_group: strict mode allows only the former. */
	syscall(SYS_exit, write_all(wfd, mem, n < out_size ? n : out_size) < 0 ? 14 : 0);
	__builtin_unreachable();
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

int sr_confine_start(sr_confined_fn fn, void *arg, const sr_confine_limits *lim, size_t out_size,
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
	if (pid == 0) {
		close(p[0]);
		child(fn, arg, lim, p[1], out_size);
	}
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

/* Close the pipe, kill the child if asked, wait for its end into *si. */
static void reap(sr_confined *c, bool kill, siginfo_t *si)
{
	close(c->rfd);
	if (kill)
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

int sr_confine_run(sr_confined_fn fn, void *arg, const sr_confine_limits *lim, void *out,
		   size_t out_size, size_t *got, sr_error *err)
{
	sr_confined c;
	if (sr_confine_start(fn, arg, lim, out_size, &c, err) < 0)
		return -1;
	return sr_confine_finish(&c, out, out_size, got, err);
}

/* The confined process's own lock-down (confine_self.h). */
#include "confine_self.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define STACK_MAX (8u << 20) /* the checker needs far less; the usual default */

void *sr_confine_self(size_t size, uint64_t timeout_ms)
{
	/* Set before the exec too (checker_confine.c); exec keeps it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return NULL;
	/* Strict mode still allows read and write on any open fd: keep two. */
	if (syscall(SYS_close_range, 2u, ~0u, 0u) < 0)
		return NULL;
	void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED)
		return NULL;
	/* Strict mode allows no mmap or brk: past the mapping, only the stack
	 * can grow, and RLIMIT_STACK bounds that (cheaper than an RLIMIT_AS
	 * computed from /proc/self/statm, which was a tenth of the overhead). */
	struct rlimit no_core = { 0, 0 }, cpu = { timeout_ms / 1000 + 1, timeout_ms / 1000 + 1 },
		      stack;
	if (getrlimit(RLIMIT_STACK, &stack) < 0)
		return NULL;
	stack.rlim_cur = stack.rlim_cur < STACK_MAX ? stack.rlim_cur : STACK_MAX;
	stack.rlim_max = stack.rlim_max < STACK_MAX ? stack.rlim_max : STACK_MAX;
	if (setrlimit(RLIMIT_CORE, &no_core) < 0 || setrlimit(RLIMIT_CPU, &cpu) < 0 ||
	    setrlimit(RLIMIT_STACK, &stack) < 0)
		return NULL;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0) < 0)
		return NULL;
	return mem;
}

int sr_confine_read(void *buf, size_t n)
{
	char *p = buf;
	while (n) {
		ssize_t r = read(0, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

void sr_confine_quit(int status)
{
	syscall(SYS_exit, status);
	__builtin_unreachable();
}

void sr_confine_exit(const void *out, size_t n)
{
	const char *p = out;
	while (n) {
		ssize_t w = write(1, p, n);
		if (w <= 0)
			sr_confine_quit(14);
		p += w;
		n -= (size_t)w;
	}
	sr_confine_quit(0);
}

/* A stand-in for saferun-check in the unit tests of the confinement
 * (test_checker.c): it confines itself as the checker does
 * (confine_self.h), then does what argv[0] says: fill (90 bytes of the
 * byte on its fd 0), crash, hang, work (spins some ms of CPU, answers), wait
 * (blocks reading its input), forbidden (a system call strict mode
 * refuses), exhaust (its arena, then answers), deep (64 MiB of stack). */
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "checker/checker_arena.h"
#include "confine_self.h"

#define ARENA (4u << 20)

static size_t deep(uintptr_t depth)
{
	volatile char frame[64 << 10];
	frame[0] = (char)depth;
	if (depth < 1024)
		deep(depth + 1);
	return (size_t)frame[0];
}

int main(int argc, char **argv)
{
	(void)argc;
	const char *mode = argv[0];
	char *mem = sr_confine_self(4096 + ARENA, 300);
	if (!mem)
		return 11;
	sr_arena a;
	sr_arena_init_fixed(&a, mem + 4096, ARENA);
	if (!strcmp(mode, "fill")) {
		char c;
		if (sr_confine_read(&c, 1) < 0)
			sr_confine_quit(12);
		memset(mem, c, 90);
		sr_confine_exit(mem, 90);
	} else if (!strcmp(mode, "crash")) {
		*(volatile int *)(uintptr_t)argc = 1;
	} else if (!strcmp(mode, "hang")) {
		for (volatile int i = 0;; i++)
			;
	} else if (!strcmp(mode, "work")) {
		/* some 15 ms of CPU (more under ASan), then an answer */
		for (volatile long i = 0; i < 30000000; i++)
			;
		sr_confine_exit("done", 4);
	} else if (!strcmp(mode, "wait")) {
		char c;
		(void)sr_confine_read(&c, 1); /* the input's writer never writes */
		sr_confine_exit("read", 4);
	} else if (!strcmp(mode, "forbidden")) {
		syscall(SYS_getpid); /* anything but read, write, exit, sigreturn */
	} else if (!strcmp(mode, "exhaust")) {
		while (sr_arena_alloc(&a, 1 << 20))
			;
		sr_confine_exit("ran out", 7); /* the arena ran out, nothing else happened */
	} else if (!strcmp(mode, "deep")) {
		deep(0);
	}
	sr_confine_quit(20);
}

/* The confined checker's side of checker_confine.h: what an exec'd
 * program (saferun-check, the unit tests' probe) does to itself before it
 * touches untrusted bytes. libc only; linked into those programs, not into
 * the library. */
#ifndef SR_CONFINE_SELF_H
#define SR_CONFINE_SELF_H

#include <stddef.h>
#include <stdint.h>

/* Every fd but 0 (input) and 1 (output) closed, one private mapping of
 * size bytes made (returned), no core dumps, RLIMIT_CPU from timeout_ms,
 * the stack at most 8 MiB, then seccomp strict mode: read, write, exit and
 * sigreturn only. NULL with errno if a step before strict mode failed. */
void *sr_confine_self(size_t size, uint64_t timeout_ms);

/* Write n bytes of out to fd 1 and exit 0 (14 if the write failed), with
 * exit, not exit_group: strict mode allows only the former. */
__attribute__((noreturn)) void sr_confine_exit(const void *out, size_t n);

/* Exit with status (exit, not exit_group, as above). */
__attribute__((noreturn)) void sr_confine_quit(int status);

/* Read exactly n bytes from fd 0 (strict mode allows read): 0 or -1. */
int sr_confine_read(void *buf, size_t n);

#endif

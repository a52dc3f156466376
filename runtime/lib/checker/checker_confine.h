/* Run untrusted-input parsing in a throwaway process: a program exec'd
 * for the purpose (saferun-check, from a sealed memfd), so nothing of the
 * caller's memory is in it, which confines itself before it reads the
 * untrusted bytes (runtime/checker/confine_self.h: seccomp strict mode,
 * every fd but its input and output closed, memory bounded by one mapping
 * and RLIMIT_STACK). Time is bounded here: the child is killed once it has
 * used timeout_ms of CPU, or after SR_CONFINE_WALL_FACTOR times that plus
 * SR_CONFINE_WALL_SLACK_MS on the wall clock, whichever comes first. CPU, so that a busy machine (the
 * child waiting for a core) does not turn a check into a refusal; the
 * wall-clock cap, so that a child that waits on something never holds a
 * run up for long. A crash, a timeout or a seccomp violation there is an
 * error here, never a crash of the caller. */
#ifndef SR_CHECKER_CONFINE_H
#define SR_CHECKER_CONFINE_H

#include <stddef.h>
#include <stdint.h>

#include "saferun.h"

#include <sys/types.h>

#define SR_CONFINE_WALL_FACTOR   5
#define SR_CONFINE_WALL_SLACK_MS 1000

typedef struct sr_confine_limits {
	uint64_t timeout_ms;
	uint64_t memory_bytes; /* the child's arena (sent to it with its input) */
} sr_confine_limits;

/* Start runs prog_fd (anything execveat runs: a memfd) as argv[0] name,
 * with in_fd as its fd 0 and a pipe back here as its fd 1, so the caller
 * can work while it does; finish collects up to out_size bytes of its
 * output (*got; more is an error) until EOF or its time is up (above) and
 * reaps it; abort kills and reaps it. finish returns 0, or -1 with err
 * saying how the child failed (ETIMEDOUT, ECHILD, ...). */
typedef struct sr_confined {
	int rfd, pidfd;
	pid_t pid;           /* our child, unreaped until finish: the pid is its */
	uint64_t deadline;   /* when to look at its CPU time next */
	uint64_t wall_limit; /* when it is killed whatever its CPU time */
	uint64_t timeout_ms;
} sr_confined;
int sr_confine_start(int prog_fd, const char *name, int in_fd, const sr_confine_limits *lim,
		     sr_confined *c, sr_error *err);
int sr_confine_finish(sr_confined *c, void *out, size_t out_size, size_t *got, sr_error *err);
void sr_confine_abort(sr_confined *c);

#endif

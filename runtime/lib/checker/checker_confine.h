/* Run untrusted-input parsing in a throwaway child: seccomp strict mode
 * (read, write, exit, sigreturn only), every inherited fd closed but the
 * output pipe, memory bounded by one arena mapped before the filter and
 * by RLIMIT_STACK (strict mode leaves the stack the only way to grow),
 * time bounded by a deadline after which the parent kills it. A crash, a
 * timeout or a seccomp violation there is an error here, never a crash of
 * the caller. */
#ifndef SR_CHECKER_CONFINE_H
#define SR_CHECKER_CONFINE_H

#include <stddef.h>
#include <stdint.h>

#include "checker_arena.h"
#include "saferun.h"

typedef struct sr_confine_limits {
	uint64_t timeout_ms;
	uint64_t memory_bytes; /* the child's arena */
} sr_confine_limits;

/* Computes up to out_size bytes of output into out from arg, with arena
 * a, and returns how many it made (only those are copied back). Runs
 * under seccomp strict mode: no allocation, no system calls. */
typedef size_t (*sr_confined_fn)(void *arg, sr_arena *a, void *out, size_t out_size);

/* Run fn in a confined child and copy its output to out (*got bytes).
 * Returns 0, or -1 with err saying how the child failed (ETIMEDOUT,
 * ECHILD, ...). */
int sr_confine_run(sr_confined_fn fn, void *arg, const sr_confine_limits *lim, void *out,
		   size_t out_size, size_t *got, sr_error *err);

/* The same in two steps, so the caller can work while the child does:
 * start forks it (fn and arg are the child's copies from then on), finish
 * collects its output as sr_confine_run does (the deadline counts from
 * the start), abort kills and reaps it. */
typedef struct sr_confined {
	int rfd, pidfd;
	uint64_t deadline, timeout_ms;
} sr_confined;
int sr_confine_start(sr_confined_fn fn, void *arg, const sr_confine_limits *lim, size_t out_size,
		     sr_confined *c, sr_error *err);
int sr_confine_finish(sr_confined *c, void *out, size_t out_size, size_t *got, sr_error *err);
void sr_confine_abort(sr_confined *c);

#endif

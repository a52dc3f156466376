/* The checker's whole pipeline over one source text. Pure computation in
 * the caller's arena: no allocation, no system calls, so it can run under
 * seccomp strict mode. */
#ifndef SR_CHECKER_SCAN_H
#define SR_CHECKER_SCAN_H

#include "checker_arena.h"
#include "checker_rules.h"

/* Fill out with the findings for src. Returns 0, or -2 (out->status too)
 * when the arena ran out. */
int sr_checker_run(const char *src, size_t len, const sr_check_config *cfg, sr_arena *a,
		   sr_check_out *out);

#endif

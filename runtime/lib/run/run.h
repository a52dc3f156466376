/* The run layer's internal interface: sr_run and its cold, warm and
 * kernel paths, over the box layer (one sandbox). */
#ifndef SR_RUN_H
#define SR_RUN_H

#include "deps.h"
#include "deps_cache.h"
#include "saferun.h"

/* sr_run after the checks and the checker: the request's dependency
 * layer (deps.c), then a cold sandbox, start to end. */
int sr_box_run_cold(const sr_run_request *req, sr_result *res, sr_error *err);

/* The warm path's JavaScript pool (warm_node.c): size sandboxes of p's
 * policy with node started, each for one run; started by sr_warm_start
 * when warm.languages has javascript. Refused when the profile has no
 * node. */
typedef struct sr_node_pool sr_node_pool;
int sr_node_pool_start(const sr_policy *p, const char *rootfs_dir, unsigned size,
		       sr_node_pool **out, sr_error *err);
/* 0: the run ran in a ready sandbox (res->warm). -1: nothing of it ran
 * (none was ready, or its hand-over failed), why says so: run it cold. The
 * caller has checked that req fits the pool's policy. */
int sr_node_pool_run(sr_node_pool *np, const sr_run_request *req, sr_result *res, char *why,
		     size_t why_size);
void sr_node_pool_get_stats(sr_node_pool *np, struct sr_warm_js_stats *st);
/* Until the pool is full or until_ms (sr_now_ms) passed. */
int sr_node_pool_wait_ready(sr_node_pool *np, uint64_t until_ms, sr_error *err);
/* Waits for the runs in flight; removes every sandbox of the pool. */
void sr_node_pool_stop(sr_node_pool *np);

/* The sandbox a kernel runs in (kernel_exec.c starts commands in it). */
struct sr_box;
struct sr_box *sr_kernel_box(sr_kernel *k);

#endif

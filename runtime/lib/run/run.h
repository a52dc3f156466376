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

/* The sandbox a kernel runs in (kernel_exec.c starts commands in it). */
struct sr_box;
struct sr_box *sr_kernel_box(sr_kernel *k);

#endif

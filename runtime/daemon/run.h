/* Running code for a request: the REST handler for POST /v1/run, and the
 * execution step every front-end shares (policy, gate, sr_run, log,
 * metrics). */
#ifndef SRD_RUN_H
#define SRD_RUN_H

#include "daemon.h"
#include "http.h"
#include "run_opts.h"

/* POST /v1/run: the body is srd_run_opts' JSON; the answer is the result
 * JSON of sr_result_to_json (200 whatever the run's status). */
void srd_handle_run(srd_ctx *ctx, const srd_request *req, srd_response *res);

/* Wait for a slot and run. 0: res is filled (sr_result_free it); -1: e
 * says why nothing ran (4xx: the request, 429/503: try later, 500). */
int srd_run_execute(srd_ctx *ctx, const srd_run_opts *o, const srd_peer *peer, sr_result *res,
		    srd_ferr *e);

#endif

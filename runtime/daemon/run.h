/* Running code for a request: the REST handler for POST /v1/run, and the
 * execution step every front-end shares (policy, gate, sr_run, log,
 * metrics). */
#ifndef SRD_RUN_H
#define SRD_RUN_H

#include <signal.h>

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

/* The pieces sessions share with one-shot runs. */
/* Wait for a run slot in turn with the other tenants: SRD_GATE_OK, or e
 * says 429 (the daemon's queue or the peer's tenant's is full), 503, or
 * 499 (the peer disconnected while queued). */
srd_gate_result srd_run_enter_gate(srd_ctx *ctx, const srd_peer *peer, srd_ferr *e);
/* The slot back (after SRD_GATE_OK). */
void srd_run_leave_gate(srd_ctx *ctx, const srd_peer *peer);
/* The library refused before anything ran: err as a 4xx/5xx. */
int srd_run_refused(const sr_error *err, srd_ferr *e);
/* 400 naming "language" when p's profile has no interpreter for l. */
int srd_run_check_language(const srd_ctx *ctx, const sr_policy *p, const char *policy_name,
			   sr_language l, srd_ferr *e);
/* Metrics and the run's log line (session: its id, or NULL), by the
 * peer's tenant and the run's language. */
void srd_run_record(srd_ctx *ctx, const sr_result *r, sr_language language, const char *policy,
		    const char *session, const srd_peer *peer, uint64_t queue_ms, uint64_t total_ms,
		    size_t code_len);
/* Sandboxes inherit the calling thread's signal mask: clear it around
 * anything that clones one (restore with pthread_sigmask(old)). */
void srd_unmask_signals(sigset_t *old);

#endif

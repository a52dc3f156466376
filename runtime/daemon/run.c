#include "run.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "node.h"
#include "run_stream.h"
#include "warm_pools.h"

/* The client closed its end (or the connection broke) while its run
 * waited: nobody would read the result. A client that only half-closes
 * after its request counts as gone too. */
static bool client_gone(void *arg)
{
	const srd_peer *peer = arg;
	struct pollfd p = { .fd = peer->fd, .events = POLLRDHUP };
	return peer->fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

srd_gate_result srd_run_enter_gate(srd_ctx *ctx, const srd_peer *peer, srd_ferr *e)
{
	const srd_tenant *t = peer->tenant;
	srd_gate_result g = srd_gate_enter_class(&ctx->gate, t->index, client_gone, (void *)peer);
	if (g == SRD_GATE_GONE) {
		srd_metrics_refused(&ctx->metrics, t, SRD_REFUSED_CLIENT_GONE);
		srd_log_tenant("info", "run", srd_tenant_log_name(t),
			       "a queued run was dropped: its client disconnected");
		/* 499, nginx's "client closed request": no one reads it. */
		srd_fail(e, 499, NULL, "the client disconnected while its run was queued");
	}
	if (g == SRD_GATE_CLASS_FULL) {
		srd_metrics_refused(&ctx->metrics, t, SRD_REFUSED_QUEUE_FULL);
		srd_fail(e, 429, NULL,
			 "tenant \"%s\" has %u runs running and %u waiting (its "
			 "max_concurrent_runs and queue_depth quotas); try again shortly",
			 t->name, ctx->gate.class_max_running[t->index],
			 ctx->gate.class_max_waiting[t->index]);
		e->retry_after = 1;
	} else if (g == SRD_GATE_FULL) {
		srd_metrics_refused(&ctx->metrics, t, SRD_REFUSED_QUEUE_FULL);
		srd_fail(e, 429, NULL,
			 "saferund is busy: %u runs are running and %u waiting; "
			 "try again shortly",
			 ctx->gate.max_running, ctx->gate.max_waiting);
		e->retry_after = 1;
	} else if (g == SRD_GATE_CLOSED) {
		srd_metrics_refused(&ctx->metrics, t, SRD_REFUSED_DRAINING);
		srd_fail(e, 503, NULL, "saferund is shutting down; try again shortly");
		e->retry_after = 5;
	}
	return g;
}

void srd_run_leave_gate(srd_ctx *ctx, const srd_peer *peer)
{
	srd_gate_leave_class(&ctx->gate, peer->tenant->index);
}

/* The library refused before anything ran: bad input, or a host problem. */
int srd_run_refused(const sr_error *err, srd_ferr *e)
{
	if (err->code == SR_ERR_LANGUAGE)
		return srd_fail(e, 400, "language", "%s", err->msg);
	switch (err->errnum) {
	case EINVAL:
		return srd_fail(e, 400, err->code == SR_ERR_REQUIREMENTS ? "requirements" : NULL,
				"%s", err->msg);
	case EILSEQ: return srd_fail(e, 400, "code", "%s", err->msg);
	case EFBIG: return srd_fail(e, 413, NULL, "%s", err->msg);
	case EAGAIN: /* a warm policy with fallback "error", its zygote down */
		e->retry_after = 1;
		return srd_fail(e, 503, NULL, "%s", err->msg);
	default: return srd_fail(e, 500, NULL, "the sandbox could not be set up: %s", err->msg);
	}
}

int srd_run_check_language(const srd_ctx *ctx, const sr_policy *p, const char *policy_name,
			   sr_language l, srd_ferr *e)
{
	if (sr_profile_has_language(ctx->cfg->rootfs_dir, p->profile, l))
		return 0;
	return srd_fail(e, 400, "language",
			"\"language\": profile \"%s\" (policy \"%s\") has no %s; use a policy "
			"whose profile has it (GET /v1/packages lists each profile's languages)",
			p->profile, policy_name, sr_language_name(l));
}

/* Sandboxes inherit the calling thread's signal mask across exec; the
 * server's threads block some signals, the code must not see that. */
void srd_unmask_signals(sigset_t *old)
{
	sigset_t none;
	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, old);
}

/* On the policy's warm pool if it has one (which may still run it cold). */
static int run_unmasked(srd_ctx *ctx, const char *policy, const sr_run_request *req, sr_result *res,
			sr_error *err)
{
	sigset_t old;
	srd_unmask_signals(&old);
	srd_warm_pool *pool = srd_warm_acquire(ctx->warm, policy);
	int rc = pool ? sr_warm_run(srd_warm_pool_get(pool), req, res, err) : sr_run(req, res, err);
	srd_warm_release(ctx->warm, pool);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

void srd_run_record(srd_ctx *ctx, const sr_result *r, sr_language language, const char *policy,
		    const char *session, const srd_peer *peer, uint64_t queue_ms, uint64_t total_ms,
		    size_t code_len)
{
	srd_metrics_run(&ctx->metrics, peer ? peer->tenant : NULL, language, r->status,
			r->duration_ms, queue_ms);
	cJSON *line = cJSON_CreateObject();
	if (r->id[0])
		cJSON_AddStringToObject(line, "id", r->id);
	if (session)
		cJSON_AddStringToObject(line, "session", session);
	cJSON_AddItemToObject(line, "peer", srd_peer_json(peer));
	cJSON_AddStringToObject(line, "policy", policy);
	cJSON_AddStringToObject(line, "language", sr_language_name(language));
	cJSON_AddStringToObject(line, "status", sr_status_name(r->status));
	cJSON_AddNumberToObject(line, "exit_code", r->exit_code);
	cJSON_AddNumberToObject(line, "signal", r->signal);
	cJSON_AddNumberToObject(line, "queue_ms", (double)queue_ms);
	cJSON_AddNumberToObject(line, "duration_ms", (double)r->duration_ms);
	cJSON_AddNumberToObject(line, "total_ms", (double)total_ms);
	cJSON_AddNumberToObject(line, "cpu_ms", (double)r->cpu_ms);
	cJSON_AddNumberToObject(line, "peak_memory_bytes", (double)r->peak_memory_bytes);
	cJSON_AddNumberToObject(line, "code_bytes", (double)code_len);
	cJSON *hit = cJSON_AddArrayToObject(line, "limits_hit");
	if (r->status == SR_STATUS_TIMEOUT)
		cJSON_AddItemToArray(hit, cJSON_CreateString("wall_time"));
	if (r->hit_memory)
		cJSON_AddItemToArray(hit, cJSON_CreateString("memory"));
	if (r->hit_pids)
		cJSON_AddItemToArray(hit, cJSON_CreateString("pids"));
	if (r->hit_tmpfs)
		cJSON_AddItemToArray(hit, cJSON_CreateString("disk"));
	if (r->truncated)
		cJSON_AddItemToArray(hit, cJSON_CreateString("output"));
	if (r->message[0])
		cJSON_AddStringToObject(line, "message", r->message);
	srd_log_json("run", line);
}

int srd_run_execute(srd_ctx *ctx, const srd_run_opts *o, const srd_peer *peer, sr_result *res,
		    srd_ferr *e)
{
	const char *name = o->policy ? o->policy : ctx->cfg->default_policy;
	sr_policy *p = NULL;
	if (srd_node_refuse_draining(ctx, "runs", e)) {
		srd_metrics_refused(&ctx->metrics, peer->tenant, SRD_REFUSED_DRAINING);
		return -1;
	}
	if (srd_tenant_check_policy(peer->tenant, name, e) ||
	    srd_policies_get(ctx->policies, name, "policy", &p, e) ||
	    srd_tenant_check_allow(peer->tenant, p, o->allow_field ? o->allow_field : "allow",
				   o->allow, o->n_allow, e) ||
	    srd_run_opts_apply(o, p, name, e) ||
	    srd_run_check_language(ctx, p, name, o->language, e)) {
		srd_metrics_refused(&ctx->metrics, peer->tenant, SRD_REFUSED_BAD_REQUEST);
		sr_policy_free(p);
		return -1;
	}
	sr_run_request req = {
		.policy = p,
		.code = o->code,
		.code_size = o->code_len,
		.files = o->files,
		.n_files = o->n_files,
		.stdin_data = o->stdin_data,
		.stdin_size = o->stdin_len,
		.rootfs_dir = ctx->cfg->rootfs_dir,
		.allow = o->allow,
		.n_allow = o->n_allow,
		.requirements = o->requirements,
		.n_requirements = o->n_requirements,
		.on_output = o->on_output,
		.on_output_arg = o->on_output_arg,
		.language = o->language,
		.cgroup_share = srd_tenant_cgroup(peer->tenant),
	};
	uint64_t t0 = srd_now_ms();
	if (srd_run_enter_gate(ctx, peer, e) != SRD_GATE_OK) {
		sr_policy_free(p);
		return -1;
	}
	uint64_t t1 = srd_now_ms();
	sr_error err = { 0 };
	int rc = run_unmasked(ctx, name, &req, res, &err);
	srd_run_leave_gate(ctx, peer);
	sr_policy_free(p);
	if (rc < 0) {
		srd_metrics_refused(&ctx->metrics, peer->tenant, SRD_REFUSED_BAD_REQUEST);
		return srd_run_refused(&err, e);
	}
	srd_run_record(ctx, res, o->language, name, NULL, peer, t1 - t0, srd_now_ms() - t0,
		       o->code_len);
	return 0;
}

void srd_handle_run(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_ferr e = { 0 };
	cJSON *doc = NULL;
	srd_run_opts o = { 0 };
	sr_result r;
	srd_run_streamer st = { .res = res };
	if (srd_json_parse_object(req->body, req->body_len, &doc, &e) ||
	    srd_run_opts_parse(doc, &o, &e)) {
		srd_metrics_refused(&ctx->metrics, req->peer ? req->peer->tenant : NULL,
				    SRD_REFUSED_BAD_REQUEST);
		srd_respond_error(res, &e);
	} else if ((st.fmt = srd_stream_wanted(req, o.stream))) {
		/* streamed (run_stream.h): output items, then the result */
		o.on_output = srd_run_streamer_output;
		o.on_output_arg = &st;
		if (srd_run_execute(ctx, &o, req->peer, &r, &e)) {
			if (!srd_run_streamer_error(&st, &e))
				srd_respond_error(res, &e);
		} else {
			char *json = sr_result_to_json(&r);
			sr_result_free(&r);
			srd_run_streamer_result(&st, json ? cJSON_Parse(json) : NULL);
			free(json);
		}
	} else if (srd_run_execute(ctx, &o, req->peer, &r, &e)) {
		srd_respond_error(res, &e);
	} else {
		char *json = sr_result_to_json(&r);
		sr_result_free(&r);
		if (json)
			srd_respond_text(res, 200, "application/json", json, strlen(json));
		else
			srd_respond_error(res,
					  &(srd_ferr){ .status = 500, .msg = "out of memory" });
	}
	srd_run_opts_free(&o);
	cJSON_Delete(doc);
}

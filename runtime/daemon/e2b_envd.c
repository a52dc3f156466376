/* Port 49983 of an E2B sandbox: envd (envd.c) with the sandbox's state;
 * its commands enter the default context's kernel (e2b_exec.c). */
#include "e2b_envd.h"

#include <string.h>

#include "connect.h"
#include "e2b_exec.h"
#include "envd.h"

static void end_state(void *state)
{
	srd_envd_end(state);
}

static void free_state(void *state)
{
	srd_envd_free(state);
}

static int exec_command(void *arg, const sr_exec_options *xo, sr_exec_proc *out, sr_error *err)
{
	return srd_e2b_exec(arg, xo, out, err);
}

void srd_envd_handle(srd_ctx *ctx, struct srd_e2b_sandbox *sb, const srd_request *req,
		     srd_response *res)
{
	srd_cerr e = { 0 };
	/* E2B's signed download and upload URLs: not served (the SDK sends
	 * the access token on every call it makes itself). */
	if (strcmp(req->path, "/files") == 0 && !srd_request_header(req, "X-Access-Token"))
		return srd_e2b_error(res, 401,
				     "signed file URLs are not served by saferun: send the "
				     "sandbox's X-Access-Token");
	if (srd_e2b_paused(sb)) {
		srd_cfail(&e, "unavailable", "sandbox %s is paused: resume it (Sandbox.connect)",
			  sb->id);
		return srd_connect_reply_error(res, &e);
	}
	pthread_mutex_lock(&sb->lock);
	if (!sb->envd_state && (sb->envd_state = srd_envd_new(exec_command, sb))) {
		sb->envd_state_end = end_state;
		sb->envd_state_free = free_state;
	}
	srd_envd *env = sb->envd_state;
	pthread_mutex_unlock(&sb->lock);
	if (!env) {
		srd_cfail(&e, "internal", "out of memory");
		return srd_connect_reply_error(res, &e);
	}
	srd_envd_serve(ctx, env, sb->session, req, res);
}

/* envd: E2B's in-sandbox agent, served by the daemon for an E2B sandbox
 * (a session): the Connect services filesystem.Filesystem and
 * process.Process in their JSON form (connect.h), GET/POST /files and
 * GET /health. Files are the session's workspace (the E2B user's home,
 * /home/user, is the sandbox's working dir); commands run in the sandbox
 * through the exec function its owner gives (sr_kernel_exec into the
 * sandbox's kernel). */
#ifndef SRD_ENVD_H
#define SRD_ENVD_H

#include "daemon.h"
#include "http.h"
#include "sessions.h"

/* What one sandbox's envd holds: its commands and watchers. */
typedef struct srd_envd srd_envd;

/* Starts a command in the sandbox (sr_kernel_exec's contract); -1 with
 * err (EAGAIN: the sandbox is paused). */
typedef int srd_envd_exec_fn(void *arg, const sr_exec_options *xo, sr_exec_proc *out,
			     sr_error *err);

/* exec(arg, ...) starts its commands; arg outlives env. */
srd_envd *srd_envd_new(srd_envd_exec_fn *exec, void *arg);
/* The sandbox ended: kill its commands now (their streams end as
 * killed); requests may still hold env. */
void srd_envd_end(srd_envd *env);
/* Kill its commands, close its watchers, free it. */
void srd_envd_free(srd_envd *env);
/* Serve one envd request for session ss. */
void srd_envd_serve(srd_ctx *ctx, srd_envd *env, srd_session *ss, const srd_request *req,
		    srd_response *res);

#endif

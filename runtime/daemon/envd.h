/* envd: E2B's in-sandbox agent, served by the daemon for an E2B sandbox
 * (a session): the Connect services filesystem.Filesystem and
 * process.Process in their JSON form (connect.h), GET/POST /files and
 * GET /health. Files are the session's workspace (the E2B user's home,
 * /home/user, is the sandbox's working dir); commands run in a sandbox of
 * their own over the same workspace and policy (sr_kernel_exec). */
#ifndef SRD_ENVD_H
#define SRD_ENVD_H

#include "daemon.h"
#include "http.h"
#include "sessions.h"

/* What one sandbox's envd holds: its commands and watchers. */
typedef struct srd_envd srd_envd;

srd_envd *srd_envd_new(void);
/* The sandbox ended: kill its commands now (their streams end as
 * killed); requests may still hold env. */
void srd_envd_end(srd_envd *env);
/* Kill its commands, close its watchers, free it. */
void srd_envd_free(srd_envd *env);
/* Serve one envd request for session ss. */
void srd_envd_serve(srd_ctx *ctx, srd_envd *env, srd_session *ss, const srd_request *req,
		    srd_response *res);

#endif

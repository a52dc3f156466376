/* The E2B listener (saferund --e2b-listen, docs/e2b.md): E2B's control API
 * (POST /v2/sandboxes, list, info, kill, timeout, pause, connect) and its
 * sandbox traffic on one port, so E2B's SDKs work unchanged with
 * E2B_API_URL = E2B_SANDBOX_URL = http://HOST:PORT.
 *
 * An E2B sandbox is a saferun session (sessions.h): its policy, limits and
 * workspace, closed when its E2B timeout passes. Requests for a sandbox
 * carry the headers E2b-Sandbox-Id and E2b-Sandbox-Port: port 49999 is the
 * code interpreter (here), port 49983 is envd (srd_envd_handle,
 * e2b_envd.h). */
#ifndef SRD_E2B_H
#define SRD_E2B_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon.h"
#include "http.h"
#include "sessions.h"

/* The envd version the control API reports: the SDK picks its protocol
 * variants by it (0.5.4: multipart uploads, envd close supported). */
#define SRD_E2B_ENVD_VERSION "0.5.4"
#define SRD_E2B_PORT_ENVD    49983
#define SRD_E2B_PORT_JUPYTER 49999

struct srd_e2b_context;

typedef struct srd_e2b_sandbox {
	/* ---- what envd (e2b_envd.c) may use ---- */
	srd_session *session; /* referenced for the sandbox's whole life */
	char id[40];          /* the sandbox id: the session's id */
	char envd_token[65];  /* its access token (X-Access-Token), 64 hex */
	/* Guards envd_state and the fields below it. */
	pthread_mutex_t lock;
	/* envd's per-sandbox objects. envd_state_end(envd_state), if set, is
	 * called once when the sandbox ends (killed, expired, daemon shutdown):
	 * end what it runs now, as a request may still be waiting on it;
	 * envd_state_free(envd_state) once the last reference has gone (no
	 * request holds the sandbox). Both with no lock held. */
	void *envd_state;
	void (*envd_state_end)(void *state);
	void (*envd_state_free)(void *state);

	/* ---- the listener's own ---- */
	srd_ctx *ctx;
	char template_id[128];
	char *metadata_json; /* the metadata object as created ("{}" if none) */
	uint64_t started_real_ms;
	bool auto_pause; /* lifecycle.onTimeout "pause": paused, not killed */
	bool paused;     /* no code runs; its interpreters stay frozen */
	/* Runs hold it shared; pause takes it alone (waits for them). */
	pthread_rwlock_t exec_gate;
	uint64_t timeout_at; /* srd_now_ms when it ends (or pauses) */
	struct srd_e2b_context *contexts;
	unsigned next_context;
	unsigned refs; /* the registry's (while open) + each request's */
	bool ended;
	struct srd_e2b_sandbox *next;
} srd_e2b_sandbox;

/* Who a request on the E2B listener is, from its headers (hdr(conn, name)):
 * the API key (X-API-Key: a saferund token, a tenant's with --tenants) for
 * the control API; the sandbox's access token (X-Access-Token, or
 * E2B-Traffic-Access-Token) for sandbox traffic, which then belongs to the
 * sandbox's tenant. NULL with *status and *why (static text): 401 for a
 * wrong key or token, 502 for an unknown sandbox (as E2B's proxy answers).
 * need_token: the listener needs one (not --insecure-no-token). */
const srd_tenant *srd_e2b_identify(srd_ctx *ctx, const srd_peer *peer, bool need_token,
				   const char *url,
				   const char *(*hdr)(void *conn, const char *name), void *conn,
				   unsigned *status, const char **why);

/* Route a request of the E2B listener (after srd_e2b_identify). */
void srd_e2b_route(srd_ctx *ctx, srd_request *req, srd_response *res);

/* The sandbox with this id, referenced (srd_e2b_release it), or NULL;
 * tenant NULL: whoever's. */
srd_e2b_sandbox *srd_e2b_find(const char *id, const srd_tenant *tenant);
void srd_e2b_release(srd_e2b_sandbox *sb);
/* An error in E2B's shape: {"code": status, "message": msg}. */
void srd_e2b_error(srd_response *res, unsigned status, const char *msg);

/* path against "/a/{id}/b" ({id}: one segment, into req->params). */
bool srd_e2b_match(const char *pattern, const char *path, srd_request *req);

/* Whether a sandbox is paused now (envd refuses work while it is). */
bool srd_e2b_paused(srd_e2b_sandbox *sb);

#endif

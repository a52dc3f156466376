/* Sessions: a sandbox identity that outlives one run. Each has its own
 * policy (limits fixed at creation), its own workspace (a size-capped
 * tmpfs with src/ and artifacts/, bound as the working dir of its runs)
 * and, when stateful, one kernel whose interpreter keeps variables,
 * imports and functions between runs. Runs of one session take turns;
 * idle or too old sessions are closed by srd_sessions_reap. */
#ifndef SRD_SESSIONS_H
#define SRD_SESSIONS_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "config.h"
#include "http.h"
#include "json.h"
#include "run_opts.h"
#include "saferun.h"

typedef struct srd_session srd_session;
typedef struct srd_sessions srd_sessions;
struct srd_ctx;
struct srd_tenant;

/* Make the workspaces dir and clear what a crashed instance left in it. */
int srd_sessions_open(const srd_config *cfg, srd_sessions **out, char *msg, size_t size);
/* Close every session (their runs end as killed). */
void srd_sessions_close(srd_sessions *s);
unsigned srd_sessions_count(srd_sessions *s);
/* counts[i]: the sessions of the tenant of index i (< n), open or being
 * built, as srd_sessions_count and the tenant's max_sessions count them. */
void srd_sessions_count_by_tenant(srd_sessions *s, unsigned *counts, size_t n);
/* Close the sessions idle past session_ttl or older than session_max_age. */
void srd_sessions_reap(srd_sessions *s);
/* The ids of tenant's open sessions, oldest first. */
cJSON *srd_sessions_ids(srd_sessions *s, const struct srd_tenant *tenant);

/* Front-ends that build on sessions (the E2B listener, e2b.h). */
/* fn(arg) once when it leaves the table (closed, expired, shutdown), with
 * no lock held; at once if it already has. */
void srd_session_on_close(srd_session *ss, void (*fn)(void *arg), void *arg);
/* Close it at deadline_ms (srd_now_ms), idle or busy, instead of when idle
 * past session_ttl; 0: session_ttl again. session_max_age still holds. */
void srd_session_set_deadline(srd_session *ss, uint64_t deadline_ms);
uint64_t srd_session_deadline(srd_session *ss);
/* When session_max_age (or the tenant's) ends it, on srd_now_ms's clock. */
uint64_t srd_session_max_end(const srd_session *ss);
bool srd_session_ended(srd_session *ss);
const char *srd_session_policy_name(const srd_session *ss);
/* What a kernel of its own needs: its policy, workspace and dependency
 * layer (valid while ss is referenced). */
void srd_session_kernel_options(struct srd_ctx *ctx, srd_session *ss, sr_kernel_options *ko);

/* Policy and limits from o (as for a run), a workspace, o's files in it.
 * The session comes back referenced: srd_session_release it. */
int srd_session_create(struct srd_ctx *ctx, const srd_run_opts *o, const srd_peer *peer,
		       srd_session **out, srd_ferr *e);
/* Find tenant's session and reference it; 404 in e when it has no such
 * open session (another tenant's is answered the same). */
srd_session *srd_session_find(srd_sessions *s, const struct srd_tenant *tenant, const char *id,
			      srd_ferr *e);
void srd_session_release(srd_session *ss);
/* Close: it leaves the table at once; a run in progress is ended; the
 * workspace goes when the last reference does. 404 if unknown. */
int srd_session_end(srd_sessions *s, const struct srd_tenant *tenant, const char *id, srd_ferr *e);

/* Run o's code in the session (its files written first). 0: res filled
 * (sr_result_free it); -1: e says why nothing ran. */
int srd_session_run(struct srd_ctx *ctx, srd_session *ss, const srd_run_opts *o,
		    const srd_peer *peer, sr_result *res, srd_ferr *e);

/* The session named by the route's first {id} param, referenced; NULL
 * after answering 404 in res. */
srd_session *srd_session_from_request(struct srd_ctx *ctx, const srd_request *req,
				      srd_response *res);
/* A file call used it: its idle time starts again (runs do this too). */
void srd_session_touch(srd_session *ss);
const char *srd_session_id(const srd_session *ss);
const struct srd_tenant *srd_session_tenant(const srd_session *ss);
const char *srd_session_workdir(const srd_session *ss); /* inside the sandbox: "/work" */
sr_workspace *srd_session_workspace(srd_session *ss);
/* {session_id, policy, stateful, created_s, idle_s, runs, workdir,
 *  disk: {used_bytes, limit_bytes}, limits: {...}} */
cJSON *srd_session_json(srd_session *ss);
/* The workspace error as a 4xx/5xx: ENOENT 404, ELOOP 403, EINVAL 400,
 * EISDIR 400, EFBIG 413, ENOSPC 507, others 500. field names the path. */
int srd_session_file_error(const sr_error *err, const char *field, srd_ferr *e);

#endif

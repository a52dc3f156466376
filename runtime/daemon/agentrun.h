/* AgentRunPlus's session shapes, shared by its REST routes (agentrun.c)
 * and the MCP tools of the same names (mcp_tools.c): one place decides
 * what a session, an execute, a listing looks like to its clients. */
#ifndef SRD_AGENTRUN_H
#define SRD_AGENTRUN_H

#include <cjson/cJSON.h>

#include "daemon.h"
#include "sessions.h"

#define SRD_ARP_OUTSIDE_ARTIFACTS "Path must be within the session's artifact directory"

/* {session_id, workdir, source_path, artifact_path, upload_url, artifacts_url};
 * the URLs start with base ("": relative; see public_url.h). */
cJSON *srd_arp_created_json(srd_session *ss, const char *base);
/* {session_id, source_path, artifact_path} */
cJSON *srd_arp_info_json(srd_session *ss);
/* {active_sessions, count}: tenant's own */
cJSON *srd_arp_list_json(srd_ctx *ctx, const srd_tenant *tenant);
/* {message: "Session ID closed successfully"} */
cJSON *srd_arp_closed_json(const char *id);
/* Run code in the session: {success, output}, the status stated in the
 * output when it is not ok. NULL: e says why nothing ran. */
cJSON *srd_arp_execute(srd_ctx *ctx, srd_session *ss, const char *code, const char **allow,
		       size_t n_allow, const srd_peer *peer, srd_ferr *e);
/* The same, the output passed to on_output as it comes (run_stream.h). */
cJSON *srd_arp_execute_output(srd_ctx *ctx, srd_session *ss, const char *code, const char **allow,
			      size_t n_allow, const srd_peer *peer,
			      void (*on_output)(void *arg, int stream, const char *data,
						size_t len),
			      void *on_output_arg, srd_ferr *e);
/* The merged output with a non-ok status's message after it (and, for a
 * rejection, every finding) for a model to read (malloc'd; NULL: out of
 * memory). */
char *srd_arp_output(const sr_result *r);
/* Why an upload's file name is refused (status: 403 traversal, 400
 * otherwise), or NULL when it is fine. */
const char *srd_arp_bad_name(const char *name, unsigned *status);
/* src_path ("artifacts/x" or "/work/artifacts/x") as a workspace path,
 * or NULL when it is outside the artifact dir. */
const char *srd_arp_artifact_path(const srd_session *ss, const char *src);
/* {artifacts: [{name, size_bytes, download_url}], count, artifacts_url},
 * the URLs starting with base */
cJSON *srd_arp_artifacts_json(srd_session *ss, const char *base, srd_ferr *e);
/* {files: [{name, size_bytes}], count} (base: unused, the same shape as
 * srd_arp_artifacts_json for the callers that take either) */
cJSON *srd_arp_src_json(srd_session *ss, const char *base, srd_ferr *e);

#endif

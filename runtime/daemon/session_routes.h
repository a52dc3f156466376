/* Route handlers for sessions: the native /v1/sessions API
 * (session_routes.c) and the AgentRunPlus-compatible /sessions API
 * (agentrun.c), both over sessions.h. */
#ifndef SRD_SESSION_ROUTES_H
#define SRD_SESSION_ROUTES_H

#include "daemon.h"
#include "http.h"
#include "sessions.h"

/* /v1/sessions ... */
void srd_handle_session_create(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_session_list(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_session_get(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_session_delete(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_session_run(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_files_list(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_file_get(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_file_put(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_file_delete(srd_ctx *ctx, const srd_request *req, srd_response *res);

/* /sessions ... (AgentRunPlus) */
void srd_handle_arp_create(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_arp_list(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_arp_get(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_arp_delete(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_arp_execute(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_arp_copy_to(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_arp_copy_from(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_arp_artifacts(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_arp_src(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_arp_artifact_get(srd_ctx *ctx, const srd_request *req, srd_response *res);

/* Shared by both: a listing of dir as [{path, size, type}] (NULL: e). */
cJSON *srd_session_listing(srd_session *ss, const char *dir, const char **truncated, srd_ferr *e);
/* Store data at path in the workspace (max_file_size); -1: e. */
int srd_session_put_file(srd_ctx *ctx, srd_session *ss, const char *path, const void *data,
			 size_t size, const char *field, srd_ferr *e);
/* A workspace file as an attachment called name; -1: e. */
int srd_session_send_file(srd_ctx *ctx, srd_session *ss, const char *path, const char *name,
			  srd_response *res, srd_ferr *e);

#endif

/* The native session routes: /v1/sessions and their files. */
#include "session_routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_stream.h"
#include "sessions.h"

/* The workspace paths the API shows: relative to the working dir. */
#define MAX_LIST      10000
#define STRINGIFY_(x) #x
#define STRINGIFY(x)  STRINGIFY_(x)

/* An empty body is {}: a session with the default policy. */
static int parse_body(const srd_request *req, srd_opts_kind kind, cJSON **doc, srd_run_opts *o,
		      srd_ferr *e)
{
	static const char empty[] = "{}";
	bool none = !req->body || req->body_len == 0;
	return srd_json_parse_object(none ? empty : req->body, none ? 2 : req->body_len, doc, e) ||
		       srd_run_opts_parse_as(*doc, kind, o, e)
		   ? -1
		   : 0;
}

static void add_urls(cJSON *j, const char *id)
{
	char url[96];
	snprintf(url, sizeof url, "/v1/sessions/%s/run", id);
	cJSON_AddStringToObject(j, "run_url", url);
	snprintf(url, sizeof url, "/v1/sessions/%s/files", id);
	cJSON_AddStringToObject(j, "files_url", url);
}

void srd_handle_session_create(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_ferr e = { 0 };
	cJSON *doc = NULL;
	srd_run_opts o = { 0 }; /* freed even when the body is not JSON */
	srd_session *ss = NULL;
	if (parse_body(req, SRD_OPTS_SESSION, &doc, &o, &e) == 0 &&
	    srd_session_create(ctx, &o, req->peer, &ss, &e) == 0) {
		cJSON *j = srd_session_json(ss);
		add_urls(j, srd_session_id(ss));
		srd_respond_json(res, 201, j);
		srd_session_release(ss);
	} else {
		srd_respond_error(res, &e);
	}
	srd_run_opts_free(&o);
	cJSON_Delete(doc);
}

void srd_handle_session_list(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	const srd_tenant *t = req->peer->tenant;
	cJSON *ids = srd_sessions_ids(ctx->sessions, t), *list = cJSON_CreateArray(), *id;
	cJSON_ArrayForEach(id, ids)
	{
		srd_ferr e = { 0 };
		srd_session *ss = srd_session_find(ctx->sessions, t, id->valuestring, &e);
		if (ss) /* it may have closed since */
			cJSON_AddItemToArray(list, srd_session_json(ss));
		srd_session_release(ss);
	}
	cJSON_Delete(ids);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "count", cJSON_GetArraySize(list));
	cJSON_AddItemToObject(j, "sessions", list);
	srd_respond_json(res, 200, j);
}

void srd_handle_session_get(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_session *ss = srd_session_from_request(ctx, req, res);
	if (!ss)
		return;
	cJSON *j = srd_session_json(ss);
	add_urls(j, srd_session_id(ss));
	srd_respond_json(res, 200, j);
	srd_session_release(ss);
}

void srd_handle_session_delete(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_ferr e = { 0 };
	if (srd_session_end(ctx->sessions, req->peer->tenant, req->params[0], &e)) {
		srd_respond_error(res, &e);
		return;
	}
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "session_id", req->params[0]);
	cJSON_AddBoolToObject(j, "closed", true);
	srd_respond_json(res, 200, j);
}

/* A session run's result as the answer has it: the result's JSON and the
 * session's id (NULL when out of memory). Frees the result. */
static cJSON *session_result_json(srd_session *ss, sr_result *r)
{
	char *json = sr_result_to_json(r);
	cJSON *j = json ? cJSON_Parse(json) : NULL;
	free(json);
	sr_result_free(r);
	if (j)
		cJSON_AddStringToObject(j, "session_id", srd_session_id(ss));
	return j;
}

void srd_handle_session_run(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_ferr e = { 0 };
	cJSON *doc = NULL;
	srd_run_opts o = { 0 };
	sr_result r;
	srd_session *ss = srd_session_from_request(ctx, req, res);
	if (!ss)
		return;
	srd_run_streamer st = { .res = res };
	if (parse_body(req, SRD_OPTS_SESSION_RUN, &doc, &o, &e)) {
		srd_respond_error(res, &e);
	} else if ((st.fmt = srd_stream_wanted(req, o.stream))) {
		/* streamed (run_stream.h): output items, then the result */
		o.on_output = srd_run_streamer_output;
		o.on_output_arg = &st;
		if (srd_session_run(ctx, ss, &o, req->peer, &r, &e)) {
			if (!srd_run_streamer_error(&st, &e))
				srd_respond_error(res, &e);
		} else {
			srd_run_streamer_result(&st, session_result_json(ss, &r));
		}
	} else if (srd_session_run(ctx, ss, &o, req->peer, &r, &e)) {
		srd_respond_error(res, &e);
	} else {
		cJSON *j = session_result_json(ss, &r);
		if (j) {
			srd_respond_json(res, 200, j);
		} else {
			srd_respond_error(res,
					  &(srd_ferr){ .status = 500, .msg = "out of memory" });
		}
	}
	srd_session_release(ss);
	srd_run_opts_free(&o);
	cJSON_Delete(doc);
}

static const char *type_name(char t)
{
	return t == 'f' ? "file" : t == 'd' ? "dir" : t == 'l' ? "symlink" : "other";
}

static const char *cut_reason(sr_list_cut cut)
{
	switch (cut) {
	case SR_LIST_CUT_ENTRIES:
		return "more than " STRINGIFY(MAX_LIST) " entries: the listing stopped there";
	case SR_LIST_CUT_BYTES:
		return "the paths passed the listing's 4 MiB memory cap (long names or a deep "
		       "tree): the listing stopped there";
	case SR_LIST_CUT_DEPTH: return "dirs nested deeper than 128 levels were left out";
	default: return NULL;
	}
}

/* Everything under dir ("" for all) as [{path, size, type}], bounded in
 * entries and bytes: *truncated (if not NULL) says why it stopped short,
 * or is NULL. */
cJSON *srd_session_listing(srd_session *ss, const char *dir, const char **truncated, srd_ferr *e)
{
	sr_workspace_entry *ent;
	size_t n;
	sr_list_cut cut;
	sr_error err = { 0 };
	srd_session_touch(ss);
	if (sr_workspace_list_partial(srd_session_workspace(ss), dir, MAX_LIST,
				      SR_WORKSPACE_LIST_MAX_BYTES, &ent, &n, &cut, &err)) {
		srd_session_file_error(&err, "path", e);
		return NULL;
	}
	if (truncated)
		*truncated = cut_reason(cut);
	cJSON *files = cJSON_CreateArray();
	for (size_t i = 0; i < n; i++) {
		cJSON *f = cJSON_CreateObject();
		cJSON_AddStringToObject(f, "path", ent[i].path);
		cJSON_AddNumberToObject(f, "size", (double)ent[i].size);
		cJSON_AddStringToObject(f, "type", type_name(ent[i].type));
		cJSON_AddItemToArray(files, f);
	}
	sr_workspace_entries_free(ent, n);
	return files;
}

void srd_handle_files_list(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_ferr e = { 0 };
	srd_session *ss = srd_session_from_request(ctx, req, res);
	if (!ss)
		return;
	const char *truncated = NULL;
	cJSON *files = srd_session_listing(ss, "", &truncated, &e);
	if (files) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "session_id", srd_session_id(ss));
		cJSON_AddNumberToObject(j, "count", cJSON_GetArraySize(files));
		cJSON_AddItemToObject(j, "files", files);
		if (truncated) {
			cJSON_AddBoolToObject(j, "truncated", true);
			cJSON_AddStringToObject(j, "truncated_reason", truncated);
		}
		srd_respond_json(res, 200, j);
	} else {
		srd_respond_error(res, &e);
	}
	srd_session_release(ss);
}

/* max_file_size, or the session's tenant's quota when it is lower. */
static uint64_t file_cap(const srd_ctx *ctx, const srd_session *ss)
{
	uint64_t t = srd_session_tenant(ss)->max_file_bytes;
	return t < ctx->cfg->max_file_bytes ? t : ctx->cfg->max_file_bytes;
}

/* Store an uploaded file (size-capped) in the workspace; e for the errors. */
int srd_session_put_file(srd_ctx *ctx, srd_session *ss, const char *path, const void *data,
			 size_t size, const char *field, srd_ferr *e)
{
	sr_error err = { 0 };
	srd_session_touch(ss);
	uint64_t cap = file_cap(ctx, ss);
	if (size > cap)
		return srd_fail(e, 413, field,
				"%s: %zu bytes is over the %llu byte file cap (max_file_size)",
				path, size, (unsigned long long)cap);
	if (sr_workspace_write(srd_session_workspace(ss), path, data, size, &err))
		return srd_session_file_error(&err, field, e);
	return 0;
}

/* Send a workspace file as the body; e for the errors. */
int srd_session_send_file(srd_ctx *ctx, srd_session *ss, const char *path, const char *name,
			  srd_response *res, srd_ferr *e)
{
	void *data;
	size_t size;
	sr_error err = { 0 };
	srd_session_touch(ss);
	if (sr_workspace_read(srd_session_workspace(ss), path, file_cap(ctx, ss), &data, &size,
			      &err))
		return srd_session_file_error(&err, "path", e);
	srd_respond_attachment(res, 200, name, data, size);
	return 0;
}

void srd_handle_file_get(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_ferr e = { 0 };
	srd_session *ss = srd_session_from_request(ctx, req, res);
	if (!ss)
		return;
	if (srd_session_send_file(ctx, ss, req->rest, req->rest, res, &e))
		srd_respond_error(res, &e);
	srd_session_release(ss);
}

void srd_handle_file_put(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_ferr e = { 0 };
	srd_session *ss = srd_session_from_request(ctx, req, res);
	if (!ss)
		return;
	if (srd_session_put_file(ctx, ss, req->rest, req->body ? req->body : "", req->body_len,
				 "path", &e)) {
		srd_respond_error(res, &e);
	} else {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "path", req->rest);
		cJSON_AddNumberToObject(j, "size", (double)req->body_len);
		srd_respond_json(res, 201, j);
	}
	srd_session_release(ss);
}

void srd_handle_file_delete(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_ferr e = { 0 };
	sr_error err = { 0 };
	srd_session *ss = srd_session_from_request(ctx, req, res);
	if (!ss)
		return;
	srd_session_touch(ss);
	if (sr_workspace_remove(srd_session_workspace(ss), req->rest, &err)) {
		srd_session_file_error(&err, "path", &e);
		srd_respond_error(res, &e);
	} else {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "path", req->rest);
		cJSON_AddBoolToObject(j, "deleted", true);
		srd_respond_json(res, 200, j);
	}
	srd_session_release(ss);
}

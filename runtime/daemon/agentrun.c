/* AgentRunPlus's session API, shape for shape, so its unmodified clients
 * (AgentRunAPIClient) work against saferund: /sessions, execute,
 * copy-to/copy-from, artifacts, src. Sessions are the native ones; only
 * the shapes, names and status codes here are AgentRunPlus's (FastAPI's:
 * 422 for a malformed body, {"detail": ...} on every error). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentrun.h"

#include "public_url.h"
#include "run_stream.h"
#include "session_routes.h"

#define SRC_DIR       "src"
#define ARTIFACTS_DIR "artifacts"

static const char traversal[] = "Invalid filename: Path traversal attempts are not allowed";

static void fail(srd_response *res, unsigned status, const char *field, const char *msg)
{
	srd_ferr e = { 0 };
	srd_fail(&e, status, field, "%s", msg);
	srd_respond_error(res, &e);
}

/* A body that must be a JSON object: FastAPI answers 422 when it is not. */
static cJSON *parse_object(const srd_request *req, srd_response *res)
{
	srd_ferr e = { 0 };
	cJSON *doc = NULL;
	if (srd_json_parse_object(req->body, req->body_len, &doc, &e)) {
		e.status = 422;
		srd_respond_error(res, &e);
		return NULL;
	}
	return doc;
}

static void session_paths(cJSON *j, srd_session *ss)
{
	char path[160];
	snprintf(path, sizeof path, "%s/" SRC_DIR, srd_session_workdir(ss));
	cJSON_AddStringToObject(j, "source_path", path);
	snprintf(path, sizeof path, "%s/" ARTIFACTS_DIR, srd_session_workdir(ss));
	cJSON_AddStringToObject(j, "artifact_path", path);
}

/* Exactly these keys: the client builds a dataclass from them. */
cJSON *srd_arp_created_json(srd_session *ss, const char *base)
{
	const char *id = srd_session_id(ss);
	char url[SRD_PUBLIC_URL_MAX + 96];
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "session_id", id);
	cJSON_AddStringToObject(j, "workdir", id);
	session_paths(j, ss);
	snprintf(url, sizeof url, "%s/sessions/%s/copy-to", base, id);
	cJSON_AddStringToObject(j, "upload_url", url);
	snprintf(url, sizeof url, "%s/sessions/%s/artifacts", base, id);
	cJSON_AddStringToObject(j, "artifacts_url", url);
	return j;
}

cJSON *srd_arp_info_json(srd_session *ss)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "session_id", srd_session_id(ss));
	session_paths(j, ss);
	return j;
}

cJSON *srd_arp_list_json(srd_ctx *ctx, const srd_tenant *tenant)
{
	cJSON *ids = srd_sessions_ids(ctx->sessions, tenant), *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "count", cJSON_GetArraySize(ids));
	cJSON_AddItemToObject(j, "active_sessions", ids);
	return j;
}

void srd_handle_arp_create(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_ferr e = { 0 };
	srd_run_opts o = { 0 };
	srd_session *ss;
	char base[SRD_PUBLIC_URL_MAX];
	if (srd_session_create(ctx, &o, req->peer, &ss, &e)) {
		srd_respond_error(res, &e);
		return;
	}
	srd_public_base(ctx, req, base, sizeof base);
	srd_respond_json(res, 200, srd_arp_created_json(ss, base));
	srd_session_release(ss);
}

void srd_handle_arp_list(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_respond_json(res, 200, srd_arp_list_json(ctx, req->peer->tenant));
}

void srd_handle_arp_get(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_session *ss = srd_session_from_request(ctx, req, res);
	if (!ss)
		return;
	srd_respond_json(res, 200, srd_arp_info_json(ss));
	srd_session_release(ss);
}

void srd_handle_arp_delete(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_ferr e = { 0 };
	if (srd_session_end(ctx->sessions, req->peer->tenant, req->params[0], &e)) {
		srd_respond_error(res, &e);
		return;
	}
	srd_respond_json(res, 200, srd_arp_closed_json(req->params[0]));
}

cJSON *srd_arp_closed_json(const char *id)
{
	char msg[200];
	snprintf(msg, sizeof msg, "Session %s closed successfully", id);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "message", msg);
	return j;
}

/* A list of strings or null (ignore_dependencies, ignore_unsafe_functions). */
static int string_list(const cJSON *doc, const char *key, const char ***out, size_t *n,
		       srd_response *res)
{
	const cJSON *v = srd_json_get(doc, key), *it;
	*out = NULL;
	*n = 0;
	if (!v)
		return 0;
	char msg[160];
	snprintf(msg, sizeof msg, "\"%s\" must be a list of strings or null", key);
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > 64) {
		fail(res, 422, key, msg);
		return -1;
	}
	if (!(*out = calloc((size_t)cJSON_GetArraySize(v) + 1, sizeof **out))) {
		fail(res, 500, key, "out of memory");
		return -1;
	}
	cJSON_ArrayForEach(it, v)
	{
		if (!cJSON_IsString(it)) {
			free(*out);
			*out = NULL;
			fail(res, 422, key, msg);
			return -1;
		}
		(*out)[(*n)++] = it->valuestring;
	}
	return 0;
}

/* The model reads output: a non-ok status is stated in it plainly. */
char *srd_arp_output(const sr_result *r)
{
	size_t cap = r->merged.len + sizeof r->message + 64 + r->n_findings * 512;
	char *out = malloc(cap);
	if (!out)
		return NULL;
	int n =
	    snprintf(out, cap, "%.*s", (int)r->merged.len, r->merged.data ? r->merged.data : "");
	if (r->status != SR_STATUS_OK && r->message[0])
		n += snprintf(out + n, cap - (size_t)n, "%s%s\n",
			      n && out[n - 1] != '\n' ? "\n" : "", r->message);
	/* The message already names the first finding: list the others. */
	for (size_t i = 1; i < r->n_findings && r->status == SR_STATUS_REJECTED; i++)
		n += snprintf(out + n, cap - (size_t)n, "line %u: %s %s: %s\n", r->findings[i].line,
			      r->findings[i].rule, r->findings[i].name, r->findings[i].message);
	return out;
}

cJSON *srd_arp_execute(srd_ctx *ctx, srd_session *ss, const char *code, const char **allow,
		       size_t n_allow, const srd_peer *peer, srd_ferr *e)
{
	return srd_arp_execute_output(ctx, ss, code, allow, n_allow, peer, NULL, NULL, e);
}

cJSON *srd_arp_execute_output(srd_ctx *ctx, srd_session *ss, const char *code, const char **allow,
			      size_t n_allow, const srd_peer *peer,
			      void (*on_output)(void *arg, int stream, const char *data,
						size_t len),
			      void *on_output_arg, srd_ferr *e)
{
	srd_run_opts o = { .code = code,
			   .code_len = strlen(code),
			   .allow = allow,
			   .n_allow = n_allow,
			   .allow_field = "ignore_unsafe_functions",
			   .on_output = on_output,
			   .on_output_arg = on_output_arg };
	sr_result r;
	if (srd_session_run(ctx, ss, &o, peer, &r, e))
		return NULL;
	char *text = srd_arp_output(&r);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddBoolToObject(j, "success", r.status == SR_STATUS_OK);
	cJSON_AddStringToObject(j, "output", text ? text : "");
	free(text);
	sr_result_free(&r);
	return j;
}

void srd_handle_arp_execute(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	static const char *const keys[] = { "python_code", "ignore_dependencies",
					    "ignore_unsafe_functions", NULL };
	srd_ferr e = { 0 };
	const char **deps = NULL;
	size_t n_deps;
	srd_run_opts o = { 0 };
	srd_session *ss = srd_session_from_request(ctx, req, res);
	cJSON *doc = ss ? parse_object(req, res) : NULL;
	if (!doc)
		goto out;
	if (srd_json_check_keys(doc, keys, "", &e) ||
	    srd_json_string(doc, "python_code", true, &o.code, &e)) {
		e.status = 422;
		srd_respond_error(res, &e);
		goto out;
	}
	/* Dependencies are the rootfs profile's here: nothing to ignore. */
	if (string_list(doc, "ignore_dependencies", &deps, &n_deps, res) ||
	    string_list(doc, "ignore_unsafe_functions", &o.allow, &o.n_allow, res))
		goto out;
	/* Streamed when Accept asks (NDJSON or SSE, run_stream.h): the output
	 * as it comes, then {"type": "result", "success", "output"}. */
	srd_run_streamer st = { .res = res, .fmt = srd_stream_wanted(req, false) };
	cJSON *j = srd_arp_execute_output(ctx, ss, o.code, o.allow, o.n_allow, req->peer,
					  st.fmt ? srd_run_streamer_output : NULL, &st, &e);
	if (j && st.fmt)
		srd_run_streamer_result(&st, j);
	else if (j)
		srd_respond_json(res, 200, j);
	else if (!st.fmt || !srd_run_streamer_error(&st, &e))
		srd_respond_error(res, &e);
out:
	free(deps);
	free(o.allow);
	cJSON_Delete(doc);
	srd_session_release(ss);
}

/* AgentRunPlus's name rules: 403 for traversal, 400 for empty or hidden. */
const char *srd_arp_bad_name(const char *name, unsigned *status)
{
	*status = 400;
	if (!name || !*name)
		return "Invalid filename: the name is empty";
	if (strstr(name, "..") || strchr(name, '/') || strchr(name, '\\')) {
		*status = 403;
		return traversal;
	}
	if (name[0] == '.')
		return "Invalid filename: names starting with '.' are not allowed";
	return NULL;
}

static bool name_ok(const char *name, srd_response *res)
{
	unsigned status;
	const char *why = srd_arp_bad_name(name, &status);
	if (why)
		fail(res, status, "file", why);
	return !why;
}

void srd_handle_arp_copy_to(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	const srd_part *file = NULL;
	for (size_t i = 0; i < req->n_parts && !file; i++)
		if (strcmp(req->parts[i].name, "file") == 0)
			file = &req->parts[i];
	if (req->multipart_error || !file) {
		fail(res, 422, "file",
		     req->multipart_error ? req->multipart_why
					  : "a multipart/form-data field \"file\" is required");
		return;
	}
	srd_session *ss = srd_session_from_request(ctx, req, res);
	if (!ss || !name_ok(file->filename, res)) {
		srd_session_release(ss);
		return;
	}
	char path[SR_WORKSPACE_PATH_MAX + 8];
	snprintf(path, sizeof path, SRC_DIR "/%s", file->filename);
	srd_ferr e = { 0 };
	if (srd_session_put_file(ctx, ss, path, file->data, file->size, "file", &e)) {
		srd_respond_error(res, &e);
	} else {
		char msg[SR_WORKSPACE_PATH_MAX + 64], dest[SR_WORKSPACE_PATH_MAX + 160];
		snprintf(msg, sizeof msg, "File %s uploaded successfully", file->filename);
		snprintf(dest, sizeof dest, "%s/%s", srd_session_workdir(ss), path);
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "message", msg);
		cJSON_AddStringToObject(j, "destination_path", dest);
		srd_respond_json(res, 200, j);
	}
	srd_session_release(ss);
}

/* src_path as the code sees it ("/work/artifacts/x") or relative to the
 * working dir ("artifacts/x"); only the artifact dir may be read. */
const char *srd_arp_artifact_path(const srd_session *ss, const char *src)
{
	size_t wl = strlen(srd_session_workdir(ss));
	if (strncmp(src, srd_session_workdir(ss), wl) == 0 && src[wl] == '/')
		src += wl + 1;
	if (strncmp(src, ARTIFACTS_DIR "/", sizeof ARTIFACTS_DIR) != 0 || strstr(src, "..") ||
	    !src[sizeof ARTIFACTS_DIR])
		return NULL;
	return src;
}

void srd_handle_arp_copy_from(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	static const char *const keys[] = { "src_path", "filename", NULL };
	srd_ferr e = { 0 };
	const char *src, *name, *path;
	srd_session *ss = srd_session_from_request(ctx, req, res);
	cJSON *doc = ss ? parse_object(req, res) : NULL;
	if (!doc)
		goto out;
	if (srd_json_check_keys(doc, keys, "", &e) ||
	    srd_json_string(doc, "src_path", true, &src, &e) ||
	    srd_json_string(doc, "filename", true, &name, &e)) {
		e.status = 422;
		srd_respond_error(res, &e);
	} else if (!(path = srd_arp_artifact_path(ss, src))) {
		fail(res, 403, "src_path", SRD_ARP_OUTSIDE_ARTIFACTS);
	} else if (srd_session_send_file(ctx, ss, path, name, res, &e)) {
		srd_respond_error(res, &e);
	}
out:
	cJSON_Delete(doc);
	srd_session_release(ss);
}

/* [{name, size_bytes}] of the regular files under dir, names relative to it. */
static cJSON *dir_files(srd_session *ss, const char *dir, const char *url_base, srd_ferr *e)
{
	cJSON *all = srd_session_listing(ss, dir, NULL, e), *f;
	if (!all)
		return NULL;
	cJSON *out = cJSON_CreateArray();
	size_t skip = strlen(dir) + 1;
	cJSON_ArrayForEach(f, all)
	{
		const char *path = cJSON_GetObjectItem(f, "path")->valuestring;
		if (strcmp(cJSON_GetObjectItem(f, "type")->valuestring, "file") != 0 ||
		    strlen(path) <= skip)
			continue;
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", path + skip);
		cJSON_AddNumberToObject(o, "size_bytes",
					cJSON_GetObjectItem(f, "size")->valuedouble);
		if (url_base) {
			char url[SR_WORKSPACE_PATH_MAX + 96];
			snprintf(url, sizeof url, "%s/%s", url_base, path + skip);
			cJSON_AddStringToObject(o, "download_url", url);
		}
		cJSON_AddItemToArray(out, o);
	}
	cJSON_Delete(all);
	return out;
}

cJSON *srd_arp_artifacts_json(srd_session *ss, const char *base, srd_ferr *e)
{
	char url[SRD_PUBLIC_URL_MAX + 96];
	snprintf(url, sizeof url, "%s/sessions/%s/artifacts", base, srd_session_id(ss));
	cJSON *files = dir_files(ss, ARTIFACTS_DIR, url, e);
	if (!files)
		return NULL;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "count", cJSON_GetArraySize(files));
	cJSON_AddItemToObject(j, "artifacts", files);
	cJSON_AddStringToObject(j, "artifacts_url", url);
	return j;
}

cJSON *srd_arp_src_json(srd_session *ss, const char *base, srd_ferr *e)
{
	(void)base; /* src/ files have no download route */
	cJSON *files = dir_files(ss, SRC_DIR, NULL, e);
	if (!files)
		return NULL;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "count", cJSON_GetArraySize(files));
	cJSON_AddItemToObject(j, "files", files);
	return j;
}

static void respond_listing(srd_ctx *ctx, const srd_request *req, srd_response *res,
			    cJSON *(*list)(srd_session *, const char *, srd_ferr *))
{
	srd_ferr e = { 0 };
	srd_session *ss = srd_session_from_request(ctx, req, res);
	if (!ss)
		return;
	char base[SRD_PUBLIC_URL_MAX];
	srd_public_base(ctx, req, base, sizeof base);
	cJSON *j = list(ss, base, &e);
	if (j)
		srd_respond_json(res, 200, j);
	else
		srd_respond_error(res, &e);
	srd_session_release(ss);
}

void srd_handle_arp_artifacts(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	respond_listing(ctx, req, res, srd_arp_artifacts_json);
}

void srd_handle_arp_src(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	respond_listing(ctx, req, res, srd_arp_src_json);
}

void srd_handle_arp_artifact_get(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_ferr e = { 0 };
	srd_session *ss = srd_session_from_request(ctx, req, res);
	if (!ss)
		return;
	char path[SR_WORKSPACE_PATH_MAX + 16];
	snprintf(path, sizeof path, ARTIFACTS_DIR "/%s", req->rest);
	if (strstr(req->rest, "..") || strchr(req->rest, '\\'))
		fail(res, 403, "filename", traversal);
	else if (srd_session_send_file(ctx, ss, path, req->rest, res, &e))
		srd_respond_error(res, &e);
	srd_session_release(ss);
}

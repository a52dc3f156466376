#include "http.h"
#include "tenants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void srd_respond_text(srd_response *res, unsigned status, const char *type, char *body, size_t len)
{
	free(res->body);
	res->status = status;
	res->content_type = type;
	res->body = body;
	res->body_len = body ? len : 0;
}

void srd_respond_json(srd_response *res, unsigned status, cJSON *doc)
{
	char *text = doc ? cJSON_PrintUnformatted(doc) : NULL;
	cJSON_Delete(doc);
	if (!text) {
		static const char oom[] =
		    "{\"error\":\"out of memory\",\"detail\":\"out of memory\"}";
		text = strdup(oom);
		status = 500;
	}
	srd_respond_text(res, status, "application/json", text, text ? strlen(text) : 0);
}

void srd_respond_error(srd_response *res, const srd_ferr *e)
{
	srd_respond_json(res, e->status ? e->status : 500, srd_ferr_json(e));
	res->retry_after = e->retry_after;
	snprintf(res->error_field, sizeof res->error_field, "%s", e->field);
}

const char *srd_request_header(const srd_request *req, const char *name)
{
	return req->header ? req->header(req, name) : NULL;
}

const char *srd_request_query(const srd_request *req, const char *name)
{
	return req->query ? req->query(req, name) : NULL;
}

void srd_respond_header(srd_response *res, const char *name, const char *value)
{
	if (res->n_headers == SRD_MAX_HEADERS)
		return;
	res->headers[res->n_headers].name = name;
	snprintf(res->headers[res->n_headers].value, sizeof res->headers[0].value, "%s", value);
	res->n_headers++;
}

cJSON *srd_peer_json(const srd_peer *peer)
{
	cJSON *j = cJSON_CreateObject();
	if (peer && peer->is_unix && peer->have_cred) {
		cJSON_AddNumberToObject(j, "uid", peer->uid);
		cJSON_AddNumberToObject(j, "gid", peer->gid);
		cJSON_AddNumberToObject(j, "pid", peer->pid);
	} else if (peer && !peer->is_unix) {
		cJSON_AddStringToObject(j, "addr", peer->addr);
	}
	if (peer && peer->tenant && peer->tenant->in_file)
		cJSON_AddStringToObject(j, "tenant", peer->tenant->name);
	return j;
}

/* A filename that cannot break out of the quoted string, and cannot name a
 * dir: the last path component, without '"', '\\' and control characters;
 * non-ASCII bytes become '_' (they go in filename*). */
static size_t plain_filename(const char *name, char *out, size_t size, bool *non_ascii)
{
	const char *slash = strrchr(name, '/');
	size_t n = 0;
	*non_ascii = false;
	for (const unsigned char *p = (const unsigned char *)(slash ? slash + 1 : name);
	     *p && n + 1 < size; p++) {
		if (*p < 0x20 || *p == 0x7f || *p == '"' || *p == '\\')
			continue;
		*non_ascii |= *p >= 0x80;
		out[n++] = *p >= 0x80 ? '_' : (char)*p;
	}
	out[n] = '\0';
	return n;
}

/* RFC 5987 ext-value: UTF-8'' then attr-chars or %XX. Returns false
 * when it does not fit. */
static bool ext_filename(const char *name, char *out, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	const char *slash = strrchr(name, '/');
	size_t n = (size_t)snprintf(out, size, "UTF-8''");
	for (const unsigned char *p = (const unsigned char *)(slash ? slash + 1 : name); *p; p++) {
		if (n + 4 > size)
			return false;
		if (*p < 0x20 || *p == 0x7f || *p == '"' || *p == '\\')
			continue;
		if (strchr("!#$&+-.^_`|~", *p) || (*p >= '0' && *p <= '9') ||
		    ((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z')) {
			out[n++] = (char)*p;
		} else {
			out[n++] = '%';
			out[n++] = hex[*p >> 4];
			out[n++] = hex[*p & 15];
		}
	}
	out[n] = '\0';
	return true;
}

void srd_respond_attachment(srd_response *res, unsigned status, const char *name, void *data,
			    size_t len)
{
	char plain[100], ext[160];
	bool non_ascii;
	if (!plain_filename(name ? name : "", plain, sizeof plain, &non_ascii))
		snprintf(plain, sizeof plain, "download");
	srd_respond_text(res, status, "application/octet-stream", data, len);
	int n = snprintf(res->content_disposition, sizeof res->content_disposition,
			 "attachment; filename=\"%s\"", plain);
	if (non_ascii && ext_filename(name, ext, sizeof ext))
		snprintf(res->content_disposition + n, sizeof res->content_disposition - (size_t)n,
			 "; filename*=%s", ext);
}

#include "connect.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "json.h"

#define MAX_MESSAGE (16u << 20)

int srd_cfail(srd_cerr *e, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	e->code = code;
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	return -1;
}

int srd_cfail_errno(srd_cerr *e, int errnum, const char *msg)
{
	const char *code;
	switch (errnum) {
	case ENOENT: code = "not_found"; break;
	case EEXIST: code = "already_exists"; break;
	case ELOOP:
	case EACCES:
	case EPERM: code = "permission_denied"; break;
	case EINVAL:
	case EISDIR:
	case ENOTDIR:
	case ENAMETOOLONG: code = "invalid_argument"; break;
	case EFBIG:
	case E2BIG:
	case ENOSPC:
	case EDQUOT: code = "resource_exhausted"; break;
	default: code = "internal";
	}
	return srd_cfail(e, code, "%s", msg);
}

static unsigned http_status(const char *code)
{
	static const struct {
		const char *code;
		unsigned status;
	} map[] = {
		{ "canceled", 499 },
		{ "unknown", 500 },
		{ "invalid_argument", 400 },
		{ "deadline_exceeded", 504 },
		{ "not_found", 404 },
		{ "already_exists", 409 },
		{ "permission_denied", 403 },
		{ "resource_exhausted", 429 },
		{ "failed_precondition", 400 },
		{ "aborted", 409 },
		{ "out_of_range", 400 },
		{ "unimplemented", 501 },
		{ "internal", 500 },
		{ "unavailable", 503 },
		{ "data_loss", 500 },
		{ "unauthenticated", 401 },
	};
	for (size_t i = 0; i < sizeof map / sizeof *map; i++)
		if (strcmp(map[i].code, code) == 0)
			return map[i].status;
	return 500;
}

static int parse_object(const char *text, size_t len, cJSON **msg, srd_cerr *e)
{
	if (len == 0) {
		*msg = cJSON_CreateObject();
		return 0;
	}
	/* No NUL byte, no \u0000 escape (C strings would cut a path short),
	 * valid UTF-8: as every JSON body the daemon takes. */
	srd_ferr fe = { 0 };
	if (srd_json_text_check(text, len, &fe))
		return srd_cfail(e, "invalid_argument", "%s", fe.msg);
	const char *end = NULL;
	*msg = cJSON_ParseWithLengthOpts(text, len, &end, false);
	if (!*msg || !cJSON_IsObject(*msg)) {
		cJSON_Delete(*msg);
		*msg = NULL;
		return srd_cfail(e, "invalid_argument", "the message is not a JSON object");
	}
	/* one object and nothing after it but white space */
	size_t at = (size_t)(end - text);
	while (at < len && strchr(" \t\r\n", text[at]))
		at++;
	if (at < len) {
		cJSON_Delete(*msg);
		*msg = NULL;
		return srd_cfail(e, "invalid_argument",
				 "bytes after the message's JSON object (at byte %zu)", at);
	}
	return 0;
}

int srd_connect_read(const srd_request *req, bool streaming, cJSON **msg, srd_cerr *e)
{
	*msg = NULL;
	const char *ct = req->content_type ? req->content_type : "";
	const char *want = streaming ? "application/connect+json" : "application/json";
	if (strncmp(ct, want, strlen(want)) != 0)
		return srd_cfail(e, "invalid_argument",
				 "Content-Type \"%.64s\": this call takes %s (the Connect "
				 "protocol's JSON codec; the binary codec is not served)",
				 ct, want);
	const unsigned char *b = (const unsigned char *)(req->body ? req->body : "");
	size_t n = req->body ? req->body_len : 0;
	if (!streaming)
		return parse_object((const char *)b, n, msg, e);
	if (n < 5)
		return srd_cfail(e, "invalid_argument", "a streaming call's body is one envelope");
	uint32_t len = (uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4];
	if (b[0] & 1)
		return srd_cfail(e, "invalid_argument", "compressed envelopes are not served");
	if (len > MAX_MESSAGE || len != n - 5)
		return srd_cfail(e, "invalid_argument",
				 "the envelope says %u bytes, the body holds %zu", len, n - 5);
	return parse_object((const char *)b + 5, len, msg, e);
}

void srd_connect_reply(srd_response *res, cJSON *msg)
{
	srd_respond_json(res, 200, msg);
}

static cJSON *error_json(const srd_cerr *e)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "code", e->code ? e->code : "internal");
	cJSON_AddStringToObject(j, "message", e->msg);
	return j;
}

void srd_connect_reply_error(srd_response *res, const srd_cerr *e)
{
	srd_respond_json(res, http_status(e->code ? e->code : "internal"), error_json(e));
}

static int send_envelope(srd_response *res, unsigned char flags, cJSON *msg)
{
	char *text = cJSON_PrintUnformatted(msg);
	cJSON_Delete(msg);
	if (!text)
		return -1;
	size_t len = strlen(text);
	char *buf = malloc(len + 5);
	if (!buf) {
		free(text);
		return -1;
	}
	buf[0] = (char)flags;
	buf[1] = (char)(len >> 24);
	buf[2] = (char)(len >> 16);
	buf[3] = (char)(len >> 8);
	buf[4] = (char)len;
	memcpy(buf + 5, text, len);
	free(text);
	int rc = srd_respond_chunk(res, buf, len + 5);
	free(buf);
	return rc;
}

int srd_connect_stream_start(srd_response *res)
{
	return srd_respond_stream(res, 200, "application/connect+json");
}

int srd_connect_stream_send(srd_response *res, cJSON *msg)
{
	return send_envelope(res, 0, msg);
}

void srd_connect_stream_end(srd_response *res, const srd_cerr *e)
{
	cJSON *end = cJSON_CreateObject();
	if (e)
		cJSON_AddItemToObject(end, "error", error_json(e));
	send_envelope(res, 2, end);
}

uint64_t srd_connect_deadline(const srd_request *req)
{
	const char *t = srd_request_header(req, "Connect-Timeout-Ms");
	char *end = NULL;
	unsigned long long ms = t ? strtoull(t, &end, 10) : 0;
	if (!t || end == t || *end || ms == 0)
		return 0;
	return srd_now_ms() + (ms > 86400000ull ? 86400000ull : ms);
}

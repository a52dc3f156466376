#include "http.h"
#include "tenants.h"

#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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

/* ---- streamed responses ------------------------------------------------ */

static bool stream_gone(srd_stream *s)
{
	/* A client that closed (or half-closed) its end reads nothing more. */
	struct pollfd p = { .fd = s->fd, .events = POLLRDHUP };
	if (!s->gone && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		s->gone = true;
	return s->gone;
}

/* Send what is queued: without waiting (wait false), or until all of it
 * is sent, the client counting as gone when its socket takes nothing for
 * SRD_STREAM_WAIT_MS. */
static void stream_flush(srd_stream *s, bool wait)
{
	size_t off = 0;
	while (!s->gone && off < s->queued) {
		ssize_t n =
		    send(s->fd, s->queue + off, s->queued - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if ((n < 0 && errno != EAGAIN) || n == 0) {
			s->gone = true;
			break;
		}
		if (!wait)
			break;
		struct pollfd p = { .fd = s->fd, .events = POLLOUT };
		int r = poll(&p, 1, SRD_STREAM_WAIT_MS);
		if (r == 0 || (r < 0 && errno != EINTR))
			s->gone = true; /* it would not read: as good as gone */
	}
	if (s->gone) {
		s->queued = 0;
		return;
	}
	memmove(s->queue, s->queue + off, s->queued - off);
	s->queued -= off;
}

static int stream_queue(srd_stream *s, const void *data, size_t len)
{
	if (s->queued + len > s->queue_cap) {
		size_t cap = s->queue_cap ? s->queue_cap : 16384;
		while (cap < s->queued + len)
			cap *= 2;
		char *grown = realloc(s->queue, cap);
		if (!grown)
			return -1;
		s->queue = grown;
		s->queue_cap = cap;
	}
	memcpy(s->queue + s->queued, data, len);
	s->queued += len;
	return 0;
}

int srd_respond_stream(srd_response *res, unsigned status, const char *content_type)
{
	res->status = status;
	res->content_type = content_type;
	res->streamed = true;
	srd_stream *s = res->stream;
	if (!s)
		return 0; /* collected in body */
	char head[1024];
	const char *reason = MHD_get_reason_phrase_for(status);
	int n = snprintf(head, sizeof head,
			 "HTTP/1.%d %u %s\r\nContent-Type: %s\r\n%sConnection: close\r\n"
			 "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n",
			 s->chunked ? 1 : 0, status, reason && *reason ? reason : "Unknown",
			 content_type, s->chunked ? "Transfer-Encoding: chunked\r\n" : "");
	for (size_t i = 0; i < res->n_headers && n > 0 && (size_t)n < sizeof head; i++)
		n += snprintf(head + n, sizeof head - (size_t)n, "%s: %s\r\n", res->headers[i].name,
			      res->headers[i].value);
	if (s->node_id && n > 0 && (size_t)n < sizeof head)
		n +=
		    snprintf(head + n, sizeof head - (size_t)n, "Saferun-Node: %s\r\n", s->node_id);
	if (n > 0 && (size_t)n < sizeof head)
		n += snprintf(head + n, sizeof head - (size_t)n, "\r\n");
	if (n <= 0 || (size_t)n >= sizeof head || stream_queue(s, head, (size_t)n) < 0) {
		s->gone = true;
		return -1;
	}
	s->started = true;
	stream_flush(s, true);
	return s->gone ? -1 : 0;
}

int srd_respond_chunk(srd_response *res, const void *data, size_t len)
{
	srd_stream *s = res->stream;
	if (!res->streamed)
		return -1;
	if (!s) {
		char *grown = realloc(res->body, res->body_len + len + 1);
		if (!grown)
			return -1;
		memcpy(grown + res->body_len, data, len);
		res->body = grown;
		res->body_len += len;
		res->body[res->body_len] = '\0';
		return 0;
	}
	if (!s->started || stream_gone(s))
		return -1;
	if (!len || s->head)
		return 0;
	char size[24];
	int n = snprintf(size, sizeof size, "%zx\r\n", len);
	if ((s->chunked && stream_queue(s, size, (size_t)n) < 0) ||
	    stream_queue(s, data, len) < 0 || (s->chunked && stream_queue(s, "\r\n", 2) < 0)) {
		s->gone = true;
		return -1;
	}
	s->bytes += len;
	stream_flush(s, false);
	if (s->queued > SRD_STREAM_QUEUE_MAX)
		stream_flush(s, true);
	return s->gone ? -1 : 0;
}

int srd_stream_end(srd_stream *s)
{
	if (s->started && !s->gone && s->chunked && !s->head)
		stream_queue(s, "0\r\n\r\n", 5);
	if (s->started)
		stream_flush(s, true);
	free(s->queue);
	s->queue = NULL;
	s->queued = s->queue_cap = 0;
	return s->gone ? -1 : 0;
}

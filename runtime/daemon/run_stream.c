#include "run_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1..4); 0 if invalid; -1 if
 * what there is (left bytes) may still become one. */
static int utf8_seq(const unsigned char *s, size_t left)
{
	unsigned char c = s[0];
	size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
	if (n == 0 || (n == 2 && c < 0xc2))
		return 0;
	for (size_t i = 1; i < n && i < left; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	/* the second byte rules out overlongs, surrogates and > U+10FFFF */
	if (n == 3 && left >= 2) {
		unsigned hi = ((c & 0x0fu) << 6) | (s[1] & 0x3fu); /* code point >> 6 */
		if (hi < 0x20 || (hi >= 0x360 && hi <= 0x37f))
			return 0;
	}
	if (n == 4 && left >= 2) {
		unsigned hi = ((c & 0x07u) << 6) | (s[1] & 0x3fu); /* code point >> 12 */
		if (hi < 0x10 || hi > 0x10f)
			return 0;
	}
	return n > left ? -1 : (int)n;
}

char *srd_utf8_piece(srd_utf8_carry *c, const char *data, size_t len, bool last, size_t *out_len)
{
	size_t total = c->n + len;
	unsigned char *in = malloc(total ? total : 1);
	char *out = malloc(total * 3 + 1), *o = out;
	if (!in || !out) {
		free(in);
		free(out);
		return NULL;
	}
	memcpy(in, c->tail, c->n);
	if (len)
		memcpy(in + c->n, data, len);
	c->n = 0;
	for (size_t i = 0; i < total;) {
		int n = utf8_seq(in + i, total - i);
		if (n < 0 && !last) { /* its end is in the next piece */
			c->n = total - i;
			memcpy(c->tail, in + i, c->n);
			break;
		}
		if (n > 0 && !(n == 1 && in[i] == 0)) {
			memcpy(o, in + i, (size_t)n);
			o += n;
			i += (size_t)n;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	*o = '\0';
	*out_len = (size_t)(o - out);
	free(in);
	return out;
}

srd_stream_format srd_stream_wanted(const srd_request *req, bool body_stream)
{
	const char *accept = srd_request_header(req, "Accept");
	if (accept && strcasestr(accept, "text/event-stream") &&
	    !strcasestr(accept, "application/json"))
		return SRD_STREAM_SSE;
	if (accept && strcasestr(accept, "application/x-ndjson"))
		return SRD_STREAM_NDJSON;
	return body_stream ? SRD_STREAM_NDJSON : SRD_STREAM_OFF;
}

static void start(srd_run_streamer *s)
{
	if (s->started)
		return;
	s->started = true;
	const char *type = s->fmt == SRD_STREAM_SSE ? "text/event-stream" : "application/x-ndjson";
	if (srd_respond_stream(s->res, 200, type) < 0)
		s->gone = true;
}

/* One item (taken); type is its "type". */
static void send_item(srd_run_streamer *s, const char *type, cJSON *item)
{
	start(s);
	char *text = s->gone ? NULL : cJSON_PrintUnformatted(item);
	cJSON_Delete(item);
	if (!text)
		return;
	size_t n = strlen(text);
	char *framed = malloc(n + strlen(type) + 32);
	if (framed) {
		size_t len = s->fmt == SRD_STREAM_SSE
				 ? (size_t)sprintf(framed, "event: %s\ndata: %s\n\n", type, text)
				 : (size_t)sprintf(framed, "%s\n", text);
		if (srd_respond_chunk(s->res, framed, len) < 0)
			s->gone = true;
	}
	free(framed);
	free(text);
}

static void send_text(srd_run_streamer *s, int stream, const char *data, size_t len, bool last)
{
	srd_utf8_carry *c = &s->carry[stream == 2];
	size_t n;
	char *text = srd_utf8_piece(c, data, len, last, &n);
	if (text && n) {
		cJSON *item = cJSON_CreateObject();
		const char *type = stream == 2 ? "stderr" : "stdout";
		cJSON_AddStringToObject(item, "type", type);
		cJSON_AddStringToObject(item, "data", text);
		send_item(s, type, item);
	}
	free(text);
}

void srd_run_streamer_output(void *arg, int stream, const char *data, size_t len)
{
	srd_run_streamer *s = arg;
	if (!s->gone)
		send_text(s, stream, data, len, false);
}

/* What waited for the rest of a UTF-8 sequence that never came. */
static void flush_carries(srd_run_streamer *s)
{
	for (int i = 0; i < 2; i++)
		if (s->carry[i].n && !s->gone)
			send_text(s, i + 1, "", 0, true);
}

void srd_run_streamer_result(srd_run_streamer *s, cJSON *result)
{
	flush_carries(s);
	cJSON *item = cJSON_CreateObject();
	cJSON_AddStringToObject(item, "type", "result");
	/* the result's fields after "type" */
	for (cJSON *f; result && (f = result->child);) {
		cJSON_DetachItemViaPointer(result, f);
		cJSON_AddItemToObject(item, f->string, f);
	}
	cJSON_Delete(result);
	send_item(s, "result", item);
}

bool srd_run_streamer_error(srd_run_streamer *s, const srd_ferr *e)
{
	if (!s->started)
		return false;
	flush_carries(s);
	cJSON *item = srd_ferr_json(e);
	cJSON *type = cJSON_CreateString("error");
	cJSON_InsertItemInArray(item, 0, type);
	type->string = strdup("type");
	cJSON_AddNumberToObject(item, "status", e->status);
	send_item(s, "error", item);
	return true;
}

/* A run's output as it comes, for the front-ends that stream it: REST
 * (NDJSON or server-sent events, docs/api.md) and MCP progress
 * notifications (docs/mcp.md). The library hands over raw bytes
 * (sr_run_request.on_output); here they become UTF-8 text exactly as the
 * result's stdout/stderr show them, and items on a streamed response. */
#ifndef SRD_RUN_STREAM_H
#define SRD_RUN_STREAM_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "http.h"

/* Bytes of one stream to UTF-8 text: an incomplete sequence at the end of
 * a piece waits for the next; bytes that are not UTF-8 (and NUL) become
 * U+FFFD, as in the result's JSON. The pieces' texts together are the
 * result's text of the whole stream. */
typedef struct srd_utf8_carry {
	unsigned char tail[4];
	size_t n;
} srd_utf8_carry;
/* malloc'd, NUL-terminated text of data (last: the carry is flushed too);
 * *len its length (0: nothing to send yet). NULL: out of memory. */
char *srd_utf8_piece(srd_utf8_carry *c, const char *data, size_t len, bool last, size_t *out_len);

typedef enum srd_stream_format {
	SRD_STREAM_OFF = 0,
	SRD_STREAM_NDJSON, /* application/x-ndjson: one JSON object a line */
	SRD_STREAM_SSE,    /* text/event-stream: "event: TYPE" and "data: JSON" */
} srd_stream_format;

/* What the request asks for: Accept text/event-stream → SSE (unless it
 * takes application/json too, as MCP clients send), Accept
 * application/x-ndjson or body_stream ("stream": true) → NDJSON. */
srd_stream_format srd_stream_wanted(const srd_request *req, bool body_stream);

/* One run streamed on res: {"type": "stdout"|"stderr", "data": TEXT}
 * items as the output comes, then {"type": "result", ...} last. The
 * response starts with the first item, so an error before the run (a bad
 * field, a full queue) is still answered with its own status. */
typedef struct srd_run_streamer {
	srd_response *res;
	srd_stream_format fmt;
	bool started, gone;
	srd_utf8_carry carry[2];
} srd_run_streamer;

/* An sr_run_request.on_output for a srd_run_streamer (arg). */
void srd_run_streamer_output(void *arg, int stream, const char *data, size_t len);
/* The last item: the result object (taken), "type": "result" put first.
 * Not started yet: starts the response (200). */
void srd_run_streamer_result(srd_run_streamer *s, cJSON *result);
/* The run failed after the response had started: an "error" item with
 * e's body and "status"; true. Not started: false (answer e as usual). */
bool srd_run_streamer_error(srd_run_streamer *s, const srd_ferr *e);

#endif

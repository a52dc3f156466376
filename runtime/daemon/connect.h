/* The Connect protocol (connectrpc.com/docs/protocol) in its JSON form, as
 * E2B's envd speaks it: unary calls are POST application/json with the
 * message as the body; server-streaming calls are POST
 * application/connect+json, the request one enveloped message, the
 * response enveloped messages (1 flag byte, 4-byte big-endian length, the
 * JSON) ending with an end-stream envelope (flag 0x02) that carries the
 * error, if any. */
#ifndef SRD_CONNECT_H
#define SRD_CONNECT_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "http.h"

/* A Connect error: its code ("not_found", "invalid_argument", ...) and
 * message. */
typedef struct srd_cerr {
	const char *code;
	char msg[512];
} srd_cerr;

/* Fill e; returns -1. */
int srd_cfail(srd_cerr *e, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A workspace error as its Connect code. */
int srd_cfail_errno(srd_cerr *e, int errnum, const char *msg);

/* The request's message: the body (unary) or its one envelope (stream).
 * *msg must be an object (an empty body is {}). */
int srd_connect_read(const srd_request *req, bool streaming, cJSON **msg, srd_cerr *e);
/* A unary answer: 200 with msg (deleted), or the error with the HTTP
 * status Connect gives its code. */
void srd_connect_reply(srd_response *res, cJSON *msg);
void srd_connect_reply_error(srd_response *res, const srd_cerr *e);

/* Server streaming: start the response (200, application/connect+json),
 * send messages (msg deleted; -1 once the client has gone), then end it
 * (e NULL: no error). */
int srd_connect_stream_start(srd_response *res);
int srd_connect_stream_send(srd_response *res, cJSON *msg);
void srd_connect_stream_end(srd_response *res, const srd_cerr *e);

/* Connect-Timeout-Ms as a deadline on srd_now_ms's clock, 0: none. */
uint64_t srd_connect_deadline(const srd_request *req);

#endif

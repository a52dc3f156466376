/* A request and its response as the routes see them, independent of the
 * HTTP server library: handlers take a srd_request and fill a
 * srd_response, so REST routes, the coming MCP handlers and tests share
 * one shape. */
#ifndef SRD_HTTP_H
#define SRD_HTTP_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "json.h"

/* Who sent the request: the unix socket peer's credentials
 * (SO_PEERCRED), or the TCP client's address. */
typedef struct srd_peer {
	bool is_unix;
	bool have_cred;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	char addr[64]; /* TCP: "127.0.0.1:53412" */
} srd_peer;

#define SRD_MAX_PARAMS 4

typedef struct srd_request {
	const char *method; /* "GET", "POST", ...; HEAD is routed as GET */
	const char *path;   /* decoded, without the query string */
	const char *body;   /* NUL-terminated; NULL when there is none */
	size_t body_len;
	const srd_peer *peer;
	/* {name} segments of the matched route pattern, in order */
	char params[SRD_MAX_PARAMS][128];
	size_t n_params;
} srd_request;

typedef struct srd_response {
	unsigned status;
	const char *content_type;
	char *body; /* malloc'd; the server frees it */
	size_t body_len;
	unsigned retry_after; /* seconds; 0: no Retry-After header */
	char allow[64];       /* 405: the methods the path takes */
	/* for the request log: the field a 4xx names */
	char error_field[128];
} srd_response;

/* The body is doc printed (doc is deleted). */
void srd_respond_json(srd_response *res, unsigned status, cJSON *doc);
/* A 4xx/5xx with {"error", "detail", "field"}. */
void srd_respond_error(srd_response *res, const srd_ferr *e);
/* Any text; body is taken over (malloc'd). */
void srd_respond_text(srd_response *res, unsigned status, const char *type, char *body, size_t len);
/* {"uid": .., "pid": ..} or {"addr": ".."} for logs. */
cJSON *srd_peer_json(const srd_peer *peer);

#endif

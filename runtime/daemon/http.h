/* A request and its response as the routes see them, independent of the
 * HTTP server library: handlers take a srd_request and fill a
 * srd_response, so REST routes, the MCP endpoint and tests share one
 * shape. */
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
	int fd;        /* the connection's socket (to notice the client leaving), or -1 */
	const struct srd_tenant *tenant; /* who it is (tenants.h); set before routing */
} srd_peer;

#define SRD_MAX_PARAMS 4
#define SRD_MAX_PARTS  32

/* One part of a multipart/form-data body. */
typedef struct srd_part {
	char *name;     /* the form field's name ("" if it had none) */
	char *filename; /* NULL: no filename parameter; "" when it was filename="" */
	char *data;     /* malloc'd, size bytes (may hold NULs), NUL-terminated */
	size_t size;
} srd_part;

typedef struct srd_request {
	const char *method; /* "GET", "POST", ...; HEAD is routed as GET */
	/* Decoded, without the query string, bytes outside printable ASCII
	 * shown as '?': safe to echo in messages and logs. */
	const char *path;
	/* Decoded as sent (routing and captures use it; NULL: path). A
	 * capture may hold any byte but '/' and NUL: validate it. */
	const char *raw_path;
	const char *body; /* NUL-terminated; NULL when there is none */
	size_t body_len;
	const char *content_type; /* the Content-Type header, or NULL */
	const srd_peer *peer;
	/* {name} segments of the matched route pattern, in order */
	char params[SRD_MAX_PARAMS][128];
	size_t n_params;
	/* a trailing {name*}: the rest of the path, slashes and all ("" if
	 * the pattern has none); as long as the server's longest path, so a
	 * long one reaches the handler to be refused with its reason */
	char rest[2048];
	/* multipart/form-data bodies, parsed by the server before routing */
	srd_part parts[SRD_MAX_PARTS];
	size_t n_parts;
	bool multipart_error;      /* the Content-Type said multipart, the body was not */
	const char *multipart_why; /* what was wrong, for the 400 (static text) */
	/* the request's headers (NULL: it has none); see srd_request_header */
	const char *(*header)(const struct srd_request *req, const char *name);
	/* the query string's arguments, decoded (NULL: none); see srd_request_query */
	const char *(*query)(const struct srd_request *req, const char *name);
	void *conn; /* the server's, for header and query */
} srd_request;

#define SRD_MAX_HEADERS 2

/* Where a streamed response goes: the server sets one up for each request
 * (srd_response.stream) and ends it when the handler returns. */
typedef struct srd_stream {
	int fd;              /* the connection's socket */
	bool chunked;        /* HTTP/1.1: chunked framing; 1.0: the close ends the body */
	bool head;           /* HEAD: headers only */
	const char *node_id; /* the Saferun-Node header, or NULL */
	bool started, gone;
	uint64_t bytes; /* body bytes sent */
	char *queue;    /* what the socket did not take yet (framed) */
	size_t queued, queue_cap;
} srd_stream;

typedef struct srd_response {
	unsigned status;
	const char *content_type;
	char *body; /* malloc'd; the server frees it */
	size_t body_len;
	unsigned retry_after; /* seconds; 0: no Retry-After header */
	char allow[64];       /* 405: the methods the path takes */
	/* sent as Content-Disposition when not empty (srd_respond_attachment) */
	char content_disposition[300];
	/* for the request log: the field a 4xx names */
	char error_field[128];
	/* further response headers (srd_respond_header) */
	struct {
		const char *name; /* static */
		char value[128];
	} headers[SRD_MAX_HEADERS];
	size_t n_headers;
	/* the server's (NULL: none, e.g. a unit test or stdio: a streamed
	 * body is then collected in body and sent as one) */
	srd_stream *stream;
	bool streamed; /* srd_respond_stream was called */
} srd_response;

/* The body is doc printed (doc is deleted). */
void srd_respond_json(srd_response *res, unsigned status, cJSON *doc);
/* A 4xx/5xx with {"error", "detail", "field"}. */
void srd_respond_error(srd_response *res, const srd_ferr *e);
/* Any text; body is taken over (malloc'd). */
void srd_respond_text(srd_response *res, unsigned status, const char *type, char *body, size_t len);
/* A download: application/octet-stream, Content-Disposition attachment
 * with name's last path component, quotes, backslashes and control
 * characters left out (non-ASCII names also get an RFC 5987 filename*).
 * data is taken over (malloc'd). */
void srd_respond_attachment(srd_response *res, unsigned status, const char *name, void *data,
			    size_t len);
/* Starts a streamed response now: status line and headers (Transfer-Encoding: chunked)
 * go out at once; the body follows in chunks and ends when the handler returns.
 * The connection closes after it. Call it at most once, and before anything else
 * fills res; the headers added with srd_respond_header before it go out with it.
 * -1 when the client has gone. */
int srd_respond_stream(srd_response *res, unsigned status, const char *content_type);
/* Sends one chunk at once. -1 when the client has gone: stop producing.
 * What the socket cannot take at once is queued (it goes out with the next
 * chunk or at the end); past SRD_STREAM_QUEUE_MAX queued, it waits for the
 * client to read, and a client that reads nothing for SRD_STREAM_WAIT_MS
 * counts as gone. */
int srd_respond_chunk(srd_response *res, const void *data, size_t len);
#define SRD_STREAM_QUEUE_MAX (4u << 20)
#define SRD_STREAM_WAIT_MS   10000
/* The server's: the rest of the queue and the last chunk, after the
 * handler returned. -1 when the client had gone. */
int srd_stream_end(srd_stream *s);
/* A request header by name (case-insensitive), or NULL. */
const char *srd_request_header(const srd_request *req, const char *name);
/* A query string argument by name, decoded, or NULL. */
const char *srd_request_query(const srd_request *req, const char *name);
/* Add a response header (name must be a static string). */
void srd_respond_header(srd_response *res, const char *name, const char *value);
/* {"uid": .., "pid": ..} or {"addr": ".."} for logs. */
cJSON *srd_peer_json(const srd_peer *peer);

#endif

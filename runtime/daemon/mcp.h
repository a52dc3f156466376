/* The Model Context Protocol server: JSON-RPC 2.0 messages (initialize,
 * ping, tools/list, tools/call) handled once for both transports, the
 * Streamable HTTP endpoint /mcp (mcp.c) and stdio (mcp_stdio.c). The
 * tools themselves are in mcp_tools.c. Specification 2025-11-25; the
 * 2025-06-18, 2025-03-26 and 2024-11-05 versions are accepted at
 * initialize. */
#ifndef SRD_MCP_H
#define SRD_MCP_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "daemon.h"
#include "http.h"

#define SRD_MCP_VERSION "2025-11-25"

/* JSON-RPC error codes */
#define SRD_RPC_PARSE_ERROR       -32700
#define SRD_RPC_INVALID_REQUEST   -32600
#define SRD_RPC_METHOD_NOT_FOUND  -32601
#define SRD_RPC_INVALID_PARAMS    -32602
#define SRD_RPC_INTERNAL          -32603
#define SRD_RPC_SESSION_NOT_FOUND -32001 /* as the TypeScript SDK's servers */

/* What one incoming message comes to. */
typedef struct srd_mcp_reply {
	cJSON *body;      /* the response to send; NULL for a notification or response */
	unsigned status;  /* for HTTP: 200, 202 (nothing to answer), 400 */
	bool initialize;  /* an initialize that succeeded: the transport opens a session */
	char version[16]; /* the protocol version it agreed */
} srd_mcp_reply;

/* Parse text as one JSON-RPC message. 0: *msg is a request, notification
 * or response; -1: out holds the error to send (-32700, -32600). */
int srd_mcp_parse(const char *text, size_t len, cJSON **msg, srd_mcp_reply *out);
/* Is msg an initialize request? */
bool srd_mcp_is_initialize(const cJSON *msg);
/* Handle a parsed message: run the method, fill out. */
void srd_mcp_dispatch(srd_ctx *ctx, const cJSON *msg, const srd_peer *peer, srd_mcp_reply *out);
/* What a transport adds to a message: the protocol version its MCP session
 * agreed (from 2025-11-25 on, a tool's bad arguments are a tool error the
 * model reads, not a JSON-RPC error), and where notifications go while a
 * request runs: a tools/call of run_python with params._meta.progressToken
 * sends notifications/progress with the output (message) as it comes. */
typedef struct srd_mcp_call {
	const char *version; /* NULL: SRD_MCP_VERSION */
	/* Send one notification (taken); -1: the client has gone. NULL: none. */
	int (*notify)(void *arg, cJSON *msg);
	void *notify_arg;
} srd_mcp_call;
void srd_mcp_dispatch_call(srd_ctx *ctx, const cJSON *msg, const srd_peer *peer,
			   const srd_mcp_call *call, srd_mcp_reply *out);
/* {"jsonrpc": "2.0", "id": id (or null), "error": {code, message}} */
cJSON *srd_mcp_error(const cJSON *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The Streamable HTTP transport's sessions (Mcp-Session-Id). */
typedef struct srd_mcp srd_mcp;
int srd_mcp_open(srd_mcp **out);
void srd_mcp_close(srd_mcp *m);

/* /mcp: POST one message, DELETE ends the MCP session (GET is 405: no
 * server-initiated stream). */
void srd_handle_mcp_post(srd_ctx *ctx, const srd_request *req, srd_response *res);
void srd_handle_mcp_delete(srd_ctx *ctx, const srd_request *req, srd_response *res);

/* The stdio transport: newline-delimited messages on in_fd, answers on
 * out_fd, until in_fd ends or stop(ctx, stop_fd), called when stop_fd is
 * readable, says so. Requests run concurrently; the answers' order is
 * theirs. Returns 0, or -1 when out_fd broke. */
int srd_mcp_stdio(srd_ctx *ctx, int in_fd, int out_fd, int stop_fd,
		  bool (*stop)(srd_ctx *ctx, int stop_fd));

#endif

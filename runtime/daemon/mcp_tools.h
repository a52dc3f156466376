/* The tools saferun offers over MCP: run_python and check_python, and
 * AgentRunPlus's session tools under its names and shapes (create_session,
 * execute_code, upload_file, download_file, ...), over the same sessions
 * as the REST API. */
#ifndef SRD_MCP_TOOLS_H
#define SRD_MCP_TOOLS_H

#include <cjson/cJSON.h>

#include "daemon.h"
#include "http.h"

/* [{name, title, description, inputSchema}] for tools/list. */
cJSON *srd_mcp_tools_list(void);
/* Call a tool. 0: *result is a CallToolResult ({content, structuredContent?,
 * isError}), failures of the tool included; -1: the call itself was wrong
 * (unknown tool, arguments against the schema) and e says how. */
int srd_mcp_tool_call(srd_ctx *ctx, const char *name, const cJSON *args, const srd_peer *peer,
		      cJSON **result, srd_ferr *e);
/* The same, with the code's output passed to on_output as it comes
 * (sr_run_request.on_output; run_python only). */
int srd_mcp_tool_call_output(srd_ctx *ctx, const char *name, const cJSON *args,
			     const srd_peer *peer,
			     void (*on_output)(void *arg, int stream, const char *data, size_t len),
			     void *on_output_arg, cJSON **result, srd_ferr *e);

#endif

/* GET /v1/tools: the run_python tool for function-calling APIs (OpenAI's
 * "tools", Anthropic's "input_schema"), its description made from the
 * policy the runs use: what the sandbox has, its limits, its network, what
 * the checker refuses. The arguments are POST /v1/run's fields, so a
 * client passes a tool call's arguments to /v1/run as they are. */
#ifndef SRD_TOOLS_H
#define SRD_TOOLS_H

#include "daemon.h"
#include "http.h"

/* ?format=openai|anthropic (default: both), ?policy=NAME (default: the
 * daemon's default policy). */
void srd_handle_tools(srd_ctx *ctx, const srd_request *req, srd_response *res);

#endif

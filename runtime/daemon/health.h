/* The daemon's health, shared by the REST routes and the MCP tools. */
#ifndef SRD_HEALTH_H
#define SRD_HEALTH_H

#include <cjson/cJSON.h>

#include "daemon.h"

/* GET /health's body: status, version, runs, queue, sessions, policies. */
cJSON *srd_health_json(srd_ctx *ctx);

#endif

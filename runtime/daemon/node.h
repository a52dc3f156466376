/* The node a saferund is in a fleet (docs/cluster.md): its id, which
 * every session id it makes starts with ("NODE-<hex>") so a router can
 * send a session's requests to its node by the id alone; its readiness
 * (GET /v1/ready: load, or 503 when draining or full); and the refusals a
 * draining node gives to new work. Without a node id nothing changes:
 * ids are bare hex and no id is another node's. */
#ifndef SRD_NODE_H
#define SRD_NODE_H

#include <stdbool.h>
#include <stddef.h>

#include "http.h"
#include "json.h"

#define SRD_NODE_ID_MAX 16 /* a session id is NODE-16hex: it must fit 40 bytes with "ss-" */

struct srd_ctx;

/* 0 when id is 1 to SRD_NODE_ID_MAX of [a-z0-9-], starting and ending
 * with a letter or digit; -1 with msg saying what is wrong. */
int srd_node_id_check(const char *id, char *msg, size_t size);
/* "NODE-" (or nothing without a node id) and 2*nbytes hex digits from
 * the kernel's CSPRNG into out. -1 when out is too small or no random. */
int srd_node_new_id(const char *node, size_t nbytes, char *out, size_t size);
/* The node an id names when it is not node's own; NULL when it is ours,
 * has no node part, or we have no node id. *len gets its length. */
const char *srd_node_other(const char *node, const char *id, size_t *len);
/* A 404 naming the node that holds id when that is another one; false
 * (e untouched) otherwise. what: "Session", "MCP session". */
bool srd_node_not_ours(const char *node, const char *what, const char *id, srd_ferr *e);
/* A 503 with Retry-After when the node drains: it takes no new what
 * ("sessions", "runs"); false otherwise. */
bool srd_node_refuse_draining(struct srd_ctx *ctx, const char *what, srd_ferr *e);
/* GET /v1/ready */
void srd_handle_ready(struct srd_ctx *ctx, const srd_request *req, srd_response *res);

#endif

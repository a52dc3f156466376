/* The route table: method + path pattern -> handler. Paths match with or
 * without a trailing slash ("/v1/run/" is "/v1/run"); "{name}" segments
 * capture into req->params, and a trailing "{name*}" captures the rest of
 * the path, slashes included, into req->rest:
 * "/v1/sessions/{id}/files/{path*}". */
#ifndef SRD_ROUTES_H
#define SRD_ROUTES_H

#include "daemon.h"
#include "http.h"

typedef void (*srd_handler)(srd_ctx *ctx, const srd_request *req, srd_response *res);

typedef struct srd_route_def {
	const char *method;
	const char *pattern;
	srd_handler handler;
} srd_route_def;

/* Find the route and run it; 404 or 405 with a JSON body otherwise. */
void srd_route(srd_ctx *ctx, srd_request *req, srd_response *res);
/* Does path match pattern? Captures go to req->params and req->rest (req
 * may be NULL). */
bool srd_route_match(const char *pattern, const char *path, srd_request *req);

#endif

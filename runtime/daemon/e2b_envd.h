/* envd, E2B's in-sandbox agent (port 49983): filesystem, processes and
 * files for one E2B sandbox (e2b.h). */
#ifndef SRD_E2B_ENVD_H
#define SRD_E2B_ENVD_H

#include <stdbool.h>

#include "daemon.h"
#include "e2b.h"
#include "http.h"

/* A request for port 49983 of sb (referenced for the call). It comes with
 * the sandbox's access token checked, except GET and POST /files without
 * an X-Access-Token header (a signed URL): the handler checks the
 * signature itself (sb->envd_token). Until envd lands, a weak stub in
 * e2b.c answers 501. */
void srd_envd_handle(srd_ctx *ctx, struct srd_e2b_sandbox *sb, const srd_request *req,
		     srd_response *res);

#endif

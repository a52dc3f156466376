/* The code interpreter of an E2B sandbox (port 49999): contexts, each a
 * stateful kernel (sr_kernel) over the sandbox's workspace, and POST
 * /execute answered in E2B's NDJSON. */
#ifndef SRD_E2B_EXEC_H
#define SRD_E2B_EXEC_H

#include "e2b.h"

/* The default context (not started until its first run). -1: no memory. */
int srd_e2b_contexts_init(srd_e2b_sandbox *sb);
/* Kill every context's interpreter now (any thread; runs end as killed). */
void srd_e2b_contexts_kill(srd_e2b_sandbox *sb);
/* Stop and free them all (the sandbox's last reference). */
void srd_e2b_contexts_free(srd_e2b_sandbox *sb);
/* A request for port 49999. */
void srd_e2b_jupyter(srd_ctx *ctx, srd_e2b_sandbox *sb, srd_request *req, srd_response *res);

#endif

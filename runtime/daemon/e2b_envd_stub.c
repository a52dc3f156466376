/* Until envd (e2b_envd.c) is built: port 49983 answers 501. Weak, and in
 * a file of its own that sorts after e2b_envd.c: the static archive's
 * first member defining srd_envd_handle is envd's once it exists. */
#include "e2b_envd.h"

#include <string.h>

__attribute__((weak)) void srd_envd_handle(srd_ctx *ctx, struct srd_e2b_sandbox *sb,
					   const srd_request *req, srd_response *res)
{
	(void)ctx;
	(void)sb;
	if (strcmp(req->path, "/health") == 0) { /* Sandbox.isRunning() asks it */
		srd_respond_text(res, 204, "application/json", NULL, 0);
		return;
	}
	srd_ferr e = { 0 };
	srd_fail(&e, 501, NULL,
		 "envd (port %d: %s %.200s) is not available in this saferund: only the code "
		 "interpreter (port %d) is",
		 SRD_E2B_PORT_ENVD, req->method, req->path, SRD_E2B_PORT_JUPYTER);
	srd_respond_error(res, &e);
}

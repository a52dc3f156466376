/* The code interpreter of an E2B sandbox (port 49999): contexts, each a
 * stateful kernel (sr_kernel) over the sandbox's workspace, and POST
 * /execute answered in E2B's NDJSON. The default context's kernel is the
 * sandbox's commands run in (srd_e2b_exec). */
#ifndef SRD_E2B_EXEC_H
#define SRD_E2B_EXEC_H

#include "e2b.h"

/* The default context (not started until its first run). -1: no memory. */
int srd_e2b_contexts_init(srd_e2b_sandbox *sb);
/* Kill every context's interpreter now (any thread; runs end as killed). */
void srd_e2b_contexts_kill(srd_e2b_sandbox *sb);
/* Freeze (pause) or thaw (resume) every context's kernel, and with the
 * default one the commands in it. _locked: under sb->lock. */
void srd_e2b_contexts_freeze(srd_e2b_sandbox *sb, bool frozen);
void srd_e2b_contexts_freeze_locked(srd_e2b_sandbox *sb, bool frozen);
/* Start a command in the sandbox (envd's commands, bash runs): it enters
 * the default context's kernel (sr_kernel_exec), started first if it is
 * not up. -1 with err: EAGAIN while paused, else why it could not. */
int srd_e2b_exec(srd_e2b_sandbox *sb, const sr_exec_options *xo, sr_exec_proc *out, sr_error *err);
/* Stop and free them all (the sandbox's last reference). */
void srd_e2b_contexts_free(srd_e2b_sandbox *sb);
/* A request for port 49999. */
void srd_e2b_jupyter(srd_ctx *ctx, srd_e2b_sandbox *sb, srd_request *req, srd_response *res);

#endif

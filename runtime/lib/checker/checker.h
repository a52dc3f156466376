/* Internal pieces of the checker's API for the other modules. */
#ifndef SR_CHECKER_H
#define SR_CHECKER_H

#include <cjson/cJSON.h>

#include "saferun.h"

/* The code is text a checker and a sandbox can take: present, at most
 * SR_MAX_CODE_BYTES, no NUL, valid UTF-8. */
int sr_check_source_text(const char *code, size_t size, sr_error *err);

/* sr_check in two steps, so the caller can build the sandbox while the
 * confined child checks: start validates the text and forks the child
 * (*job NULL: nothing to wait for, the result is ready at finish);
 * finish waits for it and fills res as sr_check does; abort kills it.
 * finish and abort free the job. */
typedef struct sr_check_job sr_check_job;
int sr_check_start(const sr_check_request *req, sr_check_job **job, sr_error *err);
int sr_check_finish(sr_check_job *job, sr_check_result *res, sr_error *err);
void sr_check_abort(sr_check_job *job);

/* Findings as a JSON array (for result.c). */
cJSON *sr_findings_json(const sr_finding *f, size_t n);

#endif

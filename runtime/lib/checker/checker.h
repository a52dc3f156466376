/* Internal pieces of the checker's API for the other modules. */
#ifndef SR_CHECKER_H
#define SR_CHECKER_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "checker_confine.h"
#include "checker_rules.h"
#include "saferun.h"

/* The code is text a checker and a sandbox can take: present, at most
 * SR_MAX_CODE_BYTES, no NUL, valid UTF-8. */
int sr_check_source_text(const char *code, size_t size, sr_error *err);

#define SR_CHECK_MAX_DIRS  40
#define SR_CHECK_MAX_ALLOW 256

/* The settings of one check (policy/check.c fills them from a policy and
 * a request): pointers into both. */
typedef struct sr_check_settings {
	sr_check_config cfg;
	const char *dirs[SR_CHECK_MAX_DIRS];
	const char *allow[SR_CHECK_MAX_ALLOW];
	sr_confine_limits lim;
} sr_check_settings;

/* sr_check in two steps, so the caller can build the sandbox while the
 * confined child checks: start (policy.h: the settings from a policy)
 * validates the text and forks the child; begin is the same for code
 * that passed sr_check_source_text and settings already made. finish
 * waits for it and fills res as sr_check does; abort kills it. finish
 * and abort free the job. */
typedef struct sr_check_job sr_check_job;
int sr_check_begin(const char *code, size_t size, bool in_process, const sr_check_settings *s,
		   sr_check_job **job, sr_error *err);
int sr_check_finish(sr_check_job *job, sr_check_result *res, sr_error *err);
void sr_check_abort(sr_check_job *job);

/* Findings as a JSON array (for result.c). */
cJSON *sr_findings_json(const sr_finding *f, size_t n);

#endif

/* Internal pieces of the checker's API for the other modules. */
#ifndef SR_CHECKER_H
#define SR_CHECKER_H

#include <cjson/cJSON.h>

#include "saferun.h"

/* The code is text a checker and a sandbox can take: present, at most
 * SR_MAX_CODE_BYTES, no NUL, valid UTF-8. */
int sr_check_source_text(const char *code, size_t size, sr_error *err);

/* Findings as a JSON array (for result.c). */
cJSON *sr_findings_json(const sr_finding *f, size_t n);

#endif

/* Internal pieces of the checker's API for the other modules. */
#ifndef SR_CHECKER_H
#define SR_CHECKER_H

#include <cjson/cJSON.h>

#include "saferun.h"

/* Findings as a JSON array (for result.c). */
cJSON *sr_findings_json(const sr_finding *f, size_t n);

#endif

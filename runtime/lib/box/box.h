/* The box layer's internal interface: one sandbox, from a checked
 * request to its result, for the run layer above. */
#ifndef SR_BOX_H
#define SR_BOX_H

#include "saferun.h"

/* A result's dependencies section (lists filled by deps.c). */
void sr_deps_result_free(struct sr_deps_result *d);

#endif

/* The box layer's interface: one sandbox, from a checked request to its
 * result (its filesystem plan, cgroup, network and egress, supervision,
 * the runner cache, the working dir and its artifacts), for the run
 * layer above. */
#ifndef SR_BOX_H
#define SR_BOX_H

#include "artifacts.h"
#include "cgroup.h"
#include "egress.h"
#include "idslot.h"
#include "language.h"
#include "mounts.h"
#include "net.h"
#include "runner_cache.h"
#include "saferun.h"
#include "sandbox.h"
#include "supervise.h"
#include "workspace.h"

/* A result's dependencies section (lists filled by deps.c). */
void sr_deps_result_free(struct sr_deps_result *d);

#endif

/* The daemon's warm pools: one per policy whose warm.enabled is true
 * (docs/warm.md), started with the daemon and again on SIGHUP. A run holds
 * its pool until it ends; a pool replaced by a reload is stopped by the
 * last run that held it. */
#ifndef SRD_WARM_POOLS_H
#define SRD_WARM_POOLS_H

#include <cjson/cJSON.h>

#include "policies.h"
#include "saferun.h"

typedef struct srd_warm srd_warm;
typedef struct srd_warm_pool srd_warm_pool;

/* Start a pool for every warm policy of reg. Failures to start a zygote
 * are not errors here: the pool keeps retrying, and runs go cold meanwhile. */
int srd_warm_open(srd_policies *reg, const char *rootfs_dir, srd_warm **out, char *msg,
		  size_t size);
/* The pools of the policies as reg has them now. */
void srd_warm_reload(srd_warm *t, srd_policies *reg);
/* NULL (and nothing to release) when the policy has no pool. */
srd_warm_pool *srd_warm_acquire(srd_warm *t, const char *policy);
sr_warm *srd_warm_pool_get(srd_warm_pool *p);
void srd_warm_release(srd_warm *t, srd_warm_pool *p);
/* [{policy, languages, zygote_up, ready, pool_size, warm_runs, cold_runs,
 * ..., javascript: {...}}] */
cJSON *srd_warm_json(srd_warm *t);
/* Ready sandboxes over every pool, per language (SR_LANG_*): python's
 * forks and javascript's node sandboxes; bash has no pool (0). */
void srd_warm_ready(srd_warm *t, unsigned ready[SR_LANG_BASH + 1]);
void srd_warm_close(srd_warm *t);

#endif

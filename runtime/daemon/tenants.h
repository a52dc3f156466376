/* Tenants: who a client is, and what it may do. The operator's tenants
 * file maps unix-socket peers (SO_PEERCRED uid or gid) and TCP bearer
 * tokens to named tenants, each with the policies it may use, its quotas
 * and its checker ceiling (docs/tenants.md). Without a file there is one
 * tenant, "default", that every peer is, with the daemon's settings as its
 * quotas and no ceiling: saferund behaves as it did before tenants. */
#ifndef SRD_TENANTS_H
#define SRD_TENANTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "http.h"
#include "json.h"
#include "saferun.h"
#include "sha256.h"

#define SRD_TENANTS_MAX 256
/* A tenant's weight: its share of run slots and CPU against the others'. */
#define SRD_TENANT_WEIGHT_DEFAULT 100u
#define SRD_TENANT_WEIGHT_MAX     10000u

typedef struct srd_tenant {
	char name[64];
	unsigned index;                          /* its place in the file: the run gate's class */
	bool in_file;                            /* false: the one default tenant (not logged) */
	unsigned char (*tokens)[SRD_SHA256_LEN]; /* digests */
	size_t n_tokens;
	uid_t *uids;
	size_t n_uids;
	gid_t *gids;
	size_t n_gids;
	char **policies; /* NULL: any policy */
	size_t n_policies;
	char **ceiling; /* what a request's allow may hold; NULL: anything */
	size_t n_ceiling;
	uint64_t max_runs, queue_depth, max_sessions, session_max_age_ms, max_file_bytes;
	unsigned weight; /* 1..SRD_TENANT_WEIGHT_MAX */
	char cgroup[72]; /* its share group ("tenant-NAME"), "" when none */
} srd_tenant;

typedef struct srd_tenants {
	srd_tenant *t;
	size_t n;
	bool from_file;
} srd_tenants;

/* cfg->tenants_file's tenants (or the one default tenant when there is
 * none), quotas defaulting to cfg's settings. -1 with msg naming the
 * JSON path and the value that is wrong. */
int srd_tenants_load(const srd_config *cfg, srd_tenants *out, char *msg, size_t size);
void srd_tenants_free(srd_tenants *ts);
/* Does any tenant have a token (TCP listeners need one)? */
bool srd_tenants_have_tokens(const srd_tenants *ts);
/* The tenant of a request: by token (need_token: the global token
 * without a tenants file, the tenants' with one), by SO_PEERCRED on the
 * unix socket, else the default tenant. NULL with *status (401, 403) and
 * *why (static text) when it is no one's. */
const srd_tenant *srd_tenants_identify(const srd_tenants *ts, const char *global_token,
				       const srd_peer *peer, bool need_token,
				       const char *authorization, unsigned *status,
				       const char **why);
/* With a tenants file: a cgroup share per tenant (sr_cgroup_share_create,
 * "tenant-NAME" with the tenant's weight) that its runs, warm runs and
 * sessions' kernels are made in. Nothing without one. -1 with msg. */
int srd_tenants_make_cgroups(srd_tenants *ts, char *msg, size_t size);
/* Its name for a log line: NULL for the one default tenant (whose lines
 * look as they did before tenants). */
const char *srd_tenant_log_name(const srd_tenant *t);
/* The tenant's share group for sr_run_request.cgroup_share, or NULL. */
const char *srd_tenant_cgroup(const srd_tenant *t);
/* 403 naming the policy when the tenant may not use it. */
int srd_tenant_check_policy(const srd_tenant *t, const char *policy, srd_ferr *e);
/* 400 naming field[i] when allow[i] is beyond the tenant's ceiling and
 * not already in the policy's own checker.allow. */
int srd_tenant_check_allow(const srd_tenant *t, const sr_policy *p, const char *field,
			   const char *const *allow, size_t n, srd_ferr *e);

#endif

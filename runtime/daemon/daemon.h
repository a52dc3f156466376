/* The state every handler shares: settings, policies, the run gate,
 * metrics. One per process, built by main. */
#ifndef SRD_DAEMON_H
#define SRD_DAEMON_H

#include <stdatomic.h>
#include <stdint.h>

#include "config.h"
#include "limits.h"
#include "metrics.h"
#include "policies.h"
#include "tenants.h"

typedef struct srd_ctx {
	const srd_config *cfg;
	srd_policies *policies;
	struct srd_sessions *sessions;
	struct srd_mcp *mcp;   /* the MCP sessions of the HTTP transport */
	struct srd_warm *warm; /* warm pools of the warm policies (warm_pools.h) */
	srd_gate gate;
	srd_metrics metrics;
	const char *token; /* bearer token for TCP; NULL: none */
	srd_tenants tenants;
	uint64_t started_ms;
	atomic_bool draining;
	atomic_uint requests_active; /* received and not yet answered */
} srd_ctx;

/* Milliseconds on CLOCK_MONOTONIC. */
uint64_t srd_now_ms(void);

#endif

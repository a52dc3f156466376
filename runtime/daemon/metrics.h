/* Counters for GET /metrics (Prometheus text format 0.0.4): the daemon's
 * and, by tenant, its runs, slots, queue, sessions and E2B commands. */
#ifndef SRD_METRICS_H
#define SRD_METRICS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define SRD_REFUSALS 4

#include "limits.h"
#include "saferun.h"
#include "tenants.h"

#define SRD_DURATION_BUCKETS 12
#define SRD_STATUS_COUNT     (SR_STATUS_INTERNAL_ERROR + 1)
#define SRD_LANGUAGE_COUNT   (SR_LANG_BASH + 1)

struct srd_sessions;

/* One tenant's counters. */
typedef struct srd_tenant_counts {
	uint64_t runs[SRD_LANGUAGE_COUNT][SRD_STATUS_COUNT];
	uint64_t commands; /* E2B commands started (envd's Process.Start) */
	uint64_t refused[SRD_REFUSALS];
} srd_tenant_counts;

typedef struct srd_metrics {
	pthread_mutex_t lock;
	uint64_t runs[SRD_STATUS_COUNT];
	uint64_t run_buckets[SRD_DURATION_BUCKETS]; /* cumulative at render */
	uint64_t run_count;
	double run_seconds;
	uint64_t queue_wait_count;
	double queue_wait_seconds;
	uint64_t refused[SRD_REFUSALS]; /* see enum srd_refusal */
	uint64_t requests_by_class[6];  /* 1xx .. 5xx by first digit */
	uint64_t started_ms;
	const srd_tenants *tenants;   /* NULL: no series by tenant */
	srd_tenant_counts *by_tenant; /* tenants->n, by srd_tenant.index */
} srd_metrics;

/* bad request (4xx), queue full (429), draining (503), client gone (499) */
enum srd_refusal {
	SRD_REFUSED_BAD_REQUEST,
	SRD_REFUSED_QUEUE_FULL,
	SRD_REFUSED_DRAINING,
	SRD_REFUSED_CLIENT_GONE,
};

/* ts (kept, not copied; NULL: none) are the tenants the series by tenant
 * name, in their order. -1: out of memory. */
int srd_metrics_init(srd_metrics *m, const srd_tenants *ts);
void srd_metrics_destroy(srd_metrics *m);
/* A run that happened, of tenant t (NULL: none) in language l. */
void srd_metrics_run(srd_metrics *m, const srd_tenant *t, sr_language l, sr_status status,
		     uint64_t run_ms, uint64_t queue_ms);
/* An E2B command started in one of t's sandboxes. */
void srd_metrics_command(srd_metrics *m, const srd_tenant *t);
/* A run request of tenant t (NULL: none) refused before it ran. */
void srd_metrics_refused(srd_metrics *m, const srd_tenant *t, enum srd_refusal why);
void srd_metrics_request(srd_metrics *m, unsigned http_status);
/* The exposition text (caller frees); sessions may be NULL (none). */
char *srd_metrics_render(srd_metrics *m, srd_gate *gate, struct srd_sessions *sessions,
			 size_t *len);

#endif

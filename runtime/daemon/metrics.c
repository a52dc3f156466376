#include "metrics.h"

#include "daemon.h"
#include "sessions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Upper bounds in seconds: a cold print('hi') is ~25 ms, the default time
 * limit 20 s. */
static const double bucket_le[SRD_DURATION_BUCKETS] = {
	0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
};

uint64_t srd_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int srd_metrics_init(srd_metrics *m, const srd_tenants *ts)
{
	memset(m, 0, sizeof *m);
	m->started_ms = srd_now_ms();
	if (ts && ts->n) {
		if (!(m->by_tenant = calloc(ts->n, sizeof *m->by_tenant)))
			return -1;
		m->tenants = ts;
	}
	if (pthread_mutex_init(&m->lock, NULL)) {
		free(m->by_tenant);
		m->by_tenant = NULL;
		return -1;
	}
	return 0;
}

void srd_metrics_destroy(srd_metrics *m)
{
	pthread_mutex_destroy(&m->lock);
	free(m->by_tenant);
	m->by_tenant = NULL;
}

/* Under the lock: t's counters, or NULL when it has none. */
static srd_tenant_counts *counts_of(srd_metrics *m, const srd_tenant *t)
{
	return t && m->tenants && t->index < m->tenants->n ? &m->by_tenant[t->index] : NULL;
}

void srd_metrics_run(srd_metrics *m, const srd_tenant *t, sr_language l, sr_status status,
		     uint64_t run_ms, uint64_t queue_ms)
{
	double s = (double)run_ms / 1000.0;
	pthread_mutex_lock(&m->lock);
	srd_tenant_counts *c = counts_of(m, t);
	if ((unsigned)status < SRD_STATUS_COUNT) {
		m->runs[status]++;
		if (c && (unsigned)l < SRD_LANGUAGE_COUNT)
			c->runs[l][status]++;
	}
	for (size_t i = 0; i < SRD_DURATION_BUCKETS; i++)
		if (s <= bucket_le[i]) {
			m->run_buckets[i]++;
			break;
		}
	m->run_count++;
	m->run_seconds += s;
	m->queue_wait_count++;
	m->queue_wait_seconds += (double)queue_ms / 1000.0;
	pthread_mutex_unlock(&m->lock);
}

void srd_metrics_command(srd_metrics *m, const srd_tenant *t)
{
	pthread_mutex_lock(&m->lock);
	srd_tenant_counts *c = counts_of(m, t);
	if (c)
		c->commands++;
	pthread_mutex_unlock(&m->lock);
}

void srd_metrics_refused(srd_metrics *m, const srd_tenant *t, enum srd_refusal why)
{
	pthread_mutex_lock(&m->lock);
	m->refused[why]++;
	srd_tenant_counts *c = counts_of(m, t);
	if (c)
		c->refused[why]++;
	pthread_mutex_unlock(&m->lock);
}

void srd_metrics_request(srd_metrics *m, unsigned http_status)
{
	unsigned cls = http_status / 100;
	pthread_mutex_lock(&m->lock);
	m->requests_by_class[cls < 6 ? cls : 0]++;
	pthread_mutex_unlock(&m->lock);
}

static void render_runs(FILE *f, const srd_metrics *m)
{
	fputs("# HELP saferund_runs_total Runs that happened, by result status.\n"
	      "# TYPE saferund_runs_total counter\n",
	      f);
	for (int s = 0; s < SRD_STATUS_COUNT; s++)
		fprintf(f, "saferund_runs_total{status=\"%s\"} %llu\n",
			sr_status_name((sr_status)s), (unsigned long long)m->runs[s]);
	fputs("# HELP saferund_run_duration_seconds Wall time of a run in its sandbox.\n"
	      "# TYPE saferund_run_duration_seconds histogram\n",
	      f);
	uint64_t cumulative = 0;
	for (size_t i = 0; i < SRD_DURATION_BUCKETS; i++) {
		cumulative += m->run_buckets[i];
		fprintf(f, "saferund_run_duration_seconds_bucket{le=\"%g\"} %llu\n", bucket_le[i],
			(unsigned long long)cumulative);
	}
	fprintf(f,
		"saferund_run_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
		"saferund_run_duration_seconds_sum %.6f\n"
		"saferund_run_duration_seconds_count %llu\n",
		(unsigned long long)m->run_count, m->run_seconds, (unsigned long long)m->run_count);
	fprintf(f,
		"# HELP saferund_queue_wait_seconds Time runs waited for a free slot.\n"
		"# TYPE saferund_queue_wait_seconds summary\n"
		"saferund_queue_wait_seconds_sum %.6f\n"
		"saferund_queue_wait_seconds_count %llu\n",
		m->queue_wait_seconds, (unsigned long long)m->queue_wait_count);
}

static const char *const refusal_name[SRD_REFUSALS] = { "bad_request", "queue_full", "draining",
							"client_gone" };

static void render_refusals(FILE *f, const srd_metrics *m)
{
	fputs(
	    "# HELP saferund_runs_refused_total Run requests refused before a sandbox was built.\n"
	    "# TYPE saferund_runs_refused_total counter\n",
	    f);
	for (size_t i = 0; i < SRD_REFUSALS; i++)
		fprintf(f, "saferund_runs_refused_total{reason=\"%s\"} %llu\n", refusal_name[i],
			(unsigned long long)m->refused[i]);
	fputs("# HELP saferund_http_requests_total HTTP requests answered, by status class.\n"
	      "# TYPE saferund_http_requests_total counter\n",
	      f);
	for (unsigned c = 1; c < 6; c++)
		fprintf(f, "saferund_http_requests_total{code=\"%uxx\"} %llu\n", c,
			(unsigned long long)m->requests_by_class[c]);
}

/* The tenants' counters. Their names are [A-Za-z0-9_.-] (tenants.c), safe
 * in a label value as they are. A run counter appears once it is not 0:
 * 27 of them for each of up to 256 tenants would be mostly zeros. */
static void render_tenant_counters(FILE *f, const srd_tenants *ts, const srd_tenant_counts *c)
{
	fputs("# HELP saferund_tenant_runs_total Runs that happened, by tenant, language and "
	      "result status.\n"
	      "# TYPE saferund_tenant_runs_total counter\n",
	      f);
	for (size_t i = 0; i < ts->n; i++)
		for (int l = 0; l < SRD_LANGUAGE_COUNT; l++)
			for (int s = 0; s < SRD_STATUS_COUNT; s++)
				if (c[i].runs[l][s])
					fprintf(f,
						"saferund_tenant_runs_total{tenant=\"%s\",language="
						"\"%s\",status=\"%s\"} %llu\n",
						ts->t[i].name, sr_language_name((sr_language)l),
						sr_status_name((sr_status)s),
						(unsigned long long)c[i].runs[l][s]);
	fputs("# HELP saferund_tenant_runs_refused_total Run requests refused before a sandbox "
	      "was built, by tenant.\n"
	      "# TYPE saferund_tenant_runs_refused_total counter\n",
	      f);
	for (size_t i = 0; i < ts->n; i++)
		for (size_t r = 0; r < SRD_REFUSALS; r++)
			fprintf(f,
				"saferund_tenant_runs_refused_total{tenant=\"%s\",reason=\"%s\"} "
				"%llu\n",
				ts->t[i].name, refusal_name[r],
				(unsigned long long)c[i].refused[r]);
	fputs("# HELP saferund_tenant_commands_total E2B commands started, by tenant.\n"
	      "# TYPE saferund_tenant_commands_total counter\n",
	      f);
	for (size_t i = 0; i < ts->n; i++)
		fprintf(f, "saferund_tenant_commands_total{tenant=\"%s\"} %llu\n", ts->t[i].name,
			(unsigned long long)c[i].commands);
}

/* The tenants' gauges: slots and queue (the gate's classes), sessions. */
static void render_tenant_gauges(FILE *f, const srd_tenants *ts, srd_gate *gate,
				 const unsigned *sessions)
{
	static const char *const gauges[3][2] = {
		{ "saferund_tenant_runs_in_flight", "Runs executing now, by tenant." },
		{ "saferund_tenant_queue_depth", "Runs waiting for a slot, by tenant." },
		{ "saferund_tenant_sessions", "Sessions open now, by tenant." },
	};
	unsigned(*now)[3] = calloc(ts->n, sizeof *now);
	if (!now)
		return;
	for (size_t i = 0; i < ts->n; i++) {
		srd_gate_class_counts(gate, ts->t[i].index, &now[i][0], &now[i][1]);
		now[i][2] = sessions ? sessions[i] : 0;
	}
	for (size_t g = 0; g < 3; g++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", gauges[g][0], gauges[g][1],
			gauges[g][0]);
		for (size_t i = 0; i < ts->n; i++)
			fprintf(f, "%s{tenant=\"%s\"} %u\n", gauges[g][0], ts->t[i].name,
				now[i][g]);
	}
	free(now);
}

/* A copy of the tenants' counters (taken under the lock) and of their open
 * sessions. */
static int snapshot_tenants(srd_metrics *m, struct srd_sessions *sessions,
			    srd_tenant_counts **counts, unsigned **open)
{
	size_t n = m->tenants ? m->tenants->n : 0;
	*counts = NULL;
	*open = NULL;
	if (!n)
		return 0;
	*counts = malloc(n * sizeof **counts);
	*open = calloc(n, sizeof **open);
	if (!*counts || !*open) {
		free(*counts);
		free(*open);
		return -1;
	}
	pthread_mutex_lock(&m->lock);
	memcpy(*counts, m->by_tenant, n * sizeof **counts);
	pthread_mutex_unlock(&m->lock);
	if (sessions)
		srd_sessions_count_by_tenant(sessions, *open, n);
	return 0;
}

char *srd_metrics_render(srd_metrics *m, srd_gate *gate, struct srd_sessions *sessions, size_t *len)
{
	char *buf = NULL;
	srd_tenant_counts *counts;
	unsigned *open;
	if (snapshot_tenants(m, sessions, &counts, &open))
		return NULL;
	FILE *f = open_memstream(&buf, len);
	if (!f) {
		free(counts);
		free(open);
		return NULL;
	}
	unsigned running, waiting;
	srd_gate_counts(gate, &running, &waiting);
	pthread_mutex_lock(&m->lock);
	srd_metrics copy = *m;
	pthread_mutex_unlock(&m->lock);
	render_runs(f, &copy);
	render_refusals(f, &copy);
	fprintf(f,
		"# HELP saferund_runs_in_flight Runs executing now.\n"
		"# TYPE saferund_runs_in_flight gauge\n"
		"saferund_runs_in_flight %u\n"
		"# HELP saferund_queue_depth Runs waiting for a slot.\n"
		"# TYPE saferund_queue_depth gauge\n"
		"saferund_queue_depth %u\n"
		"# HELP saferund_max_concurrent_runs Runs allowed at once.\n"
		"# TYPE saferund_max_concurrent_runs gauge\n"
		"saferund_max_concurrent_runs %u\n"
		"# HELP saferund_queue_capacity Runs allowed to wait.\n"
		"# TYPE saferund_queue_capacity gauge\n"
		"saferund_queue_capacity %u\n"
		"# HELP saferund_sessions Sessions open now.\n"
		"# TYPE saferund_sessions gauge\n"
		"saferund_sessions %u\n"
		"# HELP saferund_uptime_seconds Seconds since the daemon started.\n"
		"# TYPE saferund_uptime_seconds gauge\n"
		"saferund_uptime_seconds %.3f\n",
		running, waiting, gate->max_running, gate->max_waiting,
		sessions ? srd_sessions_count(sessions) : 0,
		(double)(srd_now_ms() - copy.started_ms) / 1000.0);
	if (counts) {
		render_tenant_counters(f, m->tenants, counts);
		render_tenant_gauges(f, m->tenants, gate, open);
	}
	free(counts);
	free(open);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

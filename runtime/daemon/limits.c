#include "limits.h"

#include <errno.h>
#include <time.h>

int srd_gate_init(srd_gate *g, unsigned max_running, unsigned max_waiting)
{
	*g = (srd_gate){ .max_running = max_running, .max_waiting = max_waiting };
	pthread_condattr_t attr;
	if (pthread_condattr_init(&attr) || pthread_condattr_setclock(&attr, CLOCK_MONOTONIC))
		return -1;
	int rc = pthread_cond_init(&g->changed, &attr);
	pthread_condattr_destroy(&attr);
	if (rc)
		return -1;
	if (pthread_mutex_init(&g->lock, NULL)) {
		pthread_cond_destroy(&g->changed);
		return -1;
	}
	return 0;
}

void srd_gate_destroy(srd_gate *g)
{
	pthread_cond_destroy(&g->changed);
	pthread_mutex_destroy(&g->lock);
}

srd_gate_result srd_gate_enter(srd_gate *g)
{
	srd_gate_result rc = SRD_GATE_OK;
	pthread_mutex_lock(&g->lock);
	if (g->closed) {
		rc = SRD_GATE_CLOSED;
	} else if (g->running < g->max_running && g->waiting == 0) {
		g->running++;
	} else if (g->waiting >= g->max_waiting) {
		rc = SRD_GATE_FULL;
	} else {
		uint64_t ticket = g->next_ticket++;
		g->waiting++;
		while (!g->closed && !(ticket == g->head && g->running < g->max_running))
			pthread_cond_wait(&g->changed, &g->lock);
		g->waiting--;
		if (g->closed) {
			rc = SRD_GATE_CLOSED;
		} else {
			g->head++;
			g->running++;
			/* the next ticket may fit too */
			pthread_cond_broadcast(&g->changed);
		}
	}
	pthread_mutex_unlock(&g->lock);
	return rc;
}

void srd_gate_leave(srd_gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->running--;
	pthread_cond_broadcast(&g->changed);
	pthread_mutex_unlock(&g->lock);
}

void srd_gate_close(srd_gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->closed = true;
	pthread_cond_broadcast(&g->changed);
	pthread_mutex_unlock(&g->lock);
}

bool srd_gate_wait_idle(srd_gate *g, uint64_t timeout_ms)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)(timeout_ms / 1000);
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&g->lock);
	int rc = 0;
	while ((g->running || g->waiting) && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&g->changed, &g->lock, &until);
	bool idle = !g->running && !g->waiting;
	pthread_mutex_unlock(&g->lock);
	return idle;
}

void srd_gate_counts(srd_gate *g, unsigned *running, unsigned *waiting)
{
	pthread_mutex_lock(&g->lock);
	*running = g->running;
	*waiting = g->waiting;
	pthread_mutex_unlock(&g->lock);
}

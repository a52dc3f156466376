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

struct srd_waiter {
	struct srd_waiter *next;
	bool admitted;
};

/* Under the lock: hand free slots to the waiters, oldest first. */
static void admit(srd_gate *g)
{
	while (g->first && g->running < g->max_running) {
		struct srd_waiter *w = g->first;
		g->first = w->next;
		if (!g->first)
			g->last = NULL;
		w->admitted = true;
		g->running++;
		g->waiting--;
	}
	pthread_cond_broadcast(&g->changed);
}

static void unqueue(srd_gate *g, struct srd_waiter *w)
{
	struct srd_waiter *prev = NULL;
	for (struct srd_waiter *it = g->first; it; prev = it, it = it->next)
		if (it == w) {
			*(prev ? &prev->next : &g->first) = w->next;
			if (g->last == w)
				g->last = prev;
			g->waiting--;
			return;
		}
}

static void wait_a_while(srd_gate *g, bool timed)
{
	if (!timed) {
		pthread_cond_wait(&g->changed, &g->lock);
		return;
	}
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += 100000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&g->changed, &g->lock, &until);
}

srd_gate_result srd_gate_enter_until(srd_gate *g, bool (*gone)(void *arg), void *arg)
{
	srd_gate_result rc = SRD_GATE_OK;
	pthread_mutex_lock(&g->lock);
	if (g->closed) {
		rc = SRD_GATE_CLOSED;
	} else if (g->running < g->max_running && !g->first) {
		g->running++;
	} else if (g->waiting >= g->max_waiting) {
		rc = SRD_GATE_FULL;
	} else {
		struct srd_waiter w = { 0 };
		*(g->last ? &g->last->next : &g->first) = &w;
		g->last = &w;
		g->waiting++;
		while (!g->closed && !w.admitted && rc == SRD_GATE_OK) {
			wait_a_while(g, gone != NULL);
			if (!w.admitted && gone && gone(arg))
				rc = SRD_GATE_GONE;
		}
		if (!w.admitted) {
			unqueue(g, &w);
			rc = g->closed ? SRD_GATE_CLOSED : rc;
			pthread_cond_broadcast(&g->changed);
		}
	}
	pthread_mutex_unlock(&g->lock);
	return rc;
}

srd_gate_result srd_gate_enter(srd_gate *g)
{
	return srd_gate_enter_until(g, NULL, NULL);
}

void srd_gate_leave(srd_gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->running--;
	admit(g);
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

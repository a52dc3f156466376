#include "limits.h"

#include <errno.h>
#include <stdlib.h>
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
	free(g->class_max_running); /* the other four share its block */
	free(g->class_pass);
	pthread_cond_destroy(&g->changed);
	pthread_mutex_destroy(&g->lock);
}

struct srd_waiter {
	struct srd_waiter *next;
	bool admitted;
	unsigned cls;
};

int srd_gate_set_classes(srd_gate *g, unsigned n, const unsigned *max_running,
			 const unsigned *max_waiting, const unsigned *weight)
{
	unsigned *block = calloc(5 * (size_t)n, sizeof *block);
	uint64_t *pass = calloc(n ? n : 1, sizeof *pass);
	if (!block || !pass) {
		free(block);
		free(pass);
		return -1;
	}
	pthread_mutex_lock(&g->lock);
	free(g->class_max_running);
	free(g->class_pass);
	g->n_classes = n;
	g->class_max_running = block;
	g->class_max_waiting = block + n;
	g->class_running = block + 2 * n;
	g->class_waiting = block + 3 * n;
	g->class_weight = block + 4 * n;
	g->class_pass = pass;
	g->vnow = 0;
	for (unsigned i = 0; i < n; i++) {
		g->class_max_running[i] = max_running[i];
		g->class_max_waiting[i] = max_waiting[i];
		unsigned w = weight ? weight[i] : SRD_GATE_WEIGHT_DEFAULT;
		g->class_weight[i] = w < 1 ? 1 : w > SRD_GATE_WEIGHT_MAX ? SRD_GATE_WEIGHT_MAX : w;
	}
	pthread_mutex_unlock(&g->lock);
	return 0;
}

/* Under the lock: may a run of class cls take a slot now? */
static bool may_run(const srd_gate *g, unsigned cls)
{
	return g->running < g->max_running &&
	       (!g->n_classes || g->class_running[cls] < g->class_max_running[cls]);
}

static void count(srd_gate *g, unsigned cls, int running, int waiting)
{
	g->running += (unsigned)running;
	g->waiting += (unsigned)waiting;
	if (g->n_classes) {
		g->class_running[cls] += (unsigned)running;
		g->class_waiting[cls] += (unsigned)waiting;
	}
}

/* A class that starts to wait, or takes a free slot at once, starts at
 * the current virtual time if it fell behind while idle: not running earns
 * no credit. A class that keeps waiting keeps its place. */
static void catch_up(srd_gate *g, unsigned cls)
{
	if (g->class_pass[cls] < g->vnow)
		g->class_pass[cls] = g->vnow;
}

static uint64_t finish_of(const srd_gate *g, unsigned cls)
{
	return g->class_pass[cls] + SRD_GATE_STRIDE / g->class_weight[cls];
}

/* A slot for class cls: its virtual time moves on by its stride, and the
 * next tie goes to the class after it. */
static void take_slot(srd_gate *g, unsigned cls)
{
	count(g, cls, 1, 0);
	if (g->n_classes) {
		uint64_t start = g->class_pass[cls];
		g->class_pass[cls] = finish_of(g, cls);
		g->vnow = start > g->vnow ? start : g->vnow;
		g->next_class = (cls + 1) % g->n_classes;
	}
}

static void unqueue(srd_gate *g, struct srd_waiter *w)
{
	struct srd_waiter *prev = NULL;
	for (struct srd_waiter *it = g->first; it; prev = it, it = it->next)
		if (it == w) {
			*(prev ? &prev->next : &g->first) = w->next;
			if (g->last == w)
				g->last = prev;
			count(g, w->cls, 0, -1);
			return;
		}
}

/* The waiter a free slot goes to: of the classes that may run, the one
 * with the lowest virtual finish time, ties to the first in turn from
 * next_class; within a class, the oldest. */
static struct srd_waiter *next_waiter(const srd_gate *g)
{
	struct srd_waiter *best = NULL;
	unsigned n = g->n_classes ? g->n_classes : 1, best_turn = n;
	uint64_t best_finish = UINT64_MAX;
	for (struct srd_waiter *w = g->first; w; w = w->next) {
		if (!may_run(g, w->cls))
			continue;
		unsigned turn = (w->cls + n - g->next_class % n) % n;
		uint64_t finish = g->n_classes ? finish_of(g, w->cls) : 0;
		if (finish < best_finish || (finish == best_finish && turn < best_turn)) {
			best = w;
			best_turn = turn;
			best_finish = finish;
		}
	}
	return best;
}

/* Under the lock: hand free slots to the waiters. Afterwards no waiter
 * may run, so a newcomer that may run takes a free slot at once. */
static void admit(srd_gate *g)
{
	struct srd_waiter *w;
	while ((w = next_waiter(g))) {
		unqueue(g, w);
		w->admitted = true;
		take_slot(g, w->cls);
	}
	pthread_cond_broadcast(&g->changed);
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

srd_gate_result srd_gate_enter_class(srd_gate *g, unsigned cls, bool (*gone)(void *arg), void *arg)
{
	srd_gate_result rc = SRD_GATE_OK;
	pthread_mutex_lock(&g->lock);
	if (g->n_classes && cls >= g->n_classes)
		cls = 0; /* a caller's bug: never an out-of-bounds count */
	if (g->closed) {
		rc = SRD_GATE_CLOSED;
	} else if (may_run(g, cls)) {
		if (g->n_classes)
			catch_up(g, cls);
		take_slot(g, cls);
	} else if (g->n_classes && g->class_waiting[cls] >= g->class_max_waiting[cls]) {
		rc = SRD_GATE_CLASS_FULL;
	} else if (g->waiting >= g->max_waiting) {
		rc = SRD_GATE_FULL;
	} else {
		struct srd_waiter w = { .cls = cls };
		if (g->n_classes && !g->class_waiting[cls])
			catch_up(g, cls);
		*(g->last ? &g->last->next : &g->first) = &w;
		g->last = &w;
		count(g, cls, 0, 1);
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

srd_gate_result srd_gate_enter_until(srd_gate *g, bool (*gone)(void *arg), void *arg)
{
	return srd_gate_enter_class(g, 0, gone, arg);
}

srd_gate_result srd_gate_enter(srd_gate *g)
{
	return srd_gate_enter_until(g, NULL, NULL);
}

void srd_gate_leave_class(srd_gate *g, unsigned cls)
{
	pthread_mutex_lock(&g->lock);
	if (g->n_classes && cls >= g->n_classes)
		cls = 0;
	count(g, cls, -1, 0);
	admit(g);
	pthread_mutex_unlock(&g->lock);
}

void srd_gate_leave(srd_gate *g)
{
	srd_gate_leave_class(g, 0);
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

void srd_gate_class_counts(srd_gate *g, unsigned cls, unsigned *running, unsigned *waiting)
{
	pthread_mutex_lock(&g->lock);
	*running = *waiting = 0;
	if (g->n_classes && cls < g->n_classes) {
		*running = g->class_running[cls];
		*waiting = g->class_waiting[cls];
	} else if (!g->n_classes && cls == 0) {
		*running = g->running;
		*waiting = g->waiting;
	}
	pthread_mutex_unlock(&g->lock);
}

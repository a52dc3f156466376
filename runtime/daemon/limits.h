/* The run gate: at most max_running runs at once, at most max_waiting
 * more waiting in a FIFO queue, the rest turned away (429). Closing it
 * (drain) turns away the waiters and every later caller (503). With
 * classes (tenants) the free slots are handed out by weighted fair
 * queueing: each class has a virtual time that a slot moves on by
 * SRD_GATE_STRIDE / weight, and the class that would finish its next slot
 * first (the lowest virtual finish time) goes next. */
#ifndef SRD_LIMITS_H
#define SRD_LIMITS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct srd_waiter;

typedef struct srd_gate {
	pthread_mutex_t lock;
	pthread_cond_t changed;
	unsigned max_running, max_waiting;
	unsigned running, waiting;
	struct srd_waiter *first, *last; /* FIFO: admitted in arrival order */
	bool closed;
	/* Classes (tenants; srd_gate_set_classes): each with its own caps,
	 * free slots handed to the classes in turn. None: one class. */
	unsigned n_classes, next_class;
	unsigned *class_max_running, *class_max_waiting, *class_running, *class_waiting;
	unsigned *class_weight;
	uint64_t *class_pass; /* virtual finish time of the class's last slot */
	uint64_t vnow;        /* virtual start time of the last slot handed out */
} srd_gate;

/* Virtual time a slot costs a class of weight 1 (weights 1..10000). */
#define SRD_GATE_STRIDE         1000000000ull
#define SRD_GATE_WEIGHT_MAX     10000u
#define SRD_GATE_WEIGHT_DEFAULT 100u

typedef enum srd_gate_result {
	SRD_GATE_OK = 0,
	SRD_GATE_FULL,       /* the queue is full: try again later */
	SRD_GATE_CLOSED,     /* the daemon is shutting down */
	SRD_GATE_GONE,       /* gone() said the caller left while it waited */
	SRD_GATE_CLASS_FULL, /* the caller's class has its queue full */
} srd_gate_result;

int srd_gate_init(srd_gate *g, unsigned max_running, unsigned max_waiting);
void srd_gate_destroy(srd_gate *g);
/* Wait for a slot; on SRD_GATE_OK the caller must srd_gate_leave. */
srd_gate_result srd_gate_enter(srd_gate *g);
/* The same, asking gone(arg) every 100 ms while queued: a client that
 * disconnected gives up its place instead of running for no one. */
srd_gate_result srd_gate_enter_until(srd_gate *g, bool (*gone)(void *arg), void *arg);
void srd_gate_leave(srd_gate *g);
/* n classes, class i running at most max_running[i] with max_waiting[i]
 * more queued and weight[i] (1..SRD_GATE_WEIGHT_MAX; NULL: all equal). A
 * free slot goes to the class with a waiter it may admit whose next slot
 * has the lowest virtual finish time (ties: the next in turn after the
 * last class served), so one class's queue cannot hold back another's
 * runs, and of two backlogged classes one of weight 2w gets twice the
 * slots of one of weight w. A class that was idle starts at the current
 * virtual time: idling earns no credit. -1: out of memory. */
int srd_gate_set_classes(srd_gate *g, unsigned n, const unsigned *max_running,
			 const unsigned *max_waiting, const unsigned *weight);
/* srd_gate_enter_until for a run of class cls (< n; 0 without classes);
 * on SRD_GATE_OK the caller must srd_gate_leave_class with the same cls. */
srd_gate_result srd_gate_enter_class(srd_gate *g, unsigned cls, bool (*gone)(void *arg), void *arg);
void srd_gate_leave_class(srd_gate *g, unsigned cls);
void srd_gate_close(srd_gate *g);
/* Wait until nothing runs, at most timeout_ms. True when idle. */
bool srd_gate_wait_idle(srd_gate *g, uint64_t timeout_ms);
void srd_gate_counts(srd_gate *g, unsigned *running, unsigned *waiting);
/* Class cls's (without classes: class 0 is everyone, the others none). */
void srd_gate_class_counts(srd_gate *g, unsigned cls, unsigned *running, unsigned *waiting);

#endif

/* The run gate's order (limits.c): with one slot held, waiters of several
 * classes queue up; the slot then passes from one to the next, and the
 * classes in the order they got it must be exactly the weighted fair
 * queueing order (lowest virtual finish time, ties in turn). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "limits.h"

#define MAX_WAITERS 64

static srd_gate gate;
static char order[MAX_WAITERS + 1];
static atomic_int n_order;

struct waiter {
	pthread_t thread;
	unsigned cls;
	srd_gate_result rc;
};

/* Admitted: note the class (as a letter) and give the slot back at once,
 * so the next admission is the gate's choice among the same waiters. */
static void *wait_turn(void *arg)
{
	struct waiter *w = arg;
	w->rc = srd_gate_enter_class(&gate, w->cls, NULL, NULL);
	if (w->rc == SRD_GATE_OK) {
		order[atomic_fetch_add(&n_order, 1)] = (char)('A' + w->cls);
		srd_gate_leave_class(&gate, w->cls);
	}
	return NULL;
}

static void wait_queued(unsigned n)
{
	for (int i = 0; i < 5000; i++) {
		unsigned running, waiting;
		srd_gate_counts(&gate, &running, &waiting);
		if (waiting == n)
			return;
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
}

/* Classes with these weights (and caps); the holder class takes the one
 * slot first; then per[i] waiters of class i queue, in the order the
 * classes are listed in `arrive` (one waiter at a time, so that the queue's
 * order is known). Returns the order the slot went round in. */
static const char *run_gate(unsigned n, const unsigned *weight, const unsigned *cap,
			    unsigned holder, const char *arrive)
{
	unsigned running[8], waiting[8];
	for (unsigned i = 0; i < n; i++) {
		running[i] = cap ? cap[i] : 1;
		waiting[i] = MAX_WAITERS;
	}
	srd_gate_init(&gate, 1, MAX_WAITERS);
	srd_gate_set_classes(&gate, n, running, waiting, weight);
	memset(order, 0, sizeof order);
	atomic_store(&n_order, 0);
	CHECK_INT(srd_gate_enter_class(&gate, holder, NULL, NULL), SRD_GATE_OK);
	struct waiter w[MAX_WAITERS];
	unsigned total = (unsigned)strlen(arrive);
	for (unsigned i = 0; i < total; i++) {
		w[i] = (struct waiter){ .cls = (unsigned)(arrive[i] - 'A') };
		pthread_create(&w[i].thread, NULL, wait_turn, &w[i]);
		wait_queued(i + 1);
	}
	srd_gate_leave_class(&gate, holder);
	for (unsigned i = 0; i < total; i++) {
		pthread_join(w[i].thread, NULL);
		CHECK_INT(w[i].rc, SRD_GATE_OK);
	}
	srd_gate_destroy(&gate);
	return order;
}

static void test_weight_two_gets_twice_the_turns(void)
{
	/* A (200) and B (100) both backlogged; C held the slot. Finish times:
	 * A 0.5 1 1.5 2 ..., B 1 2 3 ...: ties go to the next in turn after
	 * the last served (A, so B). */
	unsigned weight[] = { 200, 100, 100 };
	CHECK_STR(run_gate(3, weight, NULL, 2, "AAAAAAAABBBB"), "ABAABAABAABA");
}

static void test_equal_weights_take_turns(void)
{
	unsigned weight[] = { 100, 100, 100 };
	CHECK_STR(run_gate(3, weight, NULL, 2, "AAAABBBBCC"), "ABCABCABAB");
	/* The default weights are the same as equal ones. */
	CHECK_STR(run_gate(3, NULL, NULL, 2, "AAAABBBBCC"), "ABCABCABAB");
}

static void test_heavy_weight_three_to_one(void)
{
	/* A 300 finishes at 1/3, 2/3, 1, ... of B's stride, B 100 at 1, 2, 3.
	 * A's stride is SRD_GATE_STRIDE / 300 rounded down, so three of A's
	 * end just before one of B's: no ties, three to one from the start. */
	unsigned weight[] = { 300, 100, 100 };
	CHECK_STR(run_gate(3, weight, NULL, 2, "AAAAAAAAABBB"), "AAABAAABAAAB");
}

static void test_idle_class_earns_no_credit(void)
{
	/* B ran many slots alone (its virtual time far ahead of A's idle 0);
	 * once A queues, A starts at the current virtual time, not at 0, so
	 * the two alternate instead of A taking every slot until it catches
	 * up. */
	unsigned weight[] = { 100, 100, 100 }, running[] = { 1, 1, 1 }, waiting[] = { 64, 64, 64 };
	srd_gate_init(&gate, 1, MAX_WAITERS);
	srd_gate_set_classes(&gate, 3, running, waiting, weight);
	for (int i = 0; i < 10; i++) {
		CHECK_INT(srd_gate_enter_class(&gate, 1, NULL, NULL), SRD_GATE_OK);
		srd_gate_leave_class(&gate, 1);
	}
	memset(order, 0, sizeof order);
	atomic_store(&n_order, 0);
	CHECK_INT(srd_gate_enter_class(&gate, 2, NULL, NULL), SRD_GATE_OK);
	const char *arrive = "AAAABBBB";
	struct waiter w[8];
	for (unsigned i = 0; i < 8; i++) {
		w[i] = (struct waiter){ .cls = (unsigned)(arrive[i] - 'A') };
		pthread_create(&w[i].thread, NULL, wait_turn, &w[i]);
		wait_queued(i + 1);
	}
	srd_gate_leave_class(&gate, 2);
	for (unsigned i = 0; i < 8; i++)
		pthread_join(w[i].thread, NULL);
	CHECK_STR(order, "ABABABAB");
	srd_gate_destroy(&gate);
}

/* srd_gate_class_counts as "running,waiting". */
static const char *class_counts(unsigned cls)
{
	static char buf[32];
	unsigned running, waiting;
	srd_gate_class_counts(&gate, cls, &running, &waiting);
	snprintf(buf, sizeof buf, "%u,%u", running, waiting);
	return buf;
}

static void test_a_class_at_its_cap_is_skipped(void)
{
	/* Two slots; A (weight 1000) may run one at a time. While A's one
	 * run holds its slot, the other slot goes to B even though A's next
	 * finish time is earlier. */
	unsigned weight[] = { 1000, 100 }, running[] = { 1, 2 }, waiting[] = { 8, 8 };
	srd_gate_init(&gate, 2, 16);
	srd_gate_set_classes(&gate, 2, running, waiting, weight);
	CHECK_INT(srd_gate_enter_class(&gate, 0, NULL, NULL), SRD_GATE_OK);
	CHECK_INT(srd_gate_enter_class(&gate, 1, NULL, NULL), SRD_GATE_OK);
	memset(order, 0, sizeof order);
	atomic_store(&n_order, 0);
	struct waiter a = { .cls = 0 }, b = { .cls = 1 };
	pthread_create(&a.thread, NULL, wait_turn, &a);
	wait_queued(1);
	pthread_create(&b.thread, NULL, wait_turn, &b);
	wait_queued(2);
	/* each class's own counts (the metrics by tenant); no class 2 */
	CHECK_STR(class_counts(0), "1,1");
	CHECK_STR(class_counts(1), "1,1");
	CHECK_STR(class_counts(2), "0,0");
	srd_gate_leave_class(&gate, 1); /* a slot frees; A is at its cap */
	pthread_join(b.thread, NULL);
	CHECK_STR(order, "B");
	srd_gate_leave_class(&gate, 0);
	pthread_join(a.thread, NULL);
	CHECK_STR(order, "BA");
	srd_gate_destroy(&gate);
}

static void test_without_classes_first_come_first_served(void)
{
	srd_gate_init(&gate, 1, MAX_WAITERS);
	memset(order, 0, sizeof order);
	atomic_store(&n_order, 0);
	CHECK_INT(srd_gate_enter(&gate), SRD_GATE_OK);
	struct waiter w[4];
	for (unsigned i = 0; i < 4; i++) {
		w[i] = (struct waiter){ .cls = 0 };
		pthread_create(&w[i].thread, NULL, wait_turn, &w[i]);
		wait_queued(i + 1);
	}
	/* without classes, class 0 is everyone's */
	CHECK_STR(class_counts(0), "1,4");
	CHECK_STR(class_counts(1), "0,0");
	srd_gate_leave(&gate);
	for (unsigned i = 0; i < 4; i++)
		pthread_join(w[i].thread, NULL);
	CHECK_STR(order, "AAAA");
	srd_gate_destroy(&gate);
}

int main(void)
{
	test_weight_two_gets_twice_the_turns();
	test_equal_weights_take_turns();
	test_heavy_weight_three_to_one();
	test_idle_class_earns_no_credit();
	test_a_class_at_its_cap_is_skipped();
	test_without_classes_first_come_first_served();
	return check_report();
}

#include "supervise.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"

/* After init exits every process of its pid namespace is gone, so the
 * pipes close at once; this only bounds a kernel that is slow to do it. */
#define DRAIN_MS 2000
/* pid 1 exits right after its report; its exit kills and waits for what
 * is left of the namespace, which a loaded host may take a while to do:
 * it gets until the deadline, and at least this long after the report. */
#define EXIT_GRACE_MS 5000
/* A killed sandbox's pid 1 to be gone: past it the supervisor stops
 * waiting (the process is stuck in the kernel) rather than hang. */
#define KILL_WAIT_MS 5000

size_t sr_buf_append(sr_buf *b, const char *data, size_t len, size_t cap)
{
	size_t room = cap > b->len ? cap - b->len : 0;
	size_t take = len < room ? len : room;
	if (take == 0)
		return len;
	if (b->len + take + 1 > b->cap) {
		size_t ncap = b->cap ? b->cap : 4096;
		while (ncap < b->len + take + 1)
			ncap *= 2;
		char *p = realloc(b->data, ncap);
		if (!p)
			return len;
		b->data = p;
		b->cap = ncap;
	}
	memcpy(b->data + b->len, data, take);
	b->len += take;
	b->data[b->len] = '\0';
	return len - take;
}

struct loop {
	const sr_watch *w;
	sr_result *res;
	sr_outcome *oc;
	int ep, timer;
	bool exited, out_open, err_open;
	uint64_t start_ms, deadline_ms;
	uint64_t give_up_ms; /* set when init was killed: how long to wait for it */
};

static void kill_init(struct loop *l)
{
	/* Init is pid 1 of the sandbox: when it dies the kernel kills every
	 * other process of the namespace, setsid and double-forked ones too. */
	syscall(SYS_pidfd_send_signal, l->w->pidfd, SIGKILL, NULL, 0);
	if (!l->give_up_ms)
		l->give_up_ms = sr_now_ms() + KILL_WAIT_MS;
}

/* Whatever pid 1 does or says: every process of the group, pid 1 too.
 * sr_cgroup_kill waits (bounded) until the group is empty. */
static void kill_sandbox(struct loop *l)
{
	kill_init(l);
	if (l->w->cg)
		sr_cgroup_kill(l->w->cg, NULL);
}

/* The wall-clock deadline before pid 1 reported: a timeout while the code
 * runs; if nothing but pid 1 is left, the code ended and pid 1 kept its
 * report back (stopped, patched, stuck). */
static void deadline_passed(struct loop *l)
{
	if (l->w->cg && sr_cgroup_count_procs(l->w->cg) <= 1)
		l->oc->init_fault = SR_INIT_SILENT;
	else
		l->oc->timed_out = true;
	kill_sandbox(l);
}

/* One read of a stream: true when it gave bytes (false at EAGAIN or EOF). */
static bool read_stream(struct loop *l, int fd, bool is_out)
{
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof buf);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return false;
	if (n <= 0) {
		epoll_ctl(l->ep, EPOLL_CTL_DEL, fd, NULL);
		*(is_out ? &l->out_open : &l->err_open) = false;
		return false;
	}
	size_t cap = l->w->output_bytes;
	size_t dropped = sr_buf_append(is_out ? &l->res->out : &l->res->err, buf, (size_t)n, cap);
	sr_buf_append(&l->res->merged, buf, (size_t)n - dropped, 2 * cap);
	if (l->w->on_output && (size_t)n > dropped)
		l->w->on_output(l->w->on_output_arg, is_out ? 1 : 2, buf, (size_t)n - dropped);
	if (dropped && !l->oc->output_exceeded) {
		l->oc->output_exceeded = true;
		l->res->truncated = true;
		kill_init(l);
	}
	return true;
}

/* After "done": what the kernel wrote before it is in the pipes. */
static void drain_streams(struct loop *l)
{
	while (!l->oc->output_exceeded && read_stream(l, l->w->out_fd, true))
		;
	while (!l->oc->output_exceeded && read_stream(l, l->w->err_fd, false))
		;
}

/* A kernel's control message: "D" + int32 status ends the run; "R"
 * (ready) is only news. Its socket closing means the kernel is going. */
static void read_ctl(struct loop *l)
{
	char msg[16];
	ssize_t n = recv(l->w->ctl_fd, msg, sizeof msg, MSG_DONTWAIT);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		epoll_ctl(l->ep, EPOLL_CTL_DEL, l->w->ctl_fd, NULL);
		return;
	}
	if (n == 5 && msg[0] == 'D' && !l->oc->timed_out && !l->oc->output_exceeded) {
		int32_t st;
		memcpy(&st, msg + 1, sizeof st);
		l->oc->done = true;
		l->oc->done_status = st;
		l->oc->duration_ms = sr_now_ms() - l->start_ms;
		drain_streams(l);
		if (l->oc->output_exceeded)
			l->oc->done = false; /* killed: wait for the end as usual */
	}
}

/* The report pipe is non-blocking: false when it has nothing more. */
static bool read_report(struct loop *l)
{
	sr_report r;
	ssize_t n = read(l->w->report_fd, &r, sizeof r);
	if (n == 0)
		epoll_ctl(l->ep, EPOLL_CTL_DEL, l->w->report_fd, NULL);
	if (n <= 0)
		return false;
	if ((size_t)n != sizeof r)
		return true;
	r.what[sizeof r.what - 1] = '\0';
	if (r.kind == SR_REPORT_EXIT) {
		l->oc->have_exit = true;
		l->oc->wstatus = r.wstatus;
	} else if (r.kind == SR_REPORT_FAILED && !l->oc->setup_failed) {
		l->oc->setup_failed = true;
		l->oc->setup_errnum = r.errnum;
		memcpy(l->oc->setup_what, r.what, sizeof r.what);
	}
	return true;
}

static int watch(struct loop *l, int fd, sr_error *err)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
	return epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? sr_fail(err, errno, "epoll_ctl") : 0;
}

static int setup_loop(struct loop *l, sr_error *err)
{
	l->ep = epoll_create1(EPOLL_CLOEXEC);
	l->timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (l->ep < 0 || l->timer < 0)
		return sr_fail(err, errno, "create the supervisor's epoll and timer");
	struct itimerspec its = { .it_value = { .tv_sec = (time_t)(l->w->wall_ms / 1000),
						.tv_nsec =
						    (long)(l->w->wall_ms % 1000) * 1000000 } };
	if (timerfd_settime(l->timer, 0, &its, NULL) < 0)
		return sr_fail(err, errno, "arm the wall-clock timer");
	if (watch(l, l->w->pidfd, err) || watch(l, l->timer, err) || watch(l, l->w->out_fd, err) ||
	    watch(l, l->w->err_fd, err) || watch(l, l->w->report_fd, err))
		return -1;
	return l->w->ctl_fd >= 0 ? watch(l, l->w->ctl_fd, err) : 0;
}

static void dispatch(struct loop *l, int fd)
{
	if (fd == l->w->out_fd || fd == l->w->err_fd) {
		read_stream(l, fd, fd == l->w->out_fd);
	} else if (fd == l->w->report_fd) {
		read_report(l);
		/* Python's status is in: the run is over. Init's own exit (the
		 * namespaces' teardown, an RCU grace period or more) is the
		 * clean-up's business, not the result's. */
		if (l->oc->have_exit && !l->exited) {
			l->exited = true;
			l->oc->duration_ms = sr_now_ms() - l->start_ms;
		}
	} else if (fd == l->w->ctl_fd) {
		read_ctl(l);
	} else if (fd == l->timer) {
		uint64_t ticks;
		if (read(l->timer, &ticks, sizeof ticks) > 0 && !l->exited && !l->give_up_ms)
			deadline_passed(l);
	} else if (fd == l->w->pidfd) {
		if (!l->exited)
			l->oc->duration_ms = sr_now_ms() - l->start_ms;
		l->exited = true;
		epoll_ctl(l->ep, EPOLL_CTL_DEL, fd, NULL);
	}
}

/* Until pid 1 has exited (its pidfd polls readable) or it is until_ms. */
static bool wait_exit(int pidfd, uint64_t until_ms)
{
	for (;;) {
		uint64_t now = sr_now_ms();
		struct pollfd p = { pidfd, POLLIN, 0 };
		int n = poll(&p, 1, now >= until_ms ? 0 : (int)(until_ms - now));
		if (n > 0)
			return true;
		if (n == 0 || errno != EINTR)
			return false;
	}
}

/* The loop is over; pid 1 may still run (it reported, or was killed). It
 * gets until the deadline, and EXIT_GRACE_MS at least, to exit; then the
 * group is killed whatever it reported, and waited for KILL_WAIT_MS. */
static void end_init(struct loop *l)
{
	if (l->oc->done)
		return;
	if (!l->give_up_ms) {
		uint64_t grace = sr_now_ms() + EXIT_GRACE_MS;
		if (wait_exit(l->w->pidfd, l->deadline_ms > grace ? l->deadline_ms : grace))
			goto reap;
		l->oc->init_fault = l->oc->have_exit ? SR_INIT_STAYED : SR_INIT_SILENT;
		kill_sandbox(l);
	}
	wait_exit(l->w->pidfd, l->give_up_ms);
reap:;
	/* A warm sandbox's init is the zygote's child (ECHILD here). */
	siginfo_t si;
	while (waitid((idtype_t)P_PIDFD, (id_t)l->w->pidfd, &si, WEXITED | WNOHANG) < 0 &&
	       errno == EINTR)
		;
}

int sr_supervise(const sr_watch *w, sr_result *res, sr_outcome *oc, sr_error *err)
{
	struct loop l = { .w = w,
			  .res = res,
			  .oc = oc,
			  .ep = -1,
			  .timer = -1,
			  .out_open = true,
			  .err_open = true,
			  .start_ms = sr_now_ms() };
	l.deadline_ms = l.start_ms + w->wall_ms;
	int rc = setup_loop(&l, err);
	uint64_t drain_until = 0;
	while (rc == 0 && !oc->done && (!l.exited || l.out_open || l.err_open)) {
		/* Draining after the end, or waiting for a killed init: bounded. */
		uint64_t now = sr_now_ms(), until = l.give_up_ms;
		if (l.exited) {
			drain_until = drain_until ? drain_until : now + DRAIN_MS;
			until = drain_until;
		}
		if (until && now >= until)
			break;
		int timeout = until ? (int)(until - now) : -1;
		struct epoll_event evs[8];
		int n = epoll_wait(l.ep, evs, 8, timeout);
		if (n < 0 && errno != EINTR)
			rc = sr_fail(err, errno, "epoll_wait");
		for (int i = 0; i < n; i++)
			dispatch(&l, evs[i].data.fd);
	}
	/* The report pipe's last message may still be queued. */
	while (read_report(&l))
		;
	if (rc < 0)
		kill_init(&l);
	end_init(&l);
	if (!oc->duration_ms)
		oc->duration_ms = sr_now_ms() - l.start_ms;
	if (l.ep >= 0)
		close(l.ep);
	if (l.timer >= 0)
		close(l.timer);
	return rc;
}

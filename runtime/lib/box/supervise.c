#include "supervise.h"

#include <errno.h>
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
	uint64_t start_ms;
};

static void kill_init(struct loop *l)
{
	/* Init is pid 1 of the sandbox: when it dies the kernel kills every
	 * other process of the namespace, setsid and double-forked ones too. */
	syscall(SYS_pidfd_send_signal, l->w->pidfd, SIGKILL, NULL, 0);
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
		if (read(l->timer, &ticks, sizeof ticks) > 0 && !l->exited) {
			l->oc->timed_out = true;
			kill_init(l);
		}
	} else if (fd == l->w->pidfd) {
		if (!l->exited)
			l->oc->duration_ms = sr_now_ms() - l->start_ms;
		l->exited = true;
		epoll_ctl(l->ep, EPOLL_CTL_DEL, fd, NULL);
	}
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
	int rc = setup_loop(&l, err);
	uint64_t drain_until = 0;
	while (rc == 0 && !oc->done && (!l.exited || l.out_open || l.err_open)) {
		int timeout = -1;
		if (l.exited) {
			uint64_t now = sr_now_ms();
			drain_until = drain_until ? drain_until : now + DRAIN_MS;
			if (now >= drain_until)
				break;
			timeout = (int)(drain_until - now);
		}
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
	siginfo_t si;
	while (!oc->done && waitid((idtype_t)P_PIDFD, (id_t)w->pidfd, &si, WEXITED) < 0 &&
	       errno == EINTR)
		;
	if (!oc->duration_ms)
		oc->duration_ms = sr_now_ms() - l.start_ms;
	if (l.ep >= 0)
		close(l.ep);
	if (l.timer >= 0)
		close(l.timer);
	return rc;
}

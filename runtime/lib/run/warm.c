/* The warm path, supervisor side: a zygote per pool (a sandbox built the
 * cold way, whose python imported the preload list and then serves spawn
 * requests through runtime/zygote/zygote.c), and a pool of sandboxes it
 * forked, each locked down and waiting for one run.
 *
 * The pool's thread starts the zygote (so the zygote, whose parent-death
 * signal follows that thread, lives as long as the pool) and keeps the
 * pool full; a run takes a ready sandbox, or has one forked on the spot
 * when none is ready, and falls back to a cold run when the zygote is down
 * or the request does not fit it. Protocol: zygote_proto.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "box/box.h"
#include "child/child.h"
#include "run.h"

extern const unsigned char sr_embedded_zygote[];
extern const size_t sr_embedded_zygote_len;
extern const unsigned char sr_embedded_init[];
extern const size_t sr_embedded_init_len;

#define POOL_MAX        64
#define ZYGOTE_START_MS 180000 /* imports under qemu's TCG are slow */
#define SPAWN_MS        20000
#define BACKOFF_MAX_MS  30000
#define ZYGOTE_MIN_MEM  (1ull << 30)

typedef struct wbox {
	sr_box b;          /* pidfd, out/err/report pipes, wd socket, cgroup */
	int ctl;           /* the run's control socket (python's fd 3) */
	char id[40];       /* the cgroup's name, and the run's id */
	struct wbox *next; /* on the pool's list of ended sandboxes */
} wbox;

struct sr_warm {
	sr_policy *p;         /* the pool's policy (a copy) */
	sr_policy *zp;        /* the zygote's: the same, memory at least 1 GiB */
	char *rootfs_dir;     /* NULL: the default */
	int module_fd;        /* the zygote module, a sealed memfd */
	int init_fd;          /* each sandbox's pid 1 program (zygote/init.c), a sealed memfd */
	pthread_mutex_t mu;   /* everything below */
	pthread_cond_t cv;    /* the pool thread's wake-up, and ready/idle changes */
	pthread_mutex_t z_mu; /* one spawn request at a time on the zygote socket */
	pthread_t thread;
	bool stopping, z_up, z_failed;
	unsigned busy; /* runs in flight */
	sr_box zb;     /* the zygote's sandbox */
	sr_result zres;
	sr_run_request zreq;
	uint64_t retry_at_ms, backoff_ms;
	wbox *ready[POOL_MAX];
	unsigned n_ready, spawning;
	wbox *ended; /* runs over, their groups still to remove */
	sr_warm_stats st;
	char skipped[sizeof(((sr_warm_stats *)0)->preload_skipped)]; /* the zygote's "R" */
	bool python;      /* warm.languages has python: the zygote and its thread run */
	sr_node_pool *js; /* warm.languages has javascript: its pool (warm_node.c), else NULL */
	char js_error[SR_ERROR_MSG_MAX]; /* why javascript has no pool, if asked for */
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static sr_policy *copy_policy(const sr_policy *p, sr_error *err)
{
	sr_policy *c = sr_policy_dup(p);
	if (!c)
		sr_fail(err, ENOMEM, "copy the policy");
	return c;
}

/* ---- the zygote ---------------------------------------------------------- */

/* Read and drop what the zygote wrote (import warnings): a full pipe
 * would block it. The last line is kept for errors. */
static void drain(int fd, char *tail, size_t tail_size)
{
	char buf[4096];
	ssize_t n;
	while (fd >= 0 && (n = read(fd, buf, sizeof buf - 1)) > 0) {
		buf[n] = '\0';
		while (n > 0 && buf[n - 1] == '\n')
			buf[--n] = '\0';
		char *line = strrchr(buf, '\n');
		if (tail && n > 0)
			snprintf(tail, tail_size, "%s", line ? line + 1 : buf);
	}
}

/* "Z", the spec's length, the spec, the preload list (each name ends in
 * \x1f), \x1e and the warmup code; fds: the module, the sandboxes' init. */
static int send_start(sr_warm *w, sr_error *err)
{
	const sr_policy *p = w->p;
	size_t strings = strlen(p->workdir) + 1, pre = 0;
	for (size_t i = 0; i < p->n_writable; i++)
		strings += strlen(p->writable[i]) + 1;
	for (size_t i = 0; i < p->warm.n_preload; i++)
		pre += strlen(p->warm.preload[i]) + 1;
	pre += 1 + (p->warm.warmup ? strlen(p->warm.warmup) : 0);
	sr_zspec h = { .magic = SR_ZSPEC_MAGIC,
		       .uid = SR_SANDBOX_UID,
		       .gid = SR_SANDBOX_GID,
		       .n_writable = (uint32_t)p->n_writable,
		       .tmpfs_bytes = p->limits.tmpfs_bytes,
		       .open_files = p->limits.open_files,
		       .bpf_len = w->zb.filter.len,
		       .strings_len = (uint32_t)strings };
	size_t bpf = (size_t)h.bpf_len * sizeof *w->zb.filter.insns;
	uint32_t spec_len = (uint32_t)(sizeof h + bpf + strings);
	if (spec_len > SR_ZSPEC_MAX)
		return sr_fail(err, E2BIG, "the zygote's spec is %u bytes", spec_len);
	char *msg = malloc(5 + spec_len + pre + 1), *at = msg;
	if (!msg)
		return sr_fail(err, ENOMEM, "the zygote's spec");
	*at++ = 'Z';
	memcpy(at, &spec_len, 4), at += 4;
	memcpy(at, &h, sizeof h), at += sizeof h;
	memcpy(at, w->zb.filter.insns, bpf), at += bpf;
	at = stpcpy(at, p->workdir) + 1;
	for (size_t i = 0; i < p->n_writable; i++)
		at = stpcpy(at, p->writable[i]) + 1;
	for (size_t i = 0; i < p->warm.n_preload; i++)
		at = stpcpy(stpcpy(at, p->warm.preload[i]), "\x1f");
	at = stpcpy(stpcpy(at, "\x1e"), p->warm.warmup ? p->warm.warmup : "");
	int fds[2] = { w->module_fd, w->init_fd };
	ssize_t n = sr_send_fds(w->zb.ctl[0], msg, (size_t)(at - msg), fds, 2, 0);
	free(msg);
	return n < 0 ? sr_fail(err, errno, "send the zygote its spec") : 0;
}

static bool stop_asked(sr_warm *w)
{
	pthread_mutex_lock(&w->mu);
	bool stop = w->stopping;
	pthread_mutex_unlock(&w->mu);
	return stop;
}

/* Wait for the zygote's "R" (or "E", or its end), or for sr_warm_stop: a
 * daemon that stops while its zygote imports does not wait for that. */
static int await_zygote(sr_warm *w, sr_error *err)
{
	char tail[200] = "";
	uint64_t until = sr_now_ms() + ZYGOTE_START_MS;
	for (;;) {
		struct pollfd pf[4] = { { w->zb.ctl[0], POLLIN, 0 },
					{ w->zb.pidfd, POLLIN, 0 },
					{ w->zb.out[0], POLLIN, 0 },
					{ w->zb.err[0], POLLIN, 0 } };
		uint64_t now = sr_now_ms();
		if (now >= until)
			return sr_fail(err, ETIMEDOUT, "the zygote did not start in %d s",
				       ZYGOTE_START_MS / 1000);
		if (stop_asked(w))
			return sr_refuse(err, ECANCELED, "the pool is stopping");
		if (poll(pf, 4, until - now < 50 ? (int)(until - now) : 50) < 0 && errno != EINTR)
			return sr_fail(err, errno, "poll the zygote");
		drain(w->zb.out[0], tail, sizeof tail);
		drain(w->zb.err[0], tail, sizeof tail);
		if (pf[0].revents & POLLIN) {
			char msg[4096];
			ssize_t n = recv(w->zb.ctl[0], msg, sizeof msg - 1, 0);
			msg[n > 0 ? n : 0] = '\0';
			if (n > 0 && msg[0] == 'R') {
				/* "R", then the preload names skipped, \x1f between */
				for (char *c = msg + 1; *c; c++)
					if (*c == '\x1f')
						*c = ',';
				snprintf(w->skipped, sizeof w->skipped, "%s", msg + 1);
				return 0;
			}
			if (n > 0 && msg[0] == 'E')
				return sr_refuse(err, ENOEXEC,
						 "the zygote's preload or warmup failed: %s",
						 msg + 1);
		}
		if (pf[0].revents & (POLLHUP | POLLERR) || pf[1].revents) {
			sr_report r;
			if (read(w->zb.report[0], &r, sizeof r) == (ssize_t)sizeof r &&
			    r.kind == SR_REPORT_FAILED)
				return sr_fail(err, r.errnum, "the zygote's sandbox: %s", r.what);
			return sr_refuse(err, ECHILD, "the zygote ended while starting%s%s",
					 tail[0] ? ": " : "", tail);
		}
	}
}

static void zygote_down(sr_warm *w)
{
	sr_box_cleanup(&w->zb);
	close_fd(&w->zb.wd[0]);
	sr_result_free(&w->zres);
}

static int zygote_up(sr_warm *w, sr_error *err)
{
	w->zreq =
	    (sr_run_request){ .policy = w->zp, .rootfs_dir = w->rootfs_dir, .no_check = true };
	sr_box_init_result(&w->zres, w->zp);
	sr_box_init(&w->zb, &w->zreq, &w->zres);
	w->zb.kernel = true; /* a control socket on fd 3, no code */
	w->zb.zygote = true;
	/* Its python inherits the signal mask of this thread at clone. */
	sigset_t none, old;
	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, &old);
	int rc = sr_box_prepare(&w->zb, err) || sr_box_start(&w->zb, err);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc || send_start(w, err) || await_zygote(w, err)) {
		zygote_down(w);
		return -1;
	}
	return 0;
}

/* ---- spawning a sandbox ---------------------------------------------------- */

static void wbox_free(wbox *x)
{
	if (!x)
		return;
	sr_box_cleanup(&x->b);
	close_fd(&x->b.wd[0]);
	close_fd(&x->ctl);
	free(x);
}

/* "S" with the child's ends; the reply is "P" and a pidfd, or "F". */
static int ask_zygote(sr_warm *w, wbox *x, int ctl_child, sr_error *err)
{
	int fds[SR_ZSPAWN_FDS + SR_CGROUP_MAX_FDS] = { x->b.report[1], x->b.out[1], x->b.err[1],
						       ctl_child, x->b.wd[1] };
	int n = SR_ZSPAWN_FDS;
	for (int i = 0; i < x->b.n_join_fds; i++)
		fds[n++] = x->b.join_fds[i];
	char req[2] = { 'S', (char)x->b.n_join_fds };
	union {
		char b[CMSG_SPACE(sizeof fds)];
		struct cmsghdr align;
	} u = { 0 };
	struct iovec iov = { .iov_base = req, .iov_len = 2 };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.b,
			     .msg_controllen = CMSG_SPACE(n * sizeof(int)) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	pthread_mutex_lock(&w->z_mu);
	int zctl = w->zb.ctl[0], rc = 0;
	if (sendmsg(zctl, &mh, MSG_NOSIGNAL) != 2) {
		rc = sr_fail(err, errno, "ask the zygote for a sandbox");
	} else {
		struct pollfd pf = { zctl, POLLIN, 0 };
		char msg[256] = "";
		int r = poll(&pf, 1, SPAWN_MS);
		ssize_t got = r > 0 ? recv(zctl, msg, sizeof msg - 1, MSG_PEEK) : -1;
		if (got >= 5 && msg[0] == 'P') {
			x->b.pidfd = sr_recv_fd(zctl, 0);
			if (x->b.pidfd < 0)
				rc = sr_fail(err, EPROTO, "the zygote sent no pidfd");
		} else {
			if (got > 0)
				recv(zctl, msg, sizeof msg - 1, 0);
			int32_t e = ETIMEDOUT;
			if (got >= 5)
				memcpy(&e, msg + 1, 4);
			msg[got > 5 ? got : 5] = '\0';
			rc = sr_fail(err,
				     got >= 5   ? e
				     : got == 0 ? EPIPE
						: ETIMEDOUT,
				     "the zygote could not fork a sandbox%s%s", got > 5 ? ": " : "",
				     got > 5 ? msg + 5 : "");
		}
	}
	pthread_mutex_unlock(&w->z_mu);
	return rc;
}

/* Python's "R": set up and locked down, waiting for the run. A report
 * instead says which step failed. */
static int await_ready(wbox *x, sr_error *err)
{
	uint64_t until = sr_now_ms() + SPAWN_MS;
	for (;;) {
		struct pollfd pf[2] = { { x->ctl, POLLIN, 0 }, { x->b.report[0], POLLIN, 0 } };
		uint64_t now = sr_now_ms();
		if (now >= until)
			return sr_fail(err, ETIMEDOUT, "a warm sandbox did not get ready");
		if (poll(pf, 2, (int)(until - now)) < 0 && errno != EINTR)
			return sr_fail(err, errno, "poll a warm sandbox");
		char c;
		if ((pf[0].revents & POLLIN) && recv(x->ctl, &c, 1, 0) == 1 && c == 'R')
			return 0;
		if (pf[1].revents || (pf[0].revents & (POLLHUP | POLLERR))) {
			sr_report r;
			if (read(x->b.report[0], &r, sizeof r) == (ssize_t)sizeof r &&
			    r.kind == SR_REPORT_FAILED)
				return sr_fail(err, r.errnum, "warm sandbox set-up failed: %s",
					       r.what);
			return sr_fail(err, ECHILD, "a warm sandbox ended before its run");
		}
	}
}

static wbox *spawn(sr_warm *w, sr_error *err)
{
	wbox *x = calloc(1, sizeof *x);
	if (!x) {
		sr_fail(err, ENOMEM, "a warm sandbox");
		return NULL;
	}
	sr_box_init(&x->b, NULL, NULL);
	x->b.p = w->p;
	x->ctl = -1;
	int ctl[2] = { -1, -1 };
	char hex[17];
	if (sr_random_hex(hex, 8) < 0) {
		sr_fail(err, errno, "a sandbox id");
		goto fail;
	}
	snprintf(x->id, sizeof x->id, "sr-%s", hex);
	if (sr_cgroup_create(NULL, x->id, &w->p->limits, &x->b.cg, err) ||
	    (x->b.n_join_fds = sr_cgroup_open_join_fds(x->b.cg, x->b.join_fds, true, err)) < 0)
		goto fail;
	if (pipe2(x->b.report, O_CLOEXEC) < 0 || pipe2(x->b.out, O_CLOEXEC) < 0 ||
	    pipe2(x->b.err, O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, x->b.wd) < 0 ||
	    fcntl(x->b.report[0], F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(x->b.out[0], F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(x->b.err[0], F_SETFL, O_NONBLOCK) < 0) {
		sr_fail(err, errno, "create a warm sandbox's pipes");
		goto fail;
	}
	x->ctl = ctl[0];
	int rc = ask_zygote(w, x, ctl[1], err);
	close_fd(&ctl[1]);
	int *child_ends[] = { &x->b.report[1], &x->b.out[1], &x->b.err[1], &x->b.wd[1] };
	for (size_t i = 0; i < 4; i++)
		close_fd(child_ends[i]);
	for (int i = 0; i < x->b.n_join_fds; i++)
		close_fd(&x->b.join_fds[i]);
	x->b.n_join_fds = 0;
	if (rc || sr_net_setup(x->b.pidfd, err) || await_ready(x, err))
		goto fail;
	return x;
fail:
	close_fd(&ctl[1]);
	wbox_free(x);
	return NULL;
}

/* ---- the pool's thread ------------------------------------------------------ */

static bool zygote_alive(sr_warm *w)
{
	struct pollfd pf = { w->zb.pidfd, POLLIN, 0 };
	drain(w->zb.out[0], NULL, 0);
	drain(w->zb.err[0], NULL, 0);
	return w->zb.pidfd >= 0 && poll(&pf, 1, 0) == 0;
}

/* The sandboxes whose runs ended: killed, their groups removed. Their
 * namespaces' teardown (an RCU grace period or more) happens here, off
 * the runs' path. Called and returns with w->mu held. */
static void bury(sr_warm *w)
{
	while (w->ended) {
		wbox *x = w->ended;
		w->ended = x->next;
		pthread_mutex_unlock(&w->mu);
		wbox_free(x);
		pthread_mutex_lock(&w->mu);
	}
}

/* refill "idle": while a run is in flight and at least two sandboxes are
 * ready (one for the next request, one to spare), the pool's own work (a
 * teardown, a fork: milliseconds of CPU) waits, SR_WARM_DEFER_MS at most,
 * so that on a machine with few cores it does not take one from the run.
 * With fewer ready it goes on at once: runs back to back would otherwise
 * drain the pool and fork their sandboxes on the spot. *since: when the
 * wait began, 0 if none. With w->mu held; true: waited, look again. */
static bool defer(sr_warm *w, uint64_t *since)
{
	if (w->p->warm.refill_eager || !w->busy || w->n_ready < 2 || !w->z_up) {
		*since = 0;
		return false;
	}
	uint64_t now = sr_now_ms();
	if (!*since)
		*since = now;
	if (now - *since >= SR_WARM_DEFER_MS) {
		*since = 0; /* one round of work, then wait again */
		return false;
	}
	sr_cond_wait_ms(&w->cv, &w->mu, SR_WARM_DEFER_MS - (now - *since));
	return true;
}

static void *pool_thread(void *arg)
{
	sr_warm *w = arg;
	uint64_t deferred = 0;
	pthread_mutex_lock(&w->mu);
	while (!w->stopping) {
		if (defer(w, &deferred))
			continue;
		bury(w);
		if (!w->z_up) {
			uint64_t now = sr_now_ms();
			if (now < w->retry_at_ms) {
				sr_cond_wait_ms(&w->cv, &w->mu, w->retry_at_ms - now);
				continue;
			}
			pthread_mutex_unlock(&w->mu);
			sr_error err = { 0 };
			/* A spawn that saw the old zygote up may still come. */
			pthread_mutex_lock(&w->z_mu);
			int rc = zygote_up(w, &err);
			pthread_mutex_unlock(&w->z_mu);
			pthread_mutex_lock(&w->mu);
			w->st.zygote_starts++;
			if (rc) {
				snprintf(w->st.last_error, sizeof w->st.last_error, "%s", err.msg);
				w->z_failed = true;
				w->backoff_ms = w->backoff_ms ? w->backoff_ms * 2 : 1000;
				if (w->backoff_ms > BACKOFF_MAX_MS)
					w->backoff_ms = BACKOFF_MAX_MS;
				w->retry_at_ms = sr_now_ms() + w->backoff_ms;
			} else {
				snprintf(w->st.preload_skipped, sizeof w->st.preload_skipped, "%s",
					 w->skipped);
				w->z_up = true;
				w->z_failed = false;
				w->backoff_ms = 0;
			}
			pthread_cond_broadcast(&w->cv);
			continue;
		}
		if (!zygote_alive(w)) {
			/* Runs in flight ended with it (their namespaces are
			 * nested in its); the ready ones are gone too. */
			snprintf(w->st.last_error, sizeof w->st.last_error,
				 "the zygote ended; restarting it");
			w->z_up = false;
			while (w->n_ready)
				wbox_free(w->ready[--w->n_ready]);
			pthread_mutex_unlock(&w->mu);
			pthread_mutex_lock(&w->z_mu); /* no spawn is using its socket */
			zygote_down(w);
			pthread_mutex_unlock(&w->z_mu);
			pthread_mutex_lock(&w->mu);
			continue;
		}
		if (w->n_ready + w->spawning < w->p->warm.pool_size) {
			w->spawning++;
			pthread_mutex_unlock(&w->mu);
			sr_error err = { 0 };
			wbox *x = spawn(w, &err);
			pthread_mutex_lock(&w->mu);
			w->spawning--;
			if (x) {
				w->st.spawned++;
				w->ready[w->n_ready++] = x;
				pthread_cond_broadcast(&w->cv);
			} else {
				w->st.spawn_failures++;
				snprintf(w->st.last_error, sizeof w->st.last_error, "%s", err.msg);
				sr_cond_wait_ms(&w->cv, &w->mu,
						200); /* not a busy loop on a persistent failure */
			}
			continue;
		}
		sr_cond_wait_ms(&w->cv, &w->mu, 250);
	}
	while (w->n_ready)
		wbox_free(w->ready[--w->n_ready]);
	/* Runs in flight live in the zygote's namespaces: let them end. */
	while (w->busy)
		pthread_cond_wait(&w->cv, &w->mu);
	bury(w);
	bool up = w->z_up;
	w->z_up = false;
	pthread_mutex_unlock(&w->mu);
	if (up)
		zygote_down(w);
	return NULL;
}

/* ---- sizing from the machine ----------------------------------------------- */

static uint64_t mem_available(void)
{
	char buf[4096];
	if (sr_read_file("/proc/meminfo", buf, sizeof buf) < 0)
		return UINT64_MAX;
	const char *at = strstr(buf, "MemAvailable:");
	return at ? strtoull(at + strlen("MemAvailable:"), NULL, 10) * 1024 : UINT64_MAX;
}

/* The least headroom (limit less usage) of our memory group and its
 * ancestors up to the hierarchy's root. */
static uint64_t cgroup_headroom(void)
{
	sr_cgroup_mode mode = sr_cgroup_detect();
	bool v2 = mode == SR_CGROUP_V2;
	char *dir = sr_cgroup_own_dir(mode, "memory");
	uint64_t room = UINT64_MAX;
	for (char *slash; dir && (slash = strrchr(dir, '/')) && slash - dir > 14; *slash = '\0') {
		char path[4096];
		uint64_t limit, used;
		snprintf(path, sizeof path, "%s/%s", dir,
			 v2 ? "memory.max" : "memory.limit_in_bytes");
		if (sr_read_u64(path, &limit) < 0)
			continue; /* "max", or not a memory group */
		snprintf(path, sizeof path, "%s/%s", dir,
			 v2 ? "memory.current" : "memory.usage_in_bytes");
		if (sr_read_u64(path, &used) < 0)
			used = 0;
		if (limit - (used < limit ? used : limit) < room)
			room = limit - (used < limit ? used : limit);
	}
	free(dir);
	return room;
}

unsigned sr_warm_machine_fit(char *why, size_t why_size)
{
	uint64_t mem = mem_available(), room = cgroup_headroom();
	if (room < mem)
		mem = room;
	if (mem < SR_WARM_MIN_MEMORY) {
		snprintf(why, why_size,
			 "%llu MiB of memory available to this process (MemAvailable, its "
			 "cgroup's limit); a zygote and its pool want %llu MiB: runs go cold",
			 (unsigned long long)(mem >> 20),
			 (unsigned long long)(SR_WARM_MIN_MEMORY >> 20));
		return 0;
	}
	cpu_set_t set;
	long cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
								 : sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t by_mem = (mem - SR_WARM_MIN_MEMORY / 2) / (64ull << 20);
	uint64_t pool = cores > 2 ? (uint64_t)cores : 2;
	if (pool > by_mem)
		pool = by_mem;
	if (pool > 16)
		pool = 16;
	return pool ? (unsigned)pool : 1;
}

/* ---- the API ------------------------------------------------------------------- */

/* The JavaScript pool next to the zygote's: with pool_size "auto" and
 * both languages, half the machine's share each (a ready Node sandbox
 * holds far more memory than a forked Python one: docs/languages.md). A
 * pool that cannot start (the profile has no node) leaves JavaScript
 * cold, and says why in the stats. */
static int start_js(sr_warm *w, unsigned pool_size, sr_error *err)
{
	unsigned size = pool_size;
	if (w->p->warm.pool_size_auto && w->python)
		size = (pool_size + 1) / 2;
	if (sr_node_pool_start(w->p, w->rootfs_dir, size, &w->js, err) == 0)
		return 0;
	snprintf(w->js_error, sizeof w->js_error, "%s", err->msg);
	return -1;
}

int sr_warm_start(const sr_policy *p, const char *rootfs_dir, sr_warm **out, sr_error *err)
{
	*out = NULL;
	unsigned pool_size = p->warm.pool_size;
	if (p->warm.pool_size_auto) {
		char why[SR_ERROR_MSG_MAX];
		if (!(pool_size = sr_warm_machine_fit(why, sizeof why)))
			return sr_refuse(err, ENOMEM, "%s", why);
	}
	if (pool_size > POOL_MAX)
		return sr_refuse(err, EINVAL, "warm.pool_size %u is over %d", p->warm.pool_size,
				 POOL_MAX);
	sr_warm *w = calloc(1, sizeof *w);
	if (!w)
		return sr_fail(err, ENOMEM, "the warm pool");
	w->module_fd = w->init_fd = -1;
	pthread_mutex_init(&w->mu, NULL);
	pthread_mutex_init(&w->z_mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	sr_box_init(&w->zb, NULL, NULL);
	if (!(w->p = copy_policy(p, err)) || !(w->zp = copy_policy(p, err)))
		goto fail;
	w->p->warm.pool_size = w->zp->warm.pool_size = pool_size;
	if (w->zp->limits.memory_bytes < ZYGOTE_MIN_MEM)
		w->zp->limits.memory_bytes = ZYGOTE_MIN_MEM;
	if (rootfs_dir && !(w->rootfs_dir = strdup(rootfs_dir))) {
		sr_fail(err, ENOMEM, "the warm pool");
		goto fail;
	}
	w->python = p->warm.languages & (1u << SR_LANG_PYTHON);
	if ((p->warm.languages & (1u << SR_LANG_JAVASCRIPT)) && start_js(w, pool_size, err) &&
	    !w->python)
		goto fail; /* nothing would be warm */
	if (!w->python) {
		*out = w;
		return 0;
	}
	if ((w->module_fd = sr_sealed_memfd("saferun-zygote", sr_embedded_zygote,
					    sr_embedded_zygote_len)) < 0) {
		sr_fail(err, errno, "the zygote module's memfd");
		goto fail;
	}
	if ((w->init_fd =
		 sr_exec_only_memfd("saferun-init", sr_embedded_init, sr_embedded_init_len)) < 0) {
		sr_fail(err, errno, "the sandboxes' init's memfd");
		goto fail;
	}
	w->st.pool_size = pool_size;
	int rc = pthread_create(&w->thread, NULL, pool_thread, w);
	if (rc) {
		sr_fail(err, rc, "start the warm pool's thread");
		goto fail;
	}
	*out = w;
	return 0;
fail:
	sr_node_pool_stop(w->js);
	close_fd(&w->module_fd);
	close_fd(&w->init_fd);
	sr_policy_free(w->p);
	sr_policy_free(w->zp);
	free(w->rootfs_dir);
	free(w);
	return -1;
}

int sr_warm_wait_ready(sr_warm *w, uint64_t timeout_ms, sr_error *err)
{
	uint64_t until = sr_now_ms() + timeout_ms;
	if (w->js && sr_node_pool_wait_ready(w->js, until, err))
		return -1;
	if (!w->python)
		return 0;
	pthread_mutex_lock(&w->mu);
	while (!(w->z_up && w->n_ready >= w->p->warm.pool_size) && !w->z_failed &&
	       sr_now_ms() < until)
		sr_cond_wait_ms(&w->cv, &w->mu, until - sr_now_ms());
	int rc = 0;
	if (w->z_failed)
		rc = sr_fail(err, EAGAIN, "the warm path did not start: %s", w->st.last_error);
	else if (!w->z_up || w->n_ready < w->p->warm.pool_size)
		rc = sr_fail(err, ETIMEDOUT, "the warm pool was not ready in %llu ms%s%s",
			     (unsigned long long)timeout_ms, w->st.last_error[0] ? ": " : "",
			     w->st.last_error);
	pthread_mutex_unlock(&w->mu);
	return rc;
}

void sr_warm_get_stats(sr_warm *w, sr_warm_stats *st)
{
	pthread_mutex_lock(&w->mu);
	*st = w->st;
	st->zygote_up = w->z_up;
	st->ready = w->n_ready;
	pthread_mutex_unlock(&w->mu);
	if (w->js)
		sr_node_pool_get_stats(w->js, &st->js);
	else if (w->js_error[0])
		snprintf(st->js.last_error, sizeof st->js.last_error, "%s", w->js_error);
}

void sr_warm_stop(sr_warm *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stopping = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	if (w->python)
		pthread_join(w->thread, NULL);
	sr_node_pool_stop(w->js);
	close_fd(&w->module_fd);
	close_fd(&w->init_fd);
	sr_policy_free(w->p);
	sr_policy_free(w->zp);
	free(w->rootfs_dir);
	pthread_mutex_destroy(&w->mu);
	pthread_mutex_destroy(&w->z_mu);
	pthread_cond_destroy(&w->cv);
	free(w);
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool same_strv(char *const *a, size_t na, char *const *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (!same_str(a[i], b[i]))
			return false;
	return true;
}

static bool same_seccomp(const sr_seccomp_policy *a, const sr_seccomp_policy *b)
{
	if (memcmp(&a->default_action, &b->default_action, sizeof a->default_action) != 0 ||
	    a->n_rules != b->n_rules)
		return false;
	for (size_t i = 0; i < a->n_rules; i++) {
		const sr_seccomp_rule *x = &a->rules[i], *y = &b->rules[i];
		if (!same_strv(x->names, x->n_names, y->names, y->n_names) ||
		    memcmp(&x->action, &y->action, sizeof x->action) != 0 ||
		    x->n_args != y->n_args || memcmp(x->args, y->args, x->n_args * sizeof *x->args))
			return false;
	}
	return true;
}

/* What a forked sandbox has for good: a request must match it. */
static const char *unfit(const sr_warm *w, const sr_run_request *req)
{
	const sr_policy *a = w->p, *b = req->policy;
	if (!same_str(w->rootfs_dir, req->rootfs_dir) || !same_str(a->profile, b->profile))
		return "another rootfs or profile";
	if (!same_str(a->workdir, b->workdir) ||
	    !same_strv(a->writable, a->n_writable, b->writable, b->n_writable))
		return "other writable dirs";
	if (a->limits.tmpfs_bytes != b->limits.tmpfs_bytes ||
	    a->limits.open_files != b->limits.open_files)
		return "another tmpfs size or open-files limit";
	/* A warm sandbox has only lo; its veth and rules would have to be
	 * built per run anyway (docs/network.md). */
	if (b->net_mode == SR_NET_EGRESS)
		return "an egress network (cold path only)";
	if (a->net_mode != b->net_mode)
		return "another network mode";
	if (!same_seccomp(&a->seccomp, &b->seccomp))
		return "another seccomp policy";
	if (req->n_requirements || req->deps_layer)
		return "requirements (a dependency layer is mounted at set-up)";
	if (req->language == SR_LANG_JAVASCRIPT && !w->js)
		return w->js_error[0] ? "javascript has no pool (see the warm pool's stats)"
				      : "javascript is not in the policy's warm.languages";
	if (req->language == SR_LANG_BASH)
		return "bash (the warm path is python's and javascript's)";
	if (req->language == SR_LANG_PYTHON && !w->python)
		return "python is not in the policy's warm.languages";
	return NULL;
}

static int cold(sr_warm *w, const sr_run_request *req, sr_result *res, const char *why,
		sr_error *err)
{
	pthread_mutex_lock(&w->mu);
	bool fallback = w->p->warm.fallback_cold;
	if (fallback)
		w->st.cold_runs++;
	pthread_mutex_unlock(&w->mu);
	if (!fallback)
		return sr_refuse(err, EAGAIN, "the warm path cannot take this run: %s", why);
	return sr_box_run_cold(req, res, err);
}

/* The code, the environment, the guard and the files in one sealed memfd. */
static int run_payload(const sr_run_request *req, const char *guard, sr_zrun *h, sr_error *err)
{
	const sr_policy *p = req->policy;
	int fd = memfd_create("saferun-run", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return sr_fail(err, errno, "memfd for the run");
	*h = (sr_zrun){ .code_len = (uint32_t)req->code_size,
			.guard_len = guard ? (uint32_t)strlen(guard) : 0,
			.n_files = (uint32_t)req->n_files };
	int bad = sr_write_all(fd, req->code, req->code_size);
	for (size_t i = 0; i < p->n_env; i++) {
		size_t n = strlen(p->env[i]) + 1;
		bad |= sr_write_all(fd, p->env[i], n);
		h->env_len += (uint32_t)n;
	}
	if (guard)
		bad |= sr_write_all(fd, guard, h->guard_len);
	for (size_t i = 0; i < req->n_files; i++) {
		const sr_file *f = &req->files[i];
		uint32_t lens[2] = { (uint32_t)strlen(f->name), (uint32_t)f->size };
		bad |= sr_write_all(fd, lens, sizeof lens) | sr_write_all(fd, f->name, lens[0]) |
		       sr_write_all(fd, f->data, f->size);
		h->files_len += (uint32_t)(sizeof lens + lens[0] + f->size);
	}
	if (bad || lseek(fd, 0, SEEK_SET) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		int e = errno;
		close(fd);
		return sr_fail(err, e, "write the run's memfd");
	}
	return fd;
}

/* Hand the run to x: its limits, then "W" with the payload and stdin.
 * await_go: its python gets ready and waits for go() before the code. */
static int hand_over(wbox *x, const sr_warm *w, const sr_run_request *req, bool await_go,
		     sr_error *err)
{
	const sr_limits *want = &req->policy->limits, *have = &w->p->limits;
	if (req->cgroup_share) {
		/* The run's share (its tenant's CPU weight): the sandbox was
		 * made before anyone's run was known. */
		if (sr_cgroup_move_to_share(&x->b.cg, req->cgroup_share, x->id, want, err))
			return -1;
	} else if ((want->memory_bytes != have->memory_bytes ||
		    want->swap_bytes != have->swap_bytes || want->cpu_millis != have->cpu_millis ||
		    want->pids != have->pids) &&
		   sr_cgroup_set_limits(x->b.cg, want, err)) {
		return -1;
	}
	char *guard = NULL;
	if (!req->no_check && req->policy->checker.enabled && !(guard = sr_box_runner_guard(req)))
		return sr_fail(err, ENOMEM, "the runner's settings");
	sr_zrun h;
	int fds[2] = { run_payload(req, guard, &h, err), -1 };
	free(guard);
	h.flags = await_go ? SR_ZRUN_AWAIT_GO : 0;
	if (fds[0] < 0 || (fds[1] = sr_box_stdin_fd(req, err)) < 0) {
		close_fd(&fds[0]);
		return -1;
	}
	char msg[1 + sizeof h];
	msg[0] = 'W';
	memcpy(msg + 1, &h, sizeof h);
	union {
		char b[CMSG_SPACE(sizeof fds)];
		struct cmsghdr align;
	} u = { 0 };
	struct iovec iov = { .iov_base = msg, .iov_len = sizeof msg };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof u.b
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof fds);
	memcpy(CMSG_DATA(c), fds, sizeof fds);
	ssize_t n = sendmsg(x->ctl, &mh, MSG_NOSIGNAL);
	int e = errno;
	close(fds[0]);
	close(fds[1]);
	/* Python says "D" and its status on it before it exits (the kernel
	 * protocol): sr_box_watch ends the run there. */
	x->b.ctl[0] = x->ctl;
	x->ctl = -1;
	return n == (ssize_t)sizeof msg ? 0 : sr_fail(err, e, "send the run to its sandbox");
}

static int go(wbox *x, sr_error *err)
{
	if (send(x->b.ctl[0], "G", 1, MSG_NOSIGNAL) != 1)
		return sr_fail(err, errno, "start the run in its sandbox");
	return 0;
}

/* x's run is over (or never started): kill what is left, let the pool
 * thread remove it. */
static void retire(sr_warm *w, wbox *x, bool ran)
{
	syscall(SYS_pidfd_send_signal, x->b.pidfd, SIGKILL, NULL, 0);
	pthread_mutex_lock(&w->mu);
	x->next = w->ended;
	w->ended = x;
	w->busy--;
	if (ran)
		w->st.warm_runs++;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* Still waiting for its run: its python has not gone (killed, or its
 * zygote died and took it along). */
static bool waiting(const wbox *x)
{
	struct pollfd pf[2] = { { x->b.pidfd, POLLIN, 0 }, { x->ctl, 0, 0 } };
	return poll(pf, 2, 0) == 0;
}

/* A ready sandbox, or one forked now; NULL when the zygote is down. */
static wbox *take(sr_warm *w, sr_error *err)
{
	pthread_mutex_lock(&w->mu);
	wbox *x = NULL;
	while (!x && w->n_ready) {
		x = w->ready[--w->n_ready];
		if (!waiting(x)) {
			x->next = w->ended; /* the pool thread buries it */
			w->ended = x;
			x = NULL;
		}
	}
	bool up = w->z_up;
	if (x || up)
		w->busy++;
	pthread_cond_broadcast(&w->cv); /* refill */
	pthread_mutex_unlock(&w->mu);
	if (x || !up) {
		if (!x) {
			pthread_mutex_lock(&w->mu);
			sr_refuse(err, EAGAIN, "the zygote is not running%s%s",
				  w->st.last_error[0] ? ": " : "", w->st.last_error);
			pthread_mutex_unlock(&w->mu);
		}
		return x;
	}
	x = spawn(w, err);
	pthread_mutex_lock(&w->mu);
	if (x) {
		w->st.spawned++;
	} else {
		w->busy--;
		w->st.spawn_failures++;
		snprintf(w->st.last_error, sizeof w->st.last_error, "%s", err->msg);
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return x;
}

/* The cold path's way: the checker first, then a cold sandbox. */
static int vet_then_cold(sr_warm *w, const sr_run_request *req, sr_result *res, const char *why,
			 sr_error *err)
{
	if (sr_box_vet(req, res) < 0)
		return 0;
	return cold(w, req, res, why, err);
}

/* On the JavaScript pool: a ready sandbox, or the cold path. */
static int js_run(sr_warm *w, const sr_run_request *req, sr_result *res, sr_error *err)
{
	const sr_language_info *lang = sr_language_info_of(req->language);
	char why[SR_ERROR_MSG_MAX];
	if (sr_mounts_check_files_for(req->files, req->n_files, lang->code_file, err))
		return -1;
	if (sr_node_pool_run(w->js, req, res, why, sizeof why) == 0)
		return 0;
	sr_box_init_result(res, req->policy);
	return cold(w, req, res, why, err);
}

static int warm_run(sr_warm *w, const sr_run_request *req, sr_result *res, sr_error *err)
{
	if (sr_box_check_request(req, err))
		return -1;
	sr_box_init_result(res, req->policy);
	const char *why = unfit(w, req);
	if (why)
		return vet_then_cold(w, req, res, why, err);
	if (req->language == SR_LANG_JAVASCRIPT)
		return js_run(w, req, res, err);
	if (sr_mounts_check_files(req->files, req->n_files, err))
		return -1;
	/* The checker vets the code while a sandbox is taken and gets ready
	 * (it writes the files and installs the guard); the code starts at
	 * go(), never before. */
	sr_check_job *job;
	if (sr_box_vet_start(req, res, &job) < 0)
		return 0;
	bool vet = job != NULL;
	sr_error terr = { 0 };
	wbox *x = take(w, &terr);
	if (!x)
		return sr_box_vet_finish(job, res) < 0 ? 0 : cold(w, req, res, terr.msg, err);
	snprintf(res->id, sizeof res->id, "%s", x->id);
	snprintf(res->cgroup_mode, sizeof res->cgroup_mode, "%s",
		 sr_cgroup_mode_name(sr_cgroup_get_mode(x->b.cg)));
	res->warm = true;
	x->b.res = res;
	x->b.p = req->policy;
	sr_error inner = { 0 };
	sr_outcome oc;
	const sr_limits *lim = &req->policy->limits;
	if (hand_over(x, w, req, vet, &inner)) {
		/* Nothing of the run started (its sandbox went, or a memfd
		 * failed): the run is the cold path's, if the code passed. */
		retire(w, x, false);
		if (sr_box_vet_finish(job, res) < 0)
			return 0;
		res->warm = false;
		sr_box_init_result(res, req->policy);
		return cold(w, req, res, inner.msg, err);
	}
	if (sr_box_vet_finish(job, res) < 0) {
		retire(w, x, false); /* rejected: its code never ran */
		return 0;
	}
	if (vet && go(x, &inner)) {
		/* Its python went while waiting: nothing ran, and the checker
		 * has passed the code: run it cold. */
		retire(w, x, false);
		res->warm = false;
		sr_box_init_result(res, req->policy);
		return cold(w, req, res, inner.msg, err);
	}
	x->b.on_output = req->on_output;
	x->b.on_output_arg = req->on_output_arg;
	int rc = sr_box_watch(&x->b, lim->wall_ms, lim->output_bytes, NULL, &oc, &inner);
	if (rc) {
		res->status = SR_STATUS_INTERNAL_ERROR;
		snprintf(res->message, sizeof res->message, "internal_error: %s", inner.msg);
	}
	/* Nothing of the run goes on while its artifacts are read; the rest
	 * of the clean-up is the pool thread's (bury). */
	syscall(SYS_pidfd_send_signal, x->b.pidfd, SIGKILL, NULL, 0);
	sr_box_collect_artifacts(&x->b);
	retire(w, x, true);
	return 0;
}

int sr_warm_run(sr_warm *w, const sr_run_request *req, sr_result *res, sr_error *err)
{
	int rc = warm_run(w, req, res, err);
	if (rc == 0)
		sr_box_syntax_error(req, res); /* a cold compile: rare, and nothing runs */
	return rc;
}

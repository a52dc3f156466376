/* The warm path for JavaScript: a pool of single-use sandboxes, each built
 * and locked down the cold way (sandbox.c: namespaces, cgroup, mounts,
 * capabilities dropped, seccomp) with node already started in it and
 * waiting on its control socket (rootfs/node_warm.js, a preload). Node
 * cannot fork a warm copy of itself (V8's and libuv's threads would not
 * come along), so there is no zygote: a run takes a ready sandbox, hands
 * it the code, files, environment and stdin, and is watched like a cold
 * run; the sandbox is then killed and removed, never reused. The pool's
 * thread keeps the pool full. docs/languages.md. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "box/box.h"
#include "run.h"

extern const unsigned char sr_embedded_node_warm[];
extern const size_t sr_embedded_node_warm_len;

#define NODE_POOL_MAX  64
#define NODE_READY_MS  30000      /* node's start-up on a loaded machine, or under ASan */
#define NODE_STDIN_MAX (1u << 20) /* a pipe's most (fs.pipe-max-size's default) */
#define CTL_CHUNK      32768      /* node_warm.js reads messages of this size whole */
#define CTL_SEND_MS    5000
#define BACKOFF_MAX_MS 30000

typedef struct nbox {
	sr_box b;
	sr_run_request start; /* how it was built: the pool's policy, javascript, the preload */
	sr_result info;       /* its id and cgroup mode */
	int stdin_w;          /* node's stdin is a pipe: the run's bytes go in here */
	struct nbox *next;
} nbox;

struct sr_node_pool {
	sr_policy *p; /* the pool's policy (a copy) */
	char *rootfs_dir;
	unsigned size;
	pthread_mutex_t mu; /* everything below */
	pthread_cond_t cv;
	pthread_t thread;
	bool stopping;
	unsigned busy; /* runs in flight */
	nbox *ready[NODE_POOL_MAX];
	unsigned n_ready;
	nbox *ended; /* runs over, their sandboxes still to remove */
	uint64_t retry_at_ms, backoff_ms;
	struct sr_warm_js_stats st;
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void nbox_free(nbox *x)
{
	if (!x)
		return;
	sr_box_cleanup(&x->b);
	close_fd(&x->b.wd[0]);
	close_fd(&x->stdin_w);
	sr_result_free(&x->info);
	free(x);
}

/* The last line node wrote on stderr, for an error message. */
static void stderr_tail(nbox *x, char *tail, size_t size)
{
	char buf[4096];
	ssize_t n = read(x->b.err[0], buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = '\0';
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	char *line = strrchr(buf, '\n');
	snprintf(tail, size, "%s", line ? line + 1 : buf);
}

/* node_warm.js's "R": node is up and waits for the run. */
static int await_ready(nbox *x, sr_error *err)
{
	uint64_t until = sr_now_ms() + NODE_READY_MS;
	for (;;) {
		struct pollfd pf[3] = { { x->b.ctl[0], POLLIN, 0 },
					{ x->b.report[0], POLLIN, 0 },
					{ x->b.pidfd, POLLIN, 0 } };
		uint64_t now = sr_now_ms();
		if (now >= until)
			return sr_fail(err, ETIMEDOUT, "node did not start in %d s",
				       NODE_READY_MS / 1000);
		if (poll(pf, 3, (int)(until - now)) < 0 && errno != EINTR)
			return sr_fail(err, errno, "poll a JavaScript sandbox");
		char c;
		if ((pf[0].revents & POLLIN) && recv(x->b.ctl[0], &c, 1, 0) == 1 && c == 'R')
			return 0;
		if (pf[1].revents || pf[2].revents || (pf[0].revents & (POLLHUP | POLLERR))) {
			sr_report r;
			char tail[200];
			if (read(x->b.report[0], &r, sizeof r) == (ssize_t)sizeof r &&
			    r.kind == SR_REPORT_FAILED)
				return sr_fail(err, r.errnum,
					       "JavaScript sandbox set-up failed: %s", r.what);
			stderr_tail(x, tail, sizeof tail);
			return sr_fail(err, ECHILD, "node ended before its run%s%s",
				       tail[0] ? ": " : "", tail);
		}
	}
}

/* A sandbox of the pool's policy, node started in it (its start-up is
 * what the pool takes off the runs' path), waiting for one run. */
static nbox *nbox_start(sr_node_pool *np, sr_error *err)
{
	nbox *x = calloc(1, sizeof *x);
	if (!x) {
		sr_fail(err, ENOMEM, "a JavaScript sandbox");
		return NULL;
	}
	x->stdin_w = -1;
	/* Its code is the preload, written to the working dir at set-up. */
	x->start = (sr_run_request){ .policy = np->p,
				     .rootfs_dir = np->rootfs_dir,
				     .language = SR_LANG_JAVASCRIPT,
				     .code = (const char *)sr_embedded_node_warm,
				     .code_size = sr_embedded_node_warm_len,
				     .no_check = true };
	sr_box_init_result(&x->info, np->p);
	sr_box_init(&x->b, &x->start, &x->info);
	x->b.kernel = x->b.pooled = true;
	int in[2];
	if (sr_box_prepare(&x->b, err))
		goto fail;
	if (pipe2(in, O_CLOEXEC) < 0 || fcntl(in[1], F_SETFL, O_NONBLOCK) < 0) {
		sr_fail(err, errno, "a pipe for node's stdin");
		goto fail;
	}
	close_fd(&x->b.in_fd); /* /dev/null: the pipe instead */
	x->b.in_fd = in[0];
	x->stdin_w = in[1];
	/* Node inherits this thread's signal mask at clone. */
	sigset_t none, old;
	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, &old);
	int rc = sr_box_start(&x->b, err);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc || await_ready(x, err))
		goto fail;
	return x;
fail:
	nbox_free(x);
	return NULL;
}

/* ---- the pool's thread ----------------------------------------------------- */

/* The sandboxes whose runs ended: removed off the runs' path. Called and
 * returns with np->mu held. */
static void bury(sr_node_pool *np)
{
	while (np->ended) {
		nbox *x = np->ended;
		np->ended = x->next;
		pthread_mutex_unlock(&np->mu);
		nbox_free(x);
		pthread_mutex_lock(&np->mu);
	}
}

/* Whether the next start waits. Backing off after a failure; and with
 * refill "idle", while a run is in flight and a sandbox is ready for the
 * next one: node's start-up is tens of ms of CPU, which on a machine with
 * few cores would come out of the run's. With np->mu held. */
static bool hold_off(sr_node_pool *np, uint64_t *wait)
{
	uint64_t now = sr_now_ms();
	*wait = 250;
	if (np->n_ready >= np->size)
		return true;
	if (now < np->retry_at_ms) {
		*wait = np->retry_at_ms - now;
		return true;
	}
	return !np->p->warm.refill_eager && np->busy && np->n_ready > 0;
}

static void *pool_thread(void *arg)
{
	sr_node_pool *np = arg;
	pthread_mutex_lock(&np->mu);
	while (!np->stopping) {
		bury(np);
		uint64_t wait;
		if (hold_off(np, &wait)) {
			sr_cond_wait_ms(&np->cv, &np->mu, wait);
			continue;
		}
		pthread_mutex_unlock(&np->mu);
		sr_error err = { 0 };
		nbox *x = nbox_start(np, &err);
		pthread_mutex_lock(&np->mu);
		if (x) {
			np->ready[np->n_ready++] = x;
			np->st.spawned++;
			np->backoff_ms = 0;
		} else {
			np->st.spawn_failures++;
			snprintf(np->st.last_error, sizeof np->st.last_error, "%s", err.msg);
			np->backoff_ms = np->backoff_ms ? np->backoff_ms * 2 : 1000;
			if (np->backoff_ms > BACKOFF_MAX_MS)
				np->backoff_ms = BACKOFF_MAX_MS;
			np->retry_at_ms = sr_now_ms() + np->backoff_ms;
		}
		pthread_cond_broadcast(&np->cv);
	}
	while (np->n_ready)
		nbox_free(np->ready[--np->n_ready]);
	while (np->busy)
		pthread_cond_wait(&np->cv, &np->mu);
	bury(np);
	pthread_mutex_unlock(&np->mu);
	return NULL;
}

/* ---- a run ----------------------------------------------------------------- */

/* Still waiting for its run: node has not ended, its socket is open. */
static bool waiting(const nbox *x)
{
	struct pollfd pf[2] = { { x->b.pidfd, POLLIN, 0 }, { x->b.ctl[0], 0, 0 } };
	return poll(pf, 2, 0) == 0;
}

/* A ready sandbox, or NULL (why in err): starting one now would put
 * node's start-up on the run's path, which the cold path does as well. */
static nbox *take(sr_node_pool *np, sr_error *err)
{
	nbox *x = NULL;
	pthread_mutex_lock(&np->mu);
	while (!x && np->n_ready && !np->stopping) {
		x = np->ready[--np->n_ready];
		if (!waiting(x)) {
			x->next = np->ended;
			np->ended = x;
			x = NULL;
		}
	}
	if (x)
		np->busy++;
	else
		sr_refuse(err, EAGAIN, "no JavaScript sandbox was ready%s%s",
			  np->st.last_error[0] ? "; the last start failed: " : "",
			  np->st.last_error);
	pthread_cond_broadcast(&np->cv); /* refill */
	pthread_mutex_unlock(&np->mu);
	return x;
}

/* A pool of none (pool_size 0, as the CLI's --warm has it): the run's
 * sandbox is started now, node's start-up on its path as on the cold
 * path, and handed over the same way as a pooled one. */
static nbox *start_now(sr_node_pool *np, sr_error *err)
{
	nbox *x = nbox_start(np, err);
	pthread_mutex_lock(&np->mu);
	if (x) {
		np->busy++;
		np->st.spawned++;
	} else {
		np->st.spawn_failures++;
		snprintf(np->st.last_error, sizeof np->st.last_error, "%s", err->msg);
	}
	pthread_mutex_unlock(&np->mu);
	return x;
}

/* x's run is over (or never started): kill what is left, let the pool's
 * thread remove it. */
static void retire(sr_node_pool *np, nbox *x, bool ran)
{
	syscall(SYS_pidfd_send_signal, x->b.pidfd, SIGKILL, NULL, 0);
	x->b.p = np->p;
	x->b.res = &x->info;
	x->b.on_output = NULL;
	x->b.on_output_arg = NULL;
	pthread_mutex_lock(&np->mu);
	x->next = np->ended;
	np->ended = x;
	np->busy--;
	if (ran)
		np->st.warm_runs++;
	pthread_cond_broadcast(&np->cv);
	pthread_mutex_unlock(&np->mu);
}

static int send_msg(int sock, const void *data, size_t len)
{
	struct pollfd p = { .fd = sock, .events = POLLOUT };
	if (poll(&p, 1, CTL_SEND_MS) != 1)
		return errno = ETIMEDOUT, -1;
	return send(sock, data, len, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

static char *put(char *at, const void *data, size_t len)
{
	memcpy(at, data, len);
	return at + len;
}

/* "W" and the three lengths, then the code, the environment and the
 * files in CTL_CHUNK messages (node_warm.js). */
static int send_payload(nbox *x, const sr_run_request *req, sr_error *err)
{
	const sr_policy *p = req->policy;
	size_t env = 0, files = 0;
	for (size_t i = 0; i < p->n_env; i++)
		env += strlen(p->env[i]) + 1;
	for (size_t i = 0; i < req->n_files; i++)
		files += 8 + strlen(req->files[i].name) + req->files[i].size;
	size_t total = req->code_size + env + files;
	if (total > UINT32_MAX)
		return sr_fail(err, EFBIG, "the run is %zu bytes", total);
	char *body = malloc(total ? total : 1), *at = body;
	if (!body)
		return sr_fail(err, ENOMEM, "the run's payload");
	at = put(at, req->code, req->code_size);
	for (size_t i = 0; i < p->n_env; i++)
		at = put(at, p->env[i], strlen(p->env[i]) + 1);
	for (size_t i = 0; i < req->n_files; i++) {
		const sr_file *f = &req->files[i];
		uint32_t lens[2] = { (uint32_t)strlen(f->name), (uint32_t)f->size };
		at = put(put(put(at, lens, sizeof lens), f->name, lens[0]), f->data, f->size);
	}
	char head[13] = { 'W' };
	uint32_t lens[3] = { (uint32_t)req->code_size, (uint32_t)env, (uint32_t)files };
	memcpy(head + 1, lens, sizeof lens);
	int bad = send_msg(x->b.ctl[0], head, sizeof head);
	for (size_t off = 0; !bad && off < total; off += CTL_CHUNK)
		bad = send_msg(x->b.ctl[0], body + off,
			       total - off < CTL_CHUNK ? total - off : CTL_CHUNK);
	int e = errno;
	free(body);
	return bad ? sr_fail(err, e, "send the run to its JavaScript sandbox") : 0;
}

/* The run's stdin into node's stdin pipe, then its end. */
static int fill_stdin(nbox *x, const sr_run_request *req, sr_error *err)
{
	size_t n = req->stdin_data ? req->stdin_size : 0;
	if (n > 65536 && fcntl(x->stdin_w, F_SETPIPE_SZ, (int)n) < 0)
		return sr_fail(err, errno, "make node's stdin pipe hold %zu bytes", n);
	if (n && write(x->stdin_w, req->stdin_data, n) != (ssize_t)n)
		return sr_fail(err, errno ? errno : EAGAIN, "write node's stdin");
	close_fd(&x->stdin_w);
	return 0;
}

/* The run's limits on x's group, then its stdin and payload: node takes
 * it from there. before: the group's counters as the run begins (node's
 * start-up is not the run's CPU time). The control socket is closed
 * after, on both sides: the run is watched like a cold one. */
static int hand_over(nbox *x, const sr_node_pool *np, const sr_run_request *req,
		     sr_cgroup_stats *before, sr_error *err)
{
	const sr_limits *want = &req->policy->limits, *have = &np->p->limits;
	if ((want->memory_bytes != have->memory_bytes || want->swap_bytes != have->swap_bytes ||
	     want->cpu_millis != have->cpu_millis || want->pids != have->pids) &&
	    sr_cgroup_set_limits(x->b.cg, want, err))
		return -1;
	sr_cgroup_read_stats(x->b.cg, before);
	if (fill_stdin(x, req, err) || send_payload(x, req, err))
		return -1;
	close_fd(&x->b.ctl[0]);
	return 0;
}

int sr_node_pool_run(sr_node_pool *np, const sr_run_request *req, sr_result *res, char *why,
		     size_t why_size)
{
	if (req->stdin_data && req->stdin_size > NODE_STDIN_MAX) {
		snprintf(why, why_size, "stdin over %u bytes (a pipe's most)", NODE_STDIN_MAX);
		return -1;
	}
	sr_error e = { 0 };
	nbox *x = np->size ? take(np, &e) : start_now(np, &e);
	if (!x) {
		snprintf(why, why_size, "%s", e.msg);
		return -1;
	}
	memcpy(res->id, x->info.id, sizeof res->id);
	memcpy(res->cgroup_mode, x->info.cgroup_mode, sizeof res->cgroup_mode);
	res->warm = true;
	x->b.res = res;
	x->b.p = req->policy;
	sr_cgroup_stats before;
	if (hand_over(x, np, req, &before, &e)) {
		/* Node runs nothing before the whole payload is in. */
		retire(np, x, false);
		snprintf(why, why_size, "%s", e.msg);
		return -1;
	}
	x->b.on_output = req->on_output;
	x->b.on_output_arg = req->on_output_arg;
	const sr_limits *lim = &req->policy->limits;
	sr_outcome oc;
	if (sr_box_watch(&x->b, lim->wall_ms, lim->output_bytes, &before, &oc, &e)) {
		res->status = SR_STATUS_INTERNAL_ERROR;
		snprintf(res->message, sizeof res->message, "internal_error: %s", e.msg);
	}
	/* Nothing of the run goes on while its artifacts are read. */
	syscall(SYS_pidfd_send_signal, x->b.pidfd, SIGKILL, NULL, 0);
	sr_box_collect_artifacts(&x->b);
	retire(np, x, true);
	return 0;
}

/* ---- the pool ---------------------------------------------------------------- */

int sr_node_pool_start(const sr_policy *p, const char *rootfs_dir, unsigned size,
		       sr_node_pool **out, sr_error *err)
{
	*out = NULL;
	const char *dir = rootfs_dir ? rootfs_dir : SR_DEFAULT_ROOTFS_DIR;
	char *rootfs = NULL;
	int rc = sr_mounts_find_profile(dir, p->profile, &rootfs, err);
	if (rc == 0)
		rc = sr_language_check_profile(rootfs, p->profile, SR_LANG_JAVASCRIPT, err);
	free(rootfs);
	if (rc)
		return -1;
	if (size > NODE_POOL_MAX)
		return sr_refuse(err, EINVAL, "a JavaScript pool of %u is over %d", size,
				 NODE_POOL_MAX);
	sr_node_pool *np = calloc(1, sizeof *np);
	if (!np)
		return sr_fail(err, ENOMEM, "the JavaScript pool");
	np->size = size;
	np->st.enabled = true;
	np->st.pool_size = size;
	if (!(np->p = sr_policy_dup(p)) || (rootfs_dir && !(np->rootfs_dir = strdup(rootfs_dir)))) {
		sr_policy_free(np->p);
		free(np);
		return sr_fail(err, ENOMEM, "the JavaScript pool");
	}
	pthread_mutex_init(&np->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&np->cv, &ca);
	pthread_condattr_destroy(&ca);
	if ((rc = pthread_create(&np->thread, NULL, pool_thread, np))) {
		pthread_mutex_destroy(&np->mu);
		pthread_cond_destroy(&np->cv);
		sr_policy_free(np->p);
		free(np->rootfs_dir);
		free(np);
		return sr_fail(err, rc, "start the JavaScript pool's thread");
	}
	*out = np;
	return 0;
}

void sr_node_pool_get_stats(sr_node_pool *np, struct sr_warm_js_stats *st)
{
	pthread_mutex_lock(&np->mu);
	*st = np->st;
	st->ready = np->n_ready;
	pthread_mutex_unlock(&np->mu);
}

int sr_node_pool_wait_ready(sr_node_pool *np, uint64_t until_ms, sr_error *err)
{
	pthread_mutex_lock(&np->mu);
	while (np->n_ready < np->size && sr_now_ms() < until_ms)
		sr_cond_wait_ms(&np->cv, &np->mu, until_ms - sr_now_ms());
	int rc = 0;
	if (np->n_ready < np->size)
		rc = sr_fail(err, ETIMEDOUT, "the JavaScript pool was not ready%s%s",
			     np->st.last_error[0] ? ": " : "", np->st.last_error);
	pthread_mutex_unlock(&np->mu);
	return rc;
}

void sr_node_pool_stop(sr_node_pool *np)
{
	if (!np)
		return;
	pthread_mutex_lock(&np->mu);
	np->stopping = true;
	pthread_cond_broadcast(&np->cv);
	pthread_mutex_unlock(&np->mu);
	pthread_join(np->thread, NULL);
	sr_policy_free(np->p);
	free(np->rootfs_dir);
	pthread_mutex_destroy(&np->mu);
	pthread_cond_destroy(&np->cv);
	free(np);
}

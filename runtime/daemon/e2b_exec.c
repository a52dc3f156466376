/* The code interpreter of an E2B sandbox (e2b_exec.h).
 *
 * Each Python or JavaScript context is a kernel of its own (sr_kernel)
 * over the sandbox's workspace: separate interpreters sharing files. The
 * default context's kernel is the sandbox itself: envd's commands and
 * bash runs enter it (sr_kernel_exec), so they share its /tmp, processes
 * and network with the default context's code. Kernels keep running
 * between runs (background commands go on); pause freezes them all.
 * The runners serve in notebook mode (SAFERUN_NOTEBOOK in their
 * environment names the file they write after each run): the value of
 * the last expression and display data (PNG of matplotlib figures, HTML
 * of DataFrames), and the exception as name, value and traceback. The
 * checker and the guard apply to every Python run as to any session's. */
#include "e2b_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "run.h"
#include "run_stream.h"

#define RESULTS_MAX (64u << 20) /* the notebook file the runner writes */

typedef struct srd_e2b_context {
	char id[40];
	sr_language language; /* bash: no kernel, its runs enter the default context's */
	sr_policy *policy; /* the session's, with SAFERUN_NOTEBOOK; the kernel's while it lives */
	sr_kernel *kernel; /* changed under run_lock + sb->lock; stopped under exec_lock */
	pthread_mutex_t run_lock;
	/* Held while a command enters the kernel (srd_e2b_exec) and while a
	 * kernel that was the context's is stopped: an entry never meets a
	 * freed kernel. Taken after run_lock, never before it. */
	pthread_mutex_t exec_lock;
	unsigned executions;
	bool lost;     /* its interpreter ended in a run: the next says it is a new one */
	unsigned refs; /* under sb->lock: the list's + each request's */
	bool removed;
	struct srd_e2b_context *next;
} srd_e2b_context;

static srd_e2b_context *context_new(srd_e2b_sandbox *sb, const char *id, sr_language language)
{
	srd_e2b_context *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	if (id)
		snprintf(c->id, sizeof c->id, "%s", id);
	else
		snprintf(c->id, sizeof c->id, "ctx-%u", ++sb->next_context);
	c->language = language;
	pthread_mutex_init(&c->run_lock, NULL);
	pthread_mutex_init(&c->exec_lock, NULL);
	c->refs = 1;
	return c;
}

/* A kernel that was c's (no longer reachable through c->kernel). */
static void stop_kernel(srd_e2b_context *c, sr_kernel *k)
{
	pthread_mutex_lock(&c->exec_lock);
	sr_kernel_stop(k);
	pthread_mutex_unlock(&c->exec_lock);
}

static void context_destroy(srd_e2b_context *c)
{
	sr_kernel_stop(c->kernel);
	sr_policy_free(c->policy);
	pthread_mutex_destroy(&c->run_lock);
	pthread_mutex_destroy(&c->exec_lock);
	free(c);
}

static void context_release(srd_e2b_sandbox *sb, srd_e2b_context *c)
{
	pthread_mutex_lock(&sb->lock);
	bool last = --c->refs == 0;
	pthread_mutex_unlock(&sb->lock);
	if (last)
		context_destroy(c);
}

int srd_e2b_contexts_init(srd_e2b_sandbox *sb)
{
	sb->contexts = context_new(sb, "default", SR_LANG_PYTHON);
	return sb->contexts ? 0 : -1;
}

void srd_e2b_contexts_kill(srd_e2b_sandbox *sb)
{
	pthread_mutex_lock(&sb->lock);
	for (srd_e2b_context *c = sb->contexts; c; c = c->next)
		sr_kernel_kill(c->kernel);
	pthread_mutex_unlock(&sb->lock);
}

void srd_e2b_contexts_freeze(srd_e2b_sandbox *sb, bool frozen)
{
	pthread_mutex_lock(&sb->lock);
	srd_e2b_contexts_freeze_locked(sb, frozen);
	pthread_mutex_unlock(&sb->lock);
}

void srd_e2b_contexts_freeze_locked(srd_e2b_sandbox *sb, bool frozen)
{
	for (srd_e2b_context *c = sb->contexts; c; c = c->next) {
		sr_error err = { 0 };
		if (!c->kernel || sr_kernel_freeze(c->kernel, frozen, &err) == 0)
			continue;
		/* Not frozen: it would run on while the sandbox is paused. */
		if (frozen)
			sr_kernel_kill(c->kernel);
		srd_log("warn", "e2b", "sandbox %s: %s context %s: %s%s", sb->id,
			frozen ? "freeze" : "thaw", c->id, err.msg, frozen ? " (ended)" : "");
	}
}

void srd_e2b_contexts_free(srd_e2b_sandbox *sb)
{
	while (sb->contexts) {
		srd_e2b_context *c = sb->contexts;
		sb->contexts = c->next;
		context_destroy(c); /* no request holds one: the sandbox's last ref */
	}
}

static srd_e2b_context *context_find(srd_e2b_sandbox *sb, const char *id)
{
	srd_e2b_context *found = NULL;
	pthread_mutex_lock(&sb->lock);
	for (srd_e2b_context *c = sb->contexts; c && !found; c = c->next)
		if (strcmp(c->id, id) == 0)
			found = c;
	if (found)
		found->refs++;
	pthread_mutex_unlock(&sb->lock);
	return found;
}

static cJSON *context_json(srd_e2b_sandbox *sb, const srd_e2b_context *c)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "id", c->id);
	cJSON_AddStringToObject(j, "language", sr_language_name(c->language));
	cJSON_AddStringToObject(j, "cwd", srd_session_workdir(sb->session));
	return j;
}

/* The file the runner leaves its notebook results in, in the workspace. */
static void results_name(const srd_e2b_context *c, char *out, size_t size)
{
	snprintf(out, size, ".e2b-%s.json", c->id);
}

/* Under run_lock: a live kernel (a new one if it died; its variables are
 * then gone). *fresh: this run starts one. */
static int ensure_kernel(srd_ctx *ctx, srd_e2b_sandbox *sb, srd_e2b_context *c, bool *fresh,
			 sr_error *err)
{
	*fresh = false;
	if (c->kernel && sr_kernel_alive(c->kernel)) {
		*fresh = c->lost; /* a command's entry started it again */
		c->lost = false;
		return 0;
	}
	sr_kernel_options ko;
	srd_session_kernel_options(ctx, sb->session, &ko);
	ko.language = c->language;
	ko.keep_running = true; /* background commands go on; pause freezes */
	sr_policy *p = c->policy;
	if (!p) {
		char name[64], kv[160];
		results_name(c, name, sizeof name);
		snprintf(kv, sizeof kv, "SAFERUN_NOTEBOOK=%s/%s", srd_session_workdir(sb->session),
			 name);
		p = sr_policy_dup(ko.policy);
		if (!p) {
			err->errnum = ENOMEM;
			snprintf(err->msg, sizeof err->msg, "out of memory (the sandbox's policy)");
			return -1;
		}
		if (sr_policy_set_env(p, kv, err)) {
			sr_policy_free(p);
			return -1;
		}
	}
	ko.policy = p;
	sr_kernel *k = NULL;
	sigset_t old;
	srd_unmask_signals(&old);
	int rc = sr_kernel_start(&ko, &k, err);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_mutex_lock(&sb->lock);
	sr_kernel *dead = c->kernel;
	c->kernel = rc == 0 ? k : NULL;
	c->policy = p;
	if (sb->ended || c->removed) /* killed while it started */
		sr_kernel_kill(c->kernel);
	pthread_mutex_unlock(&sb->lock);
	stop_kernel(c, dead);
	*fresh = rc == 0 && (dead || c->lost);
	c->lost = false;
	return rc;
}

static void drop_kernel(srd_e2b_sandbox *sb, srd_e2b_context *c)
{
	pthread_mutex_lock(&sb->lock);
	sr_kernel *k = c->kernel;
	c->kernel = NULL;
	pthread_mutex_unlock(&sb->lock);
	stop_kernel(c, k);
}

/* ---- commands in the default context's sandbox -------------------------- */

static int exec_fail(sr_error *err, int errnum, const char *msg)
{
	err->errnum = errnum;
	snprintf(err->msg, sizeof err->msg, "%s", msg);
	return -1;
}

/* Under the caller's exec_gate (shared), the sandbox not paused: start a
 * command in the default context's kernel, starting that kernel first if
 * it is not up (a dead one's variables are then gone: the next run says
 * so). */
static int exec_in_default(srd_ctx *ctx, srd_e2b_sandbox *sb, const sr_exec_options *xo,
			   sr_exec_proc *out, sr_error *err)
{
	srd_e2b_context *c = context_find(sb, "default");
	if (!c)
		return exec_fail(err, ENOENT,
				 "the sandbox's default context was removed: commands run in it");
	int rc = 0;
	pthread_mutex_lock(&c->exec_lock);
	pthread_mutex_lock(&sb->lock);
	sr_kernel *k = c->kernel;
	pthread_mutex_unlock(&sb->lock);
	if (!k || !sr_kernel_alive(k)) {
		/* run_lock comes first: a run in progress on a dead kernel is
		 * ending; waiting for it is short. */
		pthread_mutex_unlock(&c->exec_lock);
		pthread_mutex_lock(&c->run_lock);
		bool fresh = false;
		if (c->removed)
			rc = exec_fail(err, ENOENT, "the sandbox's default context was removed");
		else
			rc = ensure_kernel(ctx, sb, c, &fresh, err);
		if (fresh)
			c->lost = true;
		pthread_mutex_unlock(&c->run_lock);
		pthread_mutex_lock(&c->exec_lock);
		pthread_mutex_lock(&sb->lock);
		k = c->kernel;
		pthread_mutex_unlock(&sb->lock);
		if (rc == 0 && !k)
			rc = exec_fail(err, ESRCH, "the sandbox's kernel has ended");
	}
	if (rc == 0)
		rc = sr_kernel_exec(k, xo, out, err);
	pthread_mutex_unlock(&c->exec_lock);
	context_release(sb, c);
	return rc;
}

int srd_e2b_exec(srd_e2b_sandbox *sb, const sr_exec_options *xo, sr_exec_proc *out, sr_error *err)
{
	pthread_rwlock_rdlock(&sb->exec_gate);
	int rc = srd_e2b_paused(sb)
		     ? exec_fail(err, EAGAIN, "the sandbox is paused: resume it (Sandbox.connect)")
		     : exec_in_default(sb->ctx, sb, xo, out, err);
	if (srd_e2b_paused(sb)) /* paused at its timeout meanwhile (tick_locked) */
		srd_e2b_contexts_freeze(sb, true);
	pthread_rwlock_unlock(&sb->exec_gate);
	return rc;
}

/* ---- the NDJSON answer -------------------------------------------------- */

/* The items go out as they come, on a response started when the run
 * starts (an error before that keeps its own status). */
struct out {
	srd_response *res;
	sr_kernel *kernel; /* killed when the client has gone */
	bool started, gone, failed;
	srd_utf8_carry carry[2];
	char *line[2]; /* the stream's text after its last newline */
	size_t line_len[2];
	char *buf; /* without a server to stream on (srd_respond_stream fails) */
	size_t len, cap;
};

static void emit(struct out *o, cJSON *item)
{
	char *text = cJSON_PrintUnformatted(item);
	cJSON_Delete(item);
	size_t n = text ? strlen(text) : 0;
	if (!text || o->failed) {
		o->failed = true;
		free(text);
		return;
	}
	if (!o->started) {
		o->started = true;
		if (srd_respond_stream(o->res, 200, "application/x-ndjson") < 0)
			o->gone = true;
	}
	if (o->gone) {
		free(text);
		return;
	}
	if (o->res->streamed) {
		text[n] = '\n';
		if (srd_respond_chunk(o->res, text, n + 1) < 0) {
			o->gone = true; /* its run is of no use to anyone now */
			sr_kernel_kill(o->kernel);
		}
		free(text);
		return;
	}
	if (o->len + n + 2 > o->cap) {
		size_t cap = o->cap ? o->cap : 4096;
		while (cap < o->len + n + 2)
			cap *= 2;
		char *g = realloc(o->buf, cap);
		if (!g) {
			o->failed = true;
			free(text);
			return;
		}
		o->buf = g, o->cap = cap;
	}
	memcpy(o->buf + o->len, text, n);
	o->len += n;
	o->buf[o->len++] = '\n';
	o->buf[o->len] = '\0';
	free(text);
}

static void emit_text(struct out *o, const char *type, const char *data, size_t len)
{
	if (!len)
		return;
	char *s = strndup(data, len);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "type", type);
	cJSON_AddStringToObject(j, "text", s ? s : "");
	/* when it came, as E2B's interpreter says it (the Python SDK reads it) */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char when[48], base[32];
	strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when, sizeof when, "%s.%06ldZ", base, ts.tv_nsec / 1000);
	cJSON_AddStringToObject(j, "timestamp", when);
	free(s);
	emit(o, j);
}

/* Up to the last newline now, the rest with the next piece (a line of its
 * own per item, as the SDK's onStdout expects), or when it is this long. */
#define LINE_MAX_HOLD 65536

static void pending_text(struct out *o, int i, const char *text, size_t n, bool all)
{
	const char *type = i ? "stderr" : "stdout";
	char *joined = malloc(o->line_len[i] + n + 1);
	if (!joined) {
		o->failed = true;
		return;
	}
	memcpy(joined, o->line[i] ? o->line[i] : "", o->line_len[i]);
	memcpy(joined + o->line_len[i], text, n);
	size_t total = o->line_len[i] + n, cut = total;
	free(o->line[i]);
	o->line[i] = NULL;
	o->line_len[i] = 0;
	if (!all && total < LINE_MAX_HOLD) {
		while (cut && joined[cut - 1] != '\n')
			cut--;
		if (cut < total) {
			o->line[i] = strndup(joined + cut, total - cut);
			o->line_len[i] = o->line[i] ? total - cut : 0;
		}
	}
	emit_text(o, type, joined, cut);
	free(joined);
}

/* sr_run_request.on_output: stdout and stderr items as UTF-8 (a sequence
 * cut between pieces waits for the rest). */
static void on_output(void *arg, int stream, const char *data, size_t len)
{
	struct out *o = arg;
	size_t n = 0;
	char *text = srd_utf8_piece(&o->carry[stream == 2], data, len, false, &n);
	if (text && n)
		pending_text(o, stream == 2, text, n, false);
	free(text);
}

/* The rest: a last line without a newline, a sequence never completed. */
static void flush_output(struct out *o)
{
	for (int i = 0; i < 2; i++) {
		size_t n = 0;
		char *text = srd_utf8_piece(&o->carry[i], "", 0, true, &n);
		pending_text(o, i, text ? text : "", text ? n : 0, true);
		free(text);
	}
}

static void emit_error(struct out *o, const char *name, const char *value, const char *traceback)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "type", "error");
	cJSON_AddStringToObject(j, "name", name);
	cJSON_AddStringToObject(j, "value", value);
	cJSON_AddStringToObject(j, "traceback", traceback ? traceback : "");
	emit(o, j);
}

/* The runner's notebook file: {"results": [...], "error": {...}|null}. */
static bool emit_notebook(struct out *o, srd_e2b_sandbox *sb, const srd_e2b_context *c)
{
	char name[64];
	results_name(c, name, sizeof name);
	sr_workspace *ws = srd_session_workspace(sb->session);
	void *data = NULL;
	size_t size = 0;
	sr_error err = { 0 };
	if (sr_workspace_read(ws, name, RESULTS_MAX, &data, &size, &err)) {
		if (err.errnum == ENOENT) /* the run ended before the runner wrote it */
			return false;
		char msg[SR_ERROR_MSG_MAX + 64];
		snprintf(msg, sizeof msg, "the run's results could not be read: %s", err.msg);
		sr_workspace_remove(ws, name, &err);
		emit_error(o, "SaferunError", msg, "");
		return true;
	}
	sr_workspace_remove(ws, name, &err);
	cJSON *doc = cJSON_ParseWithLength(data, size);
	free(data);
	bool had_error = false;
	const cJSON *r;
	cJSON_ArrayForEach(r, cJSON_GetObjectItem(doc, "results"))
	{
		if (!cJSON_IsObject(r))
			continue;
		cJSON *item = cJSON_Duplicate(r, true);
		cJSON_DeleteItemFromObject(item, "type");
		cJSON_AddStringToObject(item, "type", "result");
		emit(o, item);
	}
	const cJSON *e = cJSON_GetObjectItem(doc, "error");
	if (cJSON_IsObject(e)) {
		const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
		const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(e, "value"));
		const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(e, "traceback"));
		emit_error(o, n ? n : "Error", v ? v : "", t);
		had_error = true;
	}
	cJSON_Delete(doc);
	return had_error;
}

/* What the supervisor saw, when the runner had no say: the run never
 * started (rejected), or was ended (timeout, memory, output, killed). */
static void emit_status_error(struct out *o, const sr_result *r, bool died)
{
	const char *name;
	switch (r->status) {
	case SR_STATUS_REJECTED: name = "SaferunRejected"; break;
	case SR_STATUS_TIMEOUT: name = "TimeoutError"; break;
	case SR_STATUS_OOM: name = "MemoryError"; break;
	case SR_STATUS_OUTPUT_LIMIT: name = "OutputLimitError"; break;
	default: name = "SaferunError"; break;
	}
	char value[SR_ERROR_MSG_MAX + 160];
	snprintf(value, sizeof value, "%s: %s%s", sr_status_name(r->status), r->message,
		 died && !strstr(r->message, "interpreter")
		     ? " (the context's interpreter ended: its variables are gone, its files "
		       "stay)"
		     : "");
	char tb[4096] = "";
	size_t len = 0;
	for (size_t i = 0; i < r->n_findings && len < sizeof tb - 200; i++)
		len += (size_t)snprintf(tb + len, sizeof tb - len, "line %d: %s %s: %s\n",
					r->findings[i].line, r->findings[i].rule,
					r->findings[i].rule_name, r->findings[i].message);
	emit_error(o, name, value, tb);
}

/* ---- the client leaving ends its run ------------------------------------ */

/* The SDK ends a run at its timeoutMs by closing the connection: the run
 * is killed then, not at the end of the sandbox's wall-time limit. */
struct watch {
	int fd, stop[2];
	sr_kernel *kernel;
	pthread_t thread;
	bool running, gone;
};

static void *watch_main(void *arg)
{
	struct watch *w = arg;
	struct pollfd p[2] = { { .fd = w->fd, .events = POLLRDHUP },
			       { .fd = w->stop[0], .events = POLLIN } };
	while (poll(p, 2, -1) < 0 && errno == EINTR)
		;
	if (!(p[1].revents & POLLIN) && (p[0].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
		w->gone = true;
		sr_kernel_kill(w->kernel);
	}
	return NULL;
}

static void watch_start(struct watch *w, int fd, sr_kernel *k)
{
	*w = (struct watch){ .fd = fd, .kernel = k, .stop = { -1, -1 } };
	if (fd < 0 || pipe2(w->stop, O_CLOEXEC) < 0)
		return;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	w->running = pthread_create(&w->thread, NULL, watch_main, w) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void watch_stop(struct watch *w)
{
	if (w->running) {
		ssize_t n = write(w->stop[1], "x", 1);
		(void)n;
		pthread_join(w->thread, NULL);
	}
	if (w->stop[0] >= 0) {
		close(w->stop[0]);
		close(w->stop[1]);
	}
}

/* ---- bash runs ---------------------------------------------------------- */

/* How a bash run ended. */
struct bash_end {
	int wstatus;
	bool timed_out, too_much, gone;
	bool started; /* bash ran: a run to count */
	uint64_t ms;  /* from its start to its end */
};

static void kill_command(const sr_exec_proc *pr)
{
	/* Its process group (setsid in the sandbox): what it started too. It
	 * is our unreaped child, so neither id can be reused yet. */
	kill(-pr->pid, SIGKILL);
	syscall(SYS_pidfd_send_signal, pr->pidfd, SIGKILL, NULL, 0);
}

/* What fd has now, as the run's output within cap; false at EOF. */
static bool bash_read(struct out *o, int fd, int stream, size_t *total, size_t cap,
		      const sr_exec_proc *pr, struct bash_end *be)
{
	char buf[32768];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 && errno == EAGAIN;
		size_t take = (size_t)n;
		if (*total + take > cap) {
			take = cap - *total;
			if (!be->too_much)
				kill_command(pr);
			be->too_much = true;
		}
		*total += take;
		if (take)
			on_output(o, stream, buf, take);
		if (o->gone && !be->gone) {
			be->gone = true;
			kill_command(pr);
		}
	}
}

/* Feed pr's output to o until it exits (what its background children
 * write after that is not the run's), the policy's wall time passes or
 * the client goes; then reap it. */
static void bash_pump(struct out *o, const sr_exec_proc *pr, int out_fd, int err_fd, int peer,
		      const sr_limits *lim, struct bash_end *be)
{
	uint64_t deadline = srd_now_ms() + lim->wall_ms;
	size_t total = 0;
	bool open[2] = { true, true };
	for (;;) {
		uint64_t now = srd_now_ms();
		if (now >= deadline && !be->timed_out) {
			be->timed_out = true;
			kill_command(pr);
		}
		struct pollfd pf[4] = { { open[0] ? out_fd : -1, POLLIN, 0 },
					{ open[1] ? err_fd : -1, POLLIN, 0 },
					{ pr->pidfd, POLLIN, 0 },
					{ peer, POLLRDHUP, 0 } };
		int wait =
		    be->timed_out ? 1000 : (int)(deadline - now < 1000 ? deadline - now : 1000);
		int r = poll(pf, 4, wait);
		if (r < 0 && errno != EINTR)
			break;
		if (r > 0 && (pf[3].revents & (POLLRDHUP | POLLHUP | POLLERR)) && !be->gone) {
			be->gone = true;
			kill_command(pr);
		}
		bool done = r > 0 && (pf[2].revents & POLLIN);
		for (int i = 0; i < 2; i++)
			if (open[i])
				open[i] = bash_read(o, i ? err_fd : out_fd, i ? 2 : 1, &total,
						    lim->output_bytes, pr, be);
		if (done)
			break;
	}
	siginfo_t si = { 0 };
	waitid((idtype_t)P_PIDFD, (id_t)pr->pidfd, &si, WEXITED);
	be->wstatus = si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8 : si.si_status & 0x7f;
}

/* A bash run: `bash -c CODE` entered into the default context's sandbox
 * like a command (E2B's bash kernel runs in the same machine as the rest),
 * its output streamed as the run's. No state is kept between runs. */
static void bash_run(srd_ctx *ctx, srd_e2b_sandbox *sb, const char *code, struct out *o, int peer,
		     struct bash_end *be)
{
	sr_kernel_options ko;
	srd_session_kernel_options(ctx, sb->session, &ko);
	const sr_policy *pol = ko.policy;
	char **envp = calloc(pol->n_env + 1, sizeof *envp);
	int in = open("/dev/null", O_RDONLY | O_CLOEXEC), fo[2] = { -1, -1 }, fe[2] = { -1, -1 };
	if (!envp || in < 0 || pipe2(fo, O_CLOEXEC) < 0 || pipe2(fe, O_CLOEXEC) < 0) {
		emit_error(o, "SaferunError", "out of memory or fds for a bash run", "");
		goto out;
	}
	for (size_t i = 0; i < pol->n_env; i++)
		envp[i] = pol->env[i];
	fcntl(fo[0], F_SETFL, O_NONBLOCK);
	fcntl(fe[0], F_SETFL, O_NONBLOCK);
	char *argv[] = { "/bin/bash", "-c", (char *)code, NULL };
	sr_exec_options xo = { .path = argv[0],
			       .argv = argv,
			       .envp = envp,
			       .cwd = srd_session_workdir(sb->session),
			       .stdio = { in, fo[1], fe[1] } };
	sr_exec_proc pr;
	sr_error err = { 0 };
	if (exec_in_default(ctx, sb, &xo, &pr, &err)) {
		emit_error(o, "SaferunError", err.msg, "");
		goto out;
	}
	close(fo[1]);
	close(fe[1]);
	fo[1] = fe[1] = -1;
	be->started = true;
	uint64_t t0 = srd_now_ms();
	bash_pump(o, &pr, fo[0], fe[0], peer, &pol->limits, be);
	be->ms = srd_now_ms() - t0;
	close(pr.pidfd);
	flush_output(o);
	if (be->timed_out)
		emit_error(o, "TimeoutError",
			   "timeout: the run passed the policy's wall-clock limit", "");
	else if (be->too_much)
		emit_error(o, "OutputLimitError", "output_limit: the run passed the output cap",
			   "");
	else if (be->wstatus) {
		/* as Jupyter's bash kernel (E2B's) reports it: the exit code */
		char v[16];
		int status =
		    WIFEXITED(be->wstatus) ? WEXITSTATUS(be->wstatus) : 128 + WTERMSIG(be->wstatus);
		snprintf(v, sizeof v, "%d", status);
		emit_error(o, "", v, "");
	}
out:
	for (int i = 0; i < 2; i++) {
		if (fo[i] >= 0)
			close(fo[i]);
		if (fe[i] >= 0)
			close(fe[i]);
	}
	if (in >= 0)
		close(in);
	free(envp);
}

/* A bash run in the metrics and the log like any run: its status as the
 * supervisor would classify it (the client leaving ends it: killed). */
static void bash_record(srd_ctx *ctx, srd_e2b_sandbox *sb, const srd_peer *peer,
			const struct bash_end *be, uint64_t t0, uint64_t t1, size_t code_len)
{
	sr_result r = { .duration_ms = be->ms, .truncated = be->too_much };
	bool exited = WIFEXITED(be->wstatus);
	r.exit_code = exited ? WEXITSTATUS(be->wstatus) : -1;
	r.signal = exited ? 0 : WTERMSIG(be->wstatus);
	r.status = be->timed_out         ? SR_STATUS_TIMEOUT
		   : be->too_much        ? SR_STATUS_OUTPUT_LIMIT
		   : be->gone || !exited ? SR_STATUS_KILLED
		   : r.exit_code         ? SR_STATUS_ERROR
					 : SR_STATUS_OK;
	srd_run_record(ctx, &r, SR_LANG_BASH, srd_session_policy_name(sb->session), sb->id, peer,
		       t1 - t0, srd_now_ms() - t0, code_len);
}

/* ---- POST /execute ------------------------------------------------------ */

static void jupyter_error(srd_response *res, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void jupyter_error(srd_response *res, unsigned status, const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	srd_e2b_error(res, status, msg);
}

#define MAX_CONTEXTS 16

/* A language as E2B's SDKs name it (NULL: python); false: not one saferun
 * runs. */
static bool e2b_language(const char *name, sr_language *out)
{
	if (!name || strcmp(name, "python3") == 0) {
		*out = SR_LANG_PYTHON;
		return true;
	}
	return sr_language_parse(name, out) == 0;
}

static void language_refused(srd_response *res, const char *name)
{
	jupyter_error(res, 400,
		      "\"language\": \"%.40s\" is not supported by saferun's code interpreter "
		      "(python, javascript or js, bash)",
		      name);
}

/* Under sb->lock: a new context at the end of the list, referenced for
 * the caller too; NULL when there are MAX_CONTEXTS (*full) or no memory. */
static srd_e2b_context *add_context_locked(srd_e2b_sandbox *sb, const char *id, sr_language l,
					   bool *full)
{
	unsigned n = 0;
	srd_e2b_context **tail = &sb->contexts;
	for (; *tail; tail = &(*tail)->next)
		n++;
	*full = n >= MAX_CONTEXTS;
	srd_e2b_context *c = *full ? NULL : context_new(sb, id, l);
	if (c) {
		*tail = c;
		c->refs++;
	}
	return c;
}

/* runCode's language without a context: that language's default context
 * (made on first use, as E2B's interpreter does), referenced. */
static srd_e2b_context *language_context(srd_e2b_sandbox *sb, sr_language l, srd_response *res)
{
	if (l == SR_LANG_PYTHON)
		return context_find(sb, "default");
	char id[40];
	snprintf(id, sizeof id, "default-%s", sr_language_name(l));
	srd_e2b_context *c = context_find(sb, id);
	if (c)
		return c;
	bool full = false;
	pthread_mutex_lock(&sb->lock);
	c = add_context_locked(sb, id, l, &full);
	pthread_mutex_unlock(&sb->lock);
	if (!c)
		jupyter_error(res, full ? 429 : 500, "a sandbox has at most %d contexts",
			      MAX_CONTEXTS);
	return c;
}

/* A run of a bash context; false after an answer that is not a run's. */
static bool execute_bash(srd_ctx *ctx, srd_e2b_sandbox *sb, srd_e2b_context *c, const char *code,
			 const srd_request *req, srd_response *res, struct out *o, uint64_t t0,
			 uint64_t t1)
{
	sr_kernel_options ko;
	srd_session_kernel_options(ctx, sb->session, &ko);
	if (!ko.policy->commands_enabled) {
		jupyter_error(
		    res, 403,
		    "bash runs are commands in the sandbox, and its policy does not allow "
		    "commands (commands.enabled)");
		return false;
	}
	o->started = true;
	if (srd_respond_stream(res, 200, "application/x-ndjson") < 0)
		o->gone = true;
	struct bash_end be = { 0 };
	bash_run(ctx, sb, code, o, req->peer ? req->peer->fd : -1, &be);
	if (be.started)
		bash_record(ctx, sb, req->peer, &be, t0, t1, strlen(code));
	c->executions++;
	cJSON *n = cJSON_CreateObject();
	cJSON_AddStringToObject(n, "type", "number_of_executions");
	cJSON_AddNumberToObject(n, "execution_count", c->executions);
	emit(o, n);
	cJSON *end = cJSON_CreateObject();
	cJSON_AddStringToObject(end, "type", "end_of_execution");
	emit(o, end);
	return true;
}

static const char restarted[] = "saferun: this context's interpreter had ended and was started "
				"again: its variables are gone (its files stay)\n";

static void execute(srd_ctx *ctx, srd_e2b_sandbox *sb, srd_request *req, srd_response *res)
{
	cJSON *body = NULL;
	srd_ferr e = { 0 };
	if (srd_json_parse_object(req->body ? req->body : "", req->body ? req->body_len : 0, &body,
				  &e)) {
		srd_e2b_error(res, e.status, e.msg);
		return;
	}
	const cJSON *code = srd_json_get(body, "code");
	const char *cid = cJSON_GetStringValue(srd_json_get(body, "context_id"));
	const char *lang = cJSON_GetStringValue(srd_json_get(body, "language"));
	const cJSON *envs = srd_json_get(body, "env_vars");
	srd_e2b_context *c = NULL;
	sr_language l = SR_LANG_PYTHON;
	if (!cJSON_IsString(code)) {
		jupyter_error(res, 400, "\"code\": required, a string");
	} else if (!e2b_language(lang, &l)) {
		language_refused(res, lang);
	} else if (envs && cJSON_GetArraySize(envs) > 0) {
		jupyter_error(res, 400,
			      "\"env_vars\" (runCode's envs) are not supported: set envs when the "
			      "sandbox is created");
	} else if (cid && !(c = context_find(sb, cid))) {
		jupyter_error(res, 404, "context \"%.64s\" not found", cid);
	} else if (!cid) {
		c = language_context(sb, l, res);
	}
	if (!c) {
		cJSON_Delete(body);
		return;
	}
	uint64_t t0 = srd_now_ms();
	if (srd_run_enter_gate(ctx, req->peer, &e) != SRD_GATE_OK) {
		srd_e2b_error(res, e.status, e.msg);
		res->retry_after = e.retry_after;
		context_release(sb, c);
		cJSON_Delete(body);
		return;
	}
	pthread_rwlock_rdlock(&sb->exec_gate);
	pthread_mutex_lock(&c->run_lock);
	uint64_t t1 = srd_now_ms();
	struct out o = { .res = res };
	sr_result r;
	sr_error err = { 0 };
	bool fresh = false, ran = false;
	if (srd_e2b_paused(sb)) {
		jupyter_error(res, 502, "sandbox \"%s\" is paused: resume it (Sandbox.connect)",
			      sb->id);
	} else if (c->removed) {
		jupyter_error(res, 404, "context \"%s\" was removed", c->id);
	} else if (c->language == SR_LANG_BASH) {
		ran = execute_bash(ctx, sb, c, cJSON_GetStringValue(code), req, res, &o, t0, t1);
	} else if (ensure_kernel(ctx, sb, c, &fresh, &err)) {
		srd_run_refused(&err, &e);
		srd_e2b_error(res, e.status, e.msg);
	} else {
		const char *text = cJSON_GetStringValue(code);
		sr_run_request rr = { .code = text,
				      .code_size = strlen(text),
				      .on_output = on_output,
				      .on_output_arg = &o };
		o.kernel = c->kernel;
		/* The headers at once, as E2B's interpreter sends them: the SDK's
		 * timeoutMs counts from there. */
		o.started = true;
		if (srd_respond_stream(res, 200, "application/x-ndjson") < 0)
			o.gone = true;
		if (fresh)
			emit_text(&o, "stderr", restarted, strlen(restarted));
		struct watch w;
		watch_start(&w, req->peer->fd, c->kernel);
		int rc = sr_kernel_run(c->kernel, &rr, &r, &err);
		watch_stop(&w);
		flush_output(&o);
		if (rc < 0 && o.started) { /* it had begun: the error is an item */
			emit_error(&o, "SaferunError", err.msg, "");
		} else if (rc < 0) {
			srd_run_refused(&err, &e);
			srd_e2b_error(res, e.status, e.msg);
		} else {
			ran = true;
			c->executions++;
			bool died = !sr_kernel_alive(c->kernel);
			bool had_error = emit_notebook(&o, sb, c);
			if (!had_error && r.status != SR_STATUS_OK && r.status != SR_STATUS_ERROR)
				emit_status_error(&o, &r, died);
			else if (!had_error && r.status == SR_STATUS_ERROR)
				emit_error(&o, "Error", r.message, "");
			cJSON *n = cJSON_CreateObject();
			cJSON_AddStringToObject(n, "type", "number_of_executions");
			cJSON_AddNumberToObject(n, "execution_count", c->executions);
			emit(&o, n);
			cJSON *end = cJSON_CreateObject();
			cJSON_AddStringToObject(end, "type", "end_of_execution");
			emit(&o, end);
			if (died) {
				drop_kernel(sb, c);
				c->lost = true;
			}
			srd_run_record(ctx, &r, c->language, srd_session_policy_name(sb->session),
				       sb->id, req->peer, t1 - t0, srd_now_ms() - t0, rr.code_size);
			sr_result_free(&r);
		}
	}
	pthread_mutex_unlock(&c->run_lock);
	if (srd_e2b_paused(sb)) /* paused at its timeout during the run: a kernel it started too */
		srd_e2b_contexts_freeze(sb, true);
	pthread_rwlock_unlock(&sb->exec_gate);
	srd_run_leave_gate(ctx, req->peer);
	if (ran && !res->streamed) {
		if (o.failed) {
			free(o.buf);
			jupyter_error(res, 500, "out of memory for the run's answer");
		} else {
			srd_respond_text(res, 200, "application/x-ndjson", o.buf, o.len);
		}
	}
	context_release(sb, c);
	cJSON_Delete(body);
}

/* ---- contexts ----------------------------------------------------------- */

static void contexts_list(srd_ctx *ctx, srd_e2b_sandbox *sb, srd_request *req, srd_response *res)
{
	(void)ctx;
	(void)req;
	cJSON *arr = cJSON_CreateArray();
	pthread_mutex_lock(&sb->lock);
	for (srd_e2b_context *c = sb->contexts; c; c = c->next)
		cJSON_AddItemToArray(arr, context_json(sb, c));
	pthread_mutex_unlock(&sb->lock);
	srd_respond_json(res, 200, arr);
}

static void contexts_create(srd_ctx *ctx, srd_e2b_sandbox *sb, srd_request *req, srd_response *res)
{
	(void)ctx;
	cJSON *body = NULL;
	srd_ferr e = { 0 };
	bool none = !req->body || !req->body_len;
	if (srd_json_parse_object(none ? "{}" : req->body, none ? 2 : req->body_len, &body, &e))
		return srd_e2b_error(res, e.status, e.msg);
	const char *lang = cJSON_GetStringValue(srd_json_get(body, "language"));
	const char *cwd = cJSON_GetStringValue(srd_json_get(body, "cwd"));
	const char *workdir = srd_session_workdir(sb->session);
	sr_language l = SR_LANG_PYTHON;
	if (!e2b_language(lang, &l)) {
		language_refused(res, lang);
	} else if (cwd && strcmp(cwd, workdir) != 0) {
		jupyter_error(res, 400,
			      "\"cwd\": \"%.200s\": a context's working dir is the sandbox's (%s)",
			      cwd, workdir);
	} else {
		bool full = false;
		pthread_mutex_lock(&sb->lock);
		srd_e2b_context *c = add_context_locked(sb, NULL, l, &full);
		pthread_mutex_unlock(&sb->lock);
		if (c) {
			srd_respond_json(res, 200, context_json(sb, c));
			context_release(sb, c);
		} else {
			jupyter_error(res, full ? 429 : 500, "a sandbox has at most %d contexts",
				      MAX_CONTEXTS);
		}
	}
	cJSON_Delete(body);
}

static srd_e2b_context *path_context(srd_e2b_sandbox *sb, const srd_request *req, srd_response *res)
{
	srd_e2b_context *c = context_find(sb, req->params[0]);
	if (!c)
		jupyter_error(res, 404, "context \"%.64s\" not found", req->params[0]);
	return c;
}

static void contexts_delete(srd_ctx *ctx, srd_e2b_sandbox *sb, srd_request *req, srd_response *res)
{
	(void)ctx;
	srd_e2b_context *c = path_context(sb, req, res);
	if (!c)
		return;
	pthread_mutex_lock(&sb->lock);
	for (srd_e2b_context **p = &sb->contexts; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			c->removed = true;
			c->refs--; /* the list's */
			break;
		}
	sr_kernel_kill(c->kernel);
	pthread_mutex_unlock(&sb->lock);
	context_release(sb, c);
	srd_respond_text(res, 204, "application/json", NULL, 0);
}

static void contexts_restart(srd_ctx *ctx, srd_e2b_sandbox *sb, srd_request *req, srd_response *res)
{
	(void)ctx;
	srd_e2b_context *c = path_context(sb, req, res);
	if (!c)
		return;
	pthread_mutex_lock(&sb->lock);
	sr_kernel_kill(c->kernel); /* a run in progress ends now */
	pthread_mutex_unlock(&sb->lock);
	pthread_mutex_lock(&c->run_lock);
	drop_kernel(sb, c);
	c->executions = 0;
	c->lost = false; /* asked for: no notice */
	pthread_mutex_unlock(&c->run_lock);
	context_release(sb, c);
	srd_respond_text(res, 204, "application/json", NULL, 0);
}

static void jupyter_health(srd_ctx *ctx, srd_e2b_sandbox *sb, srd_request *req, srd_response *res)
{
	(void)ctx;
	(void)sb;
	(void)req;
	srd_respond_text(res, 200, "text/plain", strdup("OK"), 2);
}

typedef void (*jupyter_handler)(srd_ctx *, srd_e2b_sandbox *, srd_request *, srd_response *);

static const struct {
	const char *method, *pattern;
	jupyter_handler fn;
} routes[] = {
	{ "POST", "/execute", execute },
	{ "GET", "/contexts", contexts_list },
	{ "POST", "/contexts", contexts_create },
	{ "DELETE", "/contexts/{id}", contexts_delete },
	{ "POST", "/contexts/{id}/restart", contexts_restart },
	{ "GET", "/health", jupyter_health },
};

void srd_e2b_jupyter(srd_ctx *ctx, srd_e2b_sandbox *sb, srd_request *req, srd_response *res)
{
	bool known = false;
	for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
		if (!srd_e2b_match(routes[i].pattern, req->path, req))
			continue;
		known = true;
		if (strcmp(routes[i].method, req->method) == 0)
			return routes[i].fn(ctx, sb, req, res);
	}
	jupyter_error(res, known ? 405 : 404, "%s %s: no such code interpreter route", req->method,
		      req->path);
}

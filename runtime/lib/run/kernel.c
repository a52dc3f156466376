/* A kernel: one sandbox whose python serves many runs (stateful sessions).
 *
 * Built like sr_run's sandbox (sandbox.c), with the working dir bound from
 * a workspace and python running the runner's kernel mode: each run's
 * code and stdin go down the control socket in a sealed memfd, and python
 * answers "done" once the code finished and its output is flushed. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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
#include "checker/checker.h"
#include "deps.h"
#include "run.h"

#define CTL_MSG_MAX  65536
#define FLAG_NOCHECK 1

struct sr_kernel {
	sr_box box;
	sr_run_request start;   /* the policy and rootfs it was built with */
	sr_result info;         /* its id and cgroup mode */
	const sr_workspace *ws; /* its working dir (artifacts/ is read after each run) */
	sr_bind layer;          /* the session's dependency layer, if any */
	bool alive;
	bool keep_running; /* not frozen between runs (sr_kernel_options) */
};

int sr_kernel_start(const sr_kernel_options *o, sr_kernel **out, sr_error *err)
{
	sr_kernel *k = calloc(1, sizeof *k);
	if (!k)
		return sr_fail(err, ENOMEM, "allocate a kernel");
	k->start = (sr_run_request){ .policy = o->policy,
				     .rootfs_dir = o->rootfs_dir,
				     .language = o->language,
				     .cgroup_share = o->cgroup_share };
	if (sr_box_check_request(&k->start, err)) {
		free(k);
		return -1;
	}
	sr_box_init_result(&k->info, o->policy);
	sr_box_init(&k->box, &k->start, &k->info);
	k->box.kernel = true;
	k->box.workdir_host = o->workspace ? sr_workspace_path(o->workspace) : NULL;
	/* The workspace's ids: its files keep their owner from kernel to kernel. */
	k->box.shared_ids = o->workspace ? sr_workspace_ids(o->workspace) : NULL;
	k->ws = o->workspace;
	k->keep_running = o->keep_running;
	if (o->deps_layer) {
		if (sr_deps_bind(o->policy, o->rootfs_dir, o->deps_layer, &k->layer, err)) {
			free(k);
			return -1;
		}
		k->box.binds = &k->layer;
		k->box.n_binds = 1;
	}
	if (sr_box_prepare(&k->box, err) || sr_box_start(&k->box, err)) {
		sr_box_cleanup(&k->box);
		sr_deps_bind_free(&k->layer);
		free(k);
		return -1;
	}
	k->alive = true;
	*out = k;
	return 0;
}

bool sr_kernel_alive(const sr_kernel *k)
{
	if (!k->alive)
		return false;
	/* Between runs only its own background work can end it (an OOM kill
	 * of a thread the code left running): the pidfd says so. */
	struct pollfd p = { .fd = k->box.pidfd, .events = POLLIN };
	return poll(&p, 1, 0) == 0;
}

sr_box *sr_kernel_box(sr_kernel *k)
{
	return &k->box;
}

/* Code then stdin, sealed: the kernel reads them at its pace. */
static int code_memfd(const sr_run_request *req, sr_error *err)
{
	int fd = memfd_create("saferun-code", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return sr_fail(err, errno, "memfd for the code");
	const void *parts[2] = { req->code, req->stdin_data };
	size_t sizes[2] = { req->code_size, req->stdin_data ? req->stdin_size : 0 };
	for (int i = 0; i < 2; i++)
		if (sizes[i] && sr_write_all(fd, parts[i], sizes[i]) < 0) {
			close(fd);
			return sr_fail(err, errno, "write the code to its memfd");
		}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0 ||
	    lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return sr_fail(err, errno, "seal the code's memfd");
	}
	return fd;
}

/* "X" u32 code_len u32 stdin_len u8 flags, then the run's allow list
 * joined by \x1f (entries with control characters name nothing). */
static size_t ctl_message(const sr_run_request *req, char *msg)
{
	uint32_t lens[2] = { (uint32_t)req->code_size,
			     (uint32_t)(req->stdin_data ? req->stdin_size : 0) };
	msg[0] = 'X';
	memcpy(msg + 1, lens, sizeof lens);
	msg[9] = req->no_check ? FLAG_NOCHECK : 0;
	size_t len = 10;
	for (size_t i = 0; i < req->n_allow; i++) {
		const char *a = req->allow[i];
		size_t n = a ? strlen(a) : 0;
		bool ok = n > 0 && len + n + 1 <= CTL_MSG_MAX;
		for (size_t c = 0; ok && c < n; c++)
			ok = (unsigned char)a[c] >= 0x20;
		if (!ok)
			continue;
		memcpy(msg + len, a, n);
		len += n;
		msg[len++] = '\x1f';
	}
	return len;
}

/* Node cannot receive an fd (runner.js reads fd 3 with plain reads): a
 * JavaScript kernel gets the header without one, then the code in
 * messages of at most CTL_CHUNK bytes, each sent within CTL_SEND_MS. */
#define CTL_CHUNK   32768
#define CTL_SEND_MS 5000

static int send_msg(int sock, const void *data, size_t len)
{
	struct pollfd p = { .fd = sock, .events = POLLOUT };
	if (poll(&p, 1, CTL_SEND_MS) != 1)
		return errno = ETIMEDOUT, -1;
	return send(sock, data, len, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

static int send_run_inline(sr_kernel *k, const sr_run_request *req, sr_error *err)
{
	char msg[10];
	uint32_t lens[2] = { (uint32_t)req->code_size, 0 };
	msg[0] = 'X';
	memcpy(msg + 1, lens, sizeof lens);
	msg[9] = 0;
	int bad = send_msg(k->box.ctl[0], msg, sizeof msg);
	for (size_t at = 0; !bad && at < req->code_size; at += CTL_CHUNK) {
		size_t n = req->code_size - at < CTL_CHUNK ? req->code_size - at : CTL_CHUNK;
		bad = send_msg(k->box.ctl[0], req->code + at, n);
	}
	if (!bad)
		return 0;
	k->alive = false;
	return sr_refuse(err, ESRCH, "the kernel %s has ended (%s); start another", k->info.id,
			 strerror(errno));
}

static int send_run(sr_kernel *k, const sr_run_request *req, sr_error *err)
{
	if (k->start.language != SR_LANG_PYTHON)
		return send_run_inline(k, req, err);
	int fd = code_memfd(req, err);
	if (fd < 0)
		return -1;
	char *msg = malloc(CTL_MSG_MAX);
	if (!msg) {
		close(fd);
		return sr_fail(err, ENOMEM, "the kernel's control message");
	}
	size_t len = ctl_message(req, msg);
	ssize_t n = sr_send_fd(k->box.ctl[0], msg, len, fd, MSG_DONTWAIT);
	int e = errno;
	close(fd);
	free(msg);
	if (n == (ssize_t)len)
		return 0;
	k->alive = false;
	return sr_refuse(err, ESRCH, "the kernel %s has ended (%s); start another", k->info.id,
			 strerror(n < 0 ? e : EIO));
}

/* The run's limits: the kernel's, lowered (never raised) by req->policy. */
static void run_limits(const sr_kernel *k, const sr_run_request *req, uint64_t *wall, uint64_t *out)
{
	const sr_limits *kl = &k->start.policy->limits;
	*wall = kl->wall_ms;
	*out = kl->output_bytes;
	if (req->policy) {
		const sr_limits *rl = &req->policy->limits;
		*wall = rl->wall_ms < *wall ? rl->wall_ms : *wall;
		*out = rl->output_bytes < *out ? rl->output_bytes : *out;
	}
}

/* What the code left running (a thread, a child) gets no CPU between
 * runs: it is work outside any run slot. Thawed again for the next run. */
static void freeze_between_runs(sr_kernel *k)
{
	sr_error err = { 0 };
	if (k->alive && !k->keep_running && sr_cgroup_freeze(k->box.cg, true, &err) < 0)
		k->alive = false; /* it would run on unwatched: end it instead */
}

int sr_kernel_freeze(sr_kernel *k, bool frozen, sr_error *err)
{
	if (!k || !k->box.cg)
		return sr_refuse(err, ESRCH, "the kernel has ended");
	return sr_cgroup_freeze(k->box.cg, frozen, err);
}

int sr_kernel_run(sr_kernel *k, const sr_run_request *req, sr_result *res, sr_error *err)
{
	if (!sr_kernel_alive(k)) {
		k->alive = false;
		return sr_refuse(err, ESRCH, "the kernel %s has ended; start another", k->info.id);
	}
	if (sr_check_source_text(req->code, req->code_size, err))
		return -1;
	if (req->n_files)
		return sr_refuse(err, EINVAL,
				 "files cannot be given to a kernel run (write them into its "
				 "workspace)");
	/* 0 (python, the default) on a kernel of another language: its own. */
	if (req->language != SR_LANG_PYTHON && req->language != k->start.language)
		return sr_refuse(
		    err, EINVAL, "this kernel runs %s, not %s (start a session in that language)",
		    sr_language_name(k->start.language), sr_language_name(req->language));
	if (k->start.language != SR_LANG_PYTHON && req->stdin_data && req->stdin_size)
		return sr_refuse(err, EINVAL,
				 "stdin is not supported for %s session runs (write it to a "
				 "file in the workspace)",
				 sr_language_name(k->start.language));
	sr_box_init_result(res, k->start.policy);
	memcpy(res->id, k->info.id, sizeof res->id);
	memcpy(res->cgroup_mode, k->info.cgroup_mode, sizeof res->cgroup_mode);
	/* The kernel's checker settings, this run's allow list. */
	sr_run_request vet = *req;
	vet.language = k->start.language;
	vet.policy = k->start.policy;
	vet.rootfs_dir = k->start.rootfs_dir;
	if (sr_box_vet(&vet, res) < 0) {
		sr_box_syntax_error(&vet, res);
		return 0;
	}
	uint64_t wall, out;
	run_limits(k, req, &wall, &out);
	sr_cgroup_stats before;
	sr_cgroup_read_stats(k->box.cg, &before);
	/* This run's artifacts: what it adds or changes in artifacts/. */
	sr_artifacts_snap snap = { 0 };
	if (k->ws)
		sr_artifacts_snapshot(k->ws, &snap);
	if (sr_cgroup_freeze(k->box.cg, false, err) || send_run(k, req, err)) {
		sr_artifacts_snap_free(&snap);
		return -1;
	}
	k->box.res = res;
	k->box.on_output = req->on_output;
	k->box.on_output_arg = req->on_output_arg;
	sr_outcome oc;
	sr_error inner = { 0 };
	int rc = sr_box_watch(&k->box, wall, out, &before, &oc, &inner);
	k->box.res = &k->info;
	k->box.on_output = NULL;
	k->box.on_output_arg = NULL;
	if (rc < 0) {
		res->status = SR_STATUS_INTERNAL_ERROR;
		snprintf(res->message, sizeof res->message, "internal_error: %s", inner.msg);
	}
	if (!oc.done)
		k->alive = false; /* the caller says what that means for its users */
	freeze_between_runs(k);
	if (k->ws) {
		res->hit_tmpfs = sr_workspace_full(k->ws); /* the session's disk */
		sr_artifacts_collect(k->ws, &snap, res);
	}
	sr_artifacts_snap_free(&snap);
	return 0;
}

void sr_kernel_kill(sr_kernel *k)
{
	/* The pidfd stays open until sr_kernel_stop: no pid reuse race. */
	if (k && k->box.pidfd >= 0)
		syscall(SYS_pidfd_send_signal, k->box.pidfd, SIGKILL, NULL, 0);
	/* A v1 frozen task dies only once thawed. */
	sr_error err = { 0 };
	if (k && k->box.cg)
		sr_cgroup_freeze(k->box.cg, false, &err);
}

void sr_kernel_stop(sr_kernel *k)
{
	if (!k)
		return;
	/* Thawed first: the cleanup waits for pid 1 to die of its SIGKILL,
	 * which a v1 frozen task never does. */
	sr_error err = { 0 };
	if (k->box.cg)
		sr_cgroup_freeze(k->box.cg, false, &err);
	sr_box_cleanup(&k->box);
	sr_deps_bind_free(&k->layer);
	free(k);
}

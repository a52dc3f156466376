/* saferund: the root-helper daemon. Serves runs over a unix socket (and
 * optionally loopback TCP with a token) from one process that owns the
 * sandboxes' cgroups: it clears a crashed instance's leftovers when it
 * starts, drains on SIGTERM and reloads policies on SIGHUP.
 * saferund --stdio (what `saferun mcp` runs) serves one MCP client on
 * stdin/stdout instead, next to any daemon: no sockets, its sessions in
 * a dir of its own, and it clears nothing it did not make. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "daemon.h"
#include "listen.h"
#include "log.h"
#include "mcp.h"
#include "server.h"
#include "sessions.h"
#include "warm_pools.h"

static int signal_pipe[2] = { -1, -1 };

static void on_signal(int sig)
{
	int saved = errno;
	unsigned char b = (unsigned char)sig;
	ssize_t n = write(signal_pipe[1], &b, 1);
	(void)n;
	errno = saved;
}

/* A handler, not SIG_IGN: an ignored SIGPIPE would be inherited by the
 * sandboxed code across exec. Writes to a closed pipe fail with EPIPE. */
static void on_sigpipe(int sig)
{
	(void)sig;
}

static int install_signals(void)
{
	if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
	sigemptyset(&sa.sa_mask);
	int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGUSR1 };
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
		if (sigaction(sigs[i], &sa, NULL) < 0)
			return -1;
	sa.sa_handler = on_sigpipe;
	return sigaction(SIGPIPE, &sa, NULL);
}

static void cleanup_stale(const char *when)
{
	sr_error err = { 0 };
	int n = sr_cleanup_stale(&err);
	if (n < 0)
		srd_log("error", "cleanup", "%s: %s", when, err.msg);
	else if (n > 0)
		srd_log("warning", "cleanup", "%s: removed %d sandbox group%s left behind", when, n,
			n == 1 ? "" : "s");
	/* egress: a crashed run's veths went with its sandbox; the host
	 * table and the uplinks' forwarding stay until no sandbox veth is
	 * left (docs/network.md) */
	sr_error nerr = { 0 };
	n = sr_net_cleanup_stale(&nerr);
	if (n < 0)
		srd_log("error", "cleanup", "%s: %s", when, nerr.msg);
	if (n > 0 && (n & SR_NET_CLEANED_TABLE))
		srd_log("warning", "cleanup",
			"%s: removed the egress table inet saferun left behind", when);
	if (n > 0 && (n & SR_NET_CLEANED_FORWARDING))
		srd_log("warning", "cleanup",
			"%s: put back the uplinks' forwarding an egress run left on", when);
}

static void log_ready(srd_ctx *ctx, const srd_listener *ls, int n)
{
	cJSON *line = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(line, "listeners");
	for (int i = 0; i < n; i++) {
		cJSON *l = cJSON_CreateObject();
		cJSON_AddStringToObject(l,
					ls[i].is_unix ? "socket"
					: ls[i].e2b   ? "e2b"
						      : "tcp",
					ls[i].name);
		cJSON_AddBoolToObject(l, "token", ls[i].need_token);
		cJSON_AddItemToArray(arr, l);
	}
	cJSON_AddStringToObject(line, "version", SR_VERSION);
	cJSON_AddNumberToObject(line, "pid", getpid());
	if (ctx->cfg->node_id)
		cJSON_AddStringToObject(line, "node", ctx->cfg->node_id);
	cJSON_AddNumberToObject(line, "max_concurrent_runs", ctx->gate.max_running);
	cJSON_AddNumberToObject(line, "queue_depth", ctx->gate.max_waiting);
	cJSON_AddItemToObject(line, "policies", srd_policies_names(ctx->policies));
	srd_log_json("ready", line);
}

/* A signal arrived on fd: SIGHUP reloads the policies; SIGUSR1 drains
 * without stopping (the router moves new work elsewhere, open sessions go
 * on); true for one that stops us (SIGTERM, SIGINT). */
static bool on_signal_fd(srd_ctx *ctx, int fd)
{
	unsigned char sig;
	if (read(fd, &sig, 1) != 1)
		return false;
	if (sig == SIGUSR1) {
		if (!atomic_exchange(&ctx->draining, true))
			srd_log("info", "drain",
				"SIGUSR1: draining, no new sessions or runs; "
				"open sessions go on until SIGTERM");
		return false;
	}
	if (sig != SIGHUP) {
		srd_log("info", "shutdown", "signal %d: draining", sig);
		return true;
	}
	char msg[1024];
	int n = srd_policies_reload(ctx->policies, msg, sizeof msg);
	if (n < 0) {
		srd_log("error", "reload", "policies not reloaded, the old ones stay: %s", msg);
	} else {
		srd_log("info", "reload", "%d policies loaded", n);
		srd_warm_reload(ctx->warm, ctx->policies);
	}
	return false;
}

/* Serve until SIGTERM or SIGINT; SIGHUP reloads the policies. */
static void serve(srd_ctx *ctx)
{
	for (;;) {
		struct pollfd pfd = { .fd = signal_pipe[0], .events = POLLIN };
		/* Once a second: close the sessions past their TTL. */
		int ready = poll(&pfd, 1, 1000);
		if (ready < 0 && errno != EINTR)
			return;
		srd_sessions_reap(ctx->sessions);
		if (ready > 0 && on_signal_fd(ctx, signal_pipe[0]))
			return;
	}
}

/* Stop taking work, let the runs finish within the grace period, end the
 * ones still going, then close every connection. The listeners accept
 * until the runs are done: a router's health check then reads "draining"
 * from /v1/ready (and new work gets a 503 it can retry elsewhere) instead
 * of a refused connection; the unix socket's path goes at once. */
static void drain(srd_ctx *ctx, srd_server *srv, srd_listener *ls, int n)
{
	atomic_store(&ctx->draining, true);
	srd_listen_unlink(ls, n);
	srd_gate_close(&ctx->gate);
	if (!srd_gate_wait_idle(&ctx->gate, ctx->cfg->shutdown_grace_ms)) {
		srd_log("warning", "shutdown", "grace period over: killing the runs still going");
		cleanup_stale("shutdown"); /* their results say "killed" */
		srd_gate_wait_idle(&ctx->gate, 10000);
	}
	srd_server_quiesce(srv);
	/* Let the last answers go out before the connections close. */
	for (int i = 0; i < 500 && atomic_load(&ctx->requests_active); i++)
		usleep(10000);
	srd_server_stop(srv);
	srd_listen_close(ls, n);
	srd_warm_close(ctx->warm); /* its zygotes and ready sandboxes */
	ctx->warm = NULL;
	/* No handler runs any more: the sessions (their kernels and tmpfs
	 * workspaces) close with the daemon. */
	srd_sessions_close(ctx->sessions);
	ctx->sessions = NULL;
	cleanup_stale("shutdown");
}

/* Remove every "flag" from argv; was there one? */
static bool take_flag(int *argc, char **argv, const char *flag)
{
	int n = 0;
	for (int i = 0; i < *argc; i++)
		if (i == 0 || strcmp(argv[i], flag) != 0)
			argv[n++] = argv[i];
	bool found = n != *argc;
	*argc = n;
	argv[n] = NULL;
	return found;
}

/* The stdio servers' sessions live in BASE/PID: clear those of servers
 * that are gone (killed, or their client vanished). */
static void sweep_dead_stdio(const char *base)
{
	DIR *d = opendir(base);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char *end, path[4096];
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0 || (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
			continue;
		snprintf(path, sizeof path, "%s/%s", base, de->d_name);
		sr_error err = { 0 };
		if (sr_workspace_cleanup_stale(path, &err) < 0 || rmdir(path) < 0)
			srd_log("warning", "cleanup", "stdio server %ld's sessions: %s", pid,
				err.msg[0] ? err.msg : strerror(errno));
	}
	if (d)
		closedir(d);
}

static int serve_stdio(srd_ctx *ctx, srd_config *cfg, bool dir_given, char *msg, size_t size)
{
	const char *base = dir_given ? cfg->workspaces_dir : SRD_STDIO_WORKSPACES;
	char *own = NULL;
	if (asprintf(&own, "%s/%d", base, (int)getpid()) < 0)
		return snprintf(msg, size, "out of memory"), -1;
	sweep_dead_stdio(base);
	free(cfg->workspaces_dir);
	cfg->workspaces_dir = own;
	if (srd_sessions_open(cfg, &ctx->sessions, msg, size) ||
	    srd_warm_open(ctx->policies, cfg->rootfs_dir, &ctx->warm, msg, size))
		return -1;
	cJSON *line = cJSON_CreateObject();
	cJSON_AddStringToObject(line, "transport", "stdio");
	cJSON_AddStringToObject(line, "version", SR_VERSION);
	cJSON_AddNumberToObject(line, "pid", getpid());
	cJSON_AddStringToObject(line, "workspaces", own);
	srd_log_json("ready", line);
	int rc = srd_mcp_stdio(ctx, STDIN_FILENO, STDOUT_FILENO, signal_pipe[0], on_signal_fd);
	srd_warm_close(ctx->warm);
	ctx->warm = NULL;
	srd_sessions_close(ctx->sessions);
	ctx->sessions = NULL;
	rmdir(own);
	srd_log("info", "shutdown", "stopped%s", rc ? " (stdout closed)" : "");
	return 0;
}

/* With a tenants file, every client is one of its tenants: no token
 * outside it, no TCP without one, no policy it names missing. */
static int check_tenants(srd_ctx *ctx, const srd_config *cfg, const char *token, char *msg,
			 size_t size)
{
	const srd_tenants *ts = &ctx->tenants;
	if (!ts->from_file)
		return 0;
	if (token)
		return snprintf(msg, size,
				"token_file / SAFERUND_TOKEN: with a tenants file (%s) TCP tokens "
				"are the tenants' own; move this token into a tenant's \"tokens\"",
				cfg->tenants_file),
		       -1;
	if (cfg->insecure_no_token)
		return snprintf(msg, size,
				"insecure_no_token: a client without a token would be no tenant "
				"(tenants file %s)",
				cfg->tenants_file),
		       -1;
	for (size_t i = 0; i < ts->n; i++)
		for (size_t j = 0; j < ts->t[i].n_policies; j++)
			if (!srd_policies_has(ctx->policies, ts->t[i].policies[j]))
				return snprintf(msg, size,
						"tenants %s: tenants[%zu].policies[%zu]: no policy "
						"\"%s\" in %s",
						cfg->tenants_file, i, j, ts->t[i].policies[j],
						cfg->policies_dir),
				       -1;
	return 0;
}

/* One class of the run gate per tenant, its quotas the class's caps.
 * Without a tenants file the gate stays one FIFO, as before tenants. */
static int gate_tenants(srd_gate *g, const srd_tenants *ts)
{
	if (!ts->from_file)
		return 0;
	unsigned running[SRD_TENANTS_MAX], waiting[SRD_TENANTS_MAX], weight[SRD_TENANTS_MAX];
	for (size_t i = 0; i < ts->n; i++) {
		running[i] = (unsigned)ts->t[i].max_runs;
		waiting[i] = (unsigned)ts->t[i].queue_depth;
		weight[i] = ts->t[i].weight;
	}
	return srd_gate_set_classes(g, (unsigned)ts->n, running, waiting, weight);
}

static int start(srd_ctx *ctx, srd_config *cfg, char **token, char *msg, size_t size)
{
	if (geteuid() != 0)
		return snprintf(msg, size,
				"saferund must run as root: it builds namespaces and "
				"cgroups (the code it runs never is)"),
		       -1;
	if (srd_token_load(cfg->token_file, token, msg, size) ||
	    srd_policies_open(cfg->policies_dir, cfg->policies_dir_given, &ctx->policies, msg,
			      size))
		return -1;
	if (!srd_policies_has(ctx->policies, cfg->default_policy))
		return snprintf(msg, size, "default_policy: no policy \"%s\" in %s",
				cfg->default_policy, cfg->policies_dir),
		       -1;
	if (srd_tenants_load(cfg, &ctx->tenants, msg, size) ||
	    check_tenants(ctx, cfg, *token, msg, size))
		return -1;
	if (srd_gate_init(&ctx->gate, (unsigned)cfg->max_runs, (unsigned)cfg->queue_depth) ||
	    gate_tenants(&ctx->gate, &ctx->tenants) ||
	    srd_metrics_init(&ctx->metrics, &ctx->tenants) || install_signals())
		return snprintf(msg, size, "start-up: %s", strerror(errno)), -1;
	ctx->cfg = cfg;
	ctx->token = *token;
	ctx->started_ms = srd_now_ms();
	if (srd_mcp_open(&ctx->mcp))
		return snprintf(msg, size, "start-up: out of memory"), -1;
	return 0;
}

int main(int argc, char **argv)
{
	srd_config cfg;
	srd_ctx ctx = { 0 };
	srd_listener ls[SRD_MAX_LISTENERS];
	srd_server *srv = NULL;
	char msg[1024], *token = NULL;
	bool stdio = take_flag(&argc, argv, "--stdio"), dir_given = false;
	for (int i = 1; i < argc; i++)
		dir_given |= strncmp(argv[i], "--workspaces-dir", 16) == 0;
	int n = 0, rc = srd_config_load(&cfg, argc, argv, msg, sizeof msg);
	if (rc == 0 && stdio) {
		/* no token, no listeners: stdin/stdout is the one client */
		free(cfg.token_file);
		cfg.token_file = NULL;
		free(cfg.tenants_file); /* one client: the default tenant */
		cfg.tenants_file = NULL;
		rc = start(&ctx, &cfg, &token, msg, sizeof msg);
		rc = rc ? rc : serve_stdio(&ctx, &cfg, dir_given, msg, sizeof msg);
	} else if (rc == 0 && start(&ctx, &cfg, &token, msg, sizeof msg) == 0) {
		/* Listeners first: a live instance on our socket stops us before
		 * the clean-up could end its runs. */
		n = srd_listen_open(&cfg, token || srd_tenants_have_tokens(&ctx.tenants), ls, msg,
				    sizeof msg);
		if (n > 0)
			cleanup_stale("start-up");
		/* After the clean-up, which removes a previous instance's. */
		rc = n < 0 ? -1 : srd_tenants_make_cgroups(&ctx.tenants, msg, sizeof msg);
		rc = rc < 0 ? -1 : srd_sessions_open(&cfg, &ctx.sessions, msg, sizeof msg);
		/* After the clean-up: it would end the zygotes. */
		rc = rc < 0
			 ? -1
			 : srd_warm_open(ctx.policies, cfg.rootfs_dir, &ctx.warm, msg, sizeof msg);
		rc = rc < 0 ? -1 : srd_server_start(&ctx, ls, n, &srv, msg, sizeof msg);
		if (rc == 0) {
			log_ready(&ctx, ls, n);
			serve(&ctx);
			drain(&ctx, srv, ls, n);
			srd_log("info", "shutdown", "stopped");
		} else if (n > 0) {
			srd_listen_unlink(ls, n);
			srd_listen_close(ls, n);
			cleanup_stale("start-up failed"); /* the tenants' groups */
		}
	} else if (rc == 0) {
		rc = -1;
	}
	if (rc < 0)
		srd_log("error", "start", "saferund: %s", msg);
	srd_sessions_close(ctx.sessions);
	srd_mcp_close(ctx.mcp);
	srd_policies_close(ctx.policies);
	srd_tenants_free(&ctx.tenants);
	if (ctx.cfg) {
		srd_gate_destroy(&ctx.gate);
		srd_metrics_destroy(&ctx.metrics);
	}
	free(token);
	srd_config_free(&cfg);
	return rc < 0 ? 2 : 0;
}

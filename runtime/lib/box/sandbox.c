/* The construction sequence of one sandbox, top to bottom.
 *
 * Supervisor: validate -> cgroup with limits -> pipes -> clone3 into new
 * namespaces (and the cgroup, on v2) -> uid/gid maps -> lo up -> release.
 * Child (contain): private mounts -> new root -> hostname -> rlimits ->
 * stdio -> drop to the sandbox user, all capabilities, no_new_privs ->
 * close fds -> seccomp -> fork python, stay as the namespace's init.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "artifacts.h"
#include "base/base.h"
#include "cgroup.h"
#include "checker/checker.h"
#include "child/child.h"
#include "egress.h"
#include "language.h"
#include "mounts.h"
#include "net.h"
#include "policy/policy.h"
#include "runner_cache.h"
#include "sandbox.h"
#include "supervise.h"
#include "workspace.h"

extern const unsigned char sr_embedded_runner[];
extern const size_t sr_embedded_runner_len;
extern const unsigned char sr_embedded_runner_js[];

/* The runner's status when its audit hook blocked an event (rootfs/runner.py). */
#define SR_EXIT_BLOCKED   121
#define SR_BLOCKED_PREFIX "saferun: blocked "

/* ---- the child ----------------------------------------------------------- */

static __attribute__((noreturn)) void contain(sr_child *c)
{
	char what[200], go;
	int rc;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		sr_child_fail(c, errno, "set the parent-death signal");
	if ((rc = sr_cgroup_join_self(c->join_fds, c->n_join_fds)) < 0)
		sr_child_fail(c, -rc, "join the sandbox cgroup");
	if (read(c->sync_fd, &go, 1) != 1)
		_exit(127); /* the supervisor gave up on us */
	close(c->sync_fd);
	/* The maps are written: become the namespace's root (the first uid
	 * of its host id slot), or files we create would belong to no one. */
	if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, 0, 0, 0) < 0 ||
	    syscall(SYS_setresuid, 0, 0, 0) < 0) /* raw: see caps.c */
		sr_child_fail(c, errno, "become root of the user namespace");
	/* The gid switch cleared the parent-death signal: arm it again at
	 * once, or a supervisor killed while this sandbox is set up (between
	 * here and sr_child_lock_down) would leave it running. */
	if (c->pdeath && prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		sr_child_fail(c, errno, "set the parent-death signal");
	/* Now inside our cgroup: make it the root of what /proc shows. */
	if (unshare(CLONE_NEWCGROUP) < 0)
		sr_child_fail(c, errno, "create the cgroup namespace");
	sr_child_bound_user_counts(c);
	if ((rc = sr_mounts_apply(c->plan, c->workdir, what, sizeof what)) < 0)
		sr_child_fail(c, -rc, "%s", what);
	if (c->wd_fd >= 0)
		sr_child_send_workdir(c);
	if (sethostname("sandbox", 7) < 0)
		sr_child_fail(c, errno, "set the hostname");
	sr_child_lock_down(c);
	sr_child_become_init(c, false);
	_exit(127); /* not reached: init never returns, python execs */
}

/* ---- the supervisor ------------------------------------------------------- */

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int sr_box_check_request(const sr_run_request *req, sr_error *err)
{
	if (geteuid() != 0)
		return sr_refuse(err, EPERM,
				 "saferun must run as root: it builds namespaces and cgroups "
				 "(run it with sudo, or use the saferund daemon)");
	if (!req->policy)
		return sr_refuse(err, EINVAL, "no policy given");
	if (!sr_language_info_of(req->language)) {
		sr_refuse(err, EINVAL, "language %d is not one of python, javascript, bash",
			  (int)req->language);
		return sr_error_mark(err, SR_ERR_LANGUAGE);
	}
	if (req->language != SR_LANG_PYTHON && req->n_requirements) {
		sr_refuse(err, EINVAL,
			  "requirements are Python packages: a %s run cannot have them",
			  sr_language_name(req->language));
		return sr_error_mark(err, SR_ERR_REQUIREMENTS);
	}
	if (req->code && sr_check_source_text(req->code, req->code_size, err))
		return -1;
	uint64_t total = req->code_size;
	for (size_t i = 0; i < req->n_files; i++)
		total += req->files[i].size;
	if (total > req->policy->limits.tmpfs_bytes)
		return sr_refuse(err, EFBIG,
				 "the code and files total %llu bytes, over the writable "
				 "tmpfs limit of %llu bytes (raise limits.tmpfs)",
				 (unsigned long long)total,
				 (unsigned long long)req->policy->limits.tmpfs_bytes);
	char buf[64];
	if (sr_read_file("/proc/sys/user/max_user_namespaces", buf, sizeof buf) > 0 &&
	    atoi(buf) == 0)
		return sr_refuse(err, EPERM,
				 "user namespaces are disabled on this kernel "
				 "(sysctl user.max_user_namespaces=10000)");
	return 0;
}

static int append(char **s, size_t *len, const char *part)
{
	size_t n = strlen(part);
	char *grown = realloc(*s, *len + n + 1);
	if (!grown)
		return -1;
	memcpy(grown + *len, part, n + 1);
	*s = grown;
	*len += n;
	return 0;
}

/* The runner's audit-hook settings: "net=0\x1edirs=/work\x1f/tmp\x1eallow=a\x1fb".
 * Allow-list entries with separators or control characters cannot name
 * anything and are left out. */
char *sr_box_runner_guard(const sr_run_request *req)
{
	const sr_policy *p = req->policy;
	char *s = NULL;
	size_t len = 0;
	int bad = append(&s, &len,
			 p->net_mode == SR_NET_NONE ? "net=0\x1e"
						      "dirs="
						    : "net=1\x1e"
						      "dirs=");
	bad |= append(&s, &len, p->workdir);
	for (size_t i = 0; i < p->n_writable; i++)
		bad |= append(&s, &len, "\x1f") | append(&s, &len, p->writable[i]);
	bad |= append(&s, &len,
		      "\x1e"
		      "allow=");
	char **lists[] = { p->checker.allow, p->checker.rules_off, (char **)req->allow };
	size_t counts[] = { p->checker.n_allow, p->checker.n_rules_off, req->n_allow };
	for (int l = 0; l < 3; l++)
		for (size_t i = 0; i < counts[l]; i++) {
			const char *a = lists[l][i];
			int ok = a && *a;
			for (const char *c = a; ok && *c; c++)
				ok = (unsigned char)*c >= 0x20 && *c != '=';
			if (ok)
				bad |= append(&s, &len, a) | append(&s, &len, "\x1f");
		}
	if (bad) {
		free(s);
		return NULL;
	}
	return s;
}

static int run_box(sr_box *b, sr_error *err);

/* The runner compiled by this rootfs's python, made on the first miss by
 * a sandbox of the same policy that runs nothing but the compile (no
 * one's code: what it writes is trusted like the rootfs itself), without
 * a network and with the default limits (a policy's small output cap
 * would fail it, and every run would try again). Whatever fails, the run
 * goes on with the runner's source on the command line. */
static void open_runner(sr_box *r)
{
	bool miss;
	if (r->source_runner || (r->runner_fd = sr_runner_cache_open(r->rootfs, &miss)) >= 0 ||
	    !miss)
		return;
	sr_policy *p = sr_policy_dup(r->p);
	if (!p)
		return;
	p->net_mode = SR_NET_NONE;
	sr_error e = { 0 };
	if (sr_policy_apply_preset(p, "medium", &e) < 0) {
		sr_policy_free(p);
		return;
	}
	sr_run_request req = { .policy = p,
			       .code = sr_runner_compile_py,
			       .code_size = strlen(sr_runner_compile_py),
			       .stdin_data = sr_embedded_runner,
			       .stdin_size = sr_embedded_runner_len,
			       .rootfs_dir = r->req->rootfs_dir,
			       .no_check = true };
	sr_result res;
	sr_box_init_result(&res, p);
	sr_box b;
	sr_box_init(&b, &req, &res);
	b.source_runner = true;
	if (run_box(&b, &e) == 0 && res.status == SR_STATUS_OK && res.out.len > 4)
		sr_runner_cache_store(r->rootfs, res.out.data, res.out.len);
	sr_result_free(&res);
	sr_policy_free(p);
	r->runner_fd = sr_runner_cache_open(r->rootfs, &miss);
}

/* JavaScript and bash run their file as is (`node main.js`, `bash
 * main.sh`): their own error reports and exit codes; a JavaScript kernel
 * runs rootfs/runner.js instead, which keeps one context across runs. */
static int language_argv(sr_box *r, const sr_language_info *lang, sr_error *err)
{
	char *base = strrchr(lang->interpreter, '/') + 1;
	if (r->pooled && r->req->language == SR_LANG_JAVASCRIPT) {
		char *argv[] = { base, "-r", "./" SR_NODE_PRELOAD, (char *)lang->code_file, NULL };
		memcpy(r->argv, argv, sizeof argv);
		return 0;
	}
	if (!r->kernel) {
		char *argv[] = { base, (char *)lang->code_file, NULL };
		memcpy(r->argv, argv, sizeof argv);
		return 0;
	}
	if (r->req->language != SR_LANG_JAVASCRIPT)
		return sr_refuse(err, EINVAL,
				 "a session (kernel) runs python or javascript, not %s (run "
				 "%s code one-shot, or from python/javascript)",
				 lang->name, lang->name);
	char *argv[] = { base, "-e", (char *)sr_embedded_runner_js, "saferun-kernel", NULL };
	memcpy(r->argv, argv, sizeof argv);
	return 0;
}

static int prepare(sr_box *r, sr_error *err)
{
	const sr_policy *p = r->p;
	const char *dir = r->req->rootfs_dir ? r->req->rootfs_dir : SR_DEFAULT_ROOTFS_DIR;
	const sr_language_info *lang = sr_language_info_of(r->req->language);
	if (sr_mounts_find_profile(dir, p->profile, &r->rootfs, err) ||
	    sr_language_check_profile(r->rootfs, p->profile, r->req->language, err))
		return -1;
	if (r->req->language == SR_LANG_PYTHON)
		open_runner(r);
	sr_fs_spec spec = {
		.rootfs = r->rootfs,
		.workdir = p->workdir,
		.writable = p->writable,
		.n_writable = p->n_writable,
		.tmpfs_bytes = p->limits.tmpfs_bytes,
		.uid = SR_SANDBOX_UID,
		.gid = SR_SANDBOX_GID,
		.workdir_host = r->workdir_host,
		/* A pooled sandbox's "code" is its preload (sandbox.h). */
		.code = r->kernel && !r->pooled ? NULL : r->req->code,
		.code_name = r->pooled ? SR_NODE_PRELOAD : lang->code_file,
		.code_size = r->req->code_size,
		.files = r->req->files,
		.n_files = r->req->n_files,
		.resolv_conf = r->egress ? sr_egress_resolv_conf(r->egress) : NULL,
		.hosts = r->egress ? sr_egress_hosts(r->egress) : NULL,
		.binds = r->binds,
		.n_binds = r->n_binds,
	};
	if (sr_mounts_plan(&spec, &r->plan, err) ||
	    sr_seccomp_compile_cached(&p->seccomp, NULL, &r->filter, err))
		return -1;
	r->envp = calloc(p->n_env + 1, sizeof *r->envp);
	if (!r->envp)
		return sr_fail(err, ENOMEM, "environment");
	memcpy(r->envp, p->env, p->n_env * sizeof *r->envp);
	if (r->req->language != SR_LANG_PYTHON)
		return language_argv(r, lang, err);
	if (!r->req->no_check && p->checker.enabled && !(r->guard = sr_box_runner_guard(r->req)))
		return sr_fail(err, ENOMEM, "the runner's settings");
	/* -s: HOME is the working dir, and a user site there (an uploaded
	 * .pth or usercustomize.py) would run before the runner's guard. */
	char *argv[] = { "python3",
			 "-B",
			 "-s",
			 "-u",
			 "-c",
			 r->runner_fd >= 0 ? (char *)sr_runner_stub : (char *)sr_embedded_runner,
			 r->guard ? r->guard : (r->kernel ? "" : NULL),
			 r->zygote   ? "zygote"
			 : r->kernel ? "kernel"
				     : NULL,
			 NULL };
	_Static_assert(sizeof argv == sizeof r->argv, "the runner's argv");
	memcpy(r->argv, argv, sizeof argv);
	return 0;
}

int sr_box_stdin_fd(const sr_run_request *req, sr_error *err)
{
	int fd;
	if (!req->stdin_data) {
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		return fd < 0 ? sr_fail(err, errno, "open /dev/null") : fd;
	}
	/* A sealed memfd: the code reads stdin at its own pace, and the
	 * supervisor never blocks writing it. */
	fd = memfd_create("saferun-stdin", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return sr_fail(err, errno, "memfd for stdin");
	if (sr_write_all(fd, req->stdin_data, req->stdin_size) < 0 || lseek(fd, 0, SEEK_SET) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		int e = errno;
		close(fd);
		return sr_fail(err, e, "write stdin");
	}
	return fd;
}

static int open_pipes(sr_box *r, sr_error *err)
{
	if (pipe2(r->sync, O_CLOEXEC) < 0 || pipe2(r->report, O_CLOEXEC) < 0 ||
	    pipe2(r->out, O_CLOEXEC) < 0 || pipe2(r->err, O_CLOEXEC) < 0)
		return sr_fail(err, errno, "create pipes");
	/* Message boundaries for free, and fds (the code's memfd) ride along. */
	if (r->kernel && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, r->ctl) < 0)
		return sr_fail(err, errno, "create the kernel's control socket");
	/* A one-shot run's working dir dies with it: its fd comes back here. */
	if ((!r->kernel || r->pooled) &&
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, r->wd) < 0)
		return sr_fail(err, errno, "create the working dir's socket");
	if (fcntl(r->report[0], F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(r->out[0], F_SETFL, O_NONBLOCK) < 0 || fcntl(r->err[0], F_SETFL, O_NONBLOCK) < 0)
		return sr_fail(err, errno, "make pipes non-blocking");
	return (r->in_fd = sr_box_stdin_fd(r->req, err)) < 0 ? -1 : 0;
}

extern const unsigned char sr_embedded_init[];
extern const size_t sr_embedded_init_len;

/* Pid 1's program for cold runs (runtime/zygote/init.c), one sealed memfd
 * per process; -1 if it could not be made (pid 1 then stays a copy of
 * this process). */
static int cold_init_fd = -1;
static pthread_once_t cold_init_once = PTHREAD_ONCE_INIT;

static void make_cold_init(void)
{
	cold_init_fd = sr_exec_only_memfd("saferun-init", sr_embedded_init, sr_embedded_init_len);
}

static uint32_t host_id_base(const sr_box *r)
{
	return r->shared_ids ? r->shared_ids->base : r->ids.base;
}

/* This thread's effective uid (raw syscalls: glibc's setresuid changes
 * every thread of the process), keeping its capabilities in effect:
 * ruid and suid stay 0, so permitted is kept, and the capset puts it back
 * in effect (CLONE_INTO_CGROUP checks write access to the groups as the
 * creator). Back to 0, the kernel restores them by itself. */
static int set_thread_euid(uid_t euid)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_setresuid, -1, euid, -1) < 0 || syscall(SYS_capget, &h, d) < 0)
		return -1;
	d[0].effective = d[0].permitted;
	d[1].effective = d[1].permitted;
	return syscall(SYS_capset, &h, d) < 0 ? -1 : 0;
}

static pid_t clone_sandbox(sr_box *r, bool into_cgroup)
{
	pthread_once(&cold_init_once, make_cold_init);
	/* The new user namespace is owned by the creator's euid: the first
	 * uid of the slot, not root, for this one call. */
	if (set_thread_euid(host_id_base(r)) < 0) {
		int e = errno;
		syscall(SYS_setresuid, -1, 0, -1);
		errno = e;
		return -1;
	}
	struct clone_args ca = {
		.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
			 CLONE_NEWUTS | CLONE_PIDFD | (into_cgroup ? CLONE_INTO_CGROUP : 0),
		.pidfd = (uint64_t)(uintptr_t)&r->pidfd,
		.exit_signal = SIGCHLD,
		.cgroup = into_cgroup ? (uint64_t)sr_cgroup_fd(r->cg) : 0,
	};
	pid_t pid = (pid_t)syscall(SYS_clone3, &ca, sizeof ca);
	if (pid != 0) { /* the parent, or no child */
		int e = errno;
		/* Cannot fail for a thread whose ruid is 0; if it did, every
		 * later step of this thread would fail in confusing ways. */
		if (syscall(SYS_setresuid, -1, 0, -1) < 0)
			abort();
		errno = e;
	}
	if (pid == 0) {
		const sr_policy *p = r->p;
		/* Only the supervisor may hold the write end of the go pipe:
		 * should it die before its "go", the child's read then ends
		 * (EOF) instead of waiting for ever, parent-death signal or
		 * not (one armed after the supervisor died never comes). */
		close(r->sync[1]);
		sr_child c = {
			.fsize_limit = p->limits.tmpfs_bytes,
			.nofile_limit = p->limits.open_files,
			.uid = SR_SANDBOX_UID,
			.gid = SR_SANDBOX_GID,
			.filter = &r->filter,
			.argv = r->argv,
			.exec_path = sr_language_info_of(r->req->language)->interpreter,
			.envp = r->envp,
			.join_fds = r->join_fds,
			.n_join_fds = r->n_join_fds,
			.sync_fd = r->sync[0],
			.report_fd = r->report[1],
			.wd_fd = r->wd[1],
			.stdio = { r->in_fd, r->out[1], r->err[1], r->ctl[1] },
			.init_fd = cold_init_fd,
			.runner_fd = r->runner_fd,
			/* Not a kernel: its parent is the thread that started
			 * it, which may end long before the kernel does; a
			 * kernel ends when its control socket closes. The
			 * zygote and a pool's sandbox live as long as the
			 * thread that started them. */
			.pdeath = r->ctl[1] < 0 || r->zygote || r->pooled,
			.keep_privileges = r->zygote,
			.plan = &r->plan,
			.workdir = p->workdir,
		};
		contain(&c);
	}
	return pid;
}

static int write_id_maps(pid_t pid, uint32_t base, sr_error *err)
{
	char path[64], map[64];
	snprintf(map, sizeof map, "0 %u %u\n", base, SR_HOST_ID_COUNT);
	const char *files[] = { "uid_map", "gid_map" };
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof path, "/proc/%d/%s", pid, files[i]);
		int rc = sr_write_file(path, map);
		if (rc < 0)
			return sr_fail(err, -rc, "write %s", path);
	}
	return 0;
}

int sr_box_start(sr_box *r, sr_error *err)
{
	/* v2: born in its group (CLONE_INTO_CGROUP); v1: the child joins its
	 * group itself before anything else; else (kernels before 5.7, or
	 * SAFERUN_CGROUP_ATTACH=procs to test this path) moved by us. */
	bool into = sr_cgroup_fd(r->cg) >= 0, attach = false;
	const char *force = getenv("SAFERUN_CGROUP_ATTACH");
	if (force && strcmp(force, "procs") == 0)
		into = false, attach = true;
	if (!into && !attach &&
	    (r->n_join_fds = sr_cgroup_open_join_fds(r->cg, r->join_fds, false, err)) < 0)
		return -1;
	attach = attach || (!into && r->n_join_fds == 0);
	r->pid = clone_sandbox(r, into);
	if (r->pid < 0 && into && (errno == EINVAL || errno == E2BIG || errno == EBUSY)) {
		attach = true;
		r->pid = clone_sandbox(r, false);
	}
	if (r->pid < 0)
		return sr_fail(err, errno,
			       errno == EPERM || errno == ENOSPC
				   ? "create the sandbox namespaces (are user namespaces allowed?)"
				   : "create the sandbox namespaces");
	close_fd(&r->sync[0]);
	close_fd(&r->report[1]);
	close_fd(&r->out[1]);
	close_fd(&r->err[1]);
	close_fd(&r->in_fd);
	close_fd(&r->ctl[1]);
	close_fd(&r->wd[1]);
	for (int i = 0; i < r->n_join_fds; i++)
		close_fd(&r->join_fds[i]);
	if (write_id_maps(r->pid, host_id_base(r), err) ||
	    (attach && sr_cgroup_attach(r->cg, r->pid, err)) || sr_net_setup(r->pidfd, err) ||
	    (r->egress && sr_egress_start(r->egress, r->pid, err)))
		return -1;
	/* The checker has been vetting the code meanwhile: the child goes on
	 * (mounts, lock-down, the code) only if it passed. */
	sr_check_job *vet = r->vet;
	r->vet = NULL;
	if (sr_box_vet_finish(vet, r->res) < 0)
		return SR_BOX_VETOED;
	if (write(r->sync[1], "g", 1) != 1)
		return sr_fail(err, errno, "release the sandbox");
	close_fd(&r->sync[1]);
	return 0;
}

/* The runner's audit hook ended the run: its last stderr line says
 * "saferun: blocked EVENT at main.py line N (RULE NAME): ...". That
 * becomes the message and a finding. */
static bool runtime_block(sr_result *res)
{
	const char *d = res->err.data;
	size_t n = res->err.len;
	while (n && d[n - 1] == '\n')
		n--;
	size_t start = n;
	while (start && d[start - 1] != '\n')
		start--;
	size_t plen = strlen(SR_BLOCKED_PREFIX);
	if (!d || n - start <= plen || memcmp(d + start, SR_BLOCKED_PREFIX, plen) != 0)
		return false;
	char line[SR_ERROR_MSG_MAX];
	snprintf(line, sizeof line, "%.*s", (int)(n - start), d + start);
	snprintf(res->message, sizeof res->message, "rejected: %s", line + strlen("saferun: "));
	sr_finding *f = calloc(1, sizeof *f);
	const char *at = strstr(line, " at main.py line "), *rule = strstr(line, " (SR");
	if (!f || !at || !rule || sscanf(at, " at main.py line %u", &f->line) != 1 ||
	    sscanf(rule, " (%7s %23[^)])", f->rule, f->rule_name) != 2) {
		free(f);
		return true;
	}
	snprintf(f->name, sizeof f->name, "%.*s", (int)(at - line - plen), line + plen);
	snprintf(f->message, sizeof f->message, "at run time, %s", line + plen);
	res->findings = f;
	res->n_findings = 1;
	return true;
}

void sr_box_classify(sr_result *res, const sr_outcome *oc, const sr_cgroup_stats *st,
		     const sr_limits *lim)
{
	res->hit_memory = st->oom_kills > 0;
	res->hit_pids = st->pids_denied > 0;
	bool sig = oc->have_exit && WIFSIGNALED(oc->wstatus);
	res->exit_code = oc->have_exit && WIFEXITED(oc->wstatus) ? WEXITSTATUS(oc->wstatus) : -1;
	res->signal = sig ? WTERMSIG(oc->wstatus) : (oc->have_exit ? 0 : SIGKILL);
	bool failed = !oc->have_exit || res->exit_code != 0;
	if (oc->timed_out) {
		res->status = SR_STATUS_TIMEOUT;
		snprintf(res->message, sizeof res->message,
			 "timeout: the run passed its wall-clock limit of %.3g s",
			 (double)lim->wall_ms / 1000.0);
	} else if (oc->init_fault) {
		/* Its report, if any, is not the code's result: pid 1 is. */
		res->status = SR_STATUS_INTERNAL_ERROR;
		snprintf(res->message, sizeof res->message,
			 "internal_error: the sandbox's pid 1 %s; the sandbox was killed",
			 oc->init_fault == SR_INIT_SILENT
			     ? "did not report the end of the code by the run's deadline"
			     : "reported the end of the code but did not exit");
	} else if (oc->output_exceeded) {
		res->status = SR_STATUS_OUTPUT_LIMIT;
		snprintf(res->message, sizeof res->message,
			 "output_limit: a stream passed %llu bytes; output truncated",
			 (unsigned long long)lim->output_bytes);
	} else if (oc->setup_failed) {
		res->status = SR_STATUS_INTERNAL_ERROR;
		snprintf(res->message, sizeof res->message,
			 "internal_error: sandbox set-up failed: %s: %s", oc->setup_what,
			 strerror(oc->setup_errnum));
	} else if (res->hit_memory && failed) {
		res->status = SR_STATUS_OOM;
		snprintf(res->message, sizeof res->message,
			 "oom: the run passed its memory limit of %llu MiB",
			 (unsigned long long)(lim->memory_bytes >> 20));
	} else if (res->hit_pids && failed) {
		res->status = SR_STATUS_PIDS;
		snprintf(res->message, sizeof res->message,
			 "pids: the run hit its limit of %u processes/threads", lim->pids);
	} else if (!oc->have_exit || sig) {
		res->status = SR_STATUS_KILLED;
		snprintf(res->message, sizeof res->message,
			 "killed: the run was ended by signal %d (%s)%s", res->signal,
			 strsignal(res->signal),
			 res->signal == SIGSYS ? ", a system call the seccomp policy forbids" : "");
	} else if (!oc->no_runner && res->exit_code == SR_EXIT_BLOCKED && runtime_block(res)) {
		res->status = SR_STATUS_REJECTED;
	} else if (res->exit_code != 0) {
		res->status = SR_STATUS_ERROR;
		snprintf(res->message, sizeof res->message, "error: the code exited with status %d",
			 res->exit_code);
	} else {
		res->status = SR_STATUS_OK;
	}
}

/* A warm sandbox has no request of its own (warm.c): it is Python's. */
static bool python_box(const sr_box *r)
{
	return !r->req || r->req->language == SR_LANG_PYTHON;
}

int sr_box_watch(sr_box *r, uint64_t wall_ms, uint64_t output_bytes, const sr_cgroup_stats *before,
		 sr_outcome *oc, sr_error *err)
{
	sr_watch w = { .pidfd = r->pidfd,
		       .out_fd = r->out[0],
		       .err_fd = r->err[0],
		       .report_fd = r->report[0],
		       .ctl_fd = r->ctl[0],
		       .wall_ms = wall_ms,
		       .output_bytes = output_bytes,
		       .cg = r->cg,
		       .on_output = r->on_output,
		       .on_output_arg = r->on_output_arg };
	*oc = (sr_outcome){ 0 };
	int rc = sr_supervise(&w, r->res, oc, err);
	sr_cgroup_stats st, zero = { 0 };
	sr_cgroup_read_stats(r->cg, &st);
	before = before ? before : &zero;
	/* A kernel's group lives across runs: this run's share of it. */
	st.cpu_usec -= before->cpu_usec < st.cpu_usec ? before->cpu_usec : st.cpu_usec;
	st.oom_kills -= before->oom_kills < st.oom_kills ? before->oom_kills : st.oom_kills;
	st.pids_denied -=
	    before->pids_denied < st.pids_denied ? before->pids_denied : st.pids_denied;
	r->res->cpu_ms = st.cpu_usec / 1000u;
	r->res->peak_memory_bytes = st.peak_memory_bytes;
	r->res->duration_ms = oc->duration_ms;
	sr_limits lim = r->p->limits;
	lim.wall_ms = wall_ms;
	lim.output_bytes = output_bytes;
	r->res->limits = lim;
	if (oc->done) {
		oc->have_exit = true;
		oc->wstatus = W_EXITCODE(oc->done_status & 0xff, 0);
	}
	if (r->egress)
		sr_egress_collect(r->egress, &r->res->net);
	oc->no_runner = !python_box(r);
	if (rc == 0)
		sr_box_classify(r->res, oc, &st, &lim);
	return rc;
}

void sr_box_cleanup(sr_box *r)
{
	sr_check_abort(r->vet);
	r->vet = NULL;
	bool gone = true; /* nothing was cloned, or its init was reaped */
	if (r->pidfd >= 0) {
		syscall(SYS_pidfd_send_signal, r->pidfd, SIGKILL, NULL, 0);
		siginfo_t si;
		/* Its end is the end of its pid namespace: the kernel has
		 * killed every other process in it by then, so the group is
		 * empty and removing it needs no freezer. A warm sandbox's
		 * init is the zygote's child, not ours: its pidfd says when.
		 * Bounded: one stuck in the kernel stays a zombie here rather
		 * than hold this thread (sr_cgroup_destroy still kills), and
		 * its id slot is then marked for a /proc scan before reuse. */
		gone = poll(&(struct pollfd){ r->pidfd, POLLIN, 0 }, 1, 5000) == 1;
		waitid((idtype_t)P_PIDFD, (id_t)r->pidfd, &si, WEXITED | WNOHANG);
		close_fd(&r->pidfd);
	}
	if (r->pid > 0)
		waitpid(r->pid, NULL, __WALL | WNOHANG);
	int *fds[] = { &r->sync[0], &r->sync[1], &r->report[0], &r->report[1], &r->out[0],
		       &r->out[1],  &r->err[0],  &r->err[1],    &r->in_fd,     &r->ctl[0],
		       &r->ctl[1],  &r->wd[1],   &r->runner_fd };
	for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
		close_fd(fds[i]);
	for (int i = 0; i < r->n_join_fds; i++)
		close_fd(&r->join_fds[i]);
	sr_egress_free(r->egress);
	r->egress = NULL;
	sr_cgroup_destroy(r->cg, NULL);
	r->cg = NULL;
	sr_idslot_release(&r->ids, gone);
	sr_mounts_plan_free(&r->plan);
	sr_bpf_free(&r->filter);
	free(r->envp);
	free(r->guard);
	free(r->rootfs);
	r->envp = NULL;
	r->guard = r->rootfs = NULL;
}

void sr_box_init(sr_box *b, const sr_run_request *req, sr_result *res)
{
	*b = (sr_box){ .req = req,
		       .p = req ? req->policy : NULL,
		       .res = res,
		       .pidfd = -1,
		       .runner_fd = -1,
		       .in_fd = -1,
		       .sync = { -1, -1 },
		       .report = { -1, -1 },
		       .out = { -1, -1 },
		       .err = { -1, -1 },
		       .ctl = { -1, -1 },
		       .wd = { -1, -1 },
		       .ids = SR_IDSLOT_NONE,
		       .on_output = req ? req->on_output : NULL,
		       .on_output_arg = req ? req->on_output_arg : NULL };
}

int sr_box_prepare(sr_box *b, sr_error *err)
{
	/* Names resolve before anything changes on the host. The zygote
	 * (warm.c) keeps no network of its own: egress runs are cold. */
	if (b->p->net_mode == SR_NET_EGRESS && !b->zygote && sr_egress_plan(b->p, &b->egress, err))
		return -1;
	if (prepare(b, err) || (!b->shared_ids && sr_idslot_take(&b->ids, err)) ||
	    sr_cgroup_create(b->req ? b->req->cgroup_share : NULL, b->res->id, &b->p->limits,
			     &b->cg, err) ||
	    open_pipes(b, err))
		return -1;
	snprintf(b->res->cgroup_mode, sizeof b->res->cgroup_mode, "%s",
		 sr_cgroup_mode_name(sr_cgroup_get_mode(b->cg)));
	return 0;
}

void sr_box_init_result(sr_result *res, const sr_policy *p)
{
	memset(res, 0, sizeof *res);
	res->limits = p->limits;
	res->exit_code = -1;
	char hex[17];
	if (sr_random_hex(hex, 8) == 0)
		snprintf(res->id, sizeof res->id, "sr-%s", hex);
	else
		snprintf(res->id, sizeof res->id, "sr-%d-%llu", getpid(),
			 (unsigned long long)sr_now_ms());
}

/* The pre-execution checker (sandbox.h): a rejected run has its findings
 * in the result and its code never runs. */
static void check_failed(sr_result *res, const sr_error *cerr)
{
	res->status = SR_STATUS_INTERNAL_ERROR;
	snprintf(res->message, sizeof res->message,
		 "internal_error: the code could not be checked: %s", cerr->msg);
}

int sr_box_vet_start(const sr_run_request *req, sr_result *res, sr_check_job **job)
{
	*job = NULL;
	const sr_policy *p = req->policy;
	/* The checker reads Python: other languages are bounded by the
	 * kernel layers alone (docs/languages.md). */
	if (req->no_check || !p->checker.enabled || req->language != SR_LANG_PYTHON)
		return 0;
	sr_check_request creq = { .code = req->code,
				  .code_size = req->code_size,
				  .policy = p,
				  .allow = req->allow,
				  .n_allow = req->n_allow };
	sr_error cerr = { 0 };
	if (sr_check_start(&creq, job, &cerr) < 0) {
		check_failed(res, &cerr);
		return -1;
	}
	return 0;
}

int sr_box_vet_finish(sr_check_job *job, sr_result *res)
{
	if (!job)
		return 0;
	sr_check_result cr;
	sr_error cerr = { 0 };
	if (sr_check_finish(job, &cr, &cerr) < 0) {
		check_failed(res, &cerr);
		return -1;
	}
	if (cr.n_findings == 0) {
		sr_check_result_free(&cr);
		return 0;
	}
	const sr_finding *f = &cr.findings[0];
	res->status = SR_STATUS_REJECTED;
	snprintf(res->message, sizeof res->message,
		 "rejected: %zu problem%s found before running; line %u: %s %s", cr.n_findings,
		 cr.n_findings == 1 ? "" : "s", f->line, f->rule, f->message);
	res->findings = cr.findings;
	res->n_findings = cr.n_findings;
	return -1;
}

int sr_box_vet(const sr_run_request *req, sr_result *res)
{
	sr_check_job *job;
	if (sr_box_vet_start(req, res, &job) < 0)
		return -1;
	return sr_box_vet_finish(job, res);
}

/* The writable tmpfs ran out of inodes or blocks: the code got ENOSPC
 * (or EDQUOT-like failures it may have hidden), which the result says
 * ("disk" in limits_hit). Read at the end of the run, so a run that
 * filled it and then deleted files is not counted. */
static bool tmpfs_full(int wd_fd)
{
	struct statfs sf;
	return fstatfs(wd_fd, &sf) == 0 && sf.f_type == TMPFS_MAGIC &&
	       (sf.f_ffree == 0 || sf.f_bavail == 0);
}

/* The working dir the sandbox handed over (none if it died before its
 * mounts were done): its artifacts/ into the result. */
void sr_box_collect_artifacts(sr_box *b)
{
	int fd = b->wd[0] >= 0 ? sr_recv_fd(b->wd[0], MSG_DONTWAIT) : -1;
	if (fd < 0)
		return;
	if (!b->workdir_host && tmpfs_full(fd))
		b->res->hit_tmpfs = true;
	sr_workspace *ws = sr_workspace_view(fd, b->res->id);
	if (ws) {
		/* Full when the run ended: the code met ENOSPC (the writable
		 * dirs and /dev/shm share this one tmpfs). */
		b->res->hit_tmpfs = sr_workspace_full(ws);
		sr_artifacts_collect(ws, NULL, b->res);
	}
	sr_workspace_forget(ws);
}

/* A check still running when the box failed: its verdict comes first
 * (rejected code is reported as such, not as the failure). true: res
 * says rejected or internal_error. */
static bool vetoed(sr_box *b)
{
	sr_check_job *vet = b->vet;
	b->vet = NULL;
	if (sr_box_vet_finish(vet, b->res) == 0)
		return false;
	b->res->cgroup_mode[0] = '\0'; /* like any run that never started */
	return true;
}

/* Prepare, start, watch and tear down b, then collect its artifacts: 0
 * with the outcome in b->res, or -1 when it could not be prepared. */
static int run_box(sr_box *b, sr_error *err)
{
	if (sr_box_prepare(b, err)) {
		int rc = vetoed(b) ? 0 : -1;
		sr_box_cleanup(b);
		close_fd(&b->wd[0]);
		return rc;
	}
	sr_error inner = { 0 };
	sr_outcome oc;
	const sr_limits *lim = &b->p->limits;
	int rc = sr_box_start(b, &inner);
	if (rc == SR_BOX_VETOED) {
		b->res->cgroup_mode[0] = '\0';
		sr_box_cleanup(b); /* the child never went on: nothing ran */
		close_fd(&b->wd[0]);
		return 0;
	}
	if ((rc < 0 && !vetoed(b)) ||
	    (rc == 0 && sr_box_watch(b, lim->wall_ms, lim->output_bytes, NULL, &oc, &inner))) {
		b->res->status = SR_STATUS_INTERNAL_ERROR;
		snprintf(b->res->message, sizeof b->res->message, "internal_error: %s", inner.msg);
	}
	sr_box_cleanup(b); /* everything in the sandbox has ended */
	sr_box_collect_artifacts(b);
	close_fd(&b->wd[0]);
	return 0;
}

int sr_box_run_vetted(const sr_run_request *req, const sr_workspace *ws, const sr_bind *binds,
		      size_t n_binds, sr_check_job *vet, sr_result *res, sr_error *err)
{
	sr_box b;
	sr_box_init(&b, req, res);
	/* The workspace's files belong to its host ids: the sandbox takes
	 * them rather than a slot of its own. */
	b.workdir_host = ws ? sr_workspace_path(ws) : NULL;
	b.shared_ids = ws ? sr_workspace_ids(ws) : NULL;
	b.binds = binds;
	b.n_binds = n_binds;
	b.vet = vet;
	return run_box(&b, err);
}

int sr_box_run_with(const sr_run_request *req, const sr_workspace *ws, const sr_bind *binds,
		    size_t n_binds, sr_result *res, sr_error *err)
{
	return sr_box_run_vetted(req, ws, binds, n_binds, NULL, res, err);
}

/* Rejected for its syntax alone (SR001: the checker's tokenizer could
 * not read it). */
static bool only_syntax(const sr_result *res)
{
	if (res->status != SR_STATUS_REJECTED || !res->n_findings)
		return false;
	for (size_t i = 0; i < res->n_findings; i++)
		if (strcmp(res->findings[i].rule, "SR001") != 0)
			return false;
	return true;
}

/* Compiles the code (code/main.py) and runs none of it: exit 1 with
 * Python's own report of a SyntaxError (as the runner prints one: its
 * source line is read from main.py in the current dir, hence the chdir),
 * 0 when Python accepts what the checker could not read. */
static const char compile_only_py[] =
    "import os, sys\n"
    "os.chdir('code')\n"
    "try:\n"
    "    compile(open('main.py', 'rb').read(), 'main.py', 'exec')\n"
    "except SyntaxError as e:\n"
    "    sys.excepthook(type(e), e.with_traceback(None), None)\n"
    "    sys.exit(1)\n"
    "except BaseException:\n"
    "    sys.exit(2)\n";

void sr_box_syntax_error(const sr_run_request *req, sr_result *res)
{
	if (!only_syntax(res))
		return;
	sr_file src = { .name = "code/main.py", .data = (void *)req->code, .size = req->code_size };
	sr_run_request c = { .policy = req->policy,
			     .code = compile_only_py,
			     .code_size = sizeof compile_only_py - 1,
			     .files = &src,
			     .n_files = 1,
			     .rootfs_dir = req->rootfs_dir,
			     .no_check = true };
	sr_result cr;
	sr_error err = { 0 };
	sr_box_init_result(&cr, req->policy);
	/* Anything but Python's SyntaxError (it compiled, or the sandbox
	 * failed): the checker's rejection stands, and no code ran. */
	if (sr_box_run_vetted(&c, NULL, NULL, 0, NULL, &cr, &err) < 0 ||
	    cr.status != SR_STATUS_ERROR || cr.exit_code != 1 || cr.out.len || !cr.err.len) {
		sr_result_free(&cr);
		return;
	}
	/* The run keeps its id (a kernel's, a warm sandbox's) and path. */
	memcpy(cr.id, res->id, sizeof cr.id);
	if (res->cgroup_mode[0])
		memcpy(cr.cgroup_mode, res->cgroup_mode, sizeof cr.cgroup_mode);
	cr.warm = res->warm;
	sr_result_free(res);
	*res = cr;
}

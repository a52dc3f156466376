/* The pieces of one sandbox that sr_run and a kernel (kernel.c) share:
 * building it, watching a run, classifying the end, tearing it down.
 * sr_run uses them once; a kernel builds once and watches many runs. */
#ifndef SR_SANDBOX_H
#define SR_SANDBOX_H

#include <stdbool.h>
#include <sys/types.h>

#include "cgroup.h"
#include "checker/checker.h"
#include "idslot.h"
#include "mounts.h"
#include "policy/policy.h"
#include "saferun.h"
#include "supervise.h"

typedef struct sr_box {
	const sr_run_request *req; /* kernel: code NULL, only the start-up settings */
	const sr_policy *p;
	const char *workdir_host; /* kernel: the workspace bound as the working dir */
	const sr_bind *binds;     /* extra binds (a dependency layer, pip's inputs) */
	size_t n_binds;
	bool kernel;        /* python serves runs over a control socket */
	bool zygote;        /* the warm path's zygote: keeps its privileges */
	bool source_runner; /* the runner's source on the command line, no cache */
	/* A pool's single-use JavaScript sandbox (warm_node.c): started like a
	 * kernel (no code yet, a control socket on fd 3) as `node -r PRELOAD
	 * main.js`, but it serves one run: its working dir comes back on wd,
	 * and it dies with the thread that started it. */
	bool pooled;
	sr_result *res;
	char *rootfs;
	sr_mount_plan plan;
	sr_bpf filter;
	sr_cgroup *cg;
	char **envp;
	char *guard; /* the runner's audit-hook settings, NULL: no hook */
	char *argv[9];
	int sync[2], report[2], out[2], err[2], in_fd;
	int ctl[2]; /* a kernel's control socket pair, else -1 */
	int wd[2];  /* one-shot: the working dir's fd comes back on wd[0] */
	int join_fds[SR_CGROUP_MAX_FDS], n_join_fds;
	int runner_fd; /* the compiled runner (runner_cache.h), else -1 */
	int pidfd;
	pid_t pid;
	struct sr_egress *egress; /* network mode egress: veth and rules, else NULL */
	sr_check_job *vet;        /* the checker, vetting the code while the box is built */
	/* The host ids its user namespace maps to and is owned by: its own
	 * (taken in sr_box_prepare), or a workspace's (shared_ids, set by the
	 * caller) so a session's files keep one owner across its kernels. */
	sr_idslot ids;
	const sr_idslot *shared_ids;
	/* The run's output as it comes (req->on_output; a kernel's or a warm
	 * sandbox's caller sets it per run). */
	void (*on_output)(void *arg, int stream, const char *data, size_t len);
	void *on_output_arg;
} sr_box;

/* Every fd -1, nothing allocated. */
void sr_box_init(sr_box *b, const sr_run_request *req, sr_result *res);
/* Root, policy, code text, sizes, user namespaces: refused before anything. */
int sr_box_check_request(const sr_run_request *req, sr_error *err);
void sr_box_init_result(sr_result *res, const sr_policy *p);
/* The pre-execution checker: < 0 when res now says rejected/internal_error. */
int sr_box_vet(const sr_run_request *req, sr_result *res);
/* The same in two steps: start forks the checker (*job NULL: no check),
 * finish waits for its verdict (and frees the job; NULL: 0). */
int sr_box_vet_start(const sr_run_request *req, sr_result *res, sr_check_job **job);
int sr_box_vet_finish(sr_check_job *job, sr_result *res);
/* A run rejected for its syntax alone (SR001) becomes Python's own
 * SyntaxError, as `python3 main.py` shows it: status error, exit 1, the
 * caret on stderr, from a sandbox that compiles the code and runs none of
 * it. res is left as it is when Python accepts the code. */
void sr_box_syntax_error(const sr_run_request *req, sr_result *res);
/* Plan, cgroup, pipes: failures are the request's (nothing ran). */
int sr_box_prepare(sr_box *b, sr_error *err);
/* Clone into the namespaces, map ids, network, then b->vet's verdict
 * (SR_BOX_VETOED: the code did not pass, b->res says why, the child is
 * never released), then release the child. */
#define SR_BOX_VETOED 1
int sr_box_start(sr_box *b, sr_error *err);
/* Supervise one run (the whole life for sr_run; until "done" for a
 * kernel) with these limits, then classify it into b->res. before: the
 * group's counters when the run began (NULL: zero). */
int sr_box_watch(sr_box *b, uint64_t wall_ms, uint64_t output_bytes, const sr_cgroup_stats *before,
		 sr_outcome *oc, sr_error *err);
/* The end of a run as a status, exit code, signal and message in res, from
 * what the supervisor saw (oc), the group's counters for the run (st) and
 * the limits it ran under (pure: sr_box_watch's last step). */
void sr_box_classify(sr_result *res, const sr_outcome *oc, const sr_cgroup_stats *st,
		     const sr_limits *lim);
/* Kill what runs, close, remove the group, free (all but wd[0]: the
 * artifacts are read after this). */
void sr_box_cleanup(sr_box *b);

/* The run's stdin: its bytes in a sealed memfd, or /dev/null. */
int sr_box_stdin_fd(const sr_run_request *req, sr_error *err);
/* The artifacts/ of the working dir the sandbox handed over on wd[0]. */
void sr_box_collect_artifacts(sr_box *b);
/* The runner's audit-hook settings for req (caller frees), NULL if none. */
char *sr_box_runner_guard(const sr_run_request *req);
/* A cold sandbox with ws (NULL: a tmpfs) as its working dir, as ws's host
 * ids, and binds added: pip's install sandbox (deps.c) and runs with a
 * layer. */
int sr_box_run_with(const sr_run_request *req, const sr_workspace *ws, const sr_bind *binds,
		    size_t n_binds, sr_result *res, sr_error *err);
/* The same, with vet (NULL: none) vetting the code meanwhile: its verdict
 * comes before the child is released (sr_box_start). */
int sr_box_run_vetted(const sr_run_request *req, const sr_workspace *ws, const sr_bind *binds,
		      size_t n_binds, sr_check_job *vet, sr_result *res, sr_error *err);
#endif

/* One cgroup per sandbox, below the cgroup saferun itself runs in.
 *
 * v2 (unified) is the primary path; v1 and hybrid hosts (v1 controllers
 * with an empty unified hierarchy) use the v1 controllers. Both sit behind
 * the same functions; only the file names and formats differ. */
#ifndef SR_CGROUP_H
#define SR_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "saferun.h"

typedef enum sr_cgroup_mode {
	SR_CGROUP_NONE = 0,
	SR_CGROUP_V2,
	SR_CGROUP_V1,
	SR_CGROUP_HYBRID, /* v1 controllers + a unified hierarchy: use v1 */
} sr_cgroup_mode;

typedef struct sr_cgroup sr_cgroup;

typedef struct sr_cgroup_stats {
	uint64_t cpu_usec;
	uint64_t peak_memory_bytes;
	uint64_t oom_kills;      /* processes the OOM killer ended in the group */
	uint64_t pids_denied;    /* forks refused at pids.max */
	uint64_t memory_failcnt; /* times the memory limit was hit (v1) */
} sr_cgroup_stats;

const char *sr_cgroup_mode_name(sr_cgroup_mode m);
/* Which hierarchy this host runs, from /proc/self/mountinfo. */
sr_cgroup_mode sr_cgroup_detect(void);
/* Directory of the group saferun runs in for one controller ("memory",
 * "cpu", "pids", ...; any name on v2). Caller frees. NULL if not mounted. */
char *sr_cgroup_own_dir(sr_cgroup_mode mode, const char *controller);

/* Create the sandbox's group(s) and write its limits: <own>/saferun/<id>,
 * or <own>/saferun/<share>/<id> below a share group (sr_cgroup_share_create)
 * when share is not NULL. */
int sr_cgroup_create(const char *share, const char *id, const sr_limits *lim, sr_cgroup **out,
		     sr_error *err);
/* Is name one a share group may have ([A-Za-z0-9_.-]{1,80}, not "sr-..."
 * as sandbox groups are)? */
bool sr_cgroup_share_name_ok(const char *name);
sr_cgroup_mode sr_cgroup_get_mode(const sr_cgroup *cg);
/* v2: an O_DIRECTORY fd for clone3(CLONE_INTO_CGROUP); -1 on v1. */
int sr_cgroup_fd(const sr_cgroup *cg);
/* Move pid into the group (the fallback for CLONE_INTO_CGROUP). */
int sr_cgroup_attach(sr_cgroup *cg, pid_t pid, sr_error *err);

#define SR_CGROUP_MAX_FDS 8
/* v1: open the group's "tasks" files, for the child to join itself with
 * sr_cgroup_join_self (contain.h). Writing "0" to "tasks" migrates one
 * thread, which the kernel does without the global threadgroup lock;
 * moving a process by pid from the parent takes it and waits an RCU grace
 * period (~10 ms on every run). The kernel checks the credentials of the
 * opener (the supervisor), not the writer's. Returns the number of fds:
 * 0 on v2 (CLONE_INTO_CGROUP), unless v2_too: then "cgroup.procs" (the
 * warm path, whose sandboxes are forked by the zygote). */
int sr_cgroup_open_join_fds(sr_cgroup *cg, int fds[SR_CGROUP_MAX_FDS], bool v2_too, sr_error *err);
/* A new group below share (named id, with limits lim) that every process
 * of *cg moves into; the old group is removed and *cg is the new one. A
 * warm sandbox, made before anyone's run was known, joins the share of
 * the run it is handed. On failure *cg is unchanged but its processes may
 * be gone. */
int sr_cgroup_move_to_share(sr_cgroup **cg, const char *share, const char *id, const sr_limits *lim,
			    sr_error *err);
/* Rewrite the limits of an existing group (a warm sandbox made with the
 * policy's limits, handed a run that lowers them). */
int sr_cgroup_set_limits(sr_cgroup *cg, const sr_limits *lim, sr_error *err);
/* SIGKILL every process in the group (cgroup.kill on v2, freeze + kill
 * on v1) and wait until it is empty. */
int sr_cgroup_kill(sr_cgroup *cg, sr_error *err);
/* Stop every task in the group from running (frozen) or let them run
 * again. A freeze returns once the kernel says the group is frozen (v2
 * cgroup.events "frozen 1", v1 freezer.state FROZEN): every task stopped.
 * One that is not within SR_CGROUP_FREEZE_WAIT_MS (a task in
 * uninterruptible sleep holds it) is thawed again and fails with
 * ETIMEDOUT. */
#define SR_CGROUP_FREEZE_WAIT_MS 2000
int sr_cgroup_freeze(sr_cgroup *cg, bool frozen, sr_error *err);
int sr_cgroup_read_stats(sr_cgroup *cg, sr_cgroup_stats *st);
/* Number of processes still in the group. */
int sr_cgroup_count_procs(sr_cgroup *cg);
/* Kill what is left, remove the group(s) and free cg. */
int sr_cgroup_destroy(sr_cgroup *cg, sr_error *err);

#endif

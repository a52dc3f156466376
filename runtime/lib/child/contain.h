/* The sandbox child's side of the construction: the steps that run after
 * the namespaces exist and before the code does, shared by a cold run
 * (sandbox.c, after clone3) and a warm one (zygote.c, in a fork of the
 * zygote). Everything here is async-signal-safe and needs libc and
 * libcap only: it is also compiled into the zygote's Python module. */
#ifndef SR_CONTAIN_H
#define SR_CONTAIN_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/filter.h>

#include "mounts_ops.h"

typedef struct sr_bpf {
	struct sock_filter *insns;
	unsigned short len;
} sr_bpf;

/* What the sandbox's init sends up its report pipe. */
enum sr_report_kind { SR_REPORT_FAILED = 1, SR_REPORT_EXIT = 2 };
typedef struct sr_report {
	int32_t kind;
	int32_t errnum;  /* SR_REPORT_FAILED: errno of the failed step */
	int32_t wstatus; /* SR_REPORT_EXIT: wait status of python */
	char what[244];  /* SR_REPORT_FAILED: the step */
} sr_report;

/* The fd the sandbox's python reads the compiled runner from. */
#define SR_RUNNER_FD 4

typedef struct sr_child {
	uint64_t fsize_limit; /* RLIMIT_FSIZE: the writable tmpfs size */
	uint64_t nofile_limit;
	uid_t uid; /* the sandbox user, inside the user namespace */
	gid_t gid;
	const sr_bpf *filter;
	char **argv, **envp;   /* a cold run's python (NULL: the warm path) */
	const char *exec_path; /* what argv runs (NULL: /usr/bin/python3) */
	const int *join_fds;   /* the group's "tasks" (v1) / "cgroup.procs" files */
	int n_join_fds;
	int sync_fd;          /* read: one byte = go, EOF = abort; -1: none */
	int report_fd;        /* write, close-on-exec */
	int wd_fd;            /* a one-shot run's: the working dir goes back here, or -1 */
	int stdio[4];         /* 0, 1, 2 and a control socket (fd 3), or -1 */
	bool keep_privileges; /* the zygote: root of its user namespace, no seccomp */
	bool pdeath;          /* SIGKILL when the parent thread ends */
	int init_fd;   /* pid 1's program (memfd, runtime/zygote/init.c), kept open; -1: none */
	int runner_fd; /* the compiled runner, python's fd 4 (runner_cache.h), or -1 */
	const sr_mount_plan *plan; /* a cold run's filesystem */
	const char *workdir;
} sr_child;

/* Report the failed step up the report pipe and _exit(127). */
void sr_child_fail(const sr_child *c, int errnum, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
/* As root of the sandbox's fresh user namespace, after its last namespace
 * is made: its per-user counts (/proc/sys/user: inotify instances and
 * watches, and no namespaces of its own). Fails through sr_child_fail. */
void sr_child_bound_user_counts(const sr_child *c);
/* Hand the supervisor the working dir (the cwd) as an O_PATH fd. */
void sr_child_send_workdir(sr_child *c);
/* rlimits, stdio, every privilege dropped (not for keep_privileges),
 * inherited fds closed, then the seccomp filter: from here on only the
 * policy's system calls exist. Fails through sr_child_fail. */
void sr_child_lock_down(sr_child *c);
/* Become the sandbox's init: start python as pid 2, reap orphans, report
 * python's wait status, exit. Returns only in python's process: a cold
 * run execs there (vfork; then pid 1 execs c->init_fd when there is one),
 * the warm path returns to the interpreter (so it forks with fork(), which
 * keeps libc's per-thread state right). */
pid_t sr_child_become_init(const sr_child *c, bool python_forks);
/* The warm path's init (runtime/zygote/init.c): called in the sandbox's
 * first process, which shares the zygote's memory (CLONE_VM|CLONE_VFORK).
 * Forks python (pid 2), which returns here with 0; this process execs
 * c->init_fd, a small static init, so pid 1 keeps no copy of the
 * zygote's address space. Fails through sr_child_fail. */
pid_t sr_child_exec_init(const sr_child *c);
/* Move the calling thread into the group(s): "0" to each file. */
int sr_cgroup_join_self(const int *fds, int n);
/* Install prog in the calling thread (no_new_privs is set). 0 or -errno. */
int sr_seccomp_load(const sr_bpf *prog);

#endif

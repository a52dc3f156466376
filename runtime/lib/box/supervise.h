/* Watching a running sandbox: output, wall clock, the child's reports. */
#ifndef SR_SUPERVISE_H
#define SR_SUPERVISE_H

#include <stdbool.h>
#include <stdint.h>

#include "cgroup.h"
#include "child/child.h"
#include "saferun.h"

typedef struct sr_watch {
	int pidfd; /* the sandbox's init */
	int out_fd, err_fd, report_fd;
	int ctl_fd; /* a kernel's control socket: a run ends at "done"; -1: none */
	uint64_t wall_ms;
	uint64_t output_bytes; /* cap per stream */
	sr_cgroup *cg;         /* the sandbox's group: ended whole at the deadline */
	/* The bytes kept of each stream as they are read (sr_run_request.on_output). */
	void (*on_output)(void *arg, int stream, const char *data, size_t len);
	void *on_output_arg;
} sr_watch;

/* How the sandbox's pid 1 let the run down. It runs as the code's uid, so
 * the supervisor trusts neither its report nor its exit. */
enum sr_init_fault {
	SR_INIT_OK = 0,
	SR_INIT_SILENT, /* the code had ended, pid 1 reported nothing by the deadline */
	SR_INIT_STAYED, /* pid 1 reported python's end but did not exit */
};

typedef struct sr_outcome {
	bool timed_out;
	bool output_exceeded;
	bool have_exit; /* python's wait status arrived */
	int wstatus;
	bool setup_failed;
	int setup_errnum;
	char setup_what[244];
	enum sr_init_fault init_fault; /* pid 1 misbehaved: the sandbox was killed */
	bool done;                     /* a kernel finished the run and lives on */
	int done_status;
	uint64_t duration_ms;
} sr_outcome;

/* Run the event loop until init exits and the output pipes are drained
 * (or, with a ctl_fd, until the kernel says the run is done and what it
 * wrote is read), killing init when a stream passes its cap and the whole
 * group at the deadline. Streams are appended to res->out, res->err and
 * res->merged. Every wait is bounded: a pid 1 that has not exited by the
 * deadline (and EXIT_GRACE_MS after its report) is killed with the group
 * and oc->init_fault says how it misbehaved. Reaps init when it ended. */
int sr_supervise(const sr_watch *w, sr_result *res, sr_outcome *oc, sr_error *err);

/* Append to a buffer, keeping at most cap bytes; returns bytes dropped. */
size_t sr_buf_append(sr_buf *b, const char *data, size_t len, size_t cap);

#endif

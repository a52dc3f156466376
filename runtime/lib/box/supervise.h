/* Watching a running sandbox: output, wall clock, the child's reports. */
#ifndef SR_SUPERVISE_H
#define SR_SUPERVISE_H

#include <stdbool.h>
#include <stdint.h>

#include "child/child.h"
#include "saferun.h"

typedef struct sr_watch {
	int pidfd; /* the sandbox's init */
	int out_fd, err_fd, report_fd;
	int ctl_fd; /* a kernel's control socket: a run ends at "done"; -1: none */
	uint64_t wall_ms;
	uint64_t output_bytes; /* cap per stream */
} sr_watch;

typedef struct sr_outcome {
	bool timed_out;
	bool output_exceeded;
	bool have_exit; /* python's wait status arrived */
	int wstatus;
	bool setup_failed;
	int setup_errnum;
	char setup_what[244];
	bool done; /* a kernel finished the run and lives on */
	int done_status;
	uint64_t duration_ms;
} sr_outcome;

/* Run the event loop until init exits and the output pipes are drained
 * (or, with a ctl_fd, until the kernel says the run is done and what it
 * wrote is read), killing init on timeout or when a stream passes its cap.
 * Streams are appended to res->out, res->err and res->merged. Reaps init
 * when it ended. */
int sr_supervise(const sr_watch *w, sr_result *res, sr_outcome *oc, sr_error *err);

/* Append to a buffer, keeping at most cap bytes; returns bytes dropped. */
size_t sr_buf_append(sr_buf *b, const char *data, size_t len, size_t cap);

#endif

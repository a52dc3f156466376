/* The classification of a run's end (sr_box_classify), as a table: what
 * the supervisor saw (deadline, pid 1's faults, output cap, set-up
 * failure, python's wait status) and the group's counters go in; the
 * status, exit code, signal, limits hit, message and any run-time finding
 * come out. The order of the checks is in the table too: a run that hit
 * two things is classified by the first. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "base/base.h"
#include "box/box.h"
#include "check.h"
#include "saferun.h"

#define EXITED(code)  W_EXITCODE(code, 0)
#define SIGNALED(sig) W_EXITCODE(0, sig)

/* The runner's audit hook ends a run with exit 121 and this last line. */
#define BLOCKED_LINE                                                                          \
	"saferun: blocked open('/etc/x', 'w') at main.py line 3 (SR204 file-write): writing " \
	"outside the working dir"

static const sr_limits limits = {
	.wall_ms = 2500,
	.memory_bytes = 256 * MIB,
	.pids = 32,
	.output_bytes = 1024,
};

struct row {
	const char *name;
	/* in */
	sr_outcome oc;
	uint64_t oom_kills, pids_denied;
	const char *stderr_text;
	/* out */
	sr_status status;
	int exit_code, signal;
	bool hit_memory, hit_pids;
	const char *message;
	const char *finding; /* "RULE RULE_NAME LINE NAME | MESSAGE", NULL: none */
};

static const struct row rows[] = {
	{ "exit 0", .oc = { .have_exit = true, .wstatus = EXITED(0) }, .status = SR_STATUS_OK,
	  .message = "" },
	{ "exit 3", .oc = { .have_exit = true, .wstatus = EXITED(3) }, .status = SR_STATUS_ERROR,
	  .exit_code = 3, .message = "error: the code exited with status 3" },
	{ "signal 15", .oc = { .have_exit = true, .wstatus = SIGNALED(SIGTERM) },
	  .status = SR_STATUS_KILLED, .exit_code = -1, .signal = SIGTERM,
	  .message = "killed: the run was ended by signal 15 (Terminated)" },
	{ "SIGSYS names seccomp", .oc = { .have_exit = true, .wstatus = SIGNALED(SIGSYS) },
	  .status = SR_STATUS_KILLED, .exit_code = -1, .signal = SIGSYS,
	  .message = "killed: the run was ended by signal 31 (Bad system call), a system call "
		     "the seccomp policy forbids" },
	{ "no wait status: SIGKILL", .oc = { .have_exit = false }, .status = SR_STATUS_KILLED,
	  .exit_code = -1, .signal = SIGKILL,
	  .message = "killed: the run was ended by signal 9 (Killed)" },
	{ "deadline", .oc = { .timed_out = true }, .status = SR_STATUS_TIMEOUT, .exit_code = -1,
	  .signal = SIGKILL, .message = "timeout: the run passed its wall-clock limit of 2.5 s" },
	{ "deadline before output and oom",
	  .oc = { .timed_out = true,
		  .output_exceeded = true,
		  .have_exit = true,
		  .wstatus = SIGNALED(SIGKILL) },
	  .oom_kills = 1, .status = SR_STATUS_TIMEOUT, .exit_code = -1, .signal = SIGKILL,
	  .hit_memory = true, .message = "timeout: the run passed its wall-clock limit of 2.5 s" },
	{ "pid 1 silent", .oc = { .init_fault = SR_INIT_SILENT, .output_exceeded = true },
	  .status = SR_STATUS_INTERNAL_ERROR, .exit_code = -1, .signal = SIGKILL,
	  .message = "internal_error: the sandbox's pid 1 did not report the end of the code by "
		     "the run's deadline; the sandbox was killed" },
	{ "pid 1 stayed (its report is not the result)",
	  .oc = { .init_fault = SR_INIT_STAYED, .have_exit = true, .wstatus = EXITED(0) },
	  .status = SR_STATUS_INTERNAL_ERROR,
	  .message = "internal_error: the sandbox's pid 1 reported the end of the code but did "
		     "not exit; the sandbox was killed" },
	{ "output cap before set-up and oom",
	  .oc = { .output_exceeded = true,
		  .setup_failed = true,
		  .have_exit = true,
		  .wstatus = SIGNALED(SIGKILL) },
	  .oom_kills = 2, .status = SR_STATUS_OUTPUT_LIMIT, .exit_code = -1, .signal = SIGKILL,
	  .hit_memory = true,
	  .message = "output_limit: a stream passed 1024 bytes; output truncated" },
	{ "set-up failed before oom",
	  .oc = { .setup_failed = true, .setup_errnum = EACCES, .setup_what = "mount /proc" },
	  .oom_kills = 1, .status = SR_STATUS_INTERNAL_ERROR, .exit_code = -1, .signal = SIGKILL,
	  .hit_memory = true,
	  .message = "internal_error: sandbox set-up failed: mount /proc: Permission denied" },
	{ "oom: killed", .oc = { .have_exit = true, .wstatus = SIGNALED(SIGKILL) }, .oom_kills = 1,
	  .status = SR_STATUS_OOM, .exit_code = -1, .signal = SIGKILL, .hit_memory = true,
	  .message = "oom: the run passed its memory limit of 256 MiB" },
	{ "oom: a child killed, python failed", .oc = { .have_exit = true, .wstatus = EXITED(1) },
	  .oom_kills = 1, .pids_denied = 1, .status = SR_STATUS_OOM, .exit_code = 1,
	  .hit_memory = true, .hit_pids = true,
	  .message = "oom: the run passed its memory limit of 256 MiB" },
	{ "oom kill survived: ok, limit hit", .oc = { .have_exit = true, .wstatus = EXITED(0) },
	  .oom_kills = 1, .status = SR_STATUS_OK, .hit_memory = true, .message = "" },
	{ "pids", .oc = { .have_exit = true, .wstatus = EXITED(1) }, .pids_denied = 7,
	  .status = SR_STATUS_PIDS, .exit_code = 1, .hit_pids = true,
	  .message = "pids: the run hit its limit of 32 processes/threads" },
	{ "pids: killed", .oc = { .have_exit = false }, .pids_denied = 1, .status = SR_STATUS_PIDS,
	  .exit_code = -1, .signal = SIGKILL, .hit_pids = true,
	  .message = "pids: the run hit its limit of 32 processes/threads" },
	{ "fork refused, survived: ok, limit hit",
	  .oc = { .have_exit = true, .wstatus = EXITED(0) }, .pids_denied = 1,
	  .status = SR_STATUS_OK, .hit_pids = true, .message = "" },
	{ "blocked at run time", .oc = { .have_exit = true, .wstatus = EXITED(121) },
	  .stderr_text = "Traceback (most recent call last):\n" BLOCKED_LINE "\n\n",
	  .status = SR_STATUS_REJECTED, .exit_code = 121,
	  .message = "rejected: blocked open('/etc/x', 'w') at main.py line 3 (SR204 "
		     "file-write): writing outside the working dir",
	  .finding = "SR204 file-write 3 open('/etc/x', 'w') | at run time, open('/etc/x', 'w') "
		     "at main.py line 3 (SR204 file-write): writing outside the working dir" },
	{ "blocked line not last: exit 121 is an error",
	  .oc = { .have_exit = true, .wstatus = EXITED(121) },
	  .stderr_text = BLOCKED_LINE "\nmore\n", .status = SR_STATUS_ERROR, .exit_code = 121,
	  .message = "error: the code exited with status 121" },
	{ "exit 121, nothing on stderr", .oc = { .have_exit = true, .wstatus = EXITED(121) },
	  .status = SR_STATUS_ERROR, .exit_code = 121,
	  .message = "error: the code exited with status 121" },
	{ "blocked line without a rule: rejected, no finding",
	  .oc = { .have_exit = true, .wstatus = EXITED(121) },
	  .stderr_text = "saferun: blocked something", .status = SR_STATUS_REJECTED,
	  .exit_code = 121, .message = "rejected: blocked something" },
	{ "blocked line, other exit: error", .oc = { .have_exit = true, .wstatus = EXITED(1) },
	  .stderr_text = BLOCKED_LINE "\n", .status = SR_STATUS_ERROR, .exit_code = 1,
	  .message = "error: the code exited with status 1" },
};

static void check_row(const struct row *r)
{
	sr_result res;
	memset(&res, 0, sizeof res);
	if (r->stderr_text) {
		res.err.data = strdup(r->stderr_text);
		res.err.len = res.err.cap = strlen(r->stderr_text);
	}
	sr_cgroup_stats st = { .oom_kills = r->oom_kills, .pids_denied = r->pids_denied };
	sr_box_classify(&res, &r->oc, &st, &limits);
	fprintf(stderr, "-- %s\n", r->name);
	CHECK_INT(res.status, r->status);
	CHECK_INT(res.exit_code, r->exit_code);
	CHECK_INT(res.signal, r->signal);
	CHECK_INT(res.hit_memory, r->hit_memory);
	CHECK_INT(res.hit_pids, r->hit_pids);
	CHECK_STR(res.message, r->message);
	if (!r->finding) {
		CHECK_INT(res.n_findings, 0);
	} else if (res.n_findings == 1) {
		char got[1024];
		const sr_finding *f = &res.findings[0];
		snprintf(got, sizeof got, "%s %s %u %s | %s", f->rule, f->rule_name, f->line,
			 f->name, f->message);
		CHECK_STR(got, r->finding);
	} else {
		CHECK_INT(res.n_findings, 1);
	}
	sr_result_free(&res);
}

int main(void)
{
	for (size_t i = 0; i < ARRAY_LEN(rows); i++)
		check_row(&rows[i]);
	return check_report();
}

/* `saferun run` through a running saferund (as the docker CLI uses
 * dockerd): POST /v1/run over the daemon's unix socket, when the socket is
 * there, its server is root or the caller, and the daemon takes the run.
 * Anything short of a 200 leaves the run to the caller (in-process, cold):
 * the daemon answers 200 only once a sandbox was built. docs/cli.md. */
#ifndef SRCLI_DAEMON_CLIENT_H
#define SRCLI_DAEMON_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "saferun.h"

/* The daemon's default socket (saferund --socket), and the variable that
 * overrides it ("": never use a daemon). */
#define SRCLI_DAEMON_SOCKET     "/run/saferun/saferund.sock"
#define SRCLI_DAEMON_SOCKET_ENV "SAFERUN_SOCKET"

typedef struct srcli_daemon_run {
	const char *code;
	size_t code_size;
	char *const *env; /* "K=V" */
	size_t n_env;
	char *const *allow;
	size_t n_allow;
	const sr_file *files;
	size_t n_files;
	const char *stdin_data;
	size_t stdin_size;
	char *const *reqs;
	size_t n_reqs;
	uint64_t timeout_ms, memory_bytes; /* 0: the daemon's policy's */
	uint32_t cpu_millis;               /* 0: the daemon's policy's */
	sr_language language;              /* python: not sent */
	/* Output as it comes (the answer streams as NDJSON); NULL: one answer
	 * at the end, which *body then holds as the daemon sent it. */
	void (*on_output)(void *arg, int stream, const char *data, size_t len);
	void *on_output_arg;
} srcli_daemon_run;

/* 1: the daemon ran it; res holds the result (status, exit code, signal,
 * streams, message, id, path) and *body the answer as the daemon sent it
 * (the result's JSON; caller frees). 0: not handed over, why says why:
 * run it in-process. -1: handed over but the answer was lost (the code
 * may have run: not to be run again); why says why. */
int srcli_daemon_run_code(const srcli_daemon_run *r, sr_result *res, char **body, char *why,
			  size_t why_size);

#endif

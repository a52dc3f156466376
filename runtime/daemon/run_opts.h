/* What a run request asks for, whichever front-end it came through (the
 * REST body now; MCP tool arguments and session runs next): parsed and
 * checked field by field, every error naming its field. */
#ifndef SRD_RUN_OPTS_H
#define SRD_RUN_OPTS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "saferun.h"

#define SRD_MAX_FILES 1000
#define SRD_MAX_ENV   256
#define SRD_MAX_ALLOW 64

typedef struct srd_run_opts {
	/* strings point into the parsed document, which must outlive this */
	const char *code;
	size_t code_len;
	const char *policy; /* NULL: the default policy */
	bool have_timeout, have_memory, have_cpus;
	uint64_t timeout_ms, memory_bytes;
	uint32_t cpu_millis;
	char **env; /* "KEY=VALUE" (owned) */
	size_t n_env;
	sr_file *files; /* array owned; names and data point into the document */
	size_t n_files;
	const char *stdin_data; /* NULL: /dev/null */
	size_t stdin_len;
	const char **allow; /* array owned */
	size_t n_allow;
	const char *allow_field;   /* its name in the request, for errors; NULL: "allow" */
	bool stateful;             /* a session's: one interpreter for all its runs */
	const char **requirements; /* array owned; strings in the document */
	size_t n_requirements;
	bool stream; /* "stream": true: the answer streams (run_stream.h) */
	/* Not from JSON: the handler's sr_run_request.on_output, if it streams. */
	void (*on_output)(void *arg, int stream, const char *data, size_t len);
	void *on_output_arg;
} srd_run_opts;

typedef enum srd_opts_kind {
	SRD_OPTS_RUN,         /* POST /v1/run */
	SRD_OPTS_SESSION,     /* POST /v1/sessions: no code */
	SRD_OPTS_SESSION_RUN, /* POST /v1/sessions/{id}/run */
} srd_opts_kind;

/* {code, policy?, timeout?, memory?, cpus?, env?, files?, stdin?, allow?,
 * requirements?} */
int srd_run_opts_parse(const cJSON *obj, srd_run_opts *o, srd_ferr *e);
/* The same for the session bodies: each kind takes its own keys. */
int srd_run_opts_parse_as(const cJSON *obj, srd_opts_kind kind, srd_run_opts *o, srd_ferr *e);
void srd_run_opts_free(srd_run_opts *o);
/* Apply timeout, memory, cpus and env to p. They may lower the policy's
 * limits, never raise them: the operator's policy is the ceiling. */
int srd_run_opts_apply(const srd_run_opts *o, sr_policy *p, const char *policy_name, srd_ferr *e);

#endif

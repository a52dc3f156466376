/* The pre-execution checker's API: the confined run of one check with
 * its settings (policy/check.c makes them from a policy and a request),
 * the result and its JSON form. The rules
 * themselves are in checker_rules.c and checker_scan.c; the tokenizer,
 * parser and resolver in checker_tok.c, checker_parse.c and
 * checker_resolve.c; the child process in checker_confine.c and the
 * program it runs in runtime/checker. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "checker.h"
#include "checker_confine.h"
#include "checker_rules.h"
#include "checker_scan.h"
#include "checker_wire.h"
#include "saferun.h"

const sr_check_rule *sr_check_rules(size_t *n)
{
	*n = SR_R_COUNT;
	return sr_rule_table;
}

int sr_check_source_text(const char *code, size_t size, sr_error *err)
{
	if (!code)
		return sr_refuse(err, EINVAL, "no code given");
	if (size > SR_MAX_CODE_BYTES)
		return sr_refuse(err, EFBIG, "the code is %zu bytes, over the %u byte cap", size,
				 SR_MAX_CODE_BYTES);
	if (memchr(code, '\0', size))
		return sr_refuse(err, EINVAL,
				 "the code contains a NUL byte; Python source must be text");
	if (!sr_utf8_valid(code, size))
		return sr_refuse(err, EILSEQ, "the code is not valid UTF-8; save it as UTF-8 text");
	return 0;
}

struct job {
	const char *code;
	size_t size;
	const sr_check_config *cfg;
};

static size_t run_in_process(const struct job *j, const sr_confine_limits *lim, sr_check_out *out)
{
	sr_arena a;
	sr_arena_init_heap(&a, lim->memory_bytes);
	sr_checker_run(j->code, j->size, j->cfg, &a, out);
	sr_arena_free(&a);
	return SR_CHECK_OUT_SIZE(out->n);
}

static int copy_result(const sr_check_out *out, size_t got, sr_check_result *res, sr_error *err)
{
	if (got < SR_CHECK_OUT_SIZE(0) || out->magic != SR_CHECK_MAGIC ||
	    out->n > SR_CHECK_MAX_FINDINGS || got != SR_CHECK_OUT_SIZE(out->n))
		return sr_refuse(err, EPROTO, "the checker returned a malformed result");
	if (out->status == -2)
		return sr_refuse(err, ENOMEM,
				 "the code is too large or complex to check within the checker's "
				 "memory limit (raise checker.memory in the policy)");
	res->findings = calloc(out->n ? out->n : 1, sizeof *res->findings);
	if (!res->findings)
		return sr_fail(err, ENOMEM, "copy the checker's findings");
	memcpy(res->findings, out->f, out->n * sizeof *out->f);
	for (uint32_t i = 0; i < out->n; i++) {
		sr_finding *f = &res->findings[i];
		f->rule[sizeof f->rule - 1] = f->rule_name[sizeof f->rule_name - 1] = '\0';
		f->name[sizeof f->name - 1] = f->message[sizeof f->message - 1] = '\0';
	}
	res->n_findings = out->n;
	res->n_allowed = out->n_allowed;
	res->truncated = out->truncated != 0;
	return 0;
}

extern const unsigned char sr_embedded_checker[];
extern const size_t sr_embedded_checker_len;

/* The checker program (runtime/checker/main.c), one execute-only memfd
 * per process, made at the first check. */
static int checker_fd = -1, checker_errno;
static pthread_once_t checker_once = PTHREAD_ONCE_INIT;

static void make_checker_fd(void)
{
	checker_fd =
	    sr_exec_only_memfd("saferun-check", sr_embedded_checker, sr_embedded_checker_len);
	checker_errno = errno;
}

static size_t strings_len(const char *const *v, size_t n)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		len += strlen(v[i]) + 1;
	return len;
}

static int write_strings(int fd, const char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (sr_write_all(fd, v[i], strlen(v[i]) + 1) < 0)
			return -1;
	return 0;
}

/* The request laid out as checker_wire.h says, in a memfd that becomes
 * the program's fd 0: written whole now, read by the child at its pace. */
static int request_fd(const char *code, size_t size, const sr_check_settings *s, sr_error *err)
{
	size_t len = strings_len(s->dirs, s->cfg.n_dirs) + strings_len(s->allow, s->cfg.n_allow);
	if (len > SR_CHECK_WIRE_MAX_STRINGS)
		return sr_refuse(err, E2BIG,
				 "the checker's dirs and allow-list entries are %zu bytes, over %u",
				 len, SR_CHECK_WIRE_MAX_STRINGS);
	sr_check_wire h = { .magic = SR_CHECK_WIRE_MAGIC,
			    .rules_off = s->cfg.rules_off,
			    .network_off = s->cfg.network_off,
			    .n_dirs = (uint32_t)s->cfg.n_dirs,
			    .n_allow = (uint32_t)s->cfg.n_allow,
			    .strings_len = (uint32_t)len,
			    .code_len = size,
			    .memory_bytes = s->lim.memory_bytes,
			    .timeout_ms = s->lim.timeout_ms };
	int fd = memfd_create("saferun-check-input", MFD_CLOEXEC);
	if (fd < 0)
		return sr_fail(err, errno, "create the checker's input memfd");
	if (sr_write_all(fd, &h, sizeof h) < 0 || write_strings(fd, s->dirs, s->cfg.n_dirs) < 0 ||
	    write_strings(fd, s->allow, s->cfg.n_allow) < 0 || sr_write_all(fd, code, size) < 0 ||
	    lseek(fd, 0, SEEK_SET) != 0) {
		int e = errno;
		close(fd);
		return sr_fail(err, e, "write the checker's input (%zu bytes of code)", size);
	}
	return fd;
}

static int start_confined(const char *code, size_t size, const sr_check_settings *s, sr_confined *c,
			  sr_error *err)
{
	pthread_once(&checker_once, make_checker_fd);
	if (checker_fd < 0)
		return sr_fail(err, checker_errno, "make the checker program's memfd");
	int in = request_fd(code, size, s, err);
	if (in < 0)
		return -1;
	int rc = sr_confine_start(checker_fd, "saferun-check", in, &s->lim, c, err);
	close(in);
	return rc;
}

struct sr_check_job {
	sr_confined child;
	bool in_process;
	size_t got;
	struct timespec t0;
	sr_check_out out;
};

int sr_check_begin(const char *code, size_t size, bool in_process, const sr_check_settings *s,
		   sr_check_job **out, sr_error *err)
{
	*out = NULL;
	sr_check_job *job = malloc(sizeof *job);
	if (!job)
		return sr_fail(err, ENOMEM, "allocate the checker's result");
	clock_gettime(CLOCK_MONOTONIC, &job->t0);
	/* The child reads its own copy of the settings and the code (its
	 * input memfd): they may go here at once. */
	struct job j = { code, size, &s->cfg };
	job->got = 0;
	job->in_process = in_process;
	if (in_process)
		job->got = run_in_process(&j, &s->lim, &job->out);
	else if (start_confined(code, size, s, &job->child, err) < 0) {
		free(job);
		return -1;
	}
	*out = job;
	return 0;
}

int sr_check_finish(sr_check_job *job, sr_check_result *res, sr_error *err)
{
	memset(res, 0, sizeof *res);
	int rc = -1;
	if (job->in_process ||
	    sr_confine_finish(&job->child, &job->out, sizeof job->out, &job->got, err) == 0)
		rc = copy_result(&job->out, job->got, res, err);
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	res->duration_us = (uint64_t)((t1.tv_sec - job->t0.tv_sec) * 1000000 +
				      (t1.tv_nsec - job->t0.tv_nsec) / 1000);
	free(job);
	return rc;
}

void sr_check_abort(sr_check_job *job)
{
	if (job && !job->in_process)
		sr_confine_abort(&job->child);
	free(job);
}

void sr_check_result_free(sr_check_result *res)
{
	free(res->findings);
	memset(res, 0, sizeof *res);
}

cJSON *sr_findings_json(const sr_finding *f, size_t n)
{
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; arr && i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "rule", f[i].rule);
		cJSON_AddStringToObject(o, "rule_name", f[i].rule_name);
		cJSON_AddStringToObject(o, "name", f[i].name);
		cJSON_AddNumberToObject(o, "line", f[i].line);
		cJSON_AddNumberToObject(o, "col", f[i].col);
		cJSON_AddStringToObject(o, "message", f[i].message);
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

char *sr_check_result_to_json(const sr_check_result *res)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "verdict", res->n_findings ? "rejected" : "clean");
	cJSON_AddItemToObject(j, "findings", sr_findings_json(res->findings, res->n_findings));
	cJSON_AddNumberToObject(j, "allowed", (double)res->n_allowed);
	cJSON_AddBoolToObject(j, "truncated", res->truncated);
	cJSON_AddNumberToObject(j, "duration_us", (double)res->duration_us);
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

/* libFuzzer harness for what saferund parses of a request itself, behind
 * libmicrohttpd: the decoded path against the route patterns (captures),
 * the JSON body's strict text check and parse, a request's fields for
 * each kind of run (srd_run_opts_parse_as) and their application to the
 * default policy (limits, environment). Input: the path, '\n', the body.
 * Invariants: captures are NUL-terminated, non-empty and hold no '/'; an
 * error is a 4xx/5xx naming its message. Build: tests/CMakeLists.txt. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/daemon/json.h"
#include "../../runtime/daemon/routes.h"
#include "../../runtime/daemon/run_opts.h"
#include "saferun.h"

/* runtime/daemon/routes.c's patterns, one of each shape */
static const char *const patterns[] = {
	"/v1/run",
	"/v1/sessions/{id}",
	"/v1/sessions/{id}/files",
	"/v1/sessions/{id}/files/{path*}",
	"/v1/sessions/{id}/run",
	"/sessions/{id}/artifacts/{filename*}",
	"/sessions/{id}/copy-to",
};

static sr_policy *base;

static void expect(int ok)
{
	if (!ok)
		__builtin_trap();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	sr_error err = { 0 };
	setenv("SAFERUN_CACHE_DIR", "off", 1);
	expect(sr_policy_load_json("{}", 2, "fuzz", &base, &err) == 0);
	return 0;
}

static void check_error(const srd_ferr *e)
{
	expect(e->status >= 400 && e->status < 600);
	expect(memchr(e->msg, 0, sizeof e->msg) && e->msg[0]);
	expect(memchr(e->field, 0, sizeof e->field) != NULL);
}

static void match_routes(const char *path)
{
	for (size_t i = 0; i < sizeof patterns / sizeof *patterns; i++) {
		static srd_request req;
		memset(&req, 0, sizeof req);
		if (!srd_route_match(patterns[i], path, &req))
			continue;
		expect(srd_route_match(patterns[i], path, NULL));
		for (size_t j = 0; j < req.n_params; j++) {
			expect(memchr(req.params[j], 0, sizeof req.params[j]) != NULL);
			expect(req.params[j][0] && !strchr(req.params[j], '/'));
		}
		expect(memchr(req.rest, 0, sizeof req.rest) != NULL);
	}
}

static void parse_body(const char *body, size_t len)
{
	srd_ferr e = { 0 };
	cJSON *doc = NULL;
	if (srd_json_parse_object(body, len, &doc, &e) < 0) {
		check_error(&e);
		return;
	}
	for (int kind = SRD_OPTS_RUN; kind <= SRD_OPTS_SESSION_RUN; kind++) {
		srd_run_opts o = { 0 };
		srd_ferr oe = { 0 };
		if (srd_run_opts_parse_as(doc, (srd_opts_kind)kind, &o, &oe) < 0) {
			check_error(&oe);
		} else {
			sr_policy *p = sr_policy_dup(base);
			expect(p != NULL);
			if (srd_run_opts_apply(&o, p, "default", &oe) < 0)
				check_error(&oe);
			sr_policy_free(p);
		}
		srd_run_opts_free(&o);
	}
	cJSON_Delete(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	char *nl = memchr(buf, '\n', size);
	size_t body_len = nl ? size - (size_t)(nl + 1 - buf) : 0;
	if (nl)
		*nl = '\0';
	match_routes(buf);
	if (nl)
		parse_body(nl + 1, body_len);
	free(buf);
	return 0;
}

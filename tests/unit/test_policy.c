/* Policies: defaults, presets, overrides, every class of validation error
 * (with its exact text), sizes and durations, the JSON round trip. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "check.h"
#include "policy/policy.h"
#include "saferun.h"

static sr_policy *load(const char *json)
{
	sr_error err = { 0 };
	sr_policy *p = NULL;

	if (sr_policy_load_json(json, strlen(json), "t.json", &p, &err) < 0) {
		fprintf(stderr, "unexpected error: %s\n  for %s\n", err.msg, json);
		return NULL;
	}
	return p;
}

/* The document is refused with exactly this message, and nothing leaks. */
static void expect_error(const char *json, const char *want)
{
	sr_error err = { 0 };
	sr_policy *p = (sr_policy *)&err;
	int rc = sr_policy_load_json(json, strlen(json), "t.json", &p, &err);

	CHECK_INT(rc, -1);
	CHECK(p == NULL);
	CHECK_STR(err.msg, want);
	if (rc == 0)
		sr_policy_free(p);
}

/* As expect_error, for messages whose tail is libseccomp's or strerror's. */
static void expect_error_prefix(const char *json, const char *want)
{
	sr_error err = { 0 };
	sr_policy *p = NULL;
	int rc = sr_policy_load_json(json, strlen(json), "t.json", &p, &err);

	CHECK_INT(rc, -1);
	if (strncmp(err.msg, want, strlen(want)) != 0) {
		fprintf(stderr, "got  \"%s\"\nwant \"%s...\"\n", err.msg, want);
		CHECK(!"message prefix");
	}
	if (rc == 0)
		sr_policy_free(p);
}

static int has_env(const sr_policy *p, const char *kv)
{
	for (size_t i = 0; i < p->n_env; i++)
		if (strcmp(p->env[i], kv) == 0)
			return 1;
	return 0;
}

static void test_default_policy_has_the_documented_values(void)
{
	sr_error err = { 0 };
	sr_policy *p = NULL;

	CHECK_INT(sr_policy_default(&p, &err), 0);
	if (!p)
		return;
	CHECK_STR(p->name, "default");
	CHECK_STR(p->preset, "medium");
	CHECK_INT(p->limits.wall_ms, 20000);
	CHECK_INT(p->limits.cpu_millis, 1000);
	CHECK_INT(p->limits.memory_bytes, 512 * MIB);
	CHECK_INT(p->limits.swap_bytes, 0);
	CHECK_INT(p->limits.pids, 64);
	CHECK_INT(p->limits.tmpfs_bytes, 64 * MIB);
	CHECK_INT(p->limits.output_bytes, MIB);
	CHECK_INT(p->limits.open_files, 256);
	CHECK_STR(p->profile, "datascience");
	CHECK_STR(p->workdir, "/work");
	CHECK_INT(p->n_writable, 2);
	if (p->n_writable == 2) {
		CHECK_STR(p->writable[0], "/tmp");
		CHECK_STR(p->writable[1], "/work");
	}
	CHECK_INT(p->net_mode, SR_NET_NONE);
	CHECK(has_env(p, "PATH=/usr/local/bin:/usr/bin:/bin"));
	CHECK(has_env(p, "HOME=/work"));
	CHECK(has_env(p, "LANG=C.UTF-8"));
	CHECK(has_env(p, "PYTHONDONTWRITEBYTECODE=1"));
	CHECK_INT(p->seccomp.default_action.kind, SR_SCMP_ERRNO);
	CHECK_INT(p->seccomp.default_action.errno_ret, ENOSYS);
	CHECK(p->seccomp.n_rules > 10);
	CHECK(p->warm.enabled); /* warm by default (docs/warm.md) */
	CHECK_INT(p->warm.n_preload, 3);
	if (p->warm.n_preload == 3) {
		CHECK_STR(p->warm.preload[0], "numpy");
		CHECK_STR(p->warm.preload[1], "pandas");
		CHECK_STR(p->warm.preload[2], "matplotlib.pyplot");
	}
	CHECK(p->warm.warmup && strstr(p->warm.warmup, "if 'pandas' in sys.modules:"));
	CHECK(p->warm.pool_size_auto);
	CHECK_INT(p->warm.pool_size, 0);
	CHECK(p->warm.fallback_cold);
	sr_policy_free(p);
}

/* The defaults live in the schema's tables (policy_<section>.c); policies/default.json
 * repeats the plain ones for its readers and adds lists and sections. Both
 * the shipped file and the built-in default must agree with the tables on
 * every plain field, and the comparison must see a difference. */
static void test_default_json_agrees_with_the_schema(void)
{
	sr_error err = { 0 };
	sr_policy *schema = NULL, *builtin = NULL, *file = NULL;

	CHECK_INT(sr_policy_schema_defaults(&schema, &err), 0);
	CHECK_INT(sr_policy_default(&builtin, &err), 0);
	CHECK_INT(sr_policy_load_file(POLICIES_DIR "/default.json", &file, &err), 0);
	if (!schema || !builtin || !file)
		goto out;
	err.msg[0] = '\0';
	CHECK_INT(sr_policy_schema_compare(schema, builtin, &err), 0);
	CHECK_STR(err.msg, "");
	CHECK_INT(sr_policy_schema_compare(schema, file, &err), 0);
	CHECK_STR(err.msg, "");
	file->warm.refill_eager = true;
	CHECK_INT(sr_policy_schema_compare(schema, file, &err), -1);
	CHECK_STR(err.msg, "policy.warm.refill: 0 and 1");
	free(file->workdir);
	file->workdir = NULL;
	CHECK_INT(sr_policy_schema_compare(schema, file, &err), -1);
	CHECK_STR(err.msg, "policy.filesystem.workdir: \"/work\" and \"(null)\"");
out:
	sr_policy_free(schema);
	sr_policy_free(builtin);
	sr_policy_free(file);
}

static void test_empty_document_is_the_default(void)
{
	sr_error err = { 0 };
	sr_policy *d = NULL, *p = load("{}");

	CHECK_INT(sr_policy_default(&d, &err), 0);
	if (!p || !d)
		goto out;
	char *a = sr_policy_to_json(d), *b = sr_policy_to_json(p);
	CHECK_STR(a, b);
	CHECK_STR(p->name, "t.json");
	free(a);
	free(b);
out:
	sr_policy_free(p);
	sr_policy_free(d);
}

static void test_presets(void)
{
	static const struct {
		const char *name;
		sr_limits l;
	} want[] = {
		{ "tiny", { 5000, 250, 128 * MIB, 0, 16, 16 * MIB, 64 * KIB, 256 } },
		{ "small", { 10000, 500, 256 * MIB, 0, 32, 32 * MIB, 256 * KIB, 256 } },
		{ "medium", { 20000, 1000, 512 * MIB, 0, 64, 64 * MIB, MIB, 256 } },
		{ "large", { 60000, 2000, 2 * GIB, 0, 256, 512 * MIB, 10 * MIB, 256 } },
	};
	sr_error err = { 0 };
	sr_policy *p = NULL;

	CHECK_INT(sr_policy_default(&p, &err), 0);
	if (!p)
		return;
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		CHECK_INT(sr_policy_apply_preset(p, want[i].name, &err), 0);
		CHECK(memcmp(&p->limits, &want[i].l, sizeof p->limits) == 0);
		CHECK_STR(p->preset, want[i].name);
	}
	CHECK_INT(sr_policy_apply_preset(p, "huge", &err), -1);
	CHECK_STR(err.msg, "preset \"huge\" is unknown (known: tiny, small, medium, large)");
	CHECK_INT(err.errnum, EINVAL);
	CHECK_STR(p->preset, "large"); /* unchanged by the failed call */
	sr_policy_free(p);
}

static void test_preset_then_limits_whatever_the_key_order(void)
{
	const char *docs[] = {
		"{\"preset\": \"tiny\", \"limits\": {\"memory\": \"200M\"}}",
		"{\"limits\": {\"memory\": \"200M\"}, \"preset\": \"tiny\"}",
	};
	for (size_t i = 0; i < 2; i++) {
		sr_policy *p = load(docs[i]);
		CHECK(p != NULL);
		if (!p)
			continue;
		CHECK_STR(p->preset, "tiny");
		CHECK_INT(p->limits.memory_bytes, 200 * MIB);
		CHECK_INT(p->limits.wall_ms, 5000);
		CHECK_INT(p->limits.pids, 16);
		sr_policy_free(p);
	}
}

static void test_overrides_keep_other_defaults(void)
{
	sr_policy *p =
	    load("{\"comment\": \"hi\", \"limits\": {\"wall_time\": 0.5, \"cpus\": 0.5, "
		 "\"memory\": 1073741824, \"swap\": \"1.5G\", \"pids\": 10, \"tmpfs\": \"1MiB\", "
		 "\"output\": \"1K\", \"open_files\": 16, \"comment\": \"x\"}}");
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_INT(p->limits.wall_ms, 500);
	CHECK_INT(p->limits.cpu_millis, 500);
	CHECK_INT(p->limits.memory_bytes, GIB);
	CHECK_INT(p->limits.swap_bytes, 3 * GIB / 2);
	CHECK_INT(p->limits.pids, 10);
	CHECK_INT(p->limits.tmpfs_bytes, MIB);
	CHECK_INT(p->limits.output_bytes, KIB);
	CHECK_INT(p->limits.open_files, 16);
	CHECK_STR(p->workdir, "/work");
	CHECK(has_env(p, "HOME=/work"));
	CHECK(p->seccomp.n_rules > 10);
	sr_policy_free(p);

	p = load(
	    "{\"limits\": {\"wall_time\": \"2m\"}, \"filesystem\": {\"profile\": \"datascience\", "
	    "\"workdir\": \"/home/user\", \"writable\": [\"/home/user\", \"/tmp\"]}, "
	    "\"network\": {\"mode\": \"none\"}}");
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_INT(p->limits.wall_ms, 120000);
	CHECK_INT(p->limits.memory_bytes, 512 * MIB);
	CHECK_STR(p->profile, "datascience");
	CHECK_STR(p->workdir, "/home/user");
	CHECK_INT(p->n_writable, 2);
	sr_policy_free(p);
}

static void test_environment_and_seccomp_replace_whole_sections(void)
{
	sr_policy *p =
	    load("{\"environment\": {\"A\": \"1\", \"B\": \"x=y\"}, \"seccomp\": "
		 "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": [{\"names\": [\"mount\"], "
		 "\"action\": \"SCMP_ACT_ERRNO\", \"comment\": \"no mounts\"}]}}");
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_INT(p->n_env, 2);
	CHECK(has_env(p, "A=1"));
	CHECK(has_env(p, "B=x=y"));
	CHECK(!has_env(p, "HOME=/work"));
	CHECK_INT(p->seccomp.default_action.kind, SR_SCMP_ALLOW);
	CHECK_INT(p->seccomp.n_rules, 1);
	CHECK_INT(p->seccomp.rules[0].action.kind, SR_SCMP_ERRNO);
	CHECK_INT(p->seccomp.rules[0].action.errno_ret, EPERM); /* errnoRet omitted */
	sr_policy_free(p);

	p = load(
	    "{\"seccomp\": {\"defaultAction\": \"SCMP_ACT_KILL\", \"syscalls\": [{\"names\": "
	    "[\"write\"], \"action\": \"SCMP_ACT_ALLOW\", \"args\": [{\"index\": 0, \"value\": "
	    "\"0xffffffff00000000\", \"valueTwo\": 4294967296, \"op\": "
	    "\"SCMP_CMP_MASKED_EQ\"}]}]}}");
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_INT(p->seccomp.default_action.kind, SR_SCMP_KILL_THREAD);
	CHECK_INT(p->seccomp.rules[0].n_args, 1);
	CHECK(p->seccomp.rules[0].args[0].value == 0xffffffff00000000ULL);
	CHECK(p->seccomp.rules[0].args[0].value_two == 0x100000000ULL);
	CHECK_INT(p->seccomp.rules[0].args[0].op, SR_CMP_MASKED_EQ);
	sr_policy_free(p);
}

static void test_limit_errors(void)
{
	expect_error(
	    "{\"limits\": {\"memory\": \"512X\"}}",
	    "t.json: policy.limits.memory: \"512X\" is not a size (use 512M, 1G, or bytes)");
	expect_error("{\"limits\": {\"memory\": 4096}}",
		     "t.json: policy.limits.memory: 4096 is too small (at least 16M)");
	expect_error("{\"limits\": {\"memory\": \"2T\"}}",
		     "t.json: policy.limits.memory: \"2T\" is too large (at most 1T)");
	expect_error("{\"limits\": {\"memory\": -5}}",
		     "t.json: policy.limits.memory: -5 is too small (at least 16M)");
	expect_error("{\"limits\": {\"memory\": 1.5}}",
		     "t.json: policy.limits.memory: 1.5 is not a size (use 512M, 1G, or bytes)");
	expect_error("{\"limits\": {\"swap\": true}}",
		     "t.json: policy.limits.swap: true is not a size (use 512M, 1G, or bytes)");
	expect_error(
	    "{\"limits\": {\"foo\": 1}}",
	    "t.json: policy.limits.foo: unknown key (known: wall_time, cpus, memory, swap, pids, "
	    "tmpfs, output, open_files, comment)");
	expect_error("{\"limits\": {\"pids\": 0}}",
		     "t.json: policy.limits.pids: 0 is too small (at least 1)");
	expect_error("{\"limits\": {\"pids\": 1000001}}",
		     "t.json: policy.limits.pids: 1000001 is too large (at most 1000000)");
	expect_error("{\"limits\": {\"pids\": 64.5}}",
		     "t.json: policy.limits.pids: 64.5 is not a whole number");
	expect_error("{\"limits\": {\"pids\": \"64\"}}",
		     "t.json: policy.limits.pids: \"64\" is not a whole number");
	expect_error("{\"limits\": {\"tmpfs\": \"512K\"}}",
		     "t.json: policy.limits.tmpfs: \"512K\" is too small (at least 1M)");
	expect_error("{\"limits\": {\"output\": 512}}",
		     "t.json: policy.limits.output: 512 is too small (at least 1K)");
	expect_error("{\"limits\": {\"output\": \"2G\"}}",
		     "t.json: policy.limits.output: \"2G\" is too large (at most 1G)");
	expect_error("{\"limits\": {\"wall_time\": \"5ms\"}}",
		     "t.json: policy.limits.wall_time: \"5ms\" is too small (at least 10ms)");
	expect_error("{\"limits\": {\"wall_time\": \"25h\"}}",
		     "t.json: policy.limits.wall_time: \"25h\" is too large (at most 24h)");
	expect_error("{\"limits\": {\"wall_time\": 1e300}}",
		     "t.json: policy.limits.wall_time: 1e+300 is too large (at most 24h)");
	expect_error("{\"limits\": {\"wall_time\": \"20x\"}}",
		     "t.json: policy.limits.wall_time: \"20x\" is not a duration (use 20, 20s, "
		     "500ms or 2m)");
	expect_error(
	    "{\"limits\": {\"wall_time\": null}}",
	    "t.json: policy.limits.wall_time: null is not a duration (use 20, 20s, 500ms or 2m)");
	expect_error("{\"limits\": {\"open_files\": 15}}",
		     "t.json: policy.limits.open_files: 15 is too small (at least 16)");
	expect_error("{\"limits\": {\"open_files\": 2000000}}",
		     "t.json: policy.limits.open_files: 2000000 is too large (at most 1048576)");
	expect_error("{\"limits\": {\"cpus\": 0}}",
		     "t.json: policy.limits.cpus: 0 is too small (at least 0.01)");
	expect_error("{\"limits\": {\"cpus\": -1}}",
		     "t.json: policy.limits.cpus: -1 is too small (at least 0.01)");
	expect_error("{\"limits\": {\"cpus\": 2000}}",
		     "t.json: policy.limits.cpus: 2000 is too large (at most 1024)");
	expect_error("{\"limits\": {\"cpus\": \"1\"}}",
		     "t.json: policy.limits.cpus: \"1\" is not a number of CPUs (use 1 or 0.5)");
	expect_error("{\"limits\": {\"pids\": 1, \"pids\": 2}}",
		     "t.json: policy.limits.pids: appears twice");
	expect_error("{\"limits\": [1]}",
		     "t.json: policy.limits: expected an object, got an array");
	expect_error("{\"limits\": []}", "t.json: policy.limits: expected an object, got []");
	expect_error(
	    "{\"preset\": \"huge\"}",
	    "t.json: policy.preset: \"huge\" is not a preset (known: tiny, small, medium, large)");
	expect_error("{\"preset\": 1}", "t.json: policy.preset: expected a string, got 1");
}

static void test_document_errors(void)
{
	expect_error("[1, 2]", "t.json: policy: expected an object, got an array");
	expect_error("{\"foo\": 1}",
		     "t.json: policy.foo: unknown key (known: preset, limits, filesystem, network, "
		     "environment, seccomp, checker, warm, dependencies, commands, comment)");
	expect_error(
	    "{\"Limits\": {}}",
	    "t.json: policy.Limits: unknown key (known: preset, limits, filesystem, network, "
	    "environment, seccomp, checker, warm, dependencies, commands, comment)");
	expect_error("{\"comment\": 1}", "t.json: policy.comment: expected a string, got 1");
	expect_error("{\n  \"limits\": {\n    \"pids\": 64,\n  }\n}",
		     "t.json: policy: malformed JSON at line 4, column 4 (byte 35)");
	expect_error("", "t.json: policy: malformed JSON at line 1, column 1 (byte 0)");
	expect_error(
	    "{} x",
	    "t.json: policy: unexpected text after the JSON document at line 1, column 4 (byte 3)");
	expect_error("{\"network\": {\"mode\": \"host\"}}",
		     "t.json: policy.network.mode: \"host\" is not a network mode (known: none, "
		     "egress)");
	expect_error(
	    "{\"network\": {\"egress\": []}}",
	    "t.json: policy.network.egress: unknown key (known: mode, allow, dns, comment)");

	/* no origin: the path alone */
	sr_error err = { 0 };
	sr_policy *p = NULL;
	CHECK_INT(sr_policy_load_json("{\"limits\": 1}", 13, NULL, &p, &err), -1);
	CHECK_STR(err.msg, "policy.limits: expected an object, got 1");
	CHECK_INT(err.errnum, EINVAL);
}

static void test_filesystem_errors(void)
{
	expect_error("{\"filesystem\": {\"writable\": [\"tmp\"]}}",
		     "t.json: policy.filesystem.writable[0]: \"tmp\" must be an absolute path");
	expect_error("{\"filesystem\": {\"writable\": [\"/work\", \"/work/../etc\"]}}",
		     "t.json: policy.filesystem.writable[1]: \"/work/../etc\" must not contain . "
		     "or .. components");
	expect_error(
	    "{\"filesystem\": {\"workdir\": \"/work/.\"}}",
	    "t.json: policy.filesystem.workdir: \"/work/.\" must not contain . or .. components");
	expect_error(
	    "{\"filesystem\": {\"writable\": [\"/work//x\"]}}",
	    "t.json: policy.filesystem.writable[0]: \"/work//x\" must not contain empty components "
	    "(// or a trailing /)");
	expect_error(
	    "{\"filesystem\": {\"writable\": [\"/tmp/\"]}}",
	    "t.json: policy.filesystem.writable[0]: \"/tmp/\" must not contain empty components "
	    "(// or a trailing /)");
	expect_error("{\"filesystem\": {\"writable\": [\"/\"]}}",
		     "t.json: policy.filesystem.writable[0]: \"/\" cannot be writable (the root "
		     "stays read-only)");
	expect_error("{\"filesystem\": {\"writable\": [\"/work\", \"/work\"]}}",
		     "t.json: policy.filesystem.writable[1]: \"/work\" is listed twice");
	expect_error(
	    "{\"filesystem\": {\"writable\": [\"/a\\nb\"]}}",
	    "t.json: policy.filesystem.writable[0]: \"/a\\nb\" contains a control character");
	expect_error("{\"filesystem\": {\"writable\": \"/tmp\"}}",
		     "t.json: policy.filesystem.writable: expected an array of absolute paths, got "
		     "\"/tmp\"");
	expect_error(
	    "{\"filesystem\": {\"writable\": [\"/tmp\"]}}",
	    "t.json: policy.filesystem.workdir: \"/work\" is not among policy.filesystem.writable "
	    "(add it there)");
	expect_error(
	    "{\"filesystem\": {\"workdir\": \"/home\"}}",
	    "t.json: policy.filesystem.workdir: \"/home\" is not among policy.filesystem.writable "
	    "(add it there)");
	expect_error(
	    "{\"filesystem\": {\"profile\": \"Host\"}}",
	    "t.json: policy.filesystem.profile: \"Host\" is not a profile name (use 1 to 64 of "
	    "[a-z0-9_-], e.g. host, minimal, datascience)");
	expect_error(
	    "{\"filesystem\": {\"profile\": \"../x\"}}",
	    "t.json: policy.filesystem.profile: \"../x\" is not a profile name (use 1 to 64 of "
	    "[a-z0-9_-], e.g. host, minimal, datascience)");
}

static void test_environment_errors(void)
{
	expect_error("{\"environment\": {\"A=B\": \"1\"}}",
		     "t.json: policy.environment: \"A=B\" is not a variable name (it must be "
		     "non-empty, without =)");
	expect_error("{\"environment\": {\"\": \"1\"}}",
		     "t.json: policy.environment: \"\" is not a variable name (it must be "
		     "non-empty, without =)");
	expect_error("{\"environment\": {\"A\": 1}}",
		     "t.json: policy.environment.A: expected a string, got 1");
	expect_error("{\"environment\": {\"A\": \"1\", \"A\": \"2\"}}",
		     "t.json: policy.environment.A: appears twice");
	expect_error("{\"environment\": [\"A=1\"]}",
		     "t.json: policy.environment: expected an object of strings, got an array");
}

static void test_seccomp_errors(void)
{
#define RULE(r) "{\"seccomp\": {\"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": [" r "]}}"
	expect_error(RULE("{\"names\": [\"read\", \"fooz\"], \"action\": \"SCMP_ACT_ALLOW\"}"),
		     "t.json: policy.seccomp.syscalls[0].names[1]: \"fooz\" is not a syscall "
		     "libseccomp knows");
	expect_error(RULE("{\"names\": [], \"action\": \"SCMP_ACT_ALLOW\"}"),
		     "t.json: policy.seccomp.syscalls[0].names: expected a non-empty array of "
		     "syscall names, got []");
	expect_error(RULE("{\"action\": \"SCMP_ACT_ALLOW\"}"),
		     "t.json: policy.seccomp.syscalls[0]: missing \"names\"");
	expect_error(RULE("{\"names\": [\"read\"]}"),
		     "t.json: policy.seccomp.syscalls[0]: missing \"action\"");
	expect_error(RULE("{\"names\": [\"read\"], \"action\": \"SCMP_ACT_NOTIFY\"}"),
		     "t.json: policy.seccomp.syscalls[0].action: \"SCMP_ACT_NOTIFY\" is not an "
		     "action (known: "
		     "SCMP_ACT_ALLOW, SCMP_ACT_ERRNO, SCMP_ACT_KILL_PROCESS, SCMP_ACT_KILL_THREAD, "
		     "SCMP_ACT_KILL, "
		     "SCMP_ACT_TRAP, SCMP_ACT_LOG)");
	expect_error(
	    RULE("{\"names\": [\"read\"], \"action\": \"SCMP_ACT_ALLOW\", \"errnoRet\": 1}"),
	    "t.json: policy.seccomp.syscalls[0].errnoRet: only applies to SCMP_ACT_ERRNO");
	expect_error(
	    RULE("{\"names\": [\"read\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 5000}"),
	    "t.json: policy.seccomp.syscalls[0].errnoRet: 5000 is not a whole number from 0 to "
	    "4095");
	expect_error(
	    RULE(
		"{\"names\": [\"read\"], \"action\": \"SCMP_ACT_ALLOW\", \"args\": [{\"index\": 6, "
		"\"value\": 1, \"op\": \"SCMP_CMP_EQ\"}]}"),
	    "t.json: policy.seccomp.syscalls[0].args[0].index: 6 is not a whole number from 0 to "
	    "5");
	expect_error(
	    RULE(
		"{\"names\": [\"read\"], \"action\": \"SCMP_ACT_ALLOW\", \"args\": [{\"index\": 0, "
		"\"value\": 1, \"op\": \"SCMP_CMP_FOO\"}]}"),
	    "t.json: policy.seccomp.syscalls[0].args[0].op: \"SCMP_CMP_FOO\" is not an operator "
	    "(known: "
	    "SCMP_CMP_NE, SCMP_CMP_LT, SCMP_CMP_LE, SCMP_CMP_EQ, SCMP_CMP_GE, SCMP_CMP_GT, "
	    "SCMP_CMP_MASKED_EQ)");
	expect_error(
	    RULE(
		"{\"names\": [\"read\"], \"action\": \"SCMP_ACT_ALLOW\", \"args\": [{\"index\": 0, "
		"\"value\": -1, \"op\": \"SCMP_CMP_EQ\"}]}"),
	    "t.json: policy.seccomp.syscalls[0].args[0].value: -1 is not a whole number from 0 to "
	    "18446744073709551615");
	expect_error(
	    RULE(
		"{\"names\": [\"read\"], \"action\": \"SCMP_ACT_ALLOW\", \"args\": [{\"index\": 0, "
		"\"value\": \"12abc\", \"op\": \"SCMP_CMP_EQ\"}]}"),
	    "t.json: policy.seccomp.syscalls[0].args[0].value: \"12abc\" is not an unsigned 64-bit "
	    "number "
	    "(use 123 or \"0x7b\")");
	expect_error(
	    RULE(
		"{\"names\": [\"read\"], \"action\": \"SCMP_ACT_ALLOW\", \"args\": [{\"index\": 0, "
		"\"op\": \"SCMP_CMP_EQ\"}]}"),
	    "t.json: policy.seccomp.syscalls[0].args[0]: missing \"value\"");
	expect_error(
	    RULE(
		"{\"names\": [\"read\"], \"action\": \"SCMP_ACT_ALLOW\", \"args\": [{\"index\": 0, "
		"\"value\": 1, \"op\": \"SCMP_CMP_EQ\"}, {\"index\": 0, \"value\": 2, \"op\": "
		"\"SCMP_CMP_EQ\"}]}"),
	    "t.json: policy.seccomp.syscalls[0].args[1].index: argument 0 is already compared in "
	    "this rule "
	    "(libseccomp takes one comparison per argument: split the rule)");
	expect_error(
	    RULE(
		"{\"names\": [\"read\"], \"action\": \"SCMP_ACT_ALLOW\", \"args\": [{\"index\": 0, "
		"\"value\": 0, \"op\": \"SCMP_CMP_EQ\"}, {\"index\": 1, \"value\": 0, \"op\": "
		"\"SCMP_CMP_EQ\"}, "
		"{\"index\": 2, \"value\": 0, \"op\": \"SCMP_CMP_EQ\"}, {\"index\": 3, \"value\": "
		"0, \"op\": "
		"\"SCMP_CMP_EQ\"}, {\"index\": 4, \"value\": 0, \"op\": \"SCMP_CMP_EQ\"}, "
		"{\"index\": 5, "
		"\"value\": 0, \"op\": \"SCMP_CMP_EQ\"}, {\"index\": 5, \"value\": 0, \"op\": "
		"\"SCMP_CMP_EQ\"}]}"),
	    "t.json: policy.seccomp.syscalls[0].args: 7 comparisons, at most 6");
	expect_error(
	    RULE(
		"{\"names\": [\"read\"], \"action\": \"SCMP_ACT_ALLOW\", \"args\": [{\"index\": 0, "
		"\"value\": 1, \"op\": \"SCMP_CMP_EQ\", \"valuetwo\": 1}]}"),
	    "t.json: policy.seccomp.syscalls[0].args[0].valuetwo: unknown key (known: index, "
	    "value, "
	    "valueTwo, op, comment)");
	expect_error("{\"seccomp\": {\"syscalls\": []}}",
		     "t.json: policy.seccomp: missing \"defaultAction\"");
	expect_error(
	    "{\"seccomp\": {\"defaultAction\": \"SCMP_ACT_ALLOW\", \"defaultErrnoRet\": 1}}",
	    "t.json: policy.seccomp.defaultErrnoRet: only applies to SCMP_ACT_ERRNO");
	expect_error(
	    "{\"seccomp\": {\"defaultAction\": \"SCMP_ACT_ERRNO\", \"architectures\": []}}",
	    "t.json: policy.seccomp.architectures: unknown key (known: defaultAction, "
	    "defaultErrnoRet, "
	    "syscalls, comment)");
}

/* Rule sets libseccomp would silently compile into something else. */
static void test_seccomp_conflicts(void)
{
	expect_error(
	    RULE("{\"names\": [\"read\", \"write\"], \"action\": \"SCMP_ACT_ALLOW\"}, "
		 "{\"names\": [\"write\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 1}"),
	    "t.json: policy.seccomp.syscalls[1].names[0]: \"write\" already has a rule with a "
	    "different "
	    "action (syscalls[0])");
	expect_error(
	    RULE("{\"names\": [\"ioctl\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 1, "
		 "\"args\": "
		 "[{\"index\": 1, \"value\": 21522, \"op\": \"SCMP_CMP_EQ\"}]}, {\"names\": "
		 "[\"ioctl\"], "
		 "\"action\": \"SCMP_ACT_ALLOW\"}"),
	    "t.json: policy.seccomp.syscalls[1].names[0]: \"ioctl\" has a rule with args and one "
	    "without "
	    "(syscalls[0]); libseccomp would ignore the args: give every rule for it args");
	expect_error_prefix(
	    RULE("{\"names\": [\"write\"], \"action\": \"SCMP_ACT_ALLOW\", \"args\": [{\"index\": "
		 "0, "
		 "\"value\": 1, \"op\": \"SCMP_CMP_EQ\"}]}, {\"names\": [\"write\"], \"action\": "
		 "\"SCMP_ACT_KILL_PROCESS\", \"args\": [{\"index\": 0, \"value\": 1, \"op\": "
		 "\"SCMP_CMP_EQ\"}]}"),
	    "t.json: policy.seccomp.syscalls[1]: libseccomp refused the rule for \"write\" "
	    "(another "
	    "rule has the same conditions and a different action)");
	/* the same action twice is harmless */
	sr_policy *p =
	    load(RULE("{\"names\": [\"read\"], \"action\": \"SCMP_ACT_ALLOW\"}, "
		      "{\"names\": [\"read\", \"read\"], \"action\": \"SCMP_ACT_ALLOW\"}"));
	CHECK(p != NULL);
	sr_policy_free(p);
#undef RULE
}

/* libseccomp's merging is quadratic: a policy must not be able to make the
 * supervisor compile for minutes. */
static void test_seccomp_size_caps(void)
{
	static const char head[] =
	    "{\"seccomp\": {\"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": "
	    "[{\"action\": \"SCMP_ACT_ALLOW\", \"names\": [\"read\"";
	size_t cap = sizeof head + 2049 * 8 + 16, len = sizeof head - 1;
	char *doc = malloc(cap);

	if (!doc)
		return;
	memcpy(doc, head, len);
	for (int i = 1; i < 2049; i++)
		len += (size_t)snprintf(doc + len, cap - len, ", \"read\"");
	snprintf(doc + len, cap - len, "]}]}}");
	expect_error(
	    doc, "t.json: policy.seccomp.syscalls: 2049 syscall names in all rules, at most 2048");
	free(doc);
}

static void test_long_values_are_cut_not_overflowed(void)
{
	char doc[8192], key[4000];
	sr_error err = { 0 };
	sr_policy *p = NULL;

	memset(key, 'k', sizeof key - 1);
	key[sizeof key - 1] = '\0';
	snprintf(doc, sizeof doc, "{\"limits\": {\"%s\": 1}}", key);
	CHECK_INT(sr_policy_load_json(doc, strlen(doc), key, &p, &err), -1);
	CHECK(strlen(err.msg) < sizeof err.msg);
	snprintf(doc, sizeof doc, "{\"limits\": {\"memory\": \"%s\"}}", key);
	CHECK_INT(sr_policy_load_json(doc, strlen(doc), "t.json", &p, &err), -1);
	CHECK(strstr(err.msg, "...\" is not a size") == NULL); /* cut inside the value */
	CHECK(strncmp(err.msg, "t.json: policy.limits.memory: \"kkk", 34) == 0);
}

static void test_warm_section(void)
{
	sr_policy *p = load("{\"warm\": {\"comment\": \"x\", \"enabled\": true, \"preload\": "
			    "[\"numpy\", \"pandas\", \"matplotlib.pyplot\", \"_x1.Y_2\"], "
			    "\"pool_size\": 64, \"fallback\": \"error\", \"refill\": \"eager\"}}");
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK(p->warm.enabled);
	CHECK_INT(p->warm.n_preload, 4);
	if (p->warm.n_preload == 4) {
		CHECK_STR(p->warm.preload[0], "numpy");
		CHECK_STR(p->warm.preload[2], "matplotlib.pyplot");
		CHECK_STR(p->warm.preload[3], "_x1.Y_2");
		CHECK(p->warm.preload[4] == NULL);
	}
	CHECK_INT(p->warm.pool_size, 64);
	CHECK(!p->warm.fallback_cold);
	CHECK(p->warm.refill_eager);
	CHECK(p->checker.enabled); /* other sections keep their defaults */
	sr_policy_free(p);

	/* keys left out keep their defaults; preload replaces the list */
	p = load("{\"warm\": {\"enabled\": true, \"pool_size\": 0}}");
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK(p->warm.enabled);
	CHECK_INT(p->warm.n_preload, 3);
	CHECK_INT(p->warm.pool_size, 0);
	CHECK(!p->warm.pool_size_auto); /* a number replaces "auto" */
	CHECK(p->warm.fallback_cold);
	CHECK(!p->warm.refill_eager);                       /* "idle" */
	CHECK_INT(p->warm.languages, 1u << SR_LANG_PYTHON); /* python's pool alone */
	sr_policy_free(p);

	/* languages: a bit each; the JSON form carries them */
	p = load("{\"warm\": {\"languages\": [\"javascript\", \"python\"]}}");
	CHECK(p && p->warm.languages == ((1u << SR_LANG_PYTHON) | (1u << SR_LANG_JAVASCRIPT)));
	char *json = p ? sr_policy_to_json(p) : NULL;
	sr_policy *back = NULL;
	sr_error err = { 0 };
	CHECK(json && sr_policy_load_json(json, strlen(json), "t.json", &back, &err) == 0);
	CHECK(back && back->warm.languages == p->warm.languages);
	sr_policy_free(back);
	free(json);
	sr_policy_free(p);
	p = load("{\"warm\": {\"languages\": [\"javascript\"]}}");
	CHECK(p && p->warm.languages == 1u << SR_LANG_JAVASCRIPT);
	sr_policy_free(p);
}

static void test_commands_section(void)
{
	sr_policy *p = load("{}");
	CHECK(p && p->commands_enabled); /* the default: allowed (docs/e2b.md says why) */
	sr_policy_free(p);
	p = load("{\"commands\": {\"comment\": \"x\", \"enabled\": false}}");
	CHECK(p && !p->commands_enabled);
	char *json = p ? sr_policy_to_json(p) : NULL;
	sr_policy *back = NULL;
	sr_error err = { 0 };
	CHECK(json && sr_policy_load_json(json, strlen(json), "t.json", &back, &err) == 0);
	CHECK(back && !back->commands_enabled); /* the JSON form carries it */
	sr_policy_free(back);
	free(json);
	sr_policy_free(p);
	expect_error("{\"commands\": {\"enabled\": \"yes\"}}",
		     "t.json: policy.commands.enabled: expected true or false, got \"yes\"");
	expect_error("{\"commands\": {\"shell\": 1}}",
		     "t.json: policy.commands.shell: unknown key (known: enabled, comment)");
	expect_error("{\"commands\": true}",
		     "t.json: policy.commands: expected an object, got true");
}

static void test_warm_errors(void)
{
	expect_error("{\"warm\": {\"pool\": 2}}",
		     "t.json: policy.warm.pool: unknown key (known: enabled, languages, preload, "
		     "warmup, pool_size, fallback, refill, comment)");
	expect_error("{\"warm\": {\"languages\": [\"bash\"]}}",
		     "t.json: policy.warm.languages[0]: \"bash\" is not a language with a warm "
		     "path (known: python, javascript; bash always runs cold)");
	expect_error("{\"warm\": {\"languages\": [\"python\", \"python\"]}}",
		     "t.json: policy.warm.languages[1]: \"python\" is listed twice");
	expect_error("{\"warm\": {\"languages\": []}}",
		     "t.json: policy.warm.languages: an empty list: name python, javascript or "
		     "both (or set enabled to false)");
	expect_error("{\"warm\": {\"languages\": \"python\"}}",
		     "t.json: policy.warm.languages: expected an array of languages (python, "
		     "javascript), got \"python\"");
	expect_error("{\"warm\": {\"warmup\": [\"import numpy\"]}}",
		     "t.json: policy.warm.warmup: expected a string, got an array");
	expect_error("{\"warm\": true}", "t.json: policy.warm: expected an object, got true");
	expect_error("{\"warm\": {\"comment\": 1}}",
		     "t.json: policy.warm.comment: expected a string, got 1");
	expect_error("{\"warm\": {\"enabled\": \"yes\"}}",
		     "t.json: policy.warm.enabled: expected true or false, got \"yes\"");
	expect_error("{\"warm\": {\"enabled\": 1}}",
		     "t.json: policy.warm.enabled: expected true or false, got 1");
	expect_error("{\"warm\": {\"pool_size\": 65}}",
		     "t.json: policy.warm.pool_size: 65 is not a whole number from 0 to 64");
	expect_error("{\"warm\": {\"pool_size\": -1}}",
		     "t.json: policy.warm.pool_size: -1 is not a whole number from 0 to 64");
	expect_error("{\"warm\": {\"pool_size\": 2.5}}",
		     "t.json: policy.warm.pool_size: 2.5 is not a whole number from 0 to 64");
	expect_error("{\"warm\": {\"pool_size\": \"2\"}}",
		     "t.json: policy.warm.pool_size: \"2\" is not a pool size (a whole number from "
		     "0 to 64, or \"auto\": sized from the machine)");
	expect_error("{\"warm\": {\"pool_size\": true}}",
		     "t.json: policy.warm.pool_size: expected a whole number, got true");
	expect_error(
	    "{\"warm\": {\"fallback\": \"hot\"}}",
	    "t.json: policy.warm.fallback: \"hot\" is not a fallback (known: cold, error)");
	expect_error("{\"warm\": {\"fallback\": false}}",
		     "t.json: policy.warm.fallback: expected a string, got false");
	expect_error("{\"warm\": {\"refill\": \"lazy\"}}",
		     "t.json: policy.warm.refill: \"lazy\" is not a refill behaviour (known: idle, "
		     "eager)");
	expect_error("{\"warm\": {\"refill\": 1}}",
		     "t.json: policy.warm.refill: expected a string, got 1");
	expect_error("{\"warm\": {\"preload\": \"numpy\"}}",
		     "t.json: policy.warm.preload: expected an array of module names, got "
		     "\"numpy\"");
	expect_error("{\"warm\": {\"preload\": [\"numpy\", 1]}}",
		     "t.json: policy.warm.preload[1]: expected a string, got 1");
	expect_error("{\"warm\": {\"preload\": [\"numpy\", \"numpy\"]}}",
		     "t.json: policy.warm.preload[1]: \"numpy\" is listed twice");
}

static void test_warm_preload_names(void)
{
	static const char *const bad[] = { "1abc", "a..b", "a.",  ".a", "os/path",
					   "",     "a-b",  "a b", "é",  "a.1b" };
	char doc[512], want[512];

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(doc, sizeof doc, "{\"warm\": {\"preload\": [\"numpy\", \"%s\"]}}", bad[i]);
		snprintf(want, sizeof want,
			 "t.json: policy.warm.preload[1]: \"%s\" is not a Python module name "
			 "(letters, digits and _, not starting with a digit, parts joined by "
			 "dots: numpy, matplotlib.pyplot)",
			 bad[i]);
		expect_error(doc, want);
	}
	char name[102];
	memset(name, 'a', 101);
	name[101] = '\0';
	snprintf(doc, sizeof doc, "{\"warm\": {\"preload\": [\"%s\"]}}", name);
	/* the value is shown cut, as every long value is */
	snprintf(want, sizeof want,
		 "t.json: policy.warm.preload[0]: \"%.67s... is longer than 100 characters", name);
	expect_error(doc, want);
	name[100] = '\0'; /* exactly 100: fine */
	snprintf(doc, sizeof doc, "{\"warm\": {\"preload\": [\"%s\"]}}", name);
	sr_policy *p = load(doc);
	CHECK(p != NULL);
	sr_policy_free(p);
}

static void test_warm_preload_at_most_64(void)
{
	char doc[2048];
	size_t len = (size_t)snprintf(doc, sizeof doc, "{\"warm\": {\"preload\": [");

	for (int i = 0; i < 65; i++)
		len += (size_t)snprintf(doc + len, sizeof doc - len, "%s\"m%d\"", i ? ", " : "", i);
	snprintf(doc + len, sizeof doc - len, "]}}");
	expect_error(doc, "t.json: policy.warm.preload: 65 entries, at most 64");
	/* 64 load */
	char *cut = strstr(doc, ", \"m64\"");
	CHECK(cut != NULL);
	if (!cut)
		return;
	strcpy(cut, "]}}");
	sr_policy *p = load(doc);
	CHECK(p != NULL);
	if (p)
		CHECK_INT(p->warm.n_preload, 64);
	sr_policy_free(p);
}

static void test_sizes(void)
{
	static const struct {
		const char *s;
		int rc;
		uint64_t v;
	} cases[] = {
		{ "0", 0, 0 },
		{ "512", 0, 512 },
		{ "512B", 0, 512 },
		{ "512K", 0, 512 * KIB },
		{ "512k", 0, 512 * KIB },
		{ "512M", 0, 512 * MIB },
		{ "512m", 0, 512 * MIB },
		{ "1G", 0, GIB },
		{ "1T", 0, TIB },
		{ "512KiB", 0, 512 * KIB },
		{ "512MiB", 0, 512 * MIB },
		{ "1MB", 0, MIB },
		{ "1.5G", 0, 3 * GIB / 2 },
		{ "0.5K", 0, 512 },
		{ "1.5GiB", 0, 3 * GIB / 2 },
		{ "18446744073709551615", 0, UINT64_MAX },
		{ "16777215T", 0, 16777215 * TIB },
		{ "", -1, 0 },
		{ "K", -1, 0 },
		{ "1.5", -1, 0 },
		{ "-1", -1, 0 },
		{ "+1", -1, 0 },
		{ " 1", -1, 0 },
		{ "1 ", -1, 0 },
		{ "1 K", -1, 0 },
		{ "1X", -1, 0 },
		{ "1KiBB", -1, 0 },
		{ "1.G", -1, 0 },
		{ ".5G", -1, 0 },
		{ "1Ki", -1, 0 },
		{ "1P", -1, 0 },
		{ "0x10", -1, 0 },
		{ "18446744073709551616", -1, 0 },
		{ "16777216T", -1, 0 },
		{ "99999999999999999999K", -1, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint64_t v = 12345;
		int rc = sr_parse_size(cases[i].s, &v);
		if (rc != cases[i].rc || (rc == 0 && v != cases[i].v))
			fprintf(stderr, "sr_parse_size(\"%s\") = %d, %llu\n", cases[i].s, rc,
				(unsigned long long)v);
		CHECK_INT(rc, cases[i].rc);
		if (rc == 0)
			CHECK(v == cases[i].v);
	}
	CHECK_INT(sr_parse_size(NULL, &(uint64_t){ 0 }), -1);
}

static void test_durations(void)
{
	static const struct {
		const char *s;
		int rc;
		uint64_t ms;
	} cases[] = {
		{ "20", 0, 20000 },   { "20s", 0, 20000 }, { "500ms", 0, 500 },
		{ "2m", 0, 120000 },  { "1.5s", 0, 1500 }, { "0.5", 0, 500 },
		{ "1h", 0, 3600000 }, { "0", 0, 0 },       { "1.5ms", 0, 1 },
		{ "", -1, 0 },        { "s", -1, 0 },      { "20x", -1, 0 },
		{ "-1", -1, 0 },      { "1.5.2", -1, 0 },  { "20 s", -1, 0 },
		{ "20S", -1, 0 },     { "1d", -1, 0 },     { "99999999999999999999h", -1, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint64_t ms = 12345;
		int rc = sr_parse_duration(cases[i].s, &ms);
		if (rc != cases[i].rc || (rc == 0 && ms != cases[i].ms))
			fprintf(stderr, "sr_parse_duration(\"%s\") = %d, %llu\n", cases[i].s, rc,
				(unsigned long long)ms);
		CHECK_INT(rc, cases[i].rc);
		if (rc == 0)
			CHECK(ms == cases[i].ms);
	}
}

static void test_set_env(void)
{
	sr_error err = { 0 };
	sr_policy *p = NULL;

	CHECK_INT(sr_policy_default(&p, &err), 0);
	if (!p)
		return;
	size_t n = p->n_env;
	CHECK_INT(sr_policy_set_env(p, "HOME=/tmp", &err), 0);
	CHECK_INT(p->n_env, n);
	CHECK(has_env(p, "HOME=/tmp"));
	CHECK(!has_env(p, "HOME=/work"));
	CHECK_INT(sr_policy_set_env(p, "HOM=x", &err), 0); /* a prefix of HOME is another key */
	CHECK_INT(p->n_env, n + 1);
	CHECK(has_env(p, "HOME=/tmp"));
	CHECK_INT(sr_policy_set_env(p, "EMPTY=", &err), 0);
	CHECK(has_env(p, "EMPTY="));
	CHECK(p->env[p->n_env] == NULL);
	CHECK_INT(sr_policy_set_env(p, "NOEQUALS", &err), -1);
	CHECK_STR(err.msg, "environment entry \"NOEQUALS\" is not KEY=VALUE");
	CHECK_INT(sr_policy_set_env(p, "=x", &err), -1);
	CHECK_INT(p->n_env, n + 2);
	sr_policy_free(p);
}

static void roundtrip(const sr_policy *p)
{
	sr_error err = { 0 };
	sr_policy *q = NULL;
	char *a = sr_policy_to_json(p), *b = NULL;

	CHECK(a != NULL);
	if (!a)
		return;
	CHECK_INT(sr_policy_load_json(a, strlen(a), "roundtrip", &q, &err), 0);
	if (!q) {
		fprintf(stderr, "%s\n", err.msg);
		free(a);
		return;
	}
	b = sr_policy_to_json(q);
	CHECK_STR(a, b);
	CHECK(memcmp(&p->limits, &q->limits, sizeof p->limits) == 0);
	CHECK_INT(q->seccomp.n_rules, p->seccomp.n_rules);
	CHECK_INT(q->warm.enabled, p->warm.enabled);
	CHECK_INT(q->warm.n_preload, p->warm.n_preload);
	for (size_t i = 0; i < p->warm.n_preload && i < q->warm.n_preload; i++)
		CHECK_STR(q->warm.preload[i], p->warm.preload[i]);
	CHECK_INT(q->warm.pool_size, p->warm.pool_size);
	CHECK_INT(q->warm.fallback_cold, p->warm.fallback_cold);
	CHECK_INT(q->warm.refill_eager, p->warm.refill_eager);
	free(a);
	free(b);
	sr_policy_free(q);
}

static void test_to_json_round_trip(void)
{
	sr_error err = { 0 };
	sr_policy *p = NULL;

	CHECK_INT(sr_policy_default(&p, &err), 0);
	if (p)
		roundtrip(p);
	sr_policy_free(p);
	p = load(
	    "{\"preset\": \"small\", \"limits\": {\"wall_time\": \"1.234s\", \"cpus\": 0.33, "
	    "\"memory\": \"100M\", \"swap\": 12345678}, \"environment\": {\"Q\": \"a "
	    "\\\"quoted\\\" value\"}, "
	    "\"seccomp\": {\"defaultAction\": \"SCMP_ACT_KILL_PROCESS\", \"syscalls\": "
	    "[{\"names\": "
	    "[\"write\"], \"action\": \"SCMP_ACT_ALLOW\", \"args\": [{\"index\": 2, \"value\": "
	    "\"0xffffffff00000000\", \"valueTwo\": \"0x100000000\", \"op\": "
	    "\"SCMP_CMP_MASKED_EQ\"}]}, "
	    "{\"names\": [\"read\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 0}, "
	    "{\"names\": [\"close\"], \"action\": \"SCMP_ACT_LOG\"}]}}");
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_INT(p->limits.wall_ms, 1234);
	CHECK_INT(p->limits.cpu_millis, 330);
	roundtrip(p);
	sr_policy_free(p);
	p = load("{\"warm\": {\"enabled\": true, \"preload\": [\"numpy\", \"scipy.stats\"], "
		 "\"pool_size\": 0, \"fallback\": \"error\"}}");
	CHECK(p != NULL);
	if (!p)
		return;
	roundtrip(p);
	sr_policy_free(p);
}

/* A copy owns everything it holds: it outlives the original (the ASan
 * pass catches a shared pointer) and prints the same. */
static void test_warm_warmup(void)
{
	sr_policy *p = load("{\"warm\": {\"warmup\": \"import json\\njson.dumps(1)\"}}");
	CHECK(p != NULL);
	if (p) {
		CHECK_STR(p->warm.warmup, "import json\njson.dumps(1)");
		roundtrip(p);
		sr_policy *d = sr_policy_dup(p);
		CHECK(d && d->warm.warmup != p->warm.warmup);
		if (d)
			CHECK_STR(d->warm.warmup, p->warm.warmup);
		sr_policy_free(d);
		sr_policy_free(p);
	}
	p = load("{\"warm\": {\"preload\": []}}");
	CHECK(p && p->warm.warmup != NULL); /* the default's, kept */
	sr_policy_free(p);
	p = load("{\"warm\": {\"pool_size\": \"auto\"}}");
	CHECK(p && p->warm.pool_size_auto);
	if (p)
		roundtrip(p);
	sr_policy_free(p);
	/* 64 KiB and no more */
	size_t n = (64u << 10) + 1;
	char *doc = malloc(n + 64);
	if (!doc)
		return;
	int at = sprintf(doc, "{\"warm\": {\"warmup\": \"");
	memset(doc + at, '#', n);
	strcpy(doc + at + n, "\"}}");
	expect_error(doc, "t.json: policy.warm.warmup: 65537 bytes, at most 65536");
	doc[at + n - 1] = '"';
	strcpy(doc + at + n, "}}");
	p = load(doc);
	CHECK(p && strlen(p->warm.warmup) == n - 1);
	sr_policy_free(p);
	free(doc);
}

/* The copy of p prints as p did once p is gone (the ASan pass catches a
 * pointer they still share); p is freed, the copy returned. */
static sr_policy *dup_and_free(sr_policy *p)
{
	char *want = sr_policy_to_json(p);
	sr_policy *d = sr_policy_dup(p);
	CHECK(d != NULL);
	sr_policy_free(p);
	char *got = d ? sr_policy_to_json(d) : NULL;
	CHECK_STR(got, want);
	free(got);
	free(want);
	return d;
}

static void test_dup_copies_the_network_and_dependencies_sections(void)
{
	sr_policy *p = load("{\"network\": {\"mode\": \"egress\", \"allow\": [{\"cidr\": "
			    "\"198.18.0.0/24\", \"ports\": [80, 443]}, {\"host\": \"localhost\", "
			    "\"ports\": \"*\"}], \"dns\": [\"198.18.0.53\"]}, "
			    "\"dependencies\": {\"allow\": [\"six\", \"attrs\"], \"ignore\": "
			    "[\"torch\"], \"wheelhouse\": \"/srv/wheels\", \"cache\": true}}");
	CHECK(p != NULL);
	if (!p)
		return;
	sr_policy *d = sr_policy_dup(p);
	CHECK(d && d->net.allow != p->net.allow && d->net.dns[0] != p->net.dns[0] &&
	      d->dependencies.allow != p->dependencies.allow &&
	      d->dependencies.wheelhouse != p->dependencies.wheelhouse);
	sr_policy_free(d);
	sr_policy_free(dup_and_free(p));
}

static void test_dup_is_a_deep_copy(void)
{
	sr_policy *p =
	    load("{\"preset\": \"small\", \"filesystem\": {\"profile\": \"minimal\", "
		 "\"workdir\": \"/w\", \"writable\": [\"/w\", \"/tmp\"]}, "
		 "\"environment\": {\"A\": \"1\", \"B\": \"2\"}, "
		 "\"checker\": {\"allow\": [\"open\", \"eval\"], \"rules\": {\"SR103\": false}}, "
		 "\"warm\": {\"enabled\": true, \"preload\": [\"json\", \"csv\"]}, "
		 "\"seccomp\": {\"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": "
		 "[{\"names\": [\"read\", \"write\"], \"action\": \"SCMP_ACT_ALLOW\"}, "
		 "{\"names\": [\"close\"], \"action\": \"SCMP_ACT_LOG\"}]}}");
	CHECK(p != NULL);
	if (!p)
		return;
	sr_policy *d = sr_policy_dup(p);
	CHECK(d && d->env != p->env && d->writable != p->writable &&
	      d->seccomp.rules != p->seccomp.rules);
	CHECK(d && d->checker.allow != p->checker.allow && d->warm.preload != p->warm.preload);
	CHECK(d && d->checker.n_rules_off == 1 && d->checker.rules_off != p->checker.rules_off);
	sr_policy_free(d);
	d = dup_and_free(p);
	CHECK(d && strcmp(d->name, "t.json") == 0);
	sr_policy_free(d);
}

#define EGRESS(allow) "{\"network\": {\"mode\": \"egress\", \"allow\": [" allow "]}}"

static void test_network_egress(void)
{
	sr_policy *p = load(
	    "{\"network\": {\"mode\": \"egress\", \"allow\": [{\"cidr\": \"198.18.0.0/24\", "
	    "\"ports\": [80, 443]}, {\"host\": \"pypi.org\", \"ports\": \"*\", \"proto\": \"udp\", "
	    "\"comment\": \"why\"}, {\"cidr\": \"198.18.0.7\", \"ports\": [53], \"proto\": "
	    "\"tcp\"}], \"dns\": [\"198.18.0.53\"]}}");
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_INT(p->net_mode, SR_NET_EGRESS);
	CHECK_INT(p->net.n_allow, 3);
	CHECK_STR(p->net.allow[0].cidr, "198.18.0.0/24");
	CHECK(p->net.allow[0].host == NULL);
	CHECK_INT(p->net.allow[0].proto, SR_NET_TCP);
	CHECK_INT(p->net.allow[0].n_ports, 2);
	CHECK_INT(p->net.allow[0].ports[1], 443);
	CHECK_STR(p->net.allow[1].host, "pypi.org");
	CHECK_INT(p->net.allow[1].n_ports, 0);
	CHECK_INT(p->net.allow[1].proto, SR_NET_UDP);
	CHECK_STR(p->net.allow[2].cidr, "198.18.0.7/32"); /* a bare address is a /32 */
	CHECK_INT(p->net.n_dns, 1);
	CHECK_STR(p->net.dns[0], "198.18.0.53");
	CHECK(!p->net.dns_host);
	roundtrip(p);
	sr_policy_free(p);

	/* dns: true; a later mode none clears the list */
	p = load("{\"network\": {\"mode\": \"egress\", \"dns\": true}}");
	CHECK(p && p->net.dns_host && p->net.n_allow == 0);
	if (p)
		roundtrip(p);
	sr_policy_free(p);
	sr_policy *none = load("{\"network\": {\"mode\": \"none\"}}");
	CHECK(none && none->net_mode == SR_NET_NONE && none->net.n_allow == 0);
	sr_policy_free(none);
}

static void test_network_errors(void)
{
	expect_error(EGRESS("{\"cidr\": \"198.18.0.1/24\", \"ports\": [80]}"),
		     "t.json: policy.network.allow[0].cidr: \"198.18.0.1/24\" has host bits set "
		     "beyond /24");
	expect_error(EGRESS("{\"cidr\": \"198.18.0.0/33\", \"ports\": [80]}"),
		     "t.json: policy.network.allow[0].cidr: \"198.18.0.0/33\" is not an IPv4 CIDR "
		     "(use \"198.18.0.0/24\")");
	expect_error(EGRESS("{\"cidr\": \"2001:db8::/32\", \"ports\": [80]}"),
		     "t.json: policy.network.allow[0].cidr: \"2001:db8::/32\" is IPv6: egress is "
		     "IPv4 only");
	expect_error(EGRESS("{\"cidr\": \"198.18.0.0/24\", \"ports\": [80]}, {\"ports\": [1]}"),
		     "t.json: policy.network.allow[1]: needs exactly one of \"cidr\" and \"host\"");
	expect_error(EGRESS("{\"cidr\": \"198.18.0.0/24\", \"host\": \"a.b\", \"ports\": [1]}"),
		     "t.json: policy.network.allow[0]: needs exactly one of \"cidr\" and \"host\"");
	expect_error(EGRESS("{\"host\": \"a b\", \"ports\": [1]}"),
		     "t.json: policy.network.allow[0].host: \"a b\" is not a host name (letters, "
		     "digits, '-' and '.')");
	expect_error(
	    EGRESS("{\"host\": \"a.b\"}"),
	    "t.json: policy.network.allow[0].ports: missing (a list of ports, or \"*\" for "
	    "every port)");
	expect_error(EGRESS("{\"host\": \"a.b\", \"ports\": [80, 0]}"),
		     "t.json: policy.network.allow[0].ports[1]: 0 is not a port (1 to 65535)");
	expect_error(EGRESS("{\"host\": \"a.b\", \"ports\": [80, 65536]}"),
		     "t.json: policy.network.allow[0].ports[1]: 65536 is not a whole number from 0 "
		     "to 65535");
	expect_error(EGRESS("{\"host\": \"a.b\", \"ports\": [80, 80]}"),
		     "t.json: policy.network.allow[0].ports[1]: 80 is listed twice");
	expect_error(
	    EGRESS("{\"host\": \"a.b\", \"ports\": []}"),
	    "t.json: policy.network.allow[0].ports: expected \"*\" or a non-empty array of "
	    "ports, got []");
	expect_error(
	    EGRESS("{\"host\": \"a.b\", \"ports\": \"all\"}"),
	    "t.json: policy.network.allow[0].ports: expected \"*\" or a non-empty array of "
	    "ports, got \"all\"");
	expect_error(EGRESS("{\"host\": \"a.b\", \"ports\": [1], \"proto\": \"icmp\"}"),
		     "t.json: policy.network.allow[0].proto: \"icmp\" is not a protocol (known: "
		     "tcp, udp)");
	expect_error(EGRESS("{\"host\": \"a.b\", \"ports\": [1], \"port\": 2}"),
		     "t.json: policy.network.allow[0].port: unknown key (known: cidr, host, ports, "
		     "proto, comment)");
	expect_error("{\"network\": {\"mode\": \"egress\", \"allow\": {}}}",
		     "t.json: policy.network.allow: expected an array of destinations, got {}");
	expect_error(
	    "{\"network\": {\"mode\": \"egress\", \"dns\": [\"127.0.0.53\"]}}",
	    "t.json: policy.network.dns[0]: \"127.0.0.53\" is a loopback address: the "
	    "sandbox has its own lo, the host's resolvers on 127.0.0.0/8 are out of reach");
	expect_error("{\"network\": {\"mode\": \"egress\", \"dns\": [\"8.8.8.8/32\"]}}",
		     "t.json: policy.network.dns[0]: \"8.8.8.8/32\" is not an IPv4 address (use "
		     "\"198.18.0.53\")");
	expect_error("{\"network\": {\"mode\": \"egress\", \"dns\": \"yes\"}}",
		     "t.json: policy.network.dns: expected true, false or an array of resolver "
		     "addresses, got \"yes\"");
	expect_error(
	    "{\"network\": {\"allow\": [{\"cidr\": \"198.18.0.0/24\", \"ports\": \"*\"}]}}",
	    "t.json: policy.network.allow: needs \"mode\": \"egress\" (mode \"none\" has "
	    "only lo)");
	expect_error("{\"network\": {\"mode\": \"none\", \"dns\": true}}",
		     "t.json: policy.network.dns: needs \"mode\": \"egress\" (mode \"none\" has "
		     "only lo)");
}

static void test_load_file(void)
{
	char path[] = "/tmp/saferun-test-policy-XXXXXX";
	const char *doc = "{\"limits\": {\"pids\": 7}}";
	sr_error err = { 0 };
	sr_policy *p = NULL;
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(write(fd, doc, strlen(doc)) == (ssize_t)strlen(doc));
	close(fd);
	CHECK_INT(sr_policy_load_file(path, &p, &err), 0);
	if (p) {
		CHECK_INT(p->limits.pids, 7);
		CHECK_STR(p->name, path);
	}
	sr_policy_free(p);
	unlink(path);
	CHECK_INT(sr_policy_load_file("/nonexistent/policy.json", &p, &err), -1);
	CHECK_INT(err.errnum, ENOENT);
	CHECK_STR(err.msg, "open policy /nonexistent/policy.json: No such file or directory");
}

/* Evaluate a rule's argument comparisons the way the kernel filter does. */
static int rule_matches(const sr_seccomp_rule *r, const uint64_t args[6])
{
	for (size_t i = 0; i < r->n_args; i++) {
		const sr_seccomp_arg *a = &r->args[i];
		uint64_t x = args[a->index];
		int ok = 0;
		switch (a->op) {
		case SR_CMP_NE: ok = x != a->value; break;
		case SR_CMP_LT: ok = x < a->value; break;
		case SR_CMP_LE: ok = x <= a->value; break;
		case SR_CMP_EQ: ok = x == a->value; break;
		case SR_CMP_GE: ok = x >= a->value; break;
		case SR_CMP_GT: ok = x > a->value; break;
		case SR_CMP_MASKED_EQ: ok = (x & a->value) == a->value_two; break;
		}
		if (!ok)
			return 0;
	}
	return 1;
}

/* Which actions the default policy's rules give a syscall with args:
 * bit 0 = some ALLOW rule matches, bit 1 = some other rule matches. */
static int actions_for(const sr_policy *p, const char *name, const uint64_t args[6])
{
	int seen = 0;

	for (size_t i = 0; i < p->seccomp.n_rules; i++) {
		const sr_seccomp_rule *r = &p->seccomp.rules[i];
		for (size_t j = 0; j < r->n_names; j++)
			if (strcmp(r->names[j], name) == 0 && rule_matches(r, args))
				seen |= r->action.kind == SR_SCMP_ALLOW ? 1 : 2;
	}
	return seen;
}

/* The ioctl rules must allow every cmd but TIOCSTI and TIOCLINUX, refuse
 * those whatever the upper 32 bits hold, and never overlap (libseccomp's
 * order among overlapping rules of one syscall is not defined). */
static void test_default_ioctl_rules_cover_every_cmd_but_two(void)
{
	sr_error err = { 0 };
	sr_policy *p = NULL;
	int wrong = 0;

	CHECK_INT(sr_policy_default(&p, &err), 0);
	if (!p)
		return;
	for (uint64_t hi = 0; hi < 4; hi++)
		for (uint64_t lo = 0; lo < 0x20000; lo++) {
			uint64_t cmd = (hi << 31) | lo; /* also sets bits 31 and 32 */
			uint64_t args[6] = { 3, cmd };
			int refused = (cmd & 0xffffffff) == 0x5412 || (cmd & 0xffffffff) == 0x541C;
			wrong += actions_for(p, "ioctl", args) != (refused ? 2 : 1);
		}
	for (int bit = 0; bit < 64; bit++) {
		uint64_t args[6] = { 3, 0x5412ULL ^ (1ULL << bit) };
		int refused = bit >= 32;
		wrong += actions_for(p, "ioctl", args) != (refused ? 2 : 1);
	}
	CHECK_INT(wrong, 0);
	sr_policy_free(p);
}

static void test_default_clone_and_socket_rules_do_not_overlap(void)
{
	static const uint64_t ns[] = { 0x00020000, 0x02000000, 0x04000000, 0x08000000,
				       0x10000000, 0x20000000, 0x40000000 };
	sr_error err = { 0 };
	sr_policy *p = NULL;
	int wrong = 0;

	CHECK_INT(sr_policy_default(&p, &err), 0);
	if (!p)
		return;
	uint64_t thread_flags[6] = { 0x3d0f00 }; /* glibc's pthread_create */
	wrong += actions_for(p, "clone", thread_flags) != 1;
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		uint64_t args[6] = { ns[i] | 0x11 /* SIGCHLD */ };
		wrong += actions_for(p, "clone", args) != 2;
	}
	for (uint64_t af = 0; af < 64; af++)
		for (uint64_t proto = 0; proto < 4; proto++) {
			uint64_t args[6] = { af, 3 /* SOCK_RAW */, proto };
			/* AF_NETLINK only with NETLINK_ROUTE (0) */
			int allowed = af == 1 || af == 2 || af == 10 || (af == 16 && proto == 0);
			wrong += actions_for(p, "socket", args) != (allowed ? 1 : 2);
		}
	uint64_t high[6] = { (1ULL << 32) | 1 };
	wrong += actions_for(p, "socket", high) != 2;
	CHECK_INT(wrong, 0);
	sr_policy_free(p);
}

static void test_dependencies_section(void)
{
	sr_policy *p = load("{}");
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_INT(p->dependencies.n_allow, 0); /* nothing may be installed by default */
	CHECK(p->dependencies.wheelhouse == NULL && p->dependencies.index_url == NULL);
	CHECK(p->dependencies.cache && p->dependencies.cache_dir == NULL);
	CHECK(!p->dependencies.auto_detect);
	CHECK_INT(p->dependencies.cache_entries, 32);
	CHECK_INT(p->dependencies.install_wall_ms, 120000);
	CHECK_INT(p->dependencies.install_memory_bytes, 1024ull << 20);
	CHECK_INT(p->dependencies.max_size_bytes, 512ull << 20);
	sr_policy_free(p);

	p = load("{\"dependencies\": {\"allow\": [\"Scikit_Learn\", \"attrs\"], "
		 "\"ignore\": [\"foo.bar\"], \"wheelhouse\": \"/srv/wheels\", "
		 "\"index_url\": \"https://pypi.org/simple\", \"cache\": \"/srv/cache\", "
		 "\"cache_entries\": 3, \"install_time\": \"2m\", \"install_memory\": \"256M\", "
		 "\"max_size\": 1048576, \"auto_detect\": true, \"comment\": \"x\"}}");
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_INT(p->dependencies.n_allow, 2);
	if (p->dependencies.n_allow == 2)
		CHECK_STR(p->dependencies.allow[0], "scikit-learn"); /* normalised */
	CHECK_INT(p->dependencies.n_ignore, 1);
	if (p->dependencies.n_ignore == 1)
		CHECK_STR(p->dependencies.ignore[0], "foo-bar");
	CHECK_STR(p->dependencies.wheelhouse, "/srv/wheels");
	CHECK_STR(p->dependencies.index_url, "https://pypi.org/simple");
	CHECK(p->dependencies.index_ca == NULL);
	CHECK(p->dependencies.cache);
	CHECK_STR(p->dependencies.cache_dir, "/srv/cache");
	CHECK_INT(p->dependencies.cache_entries, 3);
	CHECK_INT(p->dependencies.install_wall_ms, 120000);
	CHECK_INT(p->dependencies.install_memory_bytes, 256ull << 20);
	CHECK_INT(p->dependencies.max_size_bytes, 1048576);
	CHECK(p->dependencies.auto_detect);
	char *json = sr_policy_to_json(p);
	CHECK(json && strstr(json, "\"allow\":\t[\"scikit-learn\", \"attrs\"]"));
	free(json);
	sr_policy_free(p);

	p = load("{\"dependencies\": {\"allow\": [\"*\"], \"cache\": false}}");
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK(!p->dependencies.cache);
	CHECK_STR(p->dependencies.allow[0], "*");
	sr_policy_free(p);
}

static void test_dependencies_errors(void)
{
	expect_error(
	    "{\"dependencies\": {\"allowed\": []}}",
	    "t.json: policy.dependencies.allowed: unknown key (known: allow, ignore, "
	    "wheelhouse, index_url, index_ca, auto_detect, cache, cache_entries, install_time, "
	    "install_memory, max_size, comment)");
	expect_error("{\"dependencies\": {\"allow\": [\"numpy>=1\"]}}",
		     "t.json: policy.dependencies.allow[0]: \"numpy>=1\" is not a package name "
		     "(letters, digits and . _ -, e.g. \"scikit-learn\"; or \"*\" for any)");
	expect_error("{\"dependencies\": {\"allow\": [\"ok\", \"../x\"]}}",
		     "t.json: policy.dependencies.allow[1]: \"../x\" is not a package name "
		     "(letters, digits and . _ -, e.g. \"scikit-learn\"; or \"*\" for any)");
	expect_error("{\"dependencies\": {\"ignore\": [1]}}",
		     "t.json: policy.dependencies.ignore[0]: expected a string, got 1");
	expect_error("{\"dependencies\": {\"wheelhouse\": \"wheels\"}}",
		     "t.json: policy.dependencies.wheelhouse: \"wheels\" must be an absolute path");
	expect_error("{\"dependencies\": {\"index_url\": \"ftp://x\"}}",
		     "t.json: policy.dependencies.index_url: \"ftp://x\" is not an index URL "
		     "(http:// or https://, no spaces, e.g. \"https://pypi.org/simple\")");
	expect_error("{\"dependencies\": {\"index_url\": \"https://u:secret@pypi.org/simple\"}}",
		     "t.json: policy.dependencies.index_url: holds credentials "
		     "(user:password@...): refused, they would end up in logs and results; use "
		     "an index that needs none");
	expect_error("{\"dependencies\": {\"index_url\": \"http://x.test/simple#frag\"}}",
		     "t.json: policy.dependencies.index_url: \"http://x.test/simple#frag\" has a "
		     "fragment (#...): remove it");
	expect_error("{\"dependencies\": {\"index_url\": \"http://x.test/simple?a=1\"}}",
		     "t.json: policy.dependencies.index_url: \"http://x.test/simple?a=1\" has a "
		     "query (?...): an index URL is a plain http(s) address");
	expect_error("{\"dependencies\": {\"index_url\": \"http://x.test:0/simple\"}}",
		     "t.json: policy.dependencies.index_url: \"http://x.test:0/simple\" has a "
		     "port that is not 1 to 65535");
	expect_error("{\"dependencies\": {\"index_url\": \"http://x.test:65536/\"}}",
		     "t.json: policy.dependencies.index_url: \"http://x.test:65536/\" has a "
		     "port that is not 1 to 65535");
	expect_error("{\"dependencies\": {\"index_url\": \"http:///simple\"}}",
		     "t.json: policy.dependencies.index_url: \"http:///simple\" has no host");
	expect_error("{\"dependencies\": {\"index_url\": \"http://[::1]:80/simple\"}}",
		     "t.json: policy.dependencies.index_url: \"http://[::1]:80/simple\" has a "
		     "host that is not a DNS name or an IPv4 address (letters, digits, '-' and "
		     "'.'; no IPv6)");
	expect_error("{\"dependencies\": {\"index_ca\": \"/srv/ca.pem\"}}",
		     "t.json: policy.dependencies.index_ca: needs an https:// "
		     "policy.dependencies.index_url (it is the CA pip checks that index's "
		     "certificate with)");
	expect_error("{\"dependencies\": {\"index_url\": \"https://x.test/simple\", "
		     "\"index_ca\": \"ca.pem\"}}",
		     "t.json: policy.dependencies.index_ca: \"ca.pem\" must be an absolute path");
	expect_error("{\"dependencies\": {\"cache\": 1}}",
		     "t.json: policy.dependencies.cache: expected true, false or an absolute "
		     "path, got 1");
	expect_error("{\"dependencies\": {\"cache_entries\": 0}}",
		     "t.json: policy.dependencies.cache_entries: 0 must be at least 1 (set "
		     "\"cache\": false for no cache)");
	expect_error("{\"dependencies\": {\"install_time\": \"2h\"}}",
		     "t.json: policy.dependencies.install_time: \"2h\" is out of range (1s to 1h)");
	expect_error("{\"dependencies\": {\"install_memory\": \"12X\"}}",
		     "t.json: policy.dependencies.install_memory: \"12X\" is not a size (use "
		     "512M, 1G, or bytes)");
	expect_error(
	    "{\"dependencies\": {\"auto_detect\": \"yes\"}}",
	    "t.json: policy.dependencies.auto_detect: expected true or false, got \"yes\"");
}

/* ---- docs/policy.md's reference names the schema's keys ---------------------- */

struct schema_keys {
	const char *section[128], *key[128];
	size_t n;
};

static void collect_key(const char *section, const char *key, void *arg)
{
	struct schema_keys *k = arg;

	if (k->n < 128) {
		k->section[k->n] = section;
		k->key[k->n++] = key;
	}
	CHECK(k->n < 128);
}

/* The keys of a section's reference in docs/policy.md: the backquoted
 * first column of the first "| key |" table under its heading ("## The
 * document" for the top level, "### Limits" for limits), as "|a|b|". */
static void doc_keys(const char *doc, const char *section, char *out, size_t size)
{
	char heading[64];
	size_t len = 0;

	if (strcmp(section, "policy") == 0)
		snprintf(heading, sizeof heading, "\n## The document\n");
	else
		snprintf(heading, sizeof heading, "\n### %c%s\n", section[0] - 'a' + 'A',
			 section + 1);
	out[0] = '\0';
	const char *at = strstr(doc, heading);
	if (!at)
		return;
	at += strlen(heading);
	/* the section ends at the next heading of its level or above */
	const char *end = at;
	while ((end = strstr(end, "\n#")) && strncmp(end, "\n####", 6) == 0)
		end++;
	const char *table = strstr(at, "\n| key |");
	if (!table || (end && table > end))
		return;
	len = (size_t)snprintf(out, size, "|");
	for (const char *line = strchr(table + 1, '\n'); line && line[1] == '|';
	     line = strchr(line + 1, '\n')) {
		const char *open = line + 2;
		while (*open == ' ')
			open++;
		const char *close = *open == '`' ? strchr(open + 1, '`') : NULL;
		if (close && len < size)
			len += (size_t)snprintf(out + len, size - len, "%.*s|",
						(int)(close - open - 1), open + 1);
	}
}

static void test_the_reference_documents_every_key(void)
{
	struct schema_keys k = { 0 };
	char path[] = POLICIES_DIR "/../docs/policy.md", *doc = NULL;
	FILE *f = fopen(path, "r");
	size_t got = 0;

	CHECK(f != NULL);
	if (!f)
		return;
	doc = calloc(1, 1 << 20);
	if (doc)
		got = fread(doc, 1, (1 << 20) - 1, f);
	fclose(f);
	CHECK(got > 0);
	sr_policy_schema_keys(collect_key, &k);
	CHECK(k.n > 40);
	for (size_t i = 0; doc && i < k.n; i++) {
		char keys[4096], want[80];
		doc_keys(doc, k.section[i], keys, sizeof keys);
		snprintf(want, sizeof want, "|%s|", k.key[i]);
		if (!strstr(keys, want))
			fprintf(stderr, "docs/policy.md: %s.%s is not in the reference (%s)\n",
				k.section[i], k.key[i], keys);
		CHECK(strstr(keys, want) != NULL);
	}
	/* and each documented key is one (comment: every object takes it) */
	for (size_t i = 0; doc && i < k.n; i++) {
		if (i && strcmp(k.section[i], k.section[i - 1]) == 0)
			continue;
		char keys[4096];
		doc_keys(doc, k.section[i], keys, sizeof keys);
		for (char *key = keys + 1, *bar; (bar = strchr(key, '|')); key = bar + 1) {
			*bar = '\0';
			bool known = strcmp(key, "comment") == 0;
			for (size_t j = 0; j < k.n && !known; j++)
				known = strcmp(k.section[j], k.section[i]) == 0 &&
					strcmp(k.key[j], key) == 0;
			if (!known)
				fprintf(stderr,
					"docs/policy.md: %s.%s is not a key of the schema\n",
					k.section[i], key);
			CHECK(known);
		}
	}
	free(doc);
}

int main(void)
{
	test_the_reference_documents_every_key();
	test_default_policy_has_the_documented_values();
	test_default_json_agrees_with_the_schema();
	test_empty_document_is_the_default();
	test_presets();
	test_preset_then_limits_whatever_the_key_order();
	test_overrides_keep_other_defaults();
	test_environment_and_seccomp_replace_whole_sections();
	test_limit_errors();
	test_document_errors();
	test_filesystem_errors();
	test_environment_errors();
	test_seccomp_errors();
	test_seccomp_conflicts();
	test_seccomp_size_caps();
	test_warm_section();
	test_warm_errors();
	test_commands_section();
	test_dependencies_section();
	test_dependencies_errors();
	test_warm_preload_names();
	test_warm_preload_at_most_64();
	test_long_values_are_cut_not_overflowed();
	test_sizes();
	test_durations();
	test_set_env();
	test_to_json_round_trip();
	test_warm_warmup();
	test_dup_is_a_deep_copy();
	test_dup_copies_the_network_and_dependencies_sections();
	test_network_egress();
	test_network_errors();
	test_load_file();
	test_default_ioctl_rules_cover_every_cmd_but_two();
	test_default_clone_and_socket_rules_do_not_overlap();
	return check_report();
}

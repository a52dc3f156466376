/* The checker's pieces: the tokenizer (strings, f-strings, NFKC,
 * positions, errors), the confined child (a crash, a hang and a seccomp
 * violation are errors, not crashes of the caller), the policy's checker
 * section and the allow list. The rules are proven by the corpus
 * (test_checker_corpus.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "check.h"
#include "checker/checker.h"
#include "checker/checker_confine.h"
#include "checker/checker_tok.h"
#include "policy/policy.h"
#include "saferun.h"

/* ---- tokenizer ------------------------------------------------------------- */

/* The tokens of src as "TYPE:text" words joined by spaces. */
static void tokens(const char *src, char *out, size_t cap)
{
	static const char *const names[] = { "END", "N",  "NUM", "S",  "OP", "NL",
					     "IN",  "DE", "FS",  "FM", "FE" };
	sr_arena a;
	sr_tokens t;
	sr_tok_error e = { 0 };
	sr_arena_init_heap(&a, 1 << 20);
	size_t n = 0;
	out[0] = '\0';
	if (sr_tokenize(src, strlen(src), &a, &t, &e) != 0) {
		snprintf(out, cap, "error %u:%u %s", e.line, e.col, e.msg);
	} else {
		for (uint32_t i = 0; i < t.n && n < cap; i++)
			n += (size_t)snprintf(out + n, cap - n, "%s%s:%.*s", i ? " " : "",
					      names[t.v[i].type], (int)t.v[i].text_len,
					      t.v[i].text ? t.v[i].text : "");
	}
	sr_arena_free(&a);
}

static void test_tokenizer_strings(void)
{
	char got[2048];
	tokens("x = rb'\\x41' + U'\\u00e9' + '''a\nb''' + \"\\x2fetc\"\n", got, sizeof got);
	CHECK_STR(got, "N:x OP:= S:\\x41 OP:+ S:é OP:+ S:a\nb OP:+ S:/etc NL: END:");
	tokens("f'a{b!r:>{w}}{{c}}{d[\"k\"]=}'\n", got, sizeof got);
	CHECK_STR(got,
		  "FS:f' FM:a OP:{ N:b OP:! N:r OP:: FM:> OP:{ N:w OP:} OP:} FM:{c} OP:{ N:d OP:[ "
		  "S:k OP:] OP:= OP:} FE:' NL: END:");
	tokens("f\"{f'{x}'}\" rf'\\{y}'\n", got, sizeof got);
	CHECK_STR(got, "FS:f\" OP:{ FS:f' OP:{ N:x OP:} FE:' OP:} FE:\" FS:rf' FM:\\ OP:{ N:y OP:} "
		       "FE:' NL: END:");
}

static void test_tokenizer_lines(void)
{
	char got[2048];
	tokens("if a:\n    b = (1,\n  2)  # c\n\n    c \\\n  = 3\nd\n", got, sizeof got);
	CHECK_STR(
	    got,
	    "N:if N:a OP:: NL: IN: N:b OP:= OP:( NUM:1 OP:, NUM:2 OP:) NL: N:c OP:= NUM:3 NL: DE: "
	    "N:d NL: END:");
	tokens("x = 0x1F + 1.5e-3j + 1_000 + .5\n", got, sizeof got);
	CHECK_STR(got, "N:x OP:= NUM:0x1F OP:+ NUM:1.5e-3j OP:+ NUM:1_000 OP:+ NUM:.5 NL: END:");
}

/* Keywords are found by a binary search: every one, and nothing else. */
static void test_tokenizer_keywords(void)
{
	const char *src =
	    "False None True and as assert async await break class continue def del "
	    "elif else except finally for from global if import in is lambda nonlocal "
	    "not or pass raise return try while with yield "
	    "A false a asy assertx awaits d el iff Import ins nonlocals o yields zz\n";
	sr_arena a;
	sr_tokens t;
	sr_tok_error e = { 0 };
	sr_arena_init_heap(&a, 1 << 20);
	CHECK_INT(sr_tokenize(src, strlen(src), &a, &t, &e), 0);
	uint32_t kw = 0, names = 0;
	for (uint32_t i = 0; i < t.n; i++) {
		names += t.v[i].type == SR_T_NAME;
		if (sr_tok_is_keyword(&t.v[i]))
			CHECK_INT(i, kw++); /* the first 35 names, and only they */
	}
	CHECK_INT(kw, 35);
	CHECK_INT(names, 35 + 15);
	sr_arena_free(&a);
}

static void test_tokenizer_nfkc(void)
{
	char got[2048];
	/* fullwidth, mathematical bold, a ligature, long s, Roman numeral */
	tokens("ｅｖａｌ 𝐞𝐯𝐚𝐥 ﬁle ſys Ⅸ café\n", got, sizeof got);
	CHECK_STR(got, "N:eval N:eval N:file N:sys N:IX N:café NL: END:");
}

/* \N{...} names of ASCII characters are decoded (without case, with
 * Unicode's aliases); others leave the string opaque. */
static void test_tokenizer_named_escapes(void)
{
	char got[2048];
	tokens("'\\N{SOLIDUS}etc\\N{solidus}passwd' '\\N{LATIN SMALL LETTER O}s\\N{LF}' "
	       "f'\\N{FULL STOP}{x}' b'\\N{SOLIDUS}'\n",
	       got, sizeof got);
	CHECK_STR(got,
		  "S:/etc/passwd S:os\n FS:f' FM:. OP:{ N:x OP:} FE:' S:\\N{SOLIDUS} NL: END:");
	sr_arena a;
	sr_tokens t;
	sr_tok_error e = { 0 };
	const char *src = "'\\N{SOLIDUS}x' '/etc/\\N{GREEK SMALL LETTER ALPHA}' '\\N{NO SUCH}'\n";
	sr_arena_init_heap(&a, 1 << 20);
	CHECK_INT(sr_tokenize(src, strlen(src), &a, &t, &e), 0);
	CHECK(!(t.v[0].flags & SR_TF_OPAQUE));
	CHECK(t.v[1].flags & SR_TF_OPAQUE);
	CHECK(t.v[2].flags & SR_TF_OPAQUE);
	sr_arena_free(&a);
}

/* A path held in a variable: the finding names the call as written and
 * the path it gets. */
static void test_path_through_a_variable(void)
{
	const char *code = "import os\nd = '/etc'\nos.listdir(d)\nopen('/proc/x')\n";
	sr_check_result r;
	sr_error err = { 0 };
	sr_check_request req = { .code = code, .code_size = strlen(code), .in_process = true };
	CHECK_INT(sr_check(&req, &r, &err), 0);
	CHECK_INT(r.n_findings, 2);
	if (r.n_findings == 2) {
		CHECK_INT(r.findings[0].line, 3);
		const char *want[] = {
			"`os.listdir(d)`: the path '/etc' is a system path the code must not use;",
			"`open('/proc/x')`: the path is a system path the code must not use;",
		};
		for (int i = 0; i < 2; i++)
			CHECK(!strncmp(r.findings[i].message, want[i], strlen(want[i])));
	}
	sr_check_result_free(&r);
}

static void test_tokenizer_errors(void)
{
	char got[512], deep[512];
	tokens("x = 1\ns = \"abc\n", got, sizeof got);
	CHECK_STR(got, "error 2:5 unterminated string literal (detected at line 2)");
	tokens("s = '''abc\n\n", got, sizeof got);
	CHECK_STR(got, "error 1:5 unterminated triple-quoted string literal (detected at line 3)");
	tokens("f(1, [2)\n", got, sizeof got);
	CHECK_STR(
	    got,
	    "error 1:8 closing parenthesis ')' does not match opening parenthesis '[' on line 1");
	tokens("if x:\n        a\n    b\n", got, sizeof got);
	CHECK_STR(got, "error 3:5 unindent does not match any outer indentation level");
	tokens("f'{x'\n", got, sizeof got);
	CHECK_STR(got, "error 1:5 unterminated string literal (detected at line 1)");
	tokens("f'{x\n", got, sizeof got);
	CHECK_STR(got, "error 1:1 unterminated f-string literal (detected at line 2)");
	memset(deep, '(', 201);
	deep[201] = '\0';
	tokens(deep, got, sizeof got);
	CHECK_STR(got, "error 1:201 too many nested parentheses");
	tokens("x = $\n", got, sizeof got);
	CHECK_STR(got, "error 1:5 invalid character '$' (U+0024)");
}

/* ---- the confined child ---------------------------------------------------------- */

/* Run the probe (confine_probe.c) in the given mode with in as its input.
 * stop_ms: the probe is stopped (SIGSTOP) that long first, as a child on a
 * busy machine waits for a core; hold: the input's write end stays open. */
static int probe_as(const char *mode, const char *in, int stop_ms, bool hold, char *out,
		    size_t out_size, size_t *got, sr_error *err)
{
	sr_confine_limits lim = { .timeout_ms = 300 };
	sr_confined c;
	int prog = open(CONFINE_PROBE, O_PATH | O_CLOEXEC), p[2];
	if (prog < 0 || pipe2(p, O_CLOEXEC) < 0 || write(p[1], in, strlen(in)) < 0)
		return sr_fail(err, errno, "set up the probe %s", CONFINE_PROBE);
	if (!hold)
		close(p[1]);
	int rc = sr_confine_start(prog, mode, p[0], &lim, &c, err);
	close(p[0]);
	close(prog);
	if (rc == 0 && stop_ms) {
		syscall(SYS_pidfd_send_signal, c.pidfd, SIGSTOP, NULL, 0);
		usleep((useconds_t)stop_ms * 1000);
		syscall(SYS_pidfd_send_signal, c.pidfd, SIGCONT, NULL, 0);
	}
	memset(out, 0, out_size);
	rc = rc < 0 ? rc : sr_confine_finish(&c, out, out_size, got, err);
	if (hold)
		close(p[1]);
	return rc;
}

static int probe(const char *mode, const char *in, char *out, size_t out_size, size_t *got,
		 sr_error *err)
{
	return probe_as(mode, in, 0, false, out, out_size, got, err);
}

static void test_confined_child(void)
{
	char out[100];
	size_t got = 0;
	sr_error err = { 0 };
	CHECK_INT(probe("fill", "z", out, sizeof out, &got, &err), 0);
	CHECK_INT(got, 90);
	CHECK(out[0] == 'z' && out[89] == 'z' && out[90] == 0);
	CHECK_INT(probe("crash", "", out, sizeof out, &got, &err), -1);
	CHECK_STR(err.msg, "the checker process was killed by signal 11 (Segmentation fault)");
	CHECK_INT(probe("hang", "", out, sizeof out, &got, &err), -1);
	CHECK_INT(err.errnum, ETIMEDOUT);
	CHECK_STR(err.msg, "the checker ran out of time (300 ms of CPU) and was killed");
	/* Its time is CPU time: stopped for 500 ms (longer than its 300 ms),
	 * as on a machine whose cores are busy, it still finishes. */
	uint64_t t0 = sr_now_ms();
	CHECK_INT(probe_as("work", "", 500, false, out, sizeof out, &got, &err), 0);
	CHECK(got == 4 && !memcmp(out, "done", 4));
	CHECK(sr_now_ms() - t0 >= 500);
	/* A child that waits and uses no CPU ends at the wall-clock cap. */
	t0 = sr_now_ms();
	CHECK_INT(probe_as("wait", "", 0, true, out, sizeof out, &got, &err), -1);
	CHECK_INT(err.errnum, ETIMEDOUT);
	CHECK_STR(err.msg, "the checker did not finish within 2500 ms of wall-clock time (5 "
			   "times its 300 ms of CPU, plus 1000 ms) and was killed");
	CHECK(sr_now_ms() - t0 >= 2500 && sr_now_ms() - t0 < 4500);
	CHECK_INT(probe("forbidden", "", out, sizeof out, &got, &err), -1);
	CHECK_STR(err.msg,
		  "the checker process was killed by signal 9 (Killed) (a seccomp violation or a "
		  "resource limit)");
	CHECK_INT(probe("exhaust", "", out, sizeof out, &got, &err), 0);
	CHECK_INT(got, 7);
	/* the stack is bounded (8 MiB) even when the caller's is not */
	struct rlimit was, unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	getrlimit(RLIMIT_STACK, &was);
	if (setrlimit(RLIMIT_STACK, &unlimited) == 0) {
		CHECK_INT(probe("deep", "", out, sizeof out, &got, &err), -1);
		CHECK_STR(err.msg,
			  "the checker process was killed by signal 11 (Segmentation fault)");
		setrlimit(RLIMIT_STACK, &was);
	}
}

/* The one child of this process (the checker's), or 0. */
static pid_t only_child(void)
{
	pid_t found = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char path[64], stat[512];
		snprintf(path, sizeof path, "/proc/%.20s/stat", e->d_name);
		FILE *f = e->d_name[0] >= '1' && e->d_name[0] <= '9' ? fopen(path, "r") : NULL;
		size_t n = f ? fread(stat, 1, sizeof stat - 1, f) : 0;
		if (f)
			fclose(f);
		stat[n] = '\0';
		char *rp = strrchr(stat, ')');
		int ppid;
		if (rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == getpid())
			found = atoi(e->d_name);
	}
	if (d)
		closedir(d);
	return found;
}

/* The checker runs as the program exec'd for it (saferun-check from its
 * memfd), not as a fork of the caller: nothing of this process's memory
 * (a daemon's tokens and requests) is in it. A fork would show this
 * test's executable until it ends, and the test would never see the
 * program. The script is long enough to be watched while it is checked. */
static void test_checker_is_exec_not_fork(void)
{
	static const char line[] = "rows = [str(i) * 2 for i in range(10) if i % 3]\n";
	size_t len = 5000 * (sizeof line - 1);
	char *code = malloc(len + 1), self[4096], exe[4096], what[4096];
	for (size_t i = 0; i < len; i += sizeof line - 1)
		memcpy(code + i, line, sizeof line - 1);
	code[len] = '\0';
	ssize_t sn = readlink("/proc/self/exe", self, sizeof self - 1);
	self[sn > 0 ? sn : 0] = '\0';
	bool seen = false;
	for (int attempt = 0; attempt < 20 && !seen; attempt++) {
		sr_check_request req = { .code = code, .code_size = len };
		sr_check_job *job = NULL;
		sr_check_result res;
		sr_error err = { 0 };
		CHECK_INT(sr_check_start(&req, &job, &err), 0);
		pid_t kid = only_child();
		for (ssize_t n; kid > 0 && !seen;) {
			snprintf(what, sizeof what, "/proc/%d/exe", (int)kid);
			if ((n = readlink(what, exe, sizeof exe - 1)) < 0)
				break; /* it has ended: look again at the next */
			exe[n] = '\0';
			if (!strcmp(exe, self))
				continue; /* still the clone, before its exec */
			CHECK_STR(exe, "/memfd:saferun-check (deleted)");
			snprintf(what, sizeof what, "/proc/%d/maps", (int)kid);
			FILE *f = fopen(what, "r");
			char map[8192];
			while (f && fgets(map, sizeof map, f))
				CHECK(!strstr(map, self));
			if (f)
				fclose(f);
			seen = true;
		}
		/* (its verdict is the corpus tests' business; on a loaded
		 * machine it may even run out of time) */
		if (sr_check_finish(job, &res, &err) == 0)
			sr_check_result_free(&res);
	}
	CHECK(seen);
	free(code);
}

/* ---- sr_check --------------------------------------------------------------------- */

static int check(const char *code, const sr_policy *p, const char *const *allow, size_t n_allow,
		 sr_check_result *r, sr_error *err)
{
	sr_check_request req = { .code = code,
				 .code_size = strlen(code),
				 .policy = p,
				 .allow = allow,
				 .n_allow = n_allow };
	return sr_check(&req, r, err);
}

static void test_check_confined_matches_in_process(void)
{
	const char *code = "import os\nos.system('id')\nopen('/etc/passwd')\n";
	sr_check_result a, b;
	sr_error err = { 0 };
	sr_check_request req = { .code = code, .code_size = strlen(code), .in_process = true };
	CHECK_INT(sr_check(&req, &a, &err), 0);
	CHECK_INT(check(code, NULL, NULL, 0, &b, &err), 0);
	CHECK_INT(a.n_findings, 2);
	CHECK_INT(b.n_findings, 2);
	CHECK(a.n_findings == b.n_findings &&
	      !memcmp(a.findings, b.findings, a.n_findings * sizeof *a.findings));
	CHECK_STR(b.findings[0].rule, "SR101");
	CHECK_INT(b.findings[1].line, 3);
	char *json = sr_check_result_to_json(&b);
	CHECK(json && strstr(json, "\"verdict\":\"rejected\"") &&
	      strstr(json, "\"rule\":\"SR401\""));
	free(json);
	sr_check_result_free(&a);
	sr_check_result_free(&b);
}

static void test_check_bad_input_and_limits(void)
{
	sr_check_result r;
	sr_error err = { 0 };
	CHECK_INT(check("x = '\xff'\n", NULL, NULL, 0, &r, &err), -1);
	CHECK_INT(err.errnum, EILSEQ);
	sr_policy *p = NULL;
	const char *tiny = "{\"checker\": {\"memory\": \"16M\"}}";
	CHECK_INT(sr_policy_load_json(tiny, strlen(tiny), "t.json", &p, &err), 0);
	size_t n = 3u << 20;
	char *big = malloc(n + 1);
	for (size_t i = 0; i < n; i += 2)
		memcpy(big + i, i % 64 == 62 ? ",\n" : "a,", 2);
	memcpy(big, "x=[", 3);
	memcpy(big + n - 2, "]\n", 2);
	big[n] = '\0';
	CHECK_INT(check(big, p, NULL, 0, &r, &err), -1);
	CHECK_INT(err.errnum, ENOMEM);
	CHECK_STR(err.msg,
		  "the code is too large or complex to check within the checker's memory limit "
		  "(raise checker.memory in the policy)");
	free(big);
	sr_policy_free(p);
}

/* A name rebound all along a long script (df = df.dropna(), ...) was
 * resolved through every one of its bindings at every use, which made
 * checking quadratic and worse: this script took over a minute and ended
 * at the confined checker's 2 s limit. Resolved names are memoised now. */
static void test_many_rebindings_check_in_time(void)
{
	size_t cap = 1 << 20, n = 0;
	char *code = malloc(cap);
	n += (size_t)snprintf(code + n, cap - n,
			      "import os\nimport pandas as pd\npath = 'data.csv'\n");
	for (int i = 0; n + 256 < cap && i < 999; i++)
		n += (size_t)snprintf(code + n, cap - n,
				      "df = pd.read_csv(path)\ndf = df.dropna()\n"
				      "total = df['v%d'].sum()\ndf = df[df.v > total]\n"
				      "df.to_csv('out.csv')\n",
				      i);
	n += (size_t)snprintf(code + n, cap - n, "run = os\nrun.system('id')\n");
	sr_check_result r;
	sr_error err = { 0 };
	CHECK_INT(check(code, NULL, NULL, 0, &r, &err), 0); /* confined, the default 2 s */
	CHECK_STR(err.msg, "");
	CHECK_INT(r.n_findings, 1);
	if (r.n_findings == 1) {
		CHECK_STR(r.findings[0].rule, "SR101");
		CHECK_INT(r.findings[0].line, 5000);
		CHECK_STR(r.findings[0].name, "os.system");
	}
	sr_check_result_free(&r);
	free(code);
}

/* Compound statements after ';' on one line (not Python, but the checker
 * must survive them): each header's body was parsed again once more per
 * header before it, 2^n times; fuzz_checker found a 1.4 KB input that
 * took 90 s. The line is checked once now, and the next line still is. */
static void test_nested_headers_on_one_line_check_in_time(void)
{
	size_t cap = 4096, n = 0;
	char *code = malloc(cap);
	n += (size_t)snprintf(code + n, cap - n, "import os\na");
	for (int i = 0; i < 40; i++)
		n += (size_t)snprintf(code + n, cap - n, "; for b in c: d");
	n += (size_t)snprintf(code + n, cap - n, "\nos.system('id')\n");
	sr_check_result r;
	sr_error err = { 0 };
	CHECK_INT(check(code, NULL, NULL, 0, &r, &err), 0); /* confined, the default 2 s */
	CHECK_STR(err.msg, "");
	CHECK_INT(r.n_findings, 1);
	if (r.n_findings == 1)
		CHECK_INT(r.findings[0].line, 3);
	sr_check_result_free(&r);
	free(code);
}

/* Names used before the web of rebindings that defines them (a12 is a11()
 * 32 times, a11 is a10() 32 times, ...): no value can be memoised (each
 * is cut at the depth limit), the memo's budget runs out at the first
 * use, and the rest is resolved without the memo. The resolver's budget
 * used to wrap round to 2^32 - 1 here and never end; and past the memo's
 * budget no name may be skipped: the last line is still found. */
static void test_web_of_rebindings_past_the_memo_budget(void)
{
	size_t cap = 1 << 20, n = 0;
	char *code = malloc(cap);
	n += (size_t)snprintf(code + n, cap - n, "import os\n");
	for (int i = 0; i < 2000; i++)
		n += (size_t)snprintf(code + n, cap - n, "a12()\n");
	n += (size_t)snprintf(code + n, cap - n, "a0 = 1\n");
	for (int i = 1; i <= 12; i++)
		for (int k = 0; k < 32; k++)
			n += (size_t)snprintf(code + n, cap - n, "a%d = a%d()\n", i, i - 1);
	n += (size_t)snprintf(code + n, cap - n, "run = os\nrun.system('id')\n");
	sr_check_result r;
	sr_error err = { 0 };
	CHECK_INT(check(code, NULL, NULL, 0, &r, &err), 0); /* confined, the default 2 s */
	CHECK_STR(err.msg, "");
	CHECK_INT(r.n_findings, 1);
	if (r.n_findings == 1) {
		CHECK_STR(r.findings[0].rule, "SR101");
		CHECK_INT(r.findings[0].line, 2388);
	}
	sr_check_result_free(&r);
	free(code);
}

/* Found by the fuzzer: "from import *" left the star import pointing at
 * a stack buffer (a use after scope under ASan). */
static void test_star_import_without_module(void)
{
	sr_check_result r;
	sr_error err = { 0 };
	sr_check_request req = { .code = "from import *\nsystem('x')\n",
				 .code_size = 26,
				 .in_process = true };
	CHECK_INT(sr_check(&req, &r, &err), 0);
	CHECK_INT(r.n_findings, 0);
	sr_check_result_free(&r);
}

static void test_allow_list(void)
{
	/* AgentRun's ignore_unsafe_functions names are accepted unchanged. */
	static const char *const agentrun[] = { "exec",       "eval",       "compile", "open",
						"input",      "__import__", "getattr", "setattr",
						"delattr",    "hasattr",    "globals", "locals",
						"vars",       "dir",        "os",      "sys",
						"subprocess", "builtins" };
	const char *code = "import os\neval('1')\nos.system('id')\nopen('/etc/passwd')\n";
	sr_check_result r;
	sr_error err = { 0 };
	CHECK_INT(check(code, NULL, agentrun, sizeof agentrun / sizeof *agentrun, &r, &err), 0);
	CHECK_INT(r.n_findings, 0);
	CHECK_INT(r.n_allowed, 3);
	sr_check_result_free(&r);
	const char *by_id[] = { "SR201", "path" };
	CHECK_INT(check(code, NULL, by_id, 2, &r, &err), 0);
	CHECK_INT(r.n_findings, 1);
	CHECK_STR(r.findings[0].name, "os.system");
	sr_check_result_free(&r);
	const char *empty[] = { "" };
	CHECK_INT(check(code, NULL, empty, 1, &r, &err), -1);
	CHECK_INT(err.errnum, EINVAL);
}

/* ---- the policy's checker section ----------------------------------------------------- */

static void expect_policy_error(const char *json, const char *want)
{
	sr_policy *p = NULL;
	sr_error err = { 0 };
	CHECK_INT(sr_policy_load_json(json, strlen(json), "t.json", &p, &err), -1);
	CHECK_STR(err.msg, want);
	sr_policy_free(p);
}

static void test_policy_section(void)
{
	const char *json = "{\"checker\": {\"enabled\": false, \"allow\": [\"open\", \"SR201\"], "
			   "\"rules\": {\"process\": false, \"SR105\": false, \"SR302\": true}, "
			   "\"timeout\": \"500ms\", \"memory\": \"64M\", \"comment\": \"x\"}}";
	sr_policy *p = NULL, *q = NULL;
	sr_error err = { 0 };
	CHECK_INT(sr_policy_load_json(json, strlen(json), "t.json", &p, &err), 0);
	CHECK(!p->checker.enabled);
	CHECK_INT(p->checker.n_allow, 2);
	CHECK_INT(p->checker.n_rules_off, 2);
	CHECK_STR(p->checker.rules_off[0], "SR101");
	CHECK_INT(p->checker.timeout_ms, 500);
	CHECK_INT(p->checker.memory_bytes, 64u << 20);
	char *text = sr_policy_to_json(p);
	CHECK_INT(sr_policy_load_json(text, strlen(text), "round", &q, &err), 0);
	CHECK(q && q->checker.n_rules_off == 2 && q->checker.timeout_ms == 500 &&
	      !q->checker.enabled);
	free(text);
	sr_policy_free(q);
	/* rules switched off are not reported */
	sr_check_result r;
	CHECK_INT(check("import subprocess\n", p, NULL, 0, &r, &err), 0);
	CHECK_INT(r.n_findings, 0);
	sr_check_result_free(&r);
	sr_policy_free(p);
	CHECK_INT(sr_policy_default(&p, &err), 0);
	CHECK(p->checker.enabled && p->checker.timeout_ms == 2000 && p->checker.n_allow == 0);
	sr_policy_free(p);

	expect_policy_error(
	    "{\"checker\": {\"enable\": true}}",
	    "t.json: policy.checker.enable: unknown key (known: enabled, allow, rules, timeout, "
	    "memory, comment)");
	expect_policy_error(
	    "{\"checker\": {\"rules\": {\"SR999\": false}}}",
	    "t.json: policy.checker.rules.SR999: unknown rule (known: SR001, SR002, SR101, SR102, "
	    "SR103, SR104, SR105, SR106, SR201, SR202, SR301, SR302, SR303, SR401, or their "
	    "names)");
	expect_policy_error("{\"checker\": {\"rules\": {\"eval\": 0}}}",
			    "t.json: policy.checker.rules.eval: expected true or false, got 0");
	expect_policy_error(
	    "{\"checker\": {\"allow\": [\"SR777\"]}}",
	    "t.json: policy.checker.allow[0]: \"SR777\" is not a rule (known: SR001, SR002, SR101, "
	    "SR102, SR103, SR104, SR105, SR106, SR201, SR202, SR301, SR302, SR303, SR401)");
	expect_policy_error("{\"checker\": {\"allow\": [\"rm -rf\"]}}",
			    "t.json: policy.checker.allow[0]: \"rm -rf\" is not a rule id, rule "
			    "name or Python name "
			    "(e.g. SR201, eval, os.system)");
	expect_policy_error("{\"checker\": {\"enabled\": \"yes\"}}",
			    "t.json: policy.checker.enabled: expected true or false, got \"yes\"");
	expect_policy_error("{\"checker\": {\"timeout\": \"2h\"}}",
			    "t.json: policy.checker.timeout: \"2h\" is too large (at most 60s)");
}

int main(void)
{
	test_tokenizer_strings();
	test_tokenizer_lines();
	test_tokenizer_keywords();
	test_tokenizer_nfkc();
	test_tokenizer_named_escapes();
	test_tokenizer_errors();
	test_path_through_a_variable();
	test_confined_child();
	test_checker_is_exec_not_fork();
	test_check_confined_matches_in_process();
	test_check_bad_input_and_limits();
	test_many_rebindings_check_in_time();
	test_web_of_rebindings_past_the_memo_budget();
	test_nested_headers_on_one_line_check_in_time();
	test_star_import_without_module();
	test_allow_list();
	test_policy_section();
	return check_report();
}

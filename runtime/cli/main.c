/* saferun: the command line front-end over libsaferun. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon_client.h"
#include "saferun.h"

/* Exit codes of saferun itself, distinct from the ones the code passes
 * through (documented in docs/cli.md). */
enum {
	EXIT_USAGE = 2,     /* bad input: nothing ran */
	EXIT_INTERNAL = 3,  /* the sandbox failed, not the code */
	EXIT_TIMEOUT = 124, /* as timeout(1) */
	EXIT_OUTPUT = 125,
};

#define MAX_FILE_BYTES (256u << 20)

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs("saferun: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return EXIT_USAGE;
}

/* Each command's help: `saferun CMD --help` prints its own, `saferun
 * --help` all of them (docs/cli.md; tests/integration/test_cli.py checks
 * that every option the doc names is here). */
static const char usage_run[] =
    "usage: saferun run [options] (SCRIPT | -c CODE | -)\n"
    "  -c CODE           run CODE instead of a SCRIPT (- reads stdin)\n"
    "  --policy P        policy file (or a name in the policies dir)\n"
    "  --preset NAME     tiny, small, medium or large limits\n"
    "  --profile NAME    rootfs profile: host, minimal, datascience, node, ...\n"
    "  --language L      python (default), javascript or bash; else from the\n"
    "                    SCRIPT's extension (.js, .sh); docs/languages.md\n"
    "  --timeout S       wall-clock limit (20, 1.5, 500ms)\n"
    "  --memory SIZE     memory limit (512M, 1G)\n"
    "  --cpus N          CPU share (0.5 = half a core)\n"
    "  --pids N          process/thread limit\n"
    "  --env K=V         set an environment variable (repeatable)\n"
    "  --file NAME=PATH  copy PATH into the working dir as NAME (repeatable)\n"
    "  --stdin PATH      file the code reads as its stdin\n"
    "  --rootfs-dir DIR  where profiles live (default " SR_DEFAULT_ROOTFS_DIR ")\n"
    "  --allow NAME      let the checker accept NAME: a rule id (SR201), a rule\n"
    "                    name (eval) or a flagged name (open, os.system) (repeatable)\n"
    "  --no-check        skip the pre-execution checker\n"
    "  -r REQ, --requirement REQ\n"
    "                    a package the code needs (tabulate, attrs>=22): met by the\n"
    "                    profile or installed if policy.dependencies.allow lets it\n"
    "                    (repeatable; docs/dependencies.md)\n"
    "  --requirements-file FILE\n"
    "                    requirements one per line (# comments, blank lines skipped)\n"
    "  --warm            run on the warm path: python's zygote, with the policy's\n"
    "                    warm.preload imported, forks the sandbox; javascript's\n"
    "                    node sandbox gets the code as a pooled one does; bash\n"
    "                    has none (an error) (docs/warm.md);\n"
    "                    for one run this is slower than cold, it is how the\n"
    "                    tests prove the warm path's isolation\n"
    "  --no-daemon       run in this process (cold) even when a saferund is\n"
    "                    listening on $SAFERUN_SOCKET (default\n"
    "                    " SRCLI_DAEMON_SOCKET "); without it, a run\n"
    "                    no option above keeps in-process (--policy, --preset,\n"
    "                    --profile, --pids, --rootfs-dir, --no-check, --warm)\n"
    "                    goes to the daemon when it is root's or yours and\n"
    "                    takes it (docs/cli.md)\n"
    "  --json            print the full result as JSON\n"
    "  exit: the code's own (ok, error), 2 bad input, 3 rejected or internal_error,\n"
    "  124 timeout, 125 output_limit, 128+N killed by signal N\n";
static const char usage_check[] =
    "usage: saferun check [--policy P] [--allow NAME]... [--json] (FILE | -)\n"
    "  vet Python source without running it; exit 0 clean, 1 rejected,\n"
    "  2 bad input, 3 when the checker itself failed\n";
static const char usage_policy[] = "usage: saferun policy check FILE\n"
				   "  validate a policy and print it in full as JSON\n";
static const char usage_info[] = "usage: saferun info\n"
				 "  what saferun detected (kernel, cgroups, profiles) as JSON\n";
static const char usage_rootfs[] =
    "usage: saferun rootfs build [--dir DIR] [--force] [--verbose] PROFILE...\n"
    "       saferun rootfs list [--dir DIR]\n"
    "       saferun rootfs import [--name NAME] [--force] [--max-size SIZE] [--dir DIR] "
    "IMAGE.tar\n"
    "  build or list rootfs profiles; import a `docker save` or OCI archive as a\n"
    "  profile (docs/rootfs.md)\n";
static const char usage_mcp[] =
    "usage: saferun mcp [saferund options]   MCP server on stdin/stdout\n"
    "  runs saferund --stdio (the daemon's handlers, one client, no sockets);\n"
    "  options as saferund's: --policies-dir, --rootfs-dir, --default-policy, ...\n"
    "  (saferund --help; docs/mcp.md)\n";

static const struct command_help {
	const char *name, *text;
} helps[] = {
	{ "run", usage_run },   { "check", usage_check },   { "policy", usage_policy },
	{ "info", usage_info }, { "rootfs", usage_rootfs }, { "mcp", usage_mcp },
};

static bool wants_help(int argc, char **argv)
{
	return argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);
}

/* `saferun --help` (every command) or `saferun CMD --help` (cmd's). */
static void print_usage(FILE *f, const char *cmd)
{
	for (size_t i = 0; i < sizeof helps / sizeof *helps; i++)
		if (!cmd || strcmp(cmd, helps[i].name) == 0)
			fprintf(f, "%s%s", i && !cmd ? "\n" : "", helps[i].text);
	if (!cmd)
		fputs("\nsaferun CMD --help prints one command's part; saferun --version; "
		      "docs/cli.md\n",
		      f);
}

/* Read a whole file, or stdin for "-", refusing more than cap bytes. */
static int slurp(const char *path, size_t cap, char **data, size_t *size, const char *what)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	if (!f)
		return usage_error("cannot read %s %s: %s", what, path, strerror(errno));
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		return usage_error("%s %s is a directory", what, path);
	}
	size_t len = 0, alloc = 65536;
	char *buf = malloc(alloc);
	for (size_t n; buf && (n = fread(buf + len, 1, alloc - len, f)) > 0;) {
		len += n;
		if (len > cap)
			break;
		if (len == alloc && !(buf = realloc(buf, alloc *= 2)))
			break;
	}
	int failed = ferror(f);
	if (f != stdin)
		fclose(f);
	if (!buf || failed || len > cap) {
		free(buf);
		return !buf     ? usage_error("out of memory reading %s", path)
		       : failed ? usage_error("cannot read %s %s", what, path)
				: usage_error("%s %s is over the %zu byte cap", what, path, cap);
	}
	*data = buf;
	*size = len;
	return 0;
}

/* The files saferun ships next to itself: the source tree's when this
 * binary is the one in the build tree it was built in (a checkout, the
 * tests), the installed copies otherwise, so that an installed saferun needs
 * nothing of the source tree (docs/deploy.md, "Installed files"). */
enum shipped { SHIPPED_POLICIES, SHIPPED_PROFILES, SHIPPED_BUILD_ROOTFS, SHIPPED_IMPORT_ROOTFS };
static const char *const source_files[] = {
	SAFERUN_SOURCE_DIR "/policies",
	SAFERUN_SOURCE_DIR "/rootfs/profiles",
	SAFERUN_SOURCE_DIR "/scripts/build-rootfs",
	SAFERUN_SOURCE_DIR "/scripts/import-rootfs",
};
static const char *const installed_files[] = {
	SAFERUN_DATA_DIR "/policies",
	SAFERUN_DATA_DIR "/profiles",
	SAFERUN_LIBEXEC_DIR "/build-rootfs",
	SAFERUN_LIBEXEC_DIR "/import-rootfs",
};

/* The build dir is compared by its real path: the binary's own
 * (/proc/self/exe) is always resolved, SAFERUN_BUILD_DIR may not be. */
static bool running_from_build_tree(void)
{
	char self[PATH_MAX], build[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0 || !realpath(SAFERUN_BUILD_DIR, build))
		return false;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return false;
	*slash = '\0';
	return strcmp(self, build) == 0;
}

static const char *shipped_path(enum shipped f)
{
	return (running_from_build_tree() ? source_files : installed_files)[f];
}

/* A --policy argument: a path, or a name looked up in the policies dir. */
static int load_policy(const char *arg, sr_policy **p)
{
	sr_error err = { 0 };
	char path[4096];
	snprintf(path, sizeof path, "%s", arg);
	if (!strchr(arg, '/') && access(arg, F_OK) < 0) {
		const char *dir = getenv("SAFERUN_POLICY_DIR");
		snprintf(path, sizeof path, "%s/%s.json",
			 dir ? dir : shipped_path(SHIPPED_POLICIES), arg);
	}
	if (sr_policy_load_file(path, p, &err))
		return usage_error("%s", err.msg);
	return 0;
}

struct run_opts {
	const char *policy, *preset, *profile, *timeout, *memory, *cpus, *pids;
	const char *stdin_path, *rootfs_dir, *code_arg, *language, *script;
	const char *reqs_file;
	char **env, **files, **allow, **reqs;
	int n_env, n_files, n_allow, n_reqs;
	bool json, no_check, warm, no_daemon;
};

/* One run on the warm path of its language, never cold: Python's through a
 * zygote of its own, forked on demand; JavaScript's through a node sandbox
 * started for it and handed the code as a pooled one is. Only that
 * language's pool starts. */
static int run_warm(sr_policy *p, const sr_run_request *req, sr_result *res, sr_error *err)
{
	sr_warm *w;
	p->warm.enabled = true;
	p->warm.languages = 1u << req->language;
	p->warm.pool_size = 0;
	p->warm.pool_size_auto = false;
	p->warm.fallback_cold = false;
	if (sr_warm_start(p, req->rootfs_dir, &w, err))
		return -1;
	int rc = sr_warm_wait_ready(w, 300000, err);
	if (rc == 0)
		rc = sr_warm_run(w, req, res, err);
	sr_warm_stop(w);
	return rc;
}

static int apply_overrides(const struct run_opts *o, sr_policy *p)
{
	sr_error err = { 0 };
	uint64_t v;
	if (o->preset && sr_policy_apply_preset(p, o->preset, &err))
		return usage_error("--preset: %s", err.msg);
	if (o->profile) {
		free(p->profile);
		p->profile = strdup(o->profile);
	}
	if (o->timeout && (sr_parse_duration(o->timeout, &v) || v < 10 || v > 86400000u))
		return usage_error(
		    "--timeout: \"%s\" is not a duration between 10ms and 24h (use 20, 1.5, 500ms)",
		    o->timeout);
	if (o->timeout)
		p->limits.wall_ms = v;
	if (o->memory && (sr_parse_size(o->memory, &v) || v < (16u << 20)))
		return usage_error("--memory: \"%s\" is not a size of at least 16M (use 512M, 1G)",
				   o->memory);
	if (o->memory)
		p->limits.memory_bytes = v;
	char *end;
	if (o->cpus) {
		double c = strtod(o->cpus, &end);
		if (*end || end == o->cpus || !(c >= 0.01 && c <= 1024))
			return usage_error(
			    "--cpus: \"%s\" is not a CPU share between 0.01 and 1024", o->cpus);
		p->limits.cpu_millis = (uint32_t)(c * 1000 + 0.5);
	}
	if (o->pids) {
		long n = strtol(o->pids, &end, 10);
		if (*end || end == o->pids || n < 1 || n > 1000000)
			return usage_error("--pids: \"%s\" is not a number between 1 and 1000000",
					   o->pids);
		p->limits.pids = (uint32_t)n;
	}
	for (int i = 0; i < o->n_env; i++)
		if (sr_policy_set_env(p, o->env[i], &err))
			return usage_error("--env: %s", err.msg);
	return 0;
}

static int load_files(const struct run_opts *o, sr_file *files)
{
	for (int i = 0; i < o->n_files; i++) {
		char *eq = strchr(o->files[i], '=');
		if (!eq || eq == o->files[i] || !eq[1])
			return usage_error("--file: \"%s\" is not NAME=PATH", o->files[i]);
		files[i].name = strndup(o->files[i], (size_t)(eq - o->files[i]));
		char *data;
		size_t size;
		if (!files[i].name || slurp(eq + 1, MAX_FILE_BYTES, &data, &size, "--file"))
			return EXIT_USAGE;
		files[i].data = data;
		files[i].size = size;
	}
	return 0;
}

static int exit_code_for(const sr_result *res)
{
	switch (res->status) {
	case SR_STATUS_OK: return res->exit_code;
	case SR_STATUS_ERROR: return res->exit_code >= 0 ? res->exit_code : 1; /* no code ran */
	case SR_STATUS_TIMEOUT: return EXIT_TIMEOUT;
	case SR_STATUS_OUTPUT_LIMIT: return EXIT_OUTPUT;
	case SR_STATUS_INTERNAL_ERROR:
	case SR_STATUS_REJECTED: return EXIT_INTERNAL;
	default:
		return res->exit_code >= 0 ? res->exit_code : 128 + (res->signal ? res->signal : 9);
	}
}

/* The output as it comes (without --json): what went out of each stream
 * already, so print_result writes only the rest. */
struct shown {
	size_t out, err;
};

static void show_output(void *arg, int stream, const char *data, size_t len)
{
	struct shown *sh = arg;
	int fd = stream == 2 ? STDERR_FILENO : STDOUT_FILENO;
	*(stream == 2 ? &sh->err : &sh->out) += len;
	while (len) {
		ssize_t n = write(fd, data, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		data += n;
		len -= (size_t)n;
	}
}

/* What of b was not shown yet (all of it if the shown bytes are not its
 * start, e.g. a rejected run's SyntaxError from another sandbox). */
static void print_rest(const sr_buf *b, size_t shown, FILE *f)
{
	if (shown > b->len)
		shown = 0;
	fwrite(b->data ? b->data + shown : "", 1, b->len - shown, f);
}

static int print_result(const sr_result *res, bool json, const struct shown *sh)
{
	if (json) {
		char *s = sr_result_to_json(res);
		puts(s ? s : "{}");
		free(s);
	} else {
		print_rest(&res->out, sh->out, stdout);
		fflush(stdout);
		print_rest(&res->err, sh->err, stderr);
		/* An error of the code's own explains itself; one before it
		 * ran (its dependencies) does not. */
		if (res->status != SR_STATUS_OK &&
		    (res->status != SR_STATUS_ERROR || res->exit_code < 0))
			fprintf(stderr, "saferun: %s\n", res->message);
	}
	return exit_code_for(res);
}

/* --requirements-file: one requirement per line; blank lines and # comments
 * skipped. Appended to reqs (the buffer is kept in *text). */
static int read_requirements(const char *path, char **text, char ***reqs, size_t *n)
{
	size_t size = 0;
	int rc = slurp(path, 1u << 20, text, &size, "--requirements-file");
	if (rc)
		return rc;
	char *grown = realloc(*text, size + 1);
	if (!grown)
		return usage_error("out of memory");
	*text = grown;
	grown[size] = '\0';
	for (char *line = grown, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		size_t len = strlen(line);
		while (len && strchr(" \t\r", line[len - 1]))
			line[--len] = '\0';
		while (*line == ' ' || *line == '\t')
			line++;
		if (!*line)
			continue;
		char **v = realloc(*reqs, (*n + 1) * sizeof *v);
		if (!v)
			return usage_error("out of memory");
		*reqs = v;
		v[(*n)++] = line;
	}
	return 0;
}

/* --language, else the script's extension, else Python. */
static int pick_language(const struct run_opts *o, sr_language *out)
{
	*out = SR_LANG_PYTHON;
	if (o->language)
		return sr_language_parse(o->language, out) < 0
			   ? usage_error(
				 "--language: \"%s\" is not one of python, javascript, bash",
				 o->language)
			   : 0;
	const char *dot = o->script ? strrchr(o->script, '.') : NULL;
	if (dot && strchr(dot, '/') == NULL) {
		if (strcmp(dot, ".js") == 0 || strcmp(dot, ".cjs") == 0)
			*out = SR_LANG_JAVASCRIPT;
		else if (strcmp(dot, ".sh") == 0 || strcmp(dot, ".bash") == 0)
			*out = SR_LANG_BASH;
	}
	return 0;
}

/* What only the in-process run honours: another policy, profile, rootfs
 * or pids limit, no checker, a private zygote (the daemon serves its own
 * default policy; a request may only lower its time, memory and CPU). */
static bool daemon_may_run(const struct run_opts *o)
{
	return !o->no_daemon && !o->warm && !o->policy && !o->preset && !o->profile && !o->pids &&
	       !o->rootfs_dir && !o->no_check;
}

/* 1 when saferund ran it (printed, *rc set); 0: run it here. */
static int run_in_daemon(const struct run_opts *o, const sr_run_request *req, sr_result *res,
			 int *rc)
{
	const sr_policy *p = req->policy;
	srcli_daemon_run r = { .code = req->code,
			       .code_size = req->code_size,
			       .env = o->env,
			       .n_env = (size_t)o->n_env,
			       .allow = o->allow,
			       .n_allow = (size_t)o->n_allow,
			       .files = req->files,
			       .n_files = req->n_files,
			       .stdin_data = req->stdin_data,
			       .stdin_size = req->stdin_size,
			       .reqs = (char *const *)req->requirements,
			       .n_reqs = req->n_requirements,
			       .timeout_ms = o->timeout ? p->limits.wall_ms : 0,
			       .memory_bytes = o->memory ? p->limits.memory_bytes : 0,
			       .cpu_millis = o->cpus ? p->limits.cpu_millis : 0,
			       .language = req->language,
			       .on_output = req->on_output,
			       .on_output_arg = req->on_output_arg };
	char why[512], *body = NULL;
	int got = srcli_daemon_run_code(&r, res, &body, why, sizeof why);
	if (got < 0) {
		usage_error("%s", why);
		*rc = EXIT_INTERNAL;
	} else if (got > 0 && o->json) {
		puts(body);
		*rc = exit_code_for(res);
	} else if (got > 0) {
		*rc = print_result(res, false, req->on_output_arg);
	}
	free(body);
	return got != 0;
}

static int run_code(const struct run_opts *o, const char *code, size_t code_size)
{
	char *reqs_text = NULL, **reqs = NULL;
	size_t n_reqs = 0;
	sr_policy *p = NULL;
	sr_error err = { 0 };
	sr_result res = { 0 };
	sr_file *files = calloc((size_t)o->n_files + 1, sizeof *files);
	char *in = NULL;
	size_t in_size = 0;
	struct shown shown = { 0 };
	sr_language language;
	int rc = pick_language(o, &language);
	if (!rc && o->warm && language == SR_LANG_BASH)
		rc =
		    usage_error("--warm: the code is bash, which has no warm path (its start-up is "
				"a few ms, the sandbox's own; the warm pools are python's and "
				"javascript's): run it without --warm");
	if (!rc)
		rc = o->policy ? load_policy(o->policy, &p)
			       : (sr_policy_default(&p, &err) ? usage_error("%s", err.msg) : 0);
	if (!rc)
		rc = apply_overrides(o, p);
	if (!rc)
		rc = load_files(o, files);
	if (!rc && o->stdin_path)
		rc = slurp(o->stdin_path, MAX_FILE_BYTES, &in, &in_size, "--stdin");
	if (!rc && o->n_reqs && !(reqs = calloc((size_t)o->n_reqs, sizeof *reqs)))
		rc = usage_error("out of memory");
	for (int i = 0; !rc && i < o->n_reqs; i++)
		reqs[n_reqs++] = o->reqs[i];
	if (!rc && o->reqs_file)
		rc = read_requirements(o->reqs_file, &reqs_text, &reqs, &n_reqs);
	if (!rc) {
		sr_run_request req = { .policy = p,
				       .code = code,
				       .code_size = code_size,
				       .files = files,
				       .n_files = (size_t)o->n_files,
				       .stdin_data = in,
				       .stdin_size = in_size,
				       .rootfs_dir = o->rootfs_dir,
				       .allow = (const char *const *)o->allow,
				       .n_allow = (size_t)o->n_allow,
				       .no_check = o->no_check,
				       .requirements = (const char *const *)reqs,
				       .n_requirements = n_reqs,
				       .on_output = o->json ? NULL : show_output,
				       .on_output_arg = &shown,
				       .language = language };
		if (!daemon_may_run(o) || !run_in_daemon(o, &req, &res, &rc))
			rc = (o->warm ? run_warm(p, &req, &res, &err) : sr_run(&req, &res, &err))
				 ? usage_error("%s", err.msg)
				 : print_result(&res, o->json, &shown);
	}
	sr_result_free(&res);
	for (int i = 0; i < o->n_files; i++) {
		free(files[i].name);
		free(files[i].data);
	}
	free(files);
	free(in);
	free(reqs);
	free(reqs_text);
	sr_policy_free(p);
	return rc;
}

static void free_run_opts(struct run_opts *o)
{
	free(o->env);
	free(o->files);
	free(o->allow);
	free(o->reqs);
}

static int cmd_run(int argc, char **argv)
{
	enum {
		O_POLICY = 256,
		O_PRESET,
		O_PROFILE,
		O_TIMEOUT,
		O_MEMORY,
		O_CPUS,
		O_PIDS,
		O_ENV,
		O_FILE,
		O_STDIN,
		O_JSON,
		O_ROOTFS,
		O_ALLOW,
		O_NO_CHECK,
		O_WARM,
		O_NO_DAEMON,
		O_REQ,
		O_REQ_FILE,
		O_LANGUAGE
	};
	static const struct option longopts[] = {
		{ "policy", 1, 0, O_POLICY },
		{ "preset", 1, 0, O_PRESET },
		{ "profile", 1, 0, O_PROFILE },
		{ "timeout", 1, 0, O_TIMEOUT },
		{ "memory", 1, 0, O_MEMORY },
		{ "cpus", 1, 0, O_CPUS },
		{ "pids", 1, 0, O_PIDS },
		{ "env", 1, 0, O_ENV },
		{ "file", 1, 0, O_FILE },
		{ "stdin", 1, 0, O_STDIN },
		{ "json", 0, 0, O_JSON },
		{ "rootfs-dir", 1, 0, O_ROOTFS },
		{ "allow", 1, 0, O_ALLOW },
		{ "no-check", 0, 0, O_NO_CHECK },
		{ "warm", 0, 0, O_WARM },
		{ "no-daemon", 0, 0, O_NO_DAEMON },
		{ "requirement", 1, 0, O_REQ },
		{ "requirements-file", 1, 0, O_REQ_FILE },
		{ "language", 1, 0, O_LANGUAGE },
		{ "help", 0, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct run_opts o = { .env = calloc((size_t)argc, sizeof(char *)),
			      .files = calloc((size_t)argc, sizeof(char *)),
			      .allow = calloc((size_t)argc, sizeof(char *)),
			      .reqs = calloc((size_t)argc, sizeof(char *)) };
	int c, rc = 0;
	opterr = 0;
	/* "+": options stop at the script, like python3 itself. */
	while (rc == 0 && (c = getopt_long(argc, argv, "+c:r:", longopts, NULL)) != -1) {
		switch (c) {
		case O_POLICY: o.policy = optarg; break;
		case O_PRESET: o.preset = optarg; break;
		case O_PROFILE: o.profile = optarg; break;
		case O_TIMEOUT: o.timeout = optarg; break;
		case O_MEMORY: o.memory = optarg; break;
		case O_CPUS: o.cpus = optarg; break;
		case O_PIDS: o.pids = optarg; break;
		case O_ENV: o.env[o.n_env++] = optarg; break;
		case O_FILE: o.files[o.n_files++] = optarg; break;
		case O_STDIN: o.stdin_path = optarg; break;
		case O_JSON: o.json = true; break;
		case O_ROOTFS: o.rootfs_dir = optarg; break;
		case O_ALLOW: o.allow[o.n_allow++] = optarg; break;
		case O_NO_CHECK: o.no_check = true; break;
		case O_WARM: o.warm = true; break;
		case O_NO_DAEMON: o.no_daemon = true; break;
		case 'r':
		case O_REQ: o.reqs[o.n_reqs++] = optarg; break;
		case O_REQ_FILE: o.reqs_file = optarg; break;
		case O_LANGUAGE: o.language = optarg; break;
		case 'c': o.code_arg = optarg; break;
		case 'h':
			print_usage(stdout, "run");
			rc = -1;
			break;
		default:
			rc = usage_error(
			    "run: unknown or incomplete option \"%s\" (see saferun --help)",
			    argv[optind - 1]);
		}
	}
	const char *script = optind < argc ? argv[optind] : NULL;
	o.script = script;
	if (rc == -1) { /* --help */
		free_run_opts(&o);
		return 0;
	}
	if (!rc && !o.code_arg && !script)
		rc = usage_error("run: give a SCRIPT, -c CODE or - (stdin)");
	if (!rc && o.code_arg && script)
		rc = usage_error("run: give either -c CODE or a SCRIPT, not both");
	if (!rc && optind + 1 < argc)
		rc = usage_error("run: unexpected argument \"%s\" after the script",
				 argv[optind + 1]);
	char *code = NULL;
	size_t size = 0;
	if (!rc && o.code_arg)
		rc = run_code(&o, o.code_arg, strlen(o.code_arg));
	else if (!rc && !(rc = slurp(script, SR_MAX_CODE_BYTES, &code, &size, "script")))
		rc = run_code(&o, code, size);
	free(code);
	free_run_opts(&o);
	return rc;
}

static void print_findings(const char *file, const sr_check_result *res)
{
	for (size_t i = 0; i < res->n_findings; i++) {
		const sr_finding *f = &res->findings[i];
		printf("%s:%u:%u: %s %s: %s\n", file, f->line, f->col, f->rule, f->rule_name,
		       f->message);
	}
	if (res->truncated)
		printf("%s: more findings were left out (at most %d are reported)\n", file,
		       SR_CHECK_MAX_FINDINGS);
	if (!res->n_findings)
		printf("%s: clean\n", file);
}

static int check_code(const char *policy, const char *file, char **allow, int n_allow, bool json)
{
	sr_policy *p = NULL;
	sr_error err = { 0 };
	sr_check_result res = { 0 };
	char *code = NULL;
	size_t size = 0;
	int rc = policy ? load_policy(policy, &p) : 0;
	if (!rc)
		rc = slurp(file, SR_MAX_CODE_BYTES, &code, &size, "script");
	if (!rc) {
		sr_check_request req = { .code = code,
					 .code_size = size,
					 .policy = p,
					 .allow = (const char *const *)allow,
					 .n_allow = (size_t)n_allow };
		if (sr_check(&req, &res, &err) < 0) {
			bool input =
			    err.errnum == EINVAL || err.errnum == EILSEQ || err.errnum == EFBIG;
			rc = input ? usage_error("check: %s", err.msg) : EXIT_INTERNAL;
			if (!input)
				fprintf(stderr, "saferun: internal_error: %s\n", err.msg);
		} else if (json) {
			char *s = sr_check_result_to_json(&res);
			puts(s ? s : "{}");
			free(s);
			rc = res.n_findings ? 1 : 0;
		} else {
			print_findings(strcmp(file, "-") == 0 ? "<stdin>" : file, &res);
			rc = res.n_findings ? 1 : 0;
		}
	}
	sr_check_result_free(&res);
	free(code);
	sr_policy_free(p);
	return rc;
}

static int cmd_check(int argc, char **argv)
{
	enum { O_POLICY = 256, O_ALLOW, O_JSON };
	static const struct option longopts[] = {
		{ "policy", 1, 0, O_POLICY },
		{ "allow", 1, 0, O_ALLOW },
		{ "json", 0, 0, O_JSON },
		{ "help", 0, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	char **allow = calloc((size_t)argc, sizeof *allow);
	const char *policy = NULL;
	int c, n_allow = 0, rc = 0;
	bool json = false;
	opterr = 0;
	while (rc == 0 && (c = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
		switch (c) {
		case O_POLICY: policy = optarg; break;
		case O_ALLOW: allow[n_allow++] = optarg; break;
		case O_JSON: json = true; break;
		case 'h':
			print_usage(stdout, "check");
			free(allow);
			return 0;
		default:
			rc = usage_error(
			    "check: unknown or incomplete option \"%s\" (see saferun --help)",
			    argv[optind - 1]);
		}
	}
	if (!rc && optind + 1 != argc)
		rc = usage_error("check: give one FILE, or - for stdin");
	if (!rc)
		rc = check_code(policy, argv[optind], allow, n_allow, json);
	free(allow);
	return rc;
}

static int cmd_policy(int argc, char **argv)
{
	if (wants_help(argc, argv) ||
	    (argc == 3 && strcmp(argv[1], "check") == 0 &&
	     (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0))) {
		print_usage(stdout, "policy");
		return 0;
	}
	if (argc != 3 || strcmp(argv[1], "check") != 0)
		return usage_error("usage: saferun policy check FILE");
	sr_policy *p = NULL;
	sr_error err = { 0 };
	if (sr_policy_load_file(argv[2], &p, &err))
		return usage_error("%s", err.msg);
	char *s = sr_policy_to_json(p);
	printf("ok: %s\n%s\n", argv[2], s ? s : "");
	free(s);
	sr_policy_free(p);
	return 0;
}

/* rootfs build/list: scripts/build-rootfs; rootfs import: scripts/import-rootfs,
 * which smoke-tests the imported tree with this binary (SAFERUN_BIN). Both
 * find the profiles through SAFERUN_PROFILES_DIR: installed, they do not sit
 * next to them as in the source tree. */
static int cmd_rootfs(int argc, char **argv)
{
	if (wants_help(argc, argv)) {
		print_usage(stdout, "rootfs");
		return 0;
	}
	bool import = argc >= 2 && strcmp(argv[1], "import") == 0;
	if (argc < 2 || (!import && strcmp(argv[1], "build") != 0 && strcmp(argv[1], "list") != 0))
		return usage_error(
		    "usage: saferun rootfs build PROFILE... | list | import IMAGE.tar "
		    "(see saferun rootfs --help)");
	const char *script = getenv(import ? "SAFERUN_IMPORT_ROOTFS" : "SAFERUN_BUILD_ROOTFS");
	if (!script)
		script = shipped_path(import ? SHIPPED_IMPORT_ROOTFS : SHIPPED_BUILD_ROOTFS);
	setenv("SAFERUN_PROFILES_DIR", shipped_path(SHIPPED_PROFILES), 0);
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
	if (import && len > 0 && !getenv("SAFERUN_BIN")) {
		self[len] = '\0';
		setenv("SAFERUN_BIN", self, 1);
	}
	char **args = calloc((size_t)argc + 2, sizeof *args);
	if (!args)
		return EXIT_INTERNAL;
	int n = 0;
	args[n++] = (char *)script;
	if (strcmp(argv[1], "list") == 0)
		args[n++] = "--list";
	for (int i = 2; i < argc; i++)
		args[n++] = argv[i];
	execv(script, args);
	free(args);
	return usage_error("cannot run %s: %s", script, strerror(errno));
}

/* saferund --stdio: the MCP handlers are the daemon's. It sits next to
 * this binary (a build dir, /usr/local/bin) or on PATH; SAFERUND names
 * another. */
static int cmd_mcp(int argc, char **argv)
{
	if (wants_help(argc, argv)) {
		print_usage(stdout, "mcp");
		return 0;
	}
	char self[4096], *daemon = getenv("SAFERUND");
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 16);
	if (!daemon && n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		strcpy(slash + 1, "saferund");
		if (access(self, X_OK) == 0)
			daemon = self;
	}
	char **args = calloc((size_t)argc + 2, sizeof *args);
	if (!args)
		return EXIT_INTERNAL;
	args[0] = daemon ? daemon : "saferund";
	args[1] = "--stdio";
	for (int i = 1; i < argc; i++)
		args[i + 1] = argv[i];
	if (daemon)
		execv(daemon, args);
	else
		execvp("saferund", args);
	free(args);
	return usage_error("mcp: cannot run %s: %s (install saferund next to saferun)",
			   daemon ? daemon : "saferund", strerror(errno));
}

int main(int argc, char **argv)
{
	if (argc < 2 || wants_help(argc, argv)) {
		print_usage(argc < 2 ? stderr : stdout, NULL);
		return argc < 2 ? EXIT_USAGE : 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		puts("saferun " SR_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	if (strcmp(argv[1], "check") == 0)
		return cmd_check(argc - 1, argv + 1);
	if (strcmp(argv[1], "policy") == 0)
		return cmd_policy(argc - 1, argv + 1);
	if (strcmp(argv[1], "rootfs") == 0)
		return cmd_rootfs(argc - 1, argv + 1);
	if (strcmp(argv[1], "mcp") == 0)
		return cmd_mcp(argc - 1, argv + 1);
	if (strcmp(argv[1], "info") == 0 && wants_help(argc - 1, argv + 1)) {
		print_usage(stdout, "info");
		return 0;
	}
	if (strcmp(argv[1], "info") == 0) {
		char *s = sr_info_json(argc > 2 ? argv[2] : NULL);
		puts(s ? s : "{}");
		free(s);
		return 0;
	}
	return usage_error(
	    "unknown command \"%s\" (run, check, policy, info, rootfs, mcp; see saferun --help)",
	    argv[1]);
}

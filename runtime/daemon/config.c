#include "config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node.h"
#include "public_url.h"
#include "saferun.h"

#define CONFIG_MAX_BYTES (1u << 20)

enum kind { K_STRING, K_BOOL, K_COUNT, K_SIZE, K_DURATION };

struct key {
	const char *name; /* in the file; the flag is the same with '-' for '_' */
	enum kind kind;
	size_t off;
	uint64_t min, max;
	const char *help;
};

#define F(field) offsetof(srd_config, field)
static const struct key keys[] = {
	{ "socket", K_STRING, F(socket_path), 0, 0, "unix socket to listen on (\"\": none)" },
	{ "socket_group", K_STRING, F(socket_group), 0, 0, "group that may use the socket" },
	{ "listen", K_STRING, F(listen), 0, 0, "also listen on TCP HOST:PORT (needs a token)" },
	{ "e2b_listen", K_STRING, F(e2b_listen), 0, 0,
	  "E2B API and sandbox traffic on TCP HOST:PORT (docs/e2b.md)" },
	{ "token_file", K_STRING, F(token_file), 0, 0, "bearer token for TCP (or SAFERUND_TOKEN)" },
	{ "insecure_no_token", K_BOOL, F(insecure_no_token), 0, 0,
	  "TCP on loopback without a token" },
	{ "policies_dir", K_STRING, F(policies_dir), 0, 0, "where NAME.json policies live" },
	{ "rootfs_dir", K_STRING, F(rootfs_dir), 0, 0, "where rootfs profiles live" },
	{ "default_policy", K_STRING, F(default_policy), 0, 0, "policy of a run that names none" },
	{ "max_concurrent_runs", K_COUNT, F(max_runs), 1, 4096, "runs at once (default: CPUs)" },
	{ "queue_depth", K_COUNT, F(queue_depth), 0, 100000, "runs that may wait (default 64)" },
	{ "max_body_size", K_SIZE, F(max_body_bytes), 1024, 1ull << 30, "request body cap (8M)" },
	{ "max_connections", K_COUNT, F(max_connections), 4, 65536, "open connections (1024)" },
	{ "max_pending_connections", K_COUNT, F(max_pending_connections), 1, 65536,
	  "TCP connections before authentication, per listener (64)" },
	{ "shutdown_grace", K_DURATION, F(shutdown_grace_ms), 0, 3600000, "drain time (30s)" },
	{ "workspaces_dir", K_STRING, F(workspaces_dir), 0, 0,
	  "sessions' dirs (" SRD_DEFAULT_WORKSPACES ")" },
	{ "max_sessions", K_COUNT, F(max_sessions), 0, 100000, "sessions open at once (64)" },
	{ "session_ttl", K_DURATION, F(session_ttl_ms), 1000, 7ull * 86400000,
	  "idle session lifetime (30m)" },
	{ "session_max_age", K_DURATION, F(session_max_age_ms), 1000, 30ull * 86400000,
	  "session lifetime (24h)" },
	{ "max_file_size", K_SIZE, F(max_file_bytes), 1, 1ull << 32,
	  "one file via the files API (64M)" },
	{ "node_id", K_STRING, F(node_id), 0, 0,
	  "this node's id in a fleet: session ids start with it" },
	{ "public_url", K_STRING, F(public_url), 0, 0,
	  "base of the URLs AgentRunPlus routes return (default: from Host)" },
	{ "tenants", K_STRING, F(tenants_file), 0, 0,
	  "tenants file: clients, their quotas and ceilings" },
};
#define N_KEYS (sizeof keys / sizeof *keys)

static const char *flag_name(const struct key *k, char *buf, size_t size)
{
	snprintf(buf, size, "%s", k->name);
	for (char *p = buf; *p; p++)
		*p = *p == '_' ? '-' : *p;
	/* the two flags the issue and the unit file use by a shorter name */
	if (strcmp(k->name, "max_concurrent_runs") == 0)
		return "max-runs";
	if (strcmp(k->name, "max_body_size") == 0)
		return "max-body";
	return buf;
}

static int bad(char *msg, size_t size, const char *origin, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(char *msg, size_t size, const char *origin, const char *fmt, ...)
{
	int n = snprintf(msg, size, "%s: ", origin);
	va_list ap;
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < size)
		vsnprintf(msg + n, size - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static int set_string(srd_config *c, const struct key *k, const cJSON *v, const char *origin,
		      char *msg, size_t size)
{
	if (!cJSON_IsString(v))
		return bad(msg, size, origin, "must be a string");
	if (!*v->valuestring && strcmp(k->name, "socket") != 0 &&
	    strcmp(k->name, "token_file") != 0)
		return bad(msg, size, origin, "must not be empty");
	char why[200];
	if (k->off == F(node_id) && srd_node_id_check(v->valuestring, why, sizeof why))
		return bad(msg, size, origin, "%s", why);
	char **dst = (char **)((char *)c + k->off), *copy = strdup(v->valuestring);
	if (!copy)
		return bad(msg, size, origin, "out of memory");
	free(*dst);
	*dst = copy;
	c->policies_dir_given |= k->off == F(policies_dir);
	return 0;
}

const char *const srd_number_want[] = {
	[SRD_NUM_COUNT] = "a whole number",
	[SRD_NUM_SIZE] = "a size (8M, 1G or bytes)",
	[SRD_NUM_DURATION] = "a duration (30, 1.5, 500ms, 2m)",
};
const char *const srd_number_unit[] = {
	[SRD_NUM_COUNT] = "", [SRD_NUM_SIZE] = " bytes", [SRD_NUM_DURATION] = " ms"
};

bool srd_json_number(const cJSON *v, srd_number_kind kind, uint64_t *out)
{
	bool ok = false;
	*out = 0;
	if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e15) {
		double x = kind == SRD_NUM_DURATION ? v->valuedouble * 1000.0 : v->valuedouble;
		ok = kind == SRD_NUM_DURATION || x == floor(x);
		*out = (uint64_t)llround(x);
	} else if (cJSON_IsString(v) && kind == SRD_NUM_SIZE) {
		ok = sr_parse_size(v->valuestring, out) == 0;
	} else if (cJSON_IsString(v) && kind == SRD_NUM_DURATION) {
		ok = sr_parse_duration(v->valuestring, out) == 0;
	}
	return ok;
}

/* A count, a size ("8M" or bytes) or a duration ("30s", or seconds). */
static int set_number(srd_config *c, const struct key *k, const cJSON *v, const char *origin,
		      char *msg, size_t size)
{
	srd_number_kind kind = k->kind == K_SIZE       ? SRD_NUM_SIZE
			       : k->kind == K_DURATION ? SRD_NUM_DURATION
						       : SRD_NUM_COUNT;
	uint64_t n;
	bool ok = srd_json_number(v, kind, &n);
	char shown[64] = "this value";
	if (cJSON_IsString(v))
		snprintf(shown, sizeof shown, "\"%s\"", v->valuestring);
	else if (cJSON_IsNumber(v))
		snprintf(shown, sizeof shown, "%g", v->valuedouble);
	if (!ok || n < k->min || n > k->max)
		return bad(msg, size, origin, "%s is not %s between %llu and %llu%s", shown,
			   srd_number_want[kind], (unsigned long long)k->min,
			   (unsigned long long)k->max, srd_number_unit[kind]);
	*(uint64_t *)((char *)c + k->off) = n;
	return 0;
}

static int set_key(srd_config *c, const struct key *k, const cJSON *v, const char *origin,
		   char *msg, size_t size)
{
	switch (k->kind) {
	case K_STRING: return set_string(c, k, v, origin, msg, size);
	case K_BOOL:
		if (!cJSON_IsBool(v))
			return bad(msg, size, origin, "must be true or false");
		*(bool *)((char *)c + k->off) = cJSON_IsTrue(v);
		return 0;
	default: return set_number(c, k, v, origin, msg, size);
	}
}

static const struct key *find_key(const char *name)
{
	for (size_t i = 0; i < N_KEYS; i++)
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

static int read_file(const char *path, bool must_exist, char **out, char *msg, size_t size)
{
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && !must_exist)
		return 0;
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size > CONFIG_MAX_BYTES) {
		snprintf(msg, size, "config %s: %s", path,
			 fd < 0 || errno ? strerror(errno) : "over 1 MiB");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	char *buf = calloc(1, (size_t)st.st_size + 1);
	ssize_t n = buf ? read(fd, buf, (size_t)st.st_size) : -1;
	close(fd);
	if (n != st.st_size) {
		snprintf(msg, size, "config %s: could not read it", path);
		free(buf);
		return -1;
	}
	*out = buf;
	return 0;
}

static int apply_file(srd_config *c, const char *path, bool must_exist, char *msg, size_t size)
{
	char *text;
	if (read_file(path, must_exist, &text, msg, size))
		return -1;
	if (!text)
		return 0;
	cJSON *doc = cJSON_Parse(text);
	free(text);
	int rc = 0;
	char origin[512];
	if (!cJSON_IsObject(doc)) {
		rc = bad(msg, size, path, "not a JSON object (see docs/deploy.md)");
		goto out;
	}
	for (const cJSON *it = doc->child; it && rc == 0; it = it->next) {
		const struct key *k = find_key(it->string);
		snprintf(origin, sizeof origin, "config %s: %s", path, it->string);
		if (strcmp(it->string, "comment") == 0)
			continue;
		if (!k) {
			char known[600] = "";
			for (size_t i = 0; i < N_KEYS; i++)
				snprintf(known + strlen(known), sizeof known - strlen(known),
					 "%s%s", i ? ", " : "", keys[i].name);
			rc = bad(msg, size, origin, "unknown key (known: %s)", known);
		} else {
			rc = set_key(c, k, it, origin, msg, size);
		}
	}
out:
	cJSON_Delete(doc);
	return rc;
}

/* A flag's text as the JSON value its key takes. */
static cJSON *flag_value(const struct key *k, const char *arg)
{
	if (k->kind == K_BOOL)
		return cJSON_CreateTrue();
	if (k->kind == K_COUNT) {
		char *end;
		errno = 0;
		unsigned long long n = strtoull(arg, &end, 10);
		if (*arg >= '0' && *arg <= '9' && !*end && !errno)
			return cJSON_CreateNumber((double)n);
		return cJSON_CreateString(arg); /* refused with the value shown */
	}
	return cJSON_CreateString(arg);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: saferund [--config FILE] [--stdio] [options]\n\n"
		   "  --config FILE          settings file (default " SRD_DEFAULT_CONFIG ")\n"
		   "  --stdio                serve one MCP client on stdin/stdout, no sockets\n"
		   "                         (what `saferun mcp` runs; sessions in\n"
		   "                         " SRD_STDIO_WORKSPACES "/PID)\n");
	for (size_t i = 0; i < N_KEYS; i++) {
		char buf[64], flag[80];
		snprintf(flag, sizeof flag, "--%s%s", flag_name(&keys[i], buf, sizeof buf),
			 keys[i].kind == K_BOOL ? "" : " V");
		fprintf(f, "  %-22s %s\n", flag, keys[i].help);
	}
	fprintf(f, "\nDocs: docs/deploy.md (settings, systemd), docs/api.md (routes), "
		   "docs/mcp.md.\n");
}

static void set_defaults(srd_config *c)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	*c = (srd_config){
		.socket_path = strdup(SRD_DEFAULT_SOCKET),
		.policies_dir = strdup(SRD_DEFAULT_POLICIES),
		.default_policy = strdup("default"),
		.max_runs = cpus > 0 ? (uint64_t)cpus : 1,
		.queue_depth = 64,
		.max_body_bytes = 8u << 20,
		.max_connections = 1024,
		.max_pending_connections = 64,
		.shutdown_grace_ms = 30000,
		.workspaces_dir = strdup(SRD_DEFAULT_WORKSPACES),
		.max_sessions = 64,
		.session_ttl_ms = 30u * 60000,
		.session_max_age_ms = 24u * 3600000,
		.max_file_bytes = 64u << 20,
	};
}

struct flag_arg {
	const struct key *key;
	const char *arg;
};

/* Collect the flags first: the config file they name is applied before
 * them, whatever their order. */
static int parse_argv(int argc, char **argv, struct flag_arg *flags, size_t *n, char **config,
		      char *msg, size_t size)
{
	static char names[N_KEYS][64];
	struct option opts[N_KEYS + 4];
	for (size_t i = 0; i < N_KEYS; i++)
		opts[i] = (struct option){ flag_name(&keys[i], names[i], sizeof names[i]),
					   keys[i].kind == K_BOOL ? no_argument : required_argument,
					   NULL, (int)(i + 256) };
	opts[N_KEYS] = (struct option){ "config", required_argument, NULL, 'c' };
	opts[N_KEYS + 1] = (struct option){ "help", no_argument, NULL, 'h' };
	opts[N_KEYS + 2] = (struct option){ "version", no_argument, NULL, 'V' };
	opts[N_KEYS + 3] = (struct option){ 0 };
	optind = 1;
	opterr = 0;
	for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		if (o == 'h' || o == 'V') {
			if (o == 'h')
				usage(stdout);
			else
				printf("saferund %s\n", SR_VERSION);
			return 1;
		}
		if (o == 'c')
			*config = optarg;
		else if (o >= 256)
			flags[(*n)++] = (struct flag_arg){ &keys[o - 256], optarg };
		else
			return snprintf(msg, size,
					"%s: unknown option or missing value (see --help)",
					argv[optind - 1]),
			       -1;
	}
	if (optind < argc)
		return snprintf(msg, size, "unexpected argument \"%s\" (see --help)", argv[optind]),
		       -1;
	return 0;
}

int srd_config_load(srd_config *c, int argc, char **argv, char *msg, size_t size)
{
	set_defaults(c);
	struct flag_arg *flags = calloc((size_t)argc + 1, sizeof *flags);
	size_t n = 0;
	char *config = NULL;
	int rc = flags ? parse_argv(argc, argv, flags, &n, &config, msg, size) : -1;
	if (rc == 0)
		rc = apply_file(c, config ? config : SRD_DEFAULT_CONFIG, config != NULL, msg, size);
	for (size_t i = 0; i < n && rc == 0; i++) {
		char origin[80], buf[64];
		snprintf(origin, sizeof origin, "--%s", flag_name(flags[i].key, buf, sizeof buf));
		cJSON *v = flag_value(flags[i].key, flags[i].arg);
		rc = v ? set_key(c, flags[i].key, v, origin, msg, size) : -1;
		cJSON_Delete(v);
	}
	if (rc == 0 && c->public_url) {
		rc = srd_public_url_check(c->public_url, msg, size);
		for (size_t len = strlen(c->public_url); len && c->public_url[len - 1] == '/';)
			c->public_url[--len] = '\0'; /* routes append "/sessions/..." */
	}
	if (rc == 0 && !(c->config_file = strdup(config ? config : SRD_DEFAULT_CONFIG)))
		rc = -1;
	free(flags);
	return rc;
}

void srd_config_free(srd_config *c)
{
	char **strs[] = { &c->config_file, &c->socket_path,    &c->socket_group,
			  &c->listen,      &c->token_file,     &c->policies_dir,
			  &c->rootfs_dir,  &c->default_policy, &c->workspaces_dir,
			  &c->node_id,     &c->public_url,     &c->tenants_file,
			  &c->e2b_listen };
	for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) {
		free(*strs[i]);
		*strs[i] = NULL;
	}
}

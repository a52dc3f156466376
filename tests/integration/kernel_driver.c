/* Drives one sr_kernel over a workspace for test_kernel.py: each argument
 * after the profile is one run's code, optionally headed by directives
 * ("#!timeout=300", "#!output=100", "#!stdin=TEXT", "#!allow=NAME",
 * "#!nocheck", "#!pause=MS": wait that long between the runs, lines). Prints one JSON line per run (the result plus
 * "alive"), then the workspace's listing, then destroys everything.
 * A run into a dead kernel starts a new one first (as saferund does).
 * usage: kernel_driver PROFILE WORKSPACE_BASE CODE... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "saferun.h"

struct cell {
	const char *code;
	char stdin_text[256];
	const char *allow[4];
	size_t n_allow;
	bool no_check;
	uint64_t wall_ms, output_bytes, pause_ms;
};

static void parse_cell(char *text, struct cell *c)
{
	while (strncmp(text, "#!", 2) == 0) {
		char *nl = strchr(text, '\n');
		if (!nl)
			break;
		*nl = '\0';
		char *d = text + 2;
		if (strncmp(d, "timeout=", 8) == 0)
			c->wall_ms = strtoull(d + 8, NULL, 10);
		else if (strncmp(d, "output=", 7) == 0)
			c->output_bytes = strtoull(d + 7, NULL, 10);
		else if (strncmp(d, "stdin=", 6) == 0)
			snprintf(c->stdin_text, sizeof c->stdin_text, "%s", d + 6);
		else if (strncmp(d, "allow=", 6) == 0 && c->n_allow < 4)
			c->allow[c->n_allow++] = d + 6;
		else if (strcmp(d, "nocheck") == 0)
			c->no_check = true;
		else if (strncmp(d, "pause=", 6) == 0)
			c->pause_ms = strtoull(d + 6, NULL, 10);
		text = nl + 1;
	}
	c->code = text;
}

static void print_listing(sr_workspace *ws)
{
	sr_workspace_entry *e;
	size_t n;
	sr_error err = { 0 };
	printf("{\"files\": [");
	if (sr_workspace_list(ws, "", 1000, &e, &n, &err) == 0) {
		for (size_t i = 0; i < n; i++)
			printf("%s[\"%s\", %llu, \"%c\"]", i ? ", " : "", e[i].path,
			       (unsigned long long)e[i].size, e[i].type);
		sr_workspace_entries_free(e, n);
	}
	printf("]}\n");
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: kernel_driver PROFILE WORKSPACE_BASE CODE...\n");
		return 2;
	}
	sr_policy *p, *per_run;
	sr_error err = { 0 };
	sr_workspace *ws;
	if (sr_policy_default(&p, &err) || sr_policy_default(&per_run, &err) ||
	    sr_workspace_create(argv[2], "driver", 16u << 20, &ws, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 2;
	}
	free(p->profile);
	p->profile = strdup(argv[1]);
	p->limits.memory_bytes = 128u << 20;
	printf("{\"workspace\": \"%s\"}\n", sr_workspace_path(ws));
	sr_kernel_options o = { .policy = p, .workspace = ws };
	sr_kernel *k = NULL;
	int rc = 0;
	for (int i = 3; i < argc && rc == 0; i++) {
		struct cell c = { 0 };
		parse_cell(argv[i], &c);
		if (c.pause_ms)
			nanosleep(
			    &(struct timespec){ .tv_sec = (time_t)(c.pause_ms / 1000),
						.tv_nsec = (long)(c.pause_ms % 1000) * 1000000L },
			    NULL);
		if ((!k || !sr_kernel_alive(k)) &&
		    (sr_kernel_stop(k), k = NULL, sr_kernel_start(&o, &k, &err) < 0)) {
			fprintf(stderr, "kernel start: %s\n", err.msg);
			rc = 1;
			break;
		}
		per_run->limits.wall_ms = c.wall_ms ? c.wall_ms : p->limits.wall_ms;
		per_run->limits.output_bytes =
		    c.output_bytes ? c.output_bytes : p->limits.output_bytes;
		sr_run_request req = { .policy = per_run,
				       .code = c.code,
				       .code_size = strlen(c.code),
				       .stdin_data = c.stdin_text[0] ? c.stdin_text : NULL,
				       .stdin_size = strlen(c.stdin_text),
				       .allow = c.allow,
				       .n_allow = c.n_allow,
				       .no_check = c.no_check };
		sr_result res;
		if (sr_kernel_run(k, &req, &res, &err) < 0) {
			printf("{\"refused\": \"%s\", \"errno\": %d}\n", err.msg, err.errnum);
			continue;
		}
		char *json = sr_result_to_json(&res);
		size_t len = strlen(json);
		while (len && (json[len - 1] == '\n' || json[len - 1] == '}'))
			json[--len] = '\0';
		printf("%s, \"alive\": %s}\n", json, sr_kernel_alive(k) ? "true" : "false");
		fflush(stdout);
		free(json);
		sr_result_free(&res);
	}
	sr_kernel_stop(k);
	print_listing(ws);
	sr_workspace_destroy(ws);
	sr_policy_free(p);
	sr_policy_free(per_run);
	return rc;
}

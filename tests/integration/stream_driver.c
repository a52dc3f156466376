/* Drives one run with sr_run_request.on_output for test_stream.py: every
 * call of the callback prints a line at once,
 *   {"chunk": STREAM, "t": WALL_CLOCK_SECONDS, "hex": "BYTES_IN_HEX"}
 * and when the run's call returns, {"returned": WALL_CLOCK_SECONDS} and the
 * result's JSON. MODE is cold (sr_run), warm (sr_warm_run through a zygote)
 * or kernel (sr_kernel_run over a workspace under WORKSPACE_BASE).
 * usage: stream_driver MODE PROFILE OUTPUT_BYTES WORKSPACE_BASE CODE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "saferun.h"

static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_output(void *arg, int stream, const char *data, size_t len)
{
	int *calls = arg;
	(*calls)++;
	printf("{\"chunk\": %d, \"t\": %.6f, \"hex\": \"", stream, wall_now());
	for (size_t i = 0; i < len; i++)
		printf("%02x", (unsigned char)data[i]);
	printf("\"}\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr,
			"usage: stream_driver MODE PROFILE OUTPUT_BYTES WORKSPACE_BASE CODE\n");
		return 2;
	}
	const char *mode = argv[1];
	sr_policy *p;
	sr_error err = { 0 };
	if (sr_policy_default(&p, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 2;
	}
	free(p->profile);
	p->profile = strdup(argv[2]);
	p->limits.memory_bytes = 128u << 20;
	p->limits.output_bytes = strtoull(argv[3], NULL, 10);
	int calls = 0;
	sr_run_request req = { .policy = p,
			       .code = argv[5],
			       .code_size = strlen(argv[5]),
			       .no_check = true,
			       .on_output = on_output,
			       .on_output_arg = &calls };
	sr_result res;
	int rc;
	sr_warm *w = NULL;
	sr_kernel *k = NULL;
	sr_workspace *ws = NULL;
	if (strcmp(mode, "warm") == 0) {
		p->warm.enabled = true;
		p->warm.pool_size = 0;
		p->warm.fallback_cold = false;
		rc = sr_warm_start(p, NULL, &w, &err);
		if (rc == 0)
			rc = sr_warm_wait_ready(w, 300000, &err);
		if (rc == 0)
			rc = sr_warm_run(w, &req, &res, &err);
	} else if (strcmp(mode, "kernel") == 0) {
		rc = sr_workspace_create(argv[4], "stream", 16u << 20, &ws, &err);
		sr_kernel_options o = { .policy = p, .workspace = ws };
		if (rc == 0)
			rc = sr_kernel_start(&o, &k, &err);
		if (rc == 0)
			rc = sr_kernel_run(k, &req, &res, &err);
	} else {
		rc = sr_run(&req, &res, &err);
	}
	double returned = wall_now();
	if (rc == 0) {
		char *json = sr_result_to_json(&res);
		printf("{\"returned\": %.6f, \"calls\": %d}\n%s\n", returned, calls, json);
		free(json);
		sr_result_free(&res);
	} else {
		printf("{\"refused\": \"%s\"}\n", err.msg);
	}
	sr_warm_stop(w);
	sr_kernel_stop(k);
	if (ws)
		sr_workspace_destroy(ws);
	sr_policy_free(p);
	return rc ? 1 : 0;
}

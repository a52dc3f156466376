/* Many runs in one process, as a daemon would do them: prints the count of
 * each status and the process's open fds and children before and after,
 * so test_cleanup.py can prove nothing accumulates.
 * usage: run_many N PROFILE */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "saferun.h"

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the DIR's own fd */
}

int main(int argc, char **argv)
{
	static const struct {
		const char *code;
		uint64_t wall_ms;
	} kinds[] = {
		{ "print('ok')\n", 20000 },
		{ "raise SystemExit(3)\n", 20000 },
		{ "while True: pass\n", 200 },
		{ "x = []\nwhile True: x.append(bytearray(8 << 20))\n", 20000 },
		{ "import os\nwhile True: os.fork()\n", 20000 },
	};
	int n = argc > 1 ? atoi(argv[1]) : 10;
	sr_policy *p;
	sr_error err = { 0 };
	if (sr_policy_default(&p, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 2;
	}
	free(p->profile);
	p->profile = strdup(argc > 2 ? argv[2] : "host");
	/* Room for 16 forked pythons, whose copied pages are charged to the
	 * group: the fork bomb ends at pids.max, not in an OOM kill (at 64
	 * MiB, 3 fork bombs in 40 were OOM-killed in one suite run). */
	p->limits.memory_bytes = 128u << 20;
	p->limits.pids = 16;
	/* Counted after the first run: from then on the library keeps one fd
	 * of its own for the process (the sandboxes' init, a sealed memfd). */
	int fds_before = -1;
	int counts[SR_STATUS_INTERNAL_ERROR + 1] = { 0 };
	for (int i = 0; i < n; i++) {
		if (i == 1)
			fds_before = count_fds();
		size_t k = (size_t)i % (sizeof kinds / sizeof *kinds);
		p->limits.wall_ms = kinds[k].wall_ms;
		sr_run_request req = { .policy = p,
				       .code = kinds[k].code,
				       .code_size = strlen(kinds[k].code) };
		sr_result res;
		if (sr_run(&req, &res, &err)) {
			fprintf(stderr, "run %d refused: %s\n", i, err.msg);
			return 1;
		}
		counts[res.status]++;
		if (res.status == SR_STATUS_INTERNAL_ERROR)
			fprintf(stderr, "run %d: %s\n", i, res.message);
		sr_result_free(&res);
	}
	int children = waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD ? 0 : 1;
	printf("{\"fds_before\": %d, \"fds_after\": %d, \"children\": %d, \"statuses\": {",
	       fds_before, count_fds(), children);
	for (int s = 0; s <= SR_STATUS_INTERNAL_ERROR; s++)
		printf("%s\"%s\": %d", s ? ", " : "", sr_status_name((sr_status)s), counts[s]);
	printf("}}\n");
	sr_policy_free(p);
	return 0;
}

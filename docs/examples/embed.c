/* An appliance embedding libsaferun: run one snippet under the default
 * policy with a tighter memory limit, print what happened.
 * Build: cc embed.c $(pkg-config ...) -lsaferun   (see docs/embedding.md) */
#include <saferun.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	sr_policy *policy;
	sr_error err = { 0 };
	if (sr_policy_default(&policy, &err)) {
		fprintf(stderr, "policy: %s\n", err.msg);
		return 2;
	}
	policy->limits.memory_bytes = 128u << 20;

	const char *code = "import sys\nprint('sum:', sum(range(10)))\n";
	sr_run_request req = { .policy = policy, .code = code, .code_size = strlen(code) };
	sr_result res;
	int rc = sr_run(&req, &res, &err);
	if (rc < 0) {
		fprintf(stderr, "refused: %s\n", err.msg); /* nothing ran */
	} else {
		printf("status=%s exit=%d stdout=%.*s", sr_status_name(res.status), res.exit_code,
		       (int)res.out.len, res.out.data ? res.out.data : "");
		sr_result_free(&res);
	}
	sr_policy_free(policy);
	return rc < 0 ? 2 : 0;
}

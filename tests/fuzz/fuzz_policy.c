/* libFuzzer harness for the policy loader: cJSON plus saferun's own
 * validation over arbitrary bytes. Whatever loads must print as JSON that
 * loads again to the same text (the round trip `saferun policy check`
 * relies on). Seccomp programs are compiled but not cached
 * (SAFERUN_CACHE_DIR=off), so fuzzing writes nothing. Build: see
 * tests/CMakeLists.txt (clang only). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "saferun.h"

static void expect(int ok)
{
	if (!ok)
		__builtin_trap();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setenv("SAFERUN_CACHE_DIR", "off", 1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sr_policy *p = NULL, *again = NULL;
	sr_error err = { 0 };
	if (sr_policy_load_json((const char *)data, size, "fuzz", &p, &err) < 0) {
		expect(p == NULL && err.msg[0] && memchr(err.msg, 0, sizeof err.msg));
		return 0;
	}
	char *text = sr_policy_to_json(p);
	expect(text != NULL);
	expect(sr_policy_load_json(text, strlen(text), "round trip", &again, &err) == 0);
	char *text2 = sr_policy_to_json(again);
	expect(text2 && strcmp(text, text2) == 0);
	free(text);
	free(text2);
	sr_policy_free(again);
	sr_policy_free(p);
	return 0;
}

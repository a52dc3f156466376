/* libFuzzer harness for the checker: tokenizer, parser, resolver and
 * rules over arbitrary bytes (sr_check refuses what is not UTF-8 before
 * the checker sees it; the checker must survive it anyway). Besides the
 * sanitizers, it checks what callers rely on: bounded, terminated,
 * positioned findings. Build: see tests/CMakeLists.txt (clang only). */
#include <stdint.h>
#include <string.h>

#include "checker/checker_scan.h"

static void expect(int ok)
{
	if (!ok)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const dirs[] = { "/work", "/tmp" };
	static const char *const allow[] = { "open", "SR303" };
	static sr_check_out out;
	sr_check_config cfg = {
		.dirs = dirs, .n_dirs = 2, .network_off = true, .allow = allow, .n_allow = size % 3
	};
	sr_arena a;
	sr_arena_init_heap(&a, 64u << 20);
	int rc = sr_checker_run((const char *)data, size, &cfg, &a, &out);
	sr_arena_free(&a);
	size_t lines = 1;
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n' || data[i] == '\r';
	expect(rc == 0 || rc == -2);
	expect(out.magic == SR_CHECK_MAGIC && out.n <= SR_CHECK_MAX_FINDINGS);
	for (uint32_t i = 0; i < out.n; i++) {
		const sr_finding *f = &out.f[i];
		expect(f->line >= 1 && f->line <= lines + 1 && f->col >= 1);
		expect(memchr(f->rule, 0, sizeof f->rule) && memchr(f->name, 0, sizeof f->name) &&
		       memchr(f->message, 0, sizeof f->message) && f->message[0]);
	}
	return 0;
}

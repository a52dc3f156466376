/* saferun-check: the pre-execution checker as a program of its own. The
 * library execs it from a sealed, execute-only memfd (checker.c), so the
 * process that parses hostile source holds nothing of its caller: in
 * saferund no bearer token, no other run's request, no other tenant's
 * files, which a parser bug could otherwise leak through the findings.
 *
 *   saferun-check < REQUEST > FINDINGS
 *
 * Reads the fixed-size header (checker_wire.h), confines itself
 * (confine_self.h: every other fd closed, one mapping, rlimits, seccomp
 * strict mode), then reads the settings and the code, checks, writes one
 * sr_check_out and exits. Exit statuses 10-12 say which step failed.
 * Static: it needs nothing of the host but the kernel. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "checker/checker_arena.h"
#include "checker/checker_rules.h"
#include "checker/checker_scan.h"
#include "checker/checker_wire.h"
#include "confine_self.h"
#include "saferun.h"

static size_t page_up(uint64_t n)
{
	return (size_t)((n + 4095) & ~(uint64_t)4095);
}

static bool header_ok(const sr_check_wire *h)
{
	return h->magic == SR_CHECK_WIRE_MAGIC && h->code_len <= SR_MAX_CODE_BYTES &&
	       h->n_dirs <= SR_CHECK_WIRE_MAX_DIRS && h->n_allow <= SR_CHECK_WIRE_MAX_ALLOW &&
	       h->strings_len <= SR_CHECK_WIRE_MAX_STRINGS && h->memory_bytes > 0 &&
	       h->memory_bytes <= SR_CHECK_WIRE_MAX_MEMORY;
}

/* Point ptrs at the n NUL-terminated strings that fill s exactly. */
static bool split(char *s, size_t len, const char **ptrs, size_t n)
{
	size_t i = 0;
	for (size_t at = 0; at < len; i++) {
		char *end = memchr(s + at, '\0', len - at);
		if (!end || i == n)
			return false;
		ptrs[i] = s + at;
		at = (size_t)(end - s) + 1;
	}
	return i == n;
}

int main(void)
{
	sr_check_wire h;
	if (sr_confine_read(&h, sizeof h) < 0 || !header_ok(&h))
		return 10;
	size_t n_str = (size_t)h.n_dirs + h.n_allow;
	size_t out_sz = page_up(sizeof(sr_check_out)), code_sz = page_up(h.code_len + 1),
	       str_sz = page_up(h.strings_len), ptr_sz = page_up(n_str * sizeof(char *) + 1);
	size_t head = out_sz + code_sz + str_sz + ptr_sz;
	char *mem = sr_confine_self(head + h.memory_bytes, h.timeout_ms);
	if (!mem)
		return 11;
	/* From here: read, write and exit only. */
	sr_check_out *out = (sr_check_out *)mem;
	char *code = mem + out_sz, *strings = code + code_sz;
	const char **ptrs = (const char **)(strings + str_sz);
	if (sr_confine_read(strings, h.strings_len) < 0 || sr_confine_read(code, h.code_len) < 0 ||
	    !split(strings, h.strings_len, ptrs, n_str))
		sr_confine_quit(12);
	sr_check_config cfg = { .dirs = ptrs,
				.n_dirs = h.n_dirs,
				.network_off = h.network_off != 0,
				.rules_off = h.rules_off,
				.allow = ptrs + h.n_dirs,
				.n_allow = h.n_allow };
	sr_arena a;
	sr_arena_init_fixed(&a, mem + head, h.memory_bytes);
	sr_checker_run(code, h.code_len, &cfg, &a, out);
	sr_confine_exit(out, SR_CHECK_OUT_SIZE(out->n));
}

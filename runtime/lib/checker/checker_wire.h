/* What the library sends the confined checker program (saferun-check,
 * runtime/checker/main.c) on its fd 0: this header, then the strings (the
 * dirs, then the allow entries, each NUL-terminated), then the code. Its
 * answer on fd 1 is an sr_check_out (checker_rules.h) of
 * SR_CHECK_OUT_SIZE(n) bytes. Plain data both ways: the program and the
 * library are built from the same tree and embedded together. */
#ifndef SR_CHECKER_WIRE_H
#define SR_CHECKER_WIRE_H

#include <stdint.h>

#define SR_CHECK_WIRE_MAGIC       0x57435253u /* "SRCW" */
#define SR_CHECK_WIRE_MAX_DIRS    40
#define SR_CHECK_WIRE_MAX_ALLOW   256
#define SR_CHECK_WIRE_MAX_STRINGS (1u << 20)
#define SR_CHECK_WIRE_MAX_MEMORY  (16ull << 30)

typedef struct sr_check_wire {
	uint32_t magic;
	uint32_t rules_off; /* bit per enum sr_rule */
	uint32_t network_off;
	uint32_t n_dirs, n_allow;
	uint32_t strings_len;
	uint64_t code_len;     /* at most SR_MAX_CODE_BYTES */
	uint64_t memory_bytes; /* the checker's arena */
	uint64_t timeout_ms;   /* its RLIMIT_CPU; the library's deadline is the bound */
} sr_check_wire;

#endif

/* The checker's rules: ids, names, what each flags (tables of dangerous
 * modules, members, attributes, file APIs, paths) and the findings list
 * with its allow list. */
#ifndef SR_CHECKER_RULES_H
#define SR_CHECKER_RULES_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "saferun.h"

enum sr_rule {
	SR_R_SYNTAX,
	SR_R_ENCODING,
	SR_R_PROCESS,
	SR_R_NATIVE,
	SR_R_NETWORK,
	SR_R_DYNIMPORT,
	SR_R_DESER,
	SR_R_TAMPER,
	SR_R_EVAL,
	SR_R_NAMESPACE,
	SR_R_REFLECT,
	SR_R_INTROSPECT,
	SR_R_FORMAT,
	SR_R_PATH,
	SR_R_COUNT,
};

typedef struct sr_check_config {
	const char *const *dirs; /* where the code may use files: workdir first */
	size_t n_dirs;
	bool network_off;
	uint32_t rules_off;       /* bit per enum sr_rule */
	const char *const *allow; /* rule ids, rule names or flagged names */
	size_t n_allow;
} sr_check_config;

#define SR_CHECK_MAGIC 0x53524348u

/* Plain data, so the confined checker can write it down a pipe. */
typedef struct sr_check_out {
	uint32_t magic;
	int32_t status; /* 0, or -2: out of memory */
	uint32_t n, n_allowed;
	uint32_t truncated;
	sr_finding f[SR_CHECK_MAX_FINDINGS];
} sr_check_out;

/* The bytes of an sr_check_out with n findings: only those are cleared,
 * filled and copied out of the confined child. */
#define SR_CHECK_OUT_SIZE(n) (offsetof(sr_check_out, f) + (size_t)(n) * sizeof(sr_finding))

extern const sr_check_rule sr_rule_table[SR_R_COUNT];

/* The rule with this id ("SR101") or name ("process"), or -1. */
int sr_rule_find(const char *id_or_name);

/* Record a finding unless its rule is off or the allow list relaxes it;
 * one per rule and line (a longer, more specific name replaces the one
 * there). The message is "`name` " followed by the formatted text. */
void sr_finding_add(sr_check_out *out, const sr_check_config *cfg, int rule, const char *name,
		    uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* The rule a qualified name ("os.system") breaks, or -1. */
int sr_rule_for_name(const char *q, bool network_off);
/* The advice for a rule: what to do instead. */
const char *sr_rule_advice(int rule);
/* An attribute that walks interpreter internals (__globals__, f_back). */
bool sr_is_internal_attr(const char *name);
/* A function that takes paths (open, os.remove, pandas.read_csv). */
bool sr_is_file_api(const char *q);
/* A method that takes a path whatever its object (df.to_csv). */
bool sr_is_file_method(const char *name);
/* What is wrong with a path literal (or its known prefix), or NULL. */
const char *sr_path_problem(const char *path, bool complete, const sr_check_config *cfg, int *rule);
/* The name as users write it: "eval" for builtins.eval. */
const char *sr_display_name(const char *q);

#endif

/* What names and attribute chains refer to: `o = os; o.system` is
 * os.system, `getattr(__import__("o" + "s"), "system")` too. Values are
 * dotted paths from a module ("os.system", "builtins.eval"); a chain
 * that leaves what can be known statically is unknown. */
#ifndef SR_CHECKER_RESOLVE_H
#define SR_CHECKER_RESOLVE_H

#include "checker_parse.h"

#define SR_QMAX     160
#define SR_VALS_MAX 4

enum sr_val_kind {
	SR_V_UNKNOWN = 0,
	SR_V_QUAL,    /* q: a dotted path from a module */
	SR_V_GLOBALS, /* the module's namespace: globals(), locals(), vars() */
	SR_V_GETTER,  /* q's .get / .__getitem__: a namespace read by key */
};

typedef struct sr_val {
	uint8_t kind;
	char q[SR_QMAX];
} sr_val;

typedef struct sr_vals {
	uint8_t n;
	sr_val v[SR_VALS_MAX];
} sr_vals;

enum sr_step_kind { SR_STEP_NAME, SR_STEP_ATTR, SR_STEP_CALL, SR_STEP_SUBSCRIPT };

typedef struct sr_step {
	uint8_t kind;
	uint8_t store;       /* the chain is assigned to, and this is its last step */
	uint32_t tok;        /* the name, the attribute's name, the '(' or '[' */
	uint32_t close;      /* CALL, SUBSCRIPT: the ')' or ']' */
	uint32_t chain;      /* the chain's first token */
	const sr_vals *base; /* the value before the step (not for NAME) */
	const sr_vals *val;  /* the value after it */
} sr_step;

typedef void (*sr_step_fn)(void *ctx, const sr_step *st);

/* Set up p->memo, the resolver's memo of names' values, after sr_parse.
 * Returns 0, or -2 when the arena is exhausted. */
int sr_resolve_init(sr_program *p);

/* Evaluate the chain starting at token i (a name, a string or a
 * parenthesized expression, then .attr, (args) and [key] trailers),
 * calling fn (if not NULL) for each step. Returns the index after it. */
uint32_t sr_resolve_chain(const sr_program *p, uint32_t i, sr_step_fn fn, void *ctx, sr_vals *out);

/* Fold a constant string expression in [a, b): literals, implicit and
 * "+" concatenation, parentheses, f-strings up to their first field, and
 * the literal head of "..." % x and "...".format(x). Returns 1 when the
 * whole value is known, 0 when only a prefix is, -1 when it is not a
 * string; buf gets up to cap - 1 bytes, NUL-terminated. */
int sr_fold_string(const sr_program *p, uint32_t a, uint32_t b, char *buf, size_t cap);

/* Positional argument k of the call whose '(' is at open, or the keyword
 * argument kw (when not NULL): its value's token range. Returns 0 or -1. */
int sr_call_arg(const sr_program *p, uint32_t open, int k, const char *kw, uint32_t *a,
		uint32_t *b);
/* The number of arguments (positional and keyword). */
int sr_call_nargs(const sr_program *p, uint32_t open);

/* q with its first component canonical (posix.system is os.system). */
void sr_canonical(const char *q, char *out, size_t cap);

/* The index after token j, jumping over a bracketed group. */
uint32_t sr_skip(const sr_program *p, uint32_t j);

#endif

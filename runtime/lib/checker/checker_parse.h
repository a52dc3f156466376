/* Enough of a Python parser for the rules: statements, scopes (module,
 * function, class, lambda, comprehension) and the bindings of names
 * (imports, assignments, for/with/except targets, parameters, walrus,
 * match captures, global/nonlocal/del), and the role of each token. */
#ifndef SR_CHECKER_PARSE_H
#define SR_CHECKER_PARSE_H

#include "checker_tok.h"

enum sr_role {
	SR_ROLE_NONE = 0,
	SR_ROLE_BIND,      /* a name being bound: not a reference */
	SR_ROLE_KWARG,     /* a keyword argument's name */
	SR_ROLE_IMPORT,    /* part of an import statement */
	SR_ROLE_DOCSTRING, /* a string that is a whole statement */
	SR_ROLE_STORE,     /* the first token of an attribute/subscript target */
};

enum sr_bind_kind {
	SR_B_IMPORT, /* qual: the module or member it names */
	SR_B_VALUE,  /* the value tokens [vstart, vend), element elem */
	SR_B_OPAQUE, /* a def, class, parameter, loop variable, ... */
	SR_B_GLOBAL, /* declared global (or nonlocal) here */
	SR_B_DEL,    /* deleted here */
	SR_B_STAR,   /* from qual import * */
};

enum sr_scope_kind { SR_S_MODULE, SR_S_FUNCTION, SR_S_CLASS, SR_S_COMPREHENSION };

typedef struct sr_binding {
	const char *name;     /* interned; NULL for SR_B_STAR */
	const char *qual;     /* SR_B_IMPORT, SR_B_STAR */
	const char *imported; /* SR_B_IMPORT: the full dotted path imported */
	uint32_t scope, eval_scope;
	uint32_t vstart, vend, elem;
	uint32_t tok;  /* where it is bound */
	uint32_t next; /* the next binding of this name in this scope */
	uint8_t kind;
	uint8_t conditional; /* inside an if/for/while/try/with/function body */
	uint8_t param;       /* SR_B_VALUE: a parameter and its default */
} sr_binding;

typedef struct sr_scope {
	uint32_t parent;
	uint8_t kind;
} sr_scope;

typedef struct sr_program {
	const char *src;
	sr_tokens toks;
	sr_scope *scopes;
	uint32_t n_scopes, cap_scopes;
	sr_binding *binds;
	uint32_t n_binds, cap_binds;
	uint32_t *table; /* (scope, name) -> first binding, open addressing */
	uint32_t table_cap;
	uint8_t has_nonlocal; /* a nonlocal statement somewhere */
	sr_arena *arena;
	struct sr_memo *memo; /* the resolver's memo of names' values (checker_resolve.c) */
} sr_program;

/* Parse the tokens in p->toks (p->src and p->arena set). Returns 0, or -2
 * when the arena is exhausted. */
int sr_parse(sr_program *p);

/* The first binding of name in scope, or SR_NO_MATCH. */
uint32_t sr_parse_lookup(const sr_program *p, uint32_t scope, const char *name);

#endif

/* Statements, scopes and bindings over the token array (checker_parse.h).
 * No syntax tree: each statement is a token range, split at the
 * top-level commas, '=', ':', 'in' and 'as' that matter, with brackets
 * skipped through their precomputed partners. */
#include "checker_parse.h"

#include <stdio.h>
#include <string.h>

#define MAXBLOCKS 128

struct block {
	uint32_t scope;
	uint8_t cond;  /* a body of if/for/while/try/with/match */
	uint8_t match; /* holds case clauses */
};

typedef struct parser {
	sr_program *p;
	sr_token *t;
	uint32_t n;
	uint32_t cur;
	uint8_t cond;
	struct block blocks[MAXBLOCKS];
	int n_blocks;
	uint32_t pending; /* body scope of the last header, for its INDENT */
	uint8_t pending_cond, pending_match;
	int oom;
} parser;

/* ---- tokens --------------------------------------------------------------- */

static int is_open(const sr_token *t)
{
	return t->match != SR_NO_MATCH &&
	       (t->type == SR_T_FSTART ||
		(t->type == SR_T_OP && t->len == 1 && strchr("([{", t->text[0])));
}

static int is_close(const sr_token *t)
{
	return t->type == SR_T_OP && t->len == 1 && strchr(")]}", t->text[0]);
}

static int is_name(const sr_token *t)
{
	return t->type == SR_T_NAME && !sr_tok_is_keyword(t);
}

static int ends_stmt(const sr_token *t)
{
	return t->type == SR_T_NEWLINE || t->type == SR_T_END || sr_tok_op(t, ";");
}

/* The index after token j, jumping over a bracketed group. */
static uint32_t skip(const parser *ps, uint32_t j)
{
	return is_open(&ps->t[j]) && ps->t[j].match > j ? ps->t[j].match + 1 : j + 1;
}

static uint32_t stmt_end(const parser *ps, uint32_t i)
{
	while (i < ps->n && !ends_stmt(&ps->t[i]))
		i = skip(ps, i);
	return i < ps->n ? i : ps->n - 1;
}

/* The ':' of a lambda starting at j (the 'lambda' token), or end. */
static uint32_t lambda_colon(const parser *ps, uint32_t j, uint32_t end)
{
	for (j++; j < end && !sr_tok_op(&ps->t[j], ":"); j = skip(ps, j))
		;
	return j;
}

/* The first top-level token in [a, end) satisfying pred, skipping
 * brackets and lambda parameters; end if none. */
static uint32_t find_top(const parser *ps, uint32_t a, uint32_t end, int (*pred)(const sr_token *))
{
	for (uint32_t j = a; j < end;) {
		if (sr_tok_kw(&ps->t[j], "lambda")) {
			j = lambda_colon(ps, j, end) + 1;
			continue;
		}
		if (pred(&ps->t[j]))
			return j;
		j = skip(ps, j);
	}
	return end;
}

static int is_colon(const sr_token *t)
{
	return sr_tok_op(t, ":");
}
static int is_comma(const sr_token *t)
{
	return sr_tok_op(t, ",");
}
static int is_in(const sr_token *t)
{
	return sr_tok_kw(t, "in");
}
static int is_as(const sr_token *t)
{
	return sr_tok_kw(t, "as");
}
static int is_for(const sr_token *t)
{
	return sr_tok_kw(t, "for");
}
static int is_if(const sr_token *t)
{
	return sr_tok_kw(t, "if");
}
static int is_eq(const sr_token *t)
{
	return sr_tok_op(t, "=");
}

static int is_augassign(const sr_token *t)
{
	static const char *const ops[] = { "+=",  "-=",  "*=", "/=", "//=", "%=", "**=",
					   ">>=", "<<=", "&=", "^=", "|=",  "@=", NULL };
	for (const char *const *o = ops; *o; o++)
		if (sr_tok_op(t, *o))
			return 1;
	return 0;
}

static void mark_scope(parser *ps, uint32_t a, uint32_t b, uint32_t scope)
{
	for (uint32_t j = a; j < b && j < ps->n; j++)
		ps->t[j].scope = scope;
}

/* ---- scopes and bindings --------------------------------------------------- */

static uint32_t new_scope(parser *ps, uint32_t parent, uint8_t kind)
{
	sr_program *p = ps->p;
	if (p->n_scopes == p->cap_scopes) {
		ps->oom = 1;
		return parent;
	}
	p->scopes[p->n_scopes] = (sr_scope){ parent, kind };
	return p->n_scopes++;
}

static uint32_t slot_of(const sr_program *p, uint32_t scope, const char *name)
{
	uint64_t h = ((uint64_t)(uintptr_t)name >> 3) * 0x9E3779B97F4A7C15ull ^ scope * 0xC2B2AE3Du;
	return (uint32_t)(h >> 17) & (p->table_cap - 1);
}

uint32_t sr_parse_lookup(const sr_program *p, uint32_t scope, const char *name)
{
	for (uint32_t s = slot_of(p, scope, name);; s = (s + 1) & (p->table_cap - 1)) {
		uint32_t b = p->table[s];
		if (b == SR_NO_MATCH)
			return SR_NO_MATCH;
		if (p->binds[b].scope == scope && p->binds[b].name == name)
			return b;
	}
}

static int declared_global(const sr_program *p, uint32_t scope, const char *name)
{
	for (uint32_t b = sr_parse_lookup(p, scope, name); b != SR_NO_MATCH; b = p->binds[b].next)
		if (p->binds[b].kind == SR_B_GLOBAL)
			return 1;
	return 0;
}

static sr_binding *bind(parser *ps, uint32_t tok, uint32_t scope, uint8_t kind)
{
	sr_program *p = ps->p;
	const char *name = kind == SR_B_STAR ? NULL : ps->t[tok].text;
	uint8_t cond = ps->cond || p->scopes[scope].kind == SR_S_FUNCTION;
	if (kind != SR_B_GLOBAL && name && scope != 0 && declared_global(p, scope, name)) {
		scope = 0; /* global x; x = ... binds the module's x */
		cond = 1;
	}
	if (p->n_binds == p->cap_binds) {
		ps->oom = 1;
		return NULL;
	}
	uint32_t idx = p->n_binds++;
	sr_binding *b = &p->binds[idx];
	*b = (sr_binding){ .name = name,
			   .scope = scope,
			   .eval_scope = scope,
			   .elem = SR_NO_MATCH,
			   .tok = tok,
			   .next = SR_NO_MATCH,
			   .kind = kind,
			   .conditional = cond };
	uint32_t s = slot_of(p, scope, name);
	for (;; s = (s + 1) & (p->table_cap - 1)) {
		uint32_t o = p->table[s];
		if (o == SR_NO_MATCH) {
			p->table[s] = idx;
			break;
		}
		if (p->binds[o].scope == scope && p->binds[o].name == name) {
			while (p->binds[o].next != SR_NO_MATCH)
				o = p->binds[o].next;
			p->binds[o].next = idx;
			break;
		}
	}
	if (kind != SR_B_STAR)
		ps->t[tok].role = SR_ROLE_BIND;
	return b;
}

static sr_binding *bind_value(parser *ps, uint32_t tok, uint32_t scope, uint32_t vs, uint32_t ve,
			      uint32_t elem, uint32_t eval_scope)
{
	sr_binding *b = bind(ps, tok, scope, SR_B_VALUE);
	if (b) {
		b->vstart = vs;
		b->vend = ve;
		b->elem = elem;
		b->eval_scope = eval_scope;
	}
	return b;
}

/* ---- expressions ------------------------------------------------------------------ */

static void expr(parser *ps, uint32_t a, uint32_t b, uint32_t scope);

static uint32_t function_scope(const sr_program *p, uint32_t scope)
{
	while (scope && p->scopes[scope].kind == SR_S_COMPREHENSION)
		scope = p->scopes[scope].parent;
	return scope;
}

/* Parameters in [a, b): names bound in fscope, defaults and annotations
 * evaluated in outer. */
static void params(parser *ps, uint32_t a, uint32_t b, uint32_t fscope, uint32_t outer)
{
	for (uint32_t j = a; j < b;) {
		uint32_t e = find_top(ps, j, b, is_comma);
		uint32_t k = j;
		while (k < e && (sr_tok_op(&ps->t[k], "*") || sr_tok_op(&ps->t[k], "**")))
			k++;
		if (k < e && is_name(&ps->t[k])) {
			uint32_t eq = find_top(ps, k + 1, e, is_eq);
			uint32_t colon = find_top(ps, k + 1, eq, is_colon);
			if (colon < eq)
				expr(ps, colon + 1, eq, outer);
			if (eq < e) {
				expr(ps, eq + 1, e, outer);
				sr_binding *d =
				    bind_value(ps, k, fscope, eq + 1, e, SR_NO_MATCH, outer);
				if (d)
					d->param = 1; /* its value is only the default */
			} else {
				bind(ps, k, fscope, SR_B_OPAQUE);
			}
			ps->t[k].scope = fscope;
		}
		j = e + 1;
	}
}

/* lambda at j inside [j, b): returns the index after its body. */
static uint32_t lambda(parser *ps, uint32_t j, uint32_t b, uint32_t scope)
{
	uint32_t L = new_scope(ps, scope, SR_S_FUNCTION);
	uint32_t c = lambda_colon(ps, j, b);
	params(ps, j + 1, c, L, scope);
	uint32_t e = c + 1;
	while (e < b && !sr_tok_op(&ps->t[e], ",") && !is_for(&ps->t[e]) && !ends_stmt(&ps->t[e]))
		e = skip(ps, e);
	if (c + 1 < e)
		expr(ps, c + 1, e, L);
	return e;
}

/* Names of a target list in [a, b): each becomes an opaque binding. */
static void bind_names(parser *ps, uint32_t a, uint32_t b, uint32_t scope)
{
	for (uint32_t j = a; j < b; j++)
		if (is_name(&ps->t[j]) && (j == a || !sr_tok_op(&ps->t[j - 1], ".")) &&
		    !(j + 1 < b &&
		      (sr_tok_op(&ps->t[j + 1], ".") || sr_tok_op(&ps->t[j + 1], "["))))
			bind(ps, j, scope, SR_B_OPAQUE);
}

/* A comprehension in the brackets open..close: its own scope, for which
 * every 'for' binds targets. */
static void comprehension(parser *ps, uint32_t open, uint32_t close, uint32_t scope)
{
	uint32_t C = new_scope(ps, scope, SR_S_COMPREHENSION);
	for (uint32_t j = open + 1; j < close;) {
		uint32_t f = find_top(ps, j, close, is_for);
		if (f == close)
			break;
		uint32_t in = find_top(ps, f + 1, close, is_in);
		bind_names(ps, f + 1, in, C);
		j = in + 1;
	}
	expr(ps, open + 1, close, C);
	ps->t[open].scope = ps->t[close].scope = scope;
}

static int is_call_paren(const parser *ps, uint32_t j)
{
	if (j == 0)
		return 0;
	const sr_token *prev = &ps->t[j - 1];
	return is_name(prev) || sr_tok_op(prev, ")") || sr_tok_op(prev, "]") ||
	       prev->type == SR_T_STRING || prev->type == SR_T_FEND;
}

static void mark_kwargs(parser *ps, uint32_t open, uint32_t close)
{
	for (uint32_t j = open + 1; j < close; j = skip(ps, j))
		if (is_name(&ps->t[j]) && sr_tok_op(&ps->t[j + 1], "=") &&
		    (sr_tok_op(&ps->t[j - 1], "(") || sr_tok_op(&ps->t[j - 1], ",")))
			ps->t[j].role = SR_ROLE_KWARG;
}

static void expr(parser *ps, uint32_t a, uint32_t b, uint32_t scope)
{
	for (uint32_t j = a; j < b && j < ps->n; j++) {
		sr_token *t = &ps->t[j];
		t->scope = scope;
		if (sr_tok_kw(t, "lambda")) {
			j = lambda(ps, j, b, scope) - 1;
		} else if (is_name(t) && j + 1 < b && sr_tok_op(&ps->t[j + 1], ":=")) {
			uint32_t e = j + 2;
			while (e < b && !sr_tok_op(&ps->t[e], ",") && !ends_stmt(&ps->t[e]) &&
			       !is_close(&ps->t[e]))
				e = skip(ps, e);
			bind_value(ps, j, function_scope(ps->p, scope), j + 2, e, SR_NO_MATCH,
				   scope);
		} else if (is_open(t) && t->type == SR_T_OP && t->match > j && t->match <= b) {
			if (t->text[0] != '{' || !(t->flags & SR_TF_FBRACE)) {
				if (find_top(ps, j + 1, t->match, is_for) < t->match) {
					comprehension(ps, j, t->match, scope);
					j = t->match;
					continue;
				}
			}
			if (t->text[0] == '(' && is_call_paren(ps, j))
				mark_kwargs(ps, j, t->match);
		}
	}
}

/* ---- targets --------------------------------------------------------------------- */

/* Split [a, b) at top-level commas into at most max elements; returns the
 * count (which may exceed max). */
static uint32_t split(const parser *ps, uint32_t a, uint32_t b, uint32_t *starts, uint32_t max)
{
	uint32_t n = 0;
	if (a >= b)
		return 0;
	for (uint32_t j = a;;) {
		if (n < max)
			starts[n] = j;
		n++;
		uint32_t e = find_top(ps, j, b, is_comma);
		if (e >= b || e + 1 >= b)
			return n;
		j = e + 1;
	}
}

#define MAXELEMS 16

/* Assignment targets [a, b) = value [vs, ve). */
static void targets(parser *ps, uint32_t a, uint32_t b, uint32_t vs, uint32_t ve, int opaque)
{
	sr_token *t = ps->t;
	if (a >= b)
		return;
	if ((sr_tok_op(&t[a], "(") || sr_tok_op(&t[a], "[")) && t[a].match == b - 1) {
		targets(ps, a + 1, b - 1, vs, ve, 1);
		return;
	}
	uint32_t el[MAXELEMS], ve_el[MAXELEMS];
	uint32_t n = split(ps, a, b, el, MAXELEMS);
	if (n == 1) {
		if (b - a == 1 && is_name(&t[a])) {
			if (opaque)
				bind(ps, a, ps->cur, SR_B_OPAQUE);
			else
				bind_value(ps, a, ps->cur, vs, ve, SR_NO_MATCH, ps->cur);
		} else if (sr_tok_op(&t[a], "*")) {
			bind_names(ps, a + 1, b, ps->cur);
		} else if (is_name(&t[a])) {
			t[a].role = SR_ROLE_STORE;
			expr(ps, a, b, ps->cur);
		}
		return;
	}
	uint32_t nv = opaque ? 0 : split(ps, vs, ve, ve_el, MAXELEMS);
	for (uint32_t k = 0; k < n && k < MAXELEMS; k++) {
		uint32_t e = find_top(ps, el[k], b, is_comma);
		if (e - el[k] == 1 && is_name(&t[el[k]]) && nv == n)
			bind_value(ps, el[k], ps->cur, vs, ve, k, ps->cur);
		else
			targets(ps, el[k], e, 0, 0, 1);
	}
}

/* ---- statements ------------------------------------------------------------------- */

static uint32_t statement(parser *ps, uint32_t i);

/* The body after the header's colon c: a block (its INDENT opens scope)
 * or simple statements on the same line. Returns the next index. */
static uint32_t body(parser *ps, uint32_t c, uint32_t scope, uint8_t cond, uint8_t match)
{
	if (c + 1 >= ps->n || ps->t[c + 1].type == SR_T_NEWLINE || ps->t[c + 1].type == SR_T_END) {
		ps->pending = scope;
		ps->pending_cond = cond;
		ps->pending_match = match;
		return c + 1;
	}
	uint32_t save = ps->cur;
	uint8_t save_cond = ps->cond;
	ps->cur = scope;
	ps->cond = cond;
	uint32_t j = c + 1;
	for (;;) {
		uint32_t e = stmt_end(ps, j), next = statement(ps, j);
		/* A compound statement here (not Python, but the checker sees
		 * it) parsed the rest of the line as its own body: going on
		 * past its first ';' would parse that rest again, once more per
		 * nested header, exponentially (found by fuzz_checker). */
		if (next > e + 1) {
			j = next;
			break;
		}
		if (!sr_tok_op(&ps->t[e], ";") || e + 1 >= ps->n) {
			j = e; /* the NEWLINE, for the caller */
			break;
		}
		j = e + 1;
	}
	ps->cur = save;
	ps->cond = save_cond;
	return j;
}

static uint32_t header_colon(const parser *ps, uint32_t i)
{
	uint32_t end = stmt_end(ps, i);
	return find_top(ps, i, end, is_colon);
}

/* A dotted name at j: returns its text joined with dots in the arena
 * (prefix prepended), and the index after it. */
static const char *dotted(parser *ps, uint32_t *j, const char *prefix)
{
	char buf[512];
	size_t n = strlen(prefix);
	if (n >= sizeof buf)
		return NULL;
	memcpy(buf, prefix, n);
	while (*j < ps->n && is_name(&ps->t[*j])) {
		const sr_token *t = &ps->t[*j];
		if (n + t->text_len + 2 >= sizeof buf)
			return NULL;
		if (n && buf[n - 1] != '.')
			buf[n++] = '.';
		memcpy(buf + n, t->text, t->text_len);
		n += t->text_len;
		ps->t[*j].role = SR_ROLE_IMPORT;
		if (*j + 2 < ps->n && sr_tok_op(&ps->t[*j + 1], ".") && is_name(&ps->t[*j + 2]))
			*j += 2;
		else
			break;
	}
	(*j)++;
	char *s = sr_arena_alloc(ps->p->arena, n + 1);
	if (!s) {
		ps->oom = 1;
		return NULL;
	}
	memcpy(s, buf, n);
	return s;
}

static const char *first_component(parser *ps, const char *path)
{
	size_t n = strcspn(path, ".");
	char *s = sr_arena_alloc(ps->p->arena, n + 1);
	if (!s) {
		ps->oom = 1;
		return path;
	}
	memcpy(s, path, n);
	return s;
}

static void bind_import(parser *ps, uint32_t tok, const char *qual, const char *imported)
{
	sr_binding *b = bind(ps, tok, ps->cur, SR_B_IMPORT);
	if (b) {
		b->qual = qual;
		b->imported = imported;
	}
	ps->t[tok].role = SR_ROLE_IMPORT;
}

/* import a.b.c [as d], ... */
static void import_stmt(parser *ps, uint32_t i, uint32_t end)
{
	for (uint32_t j = i + 1; j < end;) {
		uint32_t first = j;
		const char *path = dotted(ps, &j, "");
		if (!path)
			return;
		if (j < end && is_as(&ps->t[j]) && is_name(&ps->t[j + 1])) {
			bind_import(ps, j + 1, path, path);
			j += 2;
		} else {
			bind_import(ps, first, first_component(ps, path), path);
		}
		while (j < end && !sr_tok_op(&ps->t[j], ","))
			j++;
		j++;
	}
}

/* from [.]*a.b import (x [as y], ... | *) */
static void from_stmt(parser *ps, uint32_t i, uint32_t end)
{
	char prefix[64] = "";
	size_t dots = 0;
	uint32_t j = i + 1;
	for (; j < end && (sr_tok_op(&ps->t[j], ".") || sr_tok_op(&ps->t[j], "...")); j++)
		dots += ps->t[j].len;
	memset(prefix, '.', dots < sizeof prefix - 1 ? dots : sizeof prefix - 1);
	const char *mod = sr_tok_kw(&ps->t[j], "import") ? prefix : dotted(ps, &j, prefix);
	if (!mod || !sr_tok_kw(&ps->t[j], "import"))
		return;
	ps->t[j++].role = SR_ROLE_IMPORT;
	for (; j < end; j++) {
		sr_token *t = &ps->t[j];
		t->role = SR_ROLE_IMPORT;
		if (sr_tok_op(t, "*") && !dots && mod != prefix) { /* prefix: a stack buffer */
			sr_binding *b = bind(ps, j, ps->cur, SR_B_STAR);
			if (b)
				b->qual = b->imported = mod;
		} else if (is_name(t)) {
			char buf[512];
			int n = snprintf(buf, sizeof buf, "%s%s%s", mod,
					 *mod && mod[strlen(mod) - 1] != '.' ? "." : "", t->text);
			char *q = n > 0 && (size_t)n < sizeof buf
				      ? sr_arena_alloc(ps->p->arena, (size_t)n + 1)
				      : NULL;
			if (!q) {
				ps->oom = 1;
				return;
			}
			memcpy(q, buf, (size_t)n);
			uint32_t at = j;
			if (j + 2 < end && is_as(&ps->t[j + 1]) && is_name(&ps->t[j + 2]))
				at = j += 2;
			bind_import(ps, at, q, q);
		}
	}
}

static void def_stmt(parser *ps, uint32_t i, uint32_t *next)
{
	uint32_t c = header_colon(ps, i);
	uint32_t F = new_scope(ps, ps->cur, SR_S_FUNCTION);
	uint32_t j = i + 1;
	if (is_name(&ps->t[j]))
		bind(ps, j++, ps->cur, SR_B_OPAQUE);
	if (sr_tok_op(&ps->t[j], "["))
		j = skip(ps, j);
	if (sr_tok_op(&ps->t[j], "(") && ps->t[j].match < c) {
		params(ps, j + 1, ps->t[j].match, F, ps->cur);
		j = ps->t[j].match + 1;
	}
	if (j < c)
		expr(ps, j, c, ps->cur);
	*next = body(ps, c, F, 0, 0);
}

static void class_stmt(parser *ps, uint32_t i, uint32_t *next)
{
	uint32_t c = header_colon(ps, i);
	uint32_t C = new_scope(ps, ps->cur, SR_S_CLASS);
	if (is_name(&ps->t[i + 1]))
		bind(ps, i + 1, ps->cur, SR_B_OPAQUE);
	if (i + 2 < c)
		expr(ps, i + 2, c, ps->cur);
	*next = body(ps, c, C, 0, 0);
}

static void for_stmt(parser *ps, uint32_t i, uint32_t *next)
{
	uint32_t c = header_colon(ps, i);
	uint32_t in = find_top(ps, i + 1, c, is_in);
	const sr_token *it = &ps->t[in + 1];
	if (in == i + 2 && is_name(&ps->t[i + 1]) && (sr_tok_op(it, "[") || sr_tok_op(it, "(")) &&
	    it->match == c - 1) {
		/* for m in [os, sys]: each element is a value of m */
		uint32_t el[MAXELEMS];
		uint32_t n = split(ps, in + 2, c - 1, el, MAXELEMS);
		for (uint32_t k = 0; k < n && k < MAXELEMS; k++)
			bind_value(ps, i + 1, ps->cur, el[k], find_top(ps, el[k], c - 1, is_comma),
				   SR_NO_MATCH, ps->cur);
		if (n > MAXELEMS || n == 0)
			bind(ps, i + 1, ps->cur, SR_B_OPAQUE);
	} else {
		targets(ps, i + 1, in, 0, 0, 1);
	}
	expr(ps, in + 1, c, ps->cur);
	*next = body(ps, c, ps->cur, 1, 0);
}

static void with_stmt(parser *ps, uint32_t i, uint32_t *next)
{
	uint32_t c = header_colon(ps, i), a = i + 1, b = c;
	if (sr_tok_op(&ps->t[a], "(") && ps->t[a].match == c - 1) {
		a++;
		b--;
	}
	for (uint32_t j = a; j < b;) {
		uint32_t e = find_top(ps, j, b, is_comma);
		uint32_t as = find_top(ps, j, e, is_as);
		expr(ps, j, as, ps->cur);
		if (as < e)
			targets(ps, as + 1, e, 0, 0, 1);
		j = e + 1;
	}
	*next = body(ps, c, ps->cur, 1, 0);
}

/* A case pattern: bare names capture (bind), dotted names are values. */
static void pattern(parser *ps, uint32_t a, uint32_t b)
{
	for (uint32_t j = a; j < b; j++) {
		sr_token *t = &ps->t[j];
		t->scope = ps->cur;
		if (!is_name(t) || sr_tok_streq(t, "_") || sr_tok_op(&ps->t[j - 1], "."))
			continue;
		const sr_token *nx = &ps->t[j + 1];
		if (!sr_tok_op(nx, ".") && !sr_tok_op(nx, "(") && !sr_tok_op(nx, "="))
			bind(ps, j, ps->cur, SR_B_OPAQUE);
		else if (sr_tok_op(nx, "="))
			t->role = SR_ROLE_KWARG;
	}
}

static int in_match_block(const parser *ps)
{
	return ps->n_blocks > 0 && ps->blocks[ps->n_blocks - 1].match;
}

/* Assignments (plain, chained, annotated, augmented) and expressions. */
static void simple_stmt(parser *ps, uint32_t i, uint32_t end)
{
	uint32_t eqs[MAXELEMS], n_eq = 0, aug = end, ann = end;
	for (uint32_t j = i; j < end;) {
		const sr_token *t = &ps->t[j];
		if (sr_tok_kw(t, "lambda")) {
			j = lambda_colon(ps, j, end) + 1;
			continue;
		}
		if (is_eq(t) && n_eq < MAXELEMS)
			eqs[n_eq++] = j;
		else if (is_augassign(t) && aug == end && !n_eq)
			aug = j;
		else if (is_colon(t) && ann == end && !n_eq)
			ann = j;
		j = skip(ps, j);
	}
	if (aug < end) {
		targets(ps, i, aug, 0, 0, 1);
		expr(ps, aug + 1, end, ps->cur);
	} else if (n_eq) {
		uint32_t vs = eqs[n_eq - 1] + 1;
		for (uint32_t k = 0, s = i; k < n_eq; s = eqs[k] + 1, k++)
			targets(ps, s, k == 0 && ann < eqs[0] ? ann : eqs[k], vs, end, 0);
		if (ann < eqs[0])
			expr(ps, ann + 1, eqs[0], ps->cur);
		expr(ps, vs, end, ps->cur);
	} else {
		int strings = 1;
		for (uint32_t j = i; j < end; j++)
			strings &= ps->t[j].type == SR_T_STRING;
		for (uint32_t j = i; strings && j < end; j++)
			ps->t[j].role = SR_ROLE_DOCSTRING;
		expr(ps, i, ann < end ? ann : end, ps->cur);
		if (ann < end)
			expr(ps, ann + 1, end, ps->cur);
	}
}

static void names_stmt(parser *ps, uint32_t i, uint32_t end, uint8_t kind)
{
	for (uint32_t j = i + 1; j < end; j++)
		if (is_name(&ps->t[j]))
			bind(ps, j, ps->cur, kind);
}

static int compound(parser *ps, uint32_t i, uint32_t *next)
{
	sr_token *t = &ps->t[i];
	if (sr_tok_kw(t, "async") && i + 1 < ps->n)
		t = &ps->t[++i];
	if (sr_tok_kw(t, "def"))
		def_stmt(ps, i, next);
	else if (sr_tok_kw(t, "class"))
		class_stmt(ps, i, next);
	else if (sr_tok_kw(t, "for"))
		for_stmt(ps, i, next);
	else if (sr_tok_kw(t, "with"))
		with_stmt(ps, i, next);
	else
		return 0;
	return 1;
}

static int conditional_header(parser *ps, uint32_t i, uint32_t end, uint32_t *next)
{
	sr_token *t = &ps->t[i];
	uint32_t c = header_colon(ps, i);
	if (c >= end)
		return 0;
	if (sr_tok_kw(t, "if") || sr_tok_kw(t, "elif") || sr_tok_kw(t, "while")) {
		expr(ps, i + 1, c, ps->cur);
	} else if (sr_tok_kw(t, "else") || sr_tok_kw(t, "try") || sr_tok_kw(t, "finally")) {
	} else if (sr_tok_kw(t, "except")) {
		uint32_t as = find_top(ps, i + 1, c, is_as);
		expr(ps, i + 1, as, ps->cur);
		if (as < c)
			targets(ps, as + 1, c, 0, 0, 1);
	} else if (sr_tok_streq(t, "match") && c > i + 1 && ps->t[c + 1].type == SR_T_NEWLINE &&
		   !sr_tok_op(&ps->t[i + 1], "=") && !sr_tok_op(&ps->t[i + 1], ".")) {
		expr(ps, i + 1, c, ps->cur);
		*next = body(ps, c, ps->cur, 1, 1);
		return 1;
	} else if (sr_tok_streq(t, "case") && in_match_block(ps) && c > i + 1) {
		uint32_t g = find_top(ps, i + 1, c, is_if);
		pattern(ps, i + 1, g);
		if (g < c)
			expr(ps, g + 1, c, ps->cur);
	} else {
		return 0;
	}
	*next = body(ps, c, ps->cur, 1, 0);
	return 1;
}

static uint32_t statement(parser *ps, uint32_t i)
{
	uint32_t end = stmt_end(ps, i), next = end + 1;
	sr_token *t = &ps->t[i];
	mark_scope(ps, i, end + 1, ps->cur);
	ps->pending = SR_NO_MATCH;
	if (compound(ps, i, &next) || conditional_header(ps, i, end, &next))
		return next > i ? next : i + 1;
	if (sr_tok_op(t, "@"))
		expr(ps, i + 1, end, ps->cur);
	else if (sr_tok_kw(t, "import"))
		import_stmt(ps, i, end);
	else if (sr_tok_kw(t, "from"))
		from_stmt(ps, i, end);
	else if (sr_tok_kw(t, "global") || sr_tok_kw(t, "nonlocal")) {
		ps->p->has_nonlocal |= t->text[0] == 'n';
		names_stmt(ps, i, end, SR_B_GLOBAL);
	} else if (sr_tok_kw(t, "del"))
		names_stmt(ps, i, end, SR_B_DEL);
	else
		simple_stmt(ps, i, end);
	return end + 1;
}

static void indent(parser *ps)
{
	struct block b = { ps->cur, ps->cond, 0 };
	if (ps->pending != SR_NO_MATCH)
		b = (struct block){ ps->pending, ps->pending_cond, ps->pending_match };
	ps->pending = SR_NO_MATCH;
	if (ps->n_blocks < MAXBLOCKS)
		ps->blocks[ps->n_blocks++] = b;
	ps->cur = b.scope;
	ps->cond = b.cond;
}

static void dedent(parser *ps)
{
	if (ps->n_blocks > 0)
		ps->n_blocks--;
	const struct block *b = ps->n_blocks ? &ps->blocks[ps->n_blocks - 1] : NULL;
	ps->cur = b ? b->scope : 0;
	ps->cond = b ? b->cond : 0;
}

/* Every binding is made at a name token (or the '*' of a star import),
 * every scope at a name (def, class, lambda) or an opening bracket. */
static int alloc_tables(sr_program *p)
{
	uint32_t names = 16, opens = 16;
	for (uint32_t i = 0; i < p->toks.n; i++) {
		const sr_token *t = &p->toks.v[i];
		names += t->type == SR_T_NAME || sr_tok_op(t, "*");
		opens += t->type == SR_T_OP && t->len == 1 && strchr("([{", t->text[0]);
	}
	uint32_t n = names;
	p->cap_scopes = names + opens;
	p->cap_binds = names;
	p->table_cap = 16;
	while (p->table_cap < 2 * n)
		p->table_cap *= 2;
	p->scopes = sr_arena_array_uninit(p->arena, p->cap_scopes, sizeof *p->scopes);
	p->binds = sr_arena_array_uninit(p->arena, p->cap_binds, sizeof *p->binds);
	p->table = sr_arena_array(p->arena, p->table_cap, sizeof *p->table);
	if (!p->scopes || !p->binds || !p->table)
		return -2;
	memset(p->table, 0xFF, p->table_cap * sizeof *p->table);
	p->scopes[0] = (sr_scope){ 0, SR_S_MODULE };
	p->n_scopes = 1;
	return 0;
}

int sr_parse(sr_program *p)
{
	if (alloc_tables(p) < 0)
		return -2;
	parser ps = { .p = p, .t = p->toks.v, .n = p->toks.n, .pending = SR_NO_MATCH };
	for (uint32_t i = 0; i < ps.n && ps.t[i].type != SR_T_END && !ps.oom;) {
		sr_token *t = &ps.t[i];
		if (t->type == SR_T_INDENT) {
			indent(&ps);
			i++;
		} else if (t->type == SR_T_DEDENT) {
			dedent(&ps);
			i++;
		} else if (t->type == SR_T_NEWLINE) {
			t->scope = ps.cur;
			i++;
		} else {
			i = statement(&ps, i);
		}
	}
	return ps.oom ? -2 : 0;
}

/* Name and chain resolution (checker_resolve.h). Bindings are flow
 * insensitive: a name's value is the union of every value bound to it in
 * its scope (at most SR_VALS_MAX), so a branch cannot hide an alias. At
 * module and class level the builtin stays possible too unless an
 * unconditional binding precedes the use, because `if 0: eval = None`
 * leaves the builtin in place at run time. */
#include "checker_resolve.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define MAXDEPTH 8
#define BUDGET   512 /* resolution steps per chain: bounds pathological alias webs */
#define ROUNDS   4   /* passes over a name bound in terms of itself (x = x.y) */

/* The values of a name's bindings in one scope, the builtin aside (it
 * depends on where the name is used), computed once per program: without
 * the memo a name rebound n times (df = df.dropna(), ...) costs n steps at
 * every use, and n grows with the script, so checking was quadratic. */
typedef struct memo_slot {
	sr_vals vals;
	uint32_t definite; /* token of the first unconditional binding seen, or UINT32_MAX */
	uint8_t state;     /* SLOT_FREE, SLOT_BUSY (being computed), SLOT_DONE */
	uint8_t deleted, global;
	int level; /* SLOT_BUSY: its depth in the stack of slots being computed */
} memo_slot;

enum { SLOT_FREE, SLOT_BUSY, SLOT_DONE };

typedef struct sr_memo {
	memo_slot **slot; /* by first binding; NULL until the name is resolved */
	uint64_t budget;  /* steps left for computing slots, linear in the input */
	sr_arena *arena;
} sr_memo;

typedef struct rctx {
	const sr_program *p;
	uint32_t budget;
	int level; /* slots being computed */
	int cut;   /* the lowest level whose unfinished value was used; 0 after a truncation */
} rctx;

/* Depth or budget ran out: values are incomplete, so none is memoised. */
static void truncated(rctx *r)
{
	r->cut = 0;
}

static void eval_range(rctx *r, uint32_t a, uint32_t b, uint32_t elem, int depth, sr_vals *out);
static uint32_t chain(rctx *r, uint32_t i, int depth, sr_step_fn fn, void *ctx, sr_vals *out);

/* ---- values -------------------------------------------------------------- */

static void add(sr_vals *vs, uint8_t kind, const char *q)
{
	for (uint8_t i = 0; i < vs->n; i++)
		if (vs->v[i].kind == kind && vs->v[i].q[0] == q[0] && strcmp(vs->v[i].q, q) == 0)
			return;
	if (vs->n == SR_VALS_MAX)
		return;
	sr_val *v = &vs->v[vs->n++];
	size_t n = strlen(q);
	v->kind = n < sizeof v->q ? kind : SR_V_UNKNOWN; /* too long to be one of ours */
	n = n < sizeof v->q ? n : 0;
	memcpy(v->q, q, n);
	v->q[n] = '\0';
}

static void add_all(sr_vals *to, const sr_vals *from)
{
	for (uint8_t i = 0; i < from->n; i++)
		add(to, from->v[i].kind, from->v[i].q);
}

/* buf = a "." b (or a b when dot is 0); 0, or -1 when it does not fit. */
static int join(char *buf, size_t cap, const char *a, const char *b, int dot)
{
	size_t na = strlen(a), nb = strlen(b);
	if (na + nb + 2 > cap)
		return -1;
	memcpy(buf, a, na);
	if (dot)
		buf[na++] = '.';
	memcpy(buf + na, b, nb + 1);
	return 0;
}

static void unknown(sr_vals *vs)
{
	add(vs, SR_V_UNKNOWN, "");
}

/* Modules that others re-export (shutil.os, os.sys, ...) and private
 * aliases, mapped to the module everyone knows. */
static const char *canonical_module(const char *name, size_t n)
{
	static const char *const same[] = { "os",        "sys",    "subprocess", "builtins",
					    "importlib", "ctypes", "socket",     "pickle",
					    "marshal",   "signal", "pty",        "runpy",
					    NULL };
	static const char *const alias[][2] = {
		{ "posix", "os" },       { "nt", "os" },
		{ "_os", "os" },         { "__builtin__", "builtins" },
		{ "_pickle", "pickle" }, { "cPickle", "pickle" },
		{ "_signal", "signal" }, { NULL, NULL }
	};
	if (n < 2 || n > 11)
		return NULL;
	for (const char *const *s = same; *s; s++)
		if ((*s)[0] == name[0] && strlen(*s) == n && memcmp(*s, name, n) == 0)
			return *s;
	for (size_t i = 0; alias[i][0]; i++)
		if (alias[i][0][0] == name[0] && strlen(alias[i][0]) == n &&
		    memcmp(alias[i][0], name, n) == 0)
			return alias[i][1];
	return NULL;
}

/* A qualified name with its first component canonical. */
static void add_qual(sr_vals *vs, const char *q)
{
	char buf[SR_QMAX];
	size_t n = strcspn(q, ".");
	const char *c = canonical_module(q, n);
	if (c && join(buf, sizeof buf, c, q + n, 0) == 0)
		q = buf;
	add(vs, SR_V_QUAL, q);
}

void sr_canonical(const char *q, char *out, size_t cap)
{
	size_t n = strcspn(q, ".");
	const char *c = canonical_module(q, n);
	if (!c || snprintf(out, cap, "%s%s", c, q + n) >= (int)cap)
		snprintf(out, cap, "%s", q);
}

static void attr(const sr_vals *base, const char *name, sr_vals *out)
{
	static const char *const getters[] = { "get", "__getitem__", "pop", "setdefault", NULL };
	char buf[SR_QMAX];
	for (uint8_t i = 0; i < base->n; i++) {
		const sr_val *v = &base->v[i];
		size_t ql = strlen(v->q);
		int ns = v->kind == SR_V_GLOBALS || strcmp(v->q, "sys.modules") == 0 ||
			 (ql > 9 && strcmp(v->q + ql - 9, ".__dict__") == 0);
		int getter = 0;
		for (const char *const *g = getters; *g; g++)
			getter |= strcmp(*g, name) == 0;
		const char *re = canonical_module(name, strlen(name));
		if (ns && getter)
			add(out, SR_V_GETTER, v->kind == SR_V_GLOBALS ? "" : v->q);
		else if (v->kind != SR_V_QUAL)
			unknown(out);
		else if (re && strcmp(v->q, "builtins") != 0 &&
			 strncmp(v->q, name, strlen(name)) != 0)
			add(out, SR_V_QUAL,
			    re); /* shutil.os is os (but socket.socket is not socket) */
		else if (join(buf, sizeof buf, v->q, name, 1) == 0)
			add(out, SR_V_QUAL, buf);
		else
			unknown(out);
	}
}

/* ---- names ------------------------------------------------------------------ */

static void resolve_name(rctx *r, const char *name, uint32_t scope, uint32_t at, int depth,
			 sr_vals *out);

static void builtin_or_star(rctx *r, const char *name, sr_vals *out)
{
	const sr_program *p = r->p;
	char buf[SR_QMAX];
	for (uint32_t b = sr_parse_lookup(p, 0, NULL); b != SR_NO_MATCH; b = p->binds[b].next)
		if (join(buf, sizeof buf, p->binds[b].qual, name, 1) == 0)
			add_qual(out, buf);
	if (strcmp(name, "__builtins__") == 0)
		add(out, SR_V_QUAL, "builtins");
	else if (join(buf, sizeof buf, "builtins", name, 1) == 0)
		add(out, SR_V_QUAL, buf);
}

static void binding_value(rctx *r, const sr_binding *b, int depth, sr_vals *out)
{
	switch (b->kind) {
	case SR_B_IMPORT: add_qual(out, b->qual); break;
	case SR_B_VALUE: eval_range(r, b->vstart, b->vend, b->elem, depth + 1, out); break;
	default: unknown(out);
	}
}

/* The values of the bindings of name in scope s (first binding b), into sl. */
static void bound(rctx *r, uint32_t b, uint32_t s, const char *name, int depth, memo_slot *sl)
{
	const sr_program *p = r->p;
	sl->vals.n = 0;
	sl->definite = UINT32_MAX;
	sl->deleted = sl->global = 0;
	for (; b != SR_NO_MATCH && r->budget && sl->vals.n < SR_VALS_MAX; b = p->binds[b].next) {
		/* Before the binding's value, which may spend the rest: a
		 * decrement after it wrapped the budget round to 2^32 - 1, so
		 * a web of names rebound in terms of each other never ended. */
		r->budget--;
		const sr_binding *bd = &p->binds[b];
		if (bd->kind == SR_B_GLOBAL && s != 0) {
			resolve_name(r, name, 0, UINT32_MAX, depth + 1, &sl->vals);
			sl->global = 1;
			return;
		}
		if (bd->kind == SR_B_DEL) {
			sl->deleted = 1;
			continue;
		}
		if (bd->kind == SR_B_GLOBAL)
			continue;
		binding_value(r, bd, depth, &sl->vals);
		if (!bd->conditional && bd->tok < sl->definite)
			sl->definite = bd->tok;
	}
	if (b != SR_NO_MATCH && !r->budget)
		truncated(r);
}

static int same_vals(const sr_vals *a, const sr_vals *b)
{
	if (a->n != b->n)
		return 0;
	for (uint8_t i = 0; i < a->n; i++) {
		uint8_t j = 0;
		while (j < b->n &&
		       !(a->v[i].kind == b->v[j].kind && strcmp(a->v[i].q, b->v[j].q) == 0))
			j++;
		if (j == b->n)
			return 0;
	}
	return 1;
}

/* Compute slot sl: a name bound in terms of itself sees its own value so
 * far (nothing, then each pass's), until it stops changing. */
static void compute(rctx *r, uint32_t b, uint32_t s, const char *name, int depth, memo_slot *sl)
{
	int outer = r->cut;
	sl->state = SLOT_BUSY;
	sl->level = ++r->level;
	sl->vals.n = 0;
	memo_slot next;
	for (int round = 0;; round++) {
		r->cut = INT_MAX;
		bound(r, b, s, name, depth, &next);
		int changed = !same_vals(&next.vals, &sl->vals);
		*sl = (memo_slot){ next.vals,    next.definite, SLOT_BUSY,
				   next.deleted, next.global,   sl->level };
		if (r->cut != sl->level || !changed)
			break;
		if (round + 1 == ROUNDS) {
			unknown(&sl->vals);
			break;
		}
	}
	r->level--;
	if (r->cut >= sl->level) {
		sl->state = SLOT_DONE; /* complete: only its own unfinished value was used */
		r->cut = INT_MAX;
	} else {
		sl->state = SLOT_FREE; /* it used an outer slot's unfinished value */
	}
	if (outer < r->cut)
		r->cut = outer;
}

/* The memo slot of name in scope s (first binding b), computed; or the
 * values computed into tmp when the memo cannot hold them. */
static const memo_slot *slot(rctx *r, uint32_t b, uint32_t s, const char *name, int depth,
			     memo_slot *tmp)
{
	sr_memo *m = r->p->memo;
	memo_slot **at = m ? &m->slot[b] : NULL;
	if (at && *at && (*at)->state == SLOT_DONE)
		return *at;
	if (at && *at && (*at)->state == SLOT_BUSY) {
		if ((*at)->level < r->cut)
			r->cut = (*at)->level; /* its value so far: the caller is not complete */
		return *at;
	}
	if (!at || (r->level == 0 && !m->budget) ||
	    (!*at && !(*at = sr_arena_alloc(m->arena, sizeof **at)))) {
		int cut = r->cut;
		bound(r, b, s, name, depth, tmp); /* without the memo, as before it */
		if (r->cut > cut)
			r->cut = cut;
		return tmp;
	}
	if (r->level > 0) {
		compute(r, b, s, name, depth, *at);
		return *at;
	}
	/* A computation from the top: its steps come from the memo's budget
	 * (linear in the input) instead of this chain's. Past that budget the
	 * chain goes on without the memo, with its own. */
	uint32_t own = r->budget;
	r->budget = m->budget > UINT32_MAX ? UINT32_MAX : (uint32_t)m->budget;
	uint32_t had = r->budget;
	compute(r, b, s, name, depth, *at);
	m->budget -= had - r->budget;
	int out_of_budget = r->budget == 0;
	r->budget = own;
	r->cut = INT_MAX;
	if (!out_of_budget || (*at)->state == SLOT_DONE)
		return *at;
	m->budget = 0;
	bound(r, b, s, name, depth, tmp);
	r->cut = INT_MAX;
	return tmp;
}

/* Every value of the bindings of name in scope s (first binding b). */
static void gather(rctx *r, uint32_t b, uint32_t s, const char *name, uint32_t at, int depth,
		   sr_vals *out)
{
	const sr_program *p = r->p;
	memo_slot tmp;
	const memo_slot *sl = slot(r, b, s, name, depth, &tmp);
	add_all(out, &sl->vals);
	if (sl->global)
		return;
	if (p->scopes[s].kind != SR_S_FUNCTION && p->scopes[s].kind != SR_S_COMPREHENSION &&
	    (sl->definite >= at || sl->deleted))
		builtin_or_star(r, name, out);
}

static void resolve_name(rctx *r, const char *name, uint32_t scope, uint32_t at, int depth,
			 sr_vals *out)
{
	const sr_program *p = r->p;
	if (depth > MAXDEPTH || !r->budget) {
		truncated(r);
		unknown(out);
		return;
	}
	r->budget--;
	int skip_class = 0;
	for (uint32_t s = scope;;) {
		const sr_scope *sc = &p->scopes[s];
		if (!(skip_class && sc->kind == SR_S_CLASS)) {
			uint32_t b = sr_parse_lookup(p, s, name);
			if (b != SR_NO_MATCH) {
				gather(r, b, s, name, s == scope ? at : UINT32_MAX, depth, out);
				return;
			}
		}
		if (s == 0)
			break;
		skip_class |= sc->kind == SR_S_FUNCTION;
		s = sc->parent;
	}
	builtin_or_star(r, name, out);
}

/* ---- token ranges ----------------------------------------------------------- */

uint32_t sr_skip(const sr_program *p, uint32_t j)
{
	const sr_token *t = &p->toks.v[j];
	int open = t->type == SR_T_FSTART ||
		   (t->type == SR_T_OP && t->len == 1 && strchr("([{", t->text[0]));
	return open && t->match != SR_NO_MATCH && t->match > j ? t->match + 1 : j + 1;
}

static uint32_t find_kw(const sr_program *p, uint32_t a, uint32_t b, const char *kw)
{
	for (uint32_t j = a; j < b; j = sr_skip(p, j))
		if (sr_tok_kw(&p->toks.v[j], kw))
			return j;
	return b;
}

static uint32_t find_op(const sr_program *p, uint32_t a, uint32_t b, const char *op)
{
	for (uint32_t j = a; j < b; j = sr_skip(p, j))
		if (sr_tok_op(&p->toks.v[j], op))
			return j;
	return b;
}

static void strip_parens(const sr_program *p, uint32_t *a, uint32_t *b)
{
	while (*a + 1 < *b && sr_tok_op(&p->toks.v[*a], "(") && p->toks.v[*a].match == *b - 1) {
		(*a)++;
		(*b)--;
	}
}

/* The value of the expression in [a, b) (element elem of a tuple). */
static void eval_range(rctx *r, uint32_t a, uint32_t b, uint32_t elem, int depth, sr_vals *out)
{
	const sr_program *p = r->p;
	if (depth > MAXDEPTH || a >= b || !r->budget) {
		if (a < b)
			truncated(r);
		unknown(out);
		return;
	}
	r->budget--;
	strip_parens(p, &a, &b);
	if (elem != SR_NO_MATCH) {
		if ((sr_tok_op(&p->toks.v[a], "[") || sr_tok_op(&p->toks.v[a], "(")) &&
		    p->toks.v[a].match == b - 1) {
			a++;
			b--;
		}
		for (uint32_t k = 0; k < elem && a < b; k++)
			a = find_op(p, a, b, ",") + 1;
		b = find_op(p, a, b, ",");
		eval_range(r, a, b, SR_NO_MATCH, depth, out);
		return;
	}
	uint32_t cut = find_kw(p, a, b, "if");
	if (cut == b)
		cut = find_kw(p, a, b, "or");
	if (cut == b)
		cut = find_kw(p, a, b, "and");
	if (cut < b) {
		const char *kw = p->toks.v[cut].text;
		eval_range(r, a, cut, SR_NO_MATCH, depth + 1, out);
		uint32_t rest = kw[0] == 'i' ? find_kw(p, cut, b, "else") : cut;
		eval_range(r, rest + 1, b, SR_NO_MATCH, depth + 1, out);
		return;
	}
	sr_vals v;
	v.n = 0;
	if (chain(r, a, depth + 1, NULL, NULL, &v) == b)
		add_all(out, &v);
	else
		unknown(out);
}

/* ---- strings ---------------------------------------------------------------- */

static size_t append(char *buf, size_t cap, size_t n, const char *s, size_t len)
{
	size_t room = cap - 1 - n;
	size_t k = len < room ? len : room;
	memcpy(buf + n, s, k);
	buf[n + k] = '\0';
	return n + k;
}

/* Folding follows names bound to string constants: `PATH = "/etc/passwd"`
 * makes `open(PATH)` a call with a known path. Conservatively: every
 * binding of the name in the scope that binds it must be a plain
 * assignment (or walrus, or an element of a literal tuple or loop list)
 * whose value folds to the same string; a parameter, an import, a loop
 * over anything else, an augmented assignment, `del`, `nonlocal` or any
 * other binding makes the value unknown, as does a module-level name that
 * a star import could provide and a class-level one bound conditionally. */
#define STR_DEPTH  4  /* names through names */
#define STR_BINDS  32 /* bindings of one name looked at */
#define STR_BUDGET 64 /* names looked up per folded expression */
#define STR_CAP    512
#define STR_STEPS  4096 /* tokens of names' values folded per expression */
#define STR_NESTED 512  /* scopes searched for a nonlocal declaration */

typedef struct sfold {
	const sr_program *p;
	uint32_t budget, steps;
} sfold;

/* One more token of a name's value (depth > 0): 0 when over budget. */
static int step(sfold *f, int depth)
{
	if (depth == 0)
		return 1;
	if (!f->steps)
		return 0;
	f->steps--;
	return 1;
}

static int fold(sfold *f, uint32_t a, uint32_t b, char *buf, size_t cap, size_t *n, int depth);

static int value_name(const sr_token *t)
{
	return t->type == SR_T_NAME && !sr_tok_is_keyword(t);
}

/* The binding at tok comes from `nonlocal`: its statement starts with it. */
static int is_nonlocal(const sr_program *p, uint32_t tok)
{
	const sr_token *t = p->toks.v;
	while (tok > 0 && (value_name(&t[tok - 1]) || sr_tok_op(&t[tok - 1], ",")))
		tok--;
	return tok > 0 && sr_tok_kw(&t[tok - 1], "nonlocal");
}

/* A function nested in scope s declares `nonlocal name` (and may rebind
 * it). Nested scopes come after s; looking at more than STR_NESTED of them
 * gives up, which counts as yes. */
static int nonlocal_below(const sr_program *p, uint32_t s, const char *name)
{
	if (!p->has_nonlocal || p->scopes[s].kind != SR_S_FUNCTION)
		return 0;
	for (uint32_t k = s + 1; k < p->n_scopes; k++) {
		if (k - s > STR_NESTED)
			return 1;
		uint32_t up = k;
		for (int d = 0; up > s && d < 128; d++)
			up = p->scopes[up].parent;
		if (up != s)
			continue;
		for (uint32_t b = sr_parse_lookup(p, k, name); b != SR_NO_MATCH;
		     b = p->binds[b].next)
			if (p->binds[b].kind == SR_B_GLOBAL && is_nonlocal(p, p->binds[b].tok))
				return 1;
	}
	return 0;
}

/* Narrow the value [*a, *b) to its element k (a tuple or list literal, or
 * a bare tuple). */
static int element(const sr_program *p, uint32_t *a, uint32_t *b, uint32_t k)
{
	const sr_token *t = p->toks.v;
	strip_parens(p, a, b);
	if (*a < *b && (sr_tok_op(&t[*a], "[") || sr_tok_op(&t[*a], "(")) &&
	    t[*a].match == *b - 1) {
		(*a)++;
		(*b)--;
	}
	for (uint32_t i = 0; i < k && *a < *b; i++)
		*a = find_op(p, *a, *b, ",") + 1;
	if (*a >= *b)
		return -1;
	*b = find_op(p, *a, *b, ",");
	return 0;
}

/* The string the name at token j holds (appended to buf): 1 when whole,
 * 0 when only a prefix is known, -1 when it is not a known string. */
static int name_string(sfold *f, uint32_t j, char *buf, size_t cap, size_t *n, int depth)
{
	const sr_program *p = f->p;
	const char *name = p->toks.v[j].text;
	if (depth >= STR_DEPTH || !f->budget)
		return -1;
	f->budget--;
	/* The scope that binds it, found as resolve_name finds it. */
	uint32_t s = p->toks.v[j].scope, at = j, b;
	int skip_class = 0, via_comp = 0;
	for (;;) {
		const sr_scope *sc = &p->scopes[s];
		b = skip_class && sc->kind == SR_S_CLASS ? SR_NO_MATCH
							 : sr_parse_lookup(p, s, name);
		if (b != SR_NO_MATCH && via_comp && sc->kind == SR_S_CLASS)
			return -1; /* which one a comprehension in a class body sees varies */
		if (b != SR_NO_MATCH)
			break;
		if (s == 0)
			return -1; /* a builtin, or from a star import */
		skip_class |= sc->kind == SR_S_FUNCTION;
		via_comp |= sc->kind == SR_S_COMPREHENSION;
		s = sc->parent;
		at = UINT32_MAX;
	}
	if (nonlocal_below(p, s, name))
		return -1;
	char val[STR_CAP], cur[STR_CAP];
	size_t vn = 0;
	int vr = -2, definite = 0, count = 0;
	for (; b != SR_NO_MATCH; b = p->binds[b].next) {
		const sr_binding *bd = &p->binds[b];
		if (++count > STR_BINDS)
			return -1;
		if (bd->kind == SR_B_GLOBAL && s == 0)
			continue;
		if (bd->kind == SR_B_GLOBAL) { /* global name: the module's bindings */
			s = 0;
			at = UINT32_MAX;
			b = sr_parse_lookup(p, 0, name);
			if (b == SR_NO_MATCH)
				return -1;
			bd = &p->binds[b];
			if (bd->kind == SR_B_GLOBAL)
				continue;
		}
		if (bd->kind != SR_B_VALUE || bd->param)
			return -1;
		uint32_t va = bd->vstart, ve = bd->vend;
		if (bd->elem != SR_NO_MATCH && element(p, &va, &ve, bd->elem) < 0)
			return -1;
		size_t cn = 0;
		cur[0] = '\0';
		int r = fold(f, va, ve, cur, sizeof cur, &cn, depth + 1);
		if (r < 0)
			return -1;
		if (vr == -2) {
			memcpy(val, cur, cn + 1);
			vn = cn;
			vr = r;
		} else if (r != vr || cn != vn || memcmp(cur, val, cn) != 0) {
			return -1;
		}
		definite |= !bd->conditional && bd->tok < at;
	}
	if (vr == -2)
		return -1;
	if (!definite && (p->scopes[s].kind == SR_S_CLASS ||
			  (s == 0 && sr_parse_lookup(p, 0, NULL) != SR_NO_MATCH)))
		return -1;
	*n = append(buf, cap, *n, val, vn);
	return vr;
}

/* A name used as a whole string operand: nothing but +, % or .format
 * after it (a call, subscript or other attribute makes it something else). */
static int operand_name(const sr_program *p, uint32_t j, uint32_t b)
{
	const sr_token *t = p->toks.v;
	return value_name(&t[j]) &&
	       (j + 1 >= b || sr_tok_op(&t[j + 1], "+") || sr_tok_op(&t[j + 1], "%") ||
		(sr_tok_op(&t[j + 1], ".") && j + 2 < b && sr_tok_streq(&t[j + 2], "format")));
}

/* An f-string's literal parts, and fields that are a bare name holding a
 * known string; *complete when nothing else is in it. */
static uint32_t fstring(sfold *f, uint32_t j, char *buf, size_t cap, size_t *n, int *complete,
			int depth)
{
	const sr_token *t = f->p->toks.v;
	uint32_t end = t[j].match == SR_NO_MATCH ? j + 1 : t[j].match;
	*complete = 0;
	for (j++; j < end;) {
		if (!step(f, depth))
			return end + 1;
		if (t[j].type == SR_T_FMIDDLE) {
			*n = append(buf, cap, *n, t[j].text, t[j].text_len);
			j++;
		} else if (sr_tok_op(&t[j], "{") && j + 2 < end && value_name(&t[j + 1]) &&
			   sr_tok_op(&t[j + 2], "}")) {
			if (name_string(f, j + 1, buf, cap, n, depth) != 1)
				return end + 1;
			j += 3;
		} else {
			return end + 1;
		}
	}
	*complete = 1;
	return end + 1;
}

static int fold(sfold *f, uint32_t a, uint32_t b, char *buf, size_t cap, size_t *n, int depth)
{
	const sr_program *p = f->p;
	const sr_token *t = p->toks.v;
	strip_parens(p, &a, &b);
	if (a >= b)
		return -1;
	for (uint32_t j = a; j < b;) {
		int first = j == a;
		if (!step(f, depth))
			return first ? -1 : 0;
		if (t[j].type == SR_T_STRING && !(t[j].flags & SR_TF_OPAQUE)) {
			*n = append(buf, cap, *n, t[j].text, t[j].text_len);
			j++;
		} else if (t[j].type == SR_T_STRING) {
			/* an escape left undecoded (\N{...}): what precedes it is known */
			const char *bs = memchr(t[j].text, '\\', t[j].text_len);
			*n = append(buf, cap, *n, t[j].text,
				    bs ? (size_t)(bs - t[j].text) : t[j].text_len);
			return 0;
		} else if (t[j].type == SR_T_FSTART) {
			int complete;
			j = fstring(f, j, buf, cap, n, &complete, depth);
			if (!complete)
				return 0;
		} else if (value_name(&t[j]) && (first || sr_tok_op(&t[j - 1], "+"))) {
			int r = operand_name(p, j, b) ? name_string(f, j, buf, cap, n, depth) : -1;
			if (r < 0)
				return first ? -1 : 0;
			if (r == 0)
				return 0;
			j++;
		} else if (first) {
			return -1;
		} else if (sr_tok_op(&t[j], "%")) {
			return 0; /* "head %s" % x */
		} else if (sr_tok_op(&t[j], "+") && j + 1 < b &&
			   (t[j + 1].type == SR_T_STRING || t[j + 1].type == SR_T_FSTART ||
			    value_name(&t[j + 1]))) {
			j++;
		} else if (sr_tok_op(&t[j], ".") && j + 1 < b &&
			   sr_tok_streq(&t[j + 1], "format")) {
			buf[strcspn(buf, "{")] = '\0';
			*n = strlen(buf);
			return 0;
		} else {
			return sr_tok_op(&t[j], "+") ? 0 : -1;
		}
	}
	return *n < cap - 1 ? 1 : 0;
}

int sr_fold_string(const sr_program *p, uint32_t a, uint32_t b, char *buf, size_t cap)
{
	sfold f = { p, STR_BUDGET, STR_STEPS };
	size_t n = 0;
	buf[0] = '\0';
	return fold(&f, a, b, buf, cap, &n, 0);
}

/* ---- calls -------------------------------------------------------------------- */

int sr_call_nargs(const sr_program *p, uint32_t open)
{
	uint32_t close = p->toks.v[open].match;
	int n = 0;
	if (close == SR_NO_MATCH || close == open + 1)
		return 0;
	for (uint32_t j = open + 1; j < close; j = find_op(p, j, close, ",") + 1)
		n++;
	return n;
}

int sr_call_arg(const sr_program *p, uint32_t open, int k, const char *kw, uint32_t *a, uint32_t *b)
{
	const sr_token *t = p->toks.v;
	uint32_t close = t[open].match;
	int pos = 0;
	if (close == SR_NO_MATCH)
		return -1;
	for (uint32_t j = open + 1; j < close;) {
		uint32_t e = find_op(p, j, close, ",");
		int named = t[j].role == SR_ROLE_KWARG;
		int star = sr_tok_op(&t[j], "*") || sr_tok_op(&t[j], "**");
		if (kw ? named && sr_tok_streq(&t[j], kw) : !named && !star && pos == k) {
			*a = named ? j + 2 : j;
			*b = e;
			return *a < *b ? 0 : -1;
		}
		pos += !named && !star;
		j = e + 1;
	}
	return -1;
}

static int arg_string(const sr_program *p, uint32_t open, int k, char *buf, size_t cap)
{
	uint32_t a, b;
	return sr_call_arg(p, open, k, NULL, &a, &b) == 0 && sr_fold_string(p, a, b, buf, cap) == 1
		   ? 0
		   : -1;
}

static void lookup_key(rctx *r, const sr_val *ns, const char *key, sr_vals *out)
{
	char buf[SR_QMAX];
	size_t ql = strlen(ns->q);
	if (ns->kind == SR_V_GLOBALS || (ns->kind == SR_V_GETTER && !ns->q[0]))
		resolve_name(r, key, 0, UINT32_MAX, 1, out);
	else if (strcmp(ns->q, "sys.modules") == 0)
		add_qual(out, key);
	else if (strcmp(ns->q, "builtins") == 0 &&
		 snprintf(buf, sizeof buf, "builtins.%s", key) < (int)sizeof buf)
		add(out, SR_V_QUAL, buf);
	else if (ql > 9 && strcmp(ns->q + ql - 9, ".__dict__") == 0 &&
		 snprintf(buf, sizeof buf, "%.*s.%s", (int)(ql - 9), ns->q, key) < (int)sizeof buf)
		add_qual(out, buf);
	else
		unknown(out);
}

static void call_import(const sr_program *p, const char *q, uint32_t open, sr_vals *out)
{
	char mod[SR_QMAX];
	if (arg_string(p, open, 0, mod, sizeof mod) < 0 || mod[0] == '.' || !mod[0]) {
		unknown(out);
		return;
	}
	/* __import__("os.path") is os, unless a fromlist asks for the leaf */
	uint32_t a, b;
	if (strcmp(q, "importlib.import_module") != 0 &&
	    sr_call_arg(p, open, 3, NULL, &a, &b) < 0 &&
	    sr_call_arg(p, open, 0, "fromlist", &a, &b) < 0)
		mod[strcspn(mod, ".")] = '\0';
	add_qual(out, mod);
}

static void call(rctx *r, const sr_vals *callee, uint32_t open, int depth, sr_vals *out)
{
	const sr_program *p = r->p;
	char key[SR_QMAX];
	for (uint8_t i = 0; i < callee->n; i++) {
		const sr_val *v = &callee->v[i];
		const char *q = v->q;
		uint32_t a, b;
		if (v->kind == SR_V_GETTER) {
			if (arg_string(p, open, 0, key, sizeof key) == 0)
				lookup_key(r, v, key, out);
			else
				unknown(out);
		} else if (v->kind != SR_V_QUAL) {
			unknown(out);
		} else if (!strcmp(q, "builtins.__import__") ||
			   !strcmp(q, "importlib.__import__") ||
			   !strcmp(q, "importlib.import_module")) {
			call_import(p, q, open, out);
		} else if ((!strcmp(q, "builtins.getattr") ||
			    !strcmp(q, "inspect.getattr_static")) &&
			   sr_call_arg(p, open, 0, NULL, &a, &b) == 0 &&
			   arg_string(p, open, 1, key, sizeof key) == 0) {
			sr_vals obj;
			obj.n = 0;
			eval_range(r, a, b, SR_NO_MATCH, depth + 1, &obj);
			attr(&obj, key, out);
		} else if (!strcmp(q, "builtins.globals") || !strcmp(q, "builtins.locals") ||
			   (!strcmp(q, "builtins.vars") && sr_call_nargs(p, open) == 0)) {
			add(out, SR_V_GLOBALS, "");
		} else if (!strcmp(q, "builtins.vars") &&
			   sr_call_arg(p, open, 0, NULL, &a, &b) == 0) {
			sr_vals obj;
			obj.n = 0;
			eval_range(r, a, b, SR_NO_MATCH, depth + 1, &obj);
			attr(&obj, "__dict__", out);
		} else {
			unknown(out);
		}
	}
}

static void subscript(rctx *r, const sr_vals *base, uint32_t open, sr_vals *out)
{
	char key[SR_QMAX];
	uint32_t close = r->p->toks.v[open].match;
	if (sr_fold_string(r->p, open + 1, close, key, sizeof key) != 1) {
		unknown(out);
		return;
	}
	for (uint8_t i = 0; i < base->n; i++)
		lookup_key(r, &base->v[i], key, out);
}

/* ---- chains ---------------------------------------------------------------------- */

static int is_store_after(const sr_token *t)
{
	static const char *const ops[] = { "=",  "+=",  "-=",  "*=",  "/=",  "|=", "&=", "^=",
					   "%=", "//=", "**=", ">>=", "<<=", "@=", NULL };
	for (const char *const *o = ops; *o; o++)
		if (sr_tok_op(t, *o))
			return 1;
	return 0;
}

static void emit(sr_step_fn fn, void *ctx, sr_step *st, const sr_program *p, uint32_t after)
{
	if (!fn)
		return;
	st->store = p->toks.v[st->chain].role == SR_ROLE_STORE && is_store_after(&p->toks.v[after]);
	fn(ctx, st);
}

static uint32_t chain(rctx *r, uint32_t i, int depth, sr_step_fn fn, void *ctx, sr_vals *out)
{
	const sr_program *p = r->p;
	const sr_token *t = p->toks.v;
	sr_vals cur, prev;
	uint32_t j = i + 1;
	cur.n = 0;
	sr_step st = { .chain = i, .base = &prev, .val = &cur };
	if (t[i].type == SR_T_NAME && !sr_tok_is_keyword(&t[i])) {
		resolve_name(r, t[i].text, t[i].scope, i, depth, &cur);
		st.kind = SR_STEP_NAME;
		st.tok = i;
		emit(fn, ctx, &st, p, j);
	} else if (sr_tok_op(&t[i], "(") && t[i].match != SR_NO_MATCH) {
		eval_range(r, i + 1, t[i].match, SR_NO_MATCH, depth + 1, &cur);
		j = t[i].match + 1;
	} else {
		j = i;
		while (j < p->toks.n && (t[j].type == SR_T_STRING || t[j].type == SR_T_FSTART))
			j = sr_skip(p, j);
		if (j == i)
			j = sr_skip(p, i);
		unknown(&cur);
	}
	while (j + 1 < p->toks.n) {
		prev = cur;
		cur.n = 0;
		if (sr_tok_op(&t[j], ".") && t[j + 1].type == SR_T_NAME) {
			attr(&prev, t[j + 1].text, &cur);
			st = (sr_step){ SR_STEP_ATTR, 0, j + 1, 0, i, &prev, &cur };
			j += 2;
		} else if ((sr_tok_op(&t[j], "(") || sr_tok_op(&t[j], "[")) &&
			   t[j].match != SR_NO_MATCH && !(t[j].flags & SR_TF_FBRACE)) {
			if (t[j].text[0] == '(')
				call(r, &prev, j, depth, &cur);
			else
				subscript(r, &prev, j, &cur);
			st = (sr_step){ t[j].text[0] == '(' ? SR_STEP_CALL : SR_STEP_SUBSCRIPT,
					0,
					j,
					t[j].match,
					i,
					&prev,
					&cur };
			j = t[j].match + 1;
		} else {
			cur = prev;
			break;
		}
		emit(fn, ctx, &st, p, j);
	}
	*out = cur;
	return j;
}

uint32_t sr_resolve_chain(const sr_program *p, uint32_t i, sr_step_fn fn, void *ctx, sr_vals *out)
{
	rctx r = { p, BUDGET, 0, INT_MAX };
	out->n = 0;
	return chain(&r, i, 0, fn, ctx, out);
}

int sr_resolve_init(sr_program *p)
{
	sr_memo *m = sr_arena_alloc(p->arena, sizeof *m);
	if (!m || !(m->slot = sr_arena_array(p->arena, p->n_binds + 1, sizeof *m->slot)))
		return -2;
	m->budget = 64 * (uint64_t)p->toks.n + 65536;
	m->arena = p->arena;
	p->memo = m;
	return 0;
}

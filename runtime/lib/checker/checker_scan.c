/* The checker's pipeline: coding declaration, tokens, statements and
 * bindings, then one pass over every chain of names, attributes, calls
 * and subscripts, asking the rules about each step (checker_rules.h). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "checker_parse.h"
#include "checker_resolve.h"
#include "checker_rules.h"
#include "checker_scan.h"

typedef struct scan {
	const sr_program *p;
	const sr_check_config *cfg;
	sr_check_out *out;
} scan;

static const sr_token *tok(const scan *s, uint32_t i)
{
	return &s->p->toks.v[i];
}

/* The source of tokens [a, b] as the user wrote it, shortened. */
static void source(const scan *s, uint32_t a, uint32_t b, char *buf, size_t cap)
{
	const sr_token *ta = tok(s, a), *tb = tok(s, b);
	size_t n = tb->start + tb->len > ta->start ? tb->start + tb->len - ta->start : 0;
	if (n >= cap)
		snprintf(buf, cap, "%.*s...", (int)(cap - 4), s->p->src + ta->start);
	else
		snprintf(buf, cap, "%.*s", (int)n, s->p->src + ta->start);
	for (char *c = buf; *c; c++)
		if (*c == '\n' || *c == '\r' || *c == '\t')
			*c = ' ';
}

static void flag(scan *s, int rule, const char *name, uint32_t at, const char *what)
{
	const sr_token *t = tok(s, at);
	sr_finding_add(s->out, s->cfg, rule, name, t->line, t->col, "%s %s", what,
		       sr_rule_advice(rule));
}

/* A dangerous module or member reached by the chain up to token at. */
static void flag_values(scan *s, const sr_vals *v, uint32_t chain, uint32_t at)
{
	char src[96], what[200];
	for (uint8_t i = 0; i < v->n; i++) {
		if (v->v[i].kind != SR_V_QUAL)
			continue;
		int rule = sr_rule_for_name(v->v[i].q, s->cfg->network_off);
		if (rule < 0)
			continue;
		const char *name = sr_display_name(v->v[i].q);
		source(s, chain, at, src, sizeof src);
		if (strcmp(src, name) != 0)
			snprintf(what, sizeof what, "`%s` (reached as `%s`)", name, src);
		else
			snprintf(what, sizeof what, "`%s`", name);
		flag(s, rule, name, tok(s, chain)->line == tok(s, at)->line ? chain : at, what);
	}
}

static bool has_qual(const sr_vals *v, const char *q)
{
	for (uint8_t i = 0; i < v->n; i++)
		if (v->v[i].kind == SR_V_QUAL && strcmp(v->v[i].q, q) == 0)
			return true;
	return false;
}

static bool any_module(const sr_vals *v)
{
	for (uint8_t i = 0; i < v->n; i++)
		if (v->v[i].kind == SR_V_QUAL || v->v[i].kind == SR_V_GLOBALS)
			return true;
	return false;
}

static bool is_dunder(const char *s)
{
	size_t n = strlen(s);
	return n > 4 && !strncmp(s, "__", 2) && !strcmp(s + n - 2, "__");
}

/* Dunders ordinary code reads by name. */
static bool is_plain_dunder(const char *s)
{
	static const char *const plain[] = { "__init__",
					     "__name__",
					     "__qualname__",
					     "__module__",
					     "__doc__",
					     "__annotations__",
					     "__len__",
					     "__iter__",
					     "__call__",
					     "__enter__",
					     "__exit__",
					     "__version__",
					     "__file__",
					     "__slots__",
					     "__all__",
					     "__wrapped__",
					     "__dataclass_fields__",
					     "__str__",
					     "__repr__",
					     NULL };
	for (const char *const *p = plain; *p; p++)
		if (!strcmp(s, *p))
			return true;
	return false;
}

/* ---- calls ------------------------------------------------------------------------ */

static void check_reflection(scan *s, const char *fn, uint32_t open)
{
	char name[SR_QMAX], what[240];
	uint32_t a, b;
	int known = sr_call_arg(s->p, open, 1, NULL, &a, &b) == 0
			? sr_fold_string(s->p, a, b, name, sizeof name)
			: -1;
	if (known == 1 &&
	    ((is_dunder(name) && !is_plain_dunder(name)) || sr_is_internal_attr(name))) {
		snprintf(what, sizeof what, "`%s(..., '%s')`", fn, name);
		flag(s, SR_R_REFLECT, fn, open, what);
		return;
	}
	if (known == 1 || sr_call_arg(s->p, open, 0, NULL, &a, &b) < 0)
		return;
	sr_vals obj;
	uint32_t end = sr_resolve_chain(s->p, a, NULL, NULL, &obj);
	if (end == b && any_module(&obj)) {
		snprintf(what, sizeof what, "`%s` on a module with a computed name", fn);
		flag(s, SR_R_REFLECT, fn, open, what);
	}
}

static void check_attrgetter(scan *s, const char *fn, uint32_t open)
{
	char name[SR_QMAX], what[240];
	uint32_t a, b;
	for (int k = 0; sr_call_arg(s->p, open, k, NULL, &a, &b) == 0; k++)
		if (sr_fold_string(s->p, a, b, name, sizeof name) >= 0 && strstr(name, "__")) {
			snprintf(what, sizeof what, "`%s('%s')`", fn, name);
			flag(s, SR_R_REFLECT, fn, open, what);
			return;
		}
}

static void check_namespace(scan *s, const char *fn, uint32_t open, const sr_vals *callee)
{
	static const char *const uses[] = { "get",         "update",      "setdefault",  "pop",
					    "__getitem__", "__setitem__", "__delitem__", NULL };
	const sr_token *nx = tok(s, tok(s, open)->match + 1);
	char what[200];
	bool used = sr_tok_op(nx, "[");
	if (sr_tok_op(nx, ".")) {
		for (const char *const *u = uses; *u; u++)
			used |= sr_tok_streq(nx + 1, *u);
	}
	uint32_t a, b;
	if (!used && has_qual(callee, "builtins.vars") &&
	    sr_call_arg(s->p, open, 0, NULL, &a, &b) == 0) {
		sr_vals obj;
		used = sr_resolve_chain(s->p, a, NULL, NULL, &obj) == b && any_module(&obj);
	}
	if (used) {
		snprintf(what, sizeof what, "`%s()` used as a lookup table", fn);
		flag(s, SR_R_NAMESPACE, fn, open, what);
	}
}

static void check_paths(scan *s, const char *api, uint32_t open)
{
	static const char *const kws[] = {
		"path",        "file",   "filename",     "fname", "filepath", "filepath_or_buffer",
		"path_or_buf", "src",    "dst",          "dir",   "name",     "io",
		"target",      "source", "excel_writer", "fp",    NULL
	};
	char path[512], what[400];
	for (int k = -2; k < (int)(sizeof kws / sizeof *kws) - 1; k++) {
		uint32_t a, b;
		if (sr_call_arg(s->p, open, k < 0 ? k + 2 : 0, k < 0 ? NULL : kws[k], &a, &b) < 0)
			continue;
		int known = sr_fold_string(s->p, a, b, path, sizeof path);
		int rule;
		const char *why =
		    known >= 0 ? sr_path_problem(path, known == 1, s->cfg, &rule) : NULL;
		if (!why)
			continue;
		bool named = false; /* the path came through a variable */
		for (uint32_t j = a; j < b && !named; j++)
			named = tok(s, j)->type == SR_T_NAME && !sr_tok_is_keyword(tok(s, j));
		char arg[64], head[200];
		if (named) {
			source(s, a, b - 1, arg, sizeof arg);
			snprintf(head, sizeof head, "`%s(%s)`: the path '%.100s%s'", api, arg, path,
				 known ? "" : "...");
		} else {
			snprintf(head, sizeof head, "`%s('%.100s%s')`: the path", api, path,
				 known ? "" : "...");
		}
		snprintf(what, sizeof what,
			 "%s %s; this sandbox's code may use files under %.60s%s%.60s;", head, why,
			 s->cfg->dirs[0], s->cfg->n_dirs > 1 ? " and " : "",
			 s->cfg->n_dirs > 1 ? s->cfg->dirs[1] : "");
		flag(s, rule, api, a, what);
	}
}

static void check_loaders(scan *s, const char *q, uint32_t open)
{
	uint32_t a, b;
	if (!strcmp(q, "numpy.load") && sr_call_arg(s->p, open, 0, "allow_pickle", &a, &b) == 0 &&
	    !sr_tok_kw(tok(s, a), "False"))
		flag(s, SR_R_DESER, "numpy.load", open, "`numpy.load(..., allow_pickle=...)`");
	if ((!strcmp(q, "yaml.load") || !strcmp(q, "yaml.load_all"))) {
		char src[96];
		bool safe = false;
		if (sr_call_arg(s->p, open, 0, "Loader", &a, &b) == 0 ||
		    sr_call_arg(s->p, open, 1, NULL, &a, &b) == 0) {
			source(s, a, b - 1, src, sizeof src);
			safe = strstr(src, "SafeLoader") || strstr(src, "BaseLoader");
		}
		if (!safe)
			flag(s, SR_R_DESER, q, open, "`yaml.load` without Loader=yaml.SafeLoader");
	}
}

static void on_call(scan *s, const sr_step *st)
{
	const sr_token *t = s->p->toks.v;
	for (uint8_t i = 0; i < st->base->n; i++) {
		const sr_val *v = &st->base->v[i];
		if (v->kind != SR_V_QUAL)
			continue;
		const char *q = v->q, *fn = sr_display_name(q);
		if (!strcmp(q, "builtins.getattr") || !strcmp(q, "builtins.setattr") ||
		    !strcmp(q, "builtins.delattr") || !strcmp(q, "inspect.getattr_static") ||
		    !strcmp(q, "builtins.object.__getattribute__") ||
		    !strcmp(q, "builtins.type.__getattribute__"))
			check_reflection(s, fn, st->tok);
		else if (!strcmp(q, "operator.attrgetter") || !strcmp(q, "operator.methodcaller"))
			check_attrgetter(s, fn, st->tok);
		else if (!strcmp(q, "builtins.globals") || !strcmp(q, "builtins.locals") ||
			 !strcmp(q, "builtins.vars"))
			check_namespace(s, fn, st->tok, st->base);
		check_loaders(s, q, st->tok);
		if (sr_is_file_api(q)) {
			check_paths(s, fn, st->tok);
			return;
		}
	}
	if (st->tok >= 2 && t[st->tok - 1].type == SR_T_NAME && sr_tok_op(&t[st->tok - 2], ".") &&
	    sr_is_file_method(t[st->tok - 1].text))
		check_paths(s, t[st->tok - 1].text, st->tok);
}

/* ---- attributes and names ------------------------------------------------------------ */

static void on_attr(scan *s, const sr_step *st)
{
	const char *name = tok(s, st->tok)->text;
	char what[200];
	for (uint8_t i = 0; i < st->base->n; i++) {
		const sr_val *v = &st->base->v[i];
		if (v->kind != SR_V_QUAL)
			continue;
		if (!strcmp(name, "__dict__")) {
			snprintf(what, sizeof what, "`%s.__dict__` (a module's namespace)",
				 sr_display_name(v->q));
			flag(s, SR_R_INTROSPECT, "__dict__", st->tok, what);
		}
		if (st->store && (!strcmp(v->q, "builtins") || !strcmp(v->q, "sys"))) {
			snprintf(what, sizeof what, "assigning `%s.%s`", v->q, name);
			flag(s, SR_R_TAMPER, v->q, st->chain, what);
		}
	}
}

static void on_step(void *ctx, const sr_step *st)
{
	scan *s = ctx;
	if (st->kind == SR_STEP_NAME && sr_tok_streq(tok(s, st->tok), "__builtins__"))
		flag(s, SR_R_INTROSPECT, "__builtins__", st->tok, "`__builtins__`");
	if (st->kind == SR_STEP_ATTR)
		on_attr(s, st);
	if (st->kind == SR_STEP_CALL)
		on_call(s, st);
	flag_values(s, st->val, st->chain,
		    st->kind == SR_STEP_CALL || st->kind == SR_STEP_SUBSCRIPT ? st->close
									      : st->tok);
}

static void check_attr_name(scan *s, uint32_t i)
{
	const char *name = tok(s, i)->text;
	char what[120];
	if (!sr_is_internal_attr(name))
		return;
	snprintf(what, sizeof what, "`.%s`", name);
	flag(s, strcmp(name, "__getattribute__") ? SR_R_INTROSPECT : SR_R_REFLECT, name, i, what);
}

/* "{0.__class__.__init__.__globals__}".format(x), with adjacent literals
 * joined first: ("{0." "__class__}") is one format string. */
static void check_format_walk(scan *s, uint32_t i)
{
	char text[4096], what[160];
	size_t n = 0;
	for (uint32_t j = i; j < s->p->toks.n && tok(s, j)->type == SR_T_STRING; j++) {
		const sr_token *t = tok(s, j);
		size_t k = t->text_len < sizeof text - 1 - n ? t->text_len : sizeof text - 1 - n;
		memcpy(text + n, t->text, k);
		n += k;
	}
	text[n] = '\0';
	for (const char *c = text; *c; c++) {
		if (*c != '{')
			continue;
		if (c[1] == '{') {
			c++;
			continue;
		}
		size_t len = strcspn(c + 1, "}!:");
		const char *dunder = memmem(c + 1, len, "__", 2);
		if (dunder && (memchr(c + 1, '.', len) || memchr(c + 1, '[', len))) {
			snprintf(what, sizeof what, "the format field \"{%.*s}\"",
				 (int)(len < 60 ? len : 60), c + 1);
			flag(s, SR_R_FORMAT, "format", i, what);
			return;
		}
	}
}

static void check_imports(scan *s)
{
	const sr_program *p = s->p;
	char q[SR_QMAX], what[200];
	for (uint32_t b = 0; b < p->n_binds; b++) {
		const sr_binding *bd = &p->binds[b];
		if (bd->kind != SR_B_IMPORT || bd->imported[0] == '.')
			continue;
		const char *paths[] = { bd->imported, bd->qual };
		for (int k = 0; k < 2; k++) {
			sr_canonical(paths[k], q, sizeof q);
			int rule = sr_rule_for_name(q, s->cfg->network_off);
			if (rule >= 0) {
				snprintf(what, sizeof what, "importing `%s`", q);
				flag(s, rule, q, bd->tok, what);
				break;
			}
		}
	}
}

static void scan_tokens(scan *s)
{
	const sr_program *p = s->p;
	for (uint32_t i = 0; i < p->toks.n; i++) {
		const sr_token *t = tok(s, i);
		bool after_dot = i > 0 && sr_tok_op(tok(s, i - 1), ".");
		if (t->type == SR_T_NAME && after_dot) {
			check_attr_name(s, i);
		} else if (t->type == SR_T_NAME && !sr_tok_is_keyword(t) &&
			   (t->role == SR_ROLE_NONE || t->role == SR_ROLE_STORE)) {
			sr_vals v;
			sr_resolve_chain(p, i, on_step, s, &v);
		} else if (t->type == SR_T_NAME && t->role == SR_ROLE_BIND &&
			   sr_tok_streq(t, "__builtins__")) {
			flag(s, SR_R_INTROSPECT, "__builtins__", i, "binding `__builtins__`");
		} else if (t->type == SR_T_STRING && t->role != SR_ROLE_DOCSTRING &&
			   !(t->flags & SR_TF_BYTES) &&
			   !(i > 0 && tok(s, i - 1)->type == SR_T_STRING)) {
			check_format_walk(s, i);
		}
	}
}

/* ---- the coding declaration ------------------------------------------------------------ */

/* A PEP 263 declaration on line 1 or 2 naming anything but UTF-8 (or
 * ASCII): Python would decode the file with it, and utf-7 turns
 * harmless-looking text into code. */
static void check_coding(const char *src, size_t len, const sr_check_config *cfg, sr_check_out *out)
{
	size_t pos = len >= 3 && !memcmp(src, "\xEF\xBB\xBF", 3) ? 3 : 0;
	for (uint32_t line = 1; line <= 2 && pos < len; line++) {
		size_t end = pos;
		while (end < len && src[end] != '\n' && src[end] != '\r')
			end++;
		size_t i = pos;
		while (i < end && (src[i] == ' ' || src[i] == '\t' || src[i] == '\f'))
			i++;
		if (i < end && src[i] == '#') {
			const char *c = memmem(src + i, end - i, "coding", 6);
			if (c && c + 6 < src + end && (c[6] == ':' || c[6] == '=')) {
				const char *v = c + 7;
				while (v < src + end && (*v == ' ' || *v == '\t'))
					v++;
				char enc[64];
				size_t n = 0;
				for (; v < src + end && n < sizeof enc - 1 &&
				       (isalnum((unsigned char)*v) || *v == '-' || *v == '_' ||
					*v == '.');
				     v++)
					enc[n++] =
					    (char)(*v == '_' ? '-' : tolower((unsigned char)*v));
				enc[n] = '\0';
				if (n && strcmp(enc, "utf-8") && strcmp(enc, "utf8") &&
				    strncmp(enc, "utf-8-", 6) && strcmp(enc, "ascii") &&
				    strcmp(enc, "us-ascii"))
					sr_finding_add(out, cfg, SR_R_ENCODING, enc, line,
						       (uint32_t)(i - pos + 1),
						       "the coding declaration `%s`: %s", enc,
						       sr_rule_advice(SR_R_ENCODING));
				return;
			}
		} else if (i < end) {
			return; /* code on line 1: line 2 is not looked at */
		}
		pos = end < len && src[end] == '\r' && end + 1 < len && src[end + 1] == '\n'
			  ? end + 2
			  : end + 1;
	}
}

/* By line and column (an insertion sort: there are at most 64). */
static void sort_findings(sr_check_out *out)
{
	for (uint32_t i = 1; i < out->n; i++) {
		sr_finding f = out->f[i];
		uint32_t j = i;
		for (; j > 0 && (out->f[j - 1].line > f.line ||
				 (out->f[j - 1].line == f.line && out->f[j - 1].col > f.col));
		     j--)
			out->f[j] = out->f[j - 1];
		out->f[j] = f;
	}
}

int sr_checker_run(const char *src, size_t len, const sr_check_config *cfg, sr_arena *a,
		   sr_check_out *out)
{
	memset(out, 0, SR_CHECK_OUT_SIZE(0));
	out->magic = SR_CHECK_MAGIC;
	check_coding(src, len, cfg, out);
	sr_program p = { .src = src, .arena = a };
	sr_tok_error e = { 0 };
	int rc = sr_tokenize(src, len, a, &p.toks, &e);
	if (rc == -1) {
		sr_finding_add(out, cfg, SR_R_SYNTAX, "", e.line, e.col, "%s: %s", e.msg,
			       sr_rule_advice(SR_R_SYNTAX));
		return 0;
	}
	if (rc < 0 || sr_parse(&p) < 0 || sr_resolve_init(&p) < 0) {
		out->status = -2;
		return -2;
	}
	scan s = { &p, cfg, out };
	check_imports(&s);
	scan_tokens(&s);
	sort_findings(out);
	return 0;
}

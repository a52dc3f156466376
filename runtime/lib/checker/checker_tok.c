/* The Python tokenizer (see checker_tok.h). It runs twice over the
 * source: once to count tokens and names, then to fill an array of exactly
 * that size from the arena, so memory is linear in the input. */
#include "checker_tok.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "checker_names_table.h"
#include "checker_nfkc.h"

#define MAXLEVEL  200 /* nesting of brackets and f-strings, as CPython */
#define MAXINDENT 100 /* as CPython */

enum { K_FSTR = 'f', K_FIELD = 'b' };

struct level {
	char kind; /* ( [ { or K_FSTR, K_FIELD */
	char quote;
	uint8_t triple, raw, spec;
	uint32_t line, col; /* where it opened, for errors */
};

struct intern_slot {
	const char *s;
	uint32_t len, hash;
};

typedef struct lexer {
	const char *s;
	size_t len, pos;
	uint32_t line;
	size_t line_start;
	size_t col_pos; /* column cache: col is the column of col_pos */
	uint32_t col;
	struct level lv[MAXLEVEL];
	int n_lv;
	int indents[MAXINDENT + 1];
	int n_ind;
	int pending_dedents;
	int at_bol;          /* at the start of a logical line */
	int line_has_tokens; /* since the last NEWLINE */
	uint32_t names;      /* NAME tokens so far */
	sr_arena *a;         /* NULL while counting */
	struct intern_slot *in;
	size_t in_cap;
	int oom;
	sr_tok_error *err;
} lexer;

static const char *const ops3[] = { "**=", "//=", ">>=", "<<=", "...", NULL };
static const char *const ops2[] = { "!=", "%=", "&=", "**", "*=", "+=", "-=", "->", "//", "/=",
				    ":=", "<<", "<=", "==", ">=", ">>", "@=", "^=", "|=", NULL };
static const char *const ops1[] = { "(", ")", "[", "]", "{", "}", ":", ",", ";", "+", "-", "*", "/",
				    "|", "&", "<", ">", "=", ".", "%", "~", "^", "@", "!", NULL };

static const char *const keywords[] = {
	/* sorted */
	"False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
	"class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
	"from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
	"or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield",    NULL,
};

/* keywords is sorted (by bytes): a binary search, for every name. */
static int is_keyword(const char *s, size_t n)
{
	size_t lo = 0, hi = sizeof keywords / sizeof *keywords - 1; /* without the NULL */
	if (n < 2 || n > 8)
		return 0;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strncmp(keywords[mid], s, n);
		if (c == 0 && keywords[mid][n] != '\0')
			c = 1; /* s is a prefix of the keyword: less than it */
		if (c == 0)
			return 1;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* ---- positions and errors ---------------------------------------------- */

static uint32_t col_of(lexer *lx, size_t pos)
{
	if (lx->col_pos < lx->line_start || pos < lx->col_pos) {
		lx->col_pos = lx->line_start;
		lx->col = 1;
	}
	for (; lx->col_pos < pos && lx->col_pos < lx->len; lx->col_pos++)
		if (((unsigned char)lx->s[lx->col_pos] & 0xC0) != 0x80)
			lx->col++;
	return lx->col;
}

static int fail_at(lexer *lx, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_at(lexer *lx, uint32_t line, uint32_t col, const char *fmt, ...)
{
	va_list ap;
	lx->err->line = line;
	lx->err->col = col;
	va_start(ap, fmt);
	vsnprintf(lx->err->msg, sizeof lx->err->msg, fmt, ap);
	va_end(ap);
	return -1;
}

static int fail(lexer *lx, const char *msg)
{
	return fail_at(lx, lx->line, col_of(lx, lx->pos), "%s", msg);
}

static int is_nl(char c)
{
	return c == '\n' || c == '\r';
}

static void eat_newline(lexer *lx)
{
	if (lx->s[lx->pos] == '\r' && lx->pos + 1 < lx->len && lx->s[lx->pos + 1] == '\n')
		lx->pos++;
	lx->pos++;
	lx->line++;
	lx->line_start = lx->pos;
}

static char at(const lexer *lx, size_t pos)
{
	return pos < lx->len ? lx->s[pos] : '\0';
}

/* ---- interning and decoding ----------------------------------------------- */

static uint32_t hash(const char *s, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h;
}

static const char *intern(lexer *lx, const char *s, size_t n)
{
	uint32_t h = hash(s, n);
	size_t i = h & (lx->in_cap - 1);
	for (;; i = (i + 1) & (lx->in_cap - 1)) {
		struct intern_slot *e = &lx->in[i];
		if (!e->s) {
			char *copy = sr_arena_alloc(lx->a, n + 1);
			if (!copy)
				return NULL;
			memcpy(copy, s, n);
			*e = (struct intern_slot){ copy, (uint32_t)n, h };
			return copy;
		}
		if (e->hash == h && e->len == n && memcmp(e->s, s, n) == 0)
			return e->s;
	}
}

static size_t put_utf8(unsigned cp, char *o)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xC0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xE0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | ((cp >> 18) & 0x07));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	o[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/* Read exactly n hex digits at s; -1 if they are not there. */
static long hex_digits(const char *s, size_t left, size_t n)
{
	long v = 0;
	if (left < n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int d = hexval(s[i]);
		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	return v;
}

/* The ASCII character named by \N{name} (name[0..n)), compared without
 * case as Python does; -1 for any other name (a non-ASCII character, or
 * none: Python would reject it). */
static int ascii_named(const char *name, size_t n)
{
	size_t lo = 0, hi = sizeof sr_name_table / sizeof *sr_name_table;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2, i = 0;
		const char *e = sr_name_table[mid].name;
		int d = 0;
		for (; i < n && e[i]; i++) {
			char c = name[i] >= 'a' && name[i] <= 'z' ? (char)(name[i] - 32) : name[i];
			if ((d = (unsigned char)c - (unsigned char)e[i]) != 0)
				break;
		}
		if (!d)
			d = i < n ? 1 : e[i] ? -1 : 0;
		if (!d)
			return sr_name_table[mid].ch;
		if (d < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -1;
}

/* One escape after a backslash at s[0] (s[1] is the escaped char).
 * Writes its value to o; returns the source bytes used, and the bytes
 * written in *w. A sequence it cannot decode is copied as it is. */
static size_t escape(const char *s, size_t left, int bytes, char *o, size_t *w, int *opaque)
{
	static const char simple[] = "\\\\''\"\"a\ab\bf\fn\nr\rt\tv\v";
	char c = left > 1 ? s[1] : '\0';
	*w = 0;
	if (left < 2) {
		o[(*w)++] = '\\';
		return 1;
	}
	if (c == '\n' || c == '\r')
		return c == '\r' && left > 2 && s[2] == '\n' ? 3 : 2;
	for (size_t i = 0; simple[i]; i += 2)
		if (simple[i] == c) {
			o[(*w)++] = simple[i + 1];
			return 2;
		}
	if (c >= '0' && c <= '7') {
		unsigned v = 0;
		size_t n = 1;
		while (n <= 3 && n < left && s[n] >= '0' && s[n] <= '7')
			v = v * 8 + (unsigned)(s[n++] - '0');
		if (bytes)
			o[(*w)++] = (char)(v & 0xFF);
		else
			*w = put_utf8(v, o);
		return n;
	}
	size_t digits = c == 'x' ? 2 : !bytes && c == 'u' ? 4 : !bytes && c == 'U' ? 8 : 0;
	long v = digits ? hex_digits(s + 2, left - 2, digits) : -1;
	if (v >= 0 && v <= 0x10FFFF) {
		if (bytes)
			o[(*w)++] = (char)v;
		else
			*w = put_utf8((unsigned)v, o);
		return 2 + digits;
	}
	if (!bytes && c == 'N' && left > 3 && s[2] == '{') {
		const char *close = memchr(s + 3, '}', left - 3 < 128 ? left - 3 : 128);
		int ch = close ? ascii_named(s + 3, (size_t)(close - s - 3)) : -1;
		if (ch >= 0) {
			o[(*w)++] = (char)ch;
			return (size_t)(close - s) + 1;
		}
	}
	if (!bytes && c == 'N')
		*opaque = 1; /* the name of a non-ASCII character (or of none) */
	else if (digits)
		*opaque = 1; /* Python rejects a truncated escape */
	o[0] = '\\';
	o[1] = c;
	*w = 2;
	return 2;
}

/* Decode a literal body into the arena. fmode: an f-string part, where
 * {{ and }} stand for { and }. */
static const char *decode(lexer *lx, size_t from, size_t to, int flags, int fmode,
			  uint32_t *out_len, uint8_t *tflags)
{
	const char *s = lx->s + from;
	size_t n = to - from, o = 0;
	char *out = sr_arena_alloc(lx->a, n + 1);
	int opaque = 0;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n;) {
		if (s[i] == '\\' && !(flags & SR_TF_RAW)) {
			size_t w;
			i += escape(s + i, n - i, flags & SR_TF_BYTES, out + o, &w, &opaque);
			o += w;
		} else if (fmode && (s[i] == '{' || s[i] == '}') && i + 1 < n && s[i + 1] == s[i]) {
			out[o++] = s[i];
			i += 2;
		} else {
			out[o++] = s[i++];
		}
	}
	out[o] = '\0';
	*out_len = (uint32_t)o;
	if (opaque)
		*tflags |= SR_TF_OPAQUE;
	return out;
}

/* ---- emitting ------------------------------------------------------------ */

static int emit(lexer *lx, sr_token *t, sr_tok_type type, size_t start, uint32_t line, uint32_t col)
{
	t->type = (uint8_t)type;
	t->start = (uint32_t)start;
	t->len = (uint32_t)(lx->pos - start);
	t->line = line;
	t->col = col;
	t->match = SR_NO_MATCH;
	if (type != SR_T_NEWLINE && type != SR_T_INDENT && type != SR_T_DEDENT && type != SR_T_END)
		lx->line_has_tokens = 1;
	return 1;
}

static int emit_here(lexer *lx, sr_token *t, sr_tok_type type, size_t start)
{
	return emit(lx, t, type, start, lx->line, col_of(lx, start));
}

static int set_text(lexer *lx, sr_token *t, const char *text, uint32_t len)
{
	if (lx->a && !text) {
		lx->oom = 1;
		return -1;
	}
	t->text = text;
	t->text_len = len;
	return 1;
}

/* ---- levels --------------------------------------------------------------- */

static struct level *top(lexer *lx)
{
	return lx->n_lv ? &lx->lv[lx->n_lv - 1] : NULL;
}

static int push(lexer *lx, struct level l)
{
	if (lx->n_lv == MAXLEVEL)
		return fail(lx, "too many nested parentheses");
	lx->lv[lx->n_lv++] = l;
	return 0;
}

/* The f-string a format spec or literal part belongs to. */
static struct level *fstring_of(lexer *lx)
{
	for (int i = lx->n_lv - 1; i >= 0; i--)
		if (lx->lv[i].kind == K_FSTR)
			return &lx->lv[i];
	return NULL;
}

/* ---- strings ---------------------------------------------------------------- */

static int is_prefix(const char *s, size_t n)
{
	char a = n > 0 ? (char)(s[0] | 0x20) : 0, b = n > 1 ? (char)(s[1] | 0x20) : 0;
	if (n == 1)
		return strchr("rubft", a) != NULL;
	if (n == 2)
		return (a == 'r' && strchr("bft", b)) || (b == 'r' && strchr("bft", a));
	return 0;
}

static int prefix_flags(const char *s, size_t n, int *fstring)
{
	int flags = 0;
	*fstring = 0;
	for (size_t i = 0; i < n; i++) {
		char c = (char)(s[i] | 0x20);
		flags |= c == 'r' ? SR_TF_RAW : c == 'b' ? SR_TF_BYTES : 0;
		*fstring |= c == 'f' || c == 't';
	}
	return flags;
}

static int closes(const lexer *lx, size_t pos, char quote, int triple)
{
	return at(lx, pos) == quote &&
	       (!triple || (at(lx, pos + 1) == quote && at(lx, pos + 2) == quote));
}

static int unterminated(lexer *lx, uint32_t line, uint32_t col, int triple, const char *what)
{
	return fail_at(lx, line, col, "unterminated %s%s literal (detected at line %u)",
		       triple ? "triple-quoted " : "", what, lx->line);
}

static int lex_string(lexer *lx, sr_token *t, size_t start, size_t qpos)
{
	uint32_t line = lx->line, col = col_of(lx, start);
	int fstring, flags = prefix_flags(lx->s + start, qpos - start, &fstring);
	char quote = lx->s[qpos];
	int triple = at(lx, qpos + 1) == quote && at(lx, qpos + 2) == quote;
	lx->pos = qpos + (triple ? 3 : 1);
	if (fstring) {
		struct level l = {
			K_FSTR, quote, (uint8_t)triple, (uint8_t) !!(flags & SR_TF_RAW), 0,
			line,   col
		};
		if (push(lx, l) < 0)
			return -1;
		emit(lx, t, SR_T_FSTART, start, line, col);
		t->flags = (uint8_t)flags;
		return set_text(lx, t, lx->a ? lx->s + start : NULL, (uint32_t)(lx->pos - start));
	}
	size_t body = lx->pos;
	for (;;) {
		if (lx->pos >= lx->len)
			return unterminated(lx, line, col, triple, "string");
		char c = lx->s[lx->pos];
		if (closes(lx, lx->pos, quote, triple))
			break;
		if (c == '\\') {
			lx->pos++;
			if (lx->pos < lx->len && is_nl(lx->s[lx->pos]))
				eat_newline(lx);
			else if (lx->pos < lx->len)
				lx->pos++;
		} else if (is_nl(c)) {
			if (!triple)
				return unterminated(lx, line, col, 0, "string");
			eat_newline(lx);
		} else {
			lx->pos++;
		}
	}
	size_t body_end = lx->pos;
	lx->pos += triple ? 3 : 1;
	emit(lx, t, SR_T_STRING, start, line, col);
	t->flags = (uint8_t)flags;
	if (!lx->a)
		return 1;
	uint32_t n;
	const char *text = decode(lx, body, body_end, flags, 0, &n, &t->flags);
	return set_text(lx, t, text, n);
}

static int emit_middle(lexer *lx, sr_token *t, size_t start, uint32_t line, uint32_t col,
		       const struct level *fs)
{
	emit(lx, t, SR_T_FMIDDLE, start, line, col);
	t->flags = fs->raw ? SR_TF_RAW : 0;
	if (!lx->a)
		return 1;
	uint32_t n;
	const char *text = decode(lx, start, lx->pos, t->flags, 1, &n, &t->flags);
	return set_text(lx, t, text, n);
}

static int emit_brace(lexer *lx, sr_token *t, size_t start, const char *op)
{
	emit_here(lx, t, SR_T_OP, start);
	t->flags = SR_TF_FBRACE;
	return set_text(lx, t, op, (uint32_t)strlen(op));
}

/* A backslash inside an f-string's literal part: skip what it escapes,
 * but never a brace (in Python 3.12 "\{" is a backslash and a field). */
static void fstring_backslash(lexer *lx, const struct level *fs)
{
	char c = at(lx, lx->pos + 1);
	lx->pos++;
	if (is_nl(c)) {
		eat_newline(lx);
	} else if (c == fs->quote || c == '\\') {
		lx->pos++;
	} else if (c == 'N' && !fs->raw && at(lx, lx->pos + 1) == '{') {
		while (lx->pos < lx->len && lx->s[lx->pos] != '}' && !is_nl(lx->s[lx->pos]))
			lx->pos++;
		if (lx->pos < lx->len && lx->s[lx->pos] == '}')
			lx->pos++;
	}
}

/* The literal part of an f-string, or of a format spec inside a field. */
static int lex_fliteral(lexer *lx, sr_token *t)
{
	struct level *cur = top(lx), *fs = fstring_of(lx);
	int spec = cur->kind == K_FIELD;
	size_t start = lx->pos;
	uint32_t line = lx->line, col = col_of(lx, start);
	for (;;) {
		if (lx->pos >= lx->len)
			return unterminated(lx, fs->line, fs->col, fs->triple, "f-string");
		char c = lx->s[lx->pos];
		if (closes(lx, lx->pos, fs->quote, fs->triple)) {
			if (spec)
				return fail(lx, "f-string: expecting '}'");
			if (lx->pos > start)
				return emit_middle(lx, t, start, line, col, fs);
			lx->pos += fs->triple ? 3 : 1;
			lx->n_lv--;
			emit(lx, t, SR_T_FEND, start, line, col);
			return set_text(lx, t, lx->a ? lx->s + start : NULL, t->len);
		}
		if (c == '{' && !spec && at(lx, lx->pos + 1) == '{') {
			lx->pos += 2;
		} else if (c == '{') {
			if (lx->pos > start)
				return emit_middle(lx, t, start, line, col, fs);
			if (push(lx, (struct level){ K_FIELD, 0, 0, 0, 0, line, col }) < 0)
				return -1;
			lx->pos++;
			return emit_brace(lx, t, start, "{");
		} else if (c == '}' && spec) {
			if (lx->pos > start)
				return emit_middle(lx, t, start, line, col, fs);
			lx->n_lv--;
			lx->pos++;
			return emit_brace(lx, t, start, "}");
		} else if (c == '}') {
			if (at(lx, lx->pos + 1) != '}')
				return fail(lx, "f-string: single '}' is not allowed");
			lx->pos += 2;
		} else if (c == '\\' && !(fs->raw && at(lx, lx->pos + 1) != fs->quote)) {
			fstring_backslash(lx, fs);
		} else if (is_nl(c)) {
			if (!fs->triple)
				return unterminated(lx, fs->line, fs->col, 0, "f-string");
			eat_newline(lx);
		} else {
			lx->pos++;
		}
	}
}

/* ---- names, numbers, operators ---------------------------------------------------- */

static int is_ident_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c >= 0x80;
}

static int lex_name(lexer *lx, sr_token *t)
{
	size_t start = lx->pos;
	while (lx->pos < lx->len && is_ident_char((unsigned char)lx->s[lx->pos]))
		lx->pos++;
	char q = at(lx, lx->pos);
	if ((q == '"' || q == '\'') && is_prefix(lx->s + start, lx->pos - start))
		return lex_string(lx, t, start, lx->pos);
	emit_here(lx, t, SR_T_NAME, start);
	lx->names++;
	if (!lx->a)
		return 1;
	size_t n = lx->pos - start;
	int ascii = 1;
	for (size_t i = start; i < lx->pos; i++)
		ascii &= (unsigned char)lx->s[i] < 0x80;
	if (ascii) {
		if (is_keyword(lx->s + start, n))
			t->flags |= SR_TF_KEYWORD;
		return set_text(lx, t, intern(lx, lx->s + start, n), (uint32_t)n);
	}
	char *norm = sr_arena_alloc(lx->a, 2 * n + 1);
	if (!norm)
		return set_text(lx, t, NULL, 0);
	size_t nn = sr_nfkc_identifier(lx->s + start, n, norm);
	return set_text(lx, t, intern(lx, norm, nn), (uint32_t)nn);
}

static void digits(lexer *lx, int hex)
{
	for (char c; (c = at(lx, lx->pos)) &&
		     ((c >= '0' && c <= '9') || c == '_' || (hex && hexval(c) >= 0));)
		lx->pos++;
}

static int lex_number(lexer *lx, sr_token *t)
{
	size_t start = lx->pos;
	char c1 = (char)(at(lx, start + 1) | 0x20);
	if (at(lx, start) == '0' && (c1 == 'x' || c1 == 'o' || c1 == 'b')) {
		lx->pos += 2;
		digits(lx, c1 == 'x');
	} else {
		digits(lx, 0);
		if (at(lx, lx->pos) == '.') {
			lx->pos++;
			digits(lx, 0);
		}
		char e = (char)(at(lx, lx->pos) | 0x20), d = at(lx, lx->pos + 1);
		if (e == 'e' && ((d >= '0' && d <= '9') ||
				 ((d == '+' || d == '-') && at(lx, lx->pos + 2) >= '0' &&
				  at(lx, lx->pos + 2) <= '9'))) {
			lx->pos += 2;
			digits(lx, 0);
		}
		if ((at(lx, lx->pos) | 0x20) == 'j')
			lx->pos++;
	}
	emit_here(lx, t, SR_T_NUMBER, start);
	return set_text(lx, t, lx->a ? lx->s + start : NULL, t->len);
}

static const char *match_op(const lexer *lx)
{
	static const char ops1_chars[] = "()[]{}:,;+-*/|&<>=.%~^@!"; /* ops1, in order */
	const char *s = lx->s + lx->pos;
	/* Most operators are one character: the longer ones end in one of these. */
	if (lx->pos + 1 < lx->len && s[1] && strchr("=*/<>.", s[1])) {
		const char *const *tables[] = { ops3, ops2 };
		for (size_t k = 0; k < 2; k++) {
			size_t n = 3 - k;
			if (lx->pos + n > lx->len)
				continue;
			for (const char *const *op = tables[k]; *op; op++)
				if ((*op)[0] == s[0] && memcmp(s, *op, n) == 0)
					return *op;
		}
	}
	const char *c = s[0] ? strchr(ops1_chars, s[0]) : NULL;
	return c ? ops1[c - ops1_chars] : NULL;
}

static int close_bracket(lexer *lx, char c)
{
	struct level *l = top(lx);
	char want = c == ')' ? '(' : c == ']' ? '[' : '{';
	if (!l)
		return fail_at(lx, lx->line, col_of(lx, lx->pos), "unmatched '%c'", c);
	if (l->kind != want)
		return fail_at(
		    lx, lx->line, col_of(lx, lx->pos),
		    "closing parenthesis '%c' does not match opening parenthesis '%c' on line %u",
		    c, l->kind == K_FIELD ? '{' : l->kind, l->line);
	lx->n_lv--;
	return 0;
}

static int lex_op(lexer *lx, sr_token *t)
{
	size_t start = lx->pos;
	struct level *l = top(lx);
	char c = lx->s[start];
	if (l && l->kind == K_FIELD) {
		/* The top level of an f-string field: }, a format spec, a conversion. */
		if (c == '}' || c == ':' || (c == '!' && at(lx, start + 1) != '=')) {
			lx->pos++;
			if (c == '}')
				lx->n_lv--;
			else if (c == ':')
				l->spec = 1;
			return emit_brace(lx, t, start, c == '}' ? "}" : c == ':' ? ":" : "!");
		}
	}
	const char *op = match_op(lx);
	if (!op)
		return fail_at(lx, lx->line, col_of(lx, start), "invalid character '%c' (U+%04X)",
			       c, (unsigned char)c);
	uint32_t col = col_of(lx, start);
	if (c == '(' || c == '[' || c == '{') {
		if (push(lx, (struct level){ c, 0, 0, 0, 0, lx->line, col }) < 0)
			return -1;
	} else if ((c == ')' || c == ']' || c == '}') && close_bracket(lx, c) < 0) {
		return -1;
	}
	lx->pos += strlen(op);
	emit(lx, t, SR_T_OP, start, lx->line, col);
	return set_text(lx, t, op, (uint32_t)strlen(op));
}

/* ---- lines ------------------------------------------------------------------ */

static void skip_comment(lexer *lx)
{
	while (lx->pos < lx->len && !is_nl(lx->s[lx->pos]))
		lx->pos++;
}

/* At the start of a logical line: skip blank and comment lines, then
 * compare the indentation with the stack. Returns 1 with an INDENT, 0
 * otherwise (pending DEDENTs may be set), -1 on an error. */
static int lex_indent(lexer *lx, sr_token *t)
{
	for (;;) {
		size_t p = lx->pos;
		int width = 0;
		for (; p < lx->len; p++) {
			char c = lx->s[p];
			if (c == ' ')
				width++;
			else if (c == '\t')
				width = (width / 8 + 1) * 8;
			else if (c == '\f')
				width = 0;
			else
				break;
		}
		lx->pos = p;
		if (p >= lx->len)
			return 0;
		if (lx->s[p] == '#')
			skip_comment(lx);
		if (lx->pos < lx->len && is_nl(lx->s[lx->pos])) {
			eat_newline(lx);
			continue;
		}
		if (lx->pos >= lx->len)
			return 0;
		lx->at_bol = 0;
		if (width > lx->indents[lx->n_ind]) {
			if (lx->n_ind == MAXINDENT)
				return fail(lx, "too many levels of indentation");
			lx->indents[++lx->n_ind] = width;
			return emit_here(lx, t, SR_T_INDENT, lx->line_start);
		}
		while (width < lx->indents[lx->n_ind]) {
			lx->n_ind--;
			lx->pending_dedents++;
		}
		if (width != lx->indents[lx->n_ind])
			return fail(lx, "unindent does not match any outer indentation level");
		return 0;
	}
}

static int lex_eof(lexer *lx, sr_token *t)
{
	struct level *l = top(lx);
	if (l && (l->kind == K_FSTR || l->kind == K_FIELD)) {
		struct level *fs = fstring_of(lx);
		return unterminated(lx, fs->line, fs->col, fs->triple, "f-string");
	}
	if (l)
		return fail_at(lx, l->line, l->col, "'%c' was never closed", l->kind);
	if (lx->line_has_tokens) {
		lx->line_has_tokens = 0;
		return emit_here(lx, t, SR_T_NEWLINE, lx->pos);
	}
	if (lx->n_ind > 0) {
		lx->n_ind--;
		return emit_here(lx, t, SR_T_DEDENT, lx->pos);
	}
	emit_here(lx, t, SR_T_END, lx->pos);
	return 0;
}

/* The next token: 1, 0 at the end (t is END), -1 on an error. */
static int lex_next(lexer *lx, sr_token *t)
{
	for (;;) {
		memset(t, 0, sizeof *t);
		struct level *l = top(lx);
		if (lx->pending_dedents) {
			lx->pending_dedents--;
			return emit_here(lx, t, SR_T_DEDENT, lx->pos);
		}
		if (l && (l->kind == K_FSTR || (l->kind == K_FIELD && l->spec)))
			return lex_fliteral(lx, t);
		if (lx->at_bol && !l) {
			int rc = lex_indent(lx, t);
			if (rc != 0)
				return rc;
			if (lx->pending_dedents)
				continue;
		}
		while (lx->pos < lx->len &&
		       (lx->s[lx->pos] == ' ' || lx->s[lx->pos] == '\t' || lx->s[lx->pos] == '\f'))
			lx->pos++;
		if (lx->pos >= lx->len)
			return lex_eof(lx, t);
		char c = lx->s[lx->pos];
		if (c == '\\') {
			if (!is_nl(at(lx, lx->pos + 1)))
				return fail(
				    lx,
				    lx->pos + 1 >= lx->len
					? "unexpected EOF while parsing"
					: "unexpected character after line continuation character");
			lx->pos++;
			eat_newline(lx);
			continue;
		}
		if (c == '#') {
			skip_comment(lx);
			continue;
		}
		if (is_nl(c)) {
			size_t start = lx->pos;
			uint32_t line = lx->line, col = col_of(lx, start);
			eat_newline(lx);
			if (l)
				continue; /* inside brackets: not a logical line end */
			lx->at_bol = 1;
			if (!lx->line_has_tokens)
				continue;
			lx->line_has_tokens = 0;
			emit(lx, t, SR_T_NEWLINE, start, line, col);
			t->len = 0;
			return 1;
		}
		if (is_ident_char((unsigned char)c) && !(c >= '0' && c <= '9'))
			return lex_name(lx, t);
		if ((c >= '0' && c <= '9') ||
		    (c == '.' && at(lx, lx->pos + 1) >= '0' && at(lx, lx->pos + 1) <= '9'))
			return lex_number(lx, t);
		if (c == '"' || c == '\'')
			return lex_string(lx, t, lx->pos, lx->pos);
		return lex_op(lx, t);
	}
}

/* ---- the whole source ----------------------------------------------------------- */

static void lexer_init(lexer *lx, const char *src, size_t len, sr_arena *a, sr_tok_error *err)
{
	memset(lx, 0, sizeof *lx);
	lx->s = src;
	lx->len = len;
	lx->line = 1;
	lx->col = 1;
	lx->at_bol = 1;
	lx->a = a;
	lx->err = err;
	if (len >= 3 && memcmp(src, "\xEF\xBB\xBF", 3) == 0)
		lx->pos = lx->line_start = lx->col_pos = 3;
}

/* Count the tokens (and names, for the intern table). */
static int count(const char *src, size_t len, sr_tok_error *err, uint32_t *n_tok, uint32_t *n_names)
{
	lexer lx;
	sr_token t;
	int rc;
	size_t n = 0;
	lexer_init(&lx, src, len, NULL, err);
	while ((rc = lex_next(&lx, &t)) > 0)
		n++;
	if (rc < 0)
		return -1;
	if (n + 1 > UINT32_MAX / 2)
		return -2;
	*n_tok = (uint32_t)n + 1;
	*n_names = lx.names;
	return 0;
}

static int match_brackets(sr_tokens *out, sr_arena *a)
{
	uint32_t *stack = sr_arena_array(a, MAXLEVEL + 1, sizeof *stack);
	uint32_t n = 0;
	if (!stack)
		return -2;
	for (uint32_t i = 0; i < out->n; i++) {
		sr_token *t = &out->v[i];
		int open = t->type == SR_T_FSTART || sr_tok_op(t, "(") || sr_tok_op(t, "[") ||
			   sr_tok_op(t, "{");
		int close = t->type == SR_T_FEND || sr_tok_op(t, ")") || sr_tok_op(t, "]") ||
			    sr_tok_op(t, "}");
		if (open && n <= MAXLEVEL) {
			stack[n++] = i;
		} else if (close && n > 0) {
			uint32_t o = stack[--n];
			out->v[o].match = i;
			t->match = o;
		}
	}
	return 0;
}

int sr_tokenize(const char *src, size_t len, sr_arena *a, sr_tokens *out, sr_tok_error *err)
{
	lexer lx;
	uint32_t n_tok, n_names;
	int rc = count(src, len, err, &n_tok, &n_names);
	if (rc < 0)
		return rc;
	size_t cap = 16;
	while (cap < 2 * (size_t)n_names + 16)
		cap *= 2;
	out->v = sr_arena_array(a, n_tok, sizeof *out->v);
	lexer_init(&lx, src, len, a, err);
	lx.in = sr_arena_array(a, cap, sizeof *lx.in);
	lx.in_cap = cap;
	if (!out->v || !lx.in)
		return -2;
	out->n = 0;
	while (out->n < n_tok) {
		rc = lex_next(&lx, &out->v[out->n]);
		if (rc < 0)
			return lx.oom ? -2 : -1;
		out->n++;
		if (rc == 0)
			break;
	}
	return match_brackets(out, a);
}

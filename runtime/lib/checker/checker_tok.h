/* A Python 3 tokenizer (the 3.12 grammar, a superset of the sandbox's
 * 3.11): string prefixes, triple quotes, f-strings split into their
 * literal parts and nested expressions (PEP 701), bytes, comments, line
 * continuations, INDENT/DEDENT, identifiers normalised with NFKC. Comments
 * and non-logical newlines are dropped: the rules never need them. */
#ifndef SR_CHECKER_TOK_H
#define SR_CHECKER_TOK_H

#include <stddef.h>
#include <stdint.h>

#include "checker_arena.h"

typedef enum sr_tok_type {
	SR_T_END = 0,
	SR_T_NAME,
	SR_T_NUMBER,
	SR_T_STRING, /* text: the decoded value */
	SR_T_OP,     /* text: the operator */
	SR_T_NEWLINE,
	SR_T_INDENT,
	SR_T_DEDENT,
	SR_T_FSTART,  /* f"  (text: the prefix and quote) */
	SR_T_FMIDDLE, /* a literal part of an f-string, decoded */
	SR_T_FEND,
} sr_tok_type;

enum {
	SR_TF_BYTES = 1,    /* b"..." */
	SR_TF_RAW = 2,      /* r"..." */
	SR_TF_OPAQUE = 4,   /* the value has escapes left undecoded (\N{...}) */
	SR_TF_FBRACE = 8,   /* a { or } (or the : and ! inside) of an f-string field */
	SR_TF_KEYWORD = 16, /* a NAME that is a hard keyword */
};

#define SR_NO_MATCH UINT32_MAX

typedef struct sr_token {
	uint8_t type, flags;
	uint16_t role;       /* set by the parser */
	uint32_t start, len; /* bytes of the source */
	uint32_t line, col;  /* 1-based; col counts code points */
	uint32_t match;      /* brackets, FSTART/FEND: index of the partner */
	uint32_t scope;      /* set by the parser */
	uint32_t text_len;
	const char *text; /* NAME: normalised and interned; see the types */
} sr_token;

typedef struct sr_tok_error {
	uint32_t line, col;
	char msg[160];
} sr_tok_error;

typedef struct sr_tokens {
	sr_token *v;
	uint32_t n;
} sr_tokens;

/* Tokenize src[0..len). Returns 0, -1 on a syntax error (err says where
 * and what, as Python would), -2 when the arena is exhausted. */
int sr_tokenize(const char *src, size_t len, sr_arena *a, sr_tokens *out, sr_tok_error *err);

/* t's text equals s. */
static inline int sr_tok_streq(const sr_token *t, const char *s)
{
	const char *x = t->text;
	uint32_t i = 0;
	if (!x)
		return 0;
	for (; i < t->text_len; i++)
		if (s[i] != x[i])
			return 0;
	return s[i] == '\0';
}
static inline int sr_tok_op(const sr_token *t, const char *op)
{
	return t->type == SR_T_OP && sr_tok_streq(t, op);
}
static inline int sr_tok_kw(const sr_token *t, const char *kw)
{
	return t->type == SR_T_NAME && sr_tok_streq(t, kw);
}
/* Python keywords (hard ones: soft keywords like match are names). */
static inline int sr_tok_is_keyword(const sr_token *t)
{
	return t->type == SR_T_NAME && (t->flags & SR_TF_KEYWORD);
}

#endif

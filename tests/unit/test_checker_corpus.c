/* The checker's corpus (tests/checker/unsafe.txt, safe.txt): every unsafe snippet is
 * rejected with the findings it lists (rule and line), every safe one is
 * clean, and the known evasions (MISS) stay clean until a rule catches
 * them. Prints the detection and false-positive rates docs/checker.md
 * reports. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "saferun.h"

struct snippet {
	char name[96];
	char expect[256]; /* "SR101@2 SR201@3", "MISS" or "" */
	char *code;
	size_t len;
};

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	if (buf)
		buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Split text at "### name  expectations" lines; the snippet is what
 * follows, up to the next header, without trailing blank lines. */
static size_t parse(char *text, struct snippet *out, size_t max)
{
	size_t n = 0;
	char *p = strstr(text, "\n### ");
	while (p && n < max) {
		char *hdr = p + 5, *eol = strchr(hdr, '\n');
		if (!eol)
			break;
		*eol = '\0';
		struct snippet *s = &out[n++];
		memset(s, 0, sizeof *s);
		sscanf(hdr, "%95s %255[^\n]", s->name, s->expect);
		s->code = eol + 1;
		p = strstr(s->code, "\n### ");
		char *end = p ? p + 1 : s->code + strlen(s->code);
		while (end > s->code && (end[-1] == '\n'))
			end--;
		s->len = (size_t)(end - s->code);
	}
	return n;
}

static int has(const sr_check_result *r, const char *rule, unsigned line)
{
	for (size_t i = 0; i < r->n_findings; i++)
		if (!strcmp(r->findings[i].rule, rule) && r->findings[i].line == line)
			return 1;
	return 0;
}

static void show(const struct snippet *s, const sr_check_result *r)
{
	fprintf(stderr, "  %s (want %s):\n", s->name, s->expect[0] ? s->expect : "clean");
	for (size_t i = 0; i < r->n_findings; i++)
		fprintf(stderr, "    %s@%u:%u %s\n", r->findings[i].rule, r->findings[i].line,
			r->findings[i].col, r->findings[i].message);
}

/* Returns 1 when the snippet's verdict and lines are as listed. */
static int run(const struct snippet *s, int *rejected)
{
	char code[8192];
	sr_check_result r;
	sr_error err = { 0 };
	snprintf(code, sizeof code, "%.*s\n", (int)s->len, s->code);
	sr_check_request req = { .code = code, .code_size = strlen(code), .in_process = true };
	if (sr_check(&req, &r, &err) < 0) {
		fprintf(stderr, "%s: %s\n", s->name, err.msg);
		return 0;
	}
	*rejected = r.n_findings > 0;
	int ok = 1;
	if (!s->expect[0] || !strcmp(s->expect, "MISS")) {
		ok = r.n_findings == 0;
	} else {
		char copy[256], *save = NULL;
		snprintf(copy, sizeof copy, "%s", s->expect);
		for (char *e = strtok_r(copy, " ", &save); e; e = strtok_r(NULL, " ", &save)) {
			char rule[8];
			unsigned line;
			if (sscanf(e, "%7[^@]@%u", rule, &line) != 2 || !has(&r, rule, line))
				ok = 0;
		}
	}
	if (!ok)
		show(s, &r);
	sr_check_result_free(&r);
	return ok;
}

static void corpus(const char *file, int unsafe)
{
	static struct snippet snippets[512];
	char path[512];
	snprintf(path, sizeof path, "%s/%s", CHECKER_CORPUS_DIR, file);
	char *text = slurp(path);
	CHECK(text != NULL);
	if (!text)
		return;
	size_t n = parse(text, snippets, 512), rejected = 0, misses = 0;
	for (size_t i = 0; i < n; i++) {
		int rej = 0, ok = run(&snippets[i], &rej);
		CHECK(ok); /* counts the wrong ones */
		rejected += rej;
		misses += !strcmp(snippets[i].expect, "MISS");
	}
	if (unsafe)
		printf("%s: %zu unsafe snippets, %zu rejected: detection rate %.1f%% (%zu known "
		       "evasions)\n",
		       file, n, rejected, 100.0 * (double)rejected / (double)n, misses);
	else
		printf("%s: %zu safe snippets, %zu rejected: false-positive rate %.1f%%\n", file, n,
		       rejected, 100.0 * (double)rejected / (double)n);
	CHECK(n >= 100);
	free(text);
}

int main(void)
{
	corpus("unsafe.txt", 1);
	corpus("safe.txt", 0);
	return check_report();
}

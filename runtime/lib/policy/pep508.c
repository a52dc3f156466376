/* PEP 508 requirement strings, as far as policy.dependencies and a
 * run's requirements take them (a name and version specifiers), and the
 * index URL: checked here, in the policy layer, because the policy's
 * loader checks its allow and ignore lists with them; deps.c (run/)
 * meets and installs what they name. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "policy.h"

/* ---- requirement strings ------------------------------------------------ */

bool sr_req_name_char(int c)
{
	return isalnum(c) || c == '.' || c == '_' || c == '-';
}

const char *sr_req_skip_ws(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

void sr_req_normalise(const char *name, size_t len, char *out, size_t size)
{
	size_t o = 0;
	for (size_t i = 0; i < len && o + 1 < size; i++) {
		char c = name[i];
		if (c == '-' || c == '_' || c == '.') {
			while (i + 1 < len &&
			       (name[i + 1] == '-' || name[i + 1] == '_' || name[i + 1] == '.'))
				i++;
			c = '-';
		}
		out[o++] = (char)tolower((unsigned char)c);
	}
	out[o] = '\0';
}

static const char *const ops[] = { "===", "==", "!=", "<=", ">=", "~=", "<", ">" };

/* One specifier: "OP VERSION"; returns past it or NULL. */
static const char *parse_clause(const char *s)
{
	s = sr_req_skip_ws(s);
	size_t k = 0;
	while (k < 8 && strncmp(s, ops[k], strlen(ops[k])) != 0)
		k++;
	if (k == 8)
		return NULL;
	s = sr_req_skip_ws(s + strlen(ops[k]));
	const char *v = s;
	while (isalnum((unsigned char)*s) || (*s && strchr(".*+!_-", *s)))
		s++;
	return s == v || !isalnum((unsigned char)*v) ? NULL : sr_req_skip_ws(s);
}

int sr_deps_check_requirement(const char *req, size_t index, char *norm, size_t norm_size,
			      sr_error *err)
{
	static const char hint[] = "(a package name with optional version specifiers, e.g. "
				   "\"attrs\" or \"attrs>=22.1,<24\"; extras, markers, URLs, paths "
				   "and pip options are not accepted)";
	size_t len = strlen(req);
	if (len == 0 || len > SR_DEPS_REQ_MAX_LEN)
		return sr_refuse(err, EINVAL,
				 "requirements[%zu]: \"%.64s\" is %s (1 to %d characters)", index,
				 req, len ? "too long" : "empty", SR_DEPS_REQ_MAX_LEN);
	for (const unsigned char *c = (const unsigned char *)req; *c; c++)
		if (*c < 0x20 || *c >= 0x7f)
			return sr_refuse(
			    err, EINVAL,
			    "requirements[%zu]: has a control or non-ASCII character %s", index,
			    hint);
	const char *s = sr_req_skip_ws(req), *name = s;
	while (sr_req_name_char((unsigned char)*s))
		s++;
	size_t nlen = (size_t)(s - name);
	if (nlen == 0 || nlen > SR_REQ_NAME_MAX_LEN || !isalnum((unsigned char)name[0]) ||
	    !isalnum((unsigned char)name[nlen - 1]))
		return sr_refuse(err, EINVAL, "requirements[%zu]: \"%s\" is not a requirement %s",
				 index, req, hint);
	s = sr_req_skip_ws(s);
	while (*s) {
		const char *next = parse_clause(s);
		if (!next || (*next && *next != ','))
			return sr_refuse(err, EINVAL,
					 "requirements[%zu]: \"%s\" is not a requirement %s", index,
					 req, hint);
		s = *next ? next + 1 : next;
		if (*next == ',' && !*sr_req_skip_ws(s))
			return sr_refuse(err, EINVAL,
					 "requirements[%zu]: \"%s\" is not a requirement %s", index,
					 req, hint);
	}
	sr_req_normalise(name, nlen, norm, norm_size);
	return 0;
}

/* ---- the index URL ----------------------------------------------------- */

int sr_deps_parse_index_url(const char *url, char *host, size_t host_size, uint16_t *port,
			    const char **why)
{
	static const char not_url[] = "is not an index URL (http:// or https://, no spaces, "
				      "e.g. \"https://pypi.org/simple\")";
	bool https = strncmp(url, "https://", 8) == 0;
	size_t len = strlen(url);
	*why = not_url;
	if (len >= 2048 || (!https && strncmp(url, "http://", 7) != 0))
		return -1;
	for (const char *q = url; *q; q++)
		if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f || *q == '"' ||
		    *q == '\\')
			return -1;
	const char *auth = url + (https ? 8 : 7), *end = auth + strcspn(auth, "/?#");
	if (memchr(auth, '@', (size_t)(end - auth))) {
		*why = "holds credentials (user:password@...): refused, they would end up in "
		       "logs and results; use an index that needs none";
		return -1;
	}
	if (strchr(url, '#')) {
		*why = "has a fragment (#...): remove it";
		return -1;
	}
	if (strchr(url, '?')) {
		*why = "has a query (?...): an index URL is a plain http(s) address";
		return -1;
	}
	const char *colon = memchr(auth, ':', (size_t)(end - auth));
	const char *hend = colon ? colon : end;
	size_t hlen = (size_t)(hend - auth);
	bool ok = hlen > 0 && hlen <= 253 && hlen < host_size && isalnum((unsigned char)auth[0]);
	for (size_t i = 0; ok && i < hlen; i++)
		ok = isalnum((unsigned char)auth[i]) || auth[i] == '-' || auth[i] == '.';
	if (!ok) {
		*why = hlen ? "has a host that is not a DNS name or an IPv4 address (letters, "
			      "digits, '-' and '.'; no IPv6)"
			    : "has no host";
		return -1;
	}
	unsigned long p = https ? 443 : 80;
	if (colon) {
		char *pend = NULL;
		p = colon + 1 < end && isdigit((unsigned char)colon[1])
			? strtoul(colon + 1, &pend, 10)
			: 0;
		if (p == 0 || p > 65535 || pend != end) {
			*why = "has a port that is not 1 to 65535";
			return -1;
		}
	}
	memcpy(host, auth, hlen);
	host[hlen] = '\0';
	*port = (uint16_t)p;
	*why = NULL;
	return 0;
}

/* ---- versions (enough to say "the profile has it") ----------------------- */

#define VPARTS 8

/* A plain release "1.24.2": 0, else -1 (pre/post/dev/local: unknown). */
static int parse_release(const char *v, size_t len, long out[VPARTS], int *n)
{
	*n = 0;
	size_t i = 0;
	while (i < len) {
		if (*n == VPARTS || !isdigit((unsigned char)v[i]))
			return -1;
		long x = 0;
		while (i < len && isdigit((unsigned char)v[i]) && x < 100000000)
			x = x * 10 + (v[i++] - '0');
		out[(*n)++] = x;
		if (i < len && v[i++] != '.')
			return -1;
		if (i == len && v[len - 1] == '.')
			return -1;
	}
	return *n ? 0 : -1;
}

static int cmp_release(const long *a, int na, const long *b, int nb)
{
	for (int i = 0; i < (na > nb ? na : nb); i++) {
		long x = i < na ? a[i] : 0, y = i < nb ? b[i] : 0;
		if (x != y)
			return x < y ? -1 : 1;
	}
	return 0;
}

/* Does installed version have satisfy one clause "OP V"? Unknown: false. */
static bool clause_holds(const char *have, const char *op, const char *want, size_t wlen)
{
	long h[VPARTS], w[VPARTS];
	int nh, nw;
	if (strcmp(op, "===") == 0)
		return strlen(have) == wlen && strncmp(have, want, wlen) == 0;
	bool prefix = wlen >= 2 && strncmp(want + wlen - 2, ".*", 2) == 0;
	if (parse_release(have, strlen(have), h, &nh) ||
	    parse_release(want, prefix ? wlen - 2 : wlen, w, &nw))
		return false;
	if (prefix) {
		bool match = nh >= nw && cmp_release(h, nw, w, nw) == 0;
		return strcmp(op, "==") == 0 ? match : strcmp(op, "!=") == 0 ? !match : false;
	}
	int c = cmp_release(h, nh, w, nw);
	if (strcmp(op, "==") == 0)
		return c == 0;
	if (strcmp(op, "!=") == 0)
		return c != 0;
	if (strcmp(op, "<=") == 0)
		return c <= 0;
	if (strcmp(op, ">=") == 0)
		return c >= 0;
	if (strcmp(op, "<") == 0)
		return c < 0;
	if (strcmp(op, ">") == 0)
		return c > 0;
	/* ~= V.N: >= V.N and == V.* */
	return nw >= 2 && c >= 0 && nh >= nw - 1 && cmp_release(h, nw - 1, w, nw - 1) == 0;
}

/* The specifiers after the name in a checked requirement, against have. */
bool sr_req_specs_hold(const char *req, const char *have)
{
	const char *s = sr_req_skip_ws(req);
	while (sr_req_name_char((unsigned char)*s))
		s++;
	for (s = sr_req_skip_ws(s); *s; s = sr_req_skip_ws(s)) {
		size_t k = 0;
		while (strncmp(s, ops[k], strlen(ops[k])) != 0)
			k++;
		s = sr_req_skip_ws(s + strlen(ops[k]));
		const char *v = s;
		while (isalnum((unsigned char)*s) || (*s && strchr(".*+!_-", *s)))
			s++;
		if (!clause_holds(have, ops[k], v, (size_t)(s - v)))
			return false;
		s = sr_req_skip_ws(s);
		if (*s == ',')
			s++;
	}
	return true;
}

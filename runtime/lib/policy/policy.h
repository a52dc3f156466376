/* The policy layer's interface: what the rest of the library uses of
 * the policy beyond saferun.h (the loader itself is public): the
 * checker's settings from it, the seccomp section compiled to BPF,
 * requirement strings. */
#ifndef SR_POLICY_H
#define SR_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checker/checker.h"
#include "saferun.h"
#include "seccomp_bpf.h"
#include "seccomp_cache.h"

/* sr_check's first step: the settings from req's policy (the default
 * policy when it has none) and allow list, then sr_check_begin. */
int sr_check_start(const sr_check_request *req, sr_check_job **job, sr_error *err);

/* A policy holding only the schema's defaults (the tables' in policy_<section>.c),
 * without policies/default.json over them: for the test that the two
 * agree. */
int sr_policy_schema_defaults(sr_policy **out, sr_error *err);

/* 0 when a and b hold the same value in every plain field of the schema
 * (numbers, bools, words, strings; not lists or hand-parsed values), or
 * -1 with err naming the first that differs and both values. */
int sr_policy_schema_compare(const sr_policy *a, const sr_policy *b, sr_error *err);

/* Every key of the schema, in table order: each top-level key with section
 * "policy", then each key of a section that has a table of its own
 * (limits, filesystem, ...) with that section's name. For the test that
 * docs/policy.md's reference names the same keys. */
void sr_policy_schema_keys(void (*each)(const char *section, const char *key, void *arg),
			   void *arg);

#define SR_REQ_NAME_MAX_LEN 128 /* a requirement's package name */

/* One requirement: a PEP 508 name and optional version specifiers, no
 * extras, markers, URLs, paths or options. norm gets the normalised name
 * (lower case, runs of -_. as one -). 0, or -1 with err naming
 * requirements[index] and the value. */
int sr_deps_check_requirement(const char *req, size_t index, char *norm, size_t norm_size,
			      sr_error *err);

/* policy.dependencies.index_url: http:// or https://, a host (a DNS name
 * or an IPv4 address), an optional port, a path; no credentials (they
 * would end up in logs and results), no query, no fragment, no spaces.
 * 0 with host and port (443 for https, 80 for http, or the URL's), or -1
 * with *why saying what is wrong (never quoting the URL's credentials). */
int sr_deps_parse_index_url(const char *url, char *host, size_t host_size, uint16_t *port,
			    const char **why);

/* The pieces of a requirement deps.c reads further: blanks skipped, a
 * name's characters, a name normalised into out (lower case, runs of -_.
 * as one -), and whether a checked requirement's specifiers hold for an
 * installed version (one it cannot compare: false). */
const char *sr_req_skip_ws(const char *s);
bool sr_req_name_char(int c);
void sr_req_normalise(const char *name, size_t len, char *out, size_t size);
bool sr_req_specs_hold(const char *req, const char *have);

#endif

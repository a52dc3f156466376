/* The checker's settings from a policy and a request (the checker
 * itself, in checker/, knows nothing of policies), and the public
 * sr_check over them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "checker/checker.h"
#include "policy.h"
#include "saferun.h"

#define DEFAULT_TIMEOUT_MS 2000
#define DEFAULT_MEMORY     (256u << 20)

static void add_dir(sr_check_settings *s, const char *d)
{
	for (size_t i = 0; i < s->cfg.n_dirs; i++)
		if (!strcmp(s->dirs[i], d))
			return;
	if (s->cfg.n_dirs < SR_CHECK_MAX_DIRS)
		s->dirs[s->cfg.n_dirs++] = d;
}

static int build_settings(const sr_check_request *req, const sr_policy *p, sr_check_settings *s,
			  sr_error *err)
{
	memset(s, 0, sizeof *s);
	s->cfg.dirs = s->dirs;
	s->cfg.allow = s->allow;
	add_dir(s, p->workdir ? p->workdir : "/work");
	for (size_t i = 0; i < p->n_writable; i++)
		add_dir(s, p->writable[i]);
	s->cfg.network_off = p->net_mode == SR_NET_NONE;
	for (size_t i = 0; i < p->checker.n_rules_off; i++) {
		int r = sr_rule_find(p->checker.rules_off[i]);
		if (r >= 0)
			s->cfg.rules_off |= 1u << r;
	}
	const char *const *lists[] = { (const char *const *)p->checker.allow, req->allow };
	size_t counts[] = { p->checker.n_allow, req->n_allow };
	for (int l = 0; l < 2; l++)
		for (size_t i = 0; i < counts[l]; i++) {
			if (s->cfg.n_allow == SR_CHECK_MAX_ALLOW)
				return sr_refuse(err, EINVAL, "more than %d allow-list entries",
						 SR_CHECK_MAX_ALLOW);
			if (!lists[l][i] || !lists[l][i][0])
				return sr_refuse(err, EINVAL,
						 "an allow-list entry is empty (give a rule id, "
						 "a rule name or a name such as eval or open)");
			s->allow[s->cfg.n_allow++] = lists[l][i];
		}
	s->lim.timeout_ms = p->checker.timeout_ms ? p->checker.timeout_ms : DEFAULT_TIMEOUT_MS;
	s->lim.memory_bytes = p->checker.memory_bytes ? p->checker.memory_bytes : DEFAULT_MEMORY;
	return 0;
}

int sr_check_start(const sr_check_request *req, sr_check_job **out, sr_error *err)
{
	*out = NULL;
	sr_policy *def = NULL;
	const sr_policy *p = req->policy;
	if (sr_check_source_text(req->code, req->code_size, err) < 0)
		return -1;
	if (!p && sr_policy_default(&def, err) < 0)
		return -1;
	sr_check_settings *s = malloc(sizeof *s);
	int rc = -1;
	if (!s)
		sr_fail(err, ENOMEM, "allocate the checker's result");
	else if (build_settings(req, p ? p : def, s, err) == 0)
		rc = sr_check_begin(req->code, req->code_size, req->in_process, s, out, err);
	free(s);
	sr_policy_free(def);
	return rc;
}

int sr_check(const sr_check_request *req, sr_check_result *res, sr_error *err)
{
	sr_check_job *job;
	memset(res, 0, sizeof *res);
	if (sr_check_start(req, &job, err) < 0)
		return -1;
	return sr_check_finish(job, res, err);
}

/* Requirement strings and "the profile has it" (deps.c), over a fake
 * rootfs of dist-info dirs: nothing here runs pip or a sandbox. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "run/run.h"
#include "saferun.h"

static void accepts(const char *req, const char *norm)
{
	char got[160];
	sr_error err = { 0 };
	CHECK_INT(sr_deps_check_requirement(req, 0, got, sizeof got, &err), 0);
	CHECK_STR(got, norm);
}

static void refuses(const char *req)
{
	char got[160];
	sr_error err = { 0 };
	int rc = sr_deps_check_requirement(req, 3, got, sizeof got, &err);
	CHECK_INT(rc, -1);
	CHECK(strncmp(err.msg, "requirements[3]: ", 17) == 0);
}

static void test_requirement_strings(void)
{
	accepts("attrs", "attrs");
	accepts("Scikit_Learn", "scikit-learn");
	accepts("zope.interface>=5", "zope-interface");
	accepts("  a-._b  ==  1.0 , != 1.0.1 ", "a-b");
	accepts("x~=1.2", "x");
	accepts("x===1.0+local", "x");
	accepts("x==1.*", "x");
	refuses("");
	refuses("-e .");
	refuses("--index-url=http://evil");
	refuses("x @ https://e/x.whl");
	refuses("x[extra]");
	refuses("x; python_version<'4'");
	refuses("./x");
	refuses("/x");
	refuses("x==");
	refuses("x>=1,");
	refuses("x 1.0");
	refuses("x==1 --hash=sha256:00");
	refuses("_x");
	refuses("x\ny");
	refuses("x==\xc3\xa9");
	char longer[300];
	memset(longer, 'a', 201);
	longer[201] = '\0';
	refuses(longer);
}

/* A rootfs dir DIR/fake with a python3 and these distributions. */
static char dir[64];

static void make_rootfs(void)
{
	snprintf(dir, sizeof dir, "/tmp/saferun-test-deps-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	const char *const paths[] = { "fake",
				      "fake/usr",
				      "fake/usr/bin",
				      "fake/usr/lib",
				      "fake/usr/lib/python3",
				      "fake/usr/lib/python3/dist-packages",
				      "fake/usr/lib/python3/dist-packages/foo-1.2.3.dist-info",
				      "fake/usr/lib/python3/dist-packages/Bar_Baz-2.0.egg-info" };
	char p[256];
	for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
		snprintf(p, sizeof p, "%s/%s", dir, paths[i]);
		CHECK(mkdir(p, 0755) == 0);
	}
	snprintf(p, sizeof p, "%s/fake/usr/bin/python3", dir);
	FILE *f = fopen(p, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);
	chmod(p, 0755);
}

/* Is req met by the fake profile (from_profile), or does it need pip (an
 * error: the policy has no wheelhouse)? */
static int met(const sr_policy *p, const char *req)
{
	const char *reqs[] = { req };
	sr_run_request r = {
		.policy = p, .rootfs_dir = dir, .requirements = reqs, .n_requirements = 1
	};
	sr_result res;
	memset(&res, 0, sizeof res);
	sr_deps_layer *layer = (sr_deps_layer *)&res;
	sr_error err = { 0 };
	int rc = sr_deps_prepare(&r, &res, &layer, &err);
	CHECK_INT(rc, 0);
	CHECK(layer == NULL);
	int yes = res.status == SR_STATUS_OK && res.deps.n_from_profile == 1;
	if (!yes)
		CHECK_STR(res.message, "error: dependencies: no package source: set "
				       "policy.dependencies.wheelhouse (a directory of wheels) or "
				       "policy.dependencies.index_url");
	sr_result_free(&res);
	return yes;
}

static void test_the_profile_has_it(void)
{
	const char doc[] = "{\"filesystem\": {\"profile\": \"fake\"}, "
			   "\"dependencies\": {\"allow\": [\"*\"]}}";
	sr_policy *p = NULL;
	sr_error err = { 0 };
	CHECK_INT(sr_policy_load_json(doc, strlen(doc), "t.json", &p, &err), 0);
	if (!p)
		return;
	CHECK(met(p, "foo"));
	CHECK(met(p, "FOO>=1.2"));
	CHECK(met(p, "foo>=1.2,<2"));
	CHECK(met(p, "foo~=1.2"));
	CHECK(met(p, "foo~=1.2.0"));
	CHECK(met(p, "foo==1.2.*"));
	CHECK(met(p, "foo==1.2.3.0"));
	CHECK(met(p, "foo!=1.2.4"));
	CHECK(met(p, "foo===1.2.3"));
	CHECK(met(p, "bar-baz==2"));
	CHECK(met(p, "bar.baz<2.1"));
	CHECK(!met(p, "foo>1.2.3"));
	CHECK(!met(p, "foo<1.2.3"));
	CHECK(!met(p, "foo~=1.3"));
	CHECK(!met(p, "foo==1.2.3rc1"));
	CHECK(!met(p, "foo==1.3.*"));
	CHECK(!met(p, "foo!=1.2.*"));
	CHECK(!met(p, "nothere"));
	sr_policy_free(p);
}

/* The allow list guards installs: what the profile meets needs no entry
 * (`-r numpy` under the default policy, whose allow list is empty). */
static void test_met_by_the_profile_needs_no_allow_entry(void)
{
	const char doc[] = "{\"filesystem\": {\"profile\": \"fake\"}, "
			   "\"dependencies\": {\"allow\": []}}";
	sr_policy *p = NULL;
	sr_error err = { 0 };
	CHECK_INT(sr_policy_load_json(doc, strlen(doc), "t.json", &p, &err), 0);
	if (!p)
		return;
	const char *reqs[] = { "foo>=1.2", "bar-baz" };
	sr_run_request r = {
		.policy = p, .rootfs_dir = dir, .requirements = reqs, .n_requirements = 2
	};
	sr_result res;
	memset(&res, 0, sizeof res);
	sr_deps_layer *layer = NULL;
	CHECK_INT(sr_deps_prepare(&r, &res, &layer, &err), 0);
	CHECK(layer == NULL);
	CHECK_INT(res.status, SR_STATUS_OK);
	CHECK_INT(res.deps.n_from_profile, 2);
	if (res.deps.n_from_profile == 2) {
		CHECK_STR(res.deps.from_profile[0], "foo==1.2.3");
		CHECK_STR(res.deps.from_profile[1], "bar-baz==2.0");
	}
	sr_result_free(&res);
	/* what it does not meet still needs the entry */
	const char *more[] = { "foo>1.2.3" };
	r.requirements = more;
	r.n_requirements = 1;
	memset(&res, 0, sizeof res);
	CHECK_INT(sr_deps_prepare(&r, &res, &layer, &err), 0);
	CHECK_INT(res.status, SR_STATUS_ERROR);
	CHECK_STR(res.message, "error: dependencies: \"foo\" is not allowed by "
			       "policy.dependencies.allow (nothing was installed)");
	sr_result_free(&res);
	sr_policy_free(p);
}

int main(void)
{
	test_requirement_strings();
	make_rootfs();
	test_the_profile_has_it();
	test_met_by_the_profile_needs_no_allow_entry();
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	return check_report();
}

/* saferund's route patterns ("{name}" segments, the trailing "{name*}"
 * rest capture, the trailing-slash rule) and the attachment response. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "http.h"
#include "routes.h"

static srd_request req;

static bool match(const char *pattern, const char *path)
{
	memset(&req, 0x5a, sizeof req); /* stale captures must not show through */
	return srd_route_match(pattern, path, &req);
}

static void test_literal_paths_take_one_trailing_slash(void)
{
	CHECK(match("/v1/run", "/v1/run"));
	CHECK(match("/v1/run", "/v1/run/"));
	CHECK(!match("/v1/run", "/v1/run//"));
	CHECK(!match("/v1/run", "/v1/runs"));
	CHECK(!match("/v1/run", "/v1/ru"));
	CHECK(!match("/v1/run", "/v1"));
	CHECK(match("/", "/"));
	CHECK_INT(req.n_params, 0);
	CHECK(!match("/", "/health"));
}

static void test_segment_capture_takes_one_nonempty_segment(void)
{
	CHECK(match("/v1/sessions/{id}", "/v1/sessions/abc"));
	CHECK_STR(req.params[0], "abc");
	CHECK_INT(req.n_params, 1);
	CHECK_STR(req.rest, "");
	CHECK(match("/v1/sessions/{id}", "/v1/sessions/abc/"));
	CHECK_STR(req.params[0], "abc");
	CHECK(!match("/v1/sessions/{id}", "/v1/sessions/"));
	CHECK(!match("/v1/sessions/{id}", "/v1/sessions"));
	CHECK(!match("/v1/sessions/{id}", "/v1/sessions/a/b"));
	CHECK(match("/v1/sessions/{id}/run", "/v1/sessions/s-1/run"));
	CHECK_STR(req.params[0], "s-1");
	CHECK(match("/a/{x}/b/{y}", "/a/1/b/2"));
	CHECK_STR(req.params[0], "1");
	CHECK_STR(req.params[1], "2");
	CHECK_INT(req.n_params, 2);
}

static void test_rest_capture_takes_the_rest_with_slashes(void)
{
	const char *pat = "/v1/sessions/{id}/files/{path*}";
	CHECK(match(pat, "/v1/sessions/s1/files/a.txt"));
	CHECK_STR(req.params[0], "s1");
	CHECK_INT(req.n_params, 1); /* the rest is not a param */
	CHECK_STR(req.rest, "a.txt");
	CHECK(match(pat, "/v1/sessions/s1/files/src/deep/er/data.csv"));
	CHECK_STR(req.rest, "src/deep/er/data.csv");
	/* a trailing slash belongs to the rest: the handler sees a dir name */
	CHECK(match(pat, "/v1/sessions/s1/files/src/"));
	CHECK_STR(req.rest, "src/");
	/* bytes the log would show as '?' reach the handler as sent */
	CHECK(match(pat, "/v1/sessions/s1/files/donn\xc3\xa9\x65s.csv"));
	CHECK_STR(req.rest, "donn\xc3\xa9\x65s.csv");
	CHECK(match("/files/{p*}", "/files/.."));
	CHECK_STR(req.rest, "..");
}

static void test_rest_capture_needs_at_least_one_byte(void)
{
	const char *pat = "/v1/sessions/{id}/files/{path*}";
	CHECK(!match(pat, "/v1/sessions/s1/files/"));
	CHECK(!match(pat, "/v1/sessions/s1/files"));
	CHECK(!match(pat, "/v1/sessions//files/a"));
	CHECK(!match(pat, "/v1/sessions/s1/file/a"));
}

static void test_rest_capture_refuses_what_does_not_fit(void)
{
	char path[sizeof req.rest + 16];
	size_t room = sizeof req.rest - 1;
	int n = snprintf(path, sizeof path, "/f/");
	memset(path + n, 'x', room);
	path[(size_t)n + room] = '\0';
	CHECK(match("/f/{p*}", path));
	CHECK_INT(strlen(req.rest), room);
	strcat(path, "y");
	CHECK(!match("/f/{p*}", path));
}

static void test_rest_capture_must_end_the_pattern(void)
{
	CHECK(!match("/f/{p*}/x", "/f/a/x"));
	CHECK(!match("/f/{p*}x", "/f/ax"));
}

static void test_match_without_a_request(void)
{
	CHECK(srd_route_match("/v1/sessions/{id}/files/{path*}", "/v1/sessions/a/files/b/c", NULL));
	CHECK(!srd_route_match("/v1/sessions/{id}", "/v1/other/a", NULL));
}

static void test_a_later_match_clears_the_rest(void)
{
	CHECK(match("/f/{p*}", "/f/a/b"));
	CHECK(srd_route_match("/v1/run", "/v1/run", &req));
	CHECK_STR(req.rest, "");
}

static const char *disposition(const char *name)
{
	static srd_response res;
	free(res.body);
	memset(&res, 0, sizeof res);
	srd_respond_attachment(&res, 200, name, strdup("abc"), 3);
	CHECK_STR(res.content_type, "application/octet-stream");
	CHECK_INT(res.status, 200);
	CHECK_INT(res.body_len, 3);
	return res.content_disposition;
}

static void test_attachment_filename_is_safely_quoted(void)
{
	CHECK_STR(disposition("out.txt"), "attachment; filename=\"out.txt\"");
	CHECK_STR(disposition("src/data/out.csv"), "attachment; filename=\"out.csv\"");
	CHECK_STR(disposition("a\"b\\c\r\nSet-Cookie: x\x7f.txt"),
		  "attachment; filename=\"abcSet-Cookie: x.txt\"");
	CHECK_STR(disposition(""), "attachment; filename=\"download\"");
	CHECK_STR(disposition("dir/"), "attachment; filename=\"download\"");
	CHECK_STR(disposition("\"\""), "attachment; filename=\"download\"");
	CHECK_STR(disposition(NULL), "attachment; filename=\"download\"");
	CHECK_STR(disposition("r\xc3\xa9sum\xc3\xa9 1.txt"),
		  "attachment; filename=\"r__sum__ 1.txt\"; "
		  "filename*=UTF-8''r%C3%A9sum%C3%A9%201.txt");
}

static void test_attachment_long_name_fits(void)
{
	char name[2000];
	memset(name, 'n', sizeof name - 1);
	name[sizeof name - 1] = '\0';
	const char *d = disposition(name);
	CHECK(strlen(d) < 300);
	CHECK(strncmp(d, "attachment; filename=\"nnn", 25) == 0);
	CHECK(d[strlen(d) - 1] == '"');
	/* non-ASCII and long: filename* is left out rather than cut */
	for (size_t i = 0; i + 2 < sizeof name; i += 2)
		memcpy(name + i, "\xc3\xa9", 2);
	d = disposition(name);
	CHECK(strlen(d) < 300);
	CHECK(!strstr(d, "filename*"));
}

int main(void)
{
	test_literal_paths_take_one_trailing_slash();
	test_segment_capture_takes_one_nonempty_segment();
	test_rest_capture_takes_the_rest_with_slashes();
	test_rest_capture_needs_at_least_one_byte();
	test_rest_capture_refuses_what_does_not_fit();
	test_rest_capture_must_end_the_pattern();
	test_match_without_a_request();
	test_a_later_match_clears_the_rest();
	test_attachment_filename_is_safely_quoted();
	test_attachment_long_name_fits();
	return check_report();
}

/* The Connect protocol's JSON codec (connect.c): what a request may be
 * (its content type, an object, one envelope of the length it says), the
 * HTTP status each error code gets, and the envelopes of a stream. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "connect.h"

static srd_request request(const char *type, const char *body, size_t len)
{
	return (srd_request){
		.method = "POST", .path = "/x", .content_type = type, .body = body, .body_len = len
	};
}

static void test_unary_messages(void)
{
	cJSON *msg = NULL;
	srd_cerr e = { 0 };
	srd_request r = request("application/json", "{\"path\":\"/home/user\"}", 21);
	CHECK_INT(srd_connect_read(&r, false, &msg, &e), 0);
	CHECK(msg && cJSON_IsString(cJSON_GetObjectItem(msg, "path")));
	cJSON_Delete(msg);
	r = request("application/json", NULL, 0); /* an empty message */
	CHECK_INT(srd_connect_read(&r, false, &msg, &e), 0);
	CHECK(cJSON_IsObject(msg) && cJSON_GetArraySize(msg) == 0);
	cJSON_Delete(msg);
	r = request("application/proto", "", 0);
	CHECK_INT(srd_connect_read(&r, false, &msg, &e), -1);
	CHECK_STR(e.code, "invalid_argument");
	CHECK(strstr(e.msg, "application/json") != NULL);
	r = request("application/json", "[1]", 3);
	CHECK_INT(srd_connect_read(&r, false, &msg, &e), -1);
	CHECK(msg == NULL);
	r = request("application/json", "{} \n", 4); /* white space after it is fine */
	CHECK_INT(srd_connect_read(&r, false, &msg, &e), 0);
	cJSON_Delete(msg);
	r = request("application/json", "{}junk", 6);
	CHECK_INT(srd_connect_read(&r, false, &msg, &e), -1);
	CHECK(msg == NULL);
	CHECK_STR(e.code, "invalid_argument");
	CHECK_STR(e.msg, "bytes after the message's JSON object (at byte 2)");
	r = request("application/json", "{\"a\":\"\0\"}", 9);
	CHECK_INT(srd_connect_read(&r, false, &msg, &e), -1);
	CHECK(strstr(e.msg, "NUL") != NULL);
}

static void test_stream_requests_are_one_envelope(void)
{
	cJSON *msg = NULL;
	srd_cerr e = { 0 };
	char body[32] = { 0, 0, 0, 0, 2, '{', '}' };
	srd_request r = request("application/connect+json", body, 7);
	CHECK_INT(srd_connect_read(&r, true, &msg, &e), 0);
	CHECK(cJSON_IsObject(msg));
	cJSON_Delete(msg);
	msg = NULL;
	body[4] = 9; /* says more than there is */
	CHECK_INT(srd_connect_read(&r, true, &msg, &e), -1);
	CHECK(strstr(e.msg, "9 bytes") != NULL);
	body[4] = 2;
	body[0] = 1; /* compressed */
	CHECK_INT(srd_connect_read(&r, true, &msg, &e), -1);
	r = request("application/connect+json", body, 4); /* shorter than a prefix */
	CHECK_INT(srd_connect_read(&r, true, &msg, &e), -1);
	r = request("application/json", body, 7); /* a stream's type is its own */
	CHECK_INT(srd_connect_read(&r, true, &msg, &e), -1);
	CHECK(msg == NULL);
}

static void test_errors_and_their_statuses(void)
{
	static const struct {
		const char *code;
		unsigned status;
	} cases[] = { { "not_found", 404 },      { "invalid_argument", 400 },
		      { "already_exists", 409 }, { "permission_denied", 403 },
		      { "unimplemented", 501 },  { "resource_exhausted", 429 },
		      { "unavailable", 503 },    { "no_such_code", 500 } };
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		srd_response res = { 0 };
		srd_cerr e = { 0 };
		srd_cfail(&e, cases[i].code, "what %d", (int)i);
		srd_connect_reply_error(&res, &e);
		CHECK_INT(res.status, cases[i].status);
		cJSON *j = cJSON_ParseWithLength(res.body, res.body_len);
		CHECK(j && strcmp(cJSON_GetObjectItem(j, "code")->valuestring, cases[i].code) == 0);
		cJSON_Delete(j);
		free(res.body);
	}
}

/* Without a server the stream is collected in the body: the envelopes. */
static void test_stream_envelopes(void)
{
	srd_response res = { 0 };
	CHECK_INT(srd_connect_stream_start(&res), 0);
	cJSON *m = cJSON_CreateObject();
	cJSON_AddObjectToObject(m, "start");
	CHECK_INT(srd_connect_stream_send(&res, m), 0);
	srd_cerr e = { 0 };
	srd_cfail(&e, "not_found", "gone");
	srd_connect_stream_end(&res, &e);
	const unsigned char *b = (const unsigned char *)res.body;
	const char first[] = "{\"start\":{}}";
	size_t n1 = strlen(first);
	CHECK(res.status == 200 && strcmp(res.content_type, "application/connect+json") == 0);
	CHECK(res.body_len > 10 + n1);
	if (res.body_len > 10 + n1) {
		CHECK(b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == 0 && b[4] == n1);
		CHECK(memcmp(b + 5, first, n1) == 0);
		const unsigned char *end = b + 5 + n1;
		size_t n2 = (size_t)end[3] << 8 | end[4];
		CHECK(end[0] == 2); /* end-stream */
		CHECK(5 + n1 + 5 + n2 == res.body_len);
		CHECK(memmem(end + 5, n2, "\"error\":{\"code\":\"not_found\",\"message\":\"gone\"}",
			     45) != NULL);
	}
	free(res.body);
}

int main(void)
{
	test_unary_messages();
	test_stream_requests_are_one_envelope();
	test_errors_and_their_statuses();
	test_stream_envelopes();
	return check_report();
}

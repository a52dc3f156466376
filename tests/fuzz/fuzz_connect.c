/* libFuzzer harness for the Connect protocol's JSON form as E2B's envd
 * calls reach saferund (connect.c): the Content-Type, a streaming call's
 * envelope (flags, big-endian length) and the message's strict JSON
 * check and parse, then the error answer. Input: one byte (bit 0: a
 * streaming call; bit 1: the other call's Content-Type), the body.
 * Invariants: a message read is an object; a refusal has its Connect
 * code and a message, and answers with that code's HTTP status and a
 * JSON body naming it. What envd does with a message needs a session's
 * sandbox and is not fuzzed here. Build: tests/CMakeLists.txt. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/daemon/connect.h"

static void expect(int ok)
{
	if (!ok)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	bool streaming = data[0] & 1, other = data[0] & 2;
	srd_request req = { .method = "POST", .path = "/process.Process/Start" };
	req.content_type = streaming != other ? "application/connect+json" : "application/json";
	/* the server's body is NUL-terminated */
	char *body = malloc(size);
	if (!body)
		return 0;
	memcpy(body, data + 1, size - 1);
	body[size - 1] = '\0';
	req.body = body;
	req.body_len = size - 1;
	cJSON *msg = NULL;
	srd_cerr e = { 0 };
	if (srd_connect_read(&req, streaming, &msg, &e) == 0) {
		expect(cJSON_IsObject(msg));
	} else {
		expect(msg == NULL && e.code && e.msg[0] && memchr(e.msg, 0, sizeof e.msg));
		srd_response res = { 0 };
		srd_connect_reply_error(&res, &e);
		expect(res.status >= 400 && res.status < 600 && res.body);
		cJSON *j = cJSON_ParseWithLength(res.body, res.body_len);
		const cJSON *code = cJSON_GetObjectItemCaseSensitive(j, "code");
		expect(cJSON_IsString(code) && strcmp(code->valuestring, e.code) == 0);
		cJSON_Delete(j);
		free(res.body);
	}
	cJSON_Delete(msg);
	free(body);
	return 0;
}

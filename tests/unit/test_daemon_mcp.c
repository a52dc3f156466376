/* MCP's pieces that need no daemon: base64 (strict decode), the
 * JSON-RPC message rules of srd_mcp_parse, and tool arguments checked
 * against each tool's schema before any tool runs. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mcp.h"
#include "mcp_tools.h"

static void test_base64_round_trips_every_length(void)
{
	unsigned char data[64];
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (unsigned char)(i * 37 + 11);
	for (size_t len = 0; len <= sizeof data; len++) {
		char *text = sr_base64_encode(data, len);
		unsigned char *back = NULL;
		size_t n = 0;
		const char *why = NULL;
		CHECK(text && strlen(text) == (len + 2) / 3 * 4);
		CHECK(sr_base64_decode(text, strlen(text), &back, &n, &why) == 0);
		CHECK(n == len && back && memcmp(back, data, len) == 0);
		free(back);
		free(text);
	}
	char *t = sr_base64_encode("saferun", 7);
	CHECK_STR(t, "c2FmZXJ1bg==");
	free(t);
}

static int decode(const char *text, const char **why)
{
	unsigned char *out = NULL;
	size_t n;
	int rc = sr_base64_decode(text, strlen(text), &out, &n, why);
	CHECK(rc == 0 || out == NULL);
	free(out);
	return rc;
}

static void test_base64_decode_refuses_what_is_not_base64(void)
{
	const char *why = NULL;
	CHECK(decode("not-valid-base64!!!", &why) == -1);
	CHECK(decode("abc", &why) == -1 && strstr(why, "multiple of 4"));
	CHECK(decode("ab=c", &why) == -1 && strstr(why, "alphabet"));
	CHECK(decode("a===", &why) == -1);
	CHECK(decode("YW Jj", &why) == -1);
	CHECK(decode("YWJj\n", &why) == -1);
	CHECK(decode("", &why) == 0);
	CHECK(decode("YQ==", &why) == 0);
}

/* Parse text; the error code, or 0 when it parsed. */
static int parse_code(const char *text)
{
	cJSON *msg = NULL;
	srd_mcp_reply out;
	int rc = srd_mcp_parse(text, strlen(text), &msg, &out), code = 0;
	if (rc == 0) {
		CHECK(msg && !out.body);
	} else {
		CHECK(!msg && out.status == 400);
		const cJSON *err = cJSON_GetObjectItem(out.body, "error");
		code = (int)cJSON_GetObjectItem(err, "code")->valuedouble;
	}
	cJSON_Delete(msg);
	cJSON_Delete(out.body);
	return code;
}

static void test_parse_tells_bad_json_from_bad_messages(void)
{
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"), 0);
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"ping\"}"), 0);
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"), 0);
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"), 0);
	CHECK_INT(parse_code("  {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n"), 0);
	CHECK_INT(parse_code("{bad"), SRD_RPC_PARSE_ERROR);
	CHECK_INT(parse_code(""), SRD_RPC_PARSE_ERROR);
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} {}"),
		  SRD_RPC_PARSE_ERROR);
	CHECK_INT(parse_code("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]"),
		  SRD_RPC_INVALID_REQUEST);
	CHECK_INT(parse_code("\"ping\""), SRD_RPC_INVALID_REQUEST);
	CHECK_INT(parse_code("{\"id\":1,\"method\":\"ping\"}"), SRD_RPC_INVALID_REQUEST);
	CHECK_INT(parse_code("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}"),
		  SRD_RPC_INVALID_REQUEST);
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}"),
		  SRD_RPC_INVALID_REQUEST);
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}"),
		  SRD_RPC_INVALID_REQUEST);
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}"),
		  SRD_RPC_INVALID_REQUEST);
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}"),
		  SRD_RPC_INVALID_REQUEST);
	/* past long long's range: refused, not cast (undefined; found by fuzz_mcp) */
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"id\":1e300,\"method\":\"ping\"}"),
		  SRD_RPC_INVALID_REQUEST);
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"id\":-9223372036854775809e3,"
			     "\"method\":\"ping\"}"),
		  SRD_RPC_INVALID_REQUEST);
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"id\":-9007199254740992,\"method\":\"ping\"}"),
		  0);
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"id\":1}"), SRD_RPC_INVALID_REQUEST);
	/* JSON is UTF-8; strings with NUL would be cut short in C */
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffing\"}"),
		  SRD_RPC_PARSE_ERROR);
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"id\":\"\xc0\xaf\",\"method\":\"ping\"}"),
		  SRD_RPC_PARSE_ERROR);
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\\u0000x\"}"),
		  SRD_RPC_PARSE_ERROR);
	CHECK_INT(parse_code("{\"jsonrpc\":\"2.0\",\"id\":\"\xc3\xa9\",\"method\":\"ping\"}"), 0);
}

static void test_an_invalid_request_echoes_a_usable_id(void)
{
	const char *text = "{\"jsonrpc\":\"2.0\",\"id\":\"x7\",\"method\":3}";
	cJSON *msg;
	srd_mcp_reply out;
	CHECK(srd_mcp_parse(text, strlen(text), &msg, &out) == -1);
	CHECK_STR(cJSON_GetObjectItem(out.body, "id")->valuestring, "x7");
	CHECK_STR(cJSON_GetObjectItem(out.body, "jsonrpc")->valuestring, "2.0");
	cJSON_Delete(out.body);
}

/* Call with args (JSON text): refused before the tool runs? msg says
 * why. Only refusals are called here: a valid call would run the tool,
 * and there is no daemon (ctx is NULL). */
static int refused(const char *tool, const char *args, char *msg, size_t size)
{
	cJSON *a = args ? cJSON_Parse(args) : NULL, *res = NULL;
	srd_ferr e = { 0 };
	int rc = srd_mcp_tool_call(NULL, tool, a, NULL, &res, &e);
	snprintf(msg, size, "%s", e.msg);
	cJSON_Delete(a);
	cJSON_Delete(res);
	return rc == -1;
}

static void test_arguments_are_checked_against_the_schema(void)
{
	char m[600];
	CHECK(refused("nope", "{}", m, sizeof m) && strstr(m, "Unknown tool: nope"));
	CHECK(refused("run_python", "{}", m, sizeof m) &&
	      strstr(m, "the argument \"code\" is required"));
	CHECK(refused("run_python", "{\"code\": null}", m, sizeof m) &&
	      strstr(m, "\"code\" is required"));
	CHECK(refused("run_python", "{\"code\": 5}", m, sizeof m) &&
	      strstr(m, "\"code\" must be string, not a number"));
	CHECK(refused("run_python", "{\"code\": \"1\", \"bogus\": 1}", m, sizeof m) &&
	      strstr(m, "no argument \"bogus\"") && strstr(m, "code, timeout"));
	CHECK(refused("run_python", "{\"code\": \"1\", \"timeout\": true}", m, sizeof m) &&
	      strstr(m, "\"timeout\" must be number or string"));
	CHECK(refused("run_python", "{\"code\": \"1\", \"memory\": 1e300}", m, sizeof m) &&
	      strstr(m, "\"memory\" must be string or integer, not a number"));
	CHECK(refused("run_python", "{\"code\": \"1\", \"allow\": [\"open\", 3]}", m, sizeof m) &&
	      strstr(m, "\"allow\" must be array of string"));
	CHECK(refused("run_python", "{\"code\": \"1\", \"env\": {\"A\": 1}}", m, sizeof m) &&
	      strstr(m, "\"env\" must be object of string"));
	CHECK(refused("execute_code", "{\"session_id\": \"s\"}", m, sizeof m) &&
	      strstr(m, "\"code\" is required"));
	CHECK(refused("execute_code",
		      "{\"session_id\": \"s\", \"code\": \"1\", \"ignore_dependencies\": \"x\"}", m,
		      sizeof m) &&
	      strstr(m, "must be array or null"));
	CHECK(refused("list_sessions", "{\"x\": 1}", m, sizeof m) && strstr(m, "(it takes: none)"));
	CHECK(refused("upload_file", "{\"session_id\": \"s\", \"filename\": \"a\"}", m, sizeof m) &&
	      strstr(m, "\"content_base64\" is required"));
}

static void test_tools_list_has_complete_schemas(void)
{
	cJSON *list = srd_mcp_tools_list(), *t;
	static const char *const names[] = { "run_python",       "check_python",   "run_javascript",
					     "run_shell",        "create_session", "execute_code",
					     "upload_file",      "download_file",  "list_sessions",
					     "get_session_info", "close_session",  "get_packages",
					     "get_health",       "list_artifacts", "list_src" };
	CHECK_INT(cJSON_GetArraySize(list), sizeof names / sizeof *names);
	size_t i = 0;
	cJSON_ArrayForEach(t, list)
	{
		const cJSON *schema = cJSON_GetObjectItem(t, "inputSchema"), *p;
		CHECK_STR(cJSON_GetObjectItem(t, "name")->valuestring, names[i++]);
		CHECK(strlen(cJSON_GetObjectItem(t, "description")->valuestring) > 40);
		CHECK(cJSON_IsObject(schema));
		CHECK_STR(cJSON_GetObjectItem(schema, "type")->valuestring, "object");
		CHECK(cJSON_IsFalse(cJSON_GetObjectItem(schema, "additionalProperties")));
		cJSON_ArrayForEach(p, cJSON_GetObjectItem(schema, "properties"))
		    CHECK(cJSON_IsString(cJSON_GetObjectItem(p, "description")));
	}
	cJSON_Delete(list);
}

int main(void)
{
	test_base64_round_trips_every_length();
	test_base64_decode_refuses_what_is_not_base64();
	test_parse_tells_bad_json_from_bad_messages();
	test_an_invalid_request_echoes_a_usable_id();
	test_arguments_are_checked_against_the_schema();
	test_tools_list_has_complete_schemas();
	return check_report();
}

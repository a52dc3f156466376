#include "json.h"

#include "saferun.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int srd_fail(srd_ferr *e, unsigned status, const char *field, const char *fmt, ...)
{
	e->status = status;
	snprintf(e->field, sizeof e->field, "%s", field ? field : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	return -1;
}

cJSON *srd_ferr_json(const srd_ferr *e)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "error", e->msg);
	/* AgentRun-style clients (FastAPI) read "detail". */
	cJSON_AddStringToObject(j, "detail", e->msg);
	if (e->field[0])
		cJSON_AddStringToObject(j, "field", e->field);
	else
		cJSON_AddNullToObject(j, "field");
	return j;
}

/* A backslash only occurs inside JSON strings, where it starts an escape:
 * skipping each escape whole finds every \u0000 and nothing else. */
static bool has_nul_escape(const char *s, size_t len)
{
	for (size_t i = 0; i + 1 < len; i++) {
		if (s[i] != '\\')
			continue;
		if (s[i + 1] == 'u' && i + 5 < len && memcmp(s + i + 2, "0000", 4) == 0)
			return true;
		i++;
	}
	return false;
}

/* The offset of the first raw control character inside a string, or -1.
 * JSON wants them escaped; cJSON takes them as they are (and treats any
 * byte up to ' ' as blank between values), so code or a name could carry
 * one its sender never saw. */
static long raw_control(const char *s, size_t len)
{
	bool in_string = false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 && (in_string || (c != '\t' && c != '\r' && c != '\n')))
			return (long)i;
		if (in_string && c == '\\')
			i++; /* an escape's next byte is never the string's end */
		else if (c == '"')
			in_string = !in_string;
	}
	return -1;
}

static int text_checks(const char *text, size_t len, srd_ferr *e)
{
	if (memchr(text, '\0', len))
		return srd_fail(e, 400, NULL,
				"the request body contains a NUL byte; send JSON text");
	if (has_nul_escape(text, len))
		return srd_fail(e, 400, NULL,
				"a string in the body contains \\u0000; NUL characters are not "
				"supported (send binary data base64-encoded)");
	long at = raw_control(text, len);
	if (at >= 0)
		return srd_fail(e, 400, NULL,
				"the request body has a raw control character (0x%02x) at byte "
				"%ld; JSON strings must escape it (\\u%04x, \\n, \\t)",
				(unsigned char)text[at], at, (unsigned char)text[at]);
	return 0;
}

int srd_json_text_check(const char *text, size_t len, srd_ferr *e)
{
	if (text_checks(text, len, e))
		return -1;
	if (!sr_utf8_valid(text, len))
		return srd_fail(e, 400, NULL,
				"the request body is not valid UTF-8 (JSON text must be)");
	return 0;
}

/* The first key or string value that is not UTF-8, as a field path into
 * path (size bytes); false when all are. */
static bool bad_utf8(const cJSON *v, char *path, size_t size)
{
	size_t at = strlen(path);
	for (const cJSON *it = v->child; it; it = it->next) {
		if (it->string)
			snprintf(path + at, size - at, "%s%s", at ? "." : "", it->string);
		if ((it->string && !sr_utf8_valid(it->string, strlen(it->string))) ||
		    (cJSON_IsString(it) &&
		     !sr_utf8_valid(it->valuestring, strlen(it->valuestring))) ||
		    bad_utf8(it, path, size))
			return true;
		path[at] = '\0';
	}
	return false;
}

int srd_json_parse_object(const char *text, size_t len, cJSON **out, srd_ferr *e)
{
	*out = NULL;
	if (!text || len == 0)
		return srd_fail(e, 400, NULL, "the request body is empty; send a JSON object");
	if (text_checks(text, len, e))
		return -1;
	const char *end = NULL;
	cJSON *doc = cJSON_ParseWithLengthOpts(text, len, &end, false);
	size_t at = end ? (size_t)(end - text) : 0;
	while (doc && at < len && strchr(" \t\r\n", text[at]))
		at++;
	if (!doc || at < len) {
		cJSON_Delete(doc);
		return srd_fail(e, 400, NULL, "the request body is not valid JSON (at byte %zu)",
				at);
	}
	if (!cJSON_IsObject(doc)) {
		srd_fail(e, 400, NULL, "the request body is %s; send a JSON object",
			 srd_json_kind(doc));
		cJSON_Delete(doc);
		return -1;
	}
	/* Echoed in an answer, such bytes would make it invalid JSON. */
	char path[128] = "";
	if (bad_utf8(doc, path, sizeof path)) {
		for (char *p = path; *p; p++)
			*p = *p < 0x20 || *p > 0x7e ? '?' : *p; /* it may be the key that is bad */
		cJSON_Delete(doc);
		return srd_fail(e, 400, path, "\"%s\" is not valid UTF-8 text (JSON must be)",
				path);
	}
	*out = doc;
	return 0;
}

const char *srd_json_path(char *buf, size_t size, const char *path, const char *key)
{
	snprintf(buf, size, "%s%s%s", path && *path ? path : "", path && *path ? "." : "", key);
	return buf;
}

int srd_json_check_keys(const cJSON *obj, const char *const *keys, const char *path, srd_ferr *e)
{
	uint64_t seen = 0; /* at most 64 keys: duplicates are refused too */
	for (const cJSON *it = obj->child; it; it = it->next) {
		size_t i = 0;
		while (keys[i] && strcmp(it->string, keys[i]) != 0)
			i++;
		char field[128];
		if (keys[i] && i < 64 && (seen & (1ull << i)))
			return srd_fail(e, 400,
					srd_json_path(field, sizeof field, path, it->string),
					"field \"%s\" is given twice", it->string);
		if (keys[i]) {
			seen |= i < 64 ? 1ull << i : 0;
			continue;
		}
		char list[256] = "";
		for (size_t k = 0; keys[k]; k++)
			snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
				 k ? ", " : "", keys[k]);
		return srd_fail(e, 400, srd_json_path(field, sizeof field, path, it->string),
				"unknown field \"%s\" (known: %s)", it->string, list);
	}
	return 0;
}

bool srd_json_is_integer(const cJSON *v)
{
	/* 2^63 is exact as a double; NaN fails every comparison */
	return cJSON_IsNumber(v) && v->valuedouble >= -9223372036854775808.0 &&
	       v->valuedouble < 9223372036854775808.0 &&
	       v->valuedouble == (double)(long long)v->valuedouble;
}

const char *srd_json_kind(const cJSON *v)
{
	if (cJSON_IsString(v))
		return "a string";
	if (cJSON_IsNumber(v))
		return "a number";
	if (cJSON_IsBool(v))
		return "a boolean";
	if (cJSON_IsNull(v))
		return "null";
	if (cJSON_IsArray(v))
		return "an array";
	if (cJSON_IsObject(v))
		return "an object";
	return "invalid";
}

const cJSON *srd_json_get(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsNull(v) ? NULL : v;
}

int srd_json_string(const cJSON *obj, const char *key, bool required, const char **out, srd_ferr *e)
{
	const cJSON *v = srd_json_get(obj, key);
	*out = NULL;
	if (!v)
		return required ? srd_fail(e, 400, key, "missing field \"%s\" (a string)", key) : 0;
	if (!cJSON_IsString(v))
		return srd_fail(e, 400, key, "\"%s\" must be a string, not %s", key,
				srd_json_kind(v));
	*out = v->valuestring;
	return 0;
}

/* JSON helpers shared by every front-end of the daemon (REST now, MCP
 * next): parse a request body, check keys and types, and describe what
 * was wrong with which field, independent of how the error is sent. */
#ifndef SRD_JSON_H
#define SRD_JSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* What was wrong with a request: the HTTP status it maps to, the JSON
 * path of the field ("" when it is the whole body) and a message that
 * says what to do. */
typedef struct srd_ferr {
	unsigned status;
	unsigned retry_after; /* seconds, for 429 and 503; 0: none */
	char field[128];
	char msg[512];
} srd_ferr;

/* Fill e and return -1. field may be NULL. */
int srd_fail(srd_ferr *e, unsigned status, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* {"error": msg, "detail": msg, "field": path-or-null} */
cJSON *srd_ferr_json(const srd_ferr *e);

/* Text a JSON body may be: no NUL byte, valid UTF-8, no \u0000 escape
 * (C strings would silently cut it off). */
int srd_json_text_check(const char *text, size_t len, srd_ferr *e);
/* Parse a request body that must be one JSON object. NUL characters
 * (\u0000) are refused: C strings would silently cut them off. */
int srd_json_parse_object(const char *text, size_t len, cJSON **out, srd_ferr *e);
/* Every key of obj must be in keys (NULL-terminated); path prefixes the
 * field name in the error ("" at the top). */
int srd_json_check_keys(const cJSON *obj, const char *const *keys, const char *path, srd_ferr *e);
/* Is v a number with an integral value a long long holds? (Converting a
 * double out of that range is undefined: compare, never cast, first.) */
bool srd_json_is_integer(const cJSON *v);
/* "a string", "a number", "an object", ... for error messages. */
const char *srd_json_kind(const cJSON *v);
/* obj[key] if present and not null; NULL otherwise. */
const cJSON *srd_json_get(const cJSON *obj, const char *key);
/* obj[key] must be a string (when present; required: must be present). */
int srd_json_string(const cJSON *obj, const char *key, bool required, const char **out,
		    srd_ferr *e);
/* Join path and key into buf: "env" + "HOME" -> "env.HOME". */
const char *srd_json_path(char *buf, size_t size, const char *path, const char *key);

#endif

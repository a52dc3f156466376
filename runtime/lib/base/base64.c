/* Base64 (RFC 4648, standard alphabet, padded): artifacts inline in a
 * result, files through MCP. */
#include <stdbool.h>
#include <stddef.h>

#include <stdint.h>
#include <stdlib.h>

#include "saferun.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *sr_base64_encode(const void *data, size_t len)
{
	const unsigned char *p = data;
	char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < len)
			v |= p[i + 2];
		*o++ = alphabet[v >> 18];
		*o++ = alphabet[(v >> 12) & 63];
		*o++ = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
		*o++ = i + 2 < len ? alphabet[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

static int value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

int sr_base64_decode(const char *text, size_t len, unsigned char **out, size_t *out_len,
		     const char **why)
{
	*out = NULL;
	*out_len = 0;
	if (len % 4) {
		*why = "its length is not a multiple of 4";
		return -1;
	}
	size_t pad = len && text[len - 1] == '=' ? 1 + (len > 1 && text[len - 2] == '=') : 0;
	unsigned char *buf = malloc(len / 4 * 3 + 1), *o = buf;
	if (!buf) {
		*why = "out of memory";
		return -1;
	}
	for (size_t i = 0; i < len; i += 4) {
		uint32_t v = 0;
		for (size_t k = 0; k < 4; k++) {
			bool padding = i + k >= len - pad;
			int d = padding ? (text[i + k] == '=' ? 0 : -1) : value(text[i + k]);
			if (d < 0) {
				free(buf);
				*why = "it has a character outside the base64 alphabet";
				return -1;
			}
			v = v << 6 | (uint32_t)d;
		}
		*o++ = (unsigned char)(v >> 16);
		if (i + 4 < len || pad < 2)
			*o++ = (unsigned char)(v >> 8);
		if (i + 4 < len || pad < 1)
			*o++ = (unsigned char)v;
	}
	*o = '\0';
	*out = buf;
	*out_len = (size_t)(o - buf);
	return 0;
}

/* Base64 (RFC 4648, standard alphabet, padded) for MCP's file tools. */
#ifndef SRD_BASE64_H
#define SRD_BASE64_H

#include <stdbool.h>
#include <stddef.h>

/* NUL-terminated text of len bytes (malloc'd), or NULL out of memory. */
char *srd_b64_encode(const void *data, size_t len);
/* Decode text strictly: the alphabet, padding only at the end, length a
 * multiple of 4 (whitespace is not skipped). *out is malloc'd (NUL-terminated
 * for convenience). -1: not base64 (why says where), or out of memory. */
int srd_b64_decode(const char *text, size_t len, unsigned char **out, size_t *out_len,
		   const char **why);

#endif

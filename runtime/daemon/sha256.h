/* SHA-256 (FIPS 180-4), for the tenants' tokens: the file may hold a
 * token's digest instead of the token, and a presented token is compared
 * by digest. */
#ifndef SRD_SHA256_H
#define SRD_SHA256_H

#include <stddef.h>

#define SRD_SHA256_LEN 32

void srd_sha256(const void *data, size_t len, unsigned char out[SRD_SHA256_LEN]);

#endif

/* Bearer tokens for TCP listeners. The unix socket is guarded by its
 * file mode and group instead. */
#ifndef SRD_AUTH_H
#define SRD_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#define SRD_TOKEN_MIN 16
#define SRD_TOKEN_MAX 4096

/* The token from file (its first line), or from the SAFERUND_TOKEN
 * environment variable when file is NULL. *out is NULL when neither is
 * set. Returns -1 with msg saying what is wrong. */
int srd_token_load(const char *file, char **out, char *msg, size_t size);
/* Does an Authorization header carry the token? Constant time in the
 * header's content. */
bool srd_token_matches(const char *token, const char *authorization);

#endif

/* Python identifiers are compared after NFKC normalisation (PEP 3131):
 * `ｅｖａｌ` and `𝐞𝐯𝐚𝐥` are `eval`. */
#ifndef SR_CHECKER_NFKC_H
#define SR_CHECKER_NFKC_H

#include <stddef.h>

/* The ASCII text code point cp normalises to, or NULL when its NFKC form
 * is not ASCII (it then stays as it is: no ASCII name can match it). */
const char *sr_nfkc_ascii(unsigned cp);

/* Normalise the UTF-8 identifier s[0..len) into out (room for 2 * len + 1
 * bytes: a mapping never grows a code point's bytes more than twofold).
 * Returns the length written. */
size_t sr_nfkc_identifier(const char *s, size_t len, char *out);

#endif

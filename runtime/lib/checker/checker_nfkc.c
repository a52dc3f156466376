/* NFKC for identifiers, limited to what can matter: a table of every
 * identifier code point whose NFKC form is ASCII (generated from Python's
 * unicodedata, see tests/checker/gen_nfkc_table.py). Other code points are
 * copied unchanged; their NFKC form is not ASCII, and composition never
 * produces ASCII, so such an identifier can never equal an ASCII name. */
#include "checker_nfkc.h"

#include <string.h>

#include "checker_nfkc_table.h"

const char *sr_nfkc_ascii(unsigned cp)
{
	size_t lo = 0, hi = sizeof sr_nfkc_table / sizeof *sr_nfkc_table;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (sr_nfkc_table[mid].cp == cp)
			return sr_nfkc_table[mid].ascii;
		if (sr_nfkc_table[mid].cp < cp)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Decode one UTF-8 sequence (already validated by the caller, but be
 * defensive: a bad byte decodes as itself, length 1). */
static size_t decode(const unsigned char *s, size_t left, unsigned *cp)
{
	size_t n = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 1;
	if (n > left)
		n = 1;
	*cp = n == 1 ? s[0] : s[0] & (0x7Fu >> n);
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80) {
			*cp = s[0];
			return 1;
		}
		*cp = (*cp << 6) | (s[i] & 0x3Fu);
	}
	return n;
}

size_t sr_nfkc_identifier(const char *s, size_t len, char *out)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t o = 0;
	for (size_t i = 0; i < len;) {
		unsigned cp;
		size_t n = u[i] < 0x80 ? 1 : decode(u + i, len - i, &cp);
		const char *a = n > 1 ? sr_nfkc_ascii(cp) : NULL;
		if (a) {
			size_t al = strlen(a);
			memcpy(out + o, a, al);
			o += al;
		} else {
			memcpy(out + o, s + i, n);
			o += n;
		}
		i += n;
	}
	out[o] = '\0';
	return o;
}

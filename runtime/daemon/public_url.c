#include "public_url.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Host header bytes we repeat back: a host name, an IPv4/IPv6 literal, a
 * or a port. Anything else (a header that
 * would smuggle a path, quotes or spaces into the URL) gives relative
 * URLs instead. */
static bool host_ok(const char *h)
{
	size_t n = strlen(h);
	return n > 0 && n < 256 &&
	       strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:[]") ==
		   n;
}

void srd_public_base(const srd_ctx *ctx, const srd_request *req, char *out, size_t size)
{
	out[0] = '\0';
	if (ctx->cfg->public_url) {
		snprintf(out, size, "%s", ctx->cfg->public_url);
		return;
	}
	/* A unix socket has no URL a generic client could fetch: curl
	 * --unix-socket and requests-unixsocket both send "Host: localhost". */
	if (!req->peer || req->peer->is_unix)
		return;
	const char *host = req->header ? srd_request_header(req, "Host") : NULL;
	if (host && host_ok(host))
		snprintf(out, size, "http://%s", host);
}

int srd_public_url_check(const char *url, char *msg, size_t size)
{
	const char *host = strncmp(url, "https://", 8) == 0  ? url + 8
			   : strncmp(url, "http://", 7) == 0 ? url + 7
							     : NULL;
	size_t n = strlen(url);
	bool clean = n < SRD_PUBLIC_URL_MAX;
	for (const char *p = url; *p && clean; p++)
		clean = *p > ' ' && *p < 0x7f && *p != '?' && *p != '#' && *p != '"';
	if (host && *host && *host != '/' && clean)
		return 0;
	snprintf(msg, size,
		 "public_url: \"%.100s\" is not an http:// or https:// URL with a host (e.g. "
		 "https://sandbox.example.com or http://10.0.0.5:8080/saferun; no query, under "
		 "%d characters)",
		 url, SRD_PUBLIC_URL_MAX);
	return -1;
}

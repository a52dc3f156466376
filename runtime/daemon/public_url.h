/* The absolute URL a client reaches this daemon at, for the URLs that
 * AgentRunPlus's routes return (its clients append paths to them:
 * requests.get(session.artifacts_url + "/out.csv")). */
#ifndef SRD_PUBLIC_URL_H
#define SRD_PUBLIC_URL_H

#include <stddef.h>

#include "daemon.h"
#include "http.h"

#define SRD_PUBLIC_URL_MAX 300

/* The configured public_url when there is one (it wins: behind a proxy
 * the Host header names the proxy's upstream, not what clients use);
 * else, over TCP, "http://HOST" from the request's Host header; else ""
 * (relative URLs). No trailing slash. */
void srd_public_base(const srd_ctx *ctx, const srd_request *req, char *out, size_t size);
/* 0, or -1 with msg naming the setting: http:// or https://, a host, no
 * query, fragment, spaces or control characters. */
int srd_public_url_check(const char *url, char *msg, size_t size);

#endif

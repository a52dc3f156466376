/* HTTP/1.1 over libmicrohttpd: one MHD daemon per listener, a thread per
 * connection (a run blocks only its own connection, never /health). It
 * reads and caps the body, authenticates TCP, and hands a srd_request to
 * the routes. */
#ifndef SRD_SERVER_H
#define SRD_SERVER_H

#include <stddef.h>

#include "daemon.h"
#include "listen.h"

typedef struct srd_server srd_server;

int srd_server_start(srd_ctx *ctx, srd_listener *ls, int n, srd_server **out, char *msg,
		     size_t size);
/* Stop accepting connections; open ones are still served. */
void srd_server_quiesce(srd_server *s);
/* Close every connection, join the threads, free s. */
void srd_server_stop(srd_server *s);

#endif

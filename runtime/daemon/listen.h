/* The sockets saferund serves: inherited from systemd (LISTEN_FDS), or
 * its own unix socket (mode 0660, optional group) and optional TCP. */
#ifndef SRD_LISTEN_H
#define SRD_LISTEN_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

#define SRD_MAX_LISTENERS 8

typedef struct srd_listener {
	int fd;
	bool is_unix;
	bool need_token; /* TCP unless --insecure-no-token */
	bool owned;      /* we bound it: unlink the unix path when done */
	bool e2b;        /* --e2b-listen: E2B's API and sandbox traffic (e2b.h) */
	char name[256];  /* socket path or HOST:PORT, for logs */
} srd_listener;

/* Open the listeners. have_token: a bearer token is configured.
 * Returns the number opened or -1 with msg. */
int srd_listen_open(const srd_config *c, bool have_token, srd_listener *ls, char *msg, size_t size);
/* Remove our unix socket paths: new clients find nothing to connect to. */
void srd_listen_unlink(srd_listener *ls, int n);
void srd_listen_close(srd_listener *ls, int n);

#endif

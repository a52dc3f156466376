/* Host id slots: each sandbox (a cold run, a kernel, a workspace, a
 * zygote) maps its ids 0..65535 onto a host range of its own and its user
 * namespace is owned by that range's first uid, so the kernel's per-user
 * counts (inotify, queued signals, message queues, epoll watches, pipe
 * pages, ...) land on that uid: never on host root, never on another
 * sandbox. A slot is taken with a flock on /run/saferun/ids/N, so every
 * saferun process on the machine shares one pool, and is taken only when
 * no host process still has an id in its range. */
#ifndef SR_IDSLOT_H
#define SR_IDSLOT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "saferun.h"

#define SR_ID_SLOT_DIR "/run/saferun/ids"
#define SR_ID_SLOTS    4096u /* SR_HOST_ID_BASE .. 2^31: 4096 ranges of 65536 */

typedef struct sr_idslot {
	int fd;        /* the locked file, -1: no slot */
	uint32_t base; /* host id of the sandbox's id 0, and the namespace's owner */
} sr_idslot;

#define SR_IDSLOT_NONE ((sr_idslot){ .fd = -1, .base = 0 })

/* Take a free slot (0), or -1 with err saying why (all in use, /run not
 * writable). */
int sr_idslot_take(sr_idslot *s, sr_error *err);
/* The same, trying slot start % SR_ID_SLOTS first, then the next ones. */
int sr_idslot_take_from(sr_idslot *s, unsigned start, sr_error *err);
/* Unlock it (nothing if none); its ids are free once no process holds
 * them. all_gone: the caller saw every process of it end (its init
 * reaped), so the next taker need not look. */
void sr_idslot_release(sr_idslot *s, bool all_gone);

#endif

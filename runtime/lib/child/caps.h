/* Dropping every privilege the sandbox's first process holds. */
#ifndef SR_CAPS_H
#define SR_CAPS_H

#include <sys/types.h>

/* Runs in the sandbox child, as root of its user namespace: empties the
 * bounding set, locks the securebits so root can never regain
 * capabilities, switches to uid/gid (no supplementary groups), clears
 * effective, permitted, inheritable and ambient sets and sets
 * no_new_privs. Async-signal-safe (no allocation). 0 or -errno; *step
 * names the call that failed. */
int sr_caps_drop_all(uid_t uid, gid_t gid, const char **step);

#endif

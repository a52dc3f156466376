/* The sandbox's network namespace, configured from outside over netlink. */
#ifndef SR_NET_H
#define SR_NET_H

#include <sys/types.h>

#include "saferun.h"

/* Bring up lo in the network namespace of the process behind pidfd. Runs
 * in the supervisor: the netlink socket is created inside the sandbox's
 * namespace (setns on this thread only, then back), so nothing in the
 * sandbox has to be trusted to do it. */
int sr_net_setup(int pidfd, sr_net_mode mode, sr_error *err);

#endif

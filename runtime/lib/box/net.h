/* The sandbox's network namespace, configured from outside over netlink. */
#ifndef SR_NET_H
#define SR_NET_H

#include <netlink/netlink.h>
#include <sys/types.h>

#include "saferun.h"

/* Bring up lo in the network namespace of the process behind pidfd. Runs
 * in the supervisor: the netlink socket is created inside the sandbox's
 * namespace (setns on this thread only, then back), so nothing in the
 * sandbox has to be trusted to do it. The egress mode's veth and rules
 * are egress.c's. */
int sr_net_setup(int pidfd, sr_error *err);

/* Move this thread into the network namespace of nsfd (a pidfd or an
 * nsfs fd); returns an fd of the namespace it left, for sr_net_leave. */
int sr_net_enter(int nsfd, sr_error *err);
/* Back to the namespace sr_net_enter left (closes self). -1 means this
 * thread could not return: the caller must not go on using it. */
int sr_net_leave(int self, sr_error *err);
/* A NETLINK_ROUTE socket bound to the namespace of nsfd. */
struct nl_sock *sr_net_socket_in(int nsfd, sr_error *err);

/* Set link name up; where names the namespace in errors. */
int sr_net_link_up(struct nl_sock *sk, const char *name, const char *where, sr_error *err);

#endif

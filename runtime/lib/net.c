#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <sched.h>
#include <unistd.h>

#include "error.h"

/* A netlink socket bound to the namespace of pidfd: sockets belong to the
 * namespace they were created in, whatever thread uses them later. */
static struct nl_sock *socket_in_ns(int pidfd, sr_error *err)
{
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0) {
		sr_fail(err, errno, "open own network namespace");
		return NULL;
	}
	struct nl_sock *sk = NULL;
	if (setns(pidfd, CLONE_NEWNET) < 0) {
		sr_fail(err, errno, "enter the sandbox network namespace");
		goto out;
	}
	sk = nl_socket_alloc();
	int rc = sk ? nl_connect(sk, NETLINK_ROUTE) : -NLE_NOMEM;
	if (setns(self, CLONE_NEWNET) < 0) {
		/* We cannot continue in the wrong namespace. */
		sr_fail(err, errno, "return to the host network namespace");
		rc = -1;
	} else if (rc < 0) {
		sr_fail(err, 0, "netlink socket in the sandbox: %s", nl_geterror(rc));
	}
	if (rc < 0 && sk) {
		nl_socket_free(sk);
		sk = NULL;
	}
out:
	close(self);
	return sk;
}

static int link_up(struct nl_sock *sk, const char *name, sr_error *err)
{
	struct rtnl_link *link = NULL, *change = NULL;
	int rc = rtnl_link_get_kernel(sk, 0, name, &link);
	if (rc < 0) {
		sr_fail(err, 0, "find %s in the sandbox: %s", name, nl_geterror(rc));
		goto out;
	}
	change = rtnl_link_alloc();
	if (!change) {
		rc = sr_fail(err, ENOMEM, "allocate link change");
		goto out;
	}
	rtnl_link_set_flags(change, IFF_UP);
	rc = rtnl_link_change(sk, link, change, 0);
	if (rc < 0)
		sr_fail(err, 0, "bring %s up in the sandbox: %s", name, nl_geterror(rc));
out:
	rtnl_link_put(change);
	rtnl_link_put(link);
	return rc < 0 ? -1 : 0;
}

int sr_net_setup(int pidfd, sr_net_mode mode, sr_error *err)
{
	if (mode != SR_NET_NONE)
		return sr_fail(err, EINVAL, "network mode %d is not supported", (int)mode);
	struct nl_sock *sk = socket_in_ns(pidfd, err);
	if (!sk)
		return -1;
	int rc = link_up(sk, "lo", err);
	nl_socket_free(sk);
	return rc;
}

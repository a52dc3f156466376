#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netlink/route/link.h>
#include <sched.h>
#include <unistd.h>

#include "base/base.h"

int sr_net_enter(int nsfd, sr_error *err)
{
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return sr_fail(err, errno, "open own network namespace");
	if (setns(nsfd, CLONE_NEWNET) < 0) {
		sr_fail(err, errno, "enter the sandbox network namespace");
		close(self);
		return -1;
	}
	return self;
}

int sr_net_leave(int self, sr_error *err)
{
	int rc = setns(self, CLONE_NEWNET);
	int saved = errno;
	close(self);
	return rc < 0 ? sr_fail(err, saved, "return to the host network namespace") : 0;
}

/* Sockets belong to the namespace they were created in, whatever thread
 * uses them later. */
struct nl_sock *sr_net_socket_in(int nsfd, sr_error *err)
{
	int self = sr_net_enter(nsfd, err);
	if (self < 0)
		return NULL;
	struct nl_sock *sk = nl_socket_alloc();
	int rc = sk ? nl_connect(sk, NETLINK_ROUTE) : -NLE_NOMEM;
	if (sr_net_leave(self, err) < 0)
		rc = -1; /* we cannot continue in the wrong namespace */
	else if (rc < 0)
		sr_fail(err, 0, "netlink socket in the sandbox: %s", nl_geterror(rc));
	if (rc < 0 && sk) {
		nl_socket_free(sk);
		sk = NULL;
	}
	return sk;
}

int sr_net_link_up(struct nl_sock *sk, const char *name, const char *where, sr_error *err)
{
	struct rtnl_link *link = NULL, *change = NULL;
	int rc = rtnl_link_get_kernel(sk, 0, name, &link);
	if (rc < 0) {
		sr_fail(err, 0, "find %s in %s: %s", name, where, nl_geterror(rc));
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
		sr_fail(err, 0, "bring %s up in %s: %s", name, where, nl_geterror(rc));
out:
	rtnl_link_put(change);
	rtnl_link_put(link);
	return rc < 0 ? -1 : 0;
}

int sr_net_setup(int pidfd, sr_error *err)
{
	struct nl_sock *sk = sr_net_socket_in(pidfd, err);
	if (!sk)
		return -1;
	int rc = sr_net_link_up(sk, "lo", "the sandbox", err);
	nl_socket_free(sk);
	return rc;
}

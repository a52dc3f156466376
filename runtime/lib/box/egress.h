/* The egress network mode (docs/network.md): a veth pair per sandbox, a
 * private /30 from 10.213.0.0/16, a default route through the host end,
 * masquerade on the host, and an allow list as nftables rules inside the
 * sandbox's own network namespace (they vanish with it). */
#ifndef SR_EGRESS_H
#define SR_EGRESS_H

#include <sys/types.h>

#include "saferun.h"

typedef struct sr_egress sr_egress;

/* Resolve the policy's destinations before anything changes on the host:
 * names with getaddrinfo (IPv4) here, in the supervisor, never in the
 * sandbox; dns: true from the host's /etc/resolv.conf. A name that does
 * not resolve is refused (EINVAL) naming the policy entry. */
int sr_egress_plan(const sr_policy *p, sr_egress **out, sr_error *err);
/* Such a name's error is SR_ERR_NET_HOST, its message this field (with
 * the entry's index), ": ", and what the resolver said of the name. */
#define SR_EGRESS_HOST_FIELD "policy.network.allow[%zu].host"
/* The same plan without looking at the kernel (sr_egress_plan then checks
 * that it has nf_tables): what the unit tests read. Free with
 * sr_egress_free. */
int sr_egress_plan_policy(const sr_policy *p, sr_egress **out, sr_error *err);
/* The sandbox's own nftables table for the plan (caller frees; NULL: out
 * of memory): the allow list, the resolvers, and refusals of the host's
 * addresses, the other sandboxes and link-local unless an entry names it. */
char *sr_egress_rules(const sr_egress *e);
/* "nameserver ..." lines for the resolvers the policy opens, or NULL when
 * it opens none: the sandbox's /etc/resolv.conf. */
const char *sr_egress_resolv_conf(const sr_egress *e);
/* /etc/hosts's text: localhost and every allow-list name with the
 * addresses the supervisor resolved for it, or NULL when the list names
 * no host (docs/network.md). */
const char *sr_egress_hosts(const sr_egress *e);
/* Give the (not yet released) sandbox pid its veth, address, route and
 * rules; set up the host side (veth end, forwarding, the saferun table). */
int sr_egress_start(sr_egress *e, pid_t pid, sr_error *err);
/* The refused attempts since the last call, into rep; the counters start
 * again (a kernel's runs each get their own). */
void sr_egress_collect(sr_egress *e, sr_net_report *rep);
/* Remove the veth pair, and the host table when no sandbox needs it. */
void sr_egress_free(sr_egress *e);

#endif

/* The egress plan (sr_egress_plan_policy, sr_egress_rules), as a table: a
 * policy's allow list and resolvers go in; the sandbox's /etc/resolv.conf,
 * /etc/hosts and the allow rules of its nftables table come out, or the
 * refusal naming the policy entry. Names are "localhost" and addresses
 * (resolved from /etc/hosts, no network needed); the line refusing the
 * host's own addresses depends on the host and is left out. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "box/box.h"
#include "check.h"
#include "saferun.h"

#define CIDR(c, ...)                     \
	{                                \
		.cidr = (c), __VA_ARGS__ \
	}
#define HOST(h, ...)                     \
	{                                \
		.host = (h), __VA_ARGS__ \
	}

/* The rules every sandbox table starts and ends with. */
#define HEAD                                                                        \
	"table inet saferun {\n"                                                    \
	"  counter denied { }\n"                                                    \
	"  set denied_to {\n"                                                       \
	"    type ipv4_addr . inet_proto . inet_service; size 32; flags dynamic;\n" \
	"  }\n"                                                                     \
	"  chain output {\n"                                                        \
	"    type filter hook output priority filter; policy drop;\n"               \
	"    oifname \"lo\" accept\n"                                               \
	"    ct state established,related accept\n"                                 \
	"    meta nfproto ipv6 goto deny\n"
#define POOL       "    ip daddr { 10.213.0.0/16, 224.0.0.0/3 } goto deny\n"
#define LINK_LOCAL "    ip daddr 169.254.0.0/16 goto deny\n"
#define TAIL                                                                                    \
	"    goto deny\n"                                                                       \
	"  }\n"                                                                                 \
	"  chain deny {\n"                                                                      \
	"    counter name \"denied\"\n"                                                         \
	"    meta l4proto { tcp, udp } add @denied_to { ip daddr . meta l4proto . th dport }\n" \
	"    reject with icmpx admin-prohibited\n"                                              \
	"  }\n"                                                                                 \
	"}\n"

#define LOCALHOSTS "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n"

struct row {
	const char *name;
	sr_net_allow allow[4];
	size_t n_allow;
	char *dns[SR_NET_MAX_DNS];
	size_t n_dns;
	/* out */
	const char *resolv_conf; /* NULL: none */
	const char *hosts;       /* NULL: none */
	const char *rules;       /* the table without the host-addresses line */
};

static const struct row rows[] = {
	{ "nothing allowed", .rules = HEAD POOL LINK_LOCAL TAIL },
	{ "a CIDR, every port", .allow = { CIDR("198.18.0.0/24") }, .n_allow = 1,
	  .rules =
	      HEAD POOL LINK_LOCAL "    ip daddr 198.18.0.0/24 meta l4proto tcp accept\n" TAIL },
	{ "ports and udp, in policy order",
	  .allow = { CIDR("198.18.0.0/24", .ports = { 80, 443 }, .n_ports = 2),
		     CIDR("203.0.113.7/32", .proto = SR_NET_UDP, .ports = { 123 }, .n_ports = 1) },
	  .n_allow = 2,
	  .rules =
	      HEAD POOL LINK_LOCAL "    ip daddr 198.18.0.0/24 tcp dport { 80, 443 } accept\n"
				   "    ip daddr 203.0.113.7/32 udp dport { 123 } accept\n" TAIL },
	{ "a name: resolved here, pinned in /etc/hosts",
	  .allow = { HOST("localhost", .ports = { 8080 }, .n_ports = 1) }, .n_allow = 1,
	  .hosts = LOCALHOSTS "127.0.0.1\tlocalhost\n",
	  .rules =
	      HEAD POOL LINK_LOCAL "    ip daddr 127.0.0.1/32 tcp dport { 8080 } accept\n" TAIL },
	{ "an address written as a host: not in /etc/hosts", .allow = { HOST("198.18.0.9") },
	  .n_allow = 1,
	  .rules =
	      HEAD POOL LINK_LOCAL "    ip daddr 198.18.0.9/32 meta l4proto tcp accept\n" TAIL },
	{ "link-local only when an entry names it",
	  .allow = { CIDR("169.254.169.254/32", .ports = { 80 }, .n_ports = 1) }, .n_allow = 1,
	  .rules = HEAD POOL "    ip daddr 169.254.169.254/32 tcp dport { 80 } accept\n" TAIL },
	{ "0.0.0.0/0 does not open link-local", .allow = { CIDR("0.0.0.0/0") }, .n_allow = 1,
	  .rules = HEAD POOL LINK_LOCAL "    ip daddr 0.0.0.0/0 meta l4proto tcp accept\n" TAIL },
	{ "resolvers: resolv.conf and port 53 to each", .dns = { "198.18.0.53", "198.18.1.53" },
	  .n_dns = 2,
	  .resolv_conf = "nameserver 198.18.0.53\nnameserver 198.18.1.53\n"
			 "options timeout:2 attempts:2\n",
	  .rules = HEAD "    ip daddr 198.18.0.53 udp dport 53 accept\n"
			"    ip daddr 198.18.0.53 tcp dport 53 accept\n"
			"    ip daddr 198.18.1.53 udp dport 53 accept\n"
			"    ip daddr 198.18.1.53 tcp dport 53 accept\n" POOL LINK_LOCAL TAIL },
};

struct bad {
	const char *name;
	sr_net_allow allow[2];
	size_t n_allow;
	char *dns[SR_NET_MAX_DNS];
	size_t n_dns;
	int errnum;
	sr_error_code code;
	const char *message; /* the start of it (a resolver's own words follow) */
};

static const struct bad bads[] = {
	{ "not a CIDR", .allow = { CIDR("198.18.0.0/24"), CIDR("nowhere/8") }, .n_allow = 2,
	  .errnum = EINVAL,
	  .message = "policy.network.allow[1].cidr: \"nowhere/8\" is not a CIDR" },
	{ "a resolver that is not an address", .dns = { "198.18.0" }, .n_dns = 1, .errnum = EINVAL,
	  .message = "policy.network.dns[0]: \"198.18.0\" is not an address" },
	{ "a name that does not resolve", .allow = { HOST("no-such-host.invalid") }, .n_allow = 1,
	  .errnum = EINVAL, .code = SR_ERR_NET_HOST,
	  .message = "policy.network.allow[0].host: \"no-such-host.invalid\" does not resolve: " },
};

/* The rules without the line refusing the host's addresses (the only
 * "ip daddr { ... } goto deny" line but the pool's). */
static char *without_host_line(const char *rules)
{
	char *out = calloc(1, strlen(rules) + 1);
	for (const char *line = rules; out && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line + 1) : strlen(line);
		bool host = strncmp(line, "    ip daddr { ", 15) == 0 &&
			    strncmp(line, POOL, strlen(POOL)) != 0;
		if (!host)
			strncat(out, line, len);
		line += len;
	}
	return out;
}

static sr_policy policy_of(const sr_net_allow *allow, size_t n_allow, char *const *dns,
			   size_t n_dns)
{
	sr_policy p;
	memset(&p, 0, sizeof p);
	p.net_mode = SR_NET_EGRESS;
	p.net.allow = (sr_net_allow *)allow;
	p.net.n_allow = n_allow;
	for (size_t i = 0; i < n_dns; i++)
		p.net.dns[i] = dns[i];
	p.net.n_dns = n_dns;
	return p;
}

static void check_row(const struct row *r)
{
	sr_policy p = policy_of(r->allow, r->n_allow, r->dns, r->n_dns);
	sr_egress *e = NULL;
	sr_error err = { 0 };
	fprintf(stderr, "-- %s\n", r->name);
	CHECK_INT(sr_egress_plan_policy(&p, &e, &err), 0);
	if (!e) {
		fprintf(stderr, "%s\n", err.msg);
		return;
	}
	const char *resolv = sr_egress_resolv_conf(e), *hosts = sr_egress_hosts(e);
	if (r->resolv_conf)
		CHECK_STR(resolv, r->resolv_conf);
	else
		CHECK(resolv == NULL);
	if (r->hosts)
		CHECK_STR(hosts, r->hosts);
	else
		CHECK(hosts == NULL);
	char *rules = sr_egress_rules(e), *got = rules ? without_host_line(rules) : NULL;
	CHECK_STR(got, r->rules);
	free(got);
	free(rules);
	sr_egress_free(e);
}

static void check_bad(const struct bad *b)
{
	sr_policy p = policy_of(b->allow, b->n_allow, b->dns, b->n_dns);
	sr_egress *e = NULL;
	sr_error err = { 0 };
	fprintf(stderr, "-- %s\n", b->name);
	CHECK_INT(sr_egress_plan_policy(&p, &e, &err), -1);
	CHECK(e == NULL);
	CHECK_INT(err.errnum, b->errnum);
	CHECK_INT(err.code, b->code);
	bool starts = strncmp(err.msg, b->message, strlen(b->message)) == 0;
	if (!starts)
		fprintf(stderr, "got  \"%s\"\nwant \"%s...\"\n", err.msg, b->message);
	CHECK(starts);
}

/* More destinations than a table holds (four per allowed entry) is refused
 * naming the entry that passed the count. */
static void check_too_many(void)
{
	enum { N = SR_NET_MAX_ALLOW * 4 + 1 };
	static sr_net_allow allow[N];
	static char cidr[N][32];
	for (size_t i = 0; i < N; i++) {
		snprintf(cidr[i], sizeof cidr[i], "10.%zu.%zu.0/24", i / 256, i % 256);
		allow[i] = (sr_net_allow){ .cidr = cidr[i] };
	}
	sr_policy p = policy_of(allow, N, NULL, 0);
	sr_egress *e = NULL;
	sr_error err = { 0 };
	CHECK_INT(sr_egress_plan_policy(&p, &e, &err), -1);
	CHECK_INT(err.errnum, EINVAL);
	CHECK_STR(err.msg, "policy.network.allow[256]: more than 256 destinations in all");
	p.net.n_allow = N - 1;
	CHECK_INT(sr_egress_plan_policy(&p, &e, &err), 0);
	sr_egress_free(e);
}

int main(void)
{
	for (size_t i = 0; i < ARRAY_LEN(rows); i++)
		check_row(&rows[i]);
	for (size_t i = 0; i < ARRAY_LEN(bads); i++)
		check_bad(&bads[i]);
	check_too_many();
	return check_report();
}

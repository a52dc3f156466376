#include "egress.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <netdb.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "net.h"

/* Sandbox addresses: sandbox i owns 10.213.0.0 + 4i as a /30, .1 on the
 * host end "sr-<i>", .2 on its "eth0". The name is the allocation: the
 * kernel refuses a second link of the same name, so concurrent sandboxes
 * (CLI runs, daemons) never share an address. */
#define POOL_BASE   0x0ad50000u /* 10.213.0.0 */
#define POOL_PREFIX 16
#define POOL_SLOTS  (1u << (32 - POOL_PREFIX - 2))
#define HOST_PREFIX "sr-"
#define LOCK_DIR    "/run/saferun"
#define LOCK_PATH   LOCK_DIR "/egress.lock"
#define MAX_DESTS   (SR_NET_MAX_ALLOW * 4)
#define MAX_DNS     (SR_NET_MAX_DNS + 3) /* resolv.conf names at most 3 */

struct dest {
	uint32_t addr; /* host byte order */
	unsigned prefix;
	const sr_net_allow *rule; /* proto and ports */
};

struct sr_egress {
	struct dest dests[MAX_DESTS];
	size_t n_dests;
	uint32_t dns[MAX_DNS];
	size_t n_dns;
	unsigned slot;
	bool have_veth;
	char host_if[IFNAMSIZ];
	int nsfd; /* the sandbox's network namespace, held until the report is read */
	char resolv_conf[MAX_DNS * 32 + 64];
	/* /etc/hosts: the names in the allow list, pinned to the addresses
	 * the supervisor resolved (the ones the rules open) */
	char hosts[MAX_DESTS * (INET_ADDRSTRLEN + 256) + 128];
	bool have_hosts;
};

/* libnftables keeps per-process state that is not safe across threads
 * (the daemon runs sandboxes in parallel): one command at a time. */
static pthread_mutex_t nft_mu = PTHREAD_MUTEX_INITIALIZER;

/* libnftables is opened at the first nftables command, not linked: it and
 * the five libraries it pulls in cost every saferun process ~1 ms to load
 * and every fork of the daemon ~30 more mappings, and most runs never
 * use it. Under nft_mu. */
#define NFT_SONAME "libnftables.so.1"
static struct {
	void *lib;
	__typeof__(nft_ctx_new) *ctx_new;
	__typeof__(nft_ctx_free) *ctx_free;
	__typeof__(nft_ctx_buffer_output) *buffer_output;
	__typeof__(nft_ctx_buffer_error) *buffer_error;
	__typeof__(nft_ctx_output_set_flags) *output_set_flags;
	__typeof__(nft_run_cmd_from_buffer) *run_cmd;
	__typeof__(nft_ctx_get_error_buffer) *error_buffer;
	__typeof__(nft_ctx_get_output_buffer) *output_buffer;
} nft;

static int nft_load(sr_error *err)
{
	if (nft.lib)
		return 0;
	void *lib = dlopen(NFT_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return sr_fail(err, ENOENT, "load %s (Debian package libnftables1): %s", NFT_SONAME,
			       dlerror());
	struct {
		void **fn;
		const char *name;
	} syms[] = {
		{ (void **)&nft.ctx_new, "nft_ctx_new" },
		{ (void **)&nft.ctx_free, "nft_ctx_free" },
		{ (void **)&nft.buffer_output, "nft_ctx_buffer_output" },
		{ (void **)&nft.buffer_error, "nft_ctx_buffer_error" },
		{ (void **)&nft.output_set_flags, "nft_ctx_output_set_flags" },
		{ (void **)&nft.run_cmd, "nft_run_cmd_from_buffer" },
		{ (void **)&nft.error_buffer, "nft_ctx_get_error_buffer" },
		{ (void **)&nft.output_buffer, "nft_ctx_get_output_buffer" },
	};
	for (size_t i = 0; i < sizeof syms / sizeof *syms; i++)
		if (!(*syms[i].fn = dlsym(lib, syms[i].name))) {
			dlclose(lib);
			return sr_fail(err, ENOENT, "%s has no %s", NFT_SONAME, syms[i].name);
		}
	nft.lib = lib;
	return 0;
}

/* Unmap it again (saferund's start-up clean-up needs it once; a daemon
 * that runs egress sandboxes loads it again at the first). */
static void nft_unload(void)
{
	pthread_mutex_lock(&nft_mu);
	if (nft.lib)
		dlclose(nft.lib);
	memset(&nft, 0, sizeof nft);
	pthread_mutex_unlock(&nft_mu);
}

static void ip_text(uint32_t addr, char *buf)
{
	struct in_addr a = { .s_addr = htonl(addr) };
	inet_ntop(AF_INET, &a, buf, INET_ADDRSTRLEN);
}

/* ---- the plan: every address known before the host changes ------------- */

static int add_dest(sr_egress *e, uint32_t addr, unsigned prefix, const sr_net_allow *rule,
		    size_t i, sr_error *err)
{
	if (e->n_dests == MAX_DESTS)
		return sr_refuse(err, EINVAL,
				 "policy.network.allow[%zu]: more than %d destinations in all", i,
				 MAX_DESTS);
	e->dests[e->n_dests++] = (struct dest){ .addr = addr, .prefix = prefix, .rule = rule };
	return 0;
}

static int resolve_host(sr_egress *e, const sr_net_allow *a, size_t i, sr_error *err)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
	int rc = getaddrinfo(a->host, NULL, &hints, &res);
	if (rc != 0) {
		sr_refuse(err, EINVAL, "\"%s\" does not resolve: %s", a->host, gai_strerror(rc));
		sr_error_mark(err, SR_ERR_NET_HOST);
		return sr_error_wrap(err, SR_EGRESS_HOST_FIELD, i);
	}
	for (struct addrinfo *r = res; r && rc == 0; r = r->ai_next) {
		uint32_t addr = ntohl(((struct sockaddr_in *)r->ai_addr)->sin_addr.s_addr);
		bool seen = false;
		for (size_t k = 0; k < e->n_dests; k++)
			seen |= e->dests[k].rule == a && e->dests[k].addr == addr;
		if (!seen)
			rc = add_dest(e, addr, 32, a, i, err);
	}
	freeaddrinfo(res);
	return rc;
}

/* dns: true: the host's IPv4 nameservers, loopback ones left out (the
 * sandbox's 127.0.0.0/8 is its own lo). */
static int host_resolvers(sr_egress *e, sr_error *err)
{
	FILE *f = fopen("/etc/resolv.conf", "re");
	char line[256], addr[64];
	while (f && fgets(line, sizeof line, f) && e->n_dns < MAX_DNS) {
		struct in_addr a;
		if (sscanf(line, " nameserver %63s", addr) == 1 &&
		    inet_pton(AF_INET, addr, &a) == 1 && (ntohl(a.s_addr) >> 24) != 127)
			e->dns[e->n_dns++] = ntohl(a.s_addr);
	}
	if (f)
		fclose(f);
	if (e->n_dns == 0)
		return sr_refuse(
		    err, EINVAL,
		    "policy.network.dns: true, but the host's /etc/resolv.conf names no "
		    "IPv4 nameserver outside 127.0.0.0/8 (list resolver addresses instead)");
	return 0;
}

static int nft_run(int nsfd, const char *cmd, bool json, char **out, sr_error *err);

static int plan_allow(sr_egress *e, const sr_policy *p, sr_error *err)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < p->net.n_allow; i++) {
		const sr_net_allow *a = &p->net.allow[i];
		if (a->host) {
			rc = resolve_host(e, a, i, err);
			continue;
		}
		/* the policy wrote it normalised: "a.b.c.d/n" */
		char buf[INET_ADDRSTRLEN + 4];
		snprintf(buf, sizeof buf, "%s", a->cidr);
		char *slash = strchr(buf, '/');
		struct in_addr ia = { 0 };
		if (!slash || (*slash = '\0', inet_pton(AF_INET, buf, &ia) != 1))
			return sr_refuse(err, EINVAL,
					 "policy.network.allow[%zu].cidr: \"%s\" is not a CIDR", i,
					 a->cidr);
		rc = add_dest(e, ntohl(ia.s_addr), (unsigned)atoi(slash + 1), a, i, err);
	}
	return rc;
}

/* Every name the allow list holds (not an address written as a name),
 * with each address resolve_host found for it: a sandbox that looks the
 * name up (files before dns in nsswitch.conf) gets exactly those, with
 * or without a resolver. */
static void plan_hosts(sr_egress *e)
{
	size_t len =
	    (size_t)snprintf(e->hosts, sizeof e->hosts, "%s",
			     "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n");
	for (size_t i = 0; i < e->n_dests && len < sizeof e->hosts; i++) {
		const struct dest *d = &e->dests[i];
		struct in_addr ia;
		if (!d->rule->host || inet_pton(AF_INET, d->rule->host, &ia) == 1)
			continue;
		char a[INET_ADDRSTRLEN];
		ip_text(d->addr, a);
		len += (size_t)snprintf(e->hosts + len, sizeof e->hosts - len, "%s\t%s\n", a,
					d->rule->host);
		e->have_hosts = true;
	}
}

static int plan_dns(sr_egress *e, const sr_policy *p, sr_error *err)
{
	for (size_t i = 0; i < p->net.n_dns; i++) {
		struct in_addr ia;
		if (inet_pton(AF_INET, p->net.dns[i], &ia) != 1)
			return sr_refuse(err, EINVAL,
					 "policy.network.dns[%zu]: \"%s\" is not an address", i,
					 p->net.dns[i]);
		e->dns[e->n_dns++] = ntohl(ia.s_addr);
	}
	if (p->net.dns_host && p->net.n_dns == 0 && host_resolvers(e, err) < 0)
		return -1;
	size_t len = 0;
	for (size_t i = 0; i < e->n_dns; i++) {
		char a[INET_ADDRSTRLEN];
		ip_text(e->dns[i], a);
		len += (size_t)snprintf(e->resolv_conf + len, sizeof e->resolv_conf - len,
					"nameserver %s\n", a);
	}
	if (e->n_dns)
		snprintf(e->resolv_conf + len, sizeof e->resolv_conf - len,
			 "options timeout:2 attempts:2\n");
	return 0;
}

int sr_egress_plan_policy(const sr_policy *p, sr_egress **out, sr_error *err)
{
	sr_egress *e = calloc(1, sizeof *e);
	if (!e)
		return sr_fail(err, ENOMEM, "egress plan");
	e->nsfd = -1;
	if (plan_allow(e, p, err) < 0 || plan_dns(e, p, err) < 0) {
		free(e);
		return -1;
	}
	plan_hosts(e);
	*out = e;
	return 0;
}

int sr_egress_plan(const sr_policy *p, sr_egress **out, sr_error *err)
{
	sr_egress *e;
	if (sr_egress_plan_policy(p, &e, err) < 0)
		return -1;
	/* A kernel without nf_tables cannot hold an allow list: refuse the
	 * run before anything is built, as for any feature the host lacks
	 * (after the names: a policy's own mistakes are said first). */
	sr_error why = { 0 };
	if (nft_run(-1, "list tables", false, NULL, &why) < 0) {
		free(e);
		return sr_refuse(err, EOPNOTSUPP,
				 "policy.network.mode \"egress\" needs nftables (nf_tables) in the "
				 "kernel: %s",
				 why.msg);
	}
	*out = e;
	return 0;
}

const char *sr_egress_resolv_conf(const sr_egress *e)
{
	return e->n_dns ? e->resolv_conf : NULL;
}

const char *sr_egress_hosts(const sr_egress *e)
{
	return e->have_hosts ? e->hosts : NULL;
}

/* ---- nftables ------------------------------------------------------------ */

/* Run nft commands, in the network namespace of nsfd (or here, -1). */
static int nft_run(int nsfd, const char *cmd, bool json, char **out, sr_error *err)
{
	pthread_mutex_lock(&nft_mu);
	int rc = -1, self = nsfd >= 0 ? sr_net_enter(nsfd, err) : -1;
	if (nsfd >= 0 && self < 0)
		goto out;
	/* libnftables exit()s the whole process when it cannot open its
	 * netlink socket (a kernel without nfnetlink): look first. */
	int probe = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (probe < 0) {
		sr_fail(err, errno, "no netfilter netlink socket (nfnetlink)");
		goto leave;
	}
	close(probe);
	if (nft_load(err) < 0)
		goto leave;
	struct nft_ctx *ctx = nft.ctx_new(NFT_CTX_DEFAULT);
	if (!ctx) {
		sr_fail(err, ENOMEM, "nftables context");
	} else {
		nft.buffer_output(ctx);
		nft.buffer_error(ctx);
		if (json)
			nft.output_set_flags(ctx, NFT_CTX_OUTPUT_JSON);
		if (nft.run_cmd(ctx, cmd) != 0) {
			const char *msg = nft.error_buffer(ctx);
			sr_fail(err, 0, "nftables: %.*s", (int)strcspn(msg ? msg : "", "\n"),
				msg ? msg : "");
		} else {
			rc = 0;
			if (out && !(*out = strdup(nft.output_buffer(ctx))))
				rc = sr_fail(err, ENOMEM, "nftables output");
		}
		nft.ctx_free(ctx);
	}
leave:
	if (self >= 0 && sr_net_leave(self, err) < 0 && rc == 0) {
		rc = -1;
		if (out) {
			free(*out);
			*out = NULL;
		}
	}
out:
	pthread_mutex_unlock(&nft_mu);
	return rc;
}

/* The host side, shared by every egress sandbox: nothing from a sandbox
 * veth reaches the host itself (any of its addresses, whatever the
 * policy), sandboxes do not reach each other, and what leaves is
 * masqueraded. Matching "sr-*" keeps it free of per-sandbox rules.
 *
 * Forwarding is on for the uplinks while a sandbox needs them, so the
 * host routes for anyone: only replies may be forwarded into a sandbox
 * veth, never a new connection (a LAN neighbour with a route to
 * 10.213.0.0/16 through the host would reach a server the code listens
 * with). The comment marks this version of the table (ensure_host_table). */
#define HOST_TABLE_MARK "saferun: only replies into sandboxes"
static const char host_table[] =
    "table inet saferun {\n"
    "  chain input {\n"
    "    type filter hook input priority filter; policy accept;\n"
    "    iifname \"" HOST_PREFIX "*\" counter reject with icmpx admin-prohibited\n"
    "  }\n"
    "  chain forward {\n"
    "    type filter hook forward priority filter; policy accept;\n"
    "    iifname \"" HOST_PREFIX "*\" oifname \"" HOST_PREFIX
    "*\" counter reject with icmpx admin-prohibited\n"
    "    iifname \"" HOST_PREFIX "*\" accept\n"
    "    oifname \"" HOST_PREFIX "*\" ct state established,related accept\n"
    "    oifname \"" HOST_PREFIX "*\" counter drop comment \"" HOST_TABLE_MARK "\"\n"
    "  }\n"
    "  chain postrouting {\n"
    "    type nat hook postrouting priority srcnat; policy accept;\n"
    "    ip saddr 10.213.0.0/16 oifname != \"" HOST_PREFIX "*\" masquerade\n"
    "  }\n"
    "}\n";

/* One supervisor at a time changes the host side. A POSIX record lock,
 * not flock: a sandbox cloned by another thread while the lock is held
 * keeps a copy of the fd until it is released, and an flock (like an OFD
 * lock) belongs to the file description, so that child would hold it
 * while its own parent waits for it. A record lock belongs to the process
 * and is not inherited; the mutex orders the threads of one process
 * (saferund), which a record lock does not. */
static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;

static int lock_host(sr_error *err)
{
	pthread_mutex_lock(&host_mu);
	mkdir(LOCK_DIR, 0755);
	int fd = open(LOCK_PATH, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		sr_fail(err, errno, "open %s", LOCK_PATH);
		pthread_mutex_unlock(&host_mu);
		return -1;
	}
	struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int rc;
	while ((rc = fcntl(fd, F_SETLKW, &l)) < 0 && errno == EINTR)
		;
	if (rc < 0) {
		sr_fail(err, errno, "lock %s", LOCK_PATH);
		close(fd);
		pthread_mutex_unlock(&host_mu);
		return -1;
	}
	return fd;
}

/* Closing the (only) fd of the file releases the process's lock. */
static void unlock_host(int fd)
{
	close(fd);
	pthread_mutex_unlock(&host_mu);
}

static int ensure_host_table(sr_error *err)
{
	char *now = NULL, script[sizeof host_table + 64];
	bool have = nft_run(-1, "list table inet saferun", false, &now, NULL) == 0;
	bool current = have && now && strstr(now, HOST_TABLE_MARK);
	free(now);
	if (current)
		return 0;
	/* One transaction: an older table (without the forward rules) is
	 * replaced under the running sandboxes without a gap. */
	snprintf(script, sizeof script, "%s%s", have ? "delete table inet saferun\n" : "",
		 host_table);
	sr_error why = { 0 };
	if (nft_run(-1, script, false, NULL, &why) < 0)
		return sr_refuse(err, why.errnum,
				 "create the host's inet saferun table (%s; does the kernel have "
				 "nf_tables, nf_nat and nf_reject?)",
				 why.msg);
	return 0;
}

static bool any_sandbox_link(void)
{
	struct if_nameindex *ifs = if_nameindex();
	bool found = false;
	for (struct if_nameindex *i = ifs; i && i->if_index && !found; i++)
		found = strncmp(i->if_name, HOST_PREFIX, strlen(HOST_PREFIX)) == 0;
	if (ifs)
		if_freenameindex(ifs);
	return found;
}

/* With the lock held: the table goes once no sandbox link is left. */
static int drop_host_table_if_unused(void)
{
	if (any_sandbox_link() || nft_run(-1, "list table inet saferun", false, NULL, NULL) < 0)
		return 0;
	return nft_run(-1, "delete table inet saferun", false, NULL, NULL) == 0 ? 1 : 0;
}

static void rule_line(FILE *f, const struct dest *d)
{
	char a[INET_ADDRSTRLEN];
	ip_text(d->addr, a);
	const char *proto = d->rule->proto == SR_NET_UDP ? "udp" : "tcp";
	fprintf(f, "    ip daddr %s/%u ", a, d->prefix);
	if (d->rule->n_ports == 0) {
		fprintf(f, "meta l4proto %s accept\n", proto);
		return;
	}
	fprintf(f, "%s dport { ", proto);
	for (size_t i = 0; i < d->rule->n_ports; i++)
		fprintf(f, "%s%u", i ? ", " : "", d->rule->ports[i]);
	fprintf(f, " } accept\n");
}

/* Link-local (cloud metadata services live at 169.254.169.254) only when
 * an entry names it, never as part of a wider CIDR such as 0.0.0.0/0. */
static bool names_link_local(const sr_egress *e)
{
	for (size_t i = 0; i < e->n_dests; i++)
		if (e->dests[i].prefix >= 16 && (e->dests[i].addr & 0xffff0000u) == 0xa9fe0000u)
			return true;
	return false;
}

/* One rule for the host's addresses as they are at start (the host's input
 * chain refuses any it gains later); its loopback is the sandbox's own lo
 * there, and 10.213.0.0/16 has a rule of its own. */
static void deny_host_addresses(FILE *f)
{
	struct ifaddrs *ifa = NULL;
	if (getifaddrs(&ifa) < 0)
		return;
	const char *sep = "    ip daddr { ";
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		uint32_t h = ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr);
		bool dup = false;
		for (struct ifaddrs *j = ifa; j != i; j = j->ifa_next)
			dup |= j->ifa_addr && j->ifa_addr->sa_family == AF_INET &&
			       ((struct sockaddr_in *)j->ifa_addr)->sin_addr.s_addr == htonl(h);
		if (dup || h >> 24 == 127 || (h & 0xffff0000u) == POOL_BASE)
			continue;
		char a[INET_ADDRSTRLEN];
		ip_text(h, a);
		fprintf(f, "%s%s", sep, a);
		sep = ", ";
	}
	if (sep[0] == ',')
		fprintf(f, " } goto deny\n");
	freeifaddrs(ifa);
}

/* The sandbox's own rules: only the allow list leaves; the host's
 * addresses and the other sandboxes are refused even under 0.0.0.0/0;
 * every refusal is counted and its destination recorded for the result. */
char *sr_egress_rules(const sr_egress *e)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return NULL;
	char a[INET_ADDRSTRLEN];
	fprintf(f,
		"table inet saferun {\n"
		"  counter denied { }\n"
		"  set denied_to {\n"
		"    type ipv4_addr . inet_proto . inet_service; size %d; flags dynamic;\n"
		"  }\n"
		"  chain output {\n"
		"    type filter hook output priority filter; policy drop;\n"
		"    oifname \"lo\" accept\n"
		"    ct state established,related accept\n"
		"    meta nfproto ipv6 goto deny\n",
		SR_NET_DENIED_MAX);
	for (size_t i = 0; i < e->n_dns; i++) {
		ip_text(e->dns[i], a);
		fprintf(f, "    ip daddr %s udp dport 53 accept\n", a);
		fprintf(f, "    ip daddr %s tcp dport 53 accept\n", a);
	}
	deny_host_addresses(f);
	fprintf(f, "    ip daddr { 10.213.0.0/16, 224.0.0.0/3 } goto deny\n");
	if (!names_link_local(e))
		fprintf(f, "    ip daddr 169.254.0.0/16 goto deny\n");
	for (size_t i = 0; i < e->n_dests; i++)
		rule_line(f, &e->dests[i]);
	fprintf(
	    f,
	    "    goto deny\n"
	    "  }\n"
	    "  chain deny {\n"
	    "    counter name \"denied\"\n"
	    "    meta l4proto { tcp, udp } add @denied_to { ip daddr . meta l4proto . th dport }\n"
	    "    reject with icmpx admin-prohibited\n"
	    "  }\n"
	    "}\n");
	int bad = ferror(f);
	if (fclose(f) != 0 || bad) {
		free(text);
		return NULL;
	}
	return text;
}

/* ---- links, addresses, routes -------------------------------------------- */

static int link_index(struct nl_sock *sk, const char *name, const char *where, sr_error *err)
{
	struct rtnl_link *link = NULL;
	int rc = rtnl_link_get_kernel(sk, 0, name, &link);
	if (rc < 0)
		return sr_fail(err, 0, "find %s in %s: %s", name, where, nl_geterror(rc));
	int idx = rtnl_link_get_ifindex(link);
	rtnl_link_put(link);
	return idx;
}

static int add_address(struct nl_sock *sk, const char *ifname, uint32_t addr, const char *where,
		       sr_error *err)
{
	int idx = link_index(sk, ifname, where, err);
	if (idx < 0)
		return -1;
	uint32_t be = htonl(addr);
	struct nl_addr *local = nl_addr_build(AF_INET, &be, sizeof be);
	struct rtnl_addr *a = rtnl_addr_alloc();
	int rc = -NLE_NOMEM;
	if (local && a) {
		nl_addr_set_prefixlen(local, 30);
		rtnl_addr_set_ifindex(a, idx);
		rc = rtnl_addr_set_local(a, local);
		if (rc == 0)
			rc = rtnl_addr_add(sk, a, 0);
	}
	rtnl_addr_put(a);
	nl_addr_put(local);
	if (rc < 0)
		return sr_fail(err, 0, "address %s in %s: %s", ifname, where, nl_geterror(rc));
	return 0;
}

static int add_default_route(struct nl_sock *sk, const char *ifname, uint32_t gw, sr_error *err)
{
	int idx = link_index(sk, ifname, "the sandbox", err);
	if (idx < 0)
		return -1;
	uint32_t any = 0, be = htonl(gw);
	struct nl_addr *dst = nl_addr_build(AF_INET, &any, sizeof any);
	struct nl_addr *via = nl_addr_build(AF_INET, &be, sizeof be);
	struct rtnl_route *r = rtnl_route_alloc();
	struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
	int rc = -NLE_NOMEM;
	if (dst && via && r && nh) {
		nl_addr_set_prefixlen(dst, 0);
		rtnl_route_set_family(r, AF_INET);
		rtnl_route_set_table(r, RT_TABLE_MAIN);
		rtnl_route_set_scope(r, RT_SCOPE_UNIVERSE);
		rtnl_route_set_protocol(r, RTPROT_STATIC);
		rtnl_route_set_dst(r, dst);
		rtnl_route_nh_set_gateway(nh, via);
		rtnl_route_nh_set_ifindex(nh, idx);
		rtnl_route_add_nexthop(r, nh);
		nh = NULL; /* the route owns it */
		rc = rtnl_route_add(sk, r, NLM_F_CREATE | NLM_F_EXCL);
	}
	if (nh)
		rtnl_route_nh_free(nh);
	rtnl_route_put(r);
	nl_addr_put(dst);
	nl_addr_put(via);
	if (rc < 0)
		return sr_fail(err, 0, "default route in the sandbox: %s", nl_geterror(rc));
	return 0;
}

static int write_sysctl(const char *fmt, const char *ifname, const char *value, sr_error *err)
{
	char path[128];
	snprintf(path, sizeof path, fmt, ifname);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return sr_fail(err, errno, "open %s", path);
	ssize_t n = write(fd, value, strlen(value));
	int saved = errno;
	close(fd);
	return n < 0 ? sr_fail(err, saved, "write %s", path) : 0;
}

static bool overlaps(uint32_t a, unsigned alen, uint32_t b, unsigned blen)
{
	unsigned len = alen < blen ? alen : blen;
	uint32_t mask = len ? ~0u << (32 - len) : 0;
	return ((a ^ b) & mask) == 0;
}

/* Could a packet to an allowed destination leave by a route to dst? */
static bool route_is_used(const sr_egress *e, struct nl_addr *dst)
{
	uint32_t net = 0;
	unsigned len = dst ? nl_addr_get_prefixlen(dst) : 0;
	if (dst && nl_addr_get_len(dst) == sizeof net)
		memcpy(&net, nl_addr_get_binary_addr(dst), sizeof net);
	net = ntohl(net);
	for (size_t i = 0; i < e->n_dests; i++)
		if (overlaps(net, len, e->dests[i].addr, e->dests[i].prefix))
			return true;
	for (size_t i = 0; i < e->n_dns; i++)
		if (overlaps(net, len, e->dns[i], 32))
			return true;
	return false;
}

/* ---- uplink forwarding, recorded so that it can be undone ----------------- */

/* The interfaces whose forwarding saferun turned on, one line each,
 * "<name> <ifindex> <value before>": written (whole, by rename) under the
 * lock before the sysctl changes, so a supervisor killed at any point
 * leaves the original values behind for the next one; put back, and the
 * file removed, by whoever finds no sandbox link left. */
#define FWD_PATH LOCK_DIR "/egress.forwarding"
#define FWD_MAX  64

struct fwd_entry {
	char name[IF_NAMESIZE];
	int index;
	int before;
};

struct fwd_state {
	struct fwd_entry e[FWD_MAX];
	size_t n;
};

static int read_forwarding(const char *name, int *value)
{
	char path[128], buf[8];
	snprintf(path, sizeof path, "/proc/sys/net/ipv4/conf/%s/forwarding", name);
	if (sr_read_file(path, buf, sizeof buf) <= 0)
		return -1;
	*value = atoi(buf);
	return 0;
}

/* A missing file is an empty state; a line that is not ours stops
 * everything (a value we cannot read back is a value we would lose). */
static int fwd_load(struct fwd_state *st, sr_error *err)
{
	st->n = 0;
	FILE *f = fopen(FWD_PATH, "re");
	if (!f)
		return errno == ENOENT ? 0 : sr_fail(err, errno, "open %s", FWD_PATH);
	char line[128];
	int rc = 0;
	for (unsigned no = 1; rc == 0 && fgets(line, sizeof line, f); no++) {
		struct fwd_entry *x = &st->e[st->n];
		char end;
		if (st->n == FWD_MAX ||
		    sscanf(line, "%15s %d %d%c", x->name, &x->index, &x->before, &end) != 4 ||
		    end != '\n' || x->index <= 0)
			rc =
			    sr_fail(err, EINVAL,
				    "%s line %u: \"%.*s\" is not \"<interface> <index> <forwarding "
				    "before>\" (put the interfaces' forwarding back by hand, then "
				    "remove the file)",
				    FWD_PATH, no, (int)strcspn(line, "\n"), line);
		else
			st->n++;
	}
	fclose(f);
	return rc;
}

static int fwd_save(const struct fwd_state *st, sr_error *err)
{
	static const char tmp[] = FWD_PATH ".tmp";
	FILE *f = fopen(tmp, "we");
	if (!f)
		return sr_fail(err, errno, "create %s", tmp);
	for (size_t i = 0; i < st->n; i++)
		fprintf(f, "%s %d %d\n", st->e[i].name, st->e[i].index, st->e[i].before);
	int bad = ferror(f) || fflush(f) != 0 || fsync(fileno(f)) != 0;
	int saved = errno;
	if (fclose(f) != 0 && !bad) {
		bad = 1;
		saved = errno;
	}
	if (bad || rename(tmp, FWD_PATH) < 0) {
		saved = bad ? saved : errno;
		unlink(tmp);
		return sr_fail(err, saved, "write %s", FWD_PATH);
	}
	return 0;
}

static struct fwd_entry *fwd_find(struct fwd_state *st, const char *name)
{
	for (size_t i = 0; i < st->n; i++)
		if (strcmp(st->e[i].name, name) == 0)
			return &st->e[i];
	return NULL;
}

/* With the lock held: turn forwarding on for these interfaces, recording
 * first each one that was off. One that is on and not recorded is the
 * host's own setting and stays as it is; a recorded name whose index
 * changed is a new interface (the old one is gone). */
static int enable_forwarding(const int *ifindex, size_t n, sr_error *err)
{
	struct fwd_state st;
	if (fwd_load(&st, err) < 0)
		return -1;
	char names[FWD_MAX][IF_NAMESIZE];
	size_t n_on = 0;
	bool changed = false;
	for (size_t i = 0; i < n && n_on < FWD_MAX; i++) {
		char *name = names[n_on];
		int value;
		if (!if_indextoname((unsigned)ifindex[i], name) || strcmp(name, "lo") == 0 ||
		    strncmp(name, HOST_PREFIX, strlen(HOST_PREFIX)) == 0 ||
		    read_forwarding(name, &value) < 0 || value == 1)
			continue;
		struct fwd_entry *x = fwd_find(&st, name);
		if (!x || x->index != ifindex[i]) {
			if (!x && st.n == FWD_MAX)
				return sr_fail(err, ENOSPC, "%s: more than %d interfaces", FWD_PATH,
					       FWD_MAX);
			x = x ? x : &st.e[st.n++];
			*x = (struct fwd_entry){ .index = ifindex[i], .before = value };
			snprintf(x->name, sizeof x->name, "%s", name);
			changed = true;
		}
		n_on++;
	}
	if (changed && fwd_save(&st, err) < 0)
		return -1;
	for (size_t i = 0; i < n_on; i++)
		if (write_sysctl("/proc/sys/net/ipv4/conf/%s/forwarding", names[i], "1", err) < 0)
			return -1;
	return 0;
}

/* With the lock held, once no sandbox link is left: put back each recorded
 * interface that is still the same interface and still forwarding (one
 * someone turned off since is left as it is). Returns how many. */
static int restore_forwarding_if_unused(sr_error *err)
{
	struct fwd_state st;
	if (any_sandbox_link())
		return 0;
	if (fwd_load(&st, err) < 0)
		return -1;
	int restored = 0, rc = 0;
	for (size_t i = 0; i < st.n; i++) {
		const struct fwd_entry *x = &st.e[i];
		int value;
		char before[16];
		if (if_nametoindex(x->name) != (unsigned)x->index ||
		    read_forwarding(x->name, &value) < 0 || value != 1 || x->before == 1)
			continue;
		snprintf(before, sizeof before, "%d", x->before);
		if (write_sysctl("/proc/sys/net/ipv4/conf/%s/forwarding", x->name, before, err) < 0)
			rc = -1; /* the file stays: the next one tries again */
		else
			restored++;
	}
	if (rc == 0 && unlink(FWD_PATH) < 0 && errno != ENOENT)
		rc = sr_fail(err, errno, "remove %s", FWD_PATH);
	return rc < 0 ? -1 : restored;
}

/* Replies come back in on the uplink, and Linux forwards a packet only
 * when the interface it arrived on forwards: turn it on for every
 * interface with a route that an allowed destination may take (for
 * 0.0.0.0/0: every routed interface), not ip_forward, which would make
 * every interface a router. With the lock held; the last sandbox puts
 * them back (restore_forwarding_if_unused). */
static int enable_uplinks(const sr_egress *e, struct nl_sock *sk, sr_error *err)
{
	struct nl_cache *routes = NULL;
	int rc = rtnl_route_alloc_cache(sk, AF_INET, 0, &routes);
	if (rc < 0)
		return sr_fail(err, 0, "list the host's routes: %s", nl_geterror(rc));
	int ifindex[FWD_MAX];
	size_t n = 0;
	for (struct nl_object *o = nl_cache_get_first(routes); o; o = nl_cache_get_next(o)) {
		struct rtnl_route *r = (struct rtnl_route *)o;
		if (rtnl_route_get_type(r) != RTN_UNICAST ||
		    !route_is_used(e, rtnl_route_get_dst(r)))
			continue;
		for (int i = 0; i < rtnl_route_get_nnexthops(r); i++) {
			int idx = rtnl_route_nh_get_ifindex(rtnl_route_nexthop_n(r, i));
			bool seen = idx <= 0;
			for (size_t k = 0; k < n && !seen; k++)
				seen = ifindex[k] == idx;
			if (!seen && n < FWD_MAX)
				ifindex[n++] = idx;
		}
	}
	nl_cache_free(routes);
	return enable_forwarding(ifindex, n, err);
}

/* The veth pair, its peer born in the sandbox's namespace as eth0. */
static int create_veth(sr_egress *e, struct nl_sock *sk, pid_t pid, sr_error *err)
{
	uint32_t start;
	if (getrandom(&start, sizeof start, 0) != sizeof start)
		start = (uint32_t)pid;
	for (uint32_t k = 0; k < POOL_SLOTS; k++) {
		e->slot = (start + k) % POOL_SLOTS;
		snprintf(e->host_if, sizeof e->host_if, HOST_PREFIX "%u", e->slot);
		int rc = rtnl_link_veth_add(sk, e->host_if, "eth0", pid);
		if (rc == 0) {
			e->have_veth = true;
			return 0;
		}
		if (rc != -NLE_EXIST)
			return sr_fail(err, 0, "create veth %s (is the veth module available?): %s",
				       e->host_if, nl_geterror(rc));
	}
	return sr_fail(err, EADDRINUSE, "every egress address in 10.213.0.0/16 is taken");
}

static int setup_host_end(sr_egress *e, struct nl_sock *sk, sr_error *err)
{
	const char *h = e->host_if;
	if (write_sysctl("/proc/sys/net/ipv6/conf/%s/disable_ipv6", h, "1", err) < 0 ||
	    write_sysctl("/proc/sys/net/ipv4/conf/%s/forwarding", h, "1", err) < 0 ||
	    add_address(sk, h, POOL_BASE + 4 * e->slot + 1, "the host", err) < 0 ||
	    sr_net_link_up(sk, h, "the host", err) < 0)
		return -1;
	return 0;
}

static int setup_sandbox_end(sr_egress *e, sr_error *err)
{
	struct nl_sock *sk = sr_net_socket_in(e->nsfd, err);
	if (!sk)
		return -1;
	uint32_t base = POOL_BASE + 4 * e->slot;
	int rc = add_address(sk, "eth0", base + 2, "the sandbox", err) < 0 ||
			 sr_net_link_up(sk, "eth0", "the sandbox", err) < 0 ||
			 add_default_route(sk, "eth0", base + 1, err) < 0
		     ? -1
		     : 0;
	nl_socket_free(sk);
	return rc;
}

/* IPv4 only: the sandbox's interfaces get no IPv6 at all (no link-local
 * address, no router or neighbour solicitations). /proc/sys/net belongs to
 * the namespace of the thread that opens it. */
static int sandbox_ipv6_off(const sr_egress *e, sr_error *err)
{
	int self = sr_net_enter(e->nsfd, err);
	if (self < 0)
		return -1;
	int rc =
	    write_sysctl("/proc/sys/net/ipv6/conf/%s/disable_ipv6", "all", "1", err) < 0 ||
		    write_sysctl("/proc/sys/net/ipv6/conf/%s/disable_ipv6", "default", "1", err) < 0
		? -1
		: 0;
	return sr_net_leave(self, err) < 0 ? -1 : rc;
}

int sr_egress_start(sr_egress *e, pid_t pid, sr_error *err)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
	if ((e->nsfd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return sr_fail(err, errno, "open %s", path);
	char *rules = sr_egress_rules(e);
	if (!rules)
		return sr_fail(err, ENOMEM, "egress rules");
	/* The rules first: the sandbox has no way out before they hold. */
	sr_error why = { 0 };
	int rc = nft_run(e->nsfd, rules, false, NULL, &why);
	free(rules);
	if (rc < 0)
		return sr_refuse(err, why.errnum,
				 "load the sandbox's egress rules (%s; does the kernel have "
				 "nf_tables, nf_conntrack and nf_reject?)",
				 why.msg);
	if (sandbox_ipv6_off(e, err) < 0)
		return -1;
	struct nl_sock *sk = nl_socket_alloc();
	if (!sk || (rc = nl_connect(sk, NETLINK_ROUTE)) < 0) {
		nl_socket_free(sk);
		return sr_fail(err, 0, "netlink socket: %s", nl_geterror(sk ? rc : -NLE_NOMEM));
	}
	int lock = lock_host(err);
	/* The uplinks under the lock, once the veth exists: a sandbox that
	 * ends meanwhile sees this one's link and leaves them on. */
	rc = lock < 0 || ensure_host_table(err) < 0 || create_veth(e, sk, pid, err) < 0 ||
		     enable_uplinks(e, sk, err) < 0
		 ? -1
		 : 0;
	if (lock >= 0)
		unlock_host(lock);
	if (rc == 0)
		rc = setup_host_end(e, sk, err) < 0 || setup_sandbox_end(e, err) < 0 ? -1 : 0;
	nl_socket_free(sk);
	return rc;
}

/* ---- the report ------------------------------------------------------------ */

static void read_denied_set(const cJSON *set, sr_net_report *rep)
{
	const cJSON *elems = cJSON_GetObjectItemCaseSensitive(set, "elem"), *it;
	cJSON_ArrayForEach(it, elems)
	{
		const cJSON *val = cJSON_GetObjectItemCaseSensitive(it, "elem");
		val = val ? cJSON_GetObjectItemCaseSensitive(val, "val") : it;
		const cJSON *cc = cJSON_GetObjectItemCaseSensitive(val, "concat");
		if (cJSON_GetArraySize(cc) != 3 || rep->n_denied == SR_NET_DENIED_MAX)
			continue;
		const cJSON *a = cJSON_GetArrayItem(cc, 0), *p = cJSON_GetArrayItem(cc, 1),
			    *port = cJSON_GetArrayItem(cc, 2);
		struct sr_net_denied *d = &rep->denied[rep->n_denied];
		if (!cJSON_IsString(a) || !cJSON_IsNumber(port))
			continue;
		snprintf(d->address, sizeof d->address, "%s", a->valuestring);
		if (cJSON_IsString(p))
			snprintf(d->proto, sizeof d->proto, "%s", p->valuestring);
		else
			snprintf(d->proto, sizeof d->proto, "%s",
				 p && p->valuedouble == IPPROTO_UDP ? "udp" : "tcp");
		d->port = (uint16_t)port->valuedouble;
		rep->n_denied++;
	}
}

void sr_egress_collect(sr_egress *e, sr_net_report *rep)
{
	memset(rep, 0, sizeof *rep);
	if (!e)
		return;
	rep->egress = true;
	ip_text(POOL_BASE + 4 * e->slot + 2, rep->address);
	/* one command per list: each prints a JSON document of its own */
	static const char *const lists[] = { "list counter inet saferun denied",
					     "list set inet saferun denied_to" };
	for (size_t l = 0; e->nsfd >= 0 && l < 2; l++) {
		char *text = NULL;
		if (nft_run(e->nsfd, lists[l], true, &text, NULL) < 0)
			continue;
		cJSON *doc = cJSON_Parse(text), *it;
		free(text);
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(doc, "nftables"))
		{
			const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "counter");
			const cJSON *s = cJSON_GetObjectItemCaseSensitive(it, "set");
			const cJSON *pk = c ? cJSON_GetObjectItemCaseSensitive(c, "packets") : NULL;
			if (cJSON_IsNumber(pk))
				rep->denied_packets = (uint64_t)pk->valuedouble;
			if (s)
				read_denied_set(s, rep);
		}
		cJSON_Delete(doc);
	}
	nft_run(e->nsfd, "reset counter inet saferun denied; flush set inet saferun denied_to",
		false, NULL, NULL);
}

void sr_egress_free(sr_egress *e)
{
	if (!e)
		return;
	/* Started (even half-way): the veth goes, and the host table when
	 * this was the last sandbox using it. */
	int lock = e->nsfd >= 0 ? lock_host(NULL) : -1;
	if (e->have_veth) {
		/* Deleting one end deletes the pair, and with it the host end's
		 * address and route, whatever holds the sandbox's namespace. */
		struct nl_sock *sk = nl_socket_alloc();
		struct rtnl_link *link = rtnl_link_alloc();
		if (sk && link && nl_connect(sk, NETLINK_ROUTE) == 0) {
			rtnl_link_set_name(link, e->host_if);
			rtnl_link_delete(sk, link);
		}
		rtnl_link_put(link);
		nl_socket_free(sk);
	}
	if (lock >= 0) {
		drop_host_table_if_unused();
		restore_forwarding_if_unused(NULL);
		unlock_host(lock);
	}
	if (e->nsfd >= 0)
		close(e->nsfd);
	free(e);
}

int sr_net_cleanup_stale(sr_error *err)
{
	/* A crashed supervisor's veths go with its sandboxes' namespaces (the
	 * sandbox dies with it); what can stay is the host table and the
	 * uplinks' forwarding. */
	int lock = lock_host(err);
	if (lock < 0)
		return -1;
	int table = drop_host_table_if_unused();
	int restored = restore_forwarding_if_unused(err);
	unlock_host(lock);
	nft_unload();
	if (restored < 0)
		return -1;
	return (table ? SR_NET_CLEANED_TABLE : 0) | (restored ? SR_NET_CLEANED_FORWARDING : 0);
}

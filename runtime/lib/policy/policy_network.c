/* policy.network: mode none (only lo) or egress, with the destinations
 * allowed (an IPv4 CIDR or a host name, ports, protocol) and the
 * resolvers; parsed as a whole, since mode, allow and dns depend on each
 * other, and shown back as JSON by hand. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "policy_schema.h"
#include "saferun.h"

void sr_pol_net_policy_free(sr_net_policy *n)
{
	for (size_t i = 0; i < n->n_allow; i++) {
		free(n->allow[i].cidr);
		free(n->allow[i].host);
	}
	free(n->allow);
	for (size_t i = 0; i < n->n_dns; i++)
		free(n->dns[i]);
	*n = (sr_net_policy){ 0 };
}

/* "a.b.c.d" or "a.b.c.d/n" into a network address and a prefix length. */
static int parse_ipv4(const char *s, bool cidr, uint32_t *addr, unsigned *prefix)
{
	char buf[INET_ADDRSTRLEN + 4];
	if (strlen(s) >= sizeof buf)
		return -1;
	snprintf(buf, sizeof buf, "%s", s);
	char *slash = strchr(buf, '/');
	*prefix = 32;
	if (slash) {
		char *end;
		unsigned long n = strtoul(slash + 1, &end, 10);
		if (!cidr || !isdigit((unsigned char)slash[1]) || *end || n > 32)
			return -1;
		*prefix = (unsigned)n;
		*slash = '\0';
	}
	struct in_addr a;
	if (inet_pton(AF_INET, buf, &a) != 1)
		return -1;
	*addr = ntohl(a.s_addr);
	return 0;
}

static int net_cidr(const struct ctx *c, const char *path, const cJSON *v, sr_net_allow *a)
{
	uint32_t addr;
	unsigned prefix;
	if (sr_pol_want_string(c, path, v) < 0)
		return -1;
	if (strchr(v->valuestring, ':'))
		return sr_pol_bad_value(c, path, v, "is IPv6: egress is IPv4 only");
	if (parse_ipv4(v->valuestring, true, &addr, &prefix) < 0)
		return sr_pol_bad_value(c, path, v, "is not an IPv4 CIDR (use \"198.18.0.0/24\")");
	uint32_t mask = prefix ? ~0u << (32 - prefix) : 0;
	if (addr & ~mask)
		return sr_pol_bad_value(c, path, v, "has host bits set beyond /%u", prefix);
	char text[INET_ADDRSTRLEN + 4];
	struct in_addr na = { .s_addr = htonl(addr) };
	inet_ntop(AF_INET, &na, text, sizeof text);
	snprintf(text + strlen(text), sizeof text - strlen(text), "/%u", prefix);
	return (a->cidr = strdup(text)) ? 0 : sr_pol_oom(c);
}

/* A DNS name (letters, digits, '-', '.'), resolved later on the host. */
static int net_host(const struct ctx *c, const char *path, const cJSON *v, sr_net_allow *a)
{
	if (sr_pol_want_string(c, path, v) < 0)
		return -1;
	const char *s = v->valuestring;
	size_t n = strlen(s);
	bool ok = n > 0 && n <= 253 && s[0] != '-' && s[0] != '.';
	for (size_t i = 0; ok && i < n; i++)
		ok = isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '.';
	if (!ok)
		return sr_pol_bad_value(c, path, v,
					"is not a host name (letters, digits, '-' and '.')");
	return (a->host = strdup(s)) ? 0 : sr_pol_oom(c);
}

static int net_ports(const struct ctx *c, const char *path, const cJSON *v, sr_net_allow *a)
{
	char sub[PATH_BUF];
	if (cJSON_IsString(v) && strcmp(v->valuestring, "*") == 0)
		return 0;
	if (!cJSON_IsArray(v) || !v->child)
		return sr_pol_bad_type(c, path, v, "\"*\" or a non-empty array of ports");
	if (cJSON_GetArraySize(v) > SR_NET_MAX_PORTS)
		return sr_pol_bad(c, path, "%d ports, at most %d (use \"*\")",
				  cJSON_GetArraySize(v), SR_NET_MAX_PORTS);
	for (const cJSON *it = v->child; it; it = it->next) {
		uint64_t port;
		sr_pol_path_index(sub, path, a->n_ports);
		if (sr_pol_get_u64(c, sub, it, 65535, 0, &port) < 0)
			return -1;
		if (port == 0)
			return sr_pol_bad_value(c, sub, it, "is not a port (1 to 65535)");
		for (size_t i = 0; i < a->n_ports; i++)
			if (a->ports[i] == port)
				return sr_pol_bad_value(c, sub, it, "is listed twice");
		a->ports[a->n_ports++] = (uint16_t)port;
	}
	return 0;
}

/* The keys of one policy.network.allow entry (parsed by hand: one of
 * cidr and host, ports required). */
static const struct field net_allow_keys[] = {
	{ .key = "cidr" },
	{ .key = "host" },
	{ .key = "ports" },
	{ .key = "proto" },
};

static int net_allow_entry(const struct ctx *c, const char *path, const cJSON *obj, sr_net_allow *a)
{
	char sub[PATH_BUF];
	const cJSON *cidr = sr_pol_get(obj, "cidr"), *host = sr_pol_get(obj, "host"), *v;

	if (sr_pol_check_keys(c, path, obj, net_allow_keys, ARRAY_LEN(net_allow_keys)) < 0)
		return -1;
	if (!cidr == !host)
		return sr_pol_bad(c, path, "needs exactly one of \"cidr\" and \"host\"");
	sr_pol_path_key(sub, path, cidr ? "cidr" : "host");
	if (cidr ? net_cidr(c, sub, cidr, a) < 0 : net_host(c, sub, host, a) < 0)
		return -1;
	sr_pol_path_key(sub, path, "ports");
	if (!(v = sr_pol_get(obj, "ports")))
		return sr_pol_bad(c, sub, "missing (a list of ports, or \"*\" for every port)");
	if (net_ports(c, sub, v, a) < 0)
		return -1;
	sr_pol_path_key(sub, path, "proto");
	if ((v = sr_pol_get(obj, "proto"))) {
		if (sr_pol_want_string(c, sub, v) < 0)
			return -1;
		if (strcmp(v->valuestring, "tcp") != 0 && strcmp(v->valuestring, "udp") != 0)
			return sr_pol_bad_value(c, sub, v, "is not a protocol (known: tcp, udp)");
		a->proto = v->valuestring[0] == 'u' ? SR_NET_UDP : SR_NET_TCP;
	}
	return 0;
}

static int net_allow(const struct ctx *c, const cJSON *arr, sr_net_policy *n)
{
	static const char *const base = "policy.network.allow";
	char path[PATH_BUF];

	if (!cJSON_IsArray(arr))
		return sr_pol_bad_type(c, base, arr, "an array of destinations");
	if (cJSON_GetArraySize(arr) > SR_NET_MAX_ALLOW)
		return sr_pol_bad(c, base, "%d entries, at most %d", cJSON_GetArraySize(arr),
				  SR_NET_MAX_ALLOW);
	if (!(n->allow = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *n->allow)))
		return sr_pol_oom(c);
	for (const cJSON *it = arr->child; it; it = it->next) {
		sr_pol_path_index(path, base, n->n_allow);
		if (net_allow_entry(c, path, it, &n->allow[n->n_allow++]) < 0)
			return -1;
	}
	return 0;
}

static int net_dns(const struct ctx *c, const cJSON *v, sr_net_policy *n)
{
	static const char *const base = "policy.network.dns";
	char path[PATH_BUF];

	if (cJSON_IsBool(v)) {
		n->dns_host = cJSON_IsTrue(v);
		return 0;
	}
	if (!cJSON_IsArray(v))
		return sr_pol_bad_type(c, base, v, "true, false or an array of resolver addresses");
	if (cJSON_GetArraySize(v) > SR_NET_MAX_DNS)
		return sr_pol_bad(c, base, "%d resolvers, at most %d", cJSON_GetArraySize(v),
				  SR_NET_MAX_DNS);
	for (const cJSON *it = v->child; it; it = it->next) {
		uint32_t addr;
		unsigned prefix;
		sr_pol_path_index(path, base, n->n_dns);
		if (sr_pol_want_string(c, path, it) < 0)
			return -1;
		if (parse_ipv4(it->valuestring, false, &addr, &prefix) < 0)
			return sr_pol_bad_value(c, path, it,
						"is not an IPv4 address (use \"198.18.0.53\")");
		if ((addr >> 24) == 127)
			return sr_pol_bad_value(
			    c, path, it,
			    "is a loopback address: the sandbox has its own lo, "
			    "the host's resolvers on 127.0.0.0/8 are out of reach");
		for (size_t i = 0; i < n->n_dns; i++)
			if (strcmp(n->dns[i], it->valuestring) == 0)
				return sr_pol_bad_value(c, path, it, "is listed twice");
		if (!(n->dns[n->n_dns++] = strdup(it->valuestring)))
			return sr_pol_oom(c);
	}
	return 0;
}

static const struct field *sub_field(const struct field *f, const char *key)
{
	for (size_t i = 0; i < f->n_sub; i++)
		if (strcmp(f->sub[i].key, key) == 0)
			return &f->sub[i];
	return NULL;
}

/* The section as a whole: mode, allow and dns depend on each other. */
int sr_pol_parse_network(const struct ctx *c, const struct field *f, const char *path,
			 const cJSON *obj, sr_policy *p)
{
	const struct field *mode_field = sub_field(f, "mode");
	char sub[PATH_BUF];
	sr_net_policy n = { 0 };
	sr_net_mode mode = p->net_mode;
	uint64_t x;
	const cJSON *v;
	int rc = -1;

	sr_pol_path_key(sub, path, "mode");
	if ((v = sr_pol_get(obj, "mode"))) {
		if (sr_pol_field_value(c, sub, mode_field, v, &x) < 0)
			return -1;
		mode = (sr_net_mode)x;
	}
	if ((v = sr_pol_get(obj, "allow")) && net_allow(c, v, &n) < 0)
		goto out;
	if ((v = sr_pol_get(obj, "dns")) && net_dns(c, v, &n) < 0)
		goto out;
	if (mode == SR_NET_NONE && (n.n_allow || n.n_dns || n.dns_host)) {
		sr_pol_bad(c, n.n_allow ? "policy.network.allow" : "policy.network.dns",
			   "needs \"mode\": \"egress\" (mode \"none\" has only lo)");
		goto out;
	}
	/* allow and dns, when given, replace what the policy had */
	if (sr_pol_get(obj, "allow")) {
		sr_net_allow *old = p->net.allow;
		size_t n_old = p->net.n_allow;
		p->net.allow = n.allow, p->net.n_allow = n.n_allow;
		n.allow = old, n.n_allow = n_old;
	}
	if (sr_pol_get(obj, "dns")) {
		sr_net_policy old = p->net;
		p->net.dns_host = n.dns_host, p->net.n_dns = n.n_dns;
		memcpy(p->net.dns, n.dns, sizeof n.dns);
		n.dns_host = old.dns_host, n.n_dns = old.n_dns;
		memcpy(n.dns, old.dns, sizeof n.dns);
	}
	if (mode == SR_NET_NONE)
		sr_pol_net_policy_free(&p->net);
	p->net_mode = mode;
	rc = 0;
out:
	sr_pol_net_policy_free(&n);
	return rc;
}

static cJSON *allow_json(const sr_net_allow *a)
{
	cJSON *o = cJSON_CreateObject();
	if (!o ||
	    !cJSON_AddStringToObject(o, a->cidr ? "cidr" : "host", a->cidr ? a->cidr : a->host))
		goto fail;
	if (a->n_ports == 0) {
		if (!cJSON_AddStringToObject(o, "ports", "*"))
			goto fail;
	} else {
		cJSON *ports = cJSON_AddArrayToObject(o, "ports");
		for (size_t i = 0; ports && i < a->n_ports; i++)
			if (!cJSON_AddItemToArray(ports, cJSON_CreateNumber(a->ports[i])))
				goto fail;
		if (!ports)
			goto fail;
	}
	if (!cJSON_AddStringToObject(o, "proto", a->proto == SR_NET_UDP ? "udp" : "tcp"))
		goto fail;
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}

/* mode; allow and dns only in egress mode */
int sr_pol_add_network(cJSON *root, const struct field *f, const sr_policy *p)
{
	cJSON *o = cJSON_AddObjectToObject(root, f->key);
	if (!o || sr_pol_field_json(o, sub_field(f, "mode"), p) < 0)
		return -1;
	if (p->net_mode != SR_NET_EGRESS)
		return 0;
	cJSON *allow = cJSON_AddArrayToObject(o, "allow");
	for (size_t i = 0; allow && i < p->net.n_allow; i++) {
		cJSON *a = allow_json(&p->net.allow[i]);
		if (!a || !cJSON_AddItemToArray(allow, a))
			return -1;
	}
	if (!allow)
		return -1;
	if (p->net.n_dns == 0)
		return cJSON_AddBoolToObject(o, "dns", p->net.dns_host) ? 0 : -1;
	return sr_pol_add_strings(o, "dns", (char **)p->net.dns, p->net.n_dns);
}

/* parsed as a whole by sr_pol_parse_network; mode is a plain value */
const struct field sr_pol_network_fields[] = {
	{ "mode", F_ENUM, AT(net_mode), .def = SR_NET_NONE, .words = { "none", "egress" },
	  .what = "is not a network mode (known: none, egress)" },
	{ .key = "allow" },
	{ .key = "dns" },
};
_Static_assert(ARRAY_LEN(sr_pol_network_fields) == SR_POL_N_NETWORK,
	       "SR_POL_N_NETWORK is the length of sr_pol_network_fields");

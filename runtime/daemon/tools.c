#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packages.h"
#include "policies.h"
#include "tenants.h"

/* Package names in the description: past this many, "and N more". */
#define MAX_NAMED_PACKAGES 60

static void size_text(char *buf, size_t size, uint64_t bytes)
{
	if (bytes >= (1u << 30) && bytes % (1u << 30) == 0)
		snprintf(buf, size, "%llu GiB", (unsigned long long)(bytes >> 30));
	else if (bytes >= (1u << 20))
		snprintf(buf, size, "%llu MiB", (unsigned long long)(bytes >> 20));
	else
		snprintf(buf, size, "%llu KiB", (unsigned long long)(bytes >> 10));
}

static void network_text(FILE *f, const sr_policy *p)
{
	if (p->net_mode != SR_NET_EGRESS || !p->net.n_allow) {
		fputs(" No network: nothing outside the sandbox is reachable (no internet, no "
		      "pip install, no HTTP requests).",
		      f);
		return;
	}
	fputs(" Network: outgoing connections only to ", f);
	for (size_t i = 0; i < p->net.n_allow; i++) {
		const sr_net_allow *a = &p->net.allow[i];
		fprintf(f, "%s%s", i ? ", " : "", a->host ? a->host : a->cidr);
		for (size_t k = 0; k < a->n_ports; k++)
			fprintf(f, "%s%u", k ? "," : ":", a->ports[k]);
		if (a->proto == SR_NET_UDP)
			fputs("/udp", f);
	}
	fputs("; everything else is refused.", f);
}

/* What the model reads before it calls: made from the policy. */
static char *describe(srd_ctx *ctx, const sr_policy *p)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return NULL;
	char mem[32], out[32], disk[32];
	size_text(mem, sizeof mem, p->limits.memory_bytes);
	size_text(out, sizeof out, p->limits.output_bytes);
	size_text(disk, sizeof disk, p->limits.tmpfs_bytes);
	fprintf(f,
		"Run Python 3 code in a fresh, isolated Linux sandbox and get back what it "
		"prints (stdout, stderr) and how it ended (status, exit code). Each call starts "
		"from nothing: no variables, files or imports carry over from earlier calls, so "
		"send complete code, and print() what you need to see. The code runs as a "
		"script (main.py) in %s. Writable: ",
		p->workdir ? p->workdir : "/work");
	for (size_t i = 0; i < p->n_writable; i++)
		fprintf(f, "%s%s", i ? ", " : "", p->writable[i]);
	fprintf(f,
		" (%s in all); the rest of the filesystem is read-only. Files the code "
		"writes to artifacts/ come back with the result.",
		disk);
	srd_package *pk = NULL;
	size_t n = 0;
	srd_ferr ignored = { 0 };
	fputs(" Available: the Python standard library", f);
	if (srd_packages_list(ctx->cfg->rootfs_dir, p->profile, &pk, &n, &ignored) == 0 && n) {
		fputs(" and these packages: ", f);
		for (size_t i = 0; i < n && i < MAX_NAMED_PACKAGES; i++)
			fprintf(f, "%s%s", i ? ", " : "", pk[i].name);
		if (n > MAX_NAMED_PACKAGES)
			fprintf(f, " and %zu more", n - MAX_NAMED_PACKAGES);
	}
	free(pk);
	fputs(".", f);
	if (p->dependencies.n_allow)
		fputs(" Other packages only if the operator allows them (the requirements "
		      "argument).",
		      f);
	else
		fputs(" Nothing else can be installed.", f);
	fprintf(f,
		" Limits per call: %.3g s wall time (then the run is killed), %s memory, "
		"%.3g CPU, %u processes and threads, %s of output per stream (more is cut "
		"off).",
		(double)p->limits.wall_ms / 1000.0, mem, p->limits.cpu_millis / 1000.0,
		p->limits.pids, out);
	network_text(f, p);
	if (p->checker.enabled)
		fprintf(f,
			" Forbidden, refused before the code runs (the answer names the line and "
			"the rule): starting programs or shells (subprocess, os.system, os.exec*), "
			"native code (ctypes, cffi), eval/exec/compile/__import__, dynamic imports "
			"(importlib), unpickling (pickle.load, torch.load), signals and rlimits, "
			"reflection on dunder attributes,%s and file paths outside the writable "
			"dirs or under /proc, /sys, /dev, /etc.",
			p->net_mode == SR_NET_EGRESS ? ""
						     : " network APIs (socket, requests, urllib),");
	fclose(f);
	return text;
}

/* The arguments: POST /v1/run's fields a model needs. */
static cJSON *parameters(const sr_policy *p)
{
	cJSON *s = cJSON_CreateObject(), *props, *v;
	cJSON_AddStringToObject(s, "type", "object");
	props = cJSON_AddObjectToObject(s, "properties");
	v = cJSON_AddObjectToObject(props, "code");
	cJSON_AddStringToObject(v, "type", "string");
	cJSON_AddStringToObject(v, "description", "The complete Python 3 source to run.");
	v = cJSON_AddObjectToObject(props, "timeout");
	cJSON_AddStringToObject(v, "type", "number");
	char d[120];
	snprintf(d, sizeof d, "Wall-clock limit in seconds, at most %.3g (the default).",
		 (double)p->limits.wall_ms / 1000.0);
	cJSON_AddStringToObject(v, "description", d);
	v = cJSON_AddObjectToObject(props, "stdin");
	cJSON_AddStringToObject(v, "type", "string");
	cJSON_AddStringToObject(v, "description", "Text the code reads on standard input.");
	if (p->dependencies.n_allow) {
		v = cJSON_AddObjectToObject(props, "requirements");
		cJSON_AddStringToObject(v, "type", "array");
		cJSON_AddStringToObject(cJSON_AddObjectToObject(v, "items"), "type", "string");
		cJSON_AddStringToObject(
		    v, "description",
		    "Python packages the code needs beyond the available ones "
		    "(\"tabulate\", \"attrs>=22\"), if the operator allows them.");
	}
	cJSON *req = cJSON_AddArrayToObject(s, "required");
	cJSON_AddItemToArray(req, cJSON_CreateString("code"));
	cJSON_AddBoolToObject(s, "additionalProperties", false);
	return s;
}

static cJSON *openai_tool(const char *desc, const sr_policy *p)
{
	cJSON *t = cJSON_CreateObject(), *fn;
	cJSON_AddStringToObject(t, "type", "function");
	cJSON_AddItemToObject(t, "function", fn = cJSON_CreateObject());
	cJSON_AddStringToObject(fn, "name", "run_python");
	cJSON_AddStringToObject(fn, "description", desc);
	cJSON_AddItemToObject(fn, "parameters", parameters(p));
	return t;
}

static cJSON *anthropic_tool(const char *desc, const sr_policy *p)
{
	cJSON *t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "name", "run_python");
	cJSON_AddStringToObject(t, "description", desc);
	cJSON_AddItemToObject(t, "input_schema", parameters(p));
	return t;
}

void srd_handle_tools(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_ferr e = { 0 };
	const char *format = srd_request_query(req, "format");
	const char *name = srd_request_query(req, "policy");
	if (!name)
		name = ctx->cfg->default_policy;
	if (format && strcmp(format, "openai") != 0 && strcmp(format, "anthropic") != 0) {
		srd_fail(&e, 400, "format",
			 "format \"%.40s\" is not one of openai, anthropic (leave it out for both)",
			 format);
		srd_respond_error(res, &e);
		return;
	}
	sr_policy *p = NULL;
	if (srd_tenant_check_policy(req->peer->tenant, name, &e) ||
	    srd_policies_get(ctx->policies, name, "policy", &p, &e)) {
		srd_respond_error(res, &e);
		return;
	}
	char *desc = describe(ctx, p);
	if (!desc) {
		sr_policy_free(p);
		srd_fail(&e, 500, NULL, "out of memory");
		srd_respond_error(res, &e);
		return;
	}
	cJSON *j;
	if (format && strcmp(format, "openai") == 0) {
		j = cJSON_CreateArray();
		cJSON_AddItemToArray(j, openai_tool(desc, p));
	} else if (format) {
		j = cJSON_CreateArray();
		cJSON_AddItemToArray(j, anthropic_tool(desc, p));
	} else {
		j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "policy", name);
		cJSON_AddStringToObject(j, "run_url", "/v1/run");
		cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "openai"), openai_tool(desc, p));
		cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "anthropic"),
				     anthropic_tool(desc, p));
	}
	free(desc);
	sr_policy_free(p);
	srd_respond_json(res, 200, j);
}

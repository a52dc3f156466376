/* The result of a run and its JSON form (documented in docs/result.md). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "artifacts.h"
#include "base/base.h"
#include "box.h"
#include "checker/checker.h"
#include "saferun.h"

static const char *const status_names[] = {
	[SR_STATUS_OK] = "ok",
	[SR_STATUS_ERROR] = "error",
	[SR_STATUS_TIMEOUT] = "timeout",
	[SR_STATUS_OOM] = "oom",
	[SR_STATUS_PIDS] = "pids",
	[SR_STATUS_OUTPUT_LIMIT] = "output_limit",
	[SR_STATUS_KILLED] = "killed",
	[SR_STATUS_REJECTED] = "rejected",
	[SR_STATUS_INTERNAL_ERROR] = "internal_error",
};

const char *sr_status_name(sr_status s)
{
	return (unsigned)s < sizeof status_names / sizeof *status_names ? status_names[s]
									: "unknown";
}

void sr_deps_result_free(struct sr_deps_result *d)
{
	char **lists[] = { d->installed, d->from_profile, d->ignored };
	const size_t counts[] = { d->n_installed, d->n_from_profile, d->n_ignored };
	for (int l = 0; l < 3; l++) {
		for (size_t i = 0; i < counts[l]; i++)
			free(lists[l][i]);
		free(lists[l]);
	}
	memset(d, 0, sizeof *d);
}

void sr_result_free(sr_result *res)
{
	free(res->out.data);
	free(res->err.data);
	free(res->merged.data);
	free(res->findings);
	sr_artifacts_free(res);
	sr_deps_result_free(&res->deps);
	res->out = res->err = res->merged = (sr_buf){ 0 };
	res->findings = NULL;
	res->n_findings = 0;
}

/* JSON strings must be UTF-8: bytes that are not become U+FFFD, as
 * Python's errors="replace" would show them. */
static cJSON *text(const sr_buf *b)
{
	const unsigned char *s = (const unsigned char *)(b->data ? b->data : "");
	size_t len = b->len;
	char *clean = malloc(len * 3 + 1), *o = clean;
	if (!clean)
		return cJSON_CreateString("");
	for (size_t i = 0; i < len;) {
		size_t n = sr_utf8_seq(s + i, len - i);
		if (n && !(n == 1 && s[i] == 0)) {
			memcpy(o, s + i, n);
			o += n;
			i += n;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	*o = '\0';
	cJSON *j = cJSON_CreateString(clean);
	free(clean);
	return j;
}

static cJSON *limits_json(const sr_limits *l)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "wall_time_ms", (double)l->wall_ms);
	cJSON_AddNumberToObject(j, "cpus", l->cpu_millis / 1000.0);
	cJSON_AddNumberToObject(j, "memory_bytes", (double)l->memory_bytes);
	cJSON_AddNumberToObject(j, "swap_bytes", (double)l->swap_bytes);
	cJSON_AddNumberToObject(j, "pids", l->pids);
	cJSON_AddNumberToObject(j, "tmpfs_bytes", (double)l->tmpfs_bytes);
	cJSON_AddNumberToObject(j, "output_bytes", (double)l->output_bytes);
	cJSON_AddNumberToObject(j, "open_files", l->open_files);
	return j;
}

static void add_names(cJSON *o, const char *key, char *const *v, size_t n)
{
	cJSON *a = cJSON_AddArrayToObject(o, key);
	for (size_t i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
}

/* Only for a run that had requirements. */
static void deps_json(cJSON *j, const struct sr_deps_result *d)
{
	if (!d->n_installed && !d->n_from_profile && !d->n_ignored && !d->cached && !d->install_ms)
		return;
	cJSON *o = cJSON_AddObjectToObject(j, "dependencies");
	add_names(o, "installed", d->installed, d->n_installed);
	add_names(o, "from_profile", d->from_profile, d->n_from_profile);
	add_names(o, "ignored", d->ignored, d->n_ignored);
	cJSON_AddBoolToObject(o, "cached", d->cached);
	cJSON_AddNumberToObject(o, "install_ms", (double)d->install_ms);
}

char *sr_result_to_json(const sr_result *res)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "id", res->id);
	cJSON_AddStringToObject(j, "status", sr_status_name(res->status));
	cJSON_AddNumberToObject(j, "exit_code", res->exit_code);
	cJSON_AddNumberToObject(j, "signal", res->signal);
	cJSON_AddItemToObject(j, "stdout", text(&res->out));
	cJSON_AddItemToObject(j, "stderr", text(&res->err));
	cJSON_AddItemToObject(j, "output", text(&res->merged));
	cJSON_AddBoolToObject(j, "truncated", res->truncated);
	cJSON_AddNumberToObject(j, "duration_ms", (double)res->duration_ms);
	cJSON_AddNumberToObject(j, "cpu_ms", (double)res->cpu_ms);
	cJSON_AddNumberToObject(j, "peak_memory_bytes", (double)res->peak_memory_bytes);
	cJSON *hit = cJSON_AddArrayToObject(j, "limits_hit");
	if (res->status == SR_STATUS_TIMEOUT)
		cJSON_AddItemToArray(hit, cJSON_CreateString("wall_time"));
	if (res->hit_memory)
		cJSON_AddItemToArray(hit, cJSON_CreateString("memory"));
	if (res->hit_pids)
		cJSON_AddItemToArray(hit, cJSON_CreateString("pids"));
	if (res->hit_tmpfs)
		cJSON_AddItemToArray(hit, cJSON_CreateString("disk"));
	if (res->truncated)
		cJSON_AddItemToArray(hit, cJSON_CreateString("output"));
	cJSON_AddItemToObject(j, "limits", limits_json(&res->limits));
	cJSON_AddStringToObject(j, "cgroup_mode", res->cgroup_mode);
	cJSON_AddStringToObject(j, "path", res->warm ? "warm" : "cold");
	if (res->message[0])
		cJSON_AddStringToObject(j, "message", res->message);
	cJSON_AddItemToObject(j, "findings", sr_findings_json(res->findings, res->n_findings));
	cJSON *arts = cJSON_AddArrayToObject(j, "artifacts");
	for (size_t i = 0; i < res->n_artifacts; i++) {
		const sr_artifact *a = &res->artifacts[i];
		cJSON *o = cJSON_CreateObject();
		/* the code chose the name: not always UTF-8 */
		sr_buf name = { .data = a->name, .len = strlen(a->name) };
		cJSON_AddItemToObject(o, "name", text(&name));
		cJSON_AddStringToObject(o, "mime", a->mime);
		cJSON_AddNumberToObject(o, "size", (double)a->size);
		cJSON_AddBoolToObject(o, "inline", a->data != NULL);
		char *b64 = a->data ? sr_base64_encode(a->data, a->size) : NULL;
		if (b64)
			cJSON_AddStringToObject(o, "data_base64", b64);
		free(b64);
		cJSON_AddItemToArray(arts, o);
	}
	if (res->artifacts_truncated)
		cJSON_AddBoolToObject(j, "artifacts_truncated", true);
	if (res->artifacts_truncated && res->artifacts_truncated_reason)
		cJSON_AddStringToObject(j, "artifacts_truncated_reason",
					res->artifacts_truncated_reason);
	if (res->net.egress) {
		cJSON *net = cJSON_AddObjectToObject(j, "network");
		cJSON_AddStringToObject(net, "mode", "egress");
		cJSON_AddStringToObject(net, "address", res->net.address);
		cJSON_AddNumberToObject(net, "denied_packets", (double)res->net.denied_packets);
		cJSON *den = cJSON_AddArrayToObject(net, "denied");
		for (size_t i = 0; i < res->net.n_denied; i++) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "address", res->net.denied[i].address);
			cJSON_AddStringToObject(o, "proto", res->net.denied[i].proto);
			cJSON_AddNumberToObject(o, "port", res->net.denied[i].port);
			cJSON_AddItemToArray(den, o);
		}
	}
	deps_json(j, &res->deps);
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

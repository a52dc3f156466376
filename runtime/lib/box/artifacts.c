#include "artifacts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "workspace.h"

static const struct {
	const char *ext, *mime;
} mimes[] = {
	{ "png", "image/png" },
	{ "jpg", "image/jpeg" },
	{ "jpeg", "image/jpeg" },
	{ "gif", "image/gif" },
	{ "svg", "image/svg+xml" },
	{ "webp", "image/webp" },
	{ "pdf", "application/pdf" },
	{ "csv", "text/csv" },
	{ "txt", "text/plain" },
	{ "md", "text/markdown" },
	{ "html", "text/html" },
	{ "json", "application/json" },
	{ "xml", "application/xml" },
	{ "tsv", "text/tab-separated-values" },
	{ "zip", "application/zip" },
	{ "parquet", "application/vnd.apache.parquet" },
	{ "xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" },
};

const char *sr_artifact_mime(const char *name)
{
	const char *dot = strrchr(name, '.'), *slash = strrchr(name, '/');
	if (dot && (!slash || dot > slash))
		for (size_t i = 0; i < sizeof mimes / sizeof *mimes; i++)
			if (strcasecmp(dot + 1, mimes[i].ext) == 0)
				return mimes[i].mime;
	return "application/octet-stream";
}

void sr_artifacts_free(sr_result *res)
{
	for (size_t i = 0; i < res->n_artifacts; i++) {
		free(res->artifacts[i].name);
		free(res->artifacts[i].data);
	}
	free(res->artifacts);
	res->artifacts = NULL;
	res->n_artifacts = 0;
}

/* Entries (dirs, links and files) a listing may hold: past it the whole
 * listing fails (it is all or nothing), so it is far past the max. */
#define LIST_MAX 20000

void sr_artifacts_snapshot(const sr_workspace *ws, sr_artifacts_snap *snap)
{
	sr_error err = { 0 };
	*snap = (sr_artifacts_snap){ 0 };
	if (sr_workspace_list(ws, SR_ARTIFACTS_DIR, LIST_MAX, &snap->e, &snap->n, &err) < 0)
		*snap = (sr_artifacts_snap){ 0 };
}

void sr_artifacts_snap_free(sr_artifacts_snap *snap)
{
	sr_workspace_entries_free(snap->e, snap->n);
	*snap = (sr_artifacts_snap){ 0 };
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const sr_workspace_entry *)a)->path, ((const sr_workspace_entry *)b)->path);
}

static bool unchanged(const sr_artifacts_snap *before, const sr_workspace_entry *e)
{
	const sr_workspace_entry *old =
	    before && before->n ? bsearch(e, before->e, before->n, sizeof *e, by_path) : NULL;
	return old && old->mtime_ns == e->mtime_ns && old->size == e->size && old->type == e->type;
}

void sr_artifacts_collect(const sr_workspace *ws, const sr_artifacts_snap *before, sr_result *res)
{
	sr_workspace_entry *e = NULL;
	size_t n = 0, skip = sizeof SR_ARTIFACTS_DIR; /* "artifacts/" */
	sr_error err = { 0 };
	if (sr_workspace_list(ws, SR_ARTIFACTS_DIR, LIST_MAX, &e, &n, &err) < 0 &&
	    err.errnum != E2BIG)
		return; /* no artifacts/ dir (or none we can read): no artifacts */
	res->artifacts_truncated = err.errnum == E2BIG;
	sr_artifact *a = calloc(SR_ARTIFACTS_MAX, sizeof *a);
	uint64_t inline_left = SR_ARTIFACTS_INLINE_MAX;
	for (size_t i = 0; a && i < n; i++) {
		if (e[i].type != 'f' || strlen(e[i].path) <= skip || unchanged(before, &e[i]))
			continue;
		if (res->n_artifacts == SR_ARTIFACTS_MAX) {
			res->artifacts_truncated = true;
			break;
		}
		sr_artifact *x = &a[res->n_artifacts];
		if (!(x->name = strdup(e[i].path + skip)))
			break;
		res->n_artifacts++;
		snprintf(x->mime, sizeof x->mime, "%s", sr_artifact_mime(x->name));
		x->size = e[i].size;
		void *data;
		size_t size;
		if (x->size <= inline_left &&
		    sr_workspace_read(ws, e[i].path, inline_left, &data, &size, &err) == 0) {
			x->data = data;
			x->size = size; /* it may have changed since the listing */
			inline_left -= size;
		}
	}
	res->artifacts = a;
	sr_workspace_entries_free(e, n);
}

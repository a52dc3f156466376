/* Artifacts: the files a run left in its artifacts/ dir, read from the
 * host side after the run through the workspace functions (beneath the
 * root, no symlinks followed, regular files only). */
#ifndef SR_ARTIFACTS_H
#define SR_ARTIFACTS_H

#include <stdint.h>

#include "saferun.h"

#define SR_ARTIFACTS_DIR "artifacts"

/* What artifacts/ held before a run (sorted by path). */
typedef struct sr_artifacts_snap {
	sr_workspace_entry *e;
	size_t n;
} sr_artifacts_snap;

void sr_artifacts_snapshot(const sr_workspace *ws, sr_artifacts_snap *snap);
void sr_artifacts_snap_free(sr_artifacts_snap *snap);
/* Fill res->artifacts from ws's artifacts/ dir: the regular files new or
 * changed (time or size) since before (NULL: all), sorted by name, the
 * bytes inline while they fit SR_ARTIFACTS_INLINE_MAX. A missing dir is
 * no artifacts; a file that cannot be read is listed without its bytes. */
void sr_artifacts_collect(const sr_workspace *ws, const sr_artifacts_snap *before, sr_result *res);
void sr_artifacts_free(sr_result *res);
/* "image/png" for "plot.png"; "application/octet-stream" when unknown. */
const char *sr_artifact_mime(const char *name);

#endif

/* A run's Python dependencies (docs/dependencies.md): requirements
 * checked against policy.dependencies, met by the profile's rootfs where
 * it can, else installed by pip in a sandbox of its own into a layer that
 * the run's sandbox mounts read-only over /usr/local/lib/python3.X/
 * dist-packages (on sys.path, before the profile's packages). Finished
 * layers are kept in a cache keyed by everything that went into them. */
#ifndef SR_DEPS_H
#define SR_DEPS_H

#include <stddef.h>

#include "mounts.h"
#include "saferun.h"

typedef struct sr_deps_layer sr_deps_layer;

/* One requirement: a PEP 508 name and optional version specifiers, no
 * extras, markers, URLs, paths or options. norm gets the normalised name
 * (lower case, runs of -_. as one -). 0, or -1 with err naming
 * requirements[index] and the value. */
int sr_deps_check_requirement(const char *req, size_t index, char *norm, size_t norm_size,
			      sr_error *err);

/* Resolve req's requirements. Nothing to install: *out NULL. Else the
 * layer (from the cache, or installed now). A dependency failure (not
 * allowed, not found, pip failed, limits) is res->status = SR_STATUS_ERROR
 * with the reason in res->message, and returns 0; -1 only for a request
 * refused outright (a malformed requirement, no privileges). res->deps
 * says what was installed, met by the profile, ignored, cached. */
int sr_deps_prepare(const sr_run_request *req, sr_result *res, sr_deps_layer **out, sr_error *err);
/* The layer's host dir (read-only to sandboxes). */
const char *sr_deps_layer_path(const sr_deps_layer *l);
/* Unlock (a cache entry) or remove (a private layer) it; NULL is fine. */
void sr_deps_layer_release(sr_deps_layer *l);

/* The bind of layer over the profile's /usr/local/lib/python3.X/
 * dist-packages for req's policy. */
int sr_deps_bind(const sr_run_request *req, const char *layer, sr_bind *out, sr_error *err);
void sr_deps_bind_free(sr_bind *b);

void sr_deps_result_free(struct sr_deps_result *d);
#endif

/* A run's Python dependencies (docs/dependencies.md): requirements
 * checked against policy.dependencies, met by the profile's rootfs where
 * it can, else installed by pip in a sandbox of its own into a layer that
 * the run's sandbox mounts read-only over /usr/local/lib/python3.X/
 * dist-packages (on sys.path, before the profile's packages). Finished
 * layers are kept in a cache keyed by everything that went into them. */
#ifndef SR_DEPS_H
#define SR_DEPS_H

#include <stddef.h>
#include <stdint.h>

#include "box/box.h"
#include "policy/policy.h"
#include "saferun.h"

/* The bind of layer over /usr/local/lib/python3.X/dist-packages of the
 * policy's profile in rootfs_dir (NULL: the default). */
int sr_deps_bind(const sr_policy *p, const char *rootfs_dir, const char *layer, sr_bind *out,
		 sr_error *err);
void sr_deps_bind_free(sr_bind *b);
#endif

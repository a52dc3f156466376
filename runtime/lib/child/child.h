/* The child layer's interface: what runs in a sandbox's first process
 * (a cold run's after clone3, a warm run's in a fork of the zygote)
 * without allocating, on libc and libcap alone; the zygote module is
 * built from the same objects. */
#ifndef SR_CHILD_LAYER_H
#define SR_CHILD_LAYER_H

#include "caps.h"
#include "contain.h"
#include "mounts_ops.h"
#include "zygote_proto.h"

#endif

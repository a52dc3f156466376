/* The base layer's interface: errors, small helpers, ids, sizes. Everything
 * else in the library is built on it; it uses nothing of it. */
#ifndef SR_BASE_H
#define SR_BASE_H

#include "compiler.h"
#include "error.h"
#include "ids.h"
#include "util.h"

#endif

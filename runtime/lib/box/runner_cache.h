/* The in-sandbox runner (rootfs/runner.py) compiled once by a rootfs's own
 * python and kept on disk, so a cold run does not pay python's compile of
 * the runner's source (~5 ms, a fifth of a cold run) every time.
 *
 * An entry is made by a sandbox of that rootfs that runs no one's code
 * but the compile (sandbox.c), keyed by the runner's whole source and the
 * identity of the rootfs's python (path, device, inode, size, mtime,
 * ctime), compared byte for byte on load. A missing or unusable cache
 * only costs the compile: the source goes on python's command line as
 * before. $SAFERUN_CACHE_DIR moves it, "off" turns it off. */
#ifndef SR_RUNNER_CACHE_H
#define SR_RUNNER_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "child/child.h"

/* An fd (close-on-exec) positioned at the code of rootfs's entry, or -1;
 * *miss says a compile would make one (no entry, or another key's). */
int sr_runner_cache_open(const char *rootfs, bool *miss);
/* Keep code (what sr_runner_compile_py wrote) for rootfs. */
void sr_runner_cache_store(const char *rootfs, const void *code, size_t len);

/* python -c: load the code from fd SR_RUNNER_FD and run it as the runner.
 * It leaves no name behind and closes the fd before the runner starts. */
extern const char sr_runner_stub[];
/* The compile run's code: stdin (the runner's source) to stdout
 * (the interpreter's magic number, then the marshalled code object). */
extern const char sr_runner_compile_py[];

#endif

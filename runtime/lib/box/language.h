/* What each language of a run needs from its sandbox: the interpreter
 * (its path inside the root), the file the code is written to, and the
 * argv the sandbox's second process execs. Python's argv is the
 * runner's (sandbox.c); the others run their file as it is. */
#ifndef SR_LANGUAGE_H
#define SR_LANGUAGE_H

#include "saferun.h"

typedef struct sr_language_info {
	const char *name;        /* "javascript" */
	const char *interpreter; /* inside the root: "/usr/bin/node" */
	const char *code_file;   /* in the working dir: "main.js" */
} sr_language_info;

/* The preload a pooled JavaScript sandbox starts with (rootfs/node_warm.js),
 * in its working dir until the run's code arrives. */
#define SR_NODE_PRELOAD ".saferun-node.js"

/* NULL for a value outside the enum. */
const sr_language_info *sr_language_info_of(sr_language l);
/* 0 when the profile's tree (rootfs NULL: the host's /) has the
 * interpreter, else a refusal (ENOENT) naming the profile and language. */
int sr_language_check_profile(const char *rootfs, const char *profile, sr_language l,
			      sr_error *err);

#endif

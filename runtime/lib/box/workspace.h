/* Workspaces (saferun.h has the contract): what the library keeps private. */
#ifndef SR_WORKSPACE_H
#define SR_WORKSPACE_H

#include "saferun.h"

/* How many dir levels a list or a remove goes down below where it starts
 * (each level holds an fd); a deeper tree: ELOOP (list from further down
 * to see the rest). */
#define SR_WORKSPACE_MAX_DEPTH 128

/* Free ws without touching its mount, for a workspace someone else has
 * already taken down (sr_workspace_cleanup_stale). */
void sr_workspace_forget(sr_workspace *ws);

/* The workspace functions over a dir that is not a workspace: root_fd
 * (taken over; O_PATH is enough) is its root. sr_workspace_forget it.
 * A one-shot run's working dir, whose fd the sandbox hands over. */
sr_workspace *sr_workspace_view(int root_fd, const char *label);

#endif

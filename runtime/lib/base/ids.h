/* The sandbox's user and the host ids it maps to: the sandbox writes the
 * uid/gid maps from them, the workspaces own their files by them. */
#ifndef SR_IDS_H
#define SR_IDS_H

/* Sandbox uid/gid 0..65535 map to this unprivileged host range, so even
 * the sandbox's own root is nobody on the host. */
#define SR_HOST_ID_BASE  1879048192u
#define SR_HOST_ID_COUNT 65536u
#define SR_SANDBOX_UID   1000u
#define SR_SANDBOX_GID   1000u

/* The sandbox user as the host sees it (owner of workspace files). */
#define SR_SANDBOX_HOST_UID (SR_HOST_ID_BASE + SR_SANDBOX_UID)
#define SR_SANDBOX_HOST_GID (SR_HOST_ID_BASE + SR_SANDBOX_GID)

#endif

/* The warm path's messages between the supervisor (warm.c) and the
 * zygote (runtime/zygote/zygote.c, a Python module in the zygote's
 * interpreter), over a SOCK_SEQPACKET socket: the zygote's fd 3.
 *
 *   start  supervisor -> runner: "Z" sr_zspec, the spec's tail, then the
 *          preload list ("\x1f"-separated); fd: the module (a memfd).
 *          runner -> supervisor: "R" ready, or "E" and why not.
 *   spawn  supervisor -> zygote: "S" u8 n_join; fds: report, stdout,
 *          stderr, the run's control socket, the working dir's socket,
 *          then n_join cgroup files.
 *          zygote -> supervisor: "P" i32 pid; fd: a pidfd of the new
 *          sandbox's init. Or "F" i32 errno, the failed step's text.
 *   run    supervisor -> the sandbox's python, on its own control socket:
 *          first python says "R" (locked down, waiting); then "W"
 *          sr_zrun; fds: a memfd with code, environment, guard, files;
 *          stdin. With SR_ZRUN_AWAIT_GO python writes the files and
 *          installs the guard, then waits for "G" before it compiles the
 *          code (the checker vets it meanwhile; a rejected run's sandbox
 *          is killed instead). The run then goes like a cold one-shot run. */
#ifndef SR_ZYGOTE_PROTO_H
#define SR_ZYGOTE_PROTO_H
#include <stdint.h>

#define SR_ZSPEC_MAGIC 0x315a5253u /* "SRZ1" */
#define SR_ZSPEC_MAX   (256u << 10)

/* Fixed for a zygote's life: what each of its sandboxes gets. Followed by
 * bpf_len struct sock_filter, then the workdir and writable dirs, each
 * NUL-terminated. */
typedef struct sr_zspec {
	uint32_t magic;
	uint32_t uid, gid;
	uint32_t n_writable;
	uint64_t tmpfs_bytes;
	uint64_t open_files;
	uint32_t bpf_len;
	uint32_t strings_len;
} sr_zspec;

/* "W" then this (packed little-endian, read by rootfs/runner.py with
 * struct "<IIIIII"): the lengths of the memfd's parts, in order, and
 * flags. Files are u32 name length, u32 data length, name, data. */
typedef struct sr_zrun {
	uint32_t code_len;
	uint32_t env_len; /* "KEY=VALUE\0" ... */
	uint32_t guard_len;
	uint32_t n_files;
	uint32_t files_len;
	uint32_t flags;
} __attribute__((packed)) sr_zrun;

#define SR_ZRUN_AWAIT_GO 1u /* wait for "G" before the code runs */

#define SR_ZSPAWN_FDS 5 /* report, stdout, stderr, control, working dir */

#endif

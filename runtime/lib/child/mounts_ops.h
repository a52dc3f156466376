/* The mount plan's operations: built by mounts.c in the supervisor,
 * executed by mounts_apply.c in the sandbox child (which is also compiled
 * into the warm path's zygote module, so it depends on libc alone). */
#ifndef SR_MOUNTS_OPS_H
#define SR_MOUNTS_OPS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Paths seen by the child between the two pivots: the stage tmpfs is /,
 * the host root is /oldroot, the sandbox root is being built at /newroot,
 * and the writable tmpfs is /rw. */
#define STAGE   "/tmp"
#define OLDROOT "/oldroot"
#define NEWROOT "/newroot"
#define RW      "/rw"

enum op_kind {
	OP_TMPFS,    /* dst, size, mode */
	OP_BIND,     /* src (host path) -> dst; ro unless OPF_RW */
	OP_BIND_NEW, /* src (path in the stage) -> dst */
	OP_MKDIR,    /* dst, mode, chown to the sandbox user with OPF_OWN */
	OP_TOUCH,    /* dst: empty file as a bind target */
	OP_SYMLINK,  /* src = target, dst */
	OP_WRITE,    /* dst, data, len, mode; OPF_OWN */
	OP_PROC,     /* dst */
	OP_MASK,     /* dst: /dev/null over a file, empty ro tmpfs over a dir */
	OP_READONLY, /* dst: make an existing mount read-only (not its submounts) */
};

enum op_flags {
	OPF_RW = 1,       /* bind stays writable */
	OPF_DEV = 2,      /* keep device nodes usable (no MS_NODEV) */
	OPF_OWN = 4,      /* owned by the sandbox user */
	OPF_OPTIONAL = 8, /* skip silently when the target does not exist */
};

struct sr_mount_op {
	enum op_kind kind;
	unsigned flags;
	char *src, *dst;
	const void *data;
	size_t len;
	uint64_t size;
	mode_t mode;
	uid_t uid;
	gid_t gid;
};

/* /proc files and dirs that leak host-wide kernel state or take writes:
 * masked (as runc and crun do), and the dirs kept read-only. */
extern const char *const sr_proc_masked[];
extern const size_t sr_n_proc_masked;
extern const char *const sr_proc_readonly[];
extern const size_t sr_n_proc_readonly;

typedef struct sr_mount_op sr_mount_op;

typedef struct sr_mount_plan {
	sr_mount_op *ops;
	size_t n, cap;
} sr_mount_plan;

/* In the child, in its new mount namespace, as root of its user namespace:
 * make mounts private, build the new root, pivot into it, chdir to workdir.
 * 0 or -errno; on failure *what says which step and path failed. */
int sr_mounts_apply(const sr_mount_plan *plan, const char *workdir, char *what, size_t what_size);

/* The warm path (warm.c, zygote.c): a fork of the zygote, in its own new
 * mount namespace (a copy of the zygote's finished root), replaces the
 * zygote's writable dirs, /dev/shm and /proc with its own. */
typedef struct sr_renew_spec {
	const char *workdir;
	const char *const *writable;
	size_t n_writable;
	uint64_t tmpfs_bytes;
	uid_t uid;
	gid_t gid;
} sr_renew_spec;
int sr_mounts_renew(const sr_renew_spec *s, char *what, size_t what_size);

/* The inode cap (tmpfs nr_inodes) of a writable tmpfs of size bytes: one
 * per 4 KiB, at least 1024. Without it empty files cost no pages, only
 * inodes and dentries the memory limit may not see (cgroup v1 without
 * kmem accounting), and a run could make millions. */
static inline uint64_t sr_tmpfs_inodes(uint64_t size)
{
	return size / 4096 > 1024 ? size / 4096 : 1024;
}

#endif

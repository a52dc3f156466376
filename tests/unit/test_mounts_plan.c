/* The sandbox's mount plan (sr_mounts_plan), as a table: a filesystem spec
 * goes in, the list of operations the child will execute comes out (one
 * line per operation), or the refusal with its errno and message. Built
 * rootfs specs use a scratch dir holding the writable dirs; the host
 * profile's skeleton depends on the host's /usr and /etc, so only its own
 * lines are checked there. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "box/box.h"
#include "check.h"
#include "saferun.h"

static char root[64]; /* the scratch "built rootfs" */

static const char *const kind_names[] = {
	[OP_TMPFS] = "tmpfs",       [OP_BIND] = "bind",   [OP_BIND_NEW] = "bind_new",
	[OP_MKDIR] = "mkdir",       [OP_TOUCH] = "touch", [OP_SYMLINK] = "symlink",
	[OP_WRITE] = "write",       [OP_PROC] = "proc",   [OP_MASK] = "mask",
	[OP_READONLY] = "readonly",
};

/* "kind[,rw][,dev][,own][,opt] [src -> ]dst[ mode][ size][ data]\n" per op;
 * the scratch rootfs's path is written ROOTFS. Caller frees. */
static char *render(const sr_mount_plan *p)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	for (size_t i = 0; i < p->n; i++) {
		const sr_mount_op *op = &p->ops[i];
		fprintf(f, "%s%s%s%s%s ", kind_names[op->kind], op->flags & OPF_RW ? ",rw" : "",
			op->flags & OPF_DEV ? ",dev" : "", op->flags & OPF_OWN ? ",own" : "",
			op->flags & OPF_OPTIONAL ? ",opt" : "");
		if (op->src)
			fprintf(f, "%s -> ", strcmp(op->src, root) == 0 ? "ROOTFS" : op->src);
		fprintf(f, "%s", op->dst);
		if (op->mode)
			fprintf(f, " %04o", (unsigned)op->mode);
		if (op->size)
			fprintf(f, " size=%llu", (unsigned long long)op->size);
		if (op->data)
			fprintf(f, " \"%.*s\"", (int)op->len, (const char *)op->data);
		fprintf(f, "\n");
	}
	fclose(f);
	return text;
}

/* What every plan holds after the writable dirs and binds. */
#define DEV                                                  \
	"tmpfs /newroot/dev 0755 size=65536\n"               \
	"touch /newroot/dev/null\n"                          \
	"bind,rw,dev /dev/null -> /newroot/dev/null\n"       \
	"touch /newroot/dev/zero\n"                          \
	"bind,rw,dev /dev/zero -> /newroot/dev/zero\n"       \
	"touch /newroot/dev/full\n"                          \
	"bind,rw,dev /dev/full -> /newroot/dev/full\n"       \
	"touch /newroot/dev/random\n"                        \
	"bind,rw,dev /dev/random -> /newroot/dev/random\n"   \
	"touch /newroot/dev/urandom\n"                       \
	"bind,rw,dev /dev/urandom -> /newroot/dev/urandom\n" \
	"symlink /proc/self/fd -> /newroot/dev/fd\n"         \
	"symlink /proc/self/fd/0 -> /newroot/dev/stdin\n"    \
	"symlink /proc/self/fd/1 -> /newroot/dev/stdout\n"   \
	"symlink /proc/self/fd/2 -> /newroot/dev/stderr\n"   \
	"mkdir,own /rw/shm 1777\n"                           \
	"mkdir /newroot/dev/shm 0755\n"                      \
	"bind_new,rw /rw/shm -> /newroot/dev/shm\n"          \
	"readonly,dev /newroot/dev\n"

#define PROC                                     \
	"proc /newroot/proc\n"                   \
	"mask,opt /newroot/proc/kcore\n"         \
	"mask,opt /newroot/proc/keys\n"          \
	"mask,opt /newroot/proc/timer_list\n"    \
	"mask,opt /newroot/proc/sched_debug\n"   \
	"mask,opt /newroot/proc/sysrq-trigger\n" \
	"mask,opt /newroot/proc/kallsyms\n"      \
	"mask,opt /newroot/proc/latency_stats\n" \
	"mask,opt /newroot/proc/acpi\n"          \
	"mask,opt /newroot/proc/scsi\n"          \
	"mask,opt /newroot/proc/asound\n"        \
	"mask,opt /newroot/proc/firmware\n"      \
	"mask,opt /newroot/proc/kpagecount\n"    \
	"mask,opt /newroot/proc/kpageflags\n"    \
	"mask,opt /newroot/proc/kpagecgroup\n"   \
	"mask,opt /newroot/proc/vmallocinfo\n"   \
	"mask,opt /newroot/proc/config.gz\n"     \
	"bind_new,opt /newroot/proc/sys\n"       \
	"bind_new,opt /newroot/proc/irq\n"       \
	"bind_new,opt /newroot/proc/bus\n"       \
	"bind_new,opt /newroot/proc/fs\n"

/* The default policy's writable dirs on a built rootfs: /tmp and /work. */
#define ROOT_AND_WRITABLE                     \
	"bind ROOTFS -> /newroot\n"           \
	"tmpfs /rw 0755 size=67108864\n"      \
	"mkdir,own /rw/0 1777\n"              \
	"bind_new,rw /rw/0 -> /newroot/tmp\n" \
	"mkdir,own /rw/1 0755\n"              \
	"bind_new,rw /rw/1 -> /newroot/work\n"

static char *const tmp_work[] = { "/tmp", "/work" };
static sr_file nested[] = {
	{ .name = "data/in/x.csv", .data = "1,2", .size = 3 },
	{ .name = "notes.txt", .data = "hi", .size = 2 },
};
static const sr_bind binds[] = {
	{ .src = "/srv/layer", .dst = "/opt/layer" },
	{ .src = "/srv/out", .dst = "/work/out", .rw = true },
};

/* A row names only what it changes of the default spec (a later
 * designated initializer wins, which is the point here). */
#pragma GCC diagnostic ignored "-Woverride-init"

/* rootfs: NULL here means the scratch rootfs (the host profile has its
 * own rows below). */
#define SPEC(...)                                                                      \
	{                                                                              \
		.workdir = "/work", .writable = tmp_work, .n_writable = 2,             \
		.tmpfs_bytes = 64 * MIB, .uid = 1000, .gid = 1000, .code = "print(1)", \
		.code_size = 8, __VA_ARGS__                                            \
	}

struct row {
	const char *name;
	sr_fs_spec spec;
	const char *plan; /* the whole plan's lines */
};

static const struct row rows[] = {
	{ "a run on a built rootfs", SPEC(),
	  ROOT_AND_WRITABLE DEV PROC "write,own /rw/1/main.py 0644 \"print(1)\"\n" },
	{ "a kernel: no main.py", SPEC(.code = NULL, .code_size = 0), ROOT_AND_WRITABLE DEV PROC },
	{ "files, nested ones with their dirs", SPEC(.files = nested, .n_files = 2),
	  ROOT_AND_WRITABLE DEV PROC "write,own /rw/1/main.py 0644 \"print(1)\"\n"
				     "mkdir,own,opt /rw/1/data 0755\n"
				     "mkdir,own,opt /rw/1/data/in 0755\n"
				     "write,own /rw/1/data/in/x.csv 0644 \"1,2\"\n"
				     "write,own /rw/1/notes.txt 0644 \"hi\"\n" },
	{ "a workspace as the working dir", SPEC(.workdir_host = "/var/lib/ws/s1"),
	  "bind ROOTFS -> /newroot\n"
	  "tmpfs /rw 0755 size=67108864\n"
	  "mkdir,own /rw/0 1777\n"
	  "bind_new,rw /rw/0 -> /newroot/tmp\n"
	  "bind,rw /var/lib/ws/s1 -> /newroot/work\n" DEV PROC
	  "write,own /rw/1/main.py 0644 \"print(1)\"\n" },
	{ "binds after the writable dirs, in order", SPEC(.binds = binds, .n_binds = 2),
	  ROOT_AND_WRITABLE "bind /srv/layer -> /newroot/opt/layer\n"
			    "bind,rw /srv/out -> /newroot/work/out\n" DEV PROC
			    "write,own /rw/1/main.py 0644 \"print(1)\"\n" },
	{ "egress: resolv.conf and hosts bound over the rootfs's",
	  SPEC(.resolv_conf = "nameserver 198.18.0.53\n", .hosts = "198.18.0.1\tpypi.org\n"),
	  ROOT_AND_WRITABLE DEV PROC "write,own /rw/1/main.py 0644 \"print(1)\"\n"
				     "write /resolv.conf 0644 \"nameserver 198.18.0.53\n\"\n"
				     "bind_new,opt /resolv.conf -> /newroot/etc/resolv.conf\n"
				     "write /hosts 0644 \"198.18.0.1\tpypi.org\n\"\n"
				     "bind_new,opt /hosts -> /newroot/etc/hosts\n" },
	{ "the working dir first, a size of its own",
	  SPEC(.writable = (char *const[]){ "/work", "/tmp" }, .tmpfs_bytes = 1 * MIB),
	  "bind ROOTFS -> /newroot\n"
	  "tmpfs /rw 0755 size=1048576\n"
	  "mkdir,own /rw/0 0755\n"
	  "bind_new,rw /rw/0 -> /newroot/work\n"
	  "mkdir,own /rw/1 1777\n"
	  "bind_new,rw /rw/1 -> /newroot/tmp\n" DEV PROC
	  "write,own /rw/0/main.py 0644 \"print(1)\"\n" },
};

struct bad {
	const char *name;
	sr_fs_spec spec;
	int errnum;
	const char *message; /* ROOTFS: the scratch rootfs's path */
};

static const sr_file dotdot[] = { { .name = "a/../b", .data = "", .size = 0 } };
static const sr_file absolute[] = { { .name = "/etc/x", .data = "", .size = 0 } };
static const sr_file empty_name[] = { { .name = "", .data = "", .size = 0 } };
static const sr_file double_slash[] = { { .name = "a//b", .data = "", .size = 0 } };
static const sr_file main_py[] = { { .name = "main.py", .data = "", .size = 0 } };

static const struct bad bads[] = {
	{ "relative writable dir", SPEC(.writable = (char *const[]){ "tmp", "/work" }), EINVAL,
	  "writable dir \"tmp\" must be an absolute path below /" },
	{ "writable dir with ..", SPEC(.writable = (char *const[]){ "/work/../etc", "/work" }),
	  EINVAL, "writable dir \"/work/../etc\" must be an absolute path below /" },
	{ "/ writable", SPEC(.writable = (char *const[]){ "/", "/work" }), EINVAL,
	  "writable dir \"/\" must be an absolute path below /" },
	{ "writable dir not in the rootfs",
	  SPEC(.writable = (char *const[]){ "/tmp", "/work", "/nowhere" }, .n_writable = 3), ENOENT,
	  "writable dir /nowhere does not exist in rootfs ROOTFS (rebuild the rootfs or change "
	  "filesystem.writable)" },
	{ "working dir not writable", SPEC(.n_writable = 1), EINVAL,
	  "working dir /work is not one of the writable dirs" },
	{ "files for a kernel", SPEC(.code = NULL, .files = nested, .n_files = 2), EINVAL,
	  "files cannot be given to a kernel (write them into its workspace)" },
	{ "file name with ..", SPEC(.files = dotdot, .n_files = 1), EINVAL,
	  "file name \"a/../b\" has an empty, \".\" or \"..\" part" },
	{ "file name with an empty part", SPEC(.files = double_slash, .n_files = 1), EINVAL,
	  "file name \"a//b\" has an empty, \".\" or \"..\" part" },
	{ "absolute file name", SPEC(.files = absolute, .n_files = 1), EINVAL,
	  "file name \"/etc/x\" must be relative to the working dir" },
	{ "empty file name", SPEC(.files = empty_name, .n_files = 1), EINVAL,
	  "file name \"\" is empty or too long" },
	{ "main.py is the code's", SPEC(.files = main_py, .n_files = 1), EEXIST,
	  "file name \"main.py\" is taken by the code itself" },
};

static void check_row(const struct row *r)
{
	sr_fs_spec spec = r->spec;
	spec.rootfs = root;
	sr_mount_plan plan;
	sr_error err = { 0 };
	fprintf(stderr, "-- %s\n", r->name);
	CHECK_INT(sr_mounts_plan(&spec, &plan, &err), 0);
	char *got = render(&plan);
	CHECK_STR(got, r->plan);
	size_t wrong_ids = 0;
	for (size_t i = 0; i < plan.n; i++)
		wrong_ids += plan.ops[i].uid != 1000 || plan.ops[i].gid != 1000;
	CHECK_INT(wrong_ids, 0);
	free(got);
	sr_mounts_plan_free(&plan);
	CHECK_INT(plan.n, 0);
}

static void check_bad(const struct bad *b)
{
	sr_fs_spec spec = b->spec;
	spec.rootfs = root;
	sr_mount_plan plan;
	sr_error err = { 0 };
	char want[SR_ERROR_MSG_MAX];
	const char *at = strstr(b->message, "ROOTFS");
	if (at)
		snprintf(want, sizeof want, "%.*s%s%s", (int)(at - b->message), b->message, root,
			 at + strlen("ROOTFS"));
	else
		snprintf(want, sizeof want, "%s", b->message);
	fprintf(stderr, "-- %s\n", b->name);
	CHECK_INT(sr_mounts_plan(&spec, &plan, &err), -1);
	CHECK_INT(err.errnum, b->errnum);
	CHECK_STR(err.msg, want);
	CHECK_INT(plan.n, 0);
}

/* The host profile: an empty root with the host's /usr and a few /etc
 * files bound in (host-dependent), its own passwd, group and hosts, and
 * the root made read-only last. */
static void check_host_profile(void)
{
	sr_fs_spec spec = SPEC(.writable = (char *const[]){ "/tmp", "/home/user/work" },
			       .workdir = "/home/user/work", .hosts = "198.18.0.1\tpypi.org\n",
			       .resolv_conf = "nameserver 198.18.0.53\n");
	sr_mount_plan plan;
	sr_error err = { 0 };
	CHECK_INT(sr_mounts_plan(&spec, &plan, &err), 0);
	char *got = render(&plan);
	static const char *const want[] = {
		"tmpfs /newroot 0755 size=1048576\n",
		"mkdir /newroot/etc 0755\n",
		"write /newroot/etc/passwd 0644 \"root:x:0:0:root:/root:/usr/sbin/nologin\n"
		"sandbox:x:1000:1000:sandbox:/work:/usr/sbin/nologin\n"
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\"\n",
		"write /newroot/etc/group 0644 \"root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n\"\n"
		"write /newroot/etc/hosts 0644 \"198.18.0.1\tpypi.org\n\"\n"
		"mkdir /newroot/proc 0755\n"
		"mkdir /newroot/dev 0755\n"
		"mkdir /newroot/root 0755\n"
		"mkdir /newroot/var 0755\n"
		"mkdir /newroot/var/tmp 0755\n"
		"tmpfs /rw 0755 size=67108864\n"
		"mkdir /newroot/tmp 0755\n"
		"mkdir,own /rw/0 1777\n"
		"bind_new,rw /rw/0 -> /newroot/tmp\n"
		"mkdir /newroot/home 0755\n"
		"mkdir /newroot/home/user 0755\n"
		"mkdir /newroot/home/user/work 0755\n"
		"mkdir,own /rw/1 0755\n"
		"bind_new,rw /rw/1 -> /newroot/home/user/work\n" DEV PROC
		"write,own /rw/1/main.py 0644 \"print(1)\"\n"
		"write /newroot/etc/resolv.conf 0644 \"nameserver 198.18.0.53\n\"\n"
		"readonly /newroot\n",
	};
	CHECK(got && strncmp(got, want[0], strlen(want[0])) == 0);
	for (size_t i = 1; i < ARRAY_LEN(want); i++) {
		bool found = got && strstr(got, want[i]);
		if (!found)
			fprintf(stderr, "host profile plan lacks:\n%s", want[i]);
		CHECK(found);
	}
	/* Each /usr-like top dir the host has is bound read-only. */
	struct stat st;
	if (lstat("/usr", &st) == 0 && S_ISDIR(st.st_mode))
		CHECK(got && strstr(got, "mkdir /newroot/usr 0755\nbind /usr -> /newroot/usr\n"));
	/* Nothing of the host's /etc but the listed files. */
	CHECK(got && !strstr(got, "/etc/shadow") && !strstr(got, "/etc/passwd ->"));
	free(got);
	sr_mounts_plan_free(&plan);
}

int main(void)
{
	snprintf(root, sizeof root, "/tmp/sr-mounts-plan-XXXXXX");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	char path[128];
	static const char *const dirs[] = { "tmp", "work" };
	for (size_t i = 0; i < ARRAY_LEN(dirs); i++) {
		snprintf(path, sizeof path, "%s/%s", root, dirs[i]);
		mkdir(path, 0755);
	}
	for (size_t i = 0; i < ARRAY_LEN(rows); i++)
		check_row(&rows[i]);
	for (size_t i = 0; i < ARRAY_LEN(bads); i++)
		check_bad(&bads[i]);
	check_host_profile();
	for (size_t i = 0; i < ARRAY_LEN(dirs); i++) {
		snprintf(path, sizeof path, "%s/%s", root, dirs[i]);
		rmdir(path);
	}
	rmdir(root);
	return check_report();
}

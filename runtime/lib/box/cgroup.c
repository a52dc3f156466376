#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"

/* The controllers saferun uses, by role. On v2 they all share one dir. */
enum role { R_MEMORY, R_CPU, R_CPUACCT, R_PIDS, R_FREEZER, R_COUNT };
static const char *const role_controller[R_COUNT] = {
	"memory", "cpu", "cpuacct", "pids", "freezer",
};

#define SR_CGROUP_PARENT "saferun"
/* On v2 a group with processes cannot enable controllers for children
 * ("no internal processes"): saferun moves itself into this leaf first. */
#define SR_CGROUP_SELF_LEAF "saferun-supervisor"

struct sr_cgroup {
	sr_cgroup_mode mode;
	char *dir[R_COUNT]; /* the sandbox's group per role (NULL: absent) */
	char *parent[R_COUNT];
	bool in_share; /* parent is a share group (sr_cgroup_share_create): it stays */
	int fd;        /* v2 only */
};

struct cg_ops {
	int (*apply_limits)(sr_cgroup *cg, const sr_limits *lim, sr_error *err);
	int (*kill_all)(sr_cgroup *cg);
	void (*read_stats)(sr_cgroup *cg, sr_cgroup_stats *st);
};

const char *sr_cgroup_mode_name(sr_cgroup_mode m)
{
	switch (m) {
	case SR_CGROUP_V2: return "v2";
	case SR_CGROUP_V1: return "v1";
	case SR_CGROUP_HYBRID: return "hybrid";
	default: return "none";
	}
}

/* Find the mount of a hierarchy in mountinfo: cgroup2, or the v1 mount
 * carrying `controller`. Fills mnt (mount point) and root (its root in the
 * cgroup namespace). */
static int read_mount(const char *controller, char *mnt, char *root, size_t size)
{
	cleanup_fclose FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	cleanup_free char *line = NULL;
	size_t cap = 0;
	int rc = -ENOENT;
	while (rc && getline(&line, &cap, f) > 0) {
		char r[PATH_MAX], m[PATH_MAX], fstype[64], superopts[1024];
		char *sep = strstr(line, " - ");
		/* Most mounts are not cgroups: skip them before parsing. */
		if (!sep || strncmp(sep + 3, "cgroup", 6) != 0)
			continue;
		if (sscanf(line, "%*s %*s %*s %4095s %4095s", r, m) != 2 ||
		    sscanf(sep + 3, "%63s %*s %1023s", fstype, superopts) != 2)
			continue;
		bool match = false;
		if (!controller)
			match = strcmp(fstype, "cgroup2") == 0;
		else if (strcmp(fstype, "cgroup") == 0)
			for (char *save, *t = strtok_r(superopts, ",", &save); t;
			     t = strtok_r(NULL, ",", &save))
				match = match || strcmp(t, controller) == 0;
		if (match && strlen(m) < size && strlen(r) < size) {
			strcpy(mnt, m);
			strcpy(root, r);
			rc = 0;
		}
	}
	return rc;
}

/* The hierarchies' mounts do not move while saferun runs, and every
 * sandbox looks up five of them: mountinfo is read once per hierarchy
 * and process (what was found; a missing one is looked for again). */
static struct {
	pthread_mutex_t mu;
	char *mnt[R_COUNT + 1], *root[R_COUNT + 1]; /* [R_COUNT]: cgroup2 */
} mounts = { .mu = PTHREAD_MUTEX_INITIALIZER };

static int find_mount(const char *controller, char *mnt, char *root, size_t size)
{
	int slot = R_COUNT;
	for (int r = 0; controller && r < R_COUNT; r++)
		if (strcmp(controller, role_controller[r]) == 0)
			slot = r;
	if (controller && slot == R_COUNT)
		return read_mount(controller, mnt, root, size);
	pthread_mutex_lock(&mounts.mu);
	int rc = 0;
	if (!mounts.mnt[slot]) {
		rc = read_mount(controller, mnt, root, size);
		if (rc == 0 && (mounts.mnt[slot] = strdup(mnt)) &&
		    !(mounts.root[slot] = strdup(root))) {
			free(mounts.mnt[slot]);
			mounts.mnt[slot] = NULL;
		}
	} else if (strlen(mounts.mnt[slot]) < size && strlen(mounts.root[slot]) < size) {
		strcpy(mnt, mounts.mnt[slot]);
		strcpy(root, mounts.root[slot]);
	} else {
		rc = -ENAMETOOLONG;
	}
	pthread_mutex_unlock(&mounts.mu);
	return rc;
}

/* Our own path for a hierarchy in /proc/self/cgroup ("" controller list
 * with id 0 on v2). */
static int own_path(const char *controller, char *out, size_t size)
{
	cleanup_fclose FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return -errno;
	cleanup_free char *line = NULL;
	size_t cap = 0;
	int rc = -ENOENT;
	while (rc && getline(&line, &cap, f) > 0) {
		line[strcspn(line, "\n")] = '\0';
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		bool match = false;
		if (!controller)
			match = c1 == line + 1 && line[0] == '0' && c2 == c1 + 1; /* "0::path" */
		else
			for (char *save, *t = strtok_r(c1 + 1, ",", &save); t;
			     t = strtok_r(NULL, ",", &save))
				match = match || strcmp(t, controller) == 0;
		if (match && strlen(c2 + 1) < size) {
			strcpy(out, c2 + 1);
			rc = 0;
		}
	}
	return rc;
}

sr_cgroup_mode sr_cgroup_detect(void)
{
	char mnt[PATH_MAX], root[PATH_MAX];
	bool v1 = find_mount("memory", mnt, root, sizeof mnt) == 0 ||
		  find_mount("pids", mnt, root, sizeof mnt) == 0;
	bool v2 = find_mount(NULL, mnt, root, sizeof mnt) == 0;
	if (v1)
		return v2 ? SR_CGROUP_HYBRID : SR_CGROUP_V1;
	return v2 ? SR_CGROUP_V2 : SR_CGROUP_NONE;
}

char *sr_cgroup_own_dir(sr_cgroup_mode mode, const char *controller)
{
	const char *hier = mode == SR_CGROUP_V2 ? NULL : controller;
	char mnt[PATH_MAX], root[PATH_MAX], path[PATH_MAX];
	if (find_mount(hier, mnt, root, sizeof mnt) || own_path(hier, path, sizeof path))
		return NULL;
	/* Paths in /proc/self/cgroup are relative to our cgroup namespace; the
	 * mount's root is too. Strip the mount root to get the dir below it. */
	const char *rel = path;
	size_t rl = strlen(root);
	if (strcmp(root, "/") != 0 && strncmp(path, root, rl) == 0)
		rel = path + rl;
	/* A daemon that moved itself into its leaf still creates groups
	 * beside that leaf, not below it. */
	char *leaf = strstr(path, "/" SR_CGROUP_SELF_LEAF);
	if (mode == SR_CGROUP_V2 && leaf && leaf[strlen(SR_CGROUP_SELF_LEAF) + 1] == '\0')
		*leaf = '\0';
	char *out;
	if (asprintf(&out, "%s%s", mnt, strcmp(rel, "/") == 0 ? "" : rel) < 0)
		return NULL;
	return out;
}

/* ---- v2 ----------------------------------------------------------------- */

static int write_in(const char *dir, const char *file, const char *val, sr_error *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	int rc = sr_write_file(path, val);
	if (rc < 0)
		return sr_fail(err, -rc, "write %s \"%s\"", path, val);
	return 0;
}

/* v2: one dir holds every controller's files. */
static int v2_write(sr_cgroup *cg, const char *file, const char *val, sr_error *err)
{
	return write_in(cg->dir[R_MEMORY], file, val, err);
}

static int v2_apply_limits(sr_cgroup *cg, const sr_limits *lim, sr_error *err)
{
	char v[64];
	snprintf(v, sizeof v, "%" PRIu64, lim->memory_bytes);
	if (v2_write(cg, "memory.max", v, err))
		return -1;
	snprintf(v, sizeof v, "%" PRIu64, lim->swap_bytes);
	/* memory.swap.max is absent when swap accounting is off; then no
	 * swap can be charged to the group at all. */
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/memory.swap.max", cg->dir[R_MEMORY]);
	if (access(path, F_OK) == 0 && v2_write(cg, "memory.swap.max", v, err))
		return -1;
	if (v2_write(cg, "memory.oom.group", "1", err))
		return -1;
	snprintf(v, sizeof v, "%" PRIu32, lim->pids);
	if (v2_write(cg, "pids.max", v, err))
		return -1;
	snprintf(v, sizeof v, "%" PRIu64 " 100000", (uint64_t)lim->cpu_millis * 100u);
	return v2_write(cg, "cpu.max", v, err);
}

static int signal_procs(const char *dir)
{
	char path[PATH_MAX], buf[65536];
	snprintf(path, sizeof path, "%s/cgroup.procs", dir);
	ssize_t n = sr_read_file(path, buf, sizeof buf);
	if (n < 0)
		return (int)n;
	int count = 0;
	for (char *p = buf; *p;) {
		char *end;
		long pid = strtol(p, &end, 10);
		if (end == p)
			break;
		if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0)
			count++;
		p = end + (*end == '\n');
	}
	return count;
}

static int v2_kill_all(sr_cgroup *cg)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/cgroup.kill", cg->dir[R_MEMORY]);
	if (sr_write_file(path, "1") == 0)
		return 0;
	/* Kernels before 5.14 have no cgroup.kill: freeze, kill, thaw. */
	snprintf(path, sizeof path, "%s/cgroup.freeze", cg->dir[R_MEMORY]);
	sr_write_file(path, "1");
	int rc = signal_procs(cg->dir[R_MEMORY]);
	sr_write_file(path, "0");
	return rc < 0 ? rc : 0;
}

static void v2_read_stats(sr_cgroup *cg, sr_cgroup_stats *st)
{
	char path[PATH_MAX];
	const char *d = cg->dir[R_MEMORY];
	snprintf(path, sizeof path, "%s/cpu.stat", d);
	sr_read_keyed_u64(path, "usage_usec", &st->cpu_usec);
	snprintf(path, sizeof path, "%s/memory.peak", d);
	sr_read_u64(path, &st->peak_memory_bytes);
	snprintf(path, sizeof path, "%s/memory.events", d);
	sr_read_keyed_u64(path, "oom_kill", &st->oom_kills);
	sr_read_keyed_u64(path, "max", &st->memory_failcnt);
	snprintf(path, sizeof path, "%s/pids.events", d);
	sr_read_keyed_u64(path, "max", &st->pids_denied);
}

static const struct cg_ops v2_ops = { v2_apply_limits, v2_kill_all, v2_read_stats };

/* ---- v1 ----------------------------------------------------------------- */

static int v1_write(sr_cgroup *cg, enum role r, const char *file, const char *val, sr_error *err)
{
	return write_in(cg->dir[r], file, val, err);
}

static int v1_apply_limits(sr_cgroup *cg, const sr_limits *lim, sr_error *err)
{
	char v[64], path[PATH_MAX];
	snprintf(v, sizeof v, "%" PRIu64, lim->memory_bytes);
	if (v1_write(cg, R_MEMORY, "memory.limit_in_bytes", v, err))
		return -1;
	snprintf(path, sizeof path, "%s/memory.memsw.limit_in_bytes", cg->dir[R_MEMORY]);
	if (access(path, F_OK) == 0) {
		snprintf(v, sizeof v, "%" PRIu64, lim->memory_bytes + lim->swap_bytes);
		if (v1_write(cg, R_MEMORY, "memory.memsw.limit_in_bytes", v, err))
			return -1;
	} else if (lim->swap_bytes == 0 && v1_write(cg, R_MEMORY, "memory.swappiness", "0", err)) {
		return -1;
	}
	snprintf(v, sizeof v, "%" PRIu32, lim->pids);
	if (v1_write(cg, R_PIDS, "pids.max", v, err))
		return -1;
	if (v1_write(cg, R_CPU, "cpu.cfs_period_us", "100000", err))
		return -1;
	snprintf(v, sizeof v, "%" PRIu64, (uint64_t)lim->cpu_millis * 100u);
	return v1_write(cg, R_CPU, "cpu.cfs_quota_us", v, err);
}

/* A freeze is done once every task has stopped at a safe point, which
 * takes a moment in a busy group (a throttled one waits for its next CPU
 * period) and as long as it lasts for a task in uninterruptible sleep.
 * v1: freezer.state reads FREEZING until then (each read checks again). */
static bool v1_wait_frozen(const char *state, int ms)
{
	uint64_t end = sr_now_ms() + (uint64_t)ms;
	long step_ns = 250 * 1000;
	for (;;) {
		char buf[32];
		if (sr_read_file(state, buf, sizeof buf) <= 0)
			return false; /* the group is gone */
		if (strncmp(buf, "FROZEN", 6) == 0)
			return true;
		if (sr_now_ms() >= end)
			return false;
		nanosleep(&(struct timespec){ .tv_nsec = step_ns }, NULL);
		step_ns = step_ns < 8 * 1000 * 1000 ? step_ns * 2 : step_ns;
	}
}

/* v2: cgroup.events says "frozen 1"; the kernel wakes a poll (POLLPRI)
 * on every change of the file. */
static bool v2_wait_frozen(const char *dir, int ms)
{
	char path[PATH_MAX], buf[256];
	snprintf(path, sizeof path, "%s/cgroup.events", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	uint64_t end = sr_now_ms() + (uint64_t)ms;
	bool frozen = false;
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
		if (n < 0)
			break;
		buf[n] = '\0';
		const char *f = strstr(buf, "frozen ");
		frozen = f && f[strlen("frozen ")] == '1';
		uint64_t now = sr_now_ms();
		if (frozen || now >= end)
			break;
		struct pollfd p = { .fd = fd, .events = POLLPRI };
		poll(&p, 1, (int)(end - now));
	}
	close(fd);
	return frozen;
}

static int v1_kill_all(sr_cgroup *cg)
{
	/* A stale group may lack its freezer dir: kill what each dir holds. */
	if (!cg->dir[R_FREEZER]) {
		for (int r = 0; r < R_COUNT; r++)
			if (cg->dir[r])
				signal_procs(cg->dir[r]);
		return 0;
	}
	/* Freeze first so a fork bomb cannot outrun the kill loop; kill
	 * anyway after a second (a task in uninterruptible sleep holds a
	 * freeze, and a SIGKILL is still taken when it wakes). */
	char state[PATH_MAX];
	snprintf(state, sizeof state, "%s/freezer.state", cg->dir[R_FREEZER]);
	sr_write_file(state, "FROZEN");
	v1_wait_frozen(state, 1000);
	int rc = signal_procs(cg->dir[R_FREEZER]);
	sr_write_file(state, "THAWED");
	return rc < 0 ? rc : 0;
}

static void v1_read_stats(sr_cgroup *cg, sr_cgroup_stats *st)
{
	char path[PATH_MAX];
	uint64_t ns = 0;
	snprintf(path, sizeof path, "%s/cpuacct.usage",
		 cg->dir[R_CPUACCT] ? cg->dir[R_CPUACCT] : "/nonexistent");
	if (sr_read_u64(path, &ns) == 0)
		st->cpu_usec = ns / 1000u;
	snprintf(path, sizeof path, "%s/memory.max_usage_in_bytes", cg->dir[R_MEMORY]);
	sr_read_u64(path, &st->peak_memory_bytes);
	snprintf(path, sizeof path, "%s/memory.oom_control", cg->dir[R_MEMORY]);
	sr_read_keyed_u64(path, "oom_kill", &st->oom_kills);
	snprintf(path, sizeof path, "%s/memory.failcnt", cg->dir[R_MEMORY]);
	sr_read_u64(path, &st->memory_failcnt);
	snprintf(path, sizeof path, "%s/pids.events", cg->dir[R_PIDS]);
	sr_read_keyed_u64(path, "max", &st->pids_denied);
}

static const struct cg_ops v1_ops = { v1_apply_limits, v1_kill_all, v1_read_stats };

static const struct cg_ops *ops(const sr_cgroup *cg)
{
	return cg->mode == SR_CGROUP_V2 ? &v2_ops : &v1_ops;
}

/* ---- shared ------------------------------------------------------------- */

/* Roles whose dir is the first of its kind (v1 co-mounts cpu,cpuacct;
 * v2 has a single dir): mkdir, attach and rmdir each dir once. */
static bool first_of_dir(const sr_cgroup *cg, int r)
{
	if (!cg->dir[r])
		return false;
	for (int i = 0; i < r; i++)
		if (cg->dir[i] && strcmp(cg->dir[i], cg->dir[r]) == 0)
			return false;
	return true;
}

/* v2: enable the controllers for the children of dir, moving ourselves
 * into a leaf when dir holds processes (the "no internal processes" rule). */
static int v2_delegate(const char *dir, bool may_move_self, sr_error *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/cgroup.subtree_control", dir);
	int rc = sr_write_file(path, "+memory +pids +cpu");
	if (rc == -EBUSY && may_move_self) {
		char leaf[PATH_MAX], pid[32];
		snprintf(leaf, sizeof leaf, "%s/" SR_CGROUP_SELF_LEAF, dir);
		if (mkdir(leaf, 0755) < 0 && errno != EEXIST)
			return sr_fail(err, errno, "create cgroup %s", leaf);
		strncat(leaf, "/cgroup.procs", sizeof leaf - strlen(leaf) - 1);
		snprintf(pid, sizeof pid, "%d", getpid());
		if ((rc = sr_write_file(leaf, pid)) < 0)
			return sr_fail(err, -rc, "move saferun into %s", leaf);
		rc = sr_write_file(path, "+memory +pids +cpu");
	}
	if (rc == -EBUSY)
		return sr_refuse(err, EBUSY,
				 "cgroup %s has other processes, so saferun cannot create "
				 "groups below it (run saferun in a cgroup of its own, e.g. "
				 "systemd-run --scope -p Delegate=yes saferun ...)",
				 dir);
	if (rc < 0)
		return sr_fail(err, -rc,
			       "enable memory, pids and cpu controllers in %s "
			       "(are they delegated to this cgroup?)",
			       path);
	return 0;
}

static int make_group(sr_cgroup *cg, int r, const char *share, const char *id, sr_error *err)
{
	cleanup_free char *own = sr_cgroup_own_dir(cg->mode, role_controller[r]);
	if (!own)
		return r == R_FREEZER || r == R_CPUACCT
			   ? 0
			   : sr_fail(err, ENOENT, "find the %s cgroup saferun runs in",
				     role_controller[r]);
	if (asprintf(&cg->parent[r], "%s/" SR_CGROUP_PARENT "%s%s", own, share ? "/" : "",
		     share ? share : "") < 0 ||
	    asprintf(&cg->dir[r], "%s/%s", cg->parent[r], id) < 0)
		return sr_fail(err, ENOMEM, "cgroup path");
	if (!first_of_dir(cg, r))
		return 0;
	/* A share group is made (and delegated to) once, when its owner
	 * starts; a missing one is an error, not something to make here with
	 * no weight. */
	if (share)
		return mkdir(cg->dir[r], 0755) == 0
			   ? 0
			   : sr_fail(err, errno, "create cgroup %s%s", cg->dir[r],
				     errno == ENOENT ? " (its share group is gone)" : "");
	if (cg->mode == SR_CGROUP_V2 && v2_delegate(own, true, err))
		return -1;
	/* A concurrent run may remove the empty parent between our mkdirs. */
	for (int tries = 0; tries < 5; tries++) {
		if (mkdir(cg->parent[r], 0755) < 0 && errno != EEXIST)
			return sr_fail(err, errno, "create cgroup %s", cg->parent[r]);
		/* ... or between the mkdir and the delegation (ENOENT): again. */
		sr_error e = { 0 };
		if (cg->mode == SR_CGROUP_V2 && v2_delegate(cg->parent[r], false, &e)) {
			if (e.errnum == ENOENT)
				continue;
			if (err)
				*err = e;
			return -1;
		}
		if (mkdir(cg->dir[r], 0755) == 0)
			return 0;
		if (errno != ENOENT)
			break;
	}
	return sr_fail(err, errno, "create cgroup %s", cg->dir[r]);
}

int sr_cgroup_create(const char *share, const char *id, const sr_limits *lim, sr_cgroup **out,
		     sr_error *err)
{
	if (share && !sr_cgroup_share_name_ok(share))
		return sr_refuse(err, EINVAL, "cgroup share \"%.80s\" is not a share's name",
				 share);
	sr_cgroup *cg = calloc(1, sizeof *cg);
	if (!cg)
		return sr_fail(err, ENOMEM, "allocate cgroup");
	cg->fd = -1;
	cg->in_share = share != NULL;
	cg->mode = sr_cgroup_detect();
	if (cg->mode == SR_CGROUP_NONE) {
		free(cg);
		return sr_refuse(
		    err, ENOENT,
		    "no cgroup hierarchy is mounted (mount cgroup2 on /sys/fs/cgroup)");
	}
	for (int r = 0; r < R_COUNT; r++) {
		if (cg->mode == SR_CGROUP_V2 && r > 0) {
			cg->dir[r] = strdup(cg->dir[0]);
			cg->parent[r] = strdup(cg->parent[0]);
			continue;
		}
		if (make_group(cg, r, share, id, err))
			goto fail;
	}
	if (!cg->dir[R_FREEZER] && cg->mode != SR_CGROUP_V2) {
		sr_refuse(
		    err, ENOENT,
		    "the v1 freezer controller is not mounted; saferun needs it to kill a sandbox");
		goto fail;
	}
	if (ops(cg)->apply_limits(cg, lim, err))
		goto fail;
	if (cg->mode == SR_CGROUP_V2) {
		cg->fd = open(cg->dir[R_MEMORY], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (cg->fd < 0) {
			sr_fail(err, errno, "open %s", cg->dir[R_MEMORY]);
			goto fail;
		}
	}
	*out = cg;
	return 0;
fail:
	sr_cgroup_destroy(cg, NULL);
	return -1;
}

sr_cgroup_mode sr_cgroup_get_mode(const sr_cgroup *cg)
{
	return cg->mode;
}

int sr_cgroup_set_limits(sr_cgroup *cg, const sr_limits *lim, sr_error *err)
{
	return ops(cg)->apply_limits(cg, lim, err);
}

int sr_cgroup_fd(const sr_cgroup *cg)
{
	return cg->fd;
}

int sr_cgroup_attach(sr_cgroup *cg, pid_t pid, sr_error *err)
{
	char path[PATH_MAX], v[32];
	snprintf(v, sizeof v, "%d", pid);
	for (int r = 0; r < R_COUNT; r++) {
		if (!first_of_dir(cg, r))
			continue;
		snprintf(path, sizeof path, "%s/cgroup.procs", cg->dir[r]);
		int rc = sr_write_file(path, v);
		if (rc < 0)
			return sr_fail(err, -rc, "move sandbox process %d into %s", pid,
				       cg->dir[r]);
	}
	return 0;
}

int sr_cgroup_open_join_fds(sr_cgroup *cg, int fds[SR_CGROUP_MAX_FDS], bool v2_too, sr_error *err)
{
	int n = 0;
	if (cg->mode == SR_CGROUP_V2 && !v2_too)
		return 0;
	for (int r = 0; r < R_COUNT && n < SR_CGROUP_MAX_FDS; r++) {
		if (!first_of_dir(cg, r))
			continue;
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/%s", cg->dir[r],
			 cg->mode == SR_CGROUP_V2 ? "cgroup.procs" : "tasks");
		fds[n] = open(path, O_WRONLY | O_CLOEXEC);
		if (fds[n] < 0) {
			sr_fail(err, errno, "open %s", path);
			while (n > 0)
				close(fds[--n]);
			return -1;
		}
		n++;
	}
	return n;
}

int sr_cgroup_count_procs(sr_cgroup *cg)
{
	char path[PATH_MAX], buf[65536];
	int n = 0;
	for (int r = 0; r < R_COUNT; r++) {
		if (!first_of_dir(cg, r))
			continue;
		snprintf(path, sizeof path, "%s/cgroup.procs", cg->dir[r]);
		ssize_t len = sr_read_file(path, buf, sizeof buf);
		int c = 0;
		for (ssize_t i = 0; i < len; i++)
			c += buf[i] == '\n';
		n = c > n ? c : n;
	}
	return n;
}

int sr_cgroup_kill(sr_cgroup *cg, sr_error *err)
{
	/* Bounded: 2 s of 1 ms steps. Killed tasks leave the group as soon
	 * as they exit, even before they are reaped. */
	for (int i = 0; i < 2000; i++) {
		if (sr_cgroup_count_procs(cg) == 0)
			return 0;
		if (i % 50 == 0)
			ops(cg)->kill_all(cg);
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
	const char *dir = cg->dir[R_PIDS] ? cg->dir[R_PIDS] : cg->dir[R_MEMORY];
	return sr_fail(err, EBUSY, "processes of sandbox cgroup %s did not die", dir ? dir : "?");
}

int sr_cgroup_freeze(sr_cgroup *cg, bool frozen, sr_error *err)
{
	/* The same switch on both: v2's cgroup.freeze, v1's freezer.state. */
	static const struct {
		int role;
		const char *file, *on, *off;
	} knob[] = { { R_MEMORY, "cgroup.freeze", "1", "0" },
		     { R_FREEZER, "freezer.state", "FROZEN", "THAWED" } };
	int v = cg->mode == SR_CGROUP_V2 ? 0 : 1;
	char path[PATH_MAX];
	if (!cg->dir[knob[v].role])
		return sr_refuse(err, ENOENT, "sandbox cgroup has no %s", knob[v].file);
	snprintf(path, sizeof path, "%s/%s", cg->dir[knob[v].role], knob[v].file);
	const char *value = frozen ? knob[v].on : knob[v].off;
	int rc = sr_write_file(path, value);
	if (rc < 0)
		return sr_fail(err, -rc, "write %s \"%s\"", path, value);
	if (!frozen || (v ? v1_wait_frozen(path, SR_CGROUP_FREEZE_WAIT_MS)
			  : v2_wait_frozen(cg->dir[R_MEMORY], SR_CGROUP_FREEZE_WAIT_MS)))
		return 0;
	/* Half frozen is neither: the caller decides (end it, or let it run). */
	sr_write_file(path, knob[v].off);
	return sr_fail(err, ETIMEDOUT,
		       "freeze sandbox cgroup %s: not frozen after %d ms (a task in "
		       "uninterruptible sleep?); thawed again",
		       cg->dir[knob[v].role], SR_CGROUP_FREEZE_WAIT_MS);
}

int sr_cgroup_read_stats(sr_cgroup *cg, sr_cgroup_stats *st)
{
	memset(st, 0, sizeof *st);
	ops(cg)->read_stats(cg, st);
	return 0;
}

int sr_cgroup_destroy(sr_cgroup *cg, sr_error *err)
{
	if (!cg)
		return 0;
	int rc = 0;
	if (sr_cgroup_kill(cg, err))
		rc = -1;
	if (cg->fd >= 0)
		close(cg->fd);
	for (int r = R_COUNT - 1; r >= 0; r--) {
		if (first_of_dir(cg, r)) {
			if (rmdir(cg->dir[r]) < 0 && errno != ENOENT && rc == 0)
				rc = sr_fail(err, errno, "remove cgroup %s", cg->dir[r]);
			/* The shared parent goes when the last sandbox leaves it;
			 * a share group stays for its owner's next runs. */
			if (cg->parent[r] && !cg->in_share)
				rmdir(cg->parent[r]);
		}
	}
	for (int r = 0; r < R_COUNT; r++) {
		free(cg->dir[r]);
		free(cg->parent[r]);
	}
	free(cg);
	return rc;
}

/* Move every process of the group from one dir to another. */
static int move_procs(const char *from, const char *to, sr_error *err)
{
	char path[PATH_MAX], buf[4096];
	snprintf(path, sizeof path, "%s/cgroup.procs", from);
	ssize_t n = sr_read_file(path, buf, sizeof buf);
	if (n < 0)
		return sr_fail(err, (int)-n, "read %s", path);
	snprintf(path, sizeof path, "%s/cgroup.procs", to);
	for (char *p = buf, *end; *p; p = end + (*end == '\n')) {
		long pid = strtol(p, &end, 10);
		if (end == p)
			break;
		char v[32];
		snprintf(v, sizeof v, "%ld", pid);
		int rc = sr_write_file(path, v);
		if (rc < 0 && rc != -ESRCH)
			return sr_fail(err, -rc, "move process %ld into %s", pid, to);
	}
	return 0;
}

int sr_cgroup_move_to_share(sr_cgroup **cg, const char *share, const char *id, const sr_limits *lim,
			    sr_error *err)
{
	sr_cgroup *old = *cg, *moved = NULL;
	if (sr_cgroup_create(share, id, lim, &moved, err))
		return -1;
	for (int r = 0; r < R_COUNT; r++)
		if (first_of_dir(old, r) && moved->dir[r] &&
		    move_procs(old->dir[r], moved->dir[r], err)) {
			sr_cgroup_destroy(moved, NULL); /* kills what moved: the caller's
							   sandbox is spent */
			return -1;
		}
	*cg = moved;
	sr_cgroup_destroy(old, NULL); /* empty now */
	return 0;
}

/* ---- share groups: one per tenant of a daemon -------------------------- */

bool sr_cgroup_share_name_ok(const char *name)
{
	size_t n = strlen(name);
	return n > 0 && n <= 80 && strncmp(name, "sr-", 3) != 0 && strcmp(name, ".") != 0 &&
	       strcmp(name, "..") != 0 &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
		   n;
}

/* v1's cpu.shares for a v2 cpu.weight: 100 is the default 1024 of both. */
static unsigned v1_shares(unsigned weight)
{
	unsigned shares = weight * 1024u / 100u;
	return shares < 2 ? 2 : shares;
}

/* own/saferun/name in one hierarchy, with its CPU weight. */
static int make_share(sr_cgroup_mode mode, int r, const char *own, const char *name,
		      unsigned weight, sr_error *err)
{
	char top[PATH_MAX], dir[PATH_MAX], v[32];
	snprintf(top, sizeof top, "%s/" SR_CGROUP_PARENT, own);
	if ((size_t)snprintf(dir, sizeof dir, "%s/%s", top, name) >= sizeof dir)
		return sr_fail(err, ENAMETOOLONG, "cgroup path %s/%s", top, name);
	bool v2 = mode == SR_CGROUP_V2;
	if (v2 && v2_delegate(own, true, err))
		return -1;
	/* The last sandbox of the top group may remove it between our
	 * mkdirs: again, a few times. */
	int tries = 0;
	for (;; tries++) {
		if (mkdir(top, 0755) < 0 && errno != EEXIST)
			return sr_fail(err, errno, "create cgroup %s", top);
		sr_error e = { 0 };
		if (v2 && v2_delegate(top, false, &e) && !(e.errnum == ENOENT && tries < 5)) {
			if (err)
				*err = e;
			return -1;
		}
		if (e.errnum == 0 && (mkdir(dir, 0755) == 0 || errno == EEXIST))
			break;
		if ((e.errnum == 0 && errno != ENOENT) || tries >= 5)
			return sr_fail(err, e.errnum ? e.errnum : errno, "create cgroup %s", dir);
	}
	if (v2) {
		snprintf(v, sizeof v, "%u", weight);
		return v2_delegate(dir, false, err) || write_in(dir, "cpu.weight", v, err) ? -1 : 0;
	}
	if (r != R_CPU)
		return 0;
	snprintf(v, sizeof v, "%u", v1_shares(weight));
	return write_in(dir, "cpu.shares", v, err);
}

int sr_cgroup_share_create(const char *name, unsigned weight, sr_error *err)
{
	if (!sr_cgroup_share_name_ok(name))
		return sr_refuse(err, EINVAL,
				 "cgroup share \"%.80s\": use 1 to 80 of A-Z a-z 0-9 _ . -, "
				 "not starting with \"sr-\"",
				 name);
	if (weight < 1 || weight > SR_CGROUP_WEIGHT_MAX)
		return sr_refuse(err, EINVAL, "cgroup share \"%s\": weight %u is not from 1 to %u",
				 name, weight, SR_CGROUP_WEIGHT_MAX);
	sr_cgroup_mode mode = sr_cgroup_detect();
	if (mode == SR_CGROUP_NONE)
		return sr_refuse(
		    err, ENOENT,
		    "no cgroup hierarchy is mounted (mount cgroup2 on /sys/fs/cgroup)");
	for (int r = 0; r < R_COUNT; r++) {
		cleanup_free char *own = sr_cgroup_own_dir(mode, role_controller[r]);
		if (!own && (r == R_FREEZER || r == R_CPUACCT))
			continue;
		if (!own)
			return sr_fail(err, ENOENT, "find the %s cgroup saferun runs in",
				       role_controller[r]);
		if (make_share(mode, r, own, name, weight, err))
			return -1;
		if (mode == SR_CGROUP_V2)
			break; /* one hierarchy */
	}
	return 0;
}

/* ---- leftovers of a previous instance ------------------------------------- */

/* The group `id` below saferun's parent in each hierarchy, as far as it
 * still exists, so sr_cgroup_destroy can kill and remove it. */
static sr_cgroup *stale_group(sr_cgroup_mode mode, const char *id)
{
	sr_cgroup *cg = calloc(1, sizeof *cg);
	if (!cg)
		return NULL;
	cg->mode = mode;
	cg->fd = -1;
	for (int r = 0; r < R_COUNT; r++) {
		char *own = sr_cgroup_own_dir(mode, role_controller[r]);
		struct stat st;
		if (own && asprintf(&cg->parent[r], "%s/" SR_CGROUP_PARENT, own) >= 0 &&
		    asprintf(&cg->dir[r], "%s/%s", cg->parent[r], id) >= 0 &&
		    (stat(cg->dir[r], &st) < 0 || !S_ISDIR(st.st_mode))) {
			free(cg->dir[r]);
			cg->dir[r] = NULL;
		}
		free(own);
		if (mode == SR_CGROUP_V2)
			break; /* one hierarchy: role 0 stands for all */
	}
	return cg;
}

/* Names of the groups below one parent dir. */
static int list_groups(const char *parent, char ***names, size_t *n)
{
	DIR *d = opendir(parent);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	int rc = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		char **grown = realloc(*names, (*n + 1) * sizeof **names);
		if (!grown || !(grown[*n] = strdup(e->d_name))) {
			*names = grown ? grown : *names;
			rc = -ENOMEM;
			break;
		}
		*names = grown;
		(*n)++;
	}
	closedir(d);
	return rc;
}

/* Kill and remove every group below parent/sub ("" or a share's name),
 * the groups in a share before the share; returns how many sandbox groups
 * (shares are not leftovers: their owner makes them again). */
static int cleanup_parent(sr_cgroup_mode mode, const char *parent, const char *sub, sr_error *err)
{
	char **names = NULL, dir[PATH_MAX], rel[PATH_MAX];
	size_t n = 0;
	snprintf(dir, sizeof dir, "%s%s%s", parent, *sub ? "/" : "", sub);
	int rc = list_groups(dir, &names, &n), removed = 0;
	if (rc < 0)
		sr_fail(err, -rc, "list stale sandbox groups in %s", dir);
	for (size_t i = 0; i < n; i++) {
		snprintf(rel, sizeof rel, "%s%s%s", sub, *sub ? "/" : "", names[i]);
		bool share = !*sub && sr_cgroup_share_name_ok(names[i]);
		int below = share ? cleanup_parent(mode, parent, names[i], rc < 0 ? NULL : err) : 0;
		sr_cgroup *cg = stale_group(mode, rel);
		if (below < 0)
			rc = -1;
		removed += below > 0 ? below : 0;
		if (!cg)
			rc = sr_fail(err, ENOMEM, "stale sandbox group %s", rel);
		else if (sr_cgroup_destroy(cg, rc < 0 ? NULL : err) < 0)
			rc = -1; /* the first error is the one reported */
		else
			removed += !share;
		free(names[i]);
	}
	free(names);
	return rc < 0 ? -1 : removed;
}

int sr_cleanup_stale(sr_error *err)
{
	sr_cgroup_mode mode = sr_cgroup_detect();
	int removed = 0, failed = 0;
	for (int r = 0; mode != SR_CGROUP_NONE && r < R_COUNT; r++) {
		char *own = sr_cgroup_own_dir(mode, role_controller[r]), *parent = NULL;
		/* Destroying a group removes it from every hierarchy, so the
		 * later hierarchies list only what is left. */
		if (own && asprintf(&parent, "%s/" SR_CGROUP_PARENT, own) >= 0) {
			int n = cleanup_parent(mode, parent, "", failed ? NULL : err);
			failed |= n < 0;
			removed += n > 0 ? n : 0;
		}
		free(parent);
		free(own);
		if (mode == SR_CGROUP_V2)
			break; /* one hierarchy */
	}
	return failed ? -1 : removed;
}

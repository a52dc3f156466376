/* sr_cgroup_kill on its own, with no sandbox around it, for test_cgroup.py.
 *
 * In a real run the supervisor SIGKILLs the sandbox's pid 1 and the pid
 * namespace's teardown takes the rest with it, so a timeout never shows
 * whether the cgroup kill itself works. Here there is no pid namespace: the
 * group holds ordinary host processes, each ignoring or blocking every
 * signal it can, that no kill of one process, process group or session
 * reaches all of:
 *   - a double-forked daemon and its child, in a session of their own;
 *   - two processes in two process groups of their own;
 *   - a stopped process;
 *   - a fork bomb that stays at pids.max while its pids change all the
 *     time, so a list read from cgroup.procs is stale at once;
 *   - v2 with cgroup.kill (5.14+): a process in a group nested below the
 *     sandbox's. cgroup.kill ends a whole subtree; the freeze + kill
 *     fallback signals only the pids in the group's own cgroup.procs, so
 *     this one dies only if cgroup.kill was written.
 * On v1 a thread watches the group's freezer.state during the kill and must
 * see it FREEZING or FROZEN, else the freezer was never used. (A plain kill
 * loop over cgroup.procs, 50 ms apart, does end even that fork bomb within a
 * few rounds on a 2-CPU machine: only the watch tells the two apart.) The
 * group gets a tenth of a CPU, so the bomb keeps it throttled most of the
 * time and a freeze waits for the next period: tens of milliseconds of
 * FREEZING that the watcher cannot miss even on a loaded machine.
 * The driver is a subreaper that ignores SIGCHLD, so whatever is orphaned
 * comes to it and the kernel reaps it: no zombie holds a pids slot.
 *
 * usage: cgroup_driver kill [PIDS [CPU_MILLIS]]   (pids.max 48, 0.1 CPU)
 *        cgroup_driver share WEIGHT   (share_main, below)
 *        cgroup_driver freeze ROUNDS  (freeze_main, below)
 * Prints one JSON object with what it found; test_cgroup.py checks it. Exit 0
 * unless the set-up itself failed (exit 1, the reason on stderr). Whatever
 * happens, it kills what it started and removes the group before exiting. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "box/box.h"
#include "saferun.h"

#define MAX_MEMBERS 16
#define NESTED      "nested"

static int report_w = -1;    /* members write their pid here */
static int saturated_w = -1; /* the fork bomb writes a byte when it hits pids.max */
static char prefix[16];      /* "sgNNNNN-": every member's comm starts with it */

struct member {
	pid_t pid;
	char role[16];
	int pidfd;
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void name_self(const char *role)
{
	char name[16];
	snprintf(name, sizeof name, "%s%s", prefix, role);
	prctl(PR_SET_NAME, name);
}

/* Ignore every signal that can be ignored (SIGCHLD too: children are
 * reaped by the kernel) and block the rest that can be blocked. */
static void stubborn(const char *role)
{
	name_self(role);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_IGN);
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
}

/* "pid role" on the report pipe (one write, atomic below PIPE_BUF). */
static void report(const char *role)
{
	char line[64];
	int n = snprintf(line, sizeof line, "%d %s\n", (int)getpid(), role);
	if (write(report_w, line, (size_t)n) != n)
		_exit(3);
}

static void idle(void)
{
	for (;;)
		pause();
}

static void daemon_body(void)
{
	if (fork() != 0)
		_exit(0); /* the daemon is orphaned at once */
	setsid();
	stubborn("daemon");
	if (fork() == 0) {
		name_self("daemon2");
		report("daemon2");
		idle();
	}
	report("daemon");
	idle();
}

static void pgroups_body(void)
{
	setpgid(0, 0);
	stubborn("pgrp");
	if (fork() == 0) {
		setpgid(0, 0);
		name_self("pgrp2");
		report("pgrp2");
		idle();
	}
	report("pgrp");
	idle();
}

static void stopped_body(void)
{
	stubborn("stopped");
	report("stopped");
	raise(SIGSTOP);
	idle();
}

/* The bomb's root idles; below it every process forks as fast as it can
 * and exits when a fork fails at pids.max. So the group stays full while its
 * pids change all the time (each failed fork frees a slot that another
 * fork takes at once), and a list of them read from cgroup.procs is stale
 * before the kills land. */
static void bomb_body(void)
{
	stubborn("bomb");
	report("bomb");
	if (fork() == 0) {
		name_self("churn");
		for (;;)
			if (fork() < 0) {
				(void)!write(saturated_w, "s", 1);
				_exit(0);
			}
	}
	idle();
}

static void plain_body(void)
{
	stubborn("nested");
	report("nested");
	idle();
}

/* Fork a member that waits until it has been put in its group (by `join`)
 * and then runs body. */
static int spawn(void (*body)(void), int (*join)(pid_t, void *), void *arg)
{
	int go[2];
	if (pipe2(go, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(go[1]);
		char c;
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		close(go[0]);
		body();
		_exit(0);
	}
	close(go[0]);
	int rc = join(pid, arg);
	if (rc == 0 && write(go[1], "g", 1) != 1)
		rc = -1;
	close(go[1]);
	if (rc)
		kill(pid, SIGKILL);
	return rc;
}

static int join_group(pid_t pid, void *arg)
{
	sr_error err = { 0 };
	if (sr_cgroup_attach(arg, pid, &err)) {
		fprintf(stderr, "attach %d: %s\n", (int)pid, err.msg);
		return -1;
	}
	return 0;
}

static int join_nested(pid_t pid, void *arg)
{
	int dirfd = *(int *)arg;
	int fd = openat(dirfd, NESTED "/cgroup.procs", O_WRONLY | O_CLOEXEC);
	char v[32];
	int n = snprintf(v, sizeof v, "%d", (int)pid);
	bool ok = fd >= 0 && write(fd, v, (size_t)n) == n;
	if (!ok)
		perror("move into " NESTED);
	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* Read "pid role" lines until want members have reported (10 s at most). */
static int collect(int report_r, struct member *m, int want)
{
	static char buf[4096];
	static size_t len;
	int have = 0;
	uint64_t end = now_ms() + 10000;
	while (have < want && now_ms() < end) {
		struct pollfd p = { .fd = report_r, .events = POLLIN };
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t n = read(report_r, buf + len, sizeof buf - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		char *nl;
		while (have < want && (nl = strchr(buf, '\n'))) {
			*nl = '\0';
			int pid;
			if (sscanf(buf, "%d %15s", &pid, m[have].role) == 2) {
				m[have].pid = pid;
				m[have].pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
				have++;
			}
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len + 1);
		}
	}
	return have;
}

/* Field 3 (state), 5 (pgrp) and 6 (session) of /proc/PID/stat. */
static int proc_stat(pid_t pid, char *state, int *pgrp, int *sid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	int ppid;
	if (!p || sscanf(p + 1, " %c %d %d %d", state, &ppid, pgrp, sid) != 4)
		return -1;
	return 0;
}

static bool dead(const struct member *m, int wait_ms)
{
	struct pollfd p = { .fd = m->pidfd, .events = POLLIN };
	return m->pidfd >= 0 && poll(&p, 1, wait_ms) == 1;
}

/* Live (not zombie) processes named with our prefix, anywhere on the host;
 * with kill_them, SIGKILL them. */
static int live_named(bool kill_them)
{
	DIR *d = opendir("/proc");
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d));) {
		char path[300], comm[32] = "";
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/comm", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t len = read(fd, comm, sizeof comm - 1);
		close(fd);
		if (len <= 0 || strncmp(comm, prefix, strlen(prefix)) != 0)
			continue;
		char state;
		int pg, sid;
		if (proc_stat(atoi(e->d_name), &state, &pg, &sid) == 0 && state != 'Z' &&
		    state != 'X') {
			n++;
			if (kill_them)
				kill(atoi(e->d_name), SIGKILL);
		}
	}
	if (d)
		closedir(d);
	return n;
}

/* v1: watch the group's freezer.state while sr_cgroup_kill runs, to see
 * that it froze the group before killing (a plain kill loop would not). */
struct watch {
	int fd;
	atomic_bool stop;
	bool seen_frozen;
	atomic_long reads;
};

static void *watch_freezer(void *arg)
{
	struct watch *w = arg;
	char buf[32];
	/* At nice -20 it keeps its CPU on a loaded machine. */
	setpriority(PRIO_PROCESS, (id_t)gettid(), -20);
	while (!atomic_load(&w->stop)) {
		ssize_t n = pread(w->fd, buf, sizeof buf - 1, 0);
		atomic_fetch_add(&w->reads, 1);
		if (n > 0 && strncmp(buf, "THAWED", 6) != 0)
			w->seen_frozen = true; /* FREEZING or FROZEN */
	}
	return NULL;
}

static int count_distinct(const int *v, int n)
{
	int c = 0;
	for (int i = 0; i < n; i++) {
		bool seen = false;
		for (int j = 0; j < i; j++)
			seen = seen || v[j] == v[i];
		c += !seen;
	}
	return c;
}

/* Does /proc/PID/cgroup put pid's CPU hierarchy (v2: the one line) in
 * the group at path (".../saferun/SHARE/ID")? */
static bool cpu_line_has(pid_t pid, bool v2, const char *path)
{
	char file[64], line[1024];
	snprintf(file, sizeof file, "/proc/%d/cgroup", (int)pid);
	FILE *f = fopen(file, "re");
	bool found = false;
	while (f && !found && fgets(line, sizeof line, f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		bool cpu = v2 && c1 == line + 1 && line[0] == '0'; /* "0::PATH" */
		for (char *save, *t = v2 ? NULL : strtok_r(c1 + 1, ",", &save); t;
		     t = strtok_r(NULL, ",", &save))
			cpu = cpu || strcmp(t, "cpu") == 0;
		found = cpu && strstr(c2 + 1, path) != NULL;
	}
	if (f)
		fclose(f);
	return found;
}

/* cgroup_driver share WEIGHT: a share group (sr_cgroup_share_create), made
 * twice (the second keeps it), with a sandbox group in it holding a child.
 * Prints one JSON line: the CPU weight knob and its value, whether the
 * child's CPU hierarchy is that group, whether the share outlived the
 * sandbox group, and whether bad names and weights were refused (EINVAL).
 * Then it removes the share. */
static int share_main(unsigned weight)
{
	char name[64], id[64], path[192];
	snprintf(name, sizeof name, "srtest-share-%d", (int)getpid());
	snprintf(id, sizeof id, "sr-share-%d", (int)getpid());
	snprintf(path, sizeof path, "/saferun/%s/%s\n", name, id);
	sr_error err = { 0 }, bad_name = { 0 }, bad_weight = { 0 };
	sr_cgroup_share_create("sr-x", 100, &bad_name);
	sr_cgroup_share_create(name, 0, &bad_weight);
	sr_limits lim = {
		.wall_ms = 20000, .cpu_millis = 100, .memory_bytes = 64u << 20, .pids = 8
	};
	sr_cgroup *cg = NULL;
	if (sr_cgroup_share_create(name, weight, &err) ||
	    sr_cgroup_share_create(name, weight, &err) ||
	    sr_cgroup_create(name, id, &lim, &cg, &err)) {
		fprintf(stderr, "share: %s\n", err.msg);
		return 1;
	}
	sr_cgroup_mode mode = sr_cgroup_get_mode(cg);
	bool v2 = mode == SR_CGROUP_V2;
	char *cpu = sr_cgroup_own_dir(mode, "cpu"), knob[PATH_MAX], value[32] = "0";
	snprintf(knob, sizeof knob, "%s/saferun/%s/%s", cpu ? cpu : "?", name,
		 v2 ? "cpu.weight" : "cpu.shares");
	FILE *f = fopen(knob, "re");
	if (!f || !fgets(value, sizeof value, f))
		snprintf(value, sizeof value, "0");
	if (f)
		fclose(f);
	value[strcspn(value, "\n")] = '\0';
	pid_t child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	bool in_group =
	    child > 0 && sr_cgroup_attach(cg, child, &err) == 0 && cpu_line_has(child, v2, path);
	sr_cgroup_destroy(cg, NULL); /* kills the child */
	struct stat st;
	*strrchr(knob, '/') = '\0';
	bool kept = stat(knob, &st) == 0;
	const char *ctl[] = { "memory", "cpu", "cpuacct", "pids", "freezer" };
	for (size_t i = 0; i < (v2 ? 1 : 5); i++) {
		char *own = sr_cgroup_own_dir(mode, ctl[i]), dir[PATH_MAX];
		if (!own)
			continue;
		snprintf(dir, sizeof dir, "%s/saferun/%s", own, name);
		rmdir(dir);
		*strrchr(dir, '/') = '\0';
		rmdir(dir); /* fails while other runs use it */
		free(own);
	}
	printf("{\"mode\": \"%s\", \"knob\": \"%s\", \"value\": %s, \"in_group\": %s, "
	       "\"share_kept\": %s, \"share_removed\": %s, \"bad_name\": %d, "
	       "\"bad_weight\": %d}\n",
	       sr_cgroup_mode_name(mode), v2 ? "cpu.weight" : "cpu.shares", value,
	       in_group ? "true" : "false", kept ? "true" : "false",
	       stat(knob, &st) < 0 ? "true" : "false", bad_name.errnum, bad_weight.errnum);
	free(cpu);
	return 0;
}

/* freeze: busy multi-threaded processes in a group throttled to a tenth
 * of a CPU, frozen and thawed ROUNDS times; right after each
 * sr_cgroup_freeze returns, the kernel's own word on the group (v1
 * freezer.state, v2 cgroup.events "frozen") must be frozen. A throttled
 * group's freeze waits for its next CPU period: without the wait it reads
 * FREEZING (frozen 0) for tens of milliseconds. */
#define SPINNERS     3
#define SPIN_THREADS 6

static void *spin(void *arg)
{
	volatile unsigned long *n = arg;
	for (;;)
		(*n)++;
	return NULL;
}

static void spinner_body(void)
{
	name_self("spin");
	/* Reported before its threads start: in a group throttled to 0.1 CPU
	 * that other spinners already fill, making five threads can take a
	 * slow machine (the VM tier's emulated guest) longer than collect's
	 * 10 s. The rounds' freezes then find them starting or spinning. */
	report("spin");
	static unsigned long counts[SPIN_THREADS];
	for (int i = 1; i < SPIN_THREADS; i++) {
		pthread_t t;
		pthread_create(&t, NULL, spin, &counts[i]);
	}
	spin(&counts[0]);
}

static bool group_frozen(sr_cgroup_mode mode, const char *id)
{
	bool v2 = mode == SR_CGROUP_V2;
	char *own = sr_cgroup_own_dir(mode, v2 ? "memory" : "freezer"), path[4096], buf[256] = "";
	snprintf(path, sizeof path, "%s/saferun/%s/%s", own ? own : "?", id,
		 v2 ? "cgroup.events" : "freezer.state");
	free(own);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	const char *f = strstr(buf, "frozen ");
	return v2 ? f && f[strlen("frozen ")] == '1' : strncmp(buf, "FROZEN", 6) == 0;
}

static int freeze_main(int rounds)
{
	snprintf(prefix, sizeof prefix, "sf%05d-", (int)(getpid() % 100000));
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signal(SIGCHLD, SIG_IGN);
	int rep[2];
	if (pipe2(rep, O_CLOEXEC) < 0) {
		perror("pipe");
		return 1;
	}
	report_w = rep[1];
	char id[64];
	snprintf(id, sizeof id, "srcg-freeze-%d", (int)getpid());
	sr_limits lim = {
		.wall_ms = 20000, .cpu_millis = 100, .memory_bytes = 256u << 20, .pids = 64
	};
	sr_cgroup *cg = NULL;
	sr_error err = { 0 };
	if (sr_cgroup_create(NULL, id, &lim, &cg, &err)) {
		fprintf(stderr, "create: %s\n", err.msg);
		return 1;
	}
	sr_cgroup_mode mode = sr_cgroup_get_mode(cg);
	struct member m[SPINNERS];
	int rc = 0;
	for (int i = 0; i < SPINNERS && rc == 0; i++)
		rc = spawn(spinner_body, join_group, cg);
	close(rep[1]);
	int have = rc == 0 ? collect(rep[0], m, SPINNERS) : 0;
	int frozen_at_return = 0, errors = 0;
	uint64_t max_ms = 0;
	char first_error[256] = "";
	for (int r = 0; have == SPINNERS && r < rounds; r++) {
		/* running again, with CPU to spend in this period */
		nanosleep(&(struct timespec){ .tv_nsec = 30 * 1000000 }, NULL);
		uint64_t t0 = now_ms();
		sr_error ferr = { 0 };
		if (sr_cgroup_freeze(cg, true, &ferr) < 0) {
			errors++;
			if (!first_error[0])
				snprintf(first_error, sizeof first_error, "%s", ferr.msg);
		} else {
			frozen_at_return += group_frozen(mode, id);
		}
		uint64_t ms = now_ms() - t0;
		max_ms = ms > max_ms ? ms : max_ms;
		if (sr_cgroup_freeze(cg, false, &ferr) < 0 && !first_error[0])
			snprintf(first_error, sizeof first_error, "thaw: %s", ferr.msg);
	}
	bool thawed = !group_frozen(mode, id);
	sr_error derr = { 0 };
	int destroy_rc = sr_cgroup_destroy(cg, &derr);
	for (int tries = 0; tries < 200 && live_named(true); tries++)
		nanosleep(&(struct timespec){ .tv_nsec = 5 * 1000000 }, NULL);
	for (char *c = first_error; *c; c++)
		*c = *c == '"' || *c == '\\' ? '\'' : *c;
	printf("{\"mode\": \"%s\", \"members\": %d, \"rounds\": %d, \"frozen_at_return\": %d, "
	       "\"errors\": %d, \"first_error\": \"%s\", \"max_freeze_ms\": %llu, "
	       "\"thawed\": %s, \"destroy_rc\": %d}\n",
	       sr_cgroup_mode_name(mode), have, rounds, frozen_at_return, errors, first_error,
	       (unsigned long long)max_ms, thawed ? "true" : "false", destroy_rc);
	return rc == 0 && have == SPINNERS ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "share") == 0)
		return share_main((unsigned)atoi(argv[2]));
	if (argc == 3 && strcmp(argv[1], "freeze") == 0)
		return freeze_main(atoi(argv[2]));
	if (argc < 2 || argc > 4 || strcmp(argv[1], "kill") != 0) {
		fprintf(stderr, "usage: cgroup_driver kill [PIDS [CPU_MILLIS]] | share WEIGHT | "
				"freeze ROUNDS\n");
		return 2;
	}
	snprintf(prefix, sizeof prefix, "sg%05d-", (int)(getpid() % 100000));
	/* Orphans come to us and the kernel reaps them: no zombie keeps a
	 * pids slot, nothing is left unreaped when we exit. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signal(SIGCHLD, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);

	int rep[2], sat[2];
	if (pipe2(rep, O_CLOEXEC) < 0 || pipe2(sat, O_CLOEXEC | O_NONBLOCK) < 0) {
		perror("pipe");
		return 1;
	}
	char id[64];
	snprintf(id, sizeof id, "srcg-kill-%d", (int)getpid());
	sr_limits lim = { .wall_ms = 20000,
			  .cpu_millis = argc > 3 ? (uint32_t)atoi(argv[3]) : 100,
			  .memory_bytes = 256u << 20,
			  .swap_bytes = 0,
			  .pids = argc > 2 ? (uint32_t)atoi(argv[2]) : 48 };
	sr_cgroup *cg = NULL;
	sr_error err = { 0 };
	if (sr_cgroup_create(NULL, id, &lim, &cg, &err)) {
		fprintf(stderr, "create: %s\n", err.msg);
		return 1;
	}
	sr_cgroup_mode mode = sr_cgroup_get_mode(cg);
	int cgfd = sr_cgroup_fd(cg); /* v2 only */
	bool v2 = mode == SR_CGROUP_V2;
	bool has_cgroup_kill = v2 && faccessat(cgfd, "cgroup.kill", F_OK, 0) == 0;
	/* Before 5.14 (no cgroup.kill) the fallback ends only the group's own
	 * processes; a sandbox cannot make groups, so that is all it needs. */
	bool nested = has_cgroup_kill && mkdirat(cgfd, NESTED, 0755) == 0;
	if (has_cgroup_kill && !nested)
		perror("mkdir " NESTED);

	report_w = rep[1];
	saturated_w = sat[1];

	struct member m[MAX_MEMBERS];
	int want = 0, rc = 0;
	struct {
		void (*body)(void);
		int n; /* processes it reports */
	} kinds[] = { { daemon_body, 2 }, { pgroups_body, 2 }, { stopped_body, 1 } };
	for (size_t i = 0; i < sizeof kinds / sizeof *kinds && rc == 0; i++) {
		rc = spawn(kinds[i].body, join_group, cg);
		want += kinds[i].n;
	}
	if (rc == 0 && nested) {
		rc = spawn(plain_body, join_nested, &cgfd);
		want++;
	}
	/* The others are in place before the bomb fills the group. */
	int have = rc == 0 ? collect(rep[0], m, want) : 0;
	if (rc == 0 && have == want) {
		rc = spawn(bomb_body, join_group, cg);
		want++;
		have += rc == 0 ? collect(rep[0], m + have, 1) : 0;
	}
	close(rep[1]);
	close(sat[1]);
	bool saturated = false;
	if (rc == 0 && have == want) {
		struct pollfd p = { .fd = sat[0], .events = POLLIN };
		saturated = poll(&p, 1, 10000) == 1;
		/* Let it churn at the limit for a moment. */
		nanosleep(&(struct timespec){ .tv_nsec = 200 * 1000000 }, NULL);
	}

	/* What the group holds before the kill. */
	int pgrps[MAX_MEMBERS], sids[MAX_MEMBERS], n_ps = 0;
	bool stopped = false, all_pidfds = true;
	for (int i = 0; i < have; i++) {
		char state;
		int pg, sid;
		if (proc_stat(m[i].pid, &state, &pg, &sid) == 0) {
			pgrps[n_ps] = pg;
			sids[n_ps++] = sid;
			stopped = stopped || (strcmp(m[i].role, "stopped") == 0 && state == 'T');
		}
		all_pidfds = all_pidfds && m[i].pidfd >= 0;
	}
	int procs_before = sr_cgroup_count_procs(cg);

	struct watch w = { .fd = -1 };
	pthread_t watcher;
	bool watching = false;
	if (!v2) {
		char *own = sr_cgroup_own_dir(mode, "freezer"), path[4096];
		snprintf(path, sizeof path, "%s/saferun/%s/freezer.state", own ? own : "?", id);
		free(own);
		w.fd = open(path, O_RDONLY | O_CLOEXEC);
		watching = w.fd >= 0 && pthread_create(&watcher, NULL, watch_freezer, &w) == 0;
		/* It is reading before the kill starts. */
		while (watching && atomic_load(&w.reads) == 0)
			sched_yield();
	}
	uint64_t t0 = now_ms();
	sr_error kerr = { 0 };
	int kill_rc = rc == 0 && have == want ? sr_cgroup_kill(cg, &kerr) : -1;
	uint64_t kill_ms = now_ms() - t0;
	if (watching) {
		atomic_store(&w.stop, true);
		pthread_join(watcher, NULL);
	}
	if (w.fd >= 0)
		close(w.fd);
	int procs_after = sr_cgroup_count_procs(cg);

	/* Dead within a second of sr_cgroup_kill returning: a task leaves
	 * cgroup.procs a moment before its pidfd reports the exit. */
	char survivors[512] = "";
	for (int i = 0; i < have; i++)
		if (!dead(&m[i], 1000))
			snprintf(survivors + strlen(survivors),
				 sizeof survivors - strlen(survivors), "%s\"%s\"",
				 survivors[0] ? ", " : "", m[i].role);
	int live = 0;
	for (uint64_t end = now_ms() + 1000; (live = live_named(false)) && now_ms() < end;)
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000000 }, NULL);
	int populated = -1;
	if (v2) {
		char ev[256] = "";
		int fd = openat(cgfd, "cgroup.events", O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, ev, sizeof ev - 1) : -1;
		if (fd >= 0)
			close(fd);
		const char *pop = n > 0 ? strstr(ev, "populated ") : NULL;
		populated = pop ? atoi(pop + strlen("populated ")) : -1;
	}

	/* Whatever survived (only if sr_cgroup_kill failed): end it and
	 * remove the group, so a failing test leaves nothing behind. */
	for (int tries = 0; tries < 200 && live_named(true); tries++)
		nanosleep(&(struct timespec){ .tv_nsec = 5 * 1000000 }, NULL);
	if (nested)
		for (int tries = 0;
		     tries < 200 && unlinkat(cgfd, NESTED, AT_REMOVEDIR) < 0 && errno == EBUSY;
		     tries++)
			nanosleep(&(struct timespec){ .tv_nsec = 5 * 1000000 }, NULL);
	sr_error derr = { 0 };
	int destroy_rc = sr_cgroup_destroy(cg, &derr);
	const char *ctrl[] = { "memory", "cpu", "cpuacct", "pids", "freezer" };
	char left[1024] = "";
	for (size_t i = 0; i < (v2 ? 1 : sizeof ctrl / sizeof *ctrl); i++) {
		char *own = sr_cgroup_own_dir(mode, ctrl[i]), path[4096];
		struct stat st;
		snprintf(path, sizeof path, "%s/saferun/%s", own ? own : "?", id);
		if (own && stat(path, &st) == 0)
			snprintf(left + strlen(left), sizeof left - strlen(left), "%s\"%s\"",
				 left[0] ? ", " : "", path);
		free(own);
	}
	for (int i = 0; i < have; i++)
		if (m[i].pidfd >= 0)
			close(m[i].pidfd);

	printf("{\"mode\": \"%s\", \"members\": %d, \"expected_members\": %d, "
	       "\"sessions\": %d, \"process_groups\": %d, \"stopped\": %s, \"pidfds\": %s, "
	       "\"bomb_at_pids_max\": %s, \"nested\": %s, \"cgroup_kill_file\": %s, "
	       "\"procs_before\": %d, \"kill_rc\": %d, \"kill_error\": \"%s\", \"kill_ms\": %llu, "
	       "\"procs_after\": %d, \"survivors\": [%s], \"live_named\": %d, "
	       "\"populated_after\": %d, \"destroy_rc\": %d, \"destroy_error\": \"%s\", "
	       "\"groups_left\": [%s], \"freezer_watched\": %s, \"freezer_seen_frozen\": %s}\n",
	       sr_cgroup_mode_name(mode), have, want, count_distinct(sids, n_ps),
	       count_distinct(pgrps, n_ps), stopped ? "true" : "false",
	       all_pidfds ? "true" : "false", saturated ? "true" : "false",
	       nested ? "true" : "false", has_cgroup_kill ? "true" : "false", procs_before, kill_rc,
	       kerr.msg, (unsigned long long)kill_ms, procs_after, survivors, live, populated,
	       destroy_rc, derr.msg, left, watching ? "true" : "false",
	       w.seen_frozen ? "true" : "false");
	return rc == 0 && have == want ? 0 : 1;
}

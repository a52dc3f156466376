#include "envd.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "connect.h"
#include "log.h"
#include "run.h"

/* The E2B user's home: what the SDK's paths start with. */
#define HOME         "/home/user"
#define MAX_WATCHERS 4   /* each an inotify instance of the daemon's (root's) */
#define MAX_WATCHES  256 /* dirs a recursive watcher follows */
#define MAX_PROCS    32  /* commands of one sandbox, running or not yet reaped */
#define MAX_LIST     10000
#define CHUNK        32768

typedef struct envd_watch {
	struct envd_watch *next;
	char id[24];
	int ifd;
	bool recursive;
	struct {
		int wd;
		char *rel; /* below the watched dir ("" for itself) */
	} dirs[MAX_WATCHES];
	size_t n_dirs;
	sr_workspace *ws;
	char *top; /* the watched dir, a workspace path */
} envd_watch;

typedef struct envd_proc {
	struct envd_proc *next;
	uint32_t pid; /* in the sandbox */
	sr_exec_proc ex;
	int in_fd, out_fd, err_fd;
	char *tag;
	cJSON *config; /* {cmd, args, envs, cwd} for List */
	bool pumping;  /* a stream is delivering its output */
} envd_proc;

struct srd_envd {
	pthread_mutex_t lock;
	srd_envd_exec_fn *exec; /* starts a command in the sandbox */
	void *exec_arg;
	envd_proc *procs;
	unsigned n_procs;
	envd_watch *watches;
	unsigned n_watches, next_watch;
};

srd_envd *srd_envd_new(srd_envd_exec_fn *exec, void *arg)
{
	srd_envd *env = calloc(1, sizeof *env);
	if (env) {
		pthread_mutex_init(&env->lock, NULL);
		env->exec = exec;
		env->exec_arg = arg;
	}
	return env;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void watch_free(envd_watch *w)
{
	close_fd(&w->ifd);
	for (size_t i = 0; i < w->n_dirs; i++)
		free(w->dirs[i].rel);
	free(w->top);
	free(w);
}

static void proc_free(envd_proc *p)
{
	if (p->ex.pidfd >= 0) {
		siginfo_t si;
		syscall(SYS_pidfd_send_signal, p->ex.pidfd, SIGKILL, NULL, 0);
		waitid((idtype_t)P_PIDFD, (id_t)p->ex.pidfd, &si, WEXITED);
		close(p->ex.pidfd);
	}
	close_fd(&p->in_fd);
	close_fd(&p->out_fd);
	close_fd(&p->err_fd);
	free(p->tag);
	cJSON_Delete(p->config);
	free(p);
}

void srd_envd_end(srd_envd *env)
{
	/* Their sandbox ends too (its pid 1 takes every process with it):
	 * this only makes sure no stream waits on one. Not reaped here: the
	 * stream that pumps one does that. */
	pthread_mutex_lock(&env->lock);
	for (envd_proc *p = env->procs; p; p = p->next)
		if (p->ex.pidfd >= 0)
			syscall(SYS_pidfd_send_signal, p->ex.pidfd, SIGKILL, NULL, 0);
	pthread_mutex_unlock(&env->lock);
}

void srd_envd_free(srd_envd *env)
{
	if (!env)
		return;
	for (envd_proc *p = env->procs, *next; p; p = next) {
		next = p->next;
		proc_free(p);
	}
	for (envd_watch *w = env->watches, *next; w; w = next) {
		next = w->next;
		watch_free(w);
	}
	pthread_mutex_destroy(&env->lock);
	free(env);
}

/* ---- paths and entries --------------------------------------------------- */

/* An SDK path as a workspace path: HOME/x, WORKDIR/x and a relative x are
 * x; HOME and WORKDIR are "" (the root). *prefix: how to show paths back. */
static int ws_path(srd_session *ss, const char *in, char *out, size_t size, const char **prefix,
		   srd_cerr *e)
{
	const char *wd = srd_session_workdir(ss);
	const char *rest = NULL;
	size_t hl = strlen(HOME), wl = strlen(wd);
	*prefix = HOME;
	if (!in)
		in = "";
	if (strncmp(in, HOME, hl) == 0 && (in[hl] == '/' || in[hl] == '\0')) {
		rest = in + hl;
	} else if (strncmp(in, wd, wl) == 0 && (in[wl] == '/' || in[wl] == '\0')) {
		rest = in + wl;
		*prefix = wd;
	} else if (in[0] != '/') {
		rest = in;
	} else {
		return srd_cfail(e, "permission_denied",
				 "path \"%.200s\" is outside the sandbox's files: only %s (the "
				 "sandbox's working dir %s) is reachable",
				 in, HOME, wd);
	}
	while (*rest == '/')
		rest++;
	size_t n = strlen(rest);
	while (n && rest[n - 1] == '/')
		n--;
	if (n >= size)
		return srd_cfail(e, "invalid_argument", "path \"%.200s\" is too long", in);
	memcpy(out, rest, n);
	out[n] = '\0';
	return 0;
}

static void show_path(char *buf, size_t size, const char *prefix, const char *rel)
{
	snprintf(buf, size, "%s%s%s", prefix, *rel ? "/" : "", rel);
}

static const char *type_name(char t)
{
	return t == 'f'   ? "FILE_TYPE_FILE"
	       : t == 'd' ? "FILE_TYPE_DIRECTORY"
	       : t == 'l' ? "FILE_TYPE_SYMLINK"
			  : "FILE_TYPE_UNSPECIFIED";
}

static void perm_string(char t, uint32_t mode, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";
	out[0] = t == 'd' ? 'd' : t == 'l' ? 'L' : '-';
	for (int i = 0; i < 9; i++)
		out[i + 1] = mode & (1u << (8 - i)) ? rwx[i] : '-';
	out[10] = '\0';
}

static cJSON *entry_json(const sr_workspace_entry *en, const char *prefix, const char *rel)
{
	char path[SR_WORKSPACE_PATH_MAX + 64], perms[11], size[24], when[40];
	show_path(path, sizeof path, prefix, rel);
	const char *slash = strrchr(path, '/');
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", slash ? slash + 1 : path);
	cJSON_AddStringToObject(j, "type", type_name(en->type));
	cJSON_AddStringToObject(j, "path", path);
	snprintf(size, sizeof size, "%llu", (unsigned long long)en->size);
	cJSON_AddStringToObject(j, "size", size);
	cJSON_AddNumberToObject(j, "mode", en->mode);
	perm_string(en->type, en->mode, perms);
	cJSON_AddStringToObject(j, "permissions", perms);
	cJSON_AddStringToObject(j, "owner", "user");
	cJSON_AddStringToObject(j, "group", "user");
	time_t s = (time_t)(en->mtime_ns / 1000000000u);
	struct tm tm;
	gmtime_r(&s, &tm);
	size_t n = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + n, sizeof when - n, ".%09lluZ",
		 (unsigned long long)(en->mtime_ns % 1000000000u));
	cJSON_AddStringToObject(j, "modifiedTime", when);
	return j;
}

/* A string field of msg ("" when absent). */
static const char *str_field(const cJSON *msg, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(msg, key);
	return cJSON_IsString(v) ? v->valuestring : "";
}

static int stat_entry(srd_session *ss, const char *rel, const char *prefix, cJSON **out,
		      srd_cerr *e)
{
	sr_workspace_entry en;
	sr_error err = { 0 };
	if (sr_workspace_stat(srd_session_workspace(ss), rel, &en, &err))
		return srd_cfail_errno(e, err.errnum, err.msg);
	*out = entry_json(&en, prefix, rel);
	return 0;
}

/* ---- filesystem.Filesystem (unary) ---------------------------------------- */

static int fs_stat(srd_session *ss, const cJSON *msg, cJSON *reply, srd_cerr *e)
{
	char rel[SR_WORKSPACE_PATH_MAX + 1];
	const char *prefix;
	cJSON *entry = NULL;
	if (ws_path(ss, str_field(msg, "path"), rel, sizeof rel, &prefix, e) ||
	    stat_entry(ss, rel, prefix, &entry, e))
		return -1;
	cJSON_AddItemToObject(reply, "entry", entry);
	return 0;
}

static int fs_make_dir(srd_session *ss, const cJSON *msg, cJSON *reply, srd_cerr *e)
{
	char rel[SR_WORKSPACE_PATH_MAX + 1];
	const char *prefix;
	sr_error err = { 0 };
	cJSON *entry = NULL;
	if (ws_path(ss, str_field(msg, "path"), rel, sizeof rel, &prefix, e))
		return -1;
	if (!*rel)
		return srd_cfail(e, "already_exists", "%s already exists", prefix);
	if (sr_workspace_mkdir(srd_session_workspace(ss), rel, &err))
		return srd_cfail_errno(e, err.errnum, err.msg);
	if (stat_entry(ss, rel, prefix, &entry, e))
		return -1;
	cJSON_AddItemToObject(reply, "entry", entry);
	return 0;
}

static int fs_move(srd_session *ss, const cJSON *msg, cJSON *reply, srd_cerr *e)
{
	char from[SR_WORKSPACE_PATH_MAX + 1], to[SR_WORKSPACE_PATH_MAX + 1];
	const char *prefix, *prefix2;
	sr_error err = { 0 };
	cJSON *entry = NULL;
	if (ws_path(ss, str_field(msg, "source"), from, sizeof from, &prefix, e) ||
	    ws_path(ss, str_field(msg, "destination"), to, sizeof to, &prefix2, e))
		return -1;
	if (!*from || !*to)
		return srd_cfail(e, "invalid_argument", "the home dir itself cannot be moved");
	if (sr_workspace_rename(srd_session_workspace(ss), from, to, &err))
		return srd_cfail_errno(e, err.errnum, err.msg);
	if (stat_entry(ss, to, prefix2, &entry, e))
		return -1;
	cJSON_AddItemToObject(reply, "entry", entry);
	return 0;
}

static int fs_remove(srd_session *ss, const cJSON *msg, cJSON *reply, srd_cerr *e)
{
	char rel[SR_WORKSPACE_PATH_MAX + 1];
	const char *prefix;
	sr_error err = { 0 };
	(void)reply;
	if (ws_path(ss, str_field(msg, "path"), rel, sizeof rel, &prefix, e))
		return -1;
	if (!*rel)
		return srd_cfail(e, "invalid_argument", "the home dir itself cannot be removed");
	if (sr_workspace_remove(srd_session_workspace(ss), rel, &err))
		return srd_cfail_errno(e, err.errnum, err.msg);
	return 0;
}

/* How deep below dir a listed path is: 1 for dir's own entries. */
static unsigned depth_below(const char *dir, const char *path)
{
	const char *p = path + strlen(dir) + (*dir ? 1 : 0);
	unsigned d = 1;
	for (; *p; p++)
		d += *p == '/';
	return d;
}

static int fs_list_dir(srd_session *ss, const cJSON *msg, cJSON *reply, srd_cerr *e)
{
	char rel[SR_WORKSPACE_PATH_MAX + 1];
	const char *prefix;
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(msg, "depth");
	double depth = cJSON_IsNumber(d) ? d->valuedouble : 1;
	if (depth < 1)
		depth = 1;
	if (ws_path(ss, str_field(msg, "path"), rel, sizeof rel, &prefix, e))
		return -1;
	sr_workspace_entry self;
	sr_error err = { 0 };
	sr_workspace *ws = srd_session_workspace(ss);
	if (sr_workspace_stat(ws, rel, &self, &err))
		return srd_cfail_errno(e, err.errnum, err.msg);
	if (self.type != 'd')
		return srd_cfail(e, "invalid_argument", "path \"%s\" is not a directory", rel);
	sr_workspace_entry *en = NULL;
	size_t n = 0;
	sr_list_cut cut;
	if (sr_workspace_list_partial(ws, rel, MAX_LIST, SR_WORKSPACE_LIST_MAX_BYTES, &en, &n, &cut,
				      &err))
		return srd_cfail_errno(e, err.errnum, err.msg);
	cJSON *arr = cJSON_AddArrayToObject(reply, "entries");
	for (size_t i = 0; i < n; i++)
		if (depth_below(rel, en[i].path) <= depth)
			cJSON_AddItemToArray(arr, entry_json(&en[i], prefix, en[i].path));
	sr_workspace_entries_free(en, n);
	return 0;
}

/* Keepalive-Ping-Interval (seconds): how often a quiet stream sends a
 * keepalive message (proxies and fetch's body timeout close silent ones);
 * 0: never. */
static uint64_t keepalive_ms(const srd_request *req)
{
	const char *v = srd_request_header(req, "Keepalive-Ping-Interval");
	unsigned long s = v ? strtoul(v, NULL, 10) : 0;
	return s ? (s < 1 ? 1 : s > 3600 ? 3600 : s) * 1000ull : 0;
}

/* A keepalive when one is due; -1: the client has gone. */
static int keepalive(srd_response *res, bool process, uint64_t every, uint64_t *last)
{
	uint64_t now = srd_now_ms();
	if (!every || now - *last < every)
		return 0;
	*last = now;
	cJSON *m = cJSON_CreateObject();
	cJSON_AddObjectToObject(process ? cJSON_AddObjectToObject(m, "event") : m, "keepalive");
	return srd_connect_stream_send(res, m);
}

/* ---- watchers -------------------------------------------------------------- */

static int watch_dir(envd_watch *w, const char *rel)
{
	if (w->n_dirs == MAX_WATCHES)
		return 0;
	char ws_rel[SR_WORKSPACE_PATH_MAX + 1], proc[64];
	snprintf(ws_rel, sizeof ws_rel, "%s%s%s", w->top, *w->top && *rel ? "/" : "", rel);
	sr_error err = { 0 };
	int fd = sr_workspace_open_dir(w->ws, ws_rel, &err);
	if (fd < 0)
		return -err.errnum;
	/* Through the fd: the dir it names, whatever the path is now. */
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	int wd = inotify_add_watch(w->ifd, proc,
				   IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE |
				       IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_ONLYDIR);
	int e = errno;
	close(fd);
	if (wd < 0)
		return -e;
	w->dirs[w->n_dirs].wd = wd;
	w->dirs[w->n_dirs].rel = strdup(rel);
	w->n_dirs++;
	return 0;
}

static int watch_new(srd_session *ss, const cJSON *msg, envd_watch **out, srd_cerr *e)
{
	char rel[SR_WORKSPACE_PATH_MAX + 1];
	const char *prefix;
	if (ws_path(ss, str_field(msg, "path"), rel, sizeof rel, &prefix, e))
		return -1;
	envd_watch *w = calloc(1, sizeof *w);
	if (!w)
		return srd_cfail(e, "internal", "out of memory");
	w->ws = srd_session_workspace(ss);
	w->top = strdup(rel);
	w->recursive = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(msg, "recursive"));
	w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	int rc = w->ifd < 0 ? -errno : watch_dir(w, "");
	if (rc == 0 && w->recursive) {
		sr_workspace_entry *en = NULL;
		size_t n = 0;
		sr_list_cut cut;
		sr_error err = { 0 };
		if (sr_workspace_list_partial(w->ws, rel, MAX_LIST, SR_WORKSPACE_LIST_MAX_BYTES,
					      &en, &n, &cut, &err) == 0) {
			size_t skip = *rel ? strlen(rel) + 1 : 0;
			for (size_t i = 0; i < n; i++)
				if (en[i].type == 'd')
					watch_dir(w, en[i].path + skip);
			sr_workspace_entries_free(en, n);
		}
	}
	if (rc < 0) {
		watch_free(w);
		char m[300];
		snprintf(m, sizeof m, "watch \"%.200s\": %s", rel, strerror(-rc));
		return srd_cfail_errno(e, -rc, m);
	}
	*out = w;
	return 0;
}

static const char *event_type(uint32_t mask)
{
	if (mask & (IN_CREATE | IN_MOVED_TO))
		return "EVENT_TYPE_CREATE";
	if (mask & IN_DELETE)
		return "EVENT_TYPE_REMOVE";
	if (mask & IN_MOVED_FROM)
		return "EVENT_TYPE_RENAME";
	if (mask & (IN_MODIFY | IN_CLOSE_WRITE))
		return "EVENT_TYPE_WRITE";
	if (mask & IN_ATTRIB)
		return "EVENT_TYPE_CHMOD";
	return NULL;
}

/* The events waiting on w's inotify fd, appended to arr. */
static void watch_read(envd_watch *w, cJSON *arr)
{
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
	for (;;) {
		ssize_t n = read(w->ifd, buf, sizeof buf);
		if (n <= 0)
			return;
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			p += sizeof *ev + ev->len;
			const char *type = event_type(ev->mask);
			const char *dir = NULL;
			for (size_t i = 0; i < w->n_dirs && !dir; i++)
				if (w->dirs[i].wd == ev->wd)
					dir = w->dirs[i].rel;
			/* The workspace's own temp files (an atomic write's): the
			 * rename that ends one is the file's create. */
			if (!type || !dir || !ev->len || strncmp(ev->name, ".sr-write-", 10) == 0)
				continue;
			char name[SR_WORKSPACE_PATH_MAX + 258];
			snprintf(name, sizeof name, "%s%s%s", dir, *dir ? "/" : "", ev->name);
			if (w->recursive && (ev->mask & (IN_CREATE | IN_MOVED_TO)) &&
			    (ev->mask & IN_ISDIR))
				watch_dir(w, name);
			cJSON *j = cJSON_CreateObject();
			cJSON_AddStringToObject(j, "name", name);
			cJSON_AddStringToObject(j, "type", type);
			cJSON_AddItemToArray(arr, j);
		}
	}
}

static int fs_create_watcher(srd_envd *env, srd_session *ss, const cJSON *msg, cJSON *reply,
			     srd_cerr *e)
{
	envd_watch *w = NULL;
	pthread_mutex_lock(&env->lock);
	bool full = env->n_watches >= MAX_WATCHERS;
	if (!full)
		env->n_watches++;
	pthread_mutex_unlock(&env->lock);
	if (full)
		return srd_cfail(e, "resource_exhausted",
				 "this sandbox has %d watchers: remove one first", MAX_WATCHERS);
	if (watch_new(ss, msg, &w, e)) {
		pthread_mutex_lock(&env->lock);
		env->n_watches--;
		pthread_mutex_unlock(&env->lock);
		return -1;
	}
	pthread_mutex_lock(&env->lock);
	snprintf(w->id, sizeof w->id, "w%u", ++env->next_watch);
	w->next = env->watches;
	env->watches = w;
	pthread_mutex_unlock(&env->lock);
	cJSON_AddStringToObject(reply, "watcherId", w->id);
	return 0;
}

static int fs_watcher_events(srd_envd *env, const cJSON *msg, cJSON *reply, bool remove,
			     srd_cerr *e)
{
	const char *id = str_field(msg, "watcherId");
	pthread_mutex_lock(&env->lock);
	envd_watch **pw = &env->watches;
	while (*pw && strcmp((*pw)->id, id) != 0)
		pw = &(*pw)->next;
	envd_watch *w = *pw;
	if (w && remove) {
		*pw = w->next;
		env->n_watches--;
		watch_free(w);
	} else if (w) {
		watch_read(w, cJSON_AddArrayToObject(reply, "events"));
	}
	pthread_mutex_unlock(&env->lock);
	return w ? 0 : srd_cfail(e, "not_found", "no watcher \"%.64s\"", id);
}

/* WatchDir: the same events as a stream, until the client goes, the
 * call's deadline passes or the session ends. */
static void fs_watch_dir(srd_envd *env, srd_session *ss, const srd_request *req, const cJSON *msg,
			 srd_response *res)
{
	envd_watch *w = NULL;
	srd_cerr e = { 0 };
	uint64_t deadline = srd_connect_deadline(req);
	pthread_mutex_lock(&env->lock);
	bool full = env->n_watches >= MAX_WATCHERS;
	if (!full)
		env->n_watches++;
	pthread_mutex_unlock(&env->lock);
	if (srd_connect_stream_start(res) < 0)
		goto out;
	if (full) {
		srd_cfail(&e, "resource_exhausted", "this sandbox has %d watchers", MAX_WATCHERS);
		srd_connect_stream_end(res, &e);
		goto out;
	}
	if (watch_new(ss, msg, &w, &e)) {
		srd_connect_stream_end(res, &e);
		goto out;
	}
	cJSON *start = cJSON_CreateObject();
	cJSON_AddObjectToObject(start, "start");
	if (srd_connect_stream_send(res, start) < 0)
		goto out;
	int peer = req->peer ? req->peer->fd : -1;
	uint64_t every = keepalive_ms(req), last = srd_now_ms();
	for (;;) {
		struct pollfd pf[2] = { { w->ifd, POLLIN, 0 }, { peer, POLLRDHUP, 0 } };
		uint64_t now = srd_now_ms();
		if ((deadline && now >= deadline) || srd_session_ended(ss))
			break;
		int r = poll(pf, 2, 1000);
		if (r > 0 && (pf[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
			goto out; /* the client went */
		cJSON *evs = cJSON_CreateArray(), *ev;
		if (r > 0 && (pf[0].revents & POLLIN)) {
			watch_read(w, evs);
			last = srd_now_ms();
		}
		bool gone = false;
		while (!gone && (ev = cJSON_DetachItemFromArray(evs, 0))) {
			cJSON *m = cJSON_CreateObject();
			cJSON_AddItemToObject(m, "filesystem", ev);
			gone = srd_connect_stream_send(res, m) < 0;
		}
		cJSON_Delete(evs);
		if (gone || keepalive(res, false, every, &last) < 0)
			goto out;
	}
	srd_connect_stream_end(res, NULL);
out:
	if (w)
		watch_free(w);
	if (!full) {
		pthread_mutex_lock(&env->lock);
		env->n_watches--;
		pthread_mutex_unlock(&env->lock);
	}
}

/* ---- /files ------------------------------------------------------------------ */

static void files_error(srd_response *res, unsigned status, const char *msg)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "code", status);
	cJSON_AddStringToObject(j, "message", msg);
	srd_respond_json(res, status, j);
}

static unsigned files_status(const srd_cerr *e)
{
	return strcmp(e->code, "not_found") == 0            ? 404
	       : strcmp(e->code, "permission_denied") == 0  ? 403
	       : strcmp(e->code, "resource_exhausted") == 0 ? 507
	       : strcmp(e->code, "internal") == 0           ? 500
							    : 400;
}

/* A query parameter, decoded; *nul when it held a NUL byte (%00), which a
 * C string would silently cut short. */
static const char *query(const srd_request *req, const char *name, bool *nul)
{
	const char *v = NULL;
	size_t len = 0;
	if (req->conn && MHD_lookup_connection_value_n(req->conn, MHD_GET_ARGUMENT_KIND, name,
						       strlen(name), &v, &len) != MHD_YES)
		v = NULL;
	*nul = v && strlen(v) != len;
	return v;
}

static void files_get(srd_session *ss, const srd_request *req, srd_response *res)
{
	char rel[SR_WORKSPACE_PATH_MAX + 1];
	const char *prefix;
	srd_cerr e = { 0 };
	bool nul;
	const char *path = query(req, "path", &nul);
	if (nul)
		return files_error(res, 400, "the query parameter \"path\" has a NUL byte");
	if (!path || !*path)
		return files_error(res, 400, "the query parameter \"path\" is required");
	if (ws_path(ss, path, rel, sizeof rel, &prefix, &e))
		return files_error(res, files_status(&e), e.msg);
	void *data = NULL;
	size_t size = 0;
	uint64_t used = 0, cap = 0;
	sr_error err = { 0 };
	sr_workspace *ws = srd_session_workspace(ss);
	sr_workspace_usage(ws, &used, &cap, &err);
	if (sr_workspace_read(ws, rel, cap ? cap : (64u << 20), &data, &size, &err)) {
		srd_cfail_errno(&e, err.errnum, err.msg);
		return files_error(res, files_status(&e), e.msg);
	}
	srd_respond_text(res, 200, "application/octet-stream", data, size);
}

static int write_one(srd_session *ss, const char *path, const char *data, size_t size, cJSON *arr,
		     srd_cerr *e)
{
	char rel[SR_WORKSPACE_PATH_MAX + 1], shown[SR_WORKSPACE_PATH_MAX + 64];
	const char *prefix;
	sr_error err = { 0 };
	if (ws_path(ss, path, rel, sizeof rel, &prefix, e))
		return -1;
	if (!*rel)
		return srd_cfail(e, "invalid_argument", "\"%s\" is a directory", path);
	if (sr_workspace_write(srd_session_workspace(ss), rel, data, size, &err))
		return srd_cfail_errno(e, err.errnum, err.msg);
	show_path(shown, sizeof shown, prefix, rel);
	const char *slash = strrchr(shown, '/');
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", slash ? slash + 1 : shown);
	cJSON_AddStringToObject(j, "type", "file");
	cJSON_AddStringToObject(j, "path", shown);
	cJSON_AddItemToArray(arr, j);
	return 0;
}

/* Multipart: each "file" part, at the query's path (one part) or at its
 * filename; application/octet-stream: the body at the query's path. */
static void files_post(srd_session *ss, const srd_request *req, srd_response *res)
{
	srd_cerr e = { 0 };
	bool nul;
	const char *path = query(req, "path", &nul);
	const char *ct = req->content_type ? req->content_type : "";
	if (nul)
		return files_error(res, 400, "the query parameter \"path\" has a NUL byte");
	if (srd_request_header(req, "Content-Encoding"))
		return files_error(res, 415,
				   "compressed uploads are not served (send gzip: false)");
	cJSON *arr = cJSON_CreateArray();
	int rc = 0;
	if (strncmp(ct, "application/octet-stream", 24) == 0) {
		rc = path && *path
			 ? write_one(ss, path, req->body ? req->body : "", req->body_len, arr, &e)
			 : srd_cfail(&e, "invalid_argument",
				     "the query parameter \"path\" is required");
	} else if (req->multipart_error) {
		rc = srd_cfail(&e, "invalid_argument", "%s",
			       req->multipart_why ? req->multipart_why : "bad multipart body");
	} else if (req->n_parts == 0) {
		rc = srd_cfail(&e, "invalid_argument",
			       "a multipart/form-data body with \"file\" parts is required");
	}
	for (size_t i = 0; i < req->n_parts && rc == 0; i++) {
		const srd_part *p = &req->parts[i];
		const char *to = path && *path && req->n_parts == 1 ? path : p->filename;
		if (!to || !*to)
			rc = srd_cfail(&e, "invalid_argument",
				       "part %zu has no filename and the query no path", i);
		else
			rc = write_one(ss, to, p->data, p->size, arr, &e);
	}
	if (rc < 0) {
		cJSON_Delete(arr);
		return files_error(res, files_status(&e), e.msg);
	}
	srd_respond_json(res, 200, arr);
}

/* ---- process.Process ----------------------------------------------------------- */

static envd_proc *find_proc_locked(srd_envd *env, const cJSON *msg)
{
	const cJSON *sel = cJSON_GetObjectItemCaseSensitive(msg, "process");
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(sel, "pid");
	const cJSON *tag = cJSON_GetObjectItemCaseSensitive(sel, "tag");
	bool by_pid = cJSON_IsNumber(pid) && pid->valuedouble >= 1 && pid->valuedouble <= 4194304;
	for (envd_proc *p = env->procs; p; p = p->next)
		if ((by_pid && p->pid == (uint32_t)pid->valuedouble) ||
		    (cJSON_IsString(tag) && p->tag && strcmp(p->tag, tag->valuestring) == 0))
			return p;
	return NULL;
}

static bool exited(const envd_proc *p)
{
	struct pollfd pf = { .fd = p->ex.pidfd, .events = POLLIN };
	return p->ex.pidfd < 0 || poll(&pf, 1, 0) == 1;
}

static void unlink_proc_locked(srd_envd *env, envd_proc *p);

/* Make room: commands that ended with no client streaming them (their
 * output is lost). */
static void reap_unwatched_locked(srd_envd *env)
{
	for (envd_proc *p = env->procs, *next; p; p = next) {
		next = p->next;
		if (!p->pumping && exited(p)) {
			unlink_proc_locked(env, p);
			proc_free(p);
		}
	}
}

static void unlink_proc_locked(srd_envd *env, envd_proc *p)
{
	for (envd_proc **pp = &env->procs; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			env->n_procs--;
			return;
		}
}

static char **build_env(const sr_policy *pol, const cJSON *envs)
{
	if (!cJSON_IsObject(envs))
		envs = NULL; /* a map in JSON is an object; anything else adds nothing */
	size_t n = pol->n_env + (size_t)cJSON_GetArraySize(envs);
	char **out = calloc(n + 1, sizeof *out);
	size_t k = 0;
	if (!out)
		return NULL;
	const cJSON *v;
	for (size_t i = 0; i < pol->n_env; i++) {
		size_t kl = strcspn(pol->env[i], "=");
		bool over = false;
		cJSON_ArrayForEach(v, envs) over =
		    over || (strlen(v->string) == kl && strncmp(v->string, pol->env[i], kl) == 0);
		if (!over)
			out[k++] = strdup(pol->env[i]);
	}
	cJSON_ArrayForEach(v, envs)
	{
		if (cJSON_IsString(v) && !strchr(v->string, '=') && *v->string &&
		    asprintf(&out[k], "%s=%s", v->string, v->valuestring) >= 0)
			k++;
	}
	return out;
}

static void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* The command's argv: cmd and args, all strings without NUL. */
static char **build_argv(const cJSON *config, const char **cmd, srd_cerr *e)
{
	*cmd = str_field(config, "cmd");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(config, "args"), *a;
	if (**cmd != '/') {
		srd_cfail(e, "invalid_argument", "process.cmd \"%.100s\" must be an absolute path",
			  *cmd);
		return NULL;
	}
	char **argv = calloc((size_t)cJSON_GetArraySize(args) + 2, sizeof *argv);
	size_t n = 0;
	if (!argv)
		return NULL;
	argv[n++] = strdup(*cmd);
	cJSON_ArrayForEach(a, args) argv[n++] = strdup(cJSON_IsString(a) ? a->valuestring : "");
	return argv;
}

static int open_pipes(int in[2], int out[2], int err[2], bool want_stdin)
{
	in[0] = in[1] = out[0] = out[1] = err[0] = err[1] = -1;
	if (want_stdin ? pipe2(in, O_CLOEXEC) < 0
		       : (in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
		return -1;
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	return 0;
}

static int start_proc(srd_ctx *ctx, srd_envd *env, srd_session *ss, const cJSON *msg,
		      envd_proc **out, srd_cerr *e)
{
	const cJSON *config = cJSON_GetObjectItemCaseSensitive(msg, "process");
	if (!cJSON_IsObject(config))
		return srd_cfail(e, "invalid_argument", "\"process\" is required");
	if (cJSON_GetObjectItemCaseSensitive(msg, "pty"))
		return srd_cfail(e, "unimplemented", "terminals (pty) are not served by saferun");
	const char *cmd, *cwd_in = str_field(config, "cwd");
	char cwd[SR_WORKSPACE_PATH_MAX + 64], rel[SR_WORKSPACE_PATH_MAX + 1];
	const char *prefix;
	snprintf(cwd, sizeof cwd, "%s", srd_session_workdir(ss));
	if (*cwd_in) {
		if (ws_path(ss, cwd_in, rel, sizeof rel, &prefix, e))
			return -1;
		show_path(cwd, sizeof cwd, srd_session_workdir(ss), rel);
	}
	char **argv = build_argv(config, &cmd, e);
	if (!argv)
		return -1;
	int in[2], o[2], er[2], rc = -1;
	char **envp = NULL;
	envd_proc *p = NULL;
	pthread_mutex_lock(&env->lock);
	if (env->n_procs >= MAX_PROCS)
		reap_unwatched_locked(env);
	if (env->n_procs >= MAX_PROCS) {
		srd_cfail(e, "resource_exhausted",
			  "this sandbox has %d commands running or unread: end some first",
			  MAX_PROCS);
		goto out;
	}
	sr_kernel_options ko;
	srd_session_kernel_options(ctx, ss, &ko);
	envp = build_env(ko.policy, cJSON_GetObjectItemCaseSensitive(config, "envs"));
	bool want_stdin = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(msg, "stdin"));
	if (!envp || open_pipes(in, o, er, want_stdin) < 0) {
		srd_cfail(e, "internal", "pipes for the command: %s", strerror(errno));
		goto close;
	}
	sr_exec_options xo = {
		.path = cmd, .argv = argv, .envp = envp, .cwd = cwd, .stdio = { in[0], o[1], er[1] }
	};
	p = calloc(1, sizeof *p);
	sr_error err = { 0 };
	if (!p || env->exec(env->exec_arg, &xo, &p->ex, &err)) {
		srd_cfail(e,
			  !p                     ? "internal"
			  : err.errnum == ENOENT ? "not_found"
			  : err.errnum == EAGAIN ? "unavailable"
						 : "internal",
			  "%s", p ? err.msg : "out of memory");
		free(p);
		p = NULL;
		goto close;
	}
	p->pid = (uint32_t)p->ex.ns_pid;
	p->in_fd = want_stdin ? in[1] : -1;
	p->out_fd = o[0];
	p->err_fd = er[0];
	in[1] = o[0] = er[0] = -1;
	const cJSON *tag = cJSON_GetObjectItemCaseSensitive(msg, "tag");
	p->tag = cJSON_IsString(tag) ? strdup(tag->valuestring) : NULL;
	p->config = cJSON_Duplicate(config, true);
	p->pumping = true;
	p->next = env->procs;
	env->procs = p;
	env->n_procs++;
	*out = p;
	rc = 0;
close:
	for (int i = 0; i < 2; i++) {
		close_fd(&in[i]);
		close_fd(&o[i]);
		close_fd(&er[i]);
	}
out:
	pthread_mutex_unlock(&env->lock);
	free_strv(argv);
	free_strv(envp);
	return rc;
}

static cJSON *event(const char *kind, cJSON **body)
{
	cJSON *m = cJSON_CreateObject(), *ev = cJSON_AddObjectToObject(m, "event");
	*body = cJSON_AddObjectToObject(ev, kind);
	return m;
}

/* Send what fd has now (all of it when drain); -1: the client went. */
static int forward(srd_response *res, int *fd, const char *stream, bool drain)
{
	char buf[CHUNK];
	for (int rounds = 0; *fd >= 0 && (drain || rounds < 4); rounds++) {
		ssize_t n = read(*fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || (n < 0 && errno != EAGAIN)) {
			close_fd(fd);
			return 0;
		}
		if (n < 0)
			return 0;
		char *b64 = sr_base64_encode(buf, (size_t)n);
		cJSON *body, *m = event("data", &body);
		cJSON_AddStringToObject(body, stream, b64 ? b64 : "");
		free(b64);
		if (srd_connect_stream_send(res, m) < 0)
			return -1;
	}
	return 0;
}

static void send_end(srd_response *res, int wstatus)
{
	char status[64];
	cJSON *body, *m = event("end", &body);
	if (WIFEXITED(wstatus)) {
		cJSON_AddNumberToObject(body, "exitCode", WEXITSTATUS(wstatus));
		cJSON_AddBoolToObject(body, "exited", true);
		snprintf(status, sizeof status, "exit status %d", WEXITSTATUS(wstatus));
	} else {
		int sig = WTERMSIG(wstatus);
		cJSON_AddNumberToObject(body, "exitCode", -1);
		cJSON_AddBoolToObject(body, "exited", false);
		snprintf(status, sizeof status, "signal: %s",
			 sig == SIGKILL      ? "killed"
			 : sigabbrev_np(sig) ? sigabbrev_np(sig)
					     : "?");
		cJSON_AddStringToObject(body, "error", status);
	}
	cJSON_AddStringToObject(body, "status", status);
	srd_connect_stream_send(res, m);
}

/* Deliver p's output and end to this stream until it ends (p is then
 * reaped and freed), the client goes or the call's deadline passes (p
 * goes on, for a Connect). */
static void pump(srd_envd *env, srd_session *ss, envd_proc *p, const srd_request *req,
		 srd_response *res)
{
	int peer = req->peer ? req->peer->fd : -1;
	uint64_t deadline = srd_connect_deadline(req), every = keepalive_ms(req);
	uint64_t last = srd_now_ms();
	for (;;) {
		struct pollfd pf[4] = { { p->out_fd, POLLIN, 0 },
					{ p->err_fd, POLLIN, 0 },
					{ p->ex.pidfd, POLLIN, 0 },
					{ peer, POLLRDHUP, 0 } };
		int r = poll(pf, 4, 1000);
		if (r > 0 && (pf[3].revents & (POLLRDHUP | POLLHUP | POLLERR)))
			break;
		if (srd_session_ended(ss))
			break;
		if (deadline && srd_now_ms() >= deadline) {
			srd_cerr e = { 0 };
			srd_cfail(&e, "deadline_exceeded",
				  "the call's timeout passed; the command goes on (Connect to it "
				  "again, or kill it)");
			srd_connect_stream_end(res, &e);
			break;
		}
		bool done = r > 0 && (pf[2].revents & POLLIN);
		if (r > 0)
			last = srd_now_ms(); /* output is as good as a keepalive */
		if (forward(res, &p->out_fd, "stdout", done) < 0 ||
		    forward(res, &p->err_fd, "stderr", done) < 0 ||
		    keepalive(res, true, every, &last) < 0)
			break;
		if (!done)
			continue;
		/* Reaped under the lock: SendSignal reaches the process group
		 * by its id, which must not be free for reuse until p is out of
		 * the table. */
		siginfo_t si = { 0 };
		pthread_mutex_lock(&env->lock);
		waitid((idtype_t)P_PIDFD, (id_t)p->ex.pidfd, &si, WEXITED);
		close_fd(&p->ex.pidfd);
		unlink_proc_locked(env, p);
		pthread_mutex_unlock(&env->lock);
		int ws =
		    si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8 : si.si_status & 0x7f;
		proc_free(p);
		send_end(res, ws);
		srd_connect_stream_end(res, NULL);
		return;
	}
	pthread_mutex_lock(&env->lock);
	p->pumping = false;
	pthread_mutex_unlock(&env->lock);
}

static void proc_start(srd_ctx *ctx, srd_envd *env, srd_session *ss, const srd_request *req,
		       const cJSON *msg, srd_response *res)
{
	envd_proc *p = NULL;
	srd_cerr e = { 0 };
	if (srd_connect_stream_start(res) < 0)
		return;
	if (start_proc(ctx, env, ss, msg, &p, &e)) {
		srd_connect_stream_end(res, &e);
		return;
	}
	srd_metrics_command(&ctx->metrics, srd_session_tenant(ss));
	cJSON *body, *m = event("start", &body);
	cJSON_AddNumberToObject(body, "pid", p->pid);
	srd_connect_stream_send(res, m);
	pump(env, ss, p, req, res);
}

static void proc_connect(srd_envd *env, srd_session *ss, const srd_request *req, const cJSON *msg,
			 srd_response *res)
{
	srd_cerr e = { 0 };
	if (srd_connect_stream_start(res) < 0)
		return;
	pthread_mutex_lock(&env->lock);
	envd_proc *p = find_proc_locked(env, msg);
	bool busy = p && p->pumping;
	if (p && !busy)
		p->pumping = true;
	pthread_mutex_unlock(&env->lock);
	if (!p || busy) {
		srd_cfail(&e, p ? "failed_precondition" : "not_found",
			  p ? "another client is streaming this process's output"
			    : "no such process (it ended, or never was)");
		srd_connect_stream_end(res, &e);
		return;
	}
	cJSON *body, *m = event("start", &body);
	cJSON_AddNumberToObject(body, "pid", p->pid);
	srd_connect_stream_send(res, m);
	pump(env, ss, p, req, res);
}

static int proc_list(srd_envd *env, cJSON *reply)
{
	cJSON *arr = cJSON_AddArrayToObject(reply, "processes");
	pthread_mutex_lock(&env->lock);
	for (envd_proc *p = env->procs; p; p = p->next) {
		if (exited(p))
			continue; /* running ones only; Connect still gets its end */
		cJSON *j = cJSON_CreateObject();
		cJSON_AddItemToObject(j, "config", cJSON_Duplicate(p->config, true));
		cJSON_AddNumberToObject(j, "pid", p->pid);
		if (p->tag)
			cJSON_AddStringToObject(j, "tag", p->tag);
		cJSON_AddItemToArray(arr, j);
	}
	pthread_mutex_unlock(&env->lock);
	return 0;
}

static int proc_input(srd_envd *env, const cJSON *msg, bool close_it, srd_cerr *e)
{
	const cJSON *input = cJSON_GetObjectItemCaseSensitive(msg, "input");
	const char *b64 = str_field(input, "stdin");
	unsigned char *data = NULL;
	size_t len = 0;
	const char *why = NULL;
	if (!close_it && cJSON_GetObjectItemCaseSensitive(input, "pty"))
		return srd_cfail(e, "unimplemented", "terminals (pty) are not served by saferun");
	if (!close_it && sr_base64_decode(b64, strlen(b64), &data, &len, &why) < 0)
		return srd_cfail(e, "invalid_argument", "input.stdin is not base64: %s",
				 why ? why : "?");
	int fd = -1, rc = 0;
	pthread_mutex_lock(&env->lock);
	envd_proc *p = find_proc_locked(env, msg);
	if (!p)
		rc = srd_cfail(e, "not_found", "no such process");
	else if (p->in_fd < 0)
		rc = srd_cfail(e, "failed_precondition",
			       "the process's stdin is closed (start it with stdin: true)");
	else if (close_it)
		close_fd(&p->in_fd);
	else
		fd = fcntl(p->in_fd, F_DUPFD_CLOEXEC, 0);
	pthread_mutex_unlock(&env->lock);
	/* Outside the lock: a command that does not read blocks only us. */
	for (size_t off = 0; fd >= 0 && off < len;) {
		ssize_t n = write(fd, data + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = srd_cfail(e, "failed_precondition", "write to the process's stdin: %s",
				       strerror(errno));
			break;
		}
		off += (size_t)n;
	}
	if (fd >= 0)
		close(fd);
	free(data);
	return rc;
}

static int proc_signal(srd_envd *env, const cJSON *msg, srd_cerr *e)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(msg, "signal");
	/* compared, not cast: a number past int's range is undefined as one */
	int sig = cJSON_IsNumber(s) ? (s->valuedouble == SIGKILL   ? SIGKILL
				       : s->valuedouble == SIGTERM ? SIGTERM
								   : 0)
		  : cJSON_IsString(s) && !strcmp(s->valuestring, "SIGNAL_SIGKILL") ? SIGKILL
		  : cJSON_IsString(s) && !strcmp(s->valuestring, "SIGNAL_SIGTERM") ? SIGTERM
										   : 0;
	if (sig != SIGKILL && sig != SIGTERM)
		return srd_cfail(e, "invalid_argument", "signal: SIGNAL_SIGKILL or SIGNAL_SIGTERM");
	pthread_mutex_lock(&env->lock);
	envd_proc *p = find_proc_locked(env, msg);
	if (p && p->ex.pidfd >= 0) {
		/* The process group too: what the command started. Its leader
		 * is our unreaped child, so the group id is still its own. */
		kill(-p->ex.pid, sig);
		syscall(SYS_pidfd_send_signal, p->ex.pidfd, sig, NULL, 0);
	}
	pthread_mutex_unlock(&env->lock);
	return p ? 0 : srd_cfail(e, "not_found", "no such process");
}

/* ---- dispatch ------------------------------------------------------------------ */

typedef int (*unary_fn)(srd_ctx *ctx, srd_envd *env, srd_session *ss, const cJSON *msg,
			cJSON *reply, srd_cerr *e);

#define WRAP_SS(name, fn)                                                               \
	static int name(srd_ctx *ctx, srd_envd *env, srd_session *ss, const cJSON *msg, \
			cJSON *reply, srd_cerr *e)                                      \
	{                                                                               \
		(void)ctx;                                                              \
		(void)env;                                                              \
		return fn(ss, msg, reply, e);                                           \
	}
WRAP_SS(u_stat, fs_stat)
WRAP_SS(u_make_dir, fs_make_dir)
WRAP_SS(u_move, fs_move)
WRAP_SS(u_remove, fs_remove)
WRAP_SS(u_list_dir, fs_list_dir)

static int u_create_watcher(srd_ctx *ctx, srd_envd *env, srd_session *ss, const cJSON *msg,
			    cJSON *reply, srd_cerr *e)
{
	(void)ctx;
	return fs_create_watcher(env, ss, msg, reply, e);
}

static int u_get_events(srd_ctx *ctx, srd_envd *env, srd_session *ss, const cJSON *msg,
			cJSON *reply, srd_cerr *e)
{
	(void)ctx, (void)ss;
	return fs_watcher_events(env, msg, reply, false, e);
}

static int u_remove_watcher(srd_ctx *ctx, srd_envd *env, srd_session *ss, const cJSON *msg,
			    cJSON *reply, srd_cerr *e)
{
	(void)ctx, (void)ss;
	return fs_watcher_events(env, msg, reply, true, e);
}

static int u_list(srd_ctx *ctx, srd_envd *env, srd_session *ss, const cJSON *msg, cJSON *reply,
		  srd_cerr *e)
{
	(void)ctx, (void)ss, (void)msg, (void)e;
	return proc_list(env, reply);
}

static int u_send_input(srd_ctx *ctx, srd_envd *env, srd_session *ss, const cJSON *msg,
			cJSON *reply, srd_cerr *e)
{
	(void)ctx, (void)ss, (void)reply;
	return proc_input(env, msg, false, e);
}

static int u_close_stdin(srd_ctx *ctx, srd_envd *env, srd_session *ss, const cJSON *msg,
			 cJSON *reply, srd_cerr *e)
{
	(void)ctx, (void)ss, (void)reply;
	return proc_input(env, msg, true, e);
}

static int u_signal(srd_ctx *ctx, srd_envd *env, srd_session *ss, const cJSON *msg, cJSON *reply,
		    srd_cerr *e)
{
	(void)ctx, (void)ss, (void)reply;
	return proc_signal(env, msg, e);
}

static int u_update(srd_ctx *ctx, srd_envd *env, srd_session *ss, const cJSON *msg, cJSON *reply,
		    srd_cerr *e)
{
	(void)ctx, (void)env, (void)ss, (void)msg, (void)reply;
	return srd_cfail(e, "unimplemented", "terminals (pty) are not served by saferun");
}

static const struct {
	const char *path;
	unary_fn fn;
	bool command; /* a process call: the policy must allow commands */
} unary[] = {
	{ "/filesystem.Filesystem/Stat", u_stat, false },
	{ "/filesystem.Filesystem/MakeDir", u_make_dir, false },
	{ "/filesystem.Filesystem/Move", u_move, false },
	{ "/filesystem.Filesystem/Remove", u_remove, false },
	{ "/filesystem.Filesystem/ListDir", u_list_dir, false },
	{ "/filesystem.Filesystem/CreateWatcher", u_create_watcher, false },
	{ "/filesystem.Filesystem/GetWatcherEvents", u_get_events, false },
	{ "/filesystem.Filesystem/RemoveWatcher", u_remove_watcher, false },
	{ "/process.Process/List", u_list, true },
	{ "/process.Process/SendInput", u_send_input, true },
	{ "/process.Process/CloseStdin", u_close_stdin, true },
	{ "/process.Process/SendSignal", u_signal, true },
	{ "/process.Process/Update", u_update, true },
};

static bool commands_allowed(srd_ctx *ctx, srd_session *ss, srd_cerr *e)
{
	sr_kernel_options ko;
	srd_session_kernel_options(ctx, ss, &ko);
	if (ko.policy->commands_enabled)
		return true;
	srd_cfail(e, "permission_denied",
		  "this sandbox's policy does not allow commands (policy.commands.enabled)");
	return false;
}

static void serve_stream(srd_ctx *ctx, srd_envd *env, srd_session *ss, const srd_request *req,
			 srd_response *res)
{
	bool start = strcmp(req->path, "/process.Process/Start") == 0;
	bool connect = strcmp(req->path, "/process.Process/Connect") == 0;
	cJSON *msg = NULL;
	srd_cerr e = { 0 };
	if (srd_connect_read(req, true, &msg, &e) ||
	    ((start || connect) && !commands_allowed(ctx, ss, &e))) {
		if (srd_connect_stream_start(res) == 0)
			srd_connect_stream_end(res, &e);
	} else if (start) {
		proc_start(ctx, env, ss, req, msg, res);
	} else if (connect) {
		proc_connect(env, ss, req, msg, res);
	} else {
		fs_watch_dir(env, ss, req, msg, res);
	}
	cJSON_Delete(msg);
}

void srd_envd_serve(srd_ctx *ctx, srd_envd *env, srd_session *ss, const srd_request *req,
		    srd_response *res)
{
	const char *path = req->path;
	bool get = strcmp(req->method, "GET") == 0, post = strcmp(req->method, "POST") == 0;
	srd_session_touch(ss);
	if (strcmp(path, "/health") == 0 && get)
		return srd_respond_text(res, 204, "text/plain", NULL, 0);
	if (strcmp(path, "/files") == 0 && (get || post))
		return get ? files_get(ss, req, res) : files_post(ss, req, res);
	if (post && (strcmp(path, "/filesystem.Filesystem/WatchDir") == 0 ||
		     strcmp(path, "/process.Process/Start") == 0 ||
		     strcmp(path, "/process.Process/Connect") == 0))
		return serve_stream(ctx, env, ss, req, res);
	for (size_t i = 0; post && i < sizeof unary / sizeof *unary; i++) {
		if (strcmp(path, unary[i].path) != 0)
			continue;
		cJSON *msg = NULL, *reply = cJSON_CreateObject();
		srd_cerr e = { 0 };
		if (srd_connect_read(req, false, &msg, &e) ||
		    (unary[i].command && !commands_allowed(ctx, ss, &e)) ||
		    unary[i].fn(ctx, env, ss, msg, reply, &e)) {
			cJSON_Delete(reply);
			srd_connect_reply_error(res, &e);
		} else {
			srd_connect_reply(res, reply);
		}
		cJSON_Delete(msg);
		return;
	}
	srd_cerr e = { 0 };
	srd_cfail(&e, "unimplemented",
		  "envd has no %s %.200s (saferun serves the filesystem and "
		  "process services, /files and /health)",
		  req->method, path);
	srd_connect_reply_error(res, &e);
}

/* A run's Python dependencies: check, meet from the profile, install in a
 * sandbox, cache. See deps.h and docs/dependencies.md.
 *
 * pip never runs on the host: it runs as the code does, in a sandbox with
 * the policy's seccomp filter, no network (with an index_url: egress to
 * the index's host and port alone), the install limits, the wheelhouse
 * (and index_ca) and Debian's pip wheel bound read-only and a size-capped
 * tmpfs workspace as its working dir. It installs only wheels
 * (--only-binary :all:), so no package code runs during the install.
 * The host copies pip's output out of the workspace without following
 * anything (regular files, dirs and symlinks only, owned by root, no
 * write bits), so a cache entry is never a file a sandbox could write.
 * The cache itself is deps_cache.c. */
#include "deps.h"
#include "deps_cache.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "box/box.h"

#define DEPS_WS_BASE  "/run/saferun/deps"
#define PIP_WHEEL_PAT "/usr/share/python-wheels/pip-*.whl"
#define NAME_MAX_LEN  SR_REQ_NAME_MAX_LEN

/* ---- what the profile has -------------------------------------------------- */

typedef struct dist {
	char name[NAME_MAX_LEN + 1]; /* normalised */
	char version[64];
} dist;

typedef struct dists {
	dist *v;
	size_t n, cap;
} dists;

/* "Name-1.2.dist-info", "Name-1.2-py3.11.egg-info", "Name-1.2.egg-info". */
static int add_dist(dists *d, const char *entry)
{
	const char *dash = strchr(entry, '-'), *end = strstr(entry, ".dist-info");
	if (!end)
		end = strstr(entry, ".egg-info");
	if (!dash || !end || dash > end || dash == entry)
		return 0;
	const char *vend = memchr(dash + 1, '-', (size_t)(end - dash - 1));
	if (!vend)
		vend = end;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 256;
		dist *v = realloc(d->v, cap * sizeof *v);
		if (!v)
			return -1;
		d->v = v;
		d->cap = cap;
	}
	dist *x = &d->v[d->n++];
	sr_req_normalise(entry, (size_t)(dash - entry), x->name, sizeof x->name);
	snprintf(x->version, sizeof x->version, "%.*s", (int)(vend - dash - 1), dash + 1);
	return 0;
}

static int scan_dists(const char *root, dists *d)
{
	static const char *const pats[] = { "/usr/lib/python3/dist-packages",
					    "/usr/lib/python3*/site-packages",
					    "/usr/local/lib/python3*/*-packages" };
	for (size_t i = 0; i < sizeof pats / sizeof *pats; i++) {
		char pat[4096];
		glob_t g;
		snprintf(pat, sizeof pat, "%s%s", root, pats[i]);
		if (glob(pat, GLOB_NOSORT, NULL, &g) != 0)
			continue;
		for (size_t j = 0; j < g.gl_pathc; j++) {
			DIR *dir = opendir(g.gl_pathv[j]);
			for (struct dirent *e; dir && (e = readdir(dir));)
				if (add_dist(d, e->d_name) < 0) {
					closedir(dir);
					globfree(&g);
					return -1;
				}
			if (dir)
				closedir(dir);
		}
		globfree(&g);
	}
	return 0;
}

static const dist *find_dist(const dists *d, const char *name)
{
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->v[i].name, name) == 0)
			return &d->v[i];
	return NULL;
}

/* ---- small helpers ------------------------------------------------------------ */

static int strv_push(char ***v, size_t *n, const char *s)
{
	char **grown = realloc(*v, (*n + 2) * sizeof **v);
	if (!grown)
		return -1;
	*v = grown;
	if (!(grown[*n] = strdup(s)))
		return -1;
	grown[++*n] = NULL;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool listed(char *const *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], "*") == 0 || strcmp(v[i], name) == 0)
			return true;
	return false;
}

static int dep_error(sr_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int dep_error(sr_result *res, const char *fmt, ...)
{
	char msg[SR_ERROR_MSG_MAX - 32];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	res->status = SR_STATUS_ERROR;
	res->exit_code = -1;
	snprintf(res->message, sizeof res->message, "error: dependencies: %s", msg);
	return 0;
}

static char *profile_root(const sr_policy *p, const char *rootfs_dir, sr_error *err)
{
	char *rootfs = NULL;
	const char *dir = rootfs_dir ? rootfs_dir : SR_DEFAULT_ROOTFS_DIR;
	if (sr_mounts_find_profile(dir, p->profile, &rootfs, err))
		return NULL;
	return rootfs ? rootfs : strdup(""); /* host profile: the host's /usr */
}

/* ---- pip in a sandbox ------------------------------------------------------------- */

/* source.json: pip's source options (the wheelhouse's, the index's or
 * both), written by the supervisor. */
static const char install_py[] =
    "import json, runpy, sys\n"
    "sys.path.insert(0, '/work/pip.whl')\n"
    "reqs = json.load(open('/work/requirements.json'))\n"
    "source = json.load(open('/work/source.json'))\n"
    "sys.argv = ['pip', 'install'] + source + [\n"
    "            '--only-binary', ':all:', '--target', '/work/layer', '--no-cache-dir',\n"
    "            '--disable-pip-version-check', '--no-input', '--progress-bar', 'off',\n"
    "            '--no-warn-script-location', '--root-user-action', 'ignore'] + reqs\n"
    "runpy.run_module('pip', run_name='__main__', alter_sys=True)\n";

static char *find_pip_wheel(void)
{
	const char *env = getenv("SAFERUN_PIP_WHEEL");
	if (env && *env)
		return strdup(env);
	glob_t g;
	char *pip = NULL;
	if (glob(PIP_WHEEL_PAT, 0, NULL, &g) == 0 && g.gl_pathc)
		pip = strdup(g.gl_pathv[g.gl_pathc - 1]);
	globfree(&g);
	return pip;
}

/* pip's own explanation: its last "ERROR: " line, else the last line. */
static void pip_reason(const sr_buf *e, char *out, size_t size)
{
	const char *best = NULL, *last = NULL;
	size_t best_len = 0, last_len = 0;
	for (const char *p = e->data, *end = e->data + e->len; p && p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (len) {
			last = p, last_len = len;
			if (strncmp(p, "ERROR: ", 7) == 0)
				best = p + 7, best_len = len - 7;
		}
		p = nl ? nl + 1 : end;
	}
	if (!best)
		best = last, best_len = last_len;
	snprintf(out, size, "%.*s", best ? (int)(best_len > 400 ? 400 : best_len) : 0,
		 best ? best : "");
}

static int json_reqs(char *const *reqs, size_t n, char **out)
{
	char *s = NULL;
	size_t len = 0;
	int bad = sr_deps_append(&s, &len, "[");
	/* Checked requirements hold no quote, backslash or control character. */
	for (size_t i = 0; i < n; i++)
		bad |= sr_deps_append(&s, &len, "%s\"%s\"", i ? ", " : "", reqs[i]);
	bad |= sr_deps_append(&s, &len, "]");
	*out = s;
	return bad ? -1 : 0;
}

/* pip's source options: --no-index --find-links for a wheelhouse alone,
 * --index-url for an index, both (--find-links next to --index-url) for
 * both. pip ignores a plain http index unless its host is "trusted": the
 * policy named it, so an http:// index gets --trusted-host HOST:PORT
 * (never an https one: that would turn off its certificate check). A
 * checked index URL holds no quote, backslash or control character. */
static int json_source(const sr_deps_policy *d, const char *host, uint16_t port, char **out)
{
	char *s = NULL;
	size_t len = 0;
	int bad = sr_deps_append(&s, &len, "[");
	if (d->wheelhouse)
		bad |= sr_deps_append(&s, &len, "%s\"--find-links\", \"/work/wheelhouse\"",
				      d->index_url ? "" : "\"--no-index\", ");
	if (d->index_url)
		bad |= sr_deps_append(&s, &len, "%s\"--index-url\", \"%s\"",
				      d->wheelhouse ? ", " : "", d->index_url);
	if (d->index_ca)
		bad |= sr_deps_append(&s, &len, ", \"--cert\", \"/work/index-ca.pem\"");
	if (d->index_url && strncmp(d->index_url, "http://", 7) == 0)
		bad |= sr_deps_append(&s, &len, ", \"--trusted-host\", \"%s:%u\"", host, port);
	bad |= sr_deps_append(&s, &len, "]");
	*out = s;
	return bad ? -1 : 0;
}

/* The refused destinations of pip's sandbox, for the error message. */
static void denied_text(const sr_net_report *n, char *out, size_t size)
{
	size_t len = 0;
	out[0] = '\0';
	for (size_t i = 0; i < n->n_denied && len < size; i++)
		len +=
		    (size_t)snprintf(out + len, size - len, "%s%s:%u/%s", i ? ", " : "",
				     n->denied[i].address, n->denied[i].port, n->denied[i].proto);
}

/* pip's workspaces ("ID-PID-pip") whose process is gone: a saferun killed
 * in the middle of an install (or with a private layer in use). A live
 * PID, even a reused one, keeps its entries: never remove what may be in
 * use. */
static void cleanup_stale(void)
{
	DIR *d = opendir(DEPS_WS_BASE);
	for (struct dirent *e; d && (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		if (len < 6 || strcmp(e->d_name + len - 4, "-pip") != 0)
			continue;
		const char *dash = e->d_name + len - 5;
		while (dash > e->d_name && isdigit((unsigned char)*dash))
			dash--;
		long pid = strtol(dash + 1, NULL, 10);
		if (*dash != '-' || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		char path[512];
		snprintf(path, sizeof path, "%s/%s", DEPS_WS_BASE, e->d_name);
		umount2(path, MNT_DETACH);
		sr_deps_remove_tree(path); /* the tmpfs is gone: an empty mount point */
	}
	if (d)
		closedir(d);
}

/* pip installs reqs from the policy's sources into WS/layer; 0, or the
 * run's status error in res (-1: refused before anything ran). With an
 * index, pip's sandbox has the egress network with one destination: the
 * index's host (resolved by the supervisor in egress.c, pinned in the
 * sandbox's /etc/hosts) on the URL's port, TCP, and no DNS; never the
 * run's own network section. */
static int install(const sr_run_request *req, char *const *reqs, size_t n, const char *pip,
		   sr_workspace **ws_out, sr_result *res, sr_error *err)
{
	const sr_deps_policy *d = &req->policy->dependencies;
	sr_workspace *ws = NULL;
	char id[64], *rj = NULL, *src = NULL, host[256];
	sr_net_allow index = { .host = host, .proto = SR_NET_TCP, .n_ports = 1 };
	const char *bad_url;
	if (d->index_url &&
	    sr_deps_parse_index_url(d->index_url, host, sizeof host, &index.ports[0], &bad_url) < 0)
		return sr_refuse(err, EINVAL, "policy.dependencies.index_url: %s", bad_url);
	snprintf(id, sizeof id, "%s-%d-pip", res->id, (int)getpid());
	cleanup_stale();
	if (sr_workspace_create(DEPS_WS_BASE, id, d->max_size_bytes, &ws, err) ||
	    ((json_reqs(reqs, n, &rj) || json_source(d, host, index.ports[0], &src)) &&
	     sr_fail(err, ENOMEM, "pip's requirements and sources")) ||
	    sr_workspace_write(ws, "requirements.json", rj, strlen(rj), err) ||
	    sr_workspace_write(ws, "source.json", src, strlen(src), err) ||
	    sr_workspace_write(ws, "main.py", install_py, sizeof install_py - 1, err) ||
	    sr_workspace_write(ws, "pip.whl", "", 0, err) ||
	    (d->wheelhouse && sr_workspace_write(ws, "wheelhouse/.mountpoint", "", 0, err)) ||
	    (d->index_ca && sr_workspace_write(ws, "index-ca.pem", "", 0, err))) {
		free(rj);
		free(src);
		sr_workspace_destroy(ws);
		return sr_error_wrap(err, "set up pip's workspace");
	}
	free(rj);
	free(src);
	sr_policy ip = *req->policy; /* shallow: only scalars change */
	static char *const env[] = { "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/work",
				     "LANG=C.UTF-8", "PYTHONUNBUFFERED=1", NULL };
	ip.env = (char **)env;
	ip.n_env = 4;
	ip.net_mode = d->index_url ? SR_NET_EGRESS : SR_NET_NONE;
	ip.net = (sr_net_policy){ .allow = d->index_url ? &index : NULL,
				  .n_allow = d->index_url ? 1 : 0 };
	ip.checker.enabled = false;
	ip.warm.enabled = false;
	ip.limits.wall_ms = d->install_wall_ms;
	ip.limits.memory_bytes = d->install_memory_bytes;
	ip.limits.tmpfs_bytes = d->max_size_bytes;
	ip.limits.output_bytes = 1u << 20;
	if (ip.limits.pids < 64)
		ip.limits.pids = 64;
	/* In the run's share group: pip's CPU and memory are its tenant's. */
	sr_run_request ir = { .policy = &ip,
			      .rootfs_dir = req->rootfs_dir,
			      .no_check = true,
			      .cgroup_share = req->cgroup_share };
	sr_bind binds[3] = { { .src = pip, .dst = "/work/pip.whl" } };
	size_t n_binds = 1;
	if (d->wheelhouse)
		binds[n_binds++] = (sr_bind){ .src = d->wheelhouse, .dst = "/work/wheelhouse" };
	if (d->index_ca)
		binds[n_binds++] = (sr_bind){ .src = d->index_ca, .dst = "/work/index-ca.pem" };
	sr_result pr;
	sr_box_init_result(&pr, &ip);
	snprintf(pr.id, sizeof pr.id, "%s-pip", res->id);
	uint64_t t0 = sr_now_ms();
	int rc = sr_box_run_with(&ir, ws, binds, n_binds, &pr, err);
	res->deps.install_ms = sr_now_ms() - t0;
	if (rc < 0 && d->index_url && err->code == SR_ERR_NET_HOST) {
		/* The index's host, not the run's policy: what the resolver
		 * said, under the key that named the host (the only entry). */
		int field = snprintf(NULL, 0, SR_EGRESS_HOST_FIELD ": ", (size_t)0);
		char msg[sizeof err->msg];
		snprintf(msg, sizeof msg, "policy.dependencies.index_url: host %s",
			 err->msg + field);
		memcpy(err->msg, msg, sizeof msg);
	}
	char why[512];
	if (rc == 0 && pr.status == SR_STATUS_OK) {
		*ws_out = ws;
	} else if (rc == 0) {
		if (pr.status == SR_STATUS_TIMEOUT)
			snprintf(why, sizeof why,
				 "pip passed the install time limit of %.3g s "
				 "(policy.dependencies.install_time)",
				 (double)d->install_wall_ms / 1000.0);
		else if (pr.status == SR_STATUS_OOM)
			snprintf(why, sizeof why,
				 "pip passed the install memory limit of %llu MiB "
				 "(policy.dependencies.install_memory)",
				 (unsigned long long)(d->install_memory_bytes >> 20));
		else if (pr.status == SR_STATUS_ERROR)
			pip_reason(&pr.err, why, sizeof why);
		else
			snprintf(why, sizeof why, "%s", pr.message);
		char denied[256];
		denied_text(&pr.net, denied, sizeof denied);
		if (*denied)
			dep_error(res, "pip install failed: %s (its network refused: %s)", why,
				  denied);
		else
			dep_error(res, "pip install failed: %s", why);
		sr_workspace_destroy(ws);
	} else {
		sr_workspace_destroy(ws);
	}
	sr_result_free(&pr);
	return rc;
}

/* "name==version" of each dist-info in the layer, sorted. */
static int list_installed(const char *layer, struct sr_deps_result *r)
{
	DIR *d = opendir(layer);
	for (struct dirent *e; d && (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		const char *dash = strchr(e->d_name, '-');
		if (len < 11 || strcmp(e->d_name + len - 10, ".dist-info") || !dash)
			continue;
		char s[300];
		snprintf(s, sizeof s, "%.*s==%.*s", (int)(dash - e->d_name), e->d_name,
			 (int)(len - 10 - (size_t)(dash - e->d_name) - 1), dash + 1);
		if (strv_push(&r->installed, &r->n_installed, s) < 0) {
			closedir(d);
			return -1;
		}
	}
	if (d)
		closedir(d);
	if (r->n_installed)
		qsort(r->installed, r->n_installed, sizeof *r->installed, cmp_str);
	return 0;
}

/* ---- the request ---------------------------------------------------------------- */

/* Check and sort what req asks for into res->deps and *todo (normalised
 * requirement strings to install). Dependency errors land in res. */
static int sort_requirements(const sr_run_request *req, char *const *reqs, size_t n, size_t n_asked,
			     const dists *have, sr_result *res, char ***todo, size_t *n_todo,
			     sr_error *err)
{
	const sr_deps_policy *d = &req->policy->dependencies;
	for (size_t i = 0; i < n; i++) {
		char norm[NAME_MAX_LEN + 1];
		const char *r = reqs[i];
		bool detected = i >= n_asked; /* a guess from the imports: never an error */
		if (sr_deps_check_requirement(r, i, norm, sizeof norm, err) < 0)
			return sr_error_mark(err, SR_ERR_REQUIREMENTS);
		bool allowed = listed(d->allow, d->n_allow, norm);
		if (listed(d->ignore, d->n_ignore, norm) || (detected && !allowed)) {
			if (strv_push(&res->deps.ignored, &res->deps.n_ignored, norm) < 0)
				return sr_fail(err, ENOMEM, "dependencies");
			continue;
		}
		/* The allow list guards what gets installed: what the profile
		 * already meets installs nothing, so it needs no entry. */
		const dist *x = find_dist(have, norm);
		if (x && sr_req_specs_hold(r, x->version)) {
			char s[300];
			snprintf(s, sizeof s, "%s==%s", norm, x->version);
			if (strv_push(&res->deps.from_profile, &res->deps.n_from_profile, s) < 0)
				return sr_fail(err, ENOMEM, "dependencies");
			continue;
		}
		if (!allowed)
			return dep_error(res,
					 "\"%s\" is not allowed by policy.dependencies.allow "
					 "(nothing was installed)",
					 norm),
			       1;
		/* name and specifiers, without the blanks: the cache key's form */
		char canon[SR_DEPS_REQ_MAX_LEN + 1];
		size_t o = 0;
		const char *s = sr_req_skip_ws(r);
		while (sr_req_name_char((unsigned char)*s))
			s++;
		o = (size_t)snprintf(canon, sizeof canon, "%s", norm);
		for (; *s && o + 1 < sizeof canon; s++)
			if (*s != ' ' && *s != '\t')
				canon[o++] = *s;
		canon[o] = '\0';
		if (!listed(*todo, *n_todo, canon) && strv_push(todo, n_todo, canon) < 0)
			return sr_fail(err, ENOMEM, "dependencies");
	}
	if (*n_todo)
		qsort(*todo, *n_todo, sizeof **todo, cmp_str);
	return 0;
}

/* The sandbox mounts path as an unprivileged user of the host: every dir
 * on the way needs o+x, the last one o+rx. */
static bool reachable(const char *path, bool read)
{
	char buf[4096];
	struct stat st;
	snprintf(buf, sizeof buf, "%s", path);
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p)
			continue;
		char c = *p;
		*p = '\0';
		if (stat(buf, &st) < 0 || !S_ISDIR(st.st_mode) || !(st.st_mode & S_IXOTH))
			return false;
		if (!c)
			return !read || (st.st_mode & S_IROTH) != 0;
		*p = c;
	}
}

/* A regular file the sandbox's unprivileged mount can reach and read. */
static bool readable_file(const char *path)
{
	char dir[4096];
	struct stat st;
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash || stat(path, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & S_IROTH))
		return false;
	if (slash == dir)
		return true;
	*slash = '\0';
	return reachable(dir, false);
}

/* The sources pip may use, or why there is none. */
static int check_source(const sr_deps_policy *d, sr_result *res)
{
	if (d->wheelhouse && !reachable(d->wheelhouse, true))
		return dep_error(res,
				 "policy.dependencies.wheelhouse %s is not a directory the sandbox "
				 "can read (it and every dir above it need o+x, it needs o+r)",
				 d->wheelhouse),
		       1;
	if (d->index_ca && !readable_file(d->index_ca))
		return dep_error(
			   res,
			   "policy.dependencies.index_ca %s is not a file the sandbox can read "
			   "(every dir above it needs o+x, it needs o+r)",
			   d->index_ca),
		       1;
	if (d->wheelhouse || d->index_url)
		return 0;
	return dep_error(res, "no package source: set policy.dependencies.wheelhouse "
			      "(a directory of wheels) or policy.dependencies.index_url"),
	       1;
}

static sr_deps_layer *private_layer(sr_workspace *ws)
{
	sr_deps_layer *l = calloc(1, sizeof *l);
	if (!l || asprintf(&l->path, "%s/layer", sr_workspace_path(ws)) < 0) {
		free(l);
		return NULL;
	}
	l->lock_fd = -1;
	l->ws = ws;
	return l;
}

static int obtain(const sr_run_request *req, char *const *todo, size_t n, const char *rootfs,
		  sr_result *res, sr_deps_layer **out, sr_error *err)
{
	const sr_deps_policy *d = &req->policy->dependencies;
	char *pip = find_pip_wheel(), *key = NULL, entry[4200], hex[33];
	const char *dir = d->cache_dir ? d->cache_dir : SR_DEPS_CACHE_DIR;
	sr_workspace *ws = NULL;
	int rc = -1;
	if (!pip) {
		rc = sr_refuse(err, ENOENT,
			       "pip's wheel (%s) is missing: install Debian's python3-pip-whl",
			       PIP_WHEEL_PAT);
		goto out;
	}
	if (d->cache) {
		if (!(key = sr_deps_cache_key(d, rootfs, pip, todo, n))) {
			rc = sr_fail(err, ENOMEM, "dependency cache key");
			goto out;
		}
		sr_deps_key_hash(key, hex);
		snprintf(entry, sizeof entry, "%s/%s", dir, hex);
		if ((*out = sr_deps_cache_open(entry, key))) {
			res->deps.cached = true;
			rc = 0;
			goto out;
		}
		if (sr_deps_make_dirs(dir, 0711) < 0) {
			rc = sr_fail(err, errno, "create the dependency cache %s", dir);
			goto out;
		}
		if (!reachable(dir, false)) {
			rc = sr_refuse(err, EACCES,
				       "the dependency cache %s cannot be mounted by the sandbox "
				       "(it and every dir above it need o+x; see "
				       "policy.dependencies.cache)",
				       dir);
			goto out;
		}
	}
	if ((rc = install(req, todo, n, pip, &ws, res, err)) < 0 || res->status != SR_STATUS_OK)
		goto out;
	if (d->cache) {
		char src_layer[4200];
		snprintf(src_layer, sizeof src_layer, "%s/layer", sr_workspace_path(ws));
		*out = sr_deps_cache_store(dir, entry, key, src_layer, err);
		sr_workspace_destroy(ws);
		if (*out)
			sr_deps_cache_evict(dir, d->cache_entries);
	} else if (!(*out = private_layer(ws))) {
		sr_workspace_destroy(ws);
		sr_fail(err, ENOMEM, "dependency layer");
	}
	rc = *out ? 0 : -1;
out:
	free(pip);
	free(key);
	return rc;
}

/* ---- auto_detect: imports the profile lacks ---------------------------------------- */

/* Run in a sandbox, over the run's own files: the code is parsed by
 * Python's ast there, never on the host, and never runs. */
static const char detect_py[] =
    "import ast, importlib.util, json, sys\n"
    "sys.path.insert(0, '.')\n"
    "try:\n"
    "    tree = ast.parse(open('.saferun-code.py', encoding='utf-8').read())\n"
    "except (SyntaxError, ValueError):\n"
    "    tree = ast.Module(body=[], type_ignores=[])\n"
    "names = set()\n"
    "for n in ast.walk(tree):\n"
    "    if isinstance(n, ast.Import):\n"
    "        names.update(a.name.split('.')[0] for a in n.names)\n"
    "    elif isinstance(n, ast.ImportFrom) and not n.level and n.module:\n"
    "        names.add(n.module.split('.')[0])\n"
    "missing = []\n"
    "for m in sorted(names):\n"
    "    try:\n"
    "        found = m in sys.builtin_module_names or importlib.util.find_spec(m) is not None\n"
    "    except (ImportError, ValueError):\n"
    "        found = False\n"
    "    if not found:\n"
    "        missing.append(m)\n"
    "print(json.dumps(missing[:64]))\n";

/* Import names whose distribution is called something else. */
static const char *const module_dists[][2] = {
	{ "sklearn", "scikit-learn" },
	{ "skimage", "scikit-image" },
	{ "yaml", "pyyaml" },
	{ "PIL", "pillow" },
	{ "cv2", "opencv-python" },
	{ "bs4", "beautifulsoup4" },
	{ "dateutil", "python-dateutil" },
	{ "attr", "attrs" },
	{ "dotenv", "python-dotenv" },
	{ "jwt", "pyjwt" },
	{ "serial", "pyserial" },
	{ "Crypto", "pycryptodome" },
};

static int detect_imports(const sr_run_request *req, char ***out, size_t *n, sr_error *err)
{
	sr_policy dp = *req->policy; /* shallow: only scalars change */
	static char *const env[] = { "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/work",
				     "LANG=C.UTF-8", NULL };
	dp.env = (char **)env;
	dp.n_env = 3;
	dp.net_mode = SR_NET_NONE;
	dp.checker.enabled = false;
	dp.warm.enabled = false;
	dp.limits.wall_ms = 10000;
	dp.limits.output_bytes = 64u << 10;
	if (dp.limits.memory_bytes > 256u << 20)
		dp.limits.memory_bytes = 256u << 20;
	sr_file *files = calloc(req->n_files + 1, sizeof *files);
	if (!files)
		return sr_fail(err, ENOMEM, "detect imports");
	memcpy(files, req->files, req->n_files * sizeof *files);
	files[req->n_files] = (sr_file){ .name = ".saferun-code.py",
					 .data = (void *)req->code,
					 .size = req->code_size };
	sr_run_request dr = { .policy = &dp,
			      .code = detect_py,
			      .code_size = sizeof detect_py - 1,
			      .files = files,
			      .n_files = req->n_files + 1,
			      .rootfs_dir = req->rootfs_dir,
			      .no_check = true,
			      .cgroup_share = req->cgroup_share };
	sr_result r;
	sr_box_init_result(&r, &dp);
	int rc = sr_box_run_with(&dr, NULL, NULL, 0, &r, err);
	free(files);
	cJSON *list = rc == 0 && r.status == SR_STATUS_OK && r.out.data
			  ? cJSON_ParseWithLength(r.out.data, r.out.len)
			  : NULL;
	if (rc == 0 && !cJSON_IsArray(list))
		rc = sr_fail(err, EIO, "detect the code's imports: %s",
			     r.status == SR_STATUS_OK ? "no answer" : r.message);
	const cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		const char *m = cJSON_GetStringValue(it);
		char norm[NAME_MAX_LEN + 1];
		sr_error ignore = { 0 };
		if (!m || sr_deps_check_requirement(m, 0, norm, sizeof norm, &ignore) < 0 ||
		    strpbrk(m, "<>=!~ ,"))
			continue; /* not a name a requirement could be */
		for (size_t k = 0; k < sizeof module_dists / sizeof *module_dists; k++)
			if (strcmp(m, module_dists[k][0]) == 0)
				m = module_dists[k][1];
		if (strv_push(out, n, m) < 0) {
			rc = sr_fail(err, ENOMEM, "detect imports");
			break;
		}
	}
	cJSON_Delete(list);
	sr_result_free(&r);
	return rc;
}

/* The request's requirements, then (auto_detect) what its imports lack. */
static int gather(const sr_run_request *req, char ***all, size_t *n, sr_error *err)
{
	for (size_t i = 0; i < req->n_requirements; i++)
		if (strv_push(all, n, req->requirements[i]) < 0)
			return sr_fail(err, ENOMEM, "requirements");
	if (req->policy->dependencies.auto_detect && req->code)
		return detect_imports(req, all, n, err);
	return 0;
}

int sr_deps_prepare(const sr_run_request *req, sr_result *res, sr_deps_layer **out, sr_error *err)
{
	const sr_deps_policy *d = &req->policy->dependencies;
	*out = NULL;
	if ((req->n_requirements == 0 && !(d->auto_detect && req->code)) || req->deps_layer)
		return 0;
	if (req->n_requirements > SR_DEPS_MAX_REQS) {
		sr_refuse(err, EINVAL, "requirements: %zu entries, at most %d", req->n_requirements,
			  SR_DEPS_MAX_REQS);
		return sr_error_mark(err, SR_ERR_REQUIREMENTS);
	}
	for (size_t i = 0; i < req->n_requirements; i++) { /* before any sandbox runs */
		char norm[NAME_MAX_LEN + 1];
		if (sr_deps_check_requirement(req->requirements[i], i, norm, sizeof norm, err))
			return sr_error_mark(err, SR_ERR_REQUIREMENTS);
	}
	char *rootfs = profile_root(req->policy, req->rootfs_dir, err), **todo = NULL, **all = NULL;
	size_t n_todo = 0, n_all = 0;
	dists have = { 0 };
	int rc = -1;
	if (!rootfs)
		return -1;
	if (scan_dists(rootfs, &have) < 0) {
		sr_fail(err, ENOMEM, "list the profile's packages");
		goto out;
	}
	if (gather(req, &all, &n_all, err) < 0)
		goto out;
	if ((rc = sort_requirements(req, all, n_all, req->n_requirements, &have, res, &todo,
				    &n_todo, err)) != 0) {
		rc = rc > 0 ? 0 : -1;
		goto out;
	}
	if (n_todo && (rc = check_source(d, res)) != 0) {
		rc = 0;
		goto out;
	}
	if (n_todo && (rc = obtain(req, todo, n_todo, rootfs, res, out, err)) == 0 && *out &&
	    list_installed(sr_deps_layer_path(*out), &res->deps) < 0)
		rc = sr_fail(err, ENOMEM, "list the installed packages");
out:
	if (rc < 0 || res->status != SR_STATUS_OK) {
		sr_deps_layer_release(*out);
		*out = NULL;
	}
	for (size_t i = 0; i < n_todo; i++)
		free(todo[i]);
	free(todo);
	for (size_t i = 0; i < n_all; i++)
		free(all[i]);
	free(all);
	free(have.v);
	free(rootfs);
	return rc;
}

const char *sr_deps_layer_path(const sr_deps_layer *l)
{
	return l ? l->path : NULL;
}

void sr_deps_layer_release(sr_deps_layer *l)
{
	if (!l)
		return;
	if (l->lock_fd >= 0)
		close(l->lock_fd);
	sr_workspace_destroy(l->ws);
	free(l->path);
	free(l);
}

int sr_deps_bind(const sr_policy *p, const char *rootfs_dir, const char *layer, sr_bind *out,
		 sr_error *err)
{
	*out = (sr_bind){ 0 };
	char *rootfs = profile_root(p, rootfs_dir, err), pat[4200];
	if (!rootfs)
		return -1;
	glob_t g;
	snprintf(pat, sizeof pat, "%s/usr/local/lib/python3.*/dist-packages", rootfs);
	int found = glob(pat, 0, NULL, &g) == 0 && g.gl_pathc > 0;
	char *dst = found ? strdup(g.gl_pathv[g.gl_pathc - 1] + strlen(rootfs)) : NULL;
	if (found)
		globfree(&g);
	if (!dst) {
		int rc = sr_refuse(err, ENOENT,
				   "profile %s has no /usr/local/lib/python3.X/dist-packages to "
				   "mount the dependency layer on (a Debian python3 has one)",
				   p->profile);
		free(rootfs);
		return rc;
	}
	free(rootfs);
	out->src = layer;
	out->dst = dst;
	return 0;
}

void sr_deps_bind_free(sr_bind *b)
{
	free((char *)b->dst);
	b->dst = NULL;
}

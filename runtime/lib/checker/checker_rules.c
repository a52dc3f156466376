/* Rule tables and findings (checker_rules.h). Names are matched after the
 * resolver made them canonical: a pattern "os.system" matches os.system
 * and anything under it; "os.exec*" matches os.execv, os.execlp, ... */
#include "checker_rules.h"

#include <stdio.h>
#include <string.h>

const sr_check_rule sr_rule_table[SR_R_COUNT] = {
	[SR_R_SYNTAX] = { "SR001", "syntax",
			  "the source cannot be tokenized (Python would reject it too)" },
	[SR_R_ENCODING] = { "SR002", "encoding",
			    "a coding declaration other than UTF-8 (utf-7 hides code)" },
	[SR_R_PROCESS] = { "SR101", "process",
			   "running programs: subprocess, os.system, os.exec*, os.spawn*, pty" },
	[SR_R_NATIVE] = { "SR102", "native", "native code: ctypes, cffi" },
	[SR_R_NETWORK] = { "SR103", "network",
			   "sockets, HTTP clients and URLs when the network is off" },
	[SR_R_DYNIMPORT] = { "SR104", "dynamic-import",
			     "import machinery: importlib, imp, runpy, zipimport" },
	[SR_R_DESER] = { "SR105", "deserialization",
			 "unsafe loading: pickle, marshal, shelve, yaml.load, numpy allow_pickle" },
	[SR_R_TAMPER] = { "SR106", "tamper",
			  "signals, resource limits, privileges, audit and trace hooks, patching "
			  "builtins" },
	[SR_R_EVAL] = { "SR201", "eval",
			"eval, exec, compile, __import__, breakpoint, code.interact" },
	[SR_R_NAMESPACE] = { "SR202", "namespace",
			     "globals()/locals()/vars() used as a lookup table, vars(module)" },
	[SR_R_REFLECT] = { "SR301", "reflection",
			   "getattr/setattr/delattr/attrgetter with dunder names, or computed "
			   "names on modules" },
	[SR_R_INTROSPECT] = { "SR302", "introspection",
			      "__subclasses__, __globals__, __builtins__, __code__, frames, "
			      "tracebacks, __mro__, module __dict__" },
	[SR_R_FORMAT] = { "SR303", "format-walk",
			  "format strings that read attributes: \"{0.__class__}\"" },
	[SR_R_PATH] = { "SR401", "path",
			"file paths outside the working dir, or under /proc, /sys, /etc, /dev" },
};

static const char *const advice[SR_R_COUNT] = {
	[SR_R_SYNTAX] = "fix the syntax; Python would reject this code too",
	[SR_R_ENCODING] = "saferun runs UTF-8 source only: remove the coding line",
	[SR_R_PROCESS] =
	    "starts another program, and this sandbox runs Python only: do the work in Python "
	    "(shutil, pathlib, zipfile, or the library's own API)",
	[SR_R_NATIVE] =
	    "loads native code, which this sandbox does not allow: use pure Python, numpy or "
	    "the library's own API",
	[SR_R_NETWORK] =
	    "needs the network, which is off in this sandbox: work with the files in the "
	    "working dir",
	[SR_R_DYNIMPORT] =
	    "imports code chosen at run time: write a plain import statement for the module "
	    "you need",
	[SR_R_DESER] =
	    "can run arbitrary code while loading data: use json, csv, or pandas/numpy formats "
	    "without pickle (allow_pickle=False, yaml.safe_load)",
	[SR_R_TAMPER] =
	    "changes signals, limits, privileges or interpreter hooks that the sandbox controls: "
	    "remove it (the sandbox enforces time and memory limits itself)",
	[SR_R_EVAL] =
	    "runs code built at run time: compute the value directly (ast.literal_eval for "
	    "literals, df.eval for column expressions, a dict of functions for dispatch)",
	[SR_R_NAMESPACE] =
	    "reaches variables through the interpreter's namespace: keep your own dict "
	    "instead",
	[SR_R_REFLECT] =
	    "looks up attributes by an internal or computed name: use the attribute you need "
	    "directly",
	[SR_R_INTROSPECT] = "walks interpreter internals, a sandbox-escape technique: use ordinary "
			    "attributes, type() and isinstance() instead",
	[SR_R_FORMAT] = "reads internal attributes through str.format: format plain values instead",
	[SR_R_PATH] = "use a relative path such as 'data.csv' (files the run was given are in the "
		      "working dir)",
};

const char *sr_rule_advice(int rule)
{
	return rule >= 0 && rule < SR_R_COUNT ? advice[rule] : "";
}

int sr_rule_find(const char *s)
{
	for (int i = 0; i < SR_R_COUNT; i++)
		if (strcmp(s, sr_rule_table[i].id) == 0 || strcmp(s, sr_rule_table[i].name) == 0)
			return i;
	return -1;
}

/* ---- names ------------------------------------------------------------------- */

struct pattern {
	const char *pat;
	int rule;
};

static const struct pattern dangers[] = {
	{ "subprocess", SR_R_PROCESS },
	{ "_posixsubprocess", SR_R_PROCESS },
	{ "os.system", SR_R_PROCESS },
	{ "os.popen", SR_R_PROCESS },
	{ "os.exec*", SR_R_PROCESS },
	{ "os.spawn*", SR_R_PROCESS },
	{ "os.posix_spawn*", SR_R_PROCESS },
	{ "os.startfile", SR_R_PROCESS },
	{ "pty.spawn", SR_R_PROCESS },
	{ "pty.fork", SR_R_PROCESS },
	{ "platform.popen", SR_R_PROCESS },
	{ "commands", SR_R_PROCESS },
	{ "asyncio.create_subprocess_exec", SR_R_PROCESS },
	{ "asyncio.create_subprocess_shell", SR_R_PROCESS },
	{ "multiprocessing.popen_spawn_posix", SR_R_PROCESS },
	{ "sh", SR_R_PROCESS },
	{ "pexpect", SR_R_PROCESS },

	{ "ctypes", SR_R_NATIVE },
	{ "_ctypes", SR_R_NATIVE },
	{ "cffi", SR_R_NATIVE },
	{ "numpy.ctypeslib", SR_R_NATIVE },
	{ "_xxsubinterpreters", SR_R_NATIVE },
	{ "_testcapi", SR_R_NATIVE },
	{ "_testinternalcapi", SR_R_NATIVE },
	{ "sys.setdlopenflags", SR_R_NATIVE },

	{ "importlib.import_module", SR_R_DYNIMPORT },
	{ "importlib.__import__", SR_R_DYNIMPORT },
	{ "importlib.util.spec_from_file_location", SR_R_DYNIMPORT },
	{ "importlib.util.spec_from_loader", SR_R_DYNIMPORT },
	{ "importlib.util.module_from_spec", SR_R_DYNIMPORT },
	{ "importlib.machinery", SR_R_DYNIMPORT },
	{ "importlib._bootstrap*", SR_R_DYNIMPORT },
	{ "imp", SR_R_DYNIMPORT },
	{ "runpy", SR_R_DYNIMPORT },
	{ "zipimport", SR_R_DYNIMPORT },
	{ "pkgutil.get_loader", SR_R_DYNIMPORT },
	{ "pkgutil.find_loader", SR_R_DYNIMPORT },
	{ "pkgutil.get_importer", SR_R_DYNIMPORT },
	{ "pkgutil.resolve_name", SR_R_DYNIMPORT },

	{ "pickle.load", SR_R_DESER },
	{ "pickle.loads", SR_R_DESER },
	{ "pickle.Unpickler", SR_R_DESER },
	{ "pickle.read_pickle", SR_R_DESER },
	{ "marshal.load", SR_R_DESER },
	{ "marshal.loads", SR_R_DESER },
	{ "shelve", SR_R_DESER },
	{ "dill.load", SR_R_DESER },
	{ "dill.loads", SR_R_DESER },
	{ "cloudpickle.load", SR_R_DESER },
	{ "cloudpickle.loads", SR_R_DESER },
	{ "joblib.load", SR_R_DESER },
	{ "pandas.read_pickle", SR_R_DESER },
	{ "torch.load", SR_R_DESER },
	{ "jsonpickle.decode", SR_R_DESER },
	{ "yaml.unsafe_load", SR_R_DESER },
	{ "yaml.unsafe_load_all", SR_R_DESER },
	{ "yaml.UnsafeLoader", SR_R_DESER },
	{ "yaml.Loader", SR_R_DESER },

	{ "signal.signal", SR_R_TAMPER },
	{ "signal.alarm", SR_R_TAMPER },
	{ "signal.setitimer", SR_R_TAMPER },
	{ "signal.pthread_kill", SR_R_TAMPER },
	{ "signal.pthread_sigmask", SR_R_TAMPER },
	{ "signal.siginterrupt", SR_R_TAMPER },
	{ "signal.set_wakeup_fd", SR_R_TAMPER },
	{ "os.kill", SR_R_TAMPER },
	{ "os.killpg", SR_R_TAMPER },
	{ "resource.setrlimit", SR_R_TAMPER },
	{ "resource.prlimit", SR_R_TAMPER },
	{ "sys.addaudithook", SR_R_TAMPER },
	{ "sys.settrace", SR_R_TAMPER },
	{ "sys.setprofile", SR_R_TAMPER },
	{ "sys.remote_exec", SR_R_TAMPER },
	{ "threading.settrace*", SR_R_TAMPER },
	{ "threading.setprofile*", SR_R_TAMPER },
	{ "os.setuid", SR_R_TAMPER },
	{ "os.setgid", SR_R_TAMPER },
	{ "os.seteuid", SR_R_TAMPER },
	{ "os.setegid", SR_R_TAMPER },
	{ "os.setre*", SR_R_TAMPER },
	{ "os.setres*", SR_R_TAMPER },
	{ "os.setgroups", SR_R_TAMPER },
	{ "os.initgroups", SR_R_TAMPER },
	{ "os.chroot", SR_R_TAMPER },
	{ "os.unshare", SR_R_TAMPER },
	{ "os.setns", SR_R_TAMPER },
	{ "sys.meta_path", SR_R_TAMPER },
	{ "sys.path_hooks", SR_R_TAMPER },

	{ "builtins.eval", SR_R_EVAL },
	{ "builtins.exec", SR_R_EVAL },
	{ "builtins.compile", SR_R_EVAL },
	{ "builtins.__import__", SR_R_EVAL },
	{ "builtins.breakpoint", SR_R_EVAL },
	{ "code", SR_R_EVAL },
	{ "codeop", SR_R_EVAL },
	{ "pdb", SR_R_EVAL },

	{ "sys._getframe", SR_R_INTROSPECT },
	{ "sys._current_frames", SR_R_INTROSPECT },
	{ "sys._current_exceptions", SR_R_INTROSPECT },
	{ "gc.get_objects", SR_R_INTROSPECT },
	{ "gc.get_referrers", SR_R_INTROSPECT },
	{ "gc.get_referents", SR_R_INTROSPECT },
	{ "inspect.currentframe", SR_R_INTROSPECT },
	{ "inspect.stack", SR_R_INTROSPECT },
	{ "inspect.trace", SR_R_INTROSPECT },
	{ "inspect.getouterframes", SR_R_INTROSPECT },
	{ "inspect.getinnerframes", SR_R_INTROSPECT },
	{ "builtins.__builtins__", SR_R_INTROSPECT },
	{ NULL, 0 },
};

static const struct pattern network[] = {
	{ "socket.socket", SR_R_NETWORK },
	{ "socket.create_connection", SR_R_NETWORK },
	{ "socket.create_server", SR_R_NETWORK },
	{ "socket.fromfd", SR_R_NETWORK },
	{ "_socket", SR_R_NETWORK },
	{ "urllib.request.urlopen", SR_R_NETWORK },
	{ "urllib.request.urlretrieve", SR_R_NETWORK },
	{ "urllib.request.build_opener", SR_R_NETWORK },
	{ "http.client.HTTPConnection", SR_R_NETWORK },
	{ "http.client.HTTPSConnection", SR_R_NETWORK },
	{ "requests.get", SR_R_NETWORK },
	{ "requests.post", SR_R_NETWORK },
	{ "requests.put", SR_R_NETWORK },
	{ "requests.patch", SR_R_NETWORK },
	{ "requests.delete", SR_R_NETWORK },
	{ "requests.head", SR_R_NETWORK },
	{ "requests.options", SR_R_NETWORK },
	{ "requests.request", SR_R_NETWORK },
	{ "requests.Session", SR_R_NETWORK },
	{ "requests.session", SR_R_NETWORK },
	{ "httpx.get", SR_R_NETWORK },
	{ "httpx.post", SR_R_NETWORK },
	{ "httpx.Client", SR_R_NETWORK },
	{ "httpx.AsyncClient", SR_R_NETWORK },
	{ "urllib3.PoolManager", SR_R_NETWORK },
	{ "urllib3.request", SR_R_NETWORK },
	{ "aiohttp.ClientSession", SR_R_NETWORK },
	{ "ftplib", SR_R_NETWORK },
	{ "smtplib", SR_R_NETWORK },
	{ "poplib", SR_R_NETWORK },
	{ "imaplib", SR_R_NETWORK },
	{ "telnetlib", SR_R_NETWORK },
	{ "xmlrpc.client.ServerProxy", SR_R_NETWORK },
	{ "asyncio.open_connection", SR_R_NETWORK },
	{ "asyncio.start_server", SR_R_NETWORK },
	{ "paramiko", SR_R_NETWORK },
	{ "websocket", SR_R_NETWORK },
	{ "websockets", SR_R_NETWORK },
	{ NULL, 0 },
};

static const char *const file_apis[] = {
	"builtins.open",
	"io.open",
	"io.FileIO",
	"codecs.open",
	"os.open",
	"os.listdir",
	"os.scandir",
	"os.walk",
	"os.fwalk",
	"os.stat",
	"os.lstat",
	"os.remove",
	"os.unlink",
	"os.rmdir",
	"os.removedirs",
	"os.mkdir",
	"os.makedirs",
	"os.rename",
	"os.renames",
	"os.replace",
	"os.chdir",
	"os.chmod",
	"os.chown",
	"os.lchown",
	"os.link",
	"os.symlink",
	"os.readlink",
	"os.truncate",
	"os.utime",
	"os.access",
	"os.mkfifo",
	"os.mknod",
	"os.statvfs",
	"os.path.*",
	"pathlib.*",
	"shutil.*",
	"glob.*",
	"fileinput.*",
	"tarfile.open",
	"tarfile.TarFile",
	"zipfile.ZipFile",
	"sqlite3.connect",
	"dbm.open",
	"shelve.open",
	"linecache.*",
	"tempfile.*",
	"pandas.read_*",
	"pandas.ExcelWriter",
	"pandas.HDFStore",
	"numpy.load",
	"numpy.save",
	"numpy.savez*",
	"numpy.loadtxt",
	"numpy.savetxt",
	"numpy.genfromtxt",
	"numpy.fromfile",
	"numpy.memmap",
	"numpy.lib.format.open_memmap",
	"PIL.Image.open",
	"matplotlib.pyplot.savefig",
	"matplotlib.pyplot.imread",
	"matplotlib.pyplot.imsave",
	"matplotlib.image.imread",
	"h5py.File",
	"scipy.io.loadmat",
	"scipy.io.savemat",
	"joblib.dump",
	"joblib.load",
	"xml.etree.ElementTree.parse",
	NULL,
};

static const char *const file_methods[] = {
	"to_csv",     "to_excel",  "to_json",    "to_parquet", "to_pickle",   "to_hdf",
	"to_feather", "to_html",   "to_latex",   "to_stata",   "to_xml",      "to_orc",
	"savefig",    "read_text", "read_bytes", "write_text", "write_bytes", "tofile",
	"save",       "imsave",    "imwrite",    "joinpath",   "open",        NULL,
};

static const char *const internal_attrs[] = {
	"__subclasses__", "__globals__",      "__builtins__", "__code__",      "__closure__",
	"__mro__",        "__bases__",        "__base__",     "__self__",      "__loader__",
	"__import__",     "__getattribute__", "__reduce__",   "__reduce_ex__", "__objclass__",
	"f_globals",      "f_locals",         "f_builtins",   "f_back",        "f_code",
	"tb_frame",       "gi_frame",         "gi_code",      "cr_frame",      "cr_code",
	"ag_frame",       "ag_code",          NULL,
};

/* pat matches q itself, anything under it, or with a trailing '*' any
 * name that starts with it. */
/* q is pat, or a member of it ("os.path" matches "os"), or starts with
 * pat's prefix when pat ends in '*'. One pass: this runs for every value
 * of every step of every chain. */
static bool matches(const char *q, const char *pat)
{
	size_t i = 0;
	for (; pat[i] && !(pat[i] == '*' && !pat[i + 1]); i++)
		if (q[i] != pat[i])
			return false;
	return pat[i] == '*' || q[i] == '\0' || q[i] == '.';
}

static int match_table(const struct pattern *t, const char *q)
{
	for (; t->pat; t++)
		if (matches(q, t->pat))
			return t->rule;
	return -1;
}

int sr_rule_for_name(const char *q, bool network_off)
{
	int r = match_table(dangers, q);
	if (r < 0 && network_off)
		r = match_table(network, q);
	return r;
}

static bool in_list(const char *const *list, const char *s, bool pattern)
{
	for (; *list; list++)
		if (s[0] == (*list)[0] && (pattern ? matches(s, *list) : strcmp(s, *list) == 0))
			return true;
	return false;
}

bool sr_is_internal_attr(const char *name)
{
	return in_list(internal_attrs, name, false);
}

bool sr_is_file_api(const char *q)
{
	return in_list(file_apis, q, true);
}

bool sr_is_file_method(const char *name)
{
	return in_list(file_methods, name, false);
}

const char *sr_display_name(const char *q)
{
	return strncmp(q, "builtins.", 9) == 0 ? q + 9 : q;
}

/* ---- paths ---------------------------------------------------------------------- */

/* Lexically normalise path (relative ones from base) into out: no ".",
 * "..", empty components or trailing slash. */
static void normalize(const char *base, const char *path, char *out, size_t cap)
{
	char tmp[1024];
	size_t n = 0;
	snprintf(tmp, sizeof tmp, "%s%s%s", path[0] == '/' ? "" : base, path[0] == '/' ? "" : "/",
		 path);
	out[0] = '\0';
	for (const char *c = tmp; *c;) {
		while (*c == '/')
			c++;
		size_t len = strcspn(c, "/");
		if (len == 0)
			break;
		if (len == 2 && c[0] == '.' && c[1] == '.') {
			while (n > 0 && out[--n] != '/')
				;
			out[n] = '\0';
		} else if (!(len == 1 && c[0] == '.') && n + len + 2 < cap) {
			out[n++] = '/';
			memcpy(out + n, c, len);
			n += len;
			out[n] = '\0';
		}
		c += len;
	}
	if (n == 0)
		snprintf(out, cap, "/");
}

static bool under(const char *path, const char *dir, bool complete)
{
	size_t n = strlen(dir);
	if (strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/' || !strcmp(dir, "/")))
		return true;
	/* Only a prefix is known: it may still become dir/... */
	return !complete && strncmp(dir, path, strlen(path)) == 0;
}

static bool is_url(const char *s)
{
	static const char *const schemes[] = { "http://", "https://", "ftp://", "ws://",
					       "wss://",  "s3://",    "gs://",  NULL };
	for (const char *const *sc = schemes; *sc; sc++)
		if (strncasecmp(s, *sc, strlen(*sc)) == 0)
			return true;
	return false;
}

const char *sr_path_problem(const char *path, bool complete, const sr_check_config *cfg, int *rule)
{
	static const char *const devices[] = { "/dev/null",    "/dev/zero",  "/dev/random",
					       "/dev/urandom", "/dev/stdin", "/dev/stdout",
					       "/dev/stderr",  "/dev/shm",   NULL };
	static const char *const system[] = { "/proc", "/sys", "/etc", "/dev", NULL };
	char norm[1024];
	*rule = SR_R_PATH;
	if (is_url(path)) {
		*rule = SR_R_NETWORK;
		return cfg->network_off ? "is a URL, and the network is off in this sandbox" : NULL;
	}
	if (strncmp(path, "file://", 7) == 0)
		path += 7;
	if (!path[0] || path[0] == '~' || cfg->n_dirs == 0)
		return NULL;
	normalize(cfg->dirs[0], path, norm, sizeof norm);
	for (size_t i = 0; i < cfg->n_dirs; i++)
		if (under(norm, cfg->dirs[i], complete))
			return NULL;
	for (const char *const *d = devices; *d; d++)
		if (under(norm, *d, true))
			return NULL;
	if (path[0] != '/')
		return "leaves the working dir through ..";
	for (const char *const *d = system; *d; d++)
		if (under(norm, *d, true))
			return "is a system path the code must not use";
	return "is outside the working dir";
}

/* ---- findings -------------------------------------------------------------------- */

static bool allowed(const sr_check_config *cfg, int rule, const char *name)
{
	const char *last = strrchr(name, '.');
	last = last ? last + 1 : name;
	for (size_t i = 0; i < cfg->n_allow; i++) {
		const char *a = cfg->allow[i];
		size_t n = strlen(a);
		if (!strcmp(a, sr_rule_table[rule].id) || !strcmp(a, sr_rule_table[rule].name))
			return true;
		if (name[0] && (!strcmp(a, name) || !strcmp(a, last) ||
				(!strncmp(name, a, n) && name[n] == '.')))
			return true;
	}
	return false;
}

void sr_finding_add(sr_check_out *out, const sr_check_config *cfg, int rule, const char *name,
		    uint32_t line, uint32_t col, const char *fmt, ...)
{
	if (cfg->rules_off & (1u << rule))
		return;
	if (allowed(cfg, rule, name)) {
		out->n_allowed++;
		return;
	}
	sr_finding *f = NULL;
	for (uint32_t i = 0; i < out->n && !f; i++)
		if (!strcmp(out->f[i].rule, sr_rule_table[rule].id) && out->f[i].line == line)
			f = &out->f[i];
	if (f) {
		size_t n = strlen(f->name);
		if (!(n && !strncmp(name, f->name, n) && name[n] == '.'))
			return; /* one finding per rule and line */
	} else if (out->n == SR_CHECK_MAX_FINDINGS) {
		out->truncated = 1;
		return;
	} else {
		f = &out->f[out->n++];
		*f = (sr_finding){ .line = line, .col = col };
		snprintf(f->rule, sizeof f->rule, "%s", sr_rule_table[rule].id);
		snprintf(f->rule_name, sizeof f->rule_name, "%s", sr_rule_table[rule].name);
	}
	snprintf(f->name, sizeof f->name, "%s", name);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->message, sizeof f->message, fmt, ap);
	va_end(ap);
}

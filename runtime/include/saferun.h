/* libsaferun: run untrusted Python in a fresh, isolated, limited sandbox.
 *
 * Every function returns 0 (or a non-negative value) on success and a
 * negative value on failure, filling the caller's sr_error. Nothing in the
 * library prints, exits or touches global state the caller did not hand it.
 */
#ifndef SAFERUN_H
#define SAFERUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SR_VERSION "0.1.0"

/* The library's exports: what this header declares, nothing else (the
 * library is built with -fvisibility=hidden). */
#if defined(__GNUC__)
#define SR_PUBLIC __attribute__((visibility("default")))
#else
#define SR_PUBLIC
#endif

/* ---- errors ---------------------------------------------------------- */

#define SR_ERROR_MSG_MAX 512

/* The kinds of failure a caller may tell apart (never by the message's
 * text); most errors are SR_ERR_NONE. */
typedef enum sr_error_code {
	SR_ERR_NONE = 0,
	SR_ERR_NET_HOST,     /* a host name of policy.network.allow does not resolve */
	SR_ERR_REQUIREMENTS, /* the request's requirements are refused (EINVAL) */
	SR_ERR_LANGUAGE, /* the run's language: unknown (EINVAL), or not in the profile (ENOENT) */
} sr_error_code;

typedef struct sr_error {
	int errnum;                 /* errno of the failing call, 0 if none */
	char msg[SR_ERROR_MSG_MAX]; /* what failed and what to do */
	sr_error_code code;         /* the kind, when it is one of the above */
} sr_error;

/* ---- policy ---------------------------------------------------------- */

typedef struct sr_limits {
	uint64_t wall_ms;      /* wall-clock limit */
	uint32_t cpu_millis;   /* CPU share: 1000 = one core */
	uint64_t memory_bytes; /* RAM the sandbox may charge */
	uint64_t swap_bytes;   /* swap allowed beyond memory_bytes */
	uint32_t pids;         /* tasks (processes + threads) */
	uint64_t tmpfs_bytes;  /* all writable dirs together */
	uint64_t output_bytes; /* per stream (stdout, stderr) */
	uint32_t open_files;   /* RLIMIT_NOFILE */
} sr_limits;

typedef enum sr_net_mode {
	SR_NET_NONE = 0, /* only lo, up */
	SR_NET_EGRESS, /* a veth to the host; outgoing traffic to the allow list only (docs/network.md) */
} sr_net_mode;

#define SR_NET_MAX_ALLOW 64 /* policy.network.allow entries */
#define SR_NET_MAX_PORTS 32 /* ports per entry */
#define SR_NET_MAX_DNS   4  /* resolver addresses */

typedef enum sr_net_proto {
	SR_NET_TCP = 0,
	SR_NET_UDP,
} sr_net_proto;

/* One egress destination: an IPv4 CIDR, or a name the supervisor
 * resolves (getaddrinfo on the host) when the sandbox starts. */
typedef struct sr_net_allow {
	char *cidr; /* "198.18.0.0/24" (normalised), or NULL */
	char *host; /* "pypi.org", or NULL */
	sr_net_proto proto;
	uint16_t ports[SR_NET_MAX_PORTS]; /* n_ports 0: every port */
	size_t n_ports;
} sr_net_allow;

typedef struct sr_net_policy {
	sr_net_allow *allow;
	size_t n_allow;
	bool dns_host;             /* dns: true, the host's /etc/resolv.conf nameservers */
	char *dns[SR_NET_MAX_DNS]; /* dns: ["198.18.0.53"], IPv4 resolvers */
	size_t n_dns;
} sr_net_policy;

typedef enum sr_seccomp_action_kind {
	SR_SCMP_ALLOW = 0,
	SR_SCMP_ERRNO,
	SR_SCMP_KILL_PROCESS,
	SR_SCMP_KILL_THREAD,
	SR_SCMP_TRAP,
	SR_SCMP_LOG,
} sr_seccomp_action_kind;

typedef struct sr_seccomp_action {
	sr_seccomp_action_kind kind;
	uint32_t errno_ret; /* for SR_SCMP_ERRNO */
} sr_seccomp_action;

typedef enum sr_seccomp_op {
	SR_CMP_NE = 0,
	SR_CMP_LT,
	SR_CMP_LE,
	SR_CMP_EQ,
	SR_CMP_GE,
	SR_CMP_GT,
	SR_CMP_MASKED_EQ, /* (arg & value) == value_two */
} sr_seccomp_op;

typedef struct sr_seccomp_arg {
	uint32_t index; /* 0..5 */
	uint64_t value;
	uint64_t value_two;
	sr_seccomp_op op;
} sr_seccomp_arg;

#define SR_SECCOMP_MAX_ARGS 6

typedef struct sr_seccomp_rule {
	char **names; /* syscall names, resolved by libseccomp */
	size_t n_names;
	sr_seccomp_action action;
	sr_seccomp_arg args[SR_SECCOMP_MAX_ARGS];
	size_t n_args;
} sr_seccomp_rule;

typedef struct sr_seccomp_policy {
	sr_seccomp_action default_action;
	sr_seccomp_rule *rules;
	size_t n_rules;
} sr_seccomp_policy;

/* Every pointer a policy holds is its own: sr_policy_dup copies it and
 * sr_policy_free frees it (the strings and string lists of the schema's
 * tables, policy/policy_<section>.c, by the tables; any other new one goes into both). */
typedef struct sr_policy {
	char *name;   /* where it came from, for logs and errors */
	char *preset; /* preset the limits started from, or NULL */
	sr_limits limits;
	char *profile;   /* rootfs profile: "host", "minimal", "datascience", ... */
	char *workdir;   /* working dir inside the sandbox, e.g. "/work" */
	char **writable; /* absolute dirs backed by the size-capped tmpfs */
	size_t n_writable;
	sr_net_mode net_mode;
	sr_net_policy net; /* egress: destinations and DNS */
	char **env;        /* "KEY=VALUE", the complete environment */
	size_t n_env;
	sr_seccomp_policy seccomp;
	struct sr_checker_policy {
		bool enabled; /* run the pre-execution checker */
		char **allow; /* rule ids, rule names or flagged names it relaxes */
		size_t n_allow;
		char **rules_off; /* rule ids turned off */
		size_t n_rules_off;
		uint64_t timeout_ms; /* for the confined checker process */
		uint64_t memory_bytes;
	} checker;
	/* The warm path (docs/warm.md): a zygote interpreter imports `preload`
	 * once; each run is a fork of it, locked down like a cold run before
	 * the code arrives. Used by saferund and sr_warm_*; `saferun run` is
	 * cold unless asked (--warm). */
	struct sr_warm_policy {
		bool enabled;
		char **preload; /* module names, e.g. "numpy", "pandas" */
		size_t n_preload;
		/* Python the zygote runs once after the imports (the operator's,
		 * trusted like the preload list): code paths a library sets up on
		 * first use are then ready in every sandbox. NULL: none. */
		char *warmup;
		unsigned pool_size; /* sandboxes kept ready; 0: forked as each run arrives */
		/* "pool_size": "auto" (the default policy): sr_warm_start sizes the
		 * pool from the machine (sr_warm_machine_fit) and refuses to start
		 * a zygote on a machine too small for one. */
		bool pool_size_auto;
		bool
		    fallback_cold; /* warm path broken or unfit for a request: run cold (else fail) */
		/* The pool's own work (forking new sandboxes, tearing down used
		 * ones) waits while a run is in flight and two more sandboxes
		 * are ready, at most SR_WARM_DEFER_MS ("refill": "idle"), or
		 * starts as soon as a sandbox is taken ("eager"). */
		bool refill_eager;
		/* "languages": the languages that get a pool, a bit (1u <<
		 * SR_LANG_*) each. python's is the zygote and its forks;
		 * javascript's is a pool of single-use sandboxes with node
		 * already started in each (docs/languages.md). Default:
		 * python's alone. */
		unsigned languages;
	} warm;
#define SR_WARM_DEFER_MS 20
	/* Per-run Python packages (docs/dependencies.md): what a request may
	 * ask for, where pip finds it, and the install's bounds. pip runs in
	 * a sandbox of its own; the result is a read-only layer. */
	struct sr_deps_policy {
		char **allow; /* normalised names, or "*" for any */
		size_t n_allow;
		char **ignore; /* names dropped from every request */
		size_t n_ignore;
		char *wheelhouse; /* host dir of wheels (pip --no-index), or NULL */
		char *index_url; /* a package index (pip's sandbox reaches it by egress), or NULL */
		char *index_ca;  /* PEM CA bundle pip trusts for an https index, or NULL */
		bool auto_detect; /* imports the profile lacks become requirements */
		bool cache;       /* keep finished layers for the next run */
		char *cache_dir;  /* NULL: SR_DEPS_CACHE_DIR */
		unsigned cache_entries;
		uint64_t install_wall_ms, install_memory_bytes, max_size_bytes;
	} dependencies;
	/* May a client start commands (/bin/sh and the rest of the rootfs) in
	 * the sandbox, as E2B's envd does (docs/e2b.md)? They are bounded by
	 * the kernel layers alone (namespaces, cgroup, seccomp, read-only
	 * rootfs, network mode); the checker and its audit hook are Python's. */
	bool commands_enabled;
} sr_policy;
typedef struct sr_deps_policy sr_deps_policy;
typedef struct sr_warm_policy sr_warm_policy;
typedef struct sr_checker_policy sr_checker_policy;

/* The built-in default policy (policies/default.json, compiled in). */
SR_PUBLIC int sr_policy_default(sr_policy **out, sr_error *err);
/* Parse a policy document over the defaults; keys it omits keep their
 * default. origin names the document in error messages. */
SR_PUBLIC int sr_policy_load_json(const char *text, size_t len, const char *origin, sr_policy **out,
				  sr_error *err);
SR_PUBLIC int sr_policy_load_file(const char *path, sr_policy **out, sr_error *err);
/* Replace the limits with a named preset: tiny, small, medium, large. */
SR_PUBLIC int sr_policy_apply_preset(sr_policy *p, const char *name, sr_error *err);
/* Set one environment variable ("KEY=VALUE"), replacing an existing KEY:
 * a run's own variables. LD_* and PYTHON* are refused (EINVAL) unless the
 * policy already sets KEY to that VALUE. */
SR_PUBLIC int sr_policy_set_env(sr_policy *p, const char *kv, sr_error *err);
/* Parse "512M", "1G", "1.5GiB", "65536" into bytes. */
SR_PUBLIC int sr_parse_size(const char *s, uint64_t *out);
/* Parse "20", "20s", "500ms", "2m" into milliseconds. */
SR_PUBLIC int sr_parse_duration(const char *s, uint64_t *out_ms);
/* JSON text of the policy (caller frees). */
SR_PUBLIC char *sr_policy_to_json(const sr_policy *p);
/* A copy that owns its own strings and arrays (NULL: out of memory):
 * cheaper than loading the document again. */
SR_PUBLIC sr_policy *sr_policy_dup(const sr_policy *p);
SR_PUBLIC void sr_policy_free(sr_policy *p);

/* ---- a run ----------------------------------------------------------- */

typedef struct sr_file {
	char *name; /* relative path inside the working dir */
	void *data;
	size_t size;
} sr_file;

/* The language of a run's code (docs/languages.md). The checker and the
 * runner's guard are Python's: other languages are bounded by the kernel
 * layers alone (namespaces, cgroup, seccomp, read-only rootfs). */
typedef enum sr_language {
	SR_LANG_PYTHON = 0, /* python3 main.py, through the runner */
	SR_LANG_JAVASCRIPT, /* node main.js */
	SR_LANG_BASH,       /* bash main.sh */
} sr_language;

/* "python", "javascript", "bash". */
SR_PUBLIC const char *sr_language_name(sr_language l);
/* A language by name: the names above, or "py", "js", "node", "sh",
 * "shell". -1 for anything else. */
SR_PUBLIC int sr_language_parse(const char *name, sr_language *out);
/* Does the profile (in rootfs_dir, NULL: SR_DEFAULT_ROOTFS_DIR; "host":
 * the host's /usr) carry the language's interpreter? */
SR_PUBLIC bool sr_profile_has_language(const char *rootfs_dir, const char *profile, sr_language l);

typedef struct sr_run_request {
	const sr_policy *policy;
	const char *code; /* the source, UTF-8, in the request's language */
	size_t code_size;
	const sr_file *files; /* extra files for the working dir */
	size_t n_files;
	const void *stdin_data; /* NULL: stdin reads /dev/null */
	size_t stdin_size;
	const char *rootfs_dir;   /* NULL: SR_DEFAULT_ROOTFS_DIR */
	const char *const *allow; /* per call: names or rules the checker relaxes */
	size_t n_allow;
	bool no_check; /* skip the pre-execution checker */
	/* Python packages the code needs, PEP 508 names with optional
	 * version specifiers ("tabulate", "attrs>=22,<24"); checked against
	 * policy->dependencies and installed into a read-only layer. */
	const char *const *requirements;
	size_t n_requirements;
	/* A layer installed before (sr_deps_layer_path of a session's
	 * layer): mounted as is, no requirements resolved. */
	const char *deps_layer;
	/* Output as it arrives, for the bytes within the output cap: stream 1 is stdout, 2 is
	 * stderr. Called in the thread that called sr_run / sr_warm_run / sr_kernel_run, before
	 * that call returns; NULL: none. The result still holds the whole output. */
	void (*on_output)(void *arg, int stream, const char *data, size_t len);
	void *on_output_arg;
	/* The code's language (0: Python). A profile without its
	 * interpreter refuses the run (ENOENT, naming both). */
	sr_language language;
	/* A share group made by sr_cgroup_share_create: the run's cgroup is
	 * made below it, so its CPU weight holds for the run. NULL: below
	 * saferun's own parent group, as every run's. */
	const char *cgroup_share;
} sr_run_request;

#define SR_DEPS_CACHE_DIR   "/var/cache/saferun/deps"
#define SR_DEPS_MAX_REQS    64
#define SR_DEPS_REQ_MAX_LEN 200

#define SR_DEFAULT_ROOTFS_DIR "/var/lib/saferun/rootfs"
#define SR_MAX_CODE_BYTES     (4u << 20)

typedef enum sr_status {
	SR_STATUS_OK = 0,
	SR_STATUS_ERROR,        /* non-zero exit, traceback */
	SR_STATUS_TIMEOUT,      /* wall-clock limit */
	SR_STATUS_OOM,          /* memory limit */
	SR_STATUS_PIDS,         /* pids limit hit and the run failed */
	SR_STATUS_OUTPUT_LIMIT, /* a stream went past its cap */
	SR_STATUS_KILLED,       /* ended by a signal (incl. seccomp SIGSYS) */
	SR_STATUS_REJECTED,     /* refused by the pre-execution checker */
	SR_STATUS_INTERNAL_ERROR,
} sr_status;

typedef struct sr_buf {
	char *data;
	size_t len;
	size_t cap;
} sr_buf;

/* A file the code left in artifacts/ (matplotlib figures are saved
 * there too: figure-N.png). */
typedef struct sr_artifact {
	char *name; /* relative to artifacts/: "plot.png", "out/table.csv" */
	char mime[64];
	uint64_t size;
	void *data; /* its bytes when inline, else NULL (fetch it through a
		       session's files; a one-shot run's are gone) */
} sr_artifact;

/* Inline bytes per run, all artifacts together, and how many are listed. */
#define SR_ARTIFACTS_INLINE_MAX (8u << 20)
#define SR_ARTIFACTS_MAX        100

#define SR_NET_DENIED_MAX 32
/* What an egress sandbox tried and was refused (docs/network.md). */
typedef struct sr_net_report {
	bool egress;             /* the run had an egress network */
	char address[16];        /* the sandbox's IPv4 address */
	uint64_t denied_packets; /* packets the rules refused */
	struct sr_net_denied {
		char address[16]; /* destination */
		char proto[4];    /* "tcp", "udp" */
		uint16_t port;
	} denied[SR_NET_DENIED_MAX]; /* distinct tcp/udp destinations refused */
	size_t n_denied;
} sr_net_report;

typedef struct sr_result {
	char id[40]; /* sandbox id */
	sr_status status;
	int exit_code;   /* -1 when killed by a signal */
	int signal;      /* 0 unless killed by a signal */
	sr_buf out, err; /* stdout, stderr */
	sr_buf merged;   /* both streams in arrival order */
	bool truncated;  /* some stream went past its cap */
	uint64_t duration_ms;
	uint64_t cpu_ms;
	uint64_t peak_memory_bytes;
	bool hit_memory, hit_pids, hit_tmpfs;
	sr_limits limits;               /* the limits applied */
	char cgroup_mode[8];            /* "v2", "v1", "hybrid" */
	bool warm;                      /* ran on the warm path (sr_warm_run) */
	char message[SR_ERROR_MSG_MAX]; /* one line explaining a non-ok status */
	struct sr_finding *findings;    /* SR_STATUS_REJECTED: why */
	size_t n_findings;
	sr_artifact *artifacts; /* sorted by name */
	size_t n_artifacts;
	bool artifacts_truncated;               /* not every file is listed: */
	const char *artifacts_truncated_reason; /* why (static text), when truncated */
	sr_net_report net;                      /* egress runs: address and refused attempts */
	struct sr_deps_result {
		char **installed; /* "name==version" in the layer, sorted */
		size_t n_installed;
		char **from_profile; /* requirements the rootfs already met */
		size_t n_from_profile;
		char **ignored; /* dropped by policy.dependencies.ignore */
		size_t n_ignored;
		bool cached;         /* the layer came from the cache: no pip ran */
		uint64_t install_ms; /* pip's sandbox, start to end; 0: none ran */
	} deps;
} sr_result;

/* Build a sandbox, run the code in it, tear everything down.
 * Returns 0 when the run happened (whatever its status) and fills res;
 * returns < 0 when the request was refused before anything ran (bad
 * input, missing rootfs, no privileges) with err saying what to do.
 * An internal failure after set-up started is SR_STATUS_INTERNAL_ERROR. */
SR_PUBLIC int sr_run(const sr_run_request *req, sr_result *res, sr_error *err);
SR_PUBLIC void sr_result_free(sr_result *res);
SR_PUBLIC const char *sr_status_name(sr_status s);

/* ---- dependencies (docs/dependencies.md) -------------------------------- */

/* A read-only layer of installed packages, mounted over the profile's
 * /usr/local/lib/python3.X/dist-packages. sr_run makes and drops one per
 * run by itself; a session keeps one for its life (req->deps_layer). */
typedef struct sr_deps_layer sr_deps_layer;
/* Resolve req->requirements against req->policy->dependencies: met by the
 * rootfs, from the cache, or installed now by pip in a sandbox. Nothing to
 * install: *out NULL. A dependency failure (not allowed, not found, pip
 * failed, limits) sets res->status SR_STATUS_ERROR and res->message and
 * returns 0; < 0 for a request refused outright (a malformed
 * requirement). res->deps says what was installed, met, ignored, cached;
 * res->id names pip's sandbox, which (with the sandbox that finds the
 * code's imports) is made below req->cgroup_share when it is set. */
SR_PUBLIC int sr_deps_prepare(const sr_run_request *req, sr_result *res, sr_deps_layer **out,
			      sr_error *err);
SR_PUBLIC const char *sr_deps_layer_path(const sr_deps_layer *l);
/* Unlock a cache entry, or remove a private layer; NULL is fine. */
SR_PUBLIC void sr_deps_layer_release(sr_deps_layer *l);

/* ---- the warm path (docs/warm.md) -------------------------------------- */

/* A zygote interpreter with the policy's warm.preload imported, and
 * warm.pool_size sandboxes forked from it and locked down, each waiting
 * for one run. Every run still gets its own namespaces, cgroup, writable
 * dirs, dropped privileges and seccomp filter, and a fresh copy of the
 * interpreter that never ran anyone's code. */
typedef struct sr_warm sr_warm;
typedef struct sr_warm_stats {
	bool zygote_up;
	unsigned ready;     /* sandboxes waiting for a run */
	unsigned pool_size; /* the target */
	uint64_t zygote_starts, spawned, spawn_failures, warm_runs, cold_runs;
	char last_error[SR_ERROR_MSG_MAX]; /* why the zygote or a spawn last failed */
	/* warm.preload modules the profile lacks, skipped by the zygote:
	 * names joined by ","; empty: none. */
	char preload_skipped[SR_ERROR_MSG_MAX];
	/* The JavaScript pool (warm.languages has javascript; enabled false
	 * otherwise): node sandboxes started ahead, each serving one run. */
	struct sr_warm_js_stats {
		bool enabled;
		unsigned ready, pool_size;
		uint64_t spawned, spawn_failures, warm_runs;
		char last_error[SR_ERROR_MSG_MAX];
	} js;
} sr_warm_stats;
/* What warm.pool_size "auto" becomes on this machine: one per usable core
 * (at least 2, at most 16) and one per 64 MiB of the memory the caller may
 * use beyond half of SR_WARM_MIN_MEMORY (the zygote's share). On two
 * cores a ready sandbox is refilled as fast as runs take them; more would
 * only hold memory. 0, with why filled in, when
 * that memory is under SR_WARM_MIN_MEMORY: too small for a zygote. The
 * memory is MemAvailable, capped by the caller's cgroup's limit less its
 * usage (v1 and v2, the group and its ancestors). */
#define SR_WARM_MIN_MEMORY (512ull << 20)
SR_PUBLIC unsigned sr_warm_machine_fit(char *why, size_t why_size);
/* Start the warm path for p (copied): the zygote starts, and the pool
 * fills, in a thread of the pool's own, which must be the zygote's parent
 * (it dies with it). Returns at once. */
SR_PUBLIC int sr_warm_start(const sr_policy *p, const char *rootfs_dir, sr_warm **out,
			    sr_error *err);
/* Wait until the zygote is up and the pool is full (tests, benchmarks).
 * -1 with err when it failed to start or timeout_ms passed. */
SR_PUBLIC int sr_warm_wait_ready(sr_warm *w, uint64_t timeout_ms, sr_error *err);
/* Like sr_run. On the warm path when the request fits the pool's policy
 * (same profile, filesystem, seccomp and network; limits, environment,
 * files, stdin and the checker's allow list may differ), else, or when the
 * warm path is broken, cold if the policy's warm.fallback is "cold" and
 * refused (EAGAIN) if it is "error". res->warm says which path ran. */
SR_PUBLIC int sr_warm_run(sr_warm *w, const sr_run_request *req, sr_result *res, sr_error *err);
SR_PUBLIC void sr_warm_get_stats(sr_warm *w, sr_warm_stats *st);
/* Wait for the runs in flight, end the ready sandboxes and the zygote,
 * remove their groups, free w. */
SR_PUBLIC void sr_warm_stop(sr_warm *w);
/* JSON text of a result (caller frees). */
SR_PUBLIC char *sr_result_to_json(const sr_result *res);

/* ---- workspaces: a session's persistent working dir -------------------- */

/* A workspace is a size-capped tmpfs mounted on the host at BASE/ID,
 * owned by the sandbox user, with src/ and artifacts/ inside. Sandboxes
 * bind it as their working dir, so its files outlive each run. The
 * sandboxed code can put anything in it (symlinks to /etc/shadow, fifos,
 * deep trees): every file function below opens beneath the root with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV) and only ever reads regular files, so no path leads
 * the (root) caller outside it.
 *
 * Paths are relative to the workspace root: "src/data.csv". Refused with
 * EINVAL: empty, absolute, "." or ".." parts, empty parts, control
 * characters, longer than SR_WORKSPACE_PATH_MAX. A symlink on the way:
 * ELOOP. Not there: ENOENT. Over a size cap: EFBIG. Workspace full:
 * ENOSPC. Not a regular file: EISDIR (a dir) or EINVAL (anything else). */
typedef struct sr_workspace sr_workspace;

#define SR_WORKSPACE_BASE_DIR "/run/saferun/workspaces"
#define SR_WORKSPACE_PATH_MAX 1024

/* Create and mount BASE/ID (base_dir NULL: SR_WORKSPACE_BASE_DIR, created
 * 0711 if missing) holding at most size_bytes. id: [A-Za-z0-9_-]{1,64}. */
SR_PUBLIC int sr_workspace_create(const char *base_dir, const char *id, uint64_t size_bytes,
				  sr_workspace **out, sr_error *err);
/* The host path of its root (bind this as the sandbox's working dir). */
SR_PUBLIC const char *sr_workspace_path(const sr_workspace *ws);
/* Create or replace a file (parent dirs created), owned by the sandbox
 * user; atomic: a reader sees the old or the new content. */
SR_PUBLIC int sr_workspace_write(sr_workspace *ws, const char *path, const void *data, size_t size,
				 sr_error *err);
/* Read a regular file of at most max bytes (caller frees *data). */
SR_PUBLIC int sr_workspace_read(const sr_workspace *ws, const char *path, size_t max, void **data,
				size_t *size, sr_error *err);
/* Remove a file, or a dir with everything in it. */
SR_PUBLIC int sr_workspace_remove(sr_workspace *ws, const char *path, sr_error *err);

typedef struct sr_workspace_entry {
	char *path; /* relative to the workspace root */
	uint64_t size;
	char type;         /* 'f' file, 'd' dir, 'l' symlink, 'o' other */
	uint64_t mtime_ns; /* last modified, CLOCK_REALTIME */
	uint32_t mode;     /* permission bits (07777) */
} sr_workspace_entry;

/* One entry ("" is the root), not followed if it is a symlink; path is left
 * NULL in *out. */
SR_PUBLIC int sr_workspace_stat(const sr_workspace *ws, const char *path, sr_workspace_entry *out,
				sr_error *err);
/* Make a dir (and its missing parents), owned by the sandbox user. EEXIST
 * when something is already there. */
SR_PUBLIC int sr_workspace_mkdir(sr_workspace *ws, const char *path, sr_error *err);
/* Move a file or dir to another path (parents of to made; what is at to is
 * replaced as rename(2) would). */
SR_PUBLIC int sr_workspace_rename(sr_workspace *ws, const char *from, const char *to,
				  sr_error *err);
/* An O_PATH fd on a dir of the workspace ("" the root), for the caller to
 * close: to watch it (inotify through /proc/self/fd). */
SR_PUBLIC int sr_workspace_open_dir(const sr_workspace *ws, const char *path, sr_error *err);

/* The memory a listing may hold: its entries, their paths and the names of
 * the dirs it is walking. Each path holds every dir above it, so without a
 * cap in bytes a deep tree of long names costs depth x 256 bytes an entry. */
#define SR_WORKSPACE_LIST_MAX_BYTES (4u << 20)

/* Everything below dir ("" for the root), depth first, sorted by path;
 * symlinks are listed, never followed. At most max_entries and
 * SR_WORKSPACE_LIST_MAX_BYTES (E2BIG past either); deeper than 128 levels:
 * ELOOP. */
SR_PUBLIC int sr_workspace_list(const sr_workspace *ws, const char *dir, size_t max_entries,
				sr_workspace_entry **out, size_t *n, sr_error *err);

/* Why a partial listing stopped short. */
typedef enum sr_list_cut {
	SR_LIST_WHOLE,       /* it did not: everything is listed */
	SR_LIST_CUT_ENTRIES, /* max_entries reached */
	SR_LIST_CUT_BYTES,   /* max_bytes reached */
	SR_LIST_CUT_DEPTH,   /* dirs nested deeper than 128 levels left out */
} sr_list_cut;

/* sr_workspace_list that returns what it has instead of failing at a cap:
 * max_entries, max_bytes (as SR_WORKSPACE_LIST_MAX_BYTES counts them) or
 * the depth; *cut says which. A dir whose names would pass a cap is listed
 * without what is in it. */
SR_PUBLIC int sr_workspace_list_partial(const sr_workspace *ws, const char *dir, size_t max_entries,
					size_t max_bytes, sr_workspace_entry **out, size_t *n,
					sr_list_cut *cut, sr_error *err);
SR_PUBLIC void sr_workspace_entries_free(sr_workspace_entry *e, size_t n);
/* Bytes used and the cap. */
SR_PUBLIC int sr_workspace_usage(sr_workspace *ws, uint64_t *used, uint64_t *cap, sr_error *err);
/* Unmount and remove it, with everything in it. */
SR_PUBLIC void sr_workspace_destroy(sr_workspace *ws);
/* Unmount and remove every workspace a crashed process left in base_dir.
 * Returns how many, or < 0. Only for the one owner of base_dir. */
SR_PUBLIC int sr_workspace_cleanup_stale(const char *base_dir, sr_error *err);

/* ---- kernels: a long-lived interpreter for stateful sessions ------------ */

/* A sandbox like sr_run's whose python stays up and runs one piece of
 * code after another in the same namespace (variables, imports and
 * functions persist, like a notebook kernel). The cgroup limits (memory,
 * pids, CPU share) hold for its whole life; the wall-clock limit and the
 * output caps hold for each run. Between runs its cgroup is frozen: what
 * the code left running (a thread, a child) gets no CPU until the next
 * sr_kernel_run thaws it. A run that ends the interpreter
 * (timeout, oom, output_limit, killed, rejected at run time) leaves the
 * kernel dead: sr_kernel_alive() says so and the caller starts another. */
typedef struct sr_kernel sr_kernel;

typedef struct sr_kernel_options {
	const sr_policy *policy;
	const char *rootfs_dir;        /* NULL: SR_DEFAULT_ROOTFS_DIR */
	const sr_workspace *workspace; /* bound as the working dir; NULL: a fresh tmpfs */
	const char *deps_layer;        /* sr_deps_layer_path of the session's layer, or NULL */
	/* Python (0) or JavaScript (a node runner: variables persist the
	 * same way); every run of the kernel is in this language. */
	sr_language language;
	/* Not frozen between runs: what the code and the commands
	 * (sr_kernel_exec) left running goes on, as in a machine of its own
	 * (E2B's sandboxes); the caller freezes it when it wants
	 * (sr_kernel_freeze). false: frozen between runs (above). */
	bool keep_running;
	const char *cgroup_share; /* as sr_run_request's; NULL: none */
} sr_kernel_options;

SR_PUBLIC int sr_kernel_start(const sr_kernel_options *o, sr_kernel **out, sr_error *err);
/* Run req->code (and req->stdin_data, req->allow, req->no_check) in the
 * kernel; req->policy may lower the wall-clock limit and output cap for
 * this run (NULL: the kernel's). files are not supported here (write them
 * into the workspace). Returns like sr_run. */
SR_PUBLIC int sr_kernel_run(sr_kernel *k, const sr_run_request *req, sr_result *res, sr_error *err);
SR_PUBLIC bool sr_kernel_alive(const sr_kernel *k);
/* End it now, from any thread (a run in progress ends as "killed"); the
 * owner still calls sr_kernel_stop. */
SR_PUBLIC void sr_kernel_kill(sr_kernel *k);
/* Kill it and release everything it holds (the workspace stays). */
SR_PUBLIC void sr_kernel_stop(sr_kernel *k);
/* Freeze (true) or thaw (false) everything of the kernel's sandbox: its
 * interpreter, what it left running, its commands. A frozen kernel's
 * memory stays; sr_kernel_run thaws it (so freeze between runs). For a
 * pause of the whole sandbox; any thread. A freeze returns once every
 * task has stopped; one that does not finish within 2 s (a task in
 * uninterruptible sleep) is undone and fails with ETIMEDOUT. */
SR_PUBLIC int sr_kernel_freeze(sr_kernel *k, bool frozen, sr_error *err);

/* A command in a kernel's sandbox, as `docker exec` starts one: it enters
 * the kernel's namespaces (user, mount, pid, net, ipc, uts, cgroup) and
 * cgroup, then takes the same steps the sandbox's own processes took
 * (rlimits, the sandbox uid, every capability dropped, no_new_privs, only
 * its stdio fds, the policy's seccomp filter) before it execs o->path. It
 * is bounded by the kernel layers alone: the checker and the runner's
 * audit hook are Python's, not a command's. It ends, at the latest, with
 * the kernel. */
typedef struct sr_exec_options {
	const char *path;  /* absolute, in the sandbox's filesystem */
	char *const *argv; /* argv[0] first, NULL-terminated */
	char *const *envp; /* NULL: the policy's environment */
	const char *cwd;   /* in the sandbox; NULL: the policy's workdir */
	int stdio[3];      /* its stdin, stdout, stderr: the caller's fds (kept open) */
} sr_exec_options;

typedef struct sr_exec_proc {
	int pidfd;    /* the caller's child: waitid(P_PIDFD) reaps it; caller closes */
	pid_t pid;    /* as the host sees it (its process group too) */
	pid_t ns_pid; /* as the sandbox sees it */
} sr_exec_proc;

SR_PUBLIC int sr_kernel_exec(sr_kernel *k, const sr_exec_options *o, sr_exec_proc *out,
			     sr_error *err);

/* ---- the pre-execution checker ---------------------------------------- */

#define SR_CHECK_MAX_FINDINGS 64

typedef struct sr_finding {
	char rule[8];       /* "SR101" */
	char rule_name[24]; /* "process" */
	char name[80];      /* what was flagged: "os.system", "eval", "open" */
	uint32_t line, col; /* 1-based; col counts characters */
	char message[400];  /* what is wrong and what to do instead */
} sr_finding;

typedef struct sr_check_request {
	const char *code; /* the Python source, UTF-8 */
	size_t code_size;
	const sr_policy *policy;  /* checker settings, dirs, network; NULL: default */
	const char *const *allow; /* per call, on top of the policy's allow list */
	size_t n_allow;
	bool in_process; /* skip the confined child (tests, fuzzing) */
} sr_check_request;

typedef struct sr_check_result {
	sr_finding *findings; /* none: the code may run */
	size_t n_findings;
	size_t n_allowed; /* findings an allow list relaxed */
	bool truncated;   /* more than SR_CHECK_MAX_FINDINGS */
	uint64_t duration_us;
} sr_check_result;

/* Vet Python source before it runs. Returns 0 when it was checked (no
 * findings: clean), < 0 when it could not be: bad input (err->errnum
 * EINVAL, EILSEQ, EFBIG), or the confined checker crashed, ran out of
 * time or memory (other errnos). */
SR_PUBLIC int sr_check(const sr_check_request *req, sr_check_result *res, sr_error *err);
SR_PUBLIC void sr_check_result_free(sr_check_result *res);
/* {"verdict": "clean"|"rejected", "findings": [...], ...} (caller frees) */
SR_PUBLIC char *sr_check_result_to_json(const sr_check_result *res);

typedef struct sr_check_rule {
	const char *id, *name, *summary;
} sr_check_rule;
/* The rule catalogue. */
SR_PUBLIC const sr_check_rule *sr_check_rules(size_t *n);

/* ---- the host ---------------------------------------------------------- */

/* What saferun detected on this host, as JSON (caller frees). */
SR_PUBLIC char *sr_info_json(const char *rootfs_dir);
/* Remove what a previous saferun in this cgroup left behind after a crash:
 * kill every process in each group below saferun's parent group(s)
 * (<own cgroup>/saferun/<id> and <own cgroup>/saferun/<share>/<id> in each
 * hierarchy) and remove the groups and the shares.
 * Only for a process that is the one saferun in its cgroup (saferund):
 * it would end the runs of any other. Returns the number of groups
 * removed, or < 0 (err says which group could not be removed). */
SR_PUBLIC int sr_cleanup_stale(sr_error *err);
/* A share group for the runs of one client of a daemon (a tenant):
 * <own cgroup>/saferun/<name> in each hierarchy, with a CPU weight (v2
 * cpu.weight = weight; v1 cpu.shares = weight * 1024 / 100), so that the
 * runs made below it (sr_run_request.cgroup_share) together get the CPU
 * that weight gives against the other shares and runs. name: 1 to 80 of
 * A-Z a-z 0-9 _ . -, not starting with "sr-"; weight 1 to
 * SR_CGROUP_WEIGHT_MAX. An existing share is kept and its weight written
 * again. sr_cleanup_stale removes shares with the groups in them. */
#define SR_CGROUP_WEIGHT_MAX 10000u
SR_PUBLIC int sr_cgroup_share_create(const char *name, unsigned weight, sr_error *err);
/* What egress runs changed on the host, undone when no sandbox veth is
 * left (docs/network.md): the host table (inet saferun) and the uplinks'
 * forwarding recorded in /run/saferun/egress.forwarding. Returns the
 * SR_NET_CLEANED_* flags of what it undid (0: nothing), or < 0. */
#define SR_NET_CLEANED_TABLE      1
#define SR_NET_CLEANED_FORWARDING 2
SR_PUBLIC int sr_net_cleanup_stale(sr_error *err);

/* ---- text ------------------------------------------------------------- */

/* Are the len bytes at s valid UTF-8 (no overlong forms, no surrogates,
 * nothing past U+10FFFF)? Code must be; front-ends check their input. */
SR_PUBLIC bool sr_utf8_valid(const char *s, size_t len);
/* Base64 (RFC 4648, standard alphabet, padded) of len bytes: malloc'd
 * text, NULL when out of memory. */
SR_PUBLIC char *sr_base64_encode(const void *data, size_t len);
/* Decode strictly: the alphabet, '=' only as the padding, a length that is
 * a multiple of 4, no whitespace. *out is malloc'd (NUL-terminated too).
 * -1: not base64 (*why says how) or out of memory. */
SR_PUBLIC int sr_base64_decode(const char *text, size_t len, unsigned char **out, size_t *out_len,
			       const char **why);

#ifdef __cplusplus
}
#endif
#endif

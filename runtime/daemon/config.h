/* saferund's settings: built-in defaults, then the config file
 * (/etc/saferun/saferund.json or --config FILE), then flags. Every key
 * is validated strictly; an error names the key and the value. */
#ifndef SRD_CONFIG_H
#define SRD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SRD_DEFAULT_CONFIG     "/etc/saferun/saferund.json"
#define SRD_DEFAULT_SOCKET     "/run/saferun/saferund.sock"
#define SRD_DEFAULT_POLICIES   "/etc/saferun/policies"
#define SRD_DEFAULT_WORKSPACES "/run/saferun/workspaces"
/* saferund --stdio: BASE/PID per server (never the daemon's dir) */
#define SRD_STDIO_WORKSPACES "/run/saferun/mcp-stdio"

typedef struct srd_config {
	char *config_file;
	char *socket_path;  /* "" : no unix socket */
	char *socket_group; /* NULL: root's group */
	char *listen;       /* "HOST:PORT" or NULL */
	char *e2b_listen;   /* the E2B listener's "HOST:PORT" (e2b.h), or NULL */
	char *token_file;
	bool insecure_no_token;
	char *policies_dir;
	char *rootfs_dir; /* NULL: the library's default */
	char *default_policy;
	uint64_t max_runs;
	uint64_t queue_depth;
	uint64_t max_body_bytes;
	uint64_t max_connections;
	uint64_t max_pending_connections; /* TCP, not yet authenticated, per listener */
	uint64_t shutdown_grace_ms;
	char *workspaces_dir;        /* sessions' working dirs (one tmpfs each) */
	uint64_t max_sessions;       /* open at once */
	uint64_t session_ttl_ms;     /* idle time before a session is closed */
	uint64_t session_max_age_ms; /* a session's whole life */
	uint64_t max_file_bytes;     /* one file through the files API */
	char *node_id;               /* NULL: not in a fleet (docs/cluster.md) */
	bool policies_dir_given;     /* a missing dir is an error only if asked for */
	char *public_url;            /* base of returned absolute URLs; NULL: from Host */
	char *tenants_file;          /* NULL: one tenant, everyone (tenants.h) */
} srd_config;

/* Fill c from defaults, the config file and argv. Returns 0, 1 when
 * --help or --version was answered (exit 0), or -1 with msg set. */
int srd_config_load(srd_config *c, int argc, char **argv, char *msg, size_t size);
void srd_config_free(srd_config *c);

/* A settings or tenants file's number: a count, a size ("8M" or bytes) or
 * a duration ("30s", or seconds; *out in ms). False when v is not one. */
typedef enum srd_number_kind { SRD_NUM_COUNT, SRD_NUM_SIZE, SRD_NUM_DURATION } srd_number_kind;
struct cJSON;
bool srd_json_number(const struct cJSON *v, srd_number_kind kind, uint64_t *out);
/* What each kind takes, for messages, and its unit (" ms", " bytes"). */
extern const char *const srd_number_want[];
extern const char *const srd_number_unit[];

#endif

/* `saferun run` through saferund: a small HTTP/1.1 client over the
 * daemon's unix socket (daemon_client.h). The code goes only to a server
 * that is root or the caller (SO_PEERCRED): another user's socket at that
 * path could be anyone's program. */
#include "daemon_client.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define ANSWER_MAX  (64u << 20) /* two 1 MiB streams, merged, JSON-escaped, and more */
#define CONNECT_MS  2000
#define SLACK_MS    (5u * 60 * 1000) /* queue and set-up beyond the run's wall time */
#define NO_LIMIT_MS (25ull * 3600 * 1000)
#define NOT_HANDED  0
#define HANDED      1
#define ANSWER_LOST -1

static int say(char *why, size_t size, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int say(char *why, size_t size, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, size, fmt, ap);
	va_end(ap);
	return rc;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A JSON string from bytes that hold no NUL (the daemon takes text). */
static cJSON *text(const char *data, size_t len)
{
	if (memchr(data, '\0', len))
		return NULL;
	char *s = strndup(data, len);
	cJSON *j = s ? cJSON_CreateString(s) : NULL;
	free(s);
	return j;
}

static bool add_text(cJSON *o, const char *key, const char *data, size_t len)
{
	cJSON *j = text(data, len);
	return j && cJSON_AddItemToObject(o, key, j);
}

static bool add_list(cJSON *o, const char *key, char *const *v, size_t n)
{
	cJSON *a = n ? cJSON_AddArrayToObject(o, key) : NULL;
	for (size_t i = 0; a && i < n; i++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(v[i])))
			return false;
	return !n || a;
}

static bool add_env(cJSON *o, char *const *env, size_t n)
{
	cJSON *e = n ? cJSON_AddObjectToObject(o, "env") : NULL;
	for (size_t i = 0; e && i < n; i++) {
		const char *eq = strchr(env[i], '=');
		char *k = eq ? strndup(env[i], (size_t)(eq - env[i])) : NULL;
		bool ok = k && cJSON_AddStringToObject(e, k, eq + 1);
		free(k);
		if (!ok)
			return false;
	}
	return !n || e;
}

static bool add_files(cJSON *o, const sr_file *f, size_t n)
{
	cJSON *fs = n ? cJSON_AddObjectToObject(o, "files") : NULL;
	for (size_t i = 0; fs && i < n; i++)
		if (!add_text(fs, f[i].name, f[i].data, f[i].size))
			return false;
	return !n || fs;
}

/* The request body, or NULL when the run cannot be said in JSON text (a
 * NUL byte in the code, a file or stdin). */
static char *request_body(const srcli_daemon_run *r)
{
	cJSON *o = cJSON_CreateObject();
	char limit[32];
	bool ok = o && add_text(o, "code", r->code, r->code_size) && add_env(o, r->env, r->n_env) &&
		  add_list(o, "allow", r->allow, r->n_allow) &&
		  add_files(o, r->files, r->n_files) &&
		  (!r->stdin_data || add_text(o, "stdin", r->stdin_data, r->stdin_size)) &&
		  add_list(o, "requirements", r->reqs, r->n_reqs);
	if (ok && r->timeout_ms) {
		snprintf(limit, sizeof limit, "%llums", (unsigned long long)r->timeout_ms);
		ok = cJSON_AddStringToObject(o, "timeout", limit);
	}
	if (ok && r->memory_bytes)
		ok = cJSON_AddNumberToObject(o, "memory", (double)r->memory_bytes);
	if (ok && r->cpu_millis)
		ok = cJSON_AddNumberToObject(o, "cpus", r->cpu_millis / 1000.0);
	if (ok && r->language != SR_LANG_PYTHON)
		ok = cJSON_AddStringToObject(o, "language", sr_language_name(r->language));
	if (ok && r->on_output)
		ok = cJSON_AddTrueToObject(o, "stream");
	char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	return s;
}

/* Connected to the daemon, and it is root's or ours; else -1, why. */
static int connect_daemon(const char *path, char *why, size_t size)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof sa.sun_path)
		return say(why, size, -1, "the socket path %s is too long", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = { CONNECT_MS / 1000, 0 };
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return say(why, size, -1, "connect to %s: %s", path, strerror(e));
	}
	struct ucred peer;
	socklen_t len = sizeof peer;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) < 0 ||
	    (peer.uid != 0 && peer.uid != getuid())) {
		close(fd);
		return say(why, size, -1,
			   "%s is served by uid %u, neither root nor you: the code is not "
			   "handed to it",
			   path, (unsigned)peer.uid);
	}
	return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The daemon's answer as it arrives: the status line and headers, then
 * the body, de-chunked. */
struct answer {
	int fd;
	uint64_t until;
	char *raw; /* bytes as received; raw[at..len) not yet decoded */
	size_t len, cap, at;
	int status; /* 0: headers not in yet */
	bool chunked, done;
	char *body; /* the decoded body, NUL-terminated */
	size_t body_len, body_cap;
};

static int grow(char **buf, size_t *cap, size_t need)
{
	if (need + 1 <= *cap)
		return 0;
	size_t c = *cap ? *cap : 1 << 16;
	while (c < need + 1)
		c *= 2;
	char *g = need > ANSWER_MAX ? NULL : realloc(*buf, c);
	if (!g)
		return -1;
	*buf = g;
	*cap = c;
	return 0;
}

static int add_body(struct answer *a, const char *p, size_t n)
{
	if (grow(&a->body, &a->body_cap, a->body_len + n))
		return -1;
	memcpy(a->body + a->body_len, p, n);
	a->body_len += n;
	a->body[a->body_len] = '\0';
	return 0;
}

/* Headers once they are all in; then the chunks that are complete. */
static int decode(struct answer *a)
{
	a->raw[a->len] = '\0';
	if (!a->status) {
		char *end = strstr(a->raw, "\r\n\r\n");
		if (!end)
			return 0;
		*end = '\0';
		if (sscanf(a->raw, "HTTP/1.%*c %d", &a->status) != 1 || a->status <= 0)
			return -1;
		a->chunked = strcasestr(a->raw, "\r\ntransfer-encoding: chunked") != NULL;
		a->at = (size_t)(end + 4 - a->raw);
	}
	while (a->chunked && !a->done) {
		char *line = a->raw + a->at, *eol = strstr(line, "\r\n"), *x;
		if (!eol)
			return 0;
		unsigned long n = strtoul(line, &x, 16);
		if (x == line)
			return -1;
		size_t need = (size_t)(eol + 2 - a->raw) + n + 2;
		if (need > a->len)
			return 0;
		if (n == 0)
			a->done = true;
		else if (add_body(a, eol + 2, n))
			return -1;
		a->at = need;
	}
	if (!a->chunked && a->len > a->at) {
		if (add_body(a, a->raw + a->at, a->len - a->at))
			return -1;
		a->at = a->len;
	}
	return 0;
}

/* More of the answer, by the deadline: 1 read, 0 the daemon closed, -1. */
static int receive(struct answer *a)
{
	for (;;) {
		uint64_t now = now_ms();
		struct pollfd pf = { a->fd, POLLIN, 0 };
		int ready = now < a->until ? poll(&pf, 1, (int)(a->until - now)) : 0;
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready <= 0 || grow(&a->raw, &a->cap, a->len + 65536))
			return -1;
		ssize_t r = recv(a->fd, a->raw + a->len, a->cap - 1 - a->len, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -1 : 0;
		a->len += (size_t)r;
		return decode(a) ? -1 : 1;
	}
}

/* Streamed items, one a line: output to on_output, the last one (the
 * result, or an error) left in *last. */
static void take_lines(const srcli_daemon_run *r, struct answer *a, size_t *line_at, char **last)
{
	char *nl;
	if (!a->body) /* the headers came, none of the body yet */
		return;
	while ((nl = memchr(a->body + *line_at, '\n', a->body_len - *line_at))) {
		*nl = '\0';
		cJSON *j = cJSON_Parse(a->body + *line_at);
		const cJSON *type = cJSON_GetObjectItem(j, "type"),
			    *data = cJSON_GetObjectItem(j, "data");
		bool out = cJSON_IsString(type) && (strcmp(type->valuestring, "stdout") == 0 ||
						    strcmp(type->valuestring, "stderr") == 0);
		if (out && cJSON_IsString(data))
			r->on_output(r->on_output_arg, type->valuestring[3] == 'e' ? 2 : 1,
				     data->valuestring, strlen(data->valuestring));
		else if (!out) {
			free(*last);
			*last = strdup(a->body + *line_at);
		}
		cJSON_Delete(j);
		*line_at = (size_t)(nl + 1 - a->body);
	}
}

static int take_buf(sr_buf *b, const cJSON *v)
{
	const char *s = cJSON_IsString(v) ? v->valuestring : "";
	b->len = b->cap = strlen(s);
	return (b->data = strdup(s)) ? 0 : -1;
}

/* The result JSON (sr_result_to_json's, docs/cli.md) back into what the
 * CLI prints and exits with. */
static int parse_result(const char *body, sr_result *res)
{
	cJSON *j = cJSON_Parse(body);
	const cJSON *st = cJSON_GetObjectItem(j, "status");
	int rc = cJSON_IsString(st) ? -1 : -2;
	for (int s = SR_STATUS_OK; rc == -1 && s <= SR_STATUS_INTERNAL_ERROR; s++)
		if (strcmp(sr_status_name((sr_status)s), st->valuestring) == 0) {
			res->status = (sr_status)s;
			rc = 0;
		}
	const cJSON *v;
	res->exit_code = cJSON_IsNumber(v = cJSON_GetObjectItem(j, "exit_code")) ? v->valueint : -1;
	res->signal = cJSON_IsNumber(v = cJSON_GetObjectItem(j, "signal")) ? v->valueint : 0;
	if (cJSON_IsString(v = cJSON_GetObjectItem(j, "message")))
		snprintf(res->message, sizeof res->message, "%s", v->valuestring);
	if (cJSON_IsString(v = cJSON_GetObjectItem(j, "id")))
		snprintf(res->id, sizeof res->id, "%s", v->valuestring);
	v = cJSON_GetObjectItem(j, "path");
	res->warm = cJSON_IsString(v) && strcmp(v->valuestring, "warm") == 0;
	if (rc == 0 && (take_buf(&res->out, cJSON_GetObjectItem(j, "stdout")) ||
			take_buf(&res->err, cJSON_GetObjectItem(j, "stderr"))))
		rc = -1;
	cJSON_Delete(j);
	return rc;
}

/* The error line of a refusal ({"error": ...}), for why. */
static void refusal(const char *body, int status, char *why, size_t size)
{
	cJSON *j = cJSON_Parse(body);
	const cJSON *e = cJSON_GetObjectItem(j, "error");
	say(why, size, 0, "the daemon answered %d: %s", status,
	    cJSON_IsString(e) ? e->valuestring : "(no error field)");
	cJSON_Delete(j);
}

int srcli_daemon_run_code(const srcli_daemon_run *r, sr_result *res, char **body_out, char *why,
			  size_t why_size)
{
	const char *path = getenv(SRCLI_DAEMON_SOCKET_ENV);
	if (!path)
		path = SRCLI_DAEMON_SOCKET;
	if (!*path)
		return say(why, why_size, NOT_HANDED, SRCLI_DAEMON_SOCKET_ENV " is empty");
	char *body = request_body(r);
	if (!body)
		return say(why, why_size, NOT_HANDED,
			   "the code, a file or stdin holds a NUL byte (the daemon takes text)");
	int fd = connect_daemon(path, why, why_size);
	if (fd < 0) {
		free(body);
		return NOT_HANDED;
	}
	char head[256];
	int hl = snprintf(head, sizeof head,
			  "POST /v1/run HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
			  "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			  strlen(body));
	int sent = send_all(fd, head, (size_t)hl) || send_all(fd, body, strlen(body));
	free(body);
	if (sent) {
		close(fd);
		return say(why, why_size, NOT_HANDED, "send the run to %s: %s", path,
			   strerror(errno));
	}
	struct answer a = { .fd = fd,
			    .until = now_ms() + (r->timeout_ms ? r->timeout_ms : NO_LIMIT_MS) +
				     SLACK_MS };
	char *last = NULL;
	size_t line_at = 0;
	int got;
	while ((got = receive(&a)) > 0 && !a.done)
		if (a.status == 200 && r->on_output)
			take_lines(r, &a, &line_at, &last);
	if (a.status == 200 && r->on_output)
		take_lines(r, &a, &line_at, &last);
	int rc;
	if (got < 0 || !a.status)
		rc = say(why, why_size, ANSWER_LOST, "no answer from the daemon at %s", path);
	else if (a.status != 200)
		rc = (refusal(a.body ? a.body : "", a.status, why, why_size), NOT_HANDED);
	else if (parse_result(r->on_output ? (last ? last : "") : (a.body ? a.body : ""), res))
		rc = say(why, why_size, ANSWER_LOST, "the daemon's answer is not a result: %.200s",
			 last ? last : "");
	else if (!(*body_out = strdup(r->on_output ? last : a.body)))
		rc = say(why, why_size, ANSWER_LOST, "out of memory");
	else
		rc = HANDED;
	close(fd);
	free(a.raw);
	free(a.body);
	free(last);
	return rc;
}

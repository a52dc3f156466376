/* libFuzzer harness for multipart/form-data uploads (AgentRun's
 * /sessions/{id}/copy-to, E2B's files API) as saferund takes them: a real
 * server (server.c) on a unix socket, which reads the request and parses
 * its body with libmicrohttpd's post processor into srd_request.parts,
 * then the AgentRunPlus upload handler's checks (the "file" part, its
 * file name) against an empty session store. Input: the Content-Type
 * header's value, '\n', the body. Invariants: at most SRD_MAX_PARTS
 * parts, each with a name and NUL-terminated data of its size, their
 * total within the body cap; an error has its reason; the answer is an
 * HTTP response with a JSON body. libmicrohttpd is not instrumented: the
 * coverage guiding the fuzzer is saferund's own. This file defines
 * srd_route (the linker then leaves routes.o out, as in
 * tests/unit/test_daemon_server.c) and a quiet log. Build: tests/CMakeLists.txt. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../runtime/daemon/agentrun.h"
#include "../../runtime/daemon/log.h"
#include "../../runtime/daemon/routes.h"
#include "../../runtime/daemon/server.h"
#include "../../runtime/daemon/session_routes.h"
#include "../../runtime/daemon/sessions.h"

#define BODY_CAP (8u << 10)

static void expect(int ok)
{
	if (!ok)
		__builtin_trap();
}

static srd_config cfg;
static srd_ctx ctx;
static srd_listener listener;
static srd_server *server;
static char dir[] = "/tmp/saferun-fuzz-multipart-XXXXXX";
static char sock_path[108];

/* The request log, quiet (log.o is left out likewise). */
void srd_log_json(const char *event, cJSON *obj)
{
	(void)event;
	cJSON_Delete(obj);
}

void srd_log(const char *level, const char *event, const char *fmt, ...)
{
	(void)level;
	(void)event;
	(void)fmt;
}

void srd_log_tenant(const char *level, const char *event, const char *tenant, const char *fmt, ...)
{
	(void)level;
	(void)event;
	(void)tenant;
	(void)fmt;
}

static void check_name_rule(const char *name)
{
	unsigned status = 0;
	const char *why = srd_arp_bad_name(name, &status);
	bool bad = !name || !*name || strstr(name, "..") || strchr(name, '/') ||
		   strchr(name, '\\') || name[0] == '.';
	expect(!why == !bad);
	expect(!why || status == 400 || status == 403);
}

void srd_route(srd_ctx *c, srd_request *req, srd_response *res)
{
	expect(req->n_parts <= SRD_MAX_PARTS);
	expect(!req->multipart_error || req->multipart_why);
	size_t total = 0;
	for (size_t i = 0; i < req->n_parts; i++) {
		const srd_part *p = &req->parts[i];
		expect(p->name != NULL && p->data != NULL && p->data[p->size] == '\0');
		total += p->size;
		check_name_rule(p->filename);
	}
	expect(total <= BODY_CAP);
	/* the upload handler: 422 without a "file" part, else the session
	 * (none here: 404) */
	srd_handle_arp_copy_to(c, req, res);
	expect(res->status == 422 || res->status == 404);
}

static void remove_dir(void)
{
	srd_server_stop(server);
	close(listener.fd);
	unlink(sock_path);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	char msg[256];
	expect(mkdtemp(dir) != NULL);
	cfg = (srd_config){ .max_body_bytes = BODY_CAP,
			    .max_connections = 1024, /* a closing connection still counts */
			    .max_sessions = 4,
			    .workspaces_dir = dir };
	ctx.cfg = &cfg;
	expect(srd_metrics_init(&ctx.metrics, NULL) == 0 && srd_gate_init(&ctx.gate, 1, 1) == 0);
	expect(srd_tenants_load(&cfg, &ctx.tenants, msg, sizeof msg) == 0);
	expect(srd_sessions_open(&cfg, &ctx.sessions, msg, sizeof msg) == 0);
	snprintf(sock_path, sizeof sock_path, "%s/s.sock", dir);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, sock_path, sizeof sock_path);
	listener = (srd_listener){ .is_unix = true };
	snprintf(listener.name, sizeof listener.name, "%s", sock_path);
	listener.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	expect(bind(listener.fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
	       listen(listener.fd, 16) == 0);
	expect(srd_server_start(&ctx, &listener, 1, &server, msg, sizeof msg) == 0);
	atexit(remove_dir);
	return 0;
}

static char *request(const uint8_t *data, size_t size, size_t *len)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t tlen = nl ? (size_t)(nl - data) : size;
	const char *body = nl ? (const char *)nl + 1 : "";
	size_t blen = nl ? size - tlen - 1 : 0;
	char type[512];
	size_t n = 0;
	/* a header's value ends at CR, LF or NUL: what reaches the server */
	for (; n < tlen && n < sizeof type - 1 && data[n] && data[n] != '\r'; n++)
		type[n] = (char)data[n];
	type[n] = '\0';
	char head[768];
	int hl = snprintf(head, sizeof head,
			  "POST /sessions/x/copy-to HTTP/1.1\r\nHost: localhost\r\n"
			  "Content-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			  type, blen);
	char *req = malloc((size_t)hl + blen);
	if (req) {
		memcpy(req, head, (size_t)hl);
		memcpy(req + hl, body, blen);
	}
	*len = (size_t)hl + blen;
	return req;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len;
	char *req = request(data, size, &len);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, sock_path, sizeof sock_path);
	expect(req && fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	/* EINTR: libFuzzer's leak check stops every thread for a moment */
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, req + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	char buf[8192];
	size_t got = 0;
	for (ssize_t n; got < sizeof buf - 1;) {
		n = read(fd, buf + got, sizeof buf - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	close(fd);
	free(req);
	/* every request gets an answer: the handler's 422/404, or the
	 * server's own 4xx (a body over the cap, a bad request line) */
	int status = 0;
	if (sscanf(buf, "HTTP/1.1 %d", &status) != 1 || status < 400 || status >= 500) {
		fprintf(stderr, "the answer: \"%.200s\"\n", buf);
		__builtin_trap();
	}
	return 0;
}

#include "server.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "auth.h"
#include "e2b.h"
#include "http.h"
#include "log.h"
#include "routes.h"

/* Idle keep-alive connections close after this; a run in progress is
 * exempt (see dispatch). */
#define IDLE_TIMEOUT_S 120u
/* A TCP connection has this long between bytes until it has sent an
 * authenticated request: idle or trickling ones do not hold a place. */
#define PENDING_TIMEOUT_S 10u

/* Set in a connection's thread while it closes after a streamed response:
 * MHD's note that the handler "reported internal error" is not one. */
static __thread bool closing_after_stream;

/* A TCP connection that has not yet sent a request with a tenant's token. */
struct pending {
	struct pending *prev, *next;
	int fd;
	bool listed; /* in its endpoint's list; off once authenticated or evicted */
};

struct endpoint {
	struct MHD_Daemon *mhd;
	srd_ctx *ctx;
	srd_listener *l;
	pthread_mutex_t lock;
	struct pending *oldest, *newest; /* the pending connections, oldest first */
	unsigned n_pending;
};

struct srd_server {
	struct endpoint ep[SRD_MAX_LISTENERS];
	int n;
};

/* One request on a connection, from its headers to its completion. */
struct exchange {
	struct endpoint *ep;
	srd_peer peer;
	char *body;
	size_t len, cap, received;
	bool begun, too_large, answered;
	bool nul_in_path; /* the path as sent has a %00 (cut there once decoded) */
	bool http10;      /* an HTTP/1.0 request: a streamed answer is close-delimited */
	bool streamed;    /* answered with a streamed response, written by the handler */
	unsigned status;
	size_t bytes_out;
	uint64_t start_ms;
	/* url: decoded as sent, for routing; path: printable, for the log */
	char method[16], url[2048], path[2048], error_field[128];
	char raw_path[2048]; /* as sent, printable: for the message about a %00 */
};

static void fill_peer(srd_peer *p, struct MHD_Connection *c, bool is_unix)
{
	p->is_unix = is_unix;
	const union MHD_ConnectionInfo *fdi =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	p->fd = fdi ? fdi->connect_fd : -1;
	if (is_unix) {
		const union MHD_ConnectionInfo *ci =
		    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		struct ucred cred;
		socklen_t len = sizeof cred;
		if (ci && getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
			p->have_cred = true;
			p->pid = cred.pid;
			p->uid = cred.uid;
			p->gid = cred.gid;
		}
		return;
	}
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	char host[INET6_ADDRSTRLEN] = "?";
	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
		snprintf(p->addr, sizeof p->addr, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
		snprintf(p->addr, sizeof p->addr, "[%s]:%u", host, ntohs(in6->sin6_port));
	}
}

static enum MHD_Result send_response(struct exchange *x, struct MHD_Connection *c,
				     srd_response *res)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(res->body_len, res->body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(res->body);
		return MHD_NO;
	}
	res->body = NULL; /* MHD frees it */
	char num[16];
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				res->content_type ? res->content_type : "application/json");
	if (res->retry_after) {
		snprintf(num, sizeof num, "%u", res->retry_after);
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, num);
	}
	if (res->allow[0])
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, res->allow);
	if (res->content_disposition[0])
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_DISPOSITION,
					res->content_disposition);
	for (size_t i = 0; i < res->n_headers; i++)
		MHD_add_response_header(r, res->headers[i].name, res->headers[i].value);
	/* which node answered: the router's (and a client's) view of a fleet */
	if (x->ep->ctx->cfg->node_id)
		MHD_add_response_header(r, "Saferun-Node", x->ep->ctx->cfg->node_id);
	if (res->status == 401)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"saferund\"");
	enum MHD_Result ok = MHD_queue_response(c, res->status, r);
	MHD_destroy_response(r);
	if (ok == MHD_YES) {
		x->answered = true;
		x->status = res->status;
		x->bytes_out = res->body_len;
		snprintf(x->error_field, sizeof x->error_field, "%s", res->error_field);
	}
	return ok;
}

static enum MHD_Result send_error(struct exchange *x, struct MHD_Connection *c, unsigned status,
				  const char *fmt, const char *arg)
{
	srd_ferr e = { 0 };
	srd_fail(&e, status, NULL, fmt, arg);
	srd_response res = { 0 };
	srd_respond_error(&res, &e);
	return send_response(x, c, &res);
}

/* A 400 naming the path as it was sent: decoded, a %00 would end it early
 * and the prefix would name another file or route. */
static enum MHD_Result send_path_error(struct exchange *x, struct MHD_Connection *c,
				       const char *raw)
{
	srd_ferr e = { 0 };
	srd_fail(&e, 400, "path",
		 "the request path \"%s\" holds an encoded NUL (%%00); no path may hold a NUL "
		 "byte",
		 raw);
	srd_response res = { 0 };
	srd_respond_error(&res, &e);
	return send_response(x, c, &res);
}

static enum MHD_Result refuse_too_large(struct exchange *x, struct MHD_Connection *c)
{
	char cap[32];
	snprintf(cap, sizeof cap, "%llu", (unsigned long long)x->ep->ctx->cfg->max_body_bytes);
	return send_error(x, c, 413, "the request body is over the %s byte cap (max_body_size)",
			  cap);
}

static void unlist_locked(struct endpoint *ep, struct pending *p)
{
	*(p->prev ? &p->prev->next : &ep->oldest) = p->next;
	*(p->next ? &p->next->prev : &ep->newest) = p->prev;
	p->listed = false;
	ep->n_pending--;
}

/* Connections before authentication are capped per listener, and a new
 * one pushes out the oldest rather than being refused: idle connections
 * (an attacker needs no token to open them) then cannot fill
 * max_connections and lock token holders out, and a client that sends its
 * request at once is authenticated long before it would be pushed out. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct endpoint *ep = cls;
	struct pending *p = *socket_context;
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		pthread_mutex_lock(&ep->lock);
		if (p && p->listed)
			unlist_locked(ep, p);
		pthread_mutex_unlock(&ep->lock);
		free(p);
		*socket_context = NULL;
		return;
	}
	const union MHD_ConnectionInfo *fdi =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ep->l->need_token || !fdi || !(p = calloc(1, sizeof *p)))
		return;
	p->fd = fdi->connect_fd;
	pthread_mutex_lock(&ep->lock);
	if (ep->n_pending >= ep->ctx->cfg->max_pending_connections && ep->oldest) {
		/* its thread sees the end of the stream and closes it */
		shutdown(ep->oldest->fd, SHUT_RDWR);
		unlist_locked(ep, ep->oldest);
	}
	p->listed = true;
	p->prev = ep->newest;
	*(ep->newest ? &ep->newest->next : &ep->oldest) = p;
	ep->newest = p;
	ep->n_pending++;
	pthread_mutex_unlock(&ep->lock);
	*socket_context = p;
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, PENDING_TIMEOUT_S);
}

/* A request on c had a tenant's token: c is no longer pending. */
static void authenticated(struct endpoint *ep, struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct pending *p = ci ? ci->socket_context : NULL;
	if (!p)
		return;
	pthread_mutex_lock(&ep->lock);
	bool was = p->listed;
	if (was)
		unlist_locked(ep, p);
	pthread_mutex_unlock(&ep->lock);
	if (was)
		MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, IDLE_TIMEOUT_S);
}

static const char *header_of(void *conn, const char *name)
{
	return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

/* First call for a request: headers only. Refuse early what can be. */
static enum MHD_Result begin(struct exchange *x, struct MHD_Connection *c, const char *url,
			     const char *method)
{
	struct endpoint *ep = x->ep;
	x->begun = true;
	atomic_fetch_add(&ep->ctx->requests_active, 1);
	x->start_ms = srd_now_ms();
	snprintf(x->method, sizeof x->method, "%s", method);
	snprintf(x->url, sizeof x->url, "%s", url);
	snprintf(x->path, sizeof x->path, "%s", url);
	/* The path is logged as JSON: keep it printable ASCII. */
	for (char *p = x->path; *p; p++)
		*p = *p < 0x20 || *p > 0x7e ? '?' : *p;
	fill_peer(&x->peer, c, ep->l->is_unix);
	const char *auth =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	unsigned status;
	const char *why;
	if (ep->l->e2b) /* E2B's headers: an API key, or a sandbox's token */
		x->peer.tenant = srd_e2b_identify(ep->ctx, &x->peer, ep->l->need_token, url,
						  header_of, c, &status, &why);
	else
		x->peer.tenant = srd_tenants_identify(&ep->ctx->tenants, ep->ctx->token, &x->peer,
						      ep->l->need_token, auth, &status, &why);
	if (!x->peer.tenant && ep->l->e2b) { /* in E2B's shape, for its SDKs */
		srd_response res = { 0 };
		srd_e2b_error(&res, status, why);
		return send_response(x, c, &res);
	}
	if (!x->peer.tenant)
		return send_error(x, c, status, "%s", why);
	authenticated(ep, c);
	/* Cut short, it would name another file or route. */
	if (strlen(url) >= sizeof x->url)
		return send_error(x, c, 414, "the path is over %s bytes", "2047");
	const char *cl =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > ep->ctx->cfg->max_body_bytes) {
		x->too_large = true;
		return refuse_too_large(x, c);
	}
	return MHD_YES;
}

/* Body bytes: keep them up to the cap. Past it (a chunked body has no
 * Content-Length to refuse early) drop them: refuse_mid_upload answers. */
static void receive(struct exchange *x, const char *data, size_t size)
{
	x->received += size;
	if (x->answered || x->too_large)
		return;
	uint64_t max = x->ep->ctx->cfg->max_body_bytes;
	if (x->len + size > max) {
		x->too_large = true;
		free(x->body);
		x->body = NULL;
		x->len = x->cap = 0;
		return;
	}
	if (x->len + size + 1 > x->cap) {
		size_t cap = x->cap ? x->cap : 16384;
		while (cap < x->len + size + 1)
			cap *= 2;
		char *grown = realloc(x->body, cap);
		if (!grown) {
			x->too_large = true; /* answered as 413: nothing better to say */
			return;
		}
		x->body = grown;
		x->cap = cap;
	}
	memcpy(x->body + x->len, data, size);
	x->len += size;
	x->body[x->len] = '\0';
}

#define STRINGIFY_(x) #x
#define STRINGIFY(x)  STRINGIFY_(x)

/* Parts arrive in chunks: a chunk at offset 0 starts a part (an empty
 * part is one call of size 0), later chunks continue it. */
struct multipart {
	srd_request *req;
	uint64_t max, total;
};

static enum MHD_Result on_part(void *cls, enum MHD_ValueKind kind, const char *key,
			       const char *filename, const char *content_type,
			       const char *transfer_encoding, const char *data, uint64_t off,
			       size_t size)
{
	(void)kind;
	(void)content_type;
	(void)transfer_encoding;
	struct multipart *m = cls;
	srd_request *req = m->req;
	if (m->total + size > m->max) {
		req->multipart_why = "the parts are over the body cap";
		return MHD_NO;
	}
	if (off == 0) {
		if (req->n_parts == SRD_MAX_PARTS) {
			req->multipart_why = "over " STRINGIFY(SRD_MAX_PARTS) " parts";
			return MHD_NO;
		}
		srd_part *np = &req->parts[req->n_parts++];
		np->name = strdup(key ? key : "");
		np->filename = filename ? strdup(filename) : NULL;
		if (!np->name || (filename && !np->filename)) {
			req->multipart_why = "out of memory";
			return MHD_NO;
		}
	}
	srd_part *part = req->n_parts ? &req->parts[req->n_parts - 1] : NULL;
	if (!part || off != part->size) {
		req->multipart_why = "a part's data arrived out of order";
		return MHD_NO;
	}
	char *grown = realloc(part->data, part->size + size + 1);
	if (!grown) {
		req->multipart_why = "out of memory";
		return MHD_NO;
	}
	part->data = grown;
	memcpy(part->data + part->size, data, size);
	part->size += size;
	part->data[part->size] = '\0';
	m->total += size;
	return MHD_YES;
}

static bool is_multipart(const char *type)
{
	static const char mp[] = "multipart/form-data";
	return type && strncasecmp(type, mp, sizeof mp - 1) == 0 &&
	       (!type[sizeof mp - 1] || type[sizeof mp - 1] == ';' ||
		isspace((unsigned char)type[sizeof mp - 1]));
}

/* With libmicrohttpd's own parser, over the body already read. It wants
 * the boundary unquoted (as curl and Python send it). */
static void parse_multipart(struct exchange *x, struct MHD_Connection *c, srd_request *req)
{
	struct multipart m = { .req = req, .max = x->ep->ctx->cfg->max_body_bytes };
	struct MHD_PostProcessor *pp = MHD_create_post_processor(c, 16384, on_part, &m);
	if (!pp) {
		req->multipart_error = true;
		req->multipart_why = "the Content-Type has no usable boundary "
				     "(multipart/form-data; boundary=...)";
		return;
	}
	bool ok = MHD_post_process(pp, x->body ? x->body : "", x->len) == MHD_YES;
	/* MHD_NO from destroy: the body ended inside a part */
	ok = MHD_destroy_post_processor(pp) == MHD_YES && ok;
	if (ok && req->n_parts == 0)
		req->multipart_why = "no parts between the Content-Type's boundaries";
	if (!ok && !req->multipart_why)
		req->multipart_why = "the body is not well-formed multipart/form-data "
				     "(cut short, or a wrong boundary)";
	req->multipart_error = !ok || req->n_parts == 0;
}

static void free_parts(srd_request *req)
{
	for (size_t i = 0; i < req->n_parts; i++) {
		free(req->parts[i].name);
		free(req->parts[i].filename);
		free(req->parts[i].data);
	}
	req->n_parts = 0;
}

static const char *lookup_header(const srd_request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

static const char *lookup_query(const srd_request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

/* The whole request is here: route it. A run may take minutes, so the
 * idle timeout is off while it runs and restarts after it. */
static enum MHD_Result dispatch(struct exchange *x, struct MHD_Connection *c)
{
	if (x->too_large)
		return refuse_too_large(x, c);
	/* After the body (a client still sending it would see the connection
	 * reset instead of the answer). */
	if (x->nul_in_path)
		return send_path_error(x, c, x->raw_path);
	srd_request req = {
		.method = strcmp(x->method, "HEAD") == 0 ? "GET" : x->method,
		.path = x->path,
		.raw_path = x->url,
		.body = x->body,
		.body_len = x->len,
		.content_type =
		    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
		.peer = &x->peer,
		.header = lookup_header,
		.query = lookup_query,
		.conn = c,
	};
	if (is_multipart(req.content_type))
		parse_multipart(x, c, &req);
	srd_stream st = { .fd = x->peer.fd,
			  .chunked = !x->http10,
			  .head = strcmp(x->method, "HEAD") == 0,
			  .node_id = x->ep->ctx->cfg->node_id };
	srd_response res = { .stream = x->peer.fd >= 0 ? &st : NULL };
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
	if (x->ep->l->e2b)
		srd_e2b_route(x->ep->ctx, &req, &res);
	else
		srd_route(x->ep->ctx, &req, &res);
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, IDLE_TIMEOUT_S);
	free_parts(&req);
	if (res.streamed && st.started) {
		/* The handler wrote the answer on the socket itself (MHD 0.9.75
		 * has no way to push a body from this thread): end it, and close
		 * the connection. */
		srd_stream_end(&st);
		free(res.body);
		x->answered = x->streamed = true;
		x->status = res.status;
		x->bytes_out = st.bytes;
		if (!st.gone)
			shutdown(x->peer.fd, SHUT_WR);
		closing_after_stream = true;
		return MHD_NO;
	}
	srd_stream_end(&st);
	res.stream = NULL;
	return send_response(x, c, &res);
}

/* MHD hands the URI over as sent, before it decodes it: the one place a
 * %00 shows (decoded, it cuts the path short). The exchange starts here. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	(void)c;
	struct exchange *x = calloc(1, sizeof *x);
	if (!x)
		return NULL; /* on_request closes the connection */
	x->ep = cls;
	size_t n = strcspn(uri, "?"), i;
	for (i = 0; i + 2 < n && !x->nul_in_path; i++)
		x->nul_in_path = uri[i] == '%' && uri[i + 1] == '0' && uri[i + 2] == '0';
	for (i = 0; i < n && i + 1 < sizeof x->raw_path; i++)
		x->raw_path[i] = uri[i] < 0x20 || uri[i] > 0x7e ? '?' : uri[i];
	x->raw_path[i] = '\0';
	return x;
}

/* Everything on the socket, waiting at most 5 s for room each time. */
static bool write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EAGAIN) {
			struct pollfd pf = { .fd = fd, .events = POLLOUT };
			if (poll(&pf, 1, 5000) <= 0)
				return false;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* Read and drop what the client still sends until it closes, for at most
 * DRAIN_MS and DRAIN_BYTES: closed with unread data, the socket would be
 * reset and the client could lose the answer before reading it. */
#define DRAIN_MS    5000
#define DRAIN_BYTES (4u << 20)
static void drain(int fd)
{
	char buf[16384];
	size_t total = 0;
	uint64_t end = srd_now_ms() + DRAIN_MS;
	for (uint64_t now; total < DRAIN_BYTES && (now = srd_now_ms()) < end;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, (int)(end - now)) <= 0)
			return;
		ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return;
		total += n > 0 ? (size_t)n : 0;
	}
}

/* A body that has just gone over the cap, while it streams in. MHD 0.9.75
 * queues a response only before the body or after all of it
 * (MHD_queue_response), so the 413 is written on the socket here and the
 * connection closes (MHD_NO); nothing of MHD's is in flight on it yet. */
static enum MHD_Result refuse_mid_upload(struct exchange *x)
{
	char cap[32], head[192];
	srd_ferr e = { 0 };
	snprintf(cap, sizeof cap, "%llu", (unsigned long long)x->ep->ctx->cfg->max_body_bytes);
	srd_fail(&e, 413, NULL, "the request body is over the %s byte cap (max_body_size)", cap);
	cJSON *doc = srd_ferr_json(&e);
	char *body = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	x->answered = true;
	x->status = 413;
	if (!body || x->peer.fd < 0) {
		free(body);
		return MHD_NO;
	}
	size_t len = strlen(body);
	int n = snprintf(head, sizeof head,
			 "HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			 len);
	if (write_all(x->peer.fd, head, (size_t)n) && write_all(x->peer.fd, body, len)) {
		x->bytes_out = len;
		shutdown(x->peer.fd, SHUT_WR);
		drain(x->peer.fd);
	}
	free(body);
	return MHD_NO;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *data,
				  size_t *size, void **state)
{
	(void)cls;
	struct exchange *x = *state;
	if (!x)
		return MHD_NO;
	if (!x->begun) {
		x->http10 = version && strcmp(version, "HTTP/1.0") == 0;
		return begin(x, c, url, method);
	}
	if (*size) {
		receive(x, data, *size);
		*size = 0;
		return x->too_large && !x->answered ? refuse_mid_upload(x) : MHD_YES;
	}
	return x->answered ? MHD_YES : dispatch(x, c);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
			 enum MHD_RequestTerminationCode toe)
{
	(void)c;
	struct endpoint *ep = cls;
	struct exchange *x = *state;
	*state = NULL;
	if (!x)
		return;
	if (!x->begun) { /* it ended before its headers did: nothing to log */
		free(x);
		return;
	}
	srd_metrics_request(&ep->ctx->metrics, x->status);
	cJSON *line = cJSON_CreateObject();
	cJSON_AddStringToObject(line, "method", x->method);
	cJSON_AddStringToObject(line, "path", x->path);
	cJSON_AddNumberToObject(line, "status", x->status);
	cJSON_AddItemToObject(line, "peer", srd_peer_json(&x->peer));
	cJSON_AddStringToObject(line, "listener", ep->l->name);
	cJSON_AddNumberToObject(line, "ms", (double)(srd_now_ms() - x->start_ms));
	cJSON_AddNumberToObject(line, "bytes_in", (double)x->received);
	cJSON_AddNumberToObject(line, "bytes_out", (double)x->bytes_out);
	if (x->error_field[0])
		cJSON_AddStringToObject(line, "field", x->error_field);
	if (x->streamed)
		cJSON_AddBoolToObject(line, "streamed", true);
	else if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
		cJSON_AddNumberToObject(line, "terminated", toe);
	srd_log_json("request", line);
	closing_after_stream = false;
	atomic_fetch_sub(&ep->ctx->requests_active, 1);
	free(x->body);
	free(x);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	if (closing_after_stream)
		return;
	char msg[512];
	vsnprintf(msg, sizeof msg, fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	srd_log("warning", "http", "%s", msg);
}

int srd_server_start(srd_ctx *ctx, srd_listener *ls, int n, srd_server **out, char *msg,
		     size_t size)
{
	srd_server *s = calloc(1, sizeof *s);
	if (!s)
		return snprintf(msg, size, "out of memory"), -1;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			 MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
	for (int i = 0; i < n; i++, s->n++) {
		struct endpoint *ep = &s->ep[i];
		*ep = (struct endpoint){ .ctx = ctx, .l = &ls[i] };
		pthread_mutex_init(&ep->lock, NULL);
		ep->mhd = MHD_start_daemon(
		    flags, 0, NULL, NULL, on_request, ep, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log,
		    NULL, MHD_OPTION_URI_LOG_CALLBACK, on_uri, ep, MHD_OPTION_LISTEN_SOCKET,
		    ls[i].fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed, ep,
		    MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT,
		    (unsigned)ctx->cfg->max_connections, MHD_OPTION_NOTIFY_CONNECTION,
		    on_connection, ep, MHD_OPTION_END);
		if (!ep->mhd) {
			snprintf(msg, size, "start the HTTP server on %s", ls[i].name);
			srd_server_stop(s);
			return -1;
		}
	}
	*out = s;
	return 0;
}

void srd_server_quiesce(srd_server *s)
{
	for (int i = 0; i < s->n; i++)
		if (s->ep[i].mhd)
			MHD_quiesce_daemon(s->ep[i].mhd); /* the fd stays ours */
}

void srd_server_stop(srd_server *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n; i++) {
		if (s->ep[i].mhd)
			MHD_stop_daemon(s->ep[i].mhd);
		pthread_mutex_destroy(&s->ep[i].lock);
	}
	free(s);
}

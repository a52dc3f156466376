/* MCP's stdio transport: one JSON-RPC message per line on stdin, one
 * answer per line on stdout (nothing else is written there: logs go to
 * stderr). Each request runs on a thread of its own, so a ping is
 * answered while a run is going. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "mcp.h"
#include "sessions.h"

struct stdio_server {
	srd_ctx *ctx;
	int out_fd;
	srd_peer peer;
	pthread_mutex_t lock; /* the writes to out_fd, busy, broken */
	pthread_cond_t idle;
	unsigned busy;
	bool broken;
	char version[16]; /* what the last initialize agreed ("": none yet) */
};

struct job {
	struct stdio_server *s;
	cJSON *msg;
};

static void emit(struct stdio_server *s, cJSON *body)
{
	char *text = body ? cJSON_PrintUnformatted(body) : NULL;
	cJSON_Delete(body);
	if (!text)
		return;
	size_t len = strlen(text);
	text[len] = '\n'; /* the NUL's place: written as len + 1 bytes */
	pthread_mutex_lock(&s->lock);
	for (size_t off = 0; off <= len && !s->broken;) {
		ssize_t n = write(s->out_fd, text + off, len + 1 - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			s->broken = true; /* the client is gone */
		else
			off += (size_t)n;
	}
	pthread_mutex_unlock(&s->lock);
	free(text);
}

/* A notification (progress) goes out like an answer, between them. */
static int notify(void *arg, cJSON *msg)
{
	struct stdio_server *s = arg;
	emit(s, msg);
	pthread_mutex_lock(&s->lock);
	bool broken = s->broken;
	pthread_mutex_unlock(&s->lock);
	return broken ? -1 : 0;
}

static void *work(void *arg)
{
	struct job *j = arg;
	struct stdio_server *s = j->s;
	srd_mcp_reply out;
	char version[16];
	pthread_mutex_lock(&s->lock);
	memcpy(version, s->version, sizeof version);
	pthread_mutex_unlock(&s->lock);
	srd_mcp_call call = { .version = version[0] ? version : NULL,
			      .notify = notify,
			      .notify_arg = s };
	srd_mcp_dispatch_call(s->ctx, j->msg, &s->peer, &call, &out);
	if (out.initialize) {
		pthread_mutex_lock(&s->lock);
		memcpy(s->version, out.version, sizeof s->version);
		pthread_mutex_unlock(&s->lock);
	}
	emit(s, out.body);
	cJSON_Delete(j->msg);
	free(j);
	pthread_mutex_lock(&s->lock);
	if (--s->busy == 0)
		pthread_cond_broadcast(&s->idle);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static void handle_line(struct stdio_server *s, char *line, size_t len)
{
	while (len && (line[len - 1] == '\r' || line[len - 1] == ' '))
		len--;
	if (!len)
		return;
	cJSON *msg;
	srd_mcp_reply out;
	if (srd_mcp_parse(line, len, &msg, &out)) {
		emit(s, out.body);
		return;
	}
	struct job *j = malloc(sizeof *j);
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&s->lock);
	s->busy++;
	pthread_mutex_unlock(&s->lock);
	if (j) {
		*j = (struct job){ .s = s, .msg = msg };
		if (pthread_create(&t, &attr, work, j) != 0)
			work(j); /* no thread to spare: answer it here */
	} else {
		cJSON_Delete(msg);
		pthread_mutex_lock(&s->lock);
		s->busy--;
		pthread_mutex_unlock(&s->lock);
	}
	pthread_attr_destroy(&attr);
}

static void too_long(struct stdio_server *s, size_t max)
{
	emit(s, srd_mcp_error(NULL, SRD_RPC_INVALID_REQUEST,
			      "Invalid Request: a message is over %zu bytes (max_body_size)", max));
}

int srd_mcp_stdio(srd_ctx *ctx, int in_fd, int out_fd, int stop_fd,
		  bool (*stop)(srd_ctx *ctx, int stop_fd))
{
	struct stdio_server s = { .ctx = ctx, .out_fd = out_fd, .peer = { .fd = -1 } };
	snprintf(s.peer.addr, sizeof s.peer.addr, "stdio");
	s.peer.tenant = &ctx->tenants.t[0]; /* stdio has one client: the default tenant */
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.idle, NULL);
	size_t max = ctx->cfg->max_body_bytes, len = 0, cap = 65536;
	char *buf = malloc(cap);
	bool skipping = false, eof = false; /* skipping: the rest of an over-long line */
	while (buf && !eof) {
		struct pollfd p[2] = { { .fd = in_fd, .events = POLLIN },
				       { .fd = stop_fd, .events = POLLIN } };
		int ready = poll(p, stop_fd >= 0 ? 2 : 1, 1000);
		srd_sessions_reap(ctx->sessions);
		if (ready < 0 && errno != EINTR)
			break;
		if (ready <= 0)
			continue;
		if (p[1].revents && stop(ctx, stop_fd))
			break;
		if (!p[0].revents)
			continue;
		if (len + 65536 > cap) {
			char *grown = realloc(buf, cap * 2);
			if (!grown)
				break;
			buf = grown;
			cap *= 2;
		}
		ssize_t n = read(in_fd, buf + len, cap - len - 1);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		eof = n <= 0;
		len += n > 0 ? (size_t)n : 0;
		/* At the end a last line without its newline still counts. */
		if (eof && len && !skipping)
			buf[len++] = '\n';
		char *start = buf, *nl;
		while ((nl = memchr(start, '\n', len - (size_t)(start - buf)))) {
			if ((size_t)(nl - start) > max && !skipping)
				too_long(&s, max);
			else if (!skipping)
				handle_line(&s, start, (size_t)(nl - start));
			skipping = false;
			start = nl + 1;
		}
		len -= (size_t)(start - buf);
		memmove(buf, start, len);
		if (len > max && !skipping) {
			too_long(&s, max);
			skipping = true;
		}
		if (skipping)
			len = 0;
		if (s.broken)
			break;
	}
	free(buf);
	/* The runs still going finish (within their limits) before we go. */
	pthread_mutex_lock(&s.lock);
	while (s.busy)
		pthread_cond_wait(&s.idle, &s.lock);
	bool broken = s.broken;
	pthread_mutex_unlock(&s.lock);
	pthread_cond_destroy(&s.idle);
	pthread_mutex_destroy(&s.lock);
	return broken ? -1 : 0;
}

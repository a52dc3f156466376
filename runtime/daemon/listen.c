#include "listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define BACKLOG             512
#define SD_LISTEN_FDS_START 3

static int fail(char *msg, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *msg, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, size, fmt, ap);
	va_end(ap);
	return -1;
}

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

static void describe(const struct sockaddr *sa, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, host, sizeof host);
		port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
		snprintf(buf, size, "%s:%u", host, port);
	} else if (sa->sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, host,
			  sizeof host);
		port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
		snprintf(buf, size, "[%s]:%u", host, port);
	} else if (sa->sa_family == AF_UNIX) {
		snprintf(buf, size, "%s", ((const struct sockaddr_un *)sa)->sun_path);
	}
}

/* TCP needs a token; without one only on loopback and only when asked. */
static int check_tcp(srd_listener *l, const struct sockaddr *sa, const srd_config *c,
		     bool have_token, char *msg, size_t size)
{
	l->need_token = !c->insecure_no_token;
	if (have_token && !c->insecure_no_token)
		return 0;
	if (c->insecure_no_token && !is_loopback(sa))
		return fail(msg, size,
			    "%s is not a loopback address: --insecure-no-token is refused there; "
			    "set a token (--token-file FILE or SAFERUND_TOKEN)",
			    l->name);
	if (!c->insecure_no_token)
		return fail(msg, size,
			    "TCP %s needs a bearer token: --token-file FILE or SAFERUND_TOKEN "
			    "(or --insecure-no-token, on a loopback address only)",
			    l->name);
	return 0;
}

/* systemd socket activation (sd_listen_fds(3)): fds from 3 on. */
static int from_systemd(const srd_config *c, bool have_token, srd_listener *ls, char *msg,
			size_t size)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	if (!pid || !fds || atol(pid) != (long)getpid())
		return 0;
	int n = atoi(fds);
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (n < 1 || n > SRD_MAX_LISTENERS)
		return fail(msg, size, "LISTEN_FDS=%s: expected 1 to %d sockets", fds,
			    SRD_MAX_LISTENERS);
	for (int i = 0; i < n; i++) {
		srd_listener *l = &ls[i];
		struct sockaddr_storage ss;
		socklen_t len = sizeof ss;
		int listening = 0;
		socklen_t ilen = sizeof listening;
		*l = (srd_listener){ .fd = SD_LISTEN_FDS_START + i };
		if (getsockname(l->fd, (struct sockaddr *)&ss, &len) < 0 ||
		    getsockopt(l->fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ilen) < 0 ||
		    !listening)
			return fail(msg, size, "fd %d from systemd is not a listening socket",
				    l->fd);
		fcntl(l->fd, F_SETFD, FD_CLOEXEC);
		describe((struct sockaddr *)&ss, l->name, sizeof l->name);
		l->is_unix = ss.ss_family == AF_UNIX;
		if (!l->is_unix && check_tcp(l, (struct sockaddr *)&ss, c, have_token, msg, size))
			return -1;
	}
	return n;
}

/* A socket file left by a crashed instance is removed; a live one (it
 * accepts a connection) means another saferund is running. */
static int clear_stale_socket(const struct sockaddr_un *sun, char *msg, size_t size)
{
	struct stat st;
	if (lstat(sun->sun_path, &st) < 0)
		return 0;
	if (!S_ISSOCK(st.st_mode))
		return fail(msg, size, "%s exists and is not a socket", sun->sun_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool live = fd >= 0 && connect(fd, (const struct sockaddr *)sun, sizeof *sun) == 0;
	if (fd >= 0)
		close(fd);
	if (live)
		return fail(msg, size, "another saferund is listening on %s", sun->sun_path);
	unlink(sun->sun_path);
	return 0;
}

static int set_group(const char *path, const char *group, char *msg, size_t size)
{
	char buf[4096];
	struct group gr, *found = NULL;
	if (getgrnam_r(group, &gr, buf, sizeof buf, &found) != 0 || !found)
		return fail(msg, size, "--socket-group: no group \"%s\"", group);
	if (chown(path, 0, found->gr_gid) < 0)
		return fail(msg, size, "chown %s to group %s: %s", path, group, strerror(errno));
	return 0;
}

static int open_unix(const srd_config *c, srd_listener *l, char *msg, size_t size)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	if (strlen(c->socket_path) >= sizeof sun.sun_path)
		return fail(msg, size, "--socket: %s is longer than %zu bytes", c->socket_path,
			    sizeof sun.sun_path - 1);
	strcpy(sun.sun_path, c->socket_path);
	char dir[sizeof sun.sun_path];
	strcpy(dir, c->socket_path);
	if (mkdir(dirname(dir), 0755) < 0 && errno != EEXIST)
		return fail(msg, size, "create %s: %s", dir, strerror(errno));
	if (clear_stale_socket(&sun, msg, size))
		return -1;
	*l = (srd_listener){ .fd = -1, .is_unix = true, .owned = true };
	snprintf(l->name, sizeof l->name, "%s", c->socket_path);
	l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	/* Created 0660 from the start: no moment in which others may connect. */
	mode_t old = umask(0117);
	int rc = l->fd < 0 ? -1 : bind(l->fd, (struct sockaddr *)&sun, sizeof sun);
	umask(old);
	if (rc < 0 || listen(l->fd, BACKLOG) < 0)
		rc = fail(msg, size, "listen on %s: %s", c->socket_path, strerror(errno));
	else if (c->socket_group)
		rc = set_group(c->socket_path, c->socket_group, msg, size);
	if (rc < 0) {
		srd_listen_unlink(l, 1);
		srd_listen_close(l, 1);
	}
	return rc;
}

static int parse_host_port(const char *spec, char *host, size_t hsize, char *port, size_t psize)
{
	const char *colon = strrchr(spec, ':');
	if (!colon || !colon[1] || colon == spec)
		return -1;
	const char *h = spec, *hend = colon;
	if (*h == '[') { /* [::1]:8000 */
		if (hend[-1] != ']')
			return -1;
		h++;
		hend--;
	}
	if ((size_t)(hend - h) >= hsize || strlen(colon + 1) >= psize)
		return -1;
	memcpy(host, h, (size_t)(hend - h));
	host[hend - h] = '\0';
	strcpy(port, colon + 1);
	return 0;
}

/* flag: "listen" or "e2b-listen"; spec: its HOST:PORT */
static int open_tcp(const srd_config *c, const char *flag, const char *spec, bool have_token,
		    srd_listener *l, char *msg, size_t size)
{
	char host[256], port[16];
	if (parse_host_port(spec, host, sizeof host, port, sizeof port))
		return fail(msg, size, "--%s: \"%s\" is not HOST:PORT (e.g. 127.0.0.1:8000)", flag,
			    spec);
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	int gai = getaddrinfo(host, port, &hints, &ai);
	if (gai)
		return fail(msg, size, "--%s %s: %s", flag, spec, gai_strerror(gai));
	*l = (srd_listener){ .fd = -1 };
	describe(ai->ai_addr, l->name, sizeof l->name);
	int rc = check_tcp(l, ai->ai_addr, c, have_token, msg, size);
	int one = 1;
	if (rc == 0) {
		l->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (l->fd < 0 ||
		    setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
		    bind(l->fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(l->fd, BACKLOG) < 0)
			rc = fail(msg, size, "listen on %s: %s", spec, strerror(errno));
	}
	freeaddrinfo(ai);
	/* With port 0 the kernel picked one: log the real address. */
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	if (rc == 0 && getsockname(l->fd, (struct sockaddr *)&ss, &len) == 0)
		describe((struct sockaddr *)&ss, l->name, sizeof l->name);
	if (rc < 0)
		srd_listen_close(l, 1);
	return rc;
}

int srd_listen_open(const srd_config *c, bool have_token, srd_listener *ls, char *msg, size_t size)
{
	int n = from_systemd(c, have_token, ls, msg, size);
	if (n < 0)
		return -1;
	if (n == 0) { /* systemd's sockets replace these two */
		if (c->socket_path && *c->socket_path) {
			if (open_unix(c, &ls[n], msg, size))
				return -1;
			n++;
		}
		if (c->listen) {
			if (open_tcp(c, "listen", c->listen, have_token, &ls[n], msg, size))
				goto fail;
			n++;
		}
	}
	/* The E2B listener is always our own (systemd passes unnamed fds). */
	if (c->e2b_listen) {
		if (n == SRD_MAX_LISTENERS) {
			fail(msg, size, "--e2b-listen: already %d listeners", n);
			goto fail;
		}
		if (open_tcp(c, "e2b-listen", c->e2b_listen, have_token, &ls[n], msg, size))
			goto fail;
		ls[n++].e2b = true;
	}
	if (n == 0)
		return fail(msg, size,
			    "nothing to listen on: set --socket PATH or --listen HOST:PORT");
	return n;
fail:
	srd_listen_unlink(ls, n);
	srd_listen_close(ls, n);
	return -1;
}

void srd_listen_unlink(srd_listener *ls, int n)
{
	for (int i = 0; i < n; i++)
		if (ls[i].is_unix && ls[i].owned)
			unlink(ls[i].name);
}

void srd_listen_close(srd_listener *ls, int n)
{
	for (int i = 0; i < n; i++)
		if (ls[i].fd >= 0) {
			close(ls[i].fd);
			ls[i].fd = -1;
		}
}

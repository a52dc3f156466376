#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int sr_write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = strlen(s);
	ssize_t n = write(fd, s, len);
	int rc = n < 0 ? -errno : ((size_t)n == len ? 0 : -EIO);
	close(fd);
	return rc;
}

ssize_t sr_read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = 0;
	while (len + 1 < size) {
		ssize_t n = read(fd, buf + len, size - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	close(fd);
	return (ssize_t)len;
}

int sr_read_u64(const char *path, uint64_t *out)
{
	char buf[64];
	ssize_t n = sr_read_file(path, buf, sizeof buf);
	if (n < 0)
		return (int)n;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(buf, &end, 10);
	if (end == buf || errno)
		return -EINVAL;
	*out = v;
	return 0;
}

int sr_read_keyed_u64(const char *path, const char *key, uint64_t *out)
{
	char buf[4096];
	ssize_t n = sr_read_file(path, buf, sizeof buf);
	if (n < 0)
		return (int)n;
	size_t klen = strlen(key);
	for (char *line = buf; line && *line;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
			*out = strtoull(line + klen + 1, NULL, 10);
			return 0;
		}
	}
	return -ENOENT;
}

int sr_random_hex(char *out, size_t n)
{
	unsigned char raw[32];
	if (n > sizeof raw)
		return -EINVAL;
	if (getrandom(raw, n, 0) != (ssize_t)n)
		return -errno;
	for (size_t i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

uint64_t sr_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void sr_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L)
		ts.tv_sec++, ts.tv_nsec -= 1000000000L;
	pthread_cond_timedwait(cv, mu, &ts);
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
size_t sr_utf8_seq(const unsigned char *s, size_t left)
{
	unsigned char c = s[0];
	size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
	if (n == 0 || n > left || (n == 2 && c < 0xc2))
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if (n == 3) {
		unsigned cp = ((c & 0x0fu) << 12) | ((s[1] & 0x3fu) << 6) | (s[2] & 0x3fu);
		if (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
	}
	if (n == 4) {
		unsigned cp = ((c & 0x07u) << 18) | ((s[1] & 0x3fu) << 12);
		if (cp < 0x10000 || cp > 0x10ffff)
			return 0;
	}
	return n;
}

bool sr_utf8_valid(const char *s, size_t len)
{
	for (size_t i = 0, n; i < len; i += n)
		if (!(n = sr_utf8_seq((const unsigned char *)s + i, len - i)))
			return false;
	return true;
}

ssize_t sr_send_fds(int sock, const void *data, size_t len, const int *fds, int n, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SR_SEND_FDS_MAX)];
		struct cmsghdr align;
	} u = { 0 };
	if (n < 1 || n > SR_SEND_FDS_MAX) {
		errno = EINVAL;
		return -1;
	}
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
	return sendmsg(sock, &mh, MSG_NOSIGNAL | flags);
}

ssize_t sr_send_fd(int sock, const void *data, size_t len, int fd, int flags)
{
	return sr_send_fds(sock, data, len, &fd, 1, flags);
}

int sr_recv_fd(int sock, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof u.buf };
	if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | flags) != 1)
		return -1;
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	int fd = -1;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(c), sizeof fd);
	return fd;
}

int sr_read_all(int fd, void *buf, size_t len)
{
	for (char *p = buf; len;) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = 0;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

uint64_t sr_fnv1a(const void *data, size_t len)
{
	const unsigned char *s = data;
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ s[i]) * 1099511628211ull;
	return h;
}

int sr_sealed_memfd(const char *name, const unsigned char *data, size_t len)
{
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
	if (fd < 0 && errno == EINVAL)
		fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -1;
	if (sr_write_all(fd, data, len) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int sr_exec_only_memfd(const char *name, const unsigned char *data, size_t len)
{
	/* An exec of a file its process may not read makes the new program
	 * non-dumpable in the exec itself (the kernel's would_dump(), set in
	 * begin_new_exec), before its first instruction: no window in which
	 * its uid could open /proc/PID/mem or ptrace it, as a prctl at the
	 * top of main would leave. The inode's owner is host root, unmapped in
	 * a sandbox, so the sandbox's root cannot chmod it back either. */
	int fd = sr_sealed_memfd(name, data, len);
	if (fd >= 0 && fchmod(fd, 0111) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int sr_write_all(int fd, const void *data, size_t len)
{
	const char *d = data;
	while (len) {
		ssize_t n = write(fd, d, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		d += n;
		len -= (size_t)n;
	}
	return 0;
}

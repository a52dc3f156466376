#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

static int check_token(const char *tok, const char *origin, char *msg, size_t size)
{
	size_t len = strlen(tok);
	if (len < SRD_TOKEN_MIN || len > SRD_TOKEN_MAX) {
		snprintf(msg, size,
			 "%s: the token must be %d to %d characters (e.g. openssl rand -hex 32)",
			 origin, SRD_TOKEN_MIN, SRD_TOKEN_MAX);
		return -1;
	}
	for (const char *p = tok; *p; p++)
		if (*p <= ' ' || *p == 0x7f) {
			snprintf(msg, size, "%s: the token must be printable ASCII without spaces",
				 origin);
			return -1;
		}
	return 0;
}

static int read_token_file(const char *file, char **out, char *msg, size_t size)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(msg, size, "token file %s: %s", file, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (st.st_mode & 0077)
		srd_log("warning", "token",
			"token file %s is readable by other users (chmod 600 it)", file);
	char *buf = calloc(1, SRD_TOKEN_MAX + 2);
	ssize_t n = buf ? read(fd, buf, SRD_TOKEN_MAX + 1) : -1;
	close(fd);
	if (n < 0) {
		snprintf(msg, size, "token file %s: %s", file, strerror(buf ? errno : ENOMEM));
		free(buf);
		return -1;
	}
	buf[strcspn(buf, "\r\n")] = '\0'; /* the first line */
	*out = buf;
	return 0;
}

int srd_token_load(const char *file, char **out, char *msg, size_t size)
{
	*out = NULL;
	if (file && *file) {
		if (read_token_file(file, out, msg, size))
			return -1;
	} else {
		const char *env = getenv("SAFERUND_TOKEN");
		if (!env || !*env)
			return 0;
		if (!(*out = strdup(env))) {
			snprintf(msg, size, "SAFERUND_TOKEN: out of memory");
			return -1;
		}
	}
	if (check_token(*out, file && *file ? file : "SAFERUND_TOKEN", msg, size)) {
		free(*out);
		*out = NULL;
		return -1;
	}
	return 0;
}

bool srd_token_matches(const char *token, const char *authorization)
{
	if (!token || !authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
		return false;
	const char *given = authorization + 7;
	while (*given == ' ')
		given++;
	size_t tlen = strlen(token), glen = strlen(given);
	/* Touch every byte of the token whatever the guess is, so the time
	 * says nothing about how much of it matched. */
	volatile unsigned char diff = (unsigned char)(tlen != glen);
	for (size_t i = 0; i < tlen; i++)
		diff |= (unsigned char)token[i] ^ (unsigned char)(i < glen ? given[i] : 0);
	return diff == 0;
}

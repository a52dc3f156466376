#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Lines longer than PIPE_BUF could interleave between threads. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void timestamp(char *buf, size_t size)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, size - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

static void write_all(const char *s, size_t len)
{
	while (len) {
		ssize_t n = write(STDERR_FILENO, s, len);
		if (n <= 0)
			return; /* nowhere else to report it */
		s += n;
		len -= (size_t)n;
	}
}

void srd_log_json(const char *event, cJSON *obj)
{
	char ts[40];
	timestamp(ts, sizeof ts);
	cJSON *line = cJSON_CreateObject();
	cJSON_AddStringToObject(line, "ts", ts);
	cJSON_AddStringToObject(line, "event", event);
	/* ts and event first, then the caller's fields in their order. */
	while (obj && obj->child) {
		cJSON *item = cJSON_DetachItemViaPointer(obj, obj->child);
		cJSON_AddItemToObject(line, item->string, item);
	}
	cJSON_Delete(obj);
	char *text = cJSON_PrintUnformatted(line);
	cJSON_Delete(line);
	if (!text)
		return;
	size_t len = strlen(text);
	text[len] = '\n'; /* replaces the NUL; written by length */
	pthread_mutex_lock(&log_lock);
	write_all(text, len + 1);
	pthread_mutex_unlock(&log_lock);
	free(text);
}

static void log_msg(const char *level, const char *event, const char *tenant, const char *fmt,
		    va_list ap) __attribute__((format(printf, 4, 0)));
static void log_msg(const char *level, const char *event, const char *tenant, const char *fmt,
		    va_list ap)
{
	char msg[1024];
	vsnprintf(msg, sizeof msg, fmt, ap);
	cJSON *obj = cJSON_CreateObject();
	cJSON_AddStringToObject(obj, "level", level);
	cJSON_AddStringToObject(obj, "msg", msg);
	if (tenant)
		cJSON_AddStringToObject(obj, "tenant", tenant);
	srd_log_json(event, obj);
}

void srd_log(const char *level, const char *event, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_msg(level, event, NULL, fmt, ap);
	va_end(ap);
}

void srd_log_tenant(const char *level, const char *event, const char *tenant, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_msg(level, event, tenant, fmt, ap);
	va_end(ap);
}

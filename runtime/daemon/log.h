/* The daemon's log: one JSON object per line on stderr (requests, runs,
 * daemon events), so journald or a collector can parse every line. */
#ifndef SRD_LOG_H
#define SRD_LOG_H

#include <cjson/cJSON.h>

/* Add "ts" and "event" to obj, write it as one line, delete obj. */
void srd_log_json(const char *event, cJSON *obj);
/* {"ts", "event", "level", "msg"}: start-up, reload, shutdown, errors. */
void srd_log(const char *level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with "tenant" after "msg" when tenant is not NULL. */
void srd_log_tenant(const char *level, const char *event, const char *tenant, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif

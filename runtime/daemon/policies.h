/* The policies a request may name: every NAME.json in the policies dir,
 * plus the built-in "default" unless the dir has its own default.json.
 * Loaded and validated at start-up and on SIGHUP (all or nothing); each
 * run gets a fresh copy it may change. */
#ifndef SRD_POLICIES_H
#define SRD_POLICIES_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "json.h"
#include "saferun.h"

typedef struct srd_policies srd_policies;

/* A missing dir is an error only when required (the operator named it). */
int srd_policies_open(const char *dir, bool required, srd_policies **out, char *msg, size_t size);
/* Load the dir again; on any error keep the current set. Returns the
 * number of policies, or -1 with msg. */
int srd_policies_reload(srd_policies *reg, char *msg, size_t size);
void srd_policies_close(srd_policies *reg);
bool srd_policies_has(srd_policies *reg, const char *name);
/* A fresh policy for one run; an unknown name is a 400 on field. */
int srd_policies_get(srd_policies *reg, const char *name, const char *field, sr_policy **out,
		     srd_ferr *e);
/* ["default", ...] */
cJSON *srd_policies_names(srd_policies *reg);

#endif

#include "http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void srd_respond_text(srd_response *res, unsigned status, const char *type, char *body, size_t len)
{
	free(res->body);
	res->status = status;
	res->content_type = type;
	res->body = body;
	res->body_len = body ? len : 0;
}

void srd_respond_json(srd_response *res, unsigned status, cJSON *doc)
{
	char *text = doc ? cJSON_PrintUnformatted(doc) : NULL;
	cJSON_Delete(doc);
	if (!text) {
		static const char oom[] =
		    "{\"error\":\"out of memory\",\"detail\":\"out of memory\"}";
		text = strdup(oom);
		status = 500;
	}
	srd_respond_text(res, status, "application/json", text, text ? strlen(text) : 0);
}

void srd_respond_error(srd_response *res, const srd_ferr *e)
{
	srd_respond_json(res, e->status ? e->status : 500, srd_ferr_json(e));
	res->retry_after = e->retry_after;
	snprintf(res->error_field, sizeof res->error_field, "%s", e->field);
}

cJSON *srd_peer_json(const srd_peer *peer)
{
	cJSON *j = cJSON_CreateObject();
	if (peer && peer->is_unix && peer->have_cred) {
		cJSON_AddNumberToObject(j, "uid", peer->uid);
		cJSON_AddNumberToObject(j, "gid", peer->gid);
		cJSON_AddNumberToObject(j, "pid", peer->pid);
	} else if (peer && !peer->is_unix) {
		cJSON_AddStringToObject(j, "addr", peer->addr);
	}
	return j;
}

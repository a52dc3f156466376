/* saferund's HTTP server as the routes see it: multipart/form-data parts
 * (through libmicrohttpd's parser), the Content-Type, the raw and the
 * printable path, the Content-Disposition header, over a real socket.
 *
 * This file defines srd_route: the server's requests come here, echoed as
 * JSON, instead of going to routes.c (the linker takes routes.o from
 * saferund_core only for a symbol nothing else has defined). */
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "routes.h"
#include "server.h"

static char sock_path[108];

static char *hex(const char *data, size_t size)
{
	char *out = malloc(size * 2 + 1);
	for (size_t i = 0; i < size; i++)
		sprintf(out + 2 * i, "%02x", (unsigned char)data[i]);
	out[size * 2] = '\0';
	return out;
}

/* /stream-gone: what srd_respond_chunk said once the client had gone
 * (0: still waiting; 1: -1 came; 2: it never did). */
static atomic_int gone_seen;

void srd_route(srd_ctx *ctx, srd_request *req, srd_response *res)
{
	(void)ctx;
	if (strcmp(req->path, "/stream") == 0) {
		srd_respond_header(res, "Mcp-Session-Id", "s1");
		CHECK_INT(srd_respond_stream(res, 200, "application/x-ndjson"), 0);
		CHECK_INT(srd_respond_chunk(res, "a\n", 2), 0);
		CHECK_INT(srd_respond_chunk(res, "", 0), 0); /* nothing: no last-chunk yet */
		CHECK_INT(srd_respond_chunk(res, "bcdefghijklmnopq\n", 17), 0);
		return;
	}
	if (strcmp(req->path, "/stream-gone") == 0) {
		CHECK_INT(srd_respond_stream(res, 200, "text/event-stream"), 0);
		/* the client reads the headers and leaves: -1 within 10 s */
		for (int i = 0; i < 1000; i++) {
			if (srd_respond_chunk(res, "data: x\n\n", 9) < 0) {
				atomic_store(&gone_seen, 1);
				return;
			}
			usleep(10000);
		}
		atomic_store(&gone_seen, 2);
		return;
	}
	if (strcmp(req->path, "/download") == 0) {
		srd_respond_attachment(res, 200, "out/r\xc3\xa9sult \"1\".txt", strdup("data"), 4);
		return;
	}
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "path", req->path);
	cJSON_AddStringToObject(j, "raw_path", req->raw_path);
	cJSON_AddItemToObject(j, "content_type",
			      req->content_type ? cJSON_CreateString(req->content_type)
						: cJSON_CreateNull());
	cJSON_AddBoolToObject(j, "multipart_error", req->multipart_error);
	cJSON_AddStringToObject(j, "why", req->multipart_why ? req->multipart_why : "");
	cJSON *parts = cJSON_AddArrayToObject(j, "parts");
	for (size_t i = 0; i < req->n_parts; i++) {
		const srd_part *p = &req->parts[i];
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", p->name);
		cJSON_AddItemToObject(o, "filename",
				      p->filename ? cJSON_CreateString(p->filename)
						  : cJSON_CreateNull());
		cJSON_AddNumberToObject(o, "size", (double)p->size);
		char *h = hex(p->data ? p->data : "", p->size);
		cJSON_AddStringToObject(o, "hex", h);
		free(h);
		cJSON_AddBoolToObject(o, "terminated", p->data && p->data[p->size] == '\0');
		cJSON_AddItemToArray(parts, o);
	}
	srd_respond_json(res, 200, j);
}

struct answer {
	int status;
	char *head; /* status line and headers */
	cJSON *doc; /* the JSON body, or NULL */
};

static void answer_free(struct answer *a)
{
	free(a->head);
	cJSON_Delete(a->doc);
}

/* One request on its own connection; the server closes it after. */
static struct answer exchange(const char *req, size_t len)
{
	struct answer a = { 0 };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, sock_path, sizeof sock_path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		close(fd);
		return a;
	}
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, req + off, len - off);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	size_t cap = 1 << 16, got = 0;
	char *buf = malloc(cap);
	for (ssize_t n; (n = read(fd, buf + got, cap - got - 1)) > 0;) {
		got += (size_t)n;
		if (got + 1 == cap)
			buf = realloc(buf, cap *= 2);
	}
	buf[got] = '\0';
	close(fd);
	char *body = strstr(buf, "\r\n\r\n");
	if (body) {
		*body = '\0';
		a.doc = cJSON_Parse(body + 4);
	}
	sscanf(buf, "HTTP/1.1 %d", &a.status);
	a.head = buf;
	return a;
}

static struct answer post(const char *path, const char *type, const char *body, size_t len)
{
	char *req;
	size_t n = 0;
	FILE *f = open_memstream(&req, &n);
	fprintf(f, "POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", path);
	if (type)
		fprintf(f, "Content-Type: %s\r\n", type);
	fprintf(f, "Content-Length: %zu\r\n\r\n", len);
	fwrite(body, 1, len, f);
	fclose(f);
	struct answer a = exchange(req, n);
	free(req);
	return a;
}

#define FORM "multipart/form-data; boundary=XX"

static struct answer post_form(const char *body, size_t len)
{
	return post("/upload", FORM, body, len);
}

static const cJSON *part(const struct answer *a, int i)
{
	return cJSON_GetArrayItem(cJSON_GetObjectItem(a->doc, "parts"), i);
}

static const char *str(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(obj, key);
	return cJSON_IsString(v) ? v->valuestring : cJSON_IsNull(v) ? "(null)" : "(missing)";
}

static int num(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(obj, key);
	return cJSON_IsNumber(v) ? v->valueint : -1;
}

static bool error_of(const struct answer *a)
{
	return cJSON_IsTrue(cJSON_GetObjectItem(a->doc, "multipart_error"));
}

static int n_parts(const struct answer *a)
{
	return cJSON_GetArraySize(cJSON_GetObjectItem(a->doc, "parts"));
}

static void test_fields_and_files_with_nul_bytes(void)
{
	static const char body[] = "--XX\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n"
				   "hello\r\n"
				   "--XX\r\nContent-Disposition: form-data; name=\"f\"; "
				   "filename=\"x.txt\"\r\nContent-Type: text/plain\r\n\r\n"
				   "fi\0le\r\n"
				   "--XX--\r\n";
	struct answer a = post_form(body, sizeof body - 1);
	CHECK_INT(a.status, 200);
	CHECK(!error_of(&a));
	CHECK_STR(str(a.doc, "content_type"), FORM);
	CHECK_INT(n_parts(&a), 2);
	CHECK_STR(str(part(&a, 0), "name"), "a");
	CHECK_STR(str(part(&a, 0), "filename"), "(null)");
	CHECK_STR(str(part(&a, 0), "hex"), "68656c6c6f");
	CHECK_STR(str(part(&a, 1), "name"), "f");
	CHECK_STR(str(part(&a, 1), "filename"), "x.txt");
	CHECK_INT(num(part(&a, 1), "size"), 5);
	CHECK_STR(str(part(&a, 1), "hex"), "6669006c65");
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(part(&a, 1), "terminated")));
	answer_free(&a);
}

/* A handler must be able to tell filename="" (400: empty name) from a
 * field without a filename. */
static void test_empty_filename_is_an_empty_string(void)
{
	static const char body[] = "--XX\r\nContent-Disposition: form-data; name=\"f\"; "
				   "filename=\"\"\r\n\r\nabc\r\n--XX--\r\n";
	struct answer a = post_form(body, sizeof body - 1);
	CHECK(!error_of(&a));
	CHECK_INT(n_parts(&a), 1);
	CHECK_STR(str(part(&a, 0), "filename"), "");
	CHECK_STR(str(part(&a, 0), "hex"), "616263");
	answer_free(&a);
}

static void test_empty_parts_and_repeated_names_are_kept(void)
{
	static const char body[] =
	    "--XX\r\nContent-Disposition: form-data; name=\"empty\"\r\n\r\n\r\n"
	    "--XX\r\nContent-Disposition: form-data; name=\"g\"; filename=\"e.bin\"\r\n\r\n\r\n"
	    "--XX\r\nContent-Disposition: form-data; name=\"g\"; filename=\"e.bin\"\r\n\r\n"
	    "second\r\n"
	    "--XX\r\nContent-Disposition: form-data; filename=\"noname\"\r\n\r\nz\r\n"
	    "--XX--\r\n";
	struct answer a = post_form(body, sizeof body - 1);
	CHECK(!error_of(&a));
	CHECK_INT(n_parts(&a), 4);
	CHECK_STR(str(part(&a, 0), "name"), "empty");
	CHECK_INT(num(part(&a, 0), "size"), 0);
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(part(&a, 0), "terminated")));
	CHECK_INT(num(part(&a, 1), "size"), 0);
	CHECK_STR(str(part(&a, 1), "filename"), "e.bin");
	CHECK_STR(str(part(&a, 2), "hex"), "7365636f6e64");
	CHECK_STR(str(part(&a, 3), "name"), "");
	CHECK_STR(str(part(&a, 3), "filename"), "noname");
	answer_free(&a);
}

/* Far more than the parser's 16 KiB buffer, with boundary look-alikes:
 * the chunks join up into the exact bytes. */
static void test_large_file_arrives_whole(void)
{
	size_t size = 300000;
	char *data = malloc(size), *body;
	for (size_t i = 0; i < size; i++)
		data[i] = (char)(i * 7 + i / 251);
	for (size_t i = 1000; i + 8 < size; i += 10007)
		memcpy(data + i, "\r\n--XY\r\n", 8);
	size_t len = 0;
	FILE *f = open_memstream(&body, &len);
	fprintf(f, "--XX\r\nContent-Disposition: form-data; name=\"big\"; filename=\"b\"\r\n\r\n");
	fwrite(data, 1, size, f);
	fprintf(f, "\r\n--XX--\r\n");
	fclose(f);
	struct answer a = post_form(body, len);
	CHECK(!error_of(&a));
	CHECK_INT(n_parts(&a), 1);
	CHECK_INT(num(part(&a, 0), "size"), size);
	char *want = hex(data, size);
	CHECK(strcmp(str(part(&a, 0), "hex"), want) == 0);
	free(want);
	answer_free(&a);
	free(body);
	free(data);
}

static void test_malformed_bodies_are_flagged_not_fatal(void)
{
	static const char part_a[] = "--XX\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nhi";
	struct {
		const char *type, *body, *why;
	} cases[] = {
		{ "multipart/form-data", part_a, "boundary" },
		{ "multipart/form-data; boundary=", part_a, "boundary" },
		{ FORM, part_a, "not well-formed" }, /* cut short */
		{ FORM, "garbage, no boundary at all", "no parts" },
		{ FORM, "", "no parts" },
		{ "multipart/form-data; boundary=\"XX\"", part_a, "not well-formed" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct answer a =
		    post("/upload", cases[i].type, cases[i].body, strlen(cases[i].body));
		CHECK_INT(a.status, 200);
		CHECK(error_of(&a));
		if (!strstr(str(a.doc, "why"), cases[i].why))
			fprintf(stderr, "case %zu: why \"%s\"\n", i, str(a.doc, "why"));
		CHECK(strstr(str(a.doc, "why"), cases[i].why) != NULL);
		answer_free(&a);
	}
}

static void test_too_many_parts_is_an_error(void)
{
	char *body;
	size_t len = 0;
	FILE *f = open_memstream(&body, &len);
	for (int i = 0; i <= SRD_MAX_PARTS; i++)
		fprintf(f, "--XX\r\nContent-Disposition: form-data; name=\"p%d\"\r\n\r\nv\r\n", i);
	fprintf(f, "--XX--\r\n");
	fclose(f);
	struct answer a = post_form(body, len);
	CHECK(error_of(&a));
	CHECK_STR(str(a.doc, "why"), "over 32 parts");
	answer_free(&a);
	free(body);
}

static void test_other_bodies_are_not_parsed(void)
{
	struct answer a = post("/x", "application/json", "{}", 2);
	CHECK_STR(str(a.doc, "content_type"), "application/json");
	CHECK(!error_of(&a));
	CHECK_INT(n_parts(&a), 0);
	answer_free(&a);
	a = post("/x", NULL, "{}", 2);
	CHECK_STR(str(a.doc, "content_type"), "(null)");
	answer_free(&a);
	/* a look-alike type is not multipart/form-data */
	a = post("/x", "multipart/form-datax; boundary=XX", "", 0);
	CHECK(!error_of(&a));
	answer_free(&a);
	static const char body[] =
	    "--XX\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XX--\r\n";
	a = post("/x", "Multipart/Form-Data; boundary=XX", body, sizeof body - 1);
	CHECK(!error_of(&a));
	CHECK_INT(n_parts(&a), 1);
	answer_free(&a);
}

static void test_routes_see_the_path_as_sent_and_logs_printable(void)
{
	static const char req[] = "GET /u/%C3%A9x%2Fy%0a HTTP/1.1\r\nHost: x\r\n"
				  "Connection: close\r\n\r\n";
	struct answer a = exchange(req, sizeof req - 1);
	CHECK_INT(a.status, 200);
	CHECK_STR(str(a.doc, "raw_path"), "/u/\xc3\xa9x/y\n");
	CHECK_STR(str(a.doc, "path"), "/u/??x/y?");
	answer_free(&a);
}

static void test_a_path_too_long_to_keep_is_414(void)
{
	char req[4096];
	int n = snprintf(req, sizeof req, "GET /f/");
	memset(req + n, 'a', 2100);
	n += 2100;
	n += snprintf(req + n, sizeof req - (size_t)n, " HTTP/1.1\r\nConnection: close\r\n\r\n");
	struct answer a = exchange(req, (size_t)n);
	CHECK_INT(a.status, 414);
	answer_free(&a);
}

static void test_attachment_sends_content_disposition(void)
{
	static const char req[] = "GET /download HTTP/1.1\r\nConnection: close\r\n\r\n";
	struct answer a = exchange(req, sizeof req - 1);
	CHECK_INT(a.status, 200);
	CHECK(a.head && strstr(a.head, "\r\nContent-Type: application/octet-stream\r\n"));
	CHECK(a.head && strstr(a.head, "\r\nContent-Disposition: attachment; "
				       "filename=\"r__sult 1.txt\"; "
				       "filename*=UTF-8''r%C3%A9sult%201.txt\r\n"));
	answer_free(&a);
	/* a plain answer has none */
	a = post("/x", NULL, "", 0);
	CHECK(a.head && !strstr(a.head, "Content-Disposition"));
	answer_free(&a);
}

static void test_streamed_response_is_chunked_and_closes(void)
{
	static const char req[] = "POST /stream HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
	struct answer a = exchange(req, sizeof req - 1); /* reads until the server closes */
	CHECK_INT(a.status, 200);
	CHECK(a.head && strstr(a.head, "\r\nTransfer-Encoding: chunked\r\n"));
	CHECK(a.head && strstr(a.head, "\r\nContent-Type: application/x-ndjson\r\n"));
	CHECK(a.head && strstr(a.head, "\r\nConnection: close\r\n"));
	CHECK(a.head && strstr(a.head, "\r\nMcp-Session-Id: s1"));
	/* the body, after the head's \r\n\r\n */
	const char *body = a.head ? a.head + strlen(a.head) + 4 : "";
	CHECK_STR(body, "2\r\na\n\r\n11\r\nbcdefghijklmnopq\n\r\n0\r\n\r\n");
	answer_free(&a);
	/* HTTP/1.0 has no chunks: the close ends the body */
	static const char req10[] = "POST /stream HTTP/1.0\r\nContent-Length: 0\r\n\r\n";
	a = exchange(req10, sizeof req10 - 1);
	CHECK(a.head && strncmp(a.head, "HTTP/1.0 200 OK\r\n", 17) == 0);
	CHECK(a.head && !strstr(a.head, "Transfer-Encoding"));
	body = a.head ? a.head + strlen(a.head) + 4 : "";
	CHECK_STR(body, "a\nbcdefghijklmnopq\n");
	answer_free(&a);
}

static void test_streamed_response_sees_the_client_leave(void)
{
	static const char req[] = "POST /stream-gone HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, sock_path, sizeof sock_path);
	CHECK_INT(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	CHECK_INT((int)write(fd, req, sizeof req - 1), (int)sizeof req - 1);
	char buf[4096] = "";
	/* the head, and the first event: the handler is in its loop */
	size_t got = 0;
	while (got < sizeof buf - 1 && !strstr(buf, "data: x")) {
		ssize_t n = read(fd, buf + got, sizeof buf - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		buf[got] = '\0';
	}
	CHECK(strstr(buf, "data: x") != NULL);
	close(fd);
	for (int i = 0; i < 1000 && !atomic_load(&gone_seen); i++)
		poll(NULL, 0, 10);
	CHECK_INT(atomic_load(&gone_seen), 1);
}

static int start(srd_ctx *ctx, srd_config *cfg, srd_listener *l, srd_server **srv)
{
	*cfg = (srd_config){ .max_body_bytes = 1 << 20, .max_connections = 16 };
	*ctx = (srd_ctx){ .cfg = cfg };
	char dir[] = "/tmp/srd-unit-XXXXXX", msg[256];
	if (!mkdtemp(dir) || srd_metrics_init(&ctx->metrics, NULL) ||
	    srd_gate_init(&ctx->gate, 1, 1) ||
	    srd_tenants_load(cfg, &ctx->tenants, msg, sizeof msg))
		return -1;
	snprintf(sock_path, sizeof sock_path, "%s/s.sock", dir);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, sock_path, sizeof sock_path);
	*l = (srd_listener){ .is_unix = true };
	snprintf(l->name, sizeof l->name, "%s", sock_path);
	l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (bind(l->fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(l->fd, 16) < 0)
		return -1;
	if (srd_server_start(ctx, l, 1, srv, msg, sizeof msg)) {
		fprintf(stderr, "%s\n", msg);
		return -1;
	}
	return 0;
}

int main(void)
{
	srd_ctx ctx;
	srd_config cfg;
	srd_listener l;
	srd_server *srv = NULL;
	CHECK_INT(start(&ctx, &cfg, &l, &srv), 0);
	if (!srv)
		return check_report();
	test_fields_and_files_with_nul_bytes();
	test_empty_filename_is_an_empty_string();
	test_empty_parts_and_repeated_names_are_kept();
	test_large_file_arrives_whole();
	test_malformed_bodies_are_flagged_not_fatal();
	test_too_many_parts_is_an_error();
	test_other_bodies_are_not_parsed();
	test_routes_see_the_path_as_sent_and_logs_printable();
	test_a_path_too_long_to_keep_is_414();
	test_attachment_sends_content_disposition();
	test_streamed_response_is_chunked_and_closes();
	test_streamed_response_sees_the_client_leave();
	srd_server_stop(srv);
	close(l.fd);
	unlink(sock_path);
	*strrchr(sock_path, '/') = '\0';
	rmdir(sock_path);
	srd_metrics_destroy(&ctx.metrics);
	srd_gate_destroy(&ctx.gate);
	srd_tenants_free(&ctx.tenants);
	return check_report();
}

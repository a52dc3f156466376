/* libFuzzer harness for the workspace's path validation (the files API's
 * paths, after the daemon decoded them): workspace.c's check_path over
 * arbitrary bytes, against a plain restatement of the rule. A path it
 * passes is relative, at most SR_WORKSPACE_PATH_MAX bytes, without
 * control characters, and made of non-empty parts other than "." and
 * ".." of at most NAME_MAX bytes; a refusal is a message without control
 * characters. The file is included for its static functions; the fuzzer
 * links the rest of the library. Build: tests/CMakeLists.txt. */
#include "box/workspace.c"

static void expect(int ok)
{
	if (!ok)
		__builtin_trap();
}

static bool rule_allows(const char *path, size_t len)
{
	if (len == 0 || len > SR_WORKSPACE_PATH_MAX || path[0] == '/')
		return false;
	size_t part = 0;
	for (size_t i = 0; i <= len; i++) {
		unsigned char c = i < len ? (unsigned char)path[i] : '/';
		if (c < 0x20 || c == 0x7f)
			return false;
		if (c != '/') {
			part++;
			continue;
		}
		const char *start = path + i - part;
		if (part == 0 || part > NAME_MAX || (part == 1 && start[0] == '.') ||
		    (part == 2 && start[0] == '.' && start[1] == '.'))
			return false;
		part = 0;
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *path = malloc(size + 1);
	if (!path)
		return 0;
	memcpy(path, data, size);
	path[size] = '\0';
	size_t len = strlen(path); /* a C string ends at its first NUL */
	sr_error err = { 0 };
	int rc = check_path(path, &err);
	expect((rc == 0) == rule_allows(path, len));
	if (rc) {
		expect(memchr(err.msg, 0, sizeof err.msg) && err.msg[0]);
		for (const unsigned char *c = (const unsigned char *)err.msg; *c; c++)
			expect(*c >= 0x20 && *c != 0x7f);
	}
	free(path);
	return 0;
}

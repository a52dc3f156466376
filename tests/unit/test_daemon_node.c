/* A fleet node's ids (node.h): which node ids are valid, the ids a node
 * makes, and which node an id names (the router splits at the last '-'). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "node.h"

static void test_node_ids_are_short_lowercase_letters_digits_and_dashes(void)
{
	static const struct {
		const char *id;
		int rc;
		const char *why;
	} cases[] = {
		{ "n1", 0, NULL },
		{ "p10-244-1-7", 0, NULL },
		{ "a", 0, NULL },
		{ "abcdefghij012345", 0, NULL },
		{ "", -1, "1 to 16 characters" },
		{ "abcdefghij0123456", -1, "1 to 16 characters" },
		{ "N1", -1, "has 'N'" },
		{ "n_1", -1, "has '_'" },
		{ "n.1", -1, "has '.'" },
		{ "-n1", -1, "start and end" },
		{ "n1-", -1, "start and end" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char msg[200] = "";
		CHECK_INT(srd_node_id_check(cases[i].id, msg, sizeof msg), cases[i].rc);
		if (cases[i].why && !strstr(msg, cases[i].why))
			CHECK_STR(msg, cases[i].why);
	}
}

static bool all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdef", s[i]))
			return false;
	return s[n] == '\0';
}

static void test_a_nodes_ids_start_with_it_and_differ(void)
{
	char a[64], b[64];
	CHECK_INT(srd_node_new_id("p10-1-2-3", 8, a, sizeof a), 0);
	CHECK_INT(srd_node_new_id("p10-1-2-3", 8, b, sizeof b), 0);
	CHECK(strncmp(a, "p10-1-2-3-", 10) == 0 && all_hex(a + 10, 16));
	CHECK(strcmp(a, b) != 0);
	CHECK_INT(srd_node_new_id(NULL, 16, a, sizeof a), 0);
	CHECK(all_hex(a, 32));
	/* the longest node id and a session id fit the session's 40 bytes */
	CHECK_INT(srd_node_new_id("abcdefghij012345", 8, a, 40), 0);
	CHECK_INT(strlen(a), 33);
	CHECK_INT(srd_node_new_id("abcdefghij012345", 16, a, 40), -1);
}

static void test_the_node_of_an_id_is_before_its_last_dash(void)
{
	size_t len = 0;
	CHECK(srd_node_other("n1", "n1-00aa", &len) == NULL);
	CHECK(srd_node_other("n1", "00aa", &len) == NULL);    /* no node part */
	CHECK(srd_node_other(NULL, "n2-00aa", &len) == NULL); /* not in a fleet */
	CHECK(srd_node_other("n1", "-00aa", &len) == NULL);
	CHECK(srd_node_other("n1", "n2-00aa", &len) != NULL && len == 2);
	CHECK(srd_node_other("p10-1", "p10-2-00aa", &len) != NULL && len == 5);
	CHECK(srd_node_other("p10-1", "p10-1-00aa", &len) == NULL);
	CHECK(srd_node_other("n1", "n1x-00aa", &len) != NULL && len == 3);
	srd_ferr e = { 0 };
	CHECK(srd_node_not_ours("a1", "Session", "b2-00ff", &e));
	CHECK_INT(e.status, 404);
	CHECK(strstr(e.msg, "held by node b2, not this node (a1)") != NULL);
	CHECK(!srd_node_not_ours("a1", "Session", "a1-00ff", &e));
}

int main(void)
{
	test_node_ids_are_short_lowercase_letters_digits_and_dashes();
	test_a_nodes_ids_start_with_it_and_differ();
	test_the_node_of_an_id_is_before_its_last_dash();
	return check_report();
}

/* GET /metrics by tenant (metrics.c): a tenant's run counter appears once
 * it counts a run, by language and status; its commands and its gauges
 * (slots, queue, sessions) are there for every tenant from the start; the
 * daemon-wide series count every tenant's runs together. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "metrics.h"

/* Is line one whole line of text? */
static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

static void test_series_by_tenant(void)
{
	srd_tenant t[2] = { { .name = "a", .index = 0, .in_file = true },
			    { .name = "b", .index = 1, .in_file = true } };
	srd_tenants ts = { .t = t, .n = 2, .from_file = true };
	srd_metrics m;
	srd_gate g;
	unsigned running[] = { 1, 1 }, waiting[] = { 2, 2 };
	CHECK_INT(srd_metrics_init(&m, &ts), 0);
	CHECK_INT(srd_gate_init(&g, 2, 4), 0);
	CHECK_INT(srd_gate_set_classes(&g, 2, running, waiting, NULL), 0);
	CHECK_INT(srd_gate_enter_class(&g, 1, NULL, NULL), SRD_GATE_OK);
	srd_metrics_run(&m, &t[0], SR_LANG_PYTHON, SR_STATUS_OK, 20, 0);
	srd_metrics_run(&m, &t[0], SR_LANG_PYTHON, SR_STATUS_OK, 20, 0);
	srd_metrics_run(&m, &t[0], SR_LANG_BASH, SR_STATUS_ERROR, 20, 0);
	srd_metrics_run(&m, &t[1], SR_LANG_JAVASCRIPT, SR_STATUS_TIMEOUT, 20, 0);
	srd_metrics_run(&m, NULL, SR_LANG_PYTHON, SR_STATUS_OK, 20, 0); /* no tenant */
	srd_metrics_command(&m, &t[1]);
	srd_metrics_command(&m, &t[1]);
	srd_metrics_refused(&m, &t[0], SRD_REFUSED_QUEUE_FULL);
	srd_metrics_refused(&m, NULL, SRD_REFUSED_QUEUE_FULL);
	size_t len;
	char *text = srd_metrics_render(&m, &g, NULL, &len);
	CHECK(text != NULL);
	if (!text)
		return;
	const char *want[] = {
		"saferund_runs_total{status=\"ok\"} 3",
		"saferund_runs_total{status=\"timeout\"} 1",
		"saferund_tenant_runs_total{tenant=\"a\",language=\"python\",status=\"ok\"} 2",
		"saferund_tenant_runs_total{tenant=\"a\",language=\"bash\",status=\"error\"} 1",
		"saferund_tenant_runs_total{tenant=\"b\",language=\"javascript\",status="
		"\"timeout\"} "
		"1",
		"saferund_runs_refused_total{reason=\"queue_full\"} 2",
		"saferund_tenant_runs_refused_total{tenant=\"a\",reason=\"queue_full\"} 1",
		"saferund_tenant_runs_refused_total{tenant=\"b\",reason=\"queue_full\"} 0",
		"saferund_tenant_commands_total{tenant=\"a\"} 0",
		"saferund_tenant_commands_total{tenant=\"b\"} 2",
		"saferund_tenant_runs_in_flight{tenant=\"a\"} 0",
		"saferund_tenant_runs_in_flight{tenant=\"b\"} 1",
		"saferund_tenant_queue_depth{tenant=\"b\"} 0",
		"saferund_tenant_sessions{tenant=\"a\"} 0",
		"# TYPE saferund_tenant_runs_total counter",
		"# TYPE saferund_tenant_sessions gauge",
	};
	for (size_t i = 0; i < sizeof want / sizeof *want; i++)
		if (!has_line(text, want[i])) {
			fprintf(stderr, "no line %s in:\n%s\n", want[i], text);
			CHECK(false);
		}
	/* only counted runs: no zero rows for the 27 language x status pairs */
	CHECK(!strstr(text, "tenant=\"a\",language=\"javascript\""));
	free(text);
	srd_gate_leave_class(&g, 1);
	srd_gate_destroy(&g);
	srd_metrics_destroy(&m);
}

static void test_without_tenants_no_series_by_tenant(void)
{
	srd_metrics m;
	srd_gate g;
	CHECK_INT(srd_metrics_init(&m, NULL), 0);
	CHECK_INT(srd_gate_init(&g, 1, 1), 0);
	srd_metrics_run(&m, NULL, SR_LANG_PYTHON, SR_STATUS_OK, 20, 0);
	size_t len;
	char *text = srd_metrics_render(&m, &g, NULL, &len);
	CHECK(text && has_line(text, "saferund_runs_total{status=\"ok\"} 1"));
	CHECK(text && !strstr(text, "tenant"));
	free(text);
	srd_gate_destroy(&g);
	srd_metrics_destroy(&m);
}

int main(void)
{
	test_series_by_tenant();
	test_without_tenants_no_series_by_tenant();
	return check_report();
}

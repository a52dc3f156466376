/* policy.limits and policy.preset: the resource limits' table, and the
 * presets (tiny, small, medium, large) that set every limit at once,
 * from a document's "preset" or from sr_policy_apply_preset. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <string.h>

#include "base/base.h"
#include "policy_schema.h"
#include "saferun.h"

static const struct preset {
	const char *name;
	sr_limits limits;
} presets[] = {
	{ "tiny", { 5000, 250, 128 * MIB, 0, 16, 16 * MIB, 64 * KIB, 256 } },
	{ "small", { 10000, 500, 256 * MIB, 0, 32, 32 * MIB, 256 * KIB, 256 } },
	{ "medium", { 20000, 1000, 512 * MIB, 0, 64, 64 * MIB, MIB, 256 } },
	{ "large", { 60000, 2000, 2 * GIB, 0, 256, 512 * MIB, 10 * MIB, 256 } },
};

static const struct preset *find_preset(const char *name)
{
	for (size_t i = 0; i < ARRAY_LEN(presets); i++)
		if (strcmp(presets[i].name, name) == 0)
			return &presets[i];
	return NULL;
}

static void preset_names(char *buf, size_t n)
{
	const char *names[ARRAY_LEN(presets)];

	for (size_t i = 0; i < ARRAY_LEN(presets); i++)
		names[i] = presets[i].name;
	sr_pol_join_names(buf, n, names, ARRAY_LEN(presets));
}

int sr_pol_parse_preset(const struct ctx *c, const struct field *f, const char *path,
			const cJSON *v, sr_policy *p)
{
	(void)f;
	if (sr_pol_want_string(c, path, v) < 0)
		return -1;
	const struct preset *ps = find_preset(v->valuestring);
	if (!ps) {
		char list[64];
		preset_names(list, sizeof list);
		return sr_pol_bad_value(c, path, v, "is not a preset (known: %s)", list);
	}
	if (sr_pol_replace_str(&p->preset, ps->name) < 0)
		return sr_pol_oom(c);
	p->limits = ps->limits;
	return 0;
}

int sr_pol_add_preset(cJSON *root, const struct field *f, const sr_policy *p)
{
	return !p->preset || cJSON_AddStringToObject(root, f->key, p->preset) ? 0 : -1;
}

const struct field sr_pol_limits_fields[] = {
	{ "wall_time", F_DURATION, AT(limits.wall_ms), .min = 10, .max = 24ULL * 3600 * 1000,
	  .def = 20000 },
	/* cgroup cpu.max takes at least 1 ms of CPU per 100 ms period */
	{ "cpus", F_CPUS, AT(limits.cpu_millis), .min = 10, .max = 1024000, .def = 1000 },
	{ "memory", F_SIZE, AT(limits.memory_bytes), .min = 16 * MIB, .max = TIB,
	  .def = 512 * MIB },
	{ "swap", F_SIZE, AT(limits.swap_bytes), .min = 0, .max = TIB, .def = 0 },
	{ "pids", F_COUNT, AT(limits.pids), .min = 1, .max = 1000000, .def = 64 },
	{ "tmpfs", F_SIZE, AT(limits.tmpfs_bytes), .min = MIB, .max = TIB, .def = 64 * MIB },
	/* the supervisor holds each stream in memory */
	{ "output", F_SIZE, AT(limits.output_bytes), .min = KIB, .max = GIB, .def = MIB },
	{ "open_files", F_COUNT, AT(limits.open_files), .min = 16, .max = 1048576, .def = 256 },
};
_Static_assert(ARRAY_LEN(sr_pol_limits_fields) == SR_POL_N_LIMITS,
	       "SR_POL_N_LIMITS is the length of sr_pol_limits_fields");

int sr_policy_apply_preset(sr_policy *p, const char *name, sr_error *err)
{
	const struct preset *ps = name ? find_preset(name) : NULL;

	if (!ps) {
		char list[64];
		preset_names(list, sizeof list);
		sr_fail(err, 0, "preset \"%s\" is unknown (known: %s)", name ? name : "(null)",
			list);
		if (err)
			err->errnum = EINVAL;
		return -1;
	}
	if (sr_pol_replace_str(&p->preset, ps->name) < 0)
		return sr_fail(err, ENOMEM, "apply preset %s", name);
	p->limits = ps->limits;
	return 0;
}

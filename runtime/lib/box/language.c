/* The languages a run may be in (docs/languages.md): a table of what each
 * needs, the parse of its name, and whether a profile carries it, told by
 * the interpreter's presence in the profile's tree. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "language.h"

static const sr_language_info languages[] = {
	[SR_LANG_PYTHON] = { "python", "/usr/bin/python3", "main.py" },
	[SR_LANG_JAVASCRIPT] = { "javascript", "/usr/bin/node", "main.js" },
	[SR_LANG_BASH] = { "bash", "/usr/bin/bash", "main.sh" },
};

const sr_language_info *sr_language_info_of(sr_language l)
{
	return (unsigned)l < ARRAY_LEN(languages) ? &languages[l] : NULL;
}

const char *sr_language_name(sr_language l)
{
	const sr_language_info *i = sr_language_info_of(l);
	return i ? i->name : "unknown";
}

int sr_language_parse(const char *name, sr_language *out)
{
	static const struct {
		const char *alias;
		sr_language l;
	} aliases[] = {
		{ "python", SR_LANG_PYTHON },  { "py", SR_LANG_PYTHON },
		{ "python3", SR_LANG_PYTHON }, { "javascript", SR_LANG_JAVASCRIPT },
		{ "js", SR_LANG_JAVASCRIPT },  { "node", SR_LANG_JAVASCRIPT },
		{ "bash", SR_LANG_BASH },      { "sh", SR_LANG_BASH },
		{ "shell", SR_LANG_BASH },
	};
	for (size_t i = 0; name && i < ARRAY_LEN(aliases); i++)
		if (strcmp(name, aliases[i].alias) == 0) {
			*out = aliases[i].l;
			return 0;
		}
	return -1;
}

static bool tree_has(const char *rootfs, const char *interpreter)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s%s", rootfs ? rootfs : "", interpreter) >=
	    (int)sizeof path)
		return false;
	return access(path, X_OK) == 0;
}

int sr_language_check_profile(const char *rootfs, const char *profile, sr_language l, sr_error *err)
{
	const sr_language_info *i = sr_language_info_of(l);
	if (!i) {
		sr_refuse(err, EINVAL, "language %d is not one of python, javascript, bash",
			  (int)l);
		return sr_error_mark(err, SR_ERR_LANGUAGE);
	}
	if (tree_has(rootfs, i->interpreter))
		return 0;
	sr_refuse(err, ENOENT,
		  "profile \"%s\" has no %s (no %s in %s); use a profile that has it (node: "
		  "scripts/build-rootfs node; saferun rootfs list shows each profile's languages)",
		  profile, i->name, i->interpreter, rootfs ? rootfs : "the host");
	return sr_error_mark(err, SR_ERR_LANGUAGE);
}

bool sr_profile_has_language(const char *rootfs_dir, const char *profile, sr_language l)
{
	const sr_language_info *i = sr_language_info_of(l);
	if (!i || !profile)
		return false;
	if (strcmp(profile, "host") == 0)
		return tree_has(NULL, i->interpreter);
	if (strchr(profile, '/') || strcmp(profile, "..") == 0 || strcmp(profile, ".") == 0)
		return false;
	char root[PATH_MAX];
	if (snprintf(root, sizeof root, "%s/%s", rootfs_dir ? rootfs_dir : SR_DEFAULT_ROOTFS_DIR,
		     profile) >= (int)sizeof root)
		return false;
	return tree_has(root, i->interpreter);
}

/* `saferun info`: what this host offers a sandbox. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/base.h"
#include "box/box.h"
#include "saferun.h"

static void add_controllers(cJSON *j, sr_cgroup_mode mode)
{
	cJSON *arr = cJSON_AddArrayToObject(j, "controllers");
	static const char *const wanted[] = { "memory", "cpu", "cpuacct", "pids", "freezer" };
	if (mode == SR_CGROUP_V2) {
		char *dir = sr_cgroup_own_dir(mode, NULL), path[PATH_MAX], buf[512];
		snprintf(path, sizeof path, "%s/cgroup.controllers", dir ? dir : "/nonexistent");
		if (sr_read_file(path, buf, sizeof buf) > 0)
			for (char *save, *t = strtok_r(buf, " \n", &save); t;
			     t = strtok_r(NULL, " \n", &save))
				cJSON_AddItemToArray(arr, cJSON_CreateString(t));
		cJSON_AddStringToObject(j, "cgroup", dir ? dir : "");
		free(dir);
		return;
	}
	for (size_t i = 0; i < sizeof wanted / sizeof *wanted; i++) {
		char *dir = sr_cgroup_own_dir(mode, wanted[i]);
		if (dir)
			cJSON_AddItemToArray(arr, cJSON_CreateString(wanted[i]));
		if (dir && strcmp(wanted[i], "memory") == 0)
			cJSON_AddStringToObject(j, "cgroup", dir);
		free(dir);
	}
}

/* languages: {"minimal": ["python", "bash"], ...}, each told by its
 * interpreter's presence in the tree. */
static void add_languages(cJSON *langs, const char *rootfs_dir, const char *profile)
{
	cJSON *arr = cJSON_AddArrayToObject(langs, profile);
	for (sr_language l = SR_LANG_PYTHON; l <= SR_LANG_BASH; l++)
		if (sr_profile_has_language(rootfs_dir, profile, l))
			cJSON_AddItemToArray(arr, cJSON_CreateString(sr_language_name(l)));
}

static void add_profiles(cJSON *j, const char *rootfs_dir)
{
	cJSON *arr = cJSON_AddArrayToObject(j, "profiles");
	cJSON *langs = cJSON_AddObjectToObject(j, "languages");
	if (access("/usr/bin/python3", X_OK) == 0) {
		cJSON_AddItemToArray(arr, cJSON_CreateString("host"));
		add_languages(langs, rootfs_dir, "host");
	}
	DIR *d = opendir(rootfs_dir);
	for (struct dirent *e; d && (e = readdir(d));) {
		char py[PATH_MAX];
		if (e->d_name[0] == '.')
			continue;
		snprintf(py, sizeof py, "%s/%s/usr/bin/python3", rootfs_dir, e->d_name);
		if (access(py, X_OK) == 0) {
			cJSON_AddItemToArray(arr, cJSON_CreateString(e->d_name));
			add_languages(langs, rootfs_dir, e->d_name);
		}
	}
	if (d)
		closedir(d);
}

char *sr_info_json(const char *rootfs_dir)
{
	rootfs_dir = rootfs_dir ? rootfs_dir : SR_DEFAULT_ROOTFS_DIR;
	cJSON *j = cJSON_CreateObject();
	struct utsname u;
	char buf[256];
	cJSON_AddStringToObject(j, "version", SR_VERSION);
	if (uname(&u) == 0)
		cJSON_AddStringToObject(j, "kernel", u.release);
	sr_cgroup_mode mode = sr_cgroup_detect();
	cJSON_AddStringToObject(j, "cgroup_mode", sr_cgroup_mode_name(mode));
	add_controllers(j, mode);
	bool seccomp = sr_read_file("/proc/sys/kernel/seccomp/actions_avail", buf, sizeof buf) > 0;
	cJSON_AddBoolToObject(j, "seccomp", seccomp);
	bool userns = sr_read_file("/proc/sys/user/max_user_namespaces", buf, sizeof buf) > 0 &&
		      atoi(buf) > 0;
	cJSON_AddBoolToObject(j, "user_namespaces", userns);
	cJSON_AddStringToObject(j, "rootfs_dir", rootfs_dir);
	add_profiles(j, rootfs_dir);
	char *s = cJSON_Print(j);
	cJSON_Delete(j);
	return s;
}

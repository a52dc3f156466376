#include "caps.h"

#include <errno.h>
#include <linux/securebits.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int sr_caps_drop_all(uid_t uid, gid_t gid, const char **step)
{
	/* The bounding set needs CAP_SETPCAP to shrink, so it goes first,
	 * while we are still root of the user namespace. */
	*step = "drop the capability bounding set";
	for (cap_value_t c = 0; c < 64; c++) {
		if (cap_drop_bound(c) == 0)
			continue;
		if (errno == EINVAL) /* past the kernel's last capability */
			break;
		return -errno;
	}
	*step = "lock securebits";
	if (cap_set_secbits(SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
			    SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
			    SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED) < 0)
		return -errno;
	*step = "clear ambient capabilities";
	if (cap_reset_ambient() < 0)
		return -errno;
	/* Raw system calls for the ids: glibc's wrappers would broadcast the
	 * change to every thread a multi-threaded parent (saferund) had, taking
	 * locks this single-threaded child may have inherited held. */
	*step = "drop supplementary groups";
	if (syscall(SYS_setgroups, 0, NULL) < 0)
		return -errno;
	*step = "switch to the sandbox gid";
	if (syscall(SYS_setresgid, gid, gid, gid) < 0)
		return -errno;
	*step = "switch to the sandbox uid";
	if (syscall(SYS_setresuid, uid, uid, uid) < 0)
		return -errno;
	/* setresuid cleared effective and permitted (no KEEP_CAPS);
	 * inheritable survives it, so clear all three explicitly. A raw
	 * capset: cap_set_proc would allocate. */
	*step = "clear capability sets";
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2] = { { 0, 0, 0 }, { 0, 0, 0 } };
	if (capset(&hdr, data) < 0)
		return -errno;
	*step = "set no_new_privs";
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	return 0;
}

/* Host id slots (idslot.h): a flock per slot, and a look at /proc before
 * a slot is handed out again. */
#include "idslot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

/* Some host process still has an id of [base, base + SR_HOST_ID_COUNT):
 * a process of the slot's last sandbox not yet gone. /proc/PID is owned by
 * the task's effective ids, or for a non-dumpable task by its user
 * namespace's root (the slot's base): either is in the range. */
static bool range_in_use(uint32_t base)
{
	DIR *d = opendir("/proc");
	if (!d)
		return true; /* cannot tell: do not risk a reuse */
	bool used = false;
	struct dirent *e;
	while (!used && (e = readdir(d))) {
		struct stat st;
		if (e->d_name[0] < '1' || e->d_name[0] > '9' ||
		    fstatat(dirfd(d), e->d_name, &st, 0) < 0)
			continue;
		used = (st.st_uid >= base && st.st_uid - base < SR_HOST_ID_COUNT) ||
		       (st.st_gid >= base && st.st_gid - base < SR_HOST_ID_COUNT);
	}
	closedir(d);
	return used;
}

static int open_dir(sr_error *err)
{
	if ((mkdir("/run/saferun", 0755) < 0 && errno != EEXIST) ||
	    (mkdir(SR_ID_SLOT_DIR, 0700) < 0 && errno != EEXIST))
		return sr_fail(err, errno, "create %s", SR_ID_SLOT_DIR);
	int fd = open(SR_ID_SLOT_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? sr_fail(err, errno, "open %s", SR_ID_SLOT_DIR) : fd;
}

/* Slot i locked by us (its fd), or -1: another holds it or it is busy.
 * The file holds a byte while the slot may have processes: from the take
 * until a release that saw them all end. Only then (a holder that crashed,
 * or one that could not tell) is /proc looked at, which costs a few ms. */
static int try_slot(int dir, unsigned i)
{
	char name[16];
	snprintf(name, sizeof name, "%u", i);
	int fd = openat(dir, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	struct stat st;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0 || fstat(fd, &st) < 0 ||
	    (st.st_size > 0 && range_in_use(SR_HOST_ID_BASE + (uint32_t)i * SR_HOST_ID_COUNT)) ||
	    pwrite(fd, "1", 1, 0) != 1) {
		close(fd);
		return -1;
	}
	return fd;
}

int sr_idslot_take(sr_idslot *s, sr_error *err)
{
	/* From a random slot: concurrent takers rarely try the same ones. */
	char hex[5] = "0";
	sr_random_hex(hex, 2);
	return sr_idslot_take_from(s, (unsigned)strtoul(hex, NULL, 16), err);
}

int sr_idslot_take_from(sr_idslot *s, unsigned start, sr_error *err)
{
	*s = SR_IDSLOT_NONE;
	int dir = open_dir(err);
	if (dir < 0)
		return -1;
	for (unsigned k = 0; k < SR_ID_SLOTS; k++) {
		unsigned i = (start + k) % SR_ID_SLOTS;
		int fd = try_slot(dir, i);
		if (fd >= 0) {
			close(dir);
			*s =
			    (sr_idslot){ .fd = fd, .base = SR_HOST_ID_BASE + i * SR_HOST_ID_COUNT };
			return 0;
		}
	}
	close(dir);
	return sr_refuse(err, EAGAIN,
			 "all %u host id ranges of %s are in use (by sandboxes, or by processes "
			 "left from them); try again when runs have ended",
			 SR_ID_SLOTS, SR_ID_SLOT_DIR);
}

void sr_idslot_release(sr_idslot *s, bool all_gone)
{
	if (s->fd >= 0) {
		/* A failed truncate leaves the mark: the next taker looks. */
		int rc = all_gone ? ftruncate(s->fd, 0) : 0;
		(void)rc;
		close(s->fd);
	}
	*s = SR_IDSLOT_NONE;
}

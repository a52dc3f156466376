/* Host id slots (as root): two takers get different ranges, a released
 * slot is taken again, and a slot whose range a process still holds is
 * passed over until that process is gone. */
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "box/box.h"
#include "check.h"
#include "saferun.h"

static unsigned slot_of(const sr_idslot *s)
{
	return (s->base - SR_HOST_ID_BASE) / SR_HOST_ID_COUNT;
}

static void test_two_takers_get_different_aligned_ranges(void)
{
	sr_error err = { 0 };
	sr_idslot a, b;
	CHECK(sr_idslot_take(&a, &err) == 0 && a.fd >= 0);
	CHECK(sr_idslot_take(&b, &err) == 0 && b.fd >= 0);
	CHECK(a.base != b.base);
	CHECK(a.base >= SR_HOST_ID_BASE && (a.base - SR_HOST_ID_BASE) % SR_HOST_ID_COUNT == 0);
	CHECK(slot_of(&a) < SR_ID_SLOTS && slot_of(&b) < SR_ID_SLOTS);
	/* A slot held (by us here, by another saferun elsewhere) is passed over. */
	sr_idslot c;
	CHECK(sr_idslot_take_from(&c, slot_of(&a), &err) == 0 && c.base != a.base);
	unsigned again = slot_of(&a);
	sr_idslot_release(&a, true);
	CHECK(a.fd == -1);
	CHECK(sr_idslot_take_from(&a, again, &err) == 0 && slot_of(&a) == again);
	sr_idslot_release(&a, true);
	sr_idslot_release(&b, true);
	sr_idslot_release(&c, true);
}

static void test_a_range_still_in_use_is_not_handed_out(void)
{
	sr_error err = { 0 };
	sr_idslot a;
	if (sr_idslot_take(&a, &err) < 0) {
		CHECK(!"take a slot");
		return;
	}
	unsigned slot = slot_of(&a);
	/* What a sandbox's process left behind: a uid of the range. */
	int ready[2];
	CHECK(pipe(ready) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		uid_t id = a.base + 1000;
		close(a.fd); /* the lock goes with the release: only the uid is left */
		if (syscall(SYS_setresgid, id, id, id) < 0 ||
		    syscall(SYS_setresuid, id, id, id) < 0)
			_exit(1);
		close(ready[0]);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	char c;
	CHECK(read(ready[0], &c, 1) == 1);
	close(ready[0]);
	sr_idslot_release(&a, false);
	sr_idslot b;
	CHECK(sr_idslot_take_from(&b, slot, &err) == 0 && slot_of(&b) != slot);
	sr_idslot_release(&b, true);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	CHECK(sr_idslot_take_from(&b, slot, &err) == 0 && slot_of(&b) == slot);
	sr_idslot_release(&b, true);
}

int main(void)
{
	if (geteuid() != 0) {
		fprintf(stderr,
			"test_idslot locks files in /run and changes uids: run it as root\n");
		return 1;
	}
	test_two_takers_get_different_aligned_ranges();
	test_a_range_still_in_use_is_not_handed_out();
	return check_report();
}

/* A warm sandbox's pid 1. The sandbox's first process shares the
 * zygote's memory until it has forked python (pid 2); then it execs this
 * program from a sealed memfd (sr_child_exec_init), so pid 1 carries a
 * few pages instead of a copy of the zygote's address space, which every
 * sandbox would otherwise copy at its start and tear down at its end.
 * It runs locked down like the rest of the sandbox: its ids, capabilities,
 * no_new_privs and seccomp filter are the ones its process had.
 *
 *   saferun-init REPORT_FD PYTHON_PID
 *
 * Reaps every child (orphans come here); when python ends, reports its
 * wait status on REPORT_FD (struct sr_report, supervise.h) and exits,
 * which ends every other process of the pid namespace. Static: nothing
 * of the rootfs is needed. */
#include <errno.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child/child.h"

int main(int argc, char **argv)
{
	if (argc != 3)
		return 125;
	prctl(PR_SET_NAME, "saferun-init", 0, 0, 0);
	int report = atoi(argv[1]);
	pid_t py = (pid_t)atoi(argv[2]);
	for (;;) {
		int st;
		pid_t pid = wait4(-1, &st, 0, NULL);
		if (pid == py) {
			sr_report r = { .kind = SR_REPORT_EXIT, .wstatus = st };
			ssize_t n = write(report, &r, sizeof r);
			_exit(n == (ssize_t)sizeof r ? 0 : 126);
		}
		if (pid < 0 && errno != EINTR)
			_exit(125);
	}
}

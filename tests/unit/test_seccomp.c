/* The default policy's seccomp filter, compiled and loaded in a forked
 * child (no_new_privs, no root needed): each probe makes a syscall and the
 * child reports its errno through a pipe. Probes pass arguments that fail
 * harmlessly without the filter, and most fail differently there, so an
 * errno below comes from the filter. */
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "child/child.h"
#include "policy/policy.h"
#include "saferun.h"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif
#define X32_SYSCALL_BIT 0x40000000

static int pipe_fd = -1; /* a pipe end the ioctl probes can use */

static int err_of(long rc)
{
	return rc < 0 ? errno : 0;
}

static int probe_ioctl(unsigned long cmd)
{
	int n = 0;
	return err_of(syscall(SYS_ioctl, pipe_fd, cmd, &n));
}

static int p_tiocsti(void)
{
	return probe_ioctl(TIOCSTI);
}
static int p_tiocsti_high(void)
{
	return probe_ioctl(TIOCSTI | (1UL << 32));
}
static int p_tioclinux(void)
{
	return probe_ioctl(TIOCLINUX);
}
static int p_tcgets(void)
{
	return probe_ioctl(TCGETS);
}
static int p_tcgets_high(void)
{
	return probe_ioctl(TCGETS | (1UL << 32));
}
static int p_fionread(void)
{
	return probe_ioctl(FIONREAD);
}
static int p_ioctl_next_to_tiocsti(void)
{
	return probe_ioctl(0x5413); /* TIOCGWINSZ */
}
static int p_clone3(void)
{
	return err_of(syscall(SYS_clone3, NULL, 0));
}
static int p_unshare_user(void)
{
	return err_of(unshare(CLONE_NEWUSER));
}
static int p_mount(void)
{
	return err_of(mount("none", "/nonexistent/saferun", "tmpfs", 0, NULL));
}
static int p_keyctl(void)
{
	return err_of(syscall(SYS_keyctl, 9999, 0, 0, 0, 0));
}
static int p_unknown_nr(void)
{
	return err_of(syscall(1000));
}
static int p_modify_ldt(void)
{
	char b[16];
	return err_of(syscall(SYS_modify_ldt, 0, b, sizeof b));
}
static int p_ptrace(void)
{
	return err_of(ptrace(PTRACE_ATTACH, 999999999, 0, 0));
}
static int p_bpf(void)
{
	return err_of(syscall(SYS_bpf, 0, NULL, 0));
}
static int p_perf(void)
{
	return err_of(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
}
static int p_io_uring(void)
{
	return err_of(syscall(SYS_io_uring_setup, 0, NULL));
}
static int p_setns(void)
{
	return err_of(setns(-1, 0));
}
static int p_chroot(void)
{
	return err_of(chroot("/nonexistent/saferun"));
}
static int p_personality_query(void)
{
	return err_of(personality(0xffffffff));
}
static int p_personality_set(void)
{
	return err_of(personality(PER_LINUX32));
}
static int p_getpid(void)
{
	return err_of(syscall(SYS_getpid));
}

static int probe_socket_proto(long domain, long proto)
{
	long fd = syscall(SYS_socket, domain, SOCK_STREAM | SOCK_CLOEXEC, proto);
	if (fd < 0 && domain == AF_NETLINK)
		fd = syscall(SYS_socket, domain, SOCK_RAW | SOCK_CLOEXEC, proto);
	if (fd >= 0)
		close((int)fd);
	return err_of(fd);
}

static int probe_socket(long domain)
{
	return probe_socket_proto(domain, 0);
}

static int p_af_unix(void)
{
	return probe_socket(AF_UNIX);
}
static int p_af_inet(void)
{
	return probe_socket(AF_INET);
}
static int p_af_inet6(void)
{
	int e = probe_socket(AF_INET6);
	return e == EAFNOSUPPORT && access("/proc/net/if_inet6", F_OK) != 0 ? 0
									    : e; /* no IPv6 here */
}
static int p_af_netlink_route(void)
{
	return probe_socket_proto(AF_NETLINK, 0);
}
static int p_af_netlink_audit(void)
{
	return probe_socket_proto(AF_NETLINK, 9);
}
static int p_af_packet(void)
{
	return probe_socket(AF_PACKET);
}
static int p_af_alg(void)
{
	return probe_socket(AF_ALG);
}
static int p_af_vsock(void)
{
	return probe_socket(AF_VSOCK);
}
static int p_af_zero(void)
{
	return probe_socket(0);
}
static int p_af_high(void)
{
	return probe_socket((1L << 32) | AF_UNIX);
}

static int p_socketpair(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return errno;
	close(sv[0]);
	close(sv[1]);
	return 0;
}

/* A raw clone: if the filter let it through, the new process leaves at once. */
static int probe_clone(unsigned long flags)
{
	long pid = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
	if (pid == 0)
		_exit(0);
	if (pid < 0)
		return errno;
	waitpid((pid_t)pid, NULL, 0);
	return 0;
}

static int p_clone_newuser(void)
{
	return probe_clone(CLONE_NEWUSER);
}
static int p_clone_newnet(void)
{
	return probe_clone(CLONE_NEWNET);
}
static int p_clone_newns(void)
{
	return probe_clone(CLONE_NEWNS);
}
static int p_clone_plain(void)
{
	return probe_clone(0);
}

static int p_fork(void)
{
	int status;
	pid_t pid = fork();
	if (pid == 0)
		_exit(7);
	if (pid < 0)
		return errno;
	if (waitpid(pid, &status, 0) < 0)
		return errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 7 ? 0 : ECHILD;
}

static void *thread_main(void *arg)
{
	return arg;
}

static int p_thread(void)
{
	pthread_t t;
	void *ret = NULL;
	int rc = pthread_create(&t, NULL, thread_main, &pipe_fd);
	if (rc)
		return rc;
	rc = pthread_join(t, &ret);
	return rc ? rc : ret == &pipe_fd ? 0 : EINVAL;
}

/* Run fn in a grandchild; report how it ended: exit code, or 1000 + signal. */
static int in_grandchild(void (*fn)(void))
{
	int status;
	pid_t pid = fork();
	if (pid == 0) {
		fn();
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		return -1;
	return WIFSIGNALED(status) ? 1000 + WTERMSIG(status) : WEXITSTATUS(status);
}

static void x32_getpid(void)
{
	syscall(X32_SYSCALL_BIT | SYS_getpid);
	_exit(3);
}

static void exec_true(void)
{
	char *argv[] = { "true", NULL }, *envp[] = { NULL };
	execve("/bin/true", argv, envp);
	_exit(errno);
}

/* x32 syscalls share x86_64's audit arch: the filter must kill on them. */
static int p_x32_kills(void)
{
	return in_grandchild(x32_getpid) == 1000 + SIGSYS ? 0 : EINVAL;
}
static int p_execve(void)
{
	return in_grandchild(exec_true);
}

static const struct probe {
	const char *name;
	int (*fn)(void);
	int want; /* errno, 0 for success */
} probes[] = {
	{ "ioctl TIOCSTI", p_tiocsti, EPERM },
	{ "ioctl TIOCSTI with bit 32 set", p_tiocsti_high, EPERM },
	{ "ioctl TIOCLINUX", p_tioclinux, EPERM },
	{ "ioctl TCGETS on a pipe", p_tcgets, ENOTTY },
	{ "ioctl TCGETS with bit 32 set", p_tcgets_high, ENOTTY },
	{ "ioctl FIONREAD", p_fionread, 0 },
	{ "ioctl 0x5413", p_ioctl_next_to_tiocsti, ENOTTY },
	{ "clone3", p_clone3, ENOSYS },
	{ "clone(CLONE_NEWUSER)", p_clone_newuser, EPERM },
	{ "clone(CLONE_NEWNET)", p_clone_newnet, EPERM },
	{ "clone(CLONE_NEWNS)", p_clone_newns, EPERM },
	{ "clone(SIGCHLD)", p_clone_plain, 0 },
	/* after the clones: without the filter it would leave this process in an
	 * unmapped user namespace, where clone(CLONE_NEWUSER) fails anyway */
	{ "unshare(CLONE_NEWUSER)", p_unshare_user, EPERM },
	{ "fork", p_fork, 0 },
	{ "pthread_create", p_thread, 0 },
	{ "execve /bin/true", p_execve, 0 },
	{ "mount", p_mount, EPERM },
	{ "keyctl", p_keyctl, EPERM },
	{ "ptrace", p_ptrace, EPERM },
	{ "bpf", p_bpf, EPERM },
	{ "perf_event_open", p_perf, EPERM },
	{ "io_uring_setup", p_io_uring, EPERM },
	{ "setns", p_setns, EPERM },
	{ "chroot", p_chroot, EPERM },
	{ "syscall 1000", p_unknown_nr, ENOSYS },
	{ "modify_ldt (not listed)", p_modify_ldt, ENOSYS },
	{ "socket AF_UNIX", p_af_unix, 0 },
	{ "socket AF_INET", p_af_inet, 0 },
	{ "socket AF_INET6", p_af_inet6, 0 },
	{ "socket AF_NETLINK NETLINK_ROUTE", p_af_netlink_route, 0 },
	{ "socket AF_NETLINK NETLINK_AUDIT", p_af_netlink_audit, EAFNOSUPPORT },
	{ "socket AF_PACKET", p_af_packet, EAFNOSUPPORT },
	{ "socket AF_ALG", p_af_alg, EAFNOSUPPORT },
	{ "socket AF_VSOCK", p_af_vsock, EAFNOSUPPORT },
	{ "socket 0", p_af_zero, EAFNOSUPPORT },
	{ "socket AF_UNIX with bit 32 set", p_af_high, EAFNOSUPPORT },
	{ "socketpair AF_UNIX", p_socketpair, 0 },
	{ "personality query", p_personality_query, 0 },
	{ "personality PER_LINUX32", p_personality_set, ENOSYS },
	{ "getpid", p_getpid, 0 },
	{ "x32 getpid kills", p_x32_kills, 0 },
};
#define N_PROBES (sizeof probes / sizeof probes[0])

static int compile_default(sr_bpf *prog)
{
	sr_error err = { 0 };
	sr_policy *p = NULL;
	struct timespec t0, t1;

	if (sr_policy_default(&p, &err) < 0) {
		fprintf(stderr, "default policy: %s\n", err.msg);
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = sr_seccomp_compile(&p->seccomp, prog, &err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rc < 0)
		fprintf(stderr, "compile: %s\n", err.msg);
	else
		printf("default policy: %zu rules compile to %u BPF instructions in %.2f ms\n",
		       p->seccomp.n_rules, prog->len,
		       (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
			   (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	sr_policy_free(p);
	return rc;
}

static void child_run_probes(const sr_bpf *prog, int out)
{
	int results[N_PROBES];

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || sr_seccomp_load(prog) < 0)
		_exit(100);
	for (size_t i = 0; i < N_PROBES; i++)
		results[i] = probes[i].fn();
	if (write(out, results, sizeof results) != (ssize_t)sizeof results)
		_exit(101);
	_exit(0);
}

static void test_default_filter_behaviour(const sr_bpf *prog)
{
	int results[N_PROBES], fds[2], status = 0;

	if (pipe2(fds, O_CLOEXEC) < 0) {
		CHECK(!"pipe");
		return;
	}
	pipe_fd = fds[1];
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		child_run_probes(prog, fds[1]);
	close(fds[1]);
	ssize_t got = read(fds[0], results, sizeof results);
	close(fds[0]);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_INT(got, sizeof results);
	if (got != (ssize_t)sizeof results)
		return;
	for (size_t i = 0; i < N_PROBES; i++) {
		if (results[i] != probes[i].want)
			fprintf(stderr, "%s: errno %d (%s), want %d (%s)\n", probes[i].name,
				results[i], strerror(results[i]), probes[i].want,
				strerror(probes[i].want));
		CHECK_INT(results[i], probes[i].want);
	}
}

/* CPython itself, under the filter: threads, subprocess, sockets, and
 * numpy's OpenBLAS when it is installed. Skipped without /usr/bin/python3. */
static void test_python_runs_under_the_default_filter(const sr_bpf *prog)
{
	static const char script[] =
	    "import os, socket, subprocess, sys, tempfile, threading\n"
	    "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
	    "socket.socket(socket.AF_INET6 if socket.has_ipv6 else socket.AF_INET).close()\n"
	    "a, b = socket.socketpair(); a.send(b'x'); assert b.recv(1) == b'x'\n"
	    "assert subprocess.run(['/bin/true']).returncode == 0\n"
	    "with tempfile.TemporaryFile() as f: f.write(b'x')\n"
	    "socket.if_nameindex()\n"
	    "try:\n"
	    "    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9)\n"
	    "    sys.exit('netlink allowed')\n"
	    "except OSError as e:\n"
	    "    assert e.errno == 97, e\n"
	    "try:\n"
	    "    import numpy\n"
	    "    assert abs(numpy.linalg.det(numpy.eye(50) * 2) - 2 ** 50) < 1e3\n"
	    "except ImportError:\n"
	    "    pass\n";
	int status = 0;

	if (access("/usr/bin/python3", X_OK) != 0) {
		printf("skip: no /usr/bin/python3\n");
		return;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		char *argv[] = { "python3", "-I", "-c", (char *)script, NULL };
		char *envp[] = { "PATH=/usr/bin:/bin", "LANG=C.UTF-8", "OPENBLAS_NUM_THREADS=2",
				 NULL };
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || sr_seccomp_load(prog) < 0)
			_exit(100);
		execve("/usr/bin/python3", argv, envp);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status));
	CHECK_INT(WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status), 0);
}

static void test_compile_errors_name_the_rule(void)
{
	char *names[] = { "write" };
	sr_seccomp_rule rules[] = {
		{ .names = names,
		  .n_names = 1,
		  .action = { SR_SCMP_ALLOW, 0 },
		  .n_args = 1,
		  .args = { { .index = 0, .value = 1, .op = SR_CMP_EQ } } },
		{ .names = names,
		  .n_names = 1,
		  .action = { SR_SCMP_KILL_PROCESS, 0 },
		  .n_args = 1,
		  .args = { { .index = 0, .value = 1, .op = SR_CMP_EQ } } },
	};
	sr_seccomp_policy p = { .default_action = { SR_SCMP_ERRNO, 38 },
				.rules = rules,
				.n_rules = 2 };
	sr_error err = { 0 };
	sr_bpf prog = { 0 };

	CHECK_INT(sr_seccomp_compile(&p, &prog, &err), -1);
	CHECK(prog.insns == NULL);
	CHECK(strstr(err.msg,
		     "policy.seccomp.syscalls[1]: libseccomp refused the rule for \"write\"") ==
	      err.msg);
	CHECK_INT(err.errnum, EEXIST);

	p.default_action.errno_ret = 70000; /* would wrap to 4464 in SCMP_ACT_ERRNO */
	CHECK_INT(sr_seccomp_compile(&p, &prog, &err), -1);
	CHECK_STR(err.msg,
		  "policy.seccomp.defaultErrnoRet: errno 70000 is above 4095: Invalid argument");
	p.default_action.errno_ret = 38;

	char *bogus[] = { "fooz" };
	sr_seccomp_rule bad = { .names = bogus, .n_names = 1, .action = { SR_SCMP_ALLOW, 0 } };
	p.rules = &bad;
	p.n_rules = 1;
	CHECK_INT(sr_seccomp_compile(&p, &prog, &err), -1);
	CHECK_STR(
	    err.msg,
	    "policy.seccomp.syscalls[0].names[0]: \"fooz\" is not a syscall libseccomp knows");
}

/* A rule that repeats the default action changes nothing and is skipped;
 * names the native arch lacks (socketcall on x86_64) are skipped too. */
static void test_redundant_and_foreign_names_are_skipped(void)
{
	char *names[] = { "clone3", "socketcall", "read" };
	sr_seccomp_rule rule = { .names = names, .n_names = 3, .action = { SR_SCMP_ERRNO, 38 } };
	sr_seccomp_rule allow = { .names = names + 1,
				  .n_names = 2,
				  .action = { SR_SCMP_ALLOW, 0 } };
	sr_seccomp_rule rules[] = { rule, allow };
	sr_seccomp_policy p = { .default_action = { SR_SCMP_ERRNO, 38 },
				.rules = rules,
				.n_rules = 1 };
	sr_error err = { 0 };
	sr_bpf prog = { 0 };

	CHECK_INT(sr_seccomp_compile(&p, &prog, &err), 0);
	CHECK(prog.len > 0);
	sr_bpf_free(&prog);
	CHECK(prog.insns == NULL && prog.len == 0);
	p.n_rules = 2;
	rules[0].names = names;
	rules[0].n_names = 1;
	CHECK_INT(sr_seccomp_compile(&p, &prog, &err), 0);
	sr_bpf_free(&prog);
	sr_bpf_free(NULL);
}

static void test_known_names(void)
{
	CHECK_INT(sr_seccomp_known("read"), 0);
	CHECK_INT(sr_seccomp_known("clone3"), 0);
	CHECK_INT(sr_seccomp_known("socketcall"), 0); /* known, not on x86_64 */
	CHECK_INT(sr_seccomp_known("fooz"), -1);
	CHECK_INT(sr_seccomp_known(""), -1);
}

int main(void)
{
	sr_bpf prog = { 0 };

	test_known_names();
	test_compile_errors_name_the_rule();
	test_redundant_and_foreign_names_are_skipped();
	CHECK_INT(compile_default(&prog), 0);
	if (prog.insns) {
		test_default_filter_behaviour(&prog);
		test_python_runs_under_the_default_filter(&prog);
	}
	sr_bpf_free(&prog);
	return check_report();
}

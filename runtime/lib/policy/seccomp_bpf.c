#include "seccomp_bpf.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"

static uint32_t scmp_action(sr_seccomp_action a)
{
	switch (a.kind) {
	case SR_SCMP_ALLOW: return SCMP_ACT_ALLOW;
	case SR_SCMP_ERRNO: return SCMP_ACT_ERRNO(a.errno_ret);
	case SR_SCMP_KILL_PROCESS: return SCMP_ACT_KILL_PROCESS;
	case SR_SCMP_KILL_THREAD: return SCMP_ACT_KILL_THREAD;
	case SR_SCMP_TRAP: return SCMP_ACT_TRAP;
	case SR_SCMP_LOG: return SCMP_ACT_LOG;
	}
	return SCMP_ACT_KILL_PROCESS;
}

static enum scmp_compare scmp_op(sr_seccomp_op op)
{
	static const enum scmp_compare map[] = {
		[SR_CMP_NE] = SCMP_CMP_NE,
		[SR_CMP_LT] = SCMP_CMP_LT,
		[SR_CMP_LE] = SCMP_CMP_LE,
		[SR_CMP_EQ] = SCMP_CMP_EQ,
		[SR_CMP_GE] = SCMP_CMP_GE,
		[SR_CMP_GT] = SCMP_CMP_GT,
		[SR_CMP_MASKED_EQ] = SCMP_CMP_MASKED_EQ,
	};
	if ((unsigned)op >= sizeof map / sizeof map[0])
		return _SCMP_CMP_MIN; /* libseccomp rejects it with EINVAL */
	return map[op];
}

/* SCMP_ACT_ERRNO keeps 16 bits and the kernel caps errno at 4095 (MAX_ERRNO):
 * refuse what would silently wrap. */
static int check_errno(sr_seccomp_action a, const char *what, size_t idx, sr_error *err)
{
	if (a.kind != SR_SCMP_ERRNO || a.errno_ret <= 4095)
		return 0;
	if (idx == SIZE_MAX)
		return sr_fail(err, EINVAL, "policy.seccomp.%s: errno %u is above 4095", what,
			       a.errno_ret);
	return sr_fail(err, EINVAL, "policy.seccomp.syscalls[%zu].%s: errno %u is above 4095", idx,
		       what, a.errno_ret);
}

int sr_seccomp_known(const char *name)
{
	return seccomp_syscall_resolve_name(name) == __NR_SCMP_ERROR ? -1 : 0;
}

static int add_rule(scmp_filter_ctx ctx, uint32_t def, const sr_seccomp_rule *r, size_t idx,
		    sr_error *err)
{
	uint32_t act = scmp_action(r->action);
	struct scmp_arg_cmp cmp[SR_SECCOMP_MAX_ARGS];

	if (check_errno(r->action, "errnoRet", idx, err) < 0)
		return -1;
	/* libseccomp refuses a rule that repeats the default (EACCES); such a
	 * rule changes nothing, so skip it as runc does. */
	if (act == def)
		return 0;
	if (r->n_args > SR_SECCOMP_MAX_ARGS)
		return sr_fail(err, 0, "policy.seccomp.syscalls[%zu]: more than %d args", idx,
			       SR_SECCOMP_MAX_ARGS);
	for (size_t i = 0; i < r->n_args; i++)
		cmp[i] = (struct scmp_arg_cmp){
			.arg = r->args[i].index,
			.op = scmp_op(r->args[i].op),
			.datum_a = r->args[i].value,
			.datum_b = r->args[i].value_two,
		};
	for (size_t i = 0; i < r->n_names; i++) {
		int nr = seccomp_syscall_resolve_name(r->names[i]);
		if (nr == __NR_SCMP_ERROR)
			return sr_fail(err, 0,
				       "policy.seccomp.syscalls[%zu].names[%zu]: \"%s\" is not a "
				       "syscall libseccomp knows",
				       idx, i, r->names[i]);
		if (nr < 0) /* a pseudo-syscall: not on this arch */
			continue;
		int rc = seccomp_rule_add_array(ctx, act, nr, (unsigned)r->n_args, cmp);
		if (rc < 0)
			return sr_fail(
			    err, -rc,
			    "policy.seccomp.syscalls[%zu]: libseccomp refused the rule for "
			    "\"%s\"%s",
			    idx, r->names[i],
			    rc == -EEXIST
				? " (another rule has the same conditions and a different action)"
				: "");
	}
	return 0;
}

static int set_attrs(scmp_filter_ctx ctx, sr_error *err)
{
	static const struct {
		enum scmp_filter_attr attr;
		uint32_t value;
		const char *name;
	} attrs[] = {
		/* x32 and foreign-arch syscalls must not reach the allow-list */
		{ SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS, "ACT_BADARCH" },
		/* the sandbox sets no_new_privs itself, before loading */
		{ SCMP_FLTATR_CTL_NNP, 0, "CTL_NNP" },
		/* a binary tree of syscall numbers: ~300 rules, O(log n) checks */
		{ SCMP_FLTATR_CTL_OPTIMIZE, 2, "CTL_OPTIMIZE" },
	};
	for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
		int rc = seccomp_attr_set(ctx, attrs[i].attr, attrs[i].value);
		if (rc < 0)
			return sr_fail(err, -rc, "seccomp_attr_set %s", attrs[i].name);
	}
	return 0;
}

/* libseccomp 2.5 exports only to an fd: go through a memfd. */
static int export_bpf(scmp_filter_ctx ctx, sr_bpf *out, sr_error *err)
{
	int rc = -1;
	struct stat st;
	struct sock_filter *insns = NULL;
	int fd = memfd_create("saferun-bpf", MFD_CLOEXEC);

	if (fd < 0)
		return sr_fail(err, errno, "memfd_create for the seccomp program");
	int erc = seccomp_export_bpf(ctx, fd);
	if (erc < 0) {
		sr_fail(err, -erc, "seccomp_export_bpf");
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		sr_fail(err, errno, "fstat the exported seccomp program");
		goto out;
	}
	size_t n = (size_t)st.st_size / sizeof *insns;
	if (n == 0 || n * sizeof *insns != (size_t)st.st_size) {
		sr_fail(err, EINVAL, "libseccomp exported a seccomp program of %lld bytes",
			(long long)st.st_size);
		goto out;
	}
	if (n > BPF_MAXINSNS) {
		sr_fail(err, E2BIG,
			"policy.seccomp: the rules compile to %zu BPF instructions, more than the "
			"kernel's %d (use fewer rules)",
			n, BPF_MAXINSNS);
		goto out;
	}
	insns = malloc((size_t)st.st_size);
	if (!insns) {
		sr_fail(err, ENOMEM, "allocate the seccomp program");
		goto out;
	}
	ssize_t got = pread(fd, insns, (size_t)st.st_size, 0);
	if (got != st.st_size) {
		sr_fail(err, got < 0 ? errno : EIO, "read back the seccomp program");
		goto out;
	}
	out->insns = insns;
	out->len = (unsigned short)n;
	insns = NULL;
	rc = 0;
out:
	free(insns);
	close(fd);
	return rc;
}

int sr_seccomp_compile(const sr_seccomp_policy *p, sr_bpf *out, sr_error *err)
{
	int rc = -1;
	uint32_t def = scmp_action(p->default_action);
	scmp_filter_ctx ctx;

	out->insns = NULL;
	out->len = 0;
	if (check_errno(p->default_action, "defaultErrnoRet", SIZE_MAX, err) < 0)
		return -1;
	if (!(ctx = seccomp_init(def)))
		return sr_fail(err, EINVAL, "seccomp_init with the default action");
	if (set_attrs(ctx, err) < 0)
		goto out;
	for (size_t i = 0; i < p->n_rules; i++)
		if (add_rule(ctx, def, &p->rules[i], i, err) < 0)
			goto out;
	rc = export_bpf(ctx, out, err);
out:
	seccomp_release(ctx);
	return rc;
}

void sr_bpf_free(sr_bpf *prog)
{
	if (!prog)
		return;
	free(prog->insns);
	prog->insns = NULL;
	prog->len = 0;
}

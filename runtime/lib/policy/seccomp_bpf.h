/* Turning a policy's seccomp section into a BPF program, and loading it.
 * (Not seccomp.h: runtime/lib is an -I directory, and that name would hide
 * libseccomp's <seccomp.h>.) */
#ifndef SR_SECCOMP_BPF_H
#define SR_SECCOMP_BPF_H

#include "child/child.h"
#include "saferun.h"

/* Compile the rules to a BPF program for the native arch; any other arch
 * (and x32 on x86_64) kills the process. Runs in the parent: allocates and
 * uses libseccomp. Errors name the rule as policy.seccomp.syscalls[N]. */
int sr_seccomp_compile(const sr_seccomp_policy *p, sr_bpf *out, sr_error *err);

/* Installing it: sr_seccomp_load (contain.h). */

void sr_bpf_free(sr_bpf *prog);

/* 0 if libseccomp knows the syscall name (on any arch), -1 if not. Names
 * the native arch lacks are known here and skipped by the compiler. */
int sr_seccomp_known(const char *name);

#endif

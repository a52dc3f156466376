/* Small file helpers shared by the modules that talk to /proc and cgroupfs. */
#ifndef SR_UTIL_H
#define SR_UTIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "saferun.h"

/* Write s to an existing file (no create). Returns 0 or -errno. */
int sr_write_file(const char *path, const char *s);
/* Write all of data to fd (retrying short writes and EINTR): 0 or -1 with errno. */
int sr_write_all(int fd, const void *data, size_t len);
/* Read exactly len bytes (retrying short reads and EINTR): 0, or -1
 * (errno set; 0 at end of file). */
int sr_read_all(int fd, void *buf, size_t len);
/* 64-bit FNV-1a of len bytes: cache file names, never a trust decision. */
uint64_t sr_fnv1a(const void *data, size_t len);
/* A close-on-exec memfd holding data, sealed against any change, and
 * executable (MFD_EXEC where the kernel knows it: with vm.memfd_noexec 1
 * a memfd is not executable otherwise): -1 with errno. */
int sr_sealed_memfd(const char *name, const unsigned char *data, size_t len);
/* The same, execute-only (mode 0111) for a program the sandbox runs but
 * must not read or trace: pid 1's init, the checker. */
int sr_exec_only_memfd(const char *name, const unsigned char *data, size_t len);
/* Send len bytes and fd (SCM_RIGHTS) as one message; sendmsg's return. */
ssize_t sr_send_fd(int sock, const void *data, size_t len, int fd, int flags);
/* The same with n (1..SR_SEND_FDS_MAX) fds in one message. */
#define SR_SEND_FDS_MAX 4
ssize_t sr_send_fds(int sock, const void *data, size_t len, const int *fds, int n, int flags);
/* Receive a one-byte message with an fd (close-on-exec): the fd, or -1. */
int sr_recv_fd(int sock, int flags);
/* Read at most size-1 bytes, NUL-terminated. Returns length or -errno. */
ssize_t sr_read_file(const char *path, char *buf, size_t size);
/* First number in the file. Returns 0 or -errno. */
int sr_read_u64(const char *path, uint64_t *out);
/* Value of "key N" in a flat-keyed file (memory.events, cpu.stat). */
int sr_read_keyed_u64(const char *path, const char *key, uint64_t *out);
/* Random lowercase hex of n bytes into out (2n+1 chars). */
int sr_random_hex(char *out, size_t n);
/* Milliseconds on CLOCK_MONOTONIC. */
uint64_t sr_now_ms(void);
/* pthread_cond_timedwait for at most ms, on a cv made with CLOCK_MONOTONIC
 * (mu held, as for any wait). */
void sr_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t ms);
/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
size_t sr_utf8_seq(const unsigned char *s, size_t left);
/* sr_utf8_valid: saferun.h */
#endif

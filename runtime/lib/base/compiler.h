/* Sizes and array lengths, defined once for the library and its tests
 * (KIB..TIB are unsigned long long: a limit in bytes never overflows), and
 * the parent side's cleanup attributes. */
#ifndef SR_COMPILER_H
#define SR_COMPILER_H

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define KIB 1024ULL
#define MIB (1024ULL * KIB)
#define GIB (1024ULL * MIB)
#define TIB (1024ULL * GIB)

/* Cleanup attributes (as crun's and bubblewrap's cleanup_* helpers): a
 * variable declared `cleanup_free char *s = NULL;` is freed, `cleanup_close
 * int fd = -1;` closed, and so on, on every path out of its scope; hand one
 * on with sr_take_ptr / sr_take_fd, which leave nothing to clean up.
 *
 * Parent side only. What runs in a sandbox's first process (lib/child, the
 * zygote module, the warm path's init) is compiled with SR_SANDBOX_SIDE,
 * where these are not defined: each step there is written out, with no
 * allocation (a cleanup would hide a free after clone in a threaded
 * process). */
#ifndef SR_SANDBOX_SIDE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define SR_CLEANUP(fn) __attribute__((cleanup(fn)))

static inline void sr_cleanup_free(void *p)
{
	free(*(void **)p);
}

static inline void sr_cleanup_close(const int *fd)
{
	if (*fd >= 0)
		close(*fd);
}

static inline void sr_cleanup_fclose(FILE **f)
{
	if (*f)
		fclose(*f);
}

static inline void sr_cleanup_closedir(DIR **d)
{
	if (*d)
		closedir(*d);
}

#define cleanup_free     SR_CLEANUP(sr_cleanup_free)
#define cleanup_close    SR_CLEANUP(sr_cleanup_close)
#define cleanup_fclose   SR_CLEANUP(sr_cleanup_fclose)
#define cleanup_closedir SR_CLEANUP(sr_cleanup_closedir)

/* cJSON's, where cJSON.h is included before this header. */
#ifdef cJSON__h
static inline void sr_cleanup_cjson(cJSON **j)
{
	cJSON_Delete(*j);
}
#define cleanup_cjson SR_CLEANUP(sr_cleanup_cjson)
#endif

/* The value, and NULL (or -1) left behind: `*out = sr_take_ptr(&buf);`. */
static inline void *sr_take_ptr(void *pp)
{
	void **p = (void **)pp, *v = *p;
	*p = NULL;
	return v;
}

static inline int sr_take_fd(int *fd)
{
	int v = *fd;
	*fd = -1;
	return v;
}
#endif /* SR_SANDBOX_SIDE */

#endif

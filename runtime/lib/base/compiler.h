/* Sizes and array lengths, defined once for the library and its tests
 * (KIB..TIB are unsigned long long: a limit in bytes never overflows). */
#ifndef SR_COMPILER_H
#define SR_COMPILER_H

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define KIB 1024ULL
#define MIB (1024ULL * KIB)
#define GIB (1024ULL * MIB)
#define TIB (1024ULL * GIB)

#endif

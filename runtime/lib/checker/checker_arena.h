/* A bump allocator for the checker. The checker never calls malloc: in its
 * confined child (seccomp strict mode) every allocation must come from
 * memory mapped before the filter went on, and a fixed arena is also its
 * memory bound. In-process callers (tests, the fuzzer) use heap blocks. */
#ifndef SR_CHECKER_ARENA_H
#define SR_CHECKER_ARENA_H

#include <stddef.h>

typedef struct sr_arena_block sr_arena_block;

typedef struct sr_arena {
	char *base; /* the block being filled */
	size_t size, used;
	size_t limit; /* heap mode: bytes all blocks may total */
	size_t total;
	sr_arena_block *blocks; /* heap mode: every block, for sr_arena_free */
	int heap;
} sr_arena;

/* One fixed region (never grows, never freed by the arena). */
void sr_arena_init_fixed(sr_arena *a, void *mem, size_t size);
/* Heap blocks up to limit bytes in all. */
void sr_arena_init_heap(sr_arena *a, size_t limit);
/* n bytes aligned to 16, zeroed; NULL when the arena is exhausted. */
void *sr_arena_alloc(sr_arena *a, size_t n);
/* n * size bytes, NULL on overflow or exhaustion. */
void *sr_arena_array(sr_arena *a, size_t n, size_t size);
/* The same, not zeroed, for arrays filled element by element before any
 * read: in the confined child the pages past the last element written are
 * then never touched (a page fault each). */
void *sr_arena_array_uninit(sr_arena *a, size_t n, size_t size);
void sr_arena_free(sr_arena *a);

#endif

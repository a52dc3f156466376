#include "checker_arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_MIN (64u << 10)

struct sr_arena_block {
	sr_arena_block *next;
	size_t size;
	max_align_t data[];
};

void sr_arena_init_fixed(sr_arena *a, void *mem, size_t size)
{
	size_t skew = (16 - (uintptr_t)mem % 16) % 16;
	skew = skew < size ? skew : size;
	*a = (sr_arena){ .base = (char *)mem + skew, .size = size - skew, .limit = size - skew };
}

void sr_arena_init_heap(sr_arena *a, size_t limit)
{
	*a = (sr_arena){ .limit = limit, .heap = 1 };
}

static int grow(sr_arena *a, size_t n)
{
	size_t want = n > BLOCK_MIN ? n : BLOCK_MIN;
	if (a->size > want && a->size <= SIZE_MAX / 2)
		want = a->size * 2; /* fewer, larger blocks for large inputs */
	if (want > a->limit - a->total)
		want = n;
	if (!a->heap || want > a->limit - a->total)
		return -1;
	sr_arena_block *b = malloc(sizeof *b + want);
	if (!b)
		return -1;
	b->next = a->blocks;
	b->size = want;
	a->blocks = b;
	a->total += want;
	a->base = (char *)b->data;
	a->size = want;
	a->used = 0;
	return 0;
}

static void *take(sr_arena *a, size_t n)
{
	if (n > SIZE_MAX - 15)
		return NULL;
	n = (n + 15) & ~(size_t)15;
	if ((!a->base || n > a->size - a->used) && grow(a, n) < 0)
		return NULL;
	void *p = a->base + a->used;
	a->used += n;
	return p;
}

void *sr_arena_alloc(sr_arena *a, size_t n)
{
	void *p = take(a, n);
	if (p)
		memset(p, 0, n);
	return p;
}

void *sr_arena_array(sr_arena *a, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	return sr_arena_alloc(a, n * size);
}

void *sr_arena_array_uninit(sr_arena *a, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	return take(a, n * size);
}

void sr_arena_free(sr_arena *a)
{
	while (a->blocks) {
		sr_arena_block *next = a->blocks->next;
		free(a->blocks);
		a->blocks = next;
	}
	a->base = NULL;
	a->size = a->used = a->total = 0;
}

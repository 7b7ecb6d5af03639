/* Which pages of this process's memory were never written, from
 * /proc/self/pagemap. A snapshot reads every chunk of a filter, and a
 * filter reserved for its full capacity is mostly never written yet (a
 * window's next slice, a day's filter at dawn); reading such memory makes
 * the kernel allocate and clear pages (2 MiB each under transparent huge
 * pages) just to hand back zeros. */
#ifndef BLOOMERYD_PAGE_MAP_H
#define BLOOMERYD_PAGE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct page_map {
    uintptr_t first; /* page number of the first entry */
    size_t n, cap;
    uint64_t *e;  /* pagemap entries */
    bool known;   /* false: the range could not be read; all counts as written */
    size_t shift; /* log2 of the page size */
} page_map;

/* Read the entries for [p, p + len); keeps m's memory for the next call. */
void page_map_load(page_map *m, const void *p, size_t len);
/* True when no page of [p, p + len) (inside the loaded range) is present,
 * swapped out, or a file or shared page: in a private anonymous mapping
 * such pages read as zeros. */
bool page_map_untouched(const page_map *m, const void *p, size_t len);
void page_map_free(page_map *m);

#endif

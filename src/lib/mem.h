/* Zeroed, 64-byte aligned allocation of large arrays. Arrays of 2 MiB and
 * more are mapped anonymously and marked for transparent huge pages: random
 * lookups across gigabytes miss the TLB, and huge pages halve batched lookup
 * time. Zero pages are not touched until written, so a large fresh filter
 * costs nothing until used. */
#ifndef BLOOMERY_MEM_H
#define BLOOMERY_MEM_H

#include <stddef.h>

void *bloomery_alloc_zeroed(size_t bytes);
void bloomery_free_zeroed(void *p, size_t bytes);

/* Always mapped anonymously, whatever the size (whole pages). Discarding
 * gives the pages back but keeps the range mapped: a thread still reading
 * it reads zeros rather than faulting, which lets a table that readers may
 * still be crossing be retired without knowing when they leave. */
void *bloomery_alloc_mapped(size_t bytes);
void bloomery_discard_mapped(void *p, size_t bytes);
void bloomery_free_mapped(void *p, size_t bytes);

#endif

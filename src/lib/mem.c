#include "mem.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_THRESHOLD ((size_t)2 << 20)

void *bloomery_alloc_mapped(size_t bytes)
{
    void *p =
        mmap(NULL, bytes ? bytes : 64, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (bytes >= HUGE_THRESHOLD)
        (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

void bloomery_discard_mapped(void *p, size_t bytes)
{
    if (p)
        (void)madvise(p, bytes ? bytes : 64, MADV_DONTNEED);
}

void bloomery_free_mapped(void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes ? bytes : 64);
}

void *bloomery_alloc_zeroed(size_t bytes)
{
    if (bytes == 0)
        bytes = 64;
    if (bytes >= HUGE_THRESHOLD)
        return bloomery_alloc_mapped(bytes);
    size_t rounded = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded);
    if (p)
        memset(p, 0, rounded);
    return p;
}

void bloomery_free_zeroed(void *p, size_t bytes)
{
    if (!p)
        return;
    if (bytes == 0)
        bytes = 64;
    if (bytes >= HUGE_THRESHOLD)
        bloomery_free_mapped(p, bytes);
    else
        free(p);
}

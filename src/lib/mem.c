#include "mem.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_THRESHOLD ((size_t)2 << 20)

void *bloomery_alloc_zeroed(size_t bytes)
{
    if (bytes == 0)
        bytes = 64;
    if (bytes >= HUGE_THRESHOLD) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
#ifdef MADV_HUGEPAGE
        (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
        return p;
    }
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
        munmap(p, bytes);
    else
        free(p);
}

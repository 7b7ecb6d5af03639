/* x mod d for 32-bit x and a divisor fixed when a structure is built, with
 * two multiplications instead of a division (Lemire, Kaser and Kurz,
 * "Faster remainder by direct computation", 2019): exact for every 32-bit x
 * and 1 <= d < 2^32. The count-min sketch and top-k place an item's
 * counters with one 32-bit hash modulo the width per row, and the division
 * was the largest single cost of an add. */
#ifndef BLOOMERY_FASTMOD_H
#define BLOOMERY_FASTMOD_H

#include <stdint.h>

typedef struct fastmod32 {
    uint64_t m; /* ceil(2^64 / d); 0 when d >= 2^32 (x mod d is x) */
    uint64_t d;
} fastmod32;

static inline fastmod32 fastmod32_of(uint64_t d)
{
    fastmod32 f = {0, d};
    if (d > 1 && d < (UINT64_C(1) << 32))
        f.m = UINT64_MAX / d + 1;
    return f;
}

static inline uint64_t fastmod32_mod(fastmod32 f, uint32_t x)
{
    if (f.d == 1)
        return 0;
    if (f.m == 0)
        return x;
    return (uint64_t)(((unsigned __int128)(f.m * x) * f.d) >> 64);
}

#endif

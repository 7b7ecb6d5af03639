/* MurmurHash2 (bloomery_murmur2) of one key under eight seeds at once.
 * Every row of a count-min sketch or top-k hashes the same item with the
 * row number as seed; the mixing of the key's blocks does not depend on the
 * seed, so it is done once, and the eight hash states advance side by side,
 * in vector registers where the compiler can. The results are
 * bloomery_murmur2(key, len, seeds[i]) bit for bit. */
#ifndef BLOOMERY_MURMUR2_X8_H
#define BLOOMERY_MURMUR2_X8_H

#include <stddef.h>
#include <stdint.h>

static inline void murmur2_x8(const void *key, size_t len, const uint32_t seeds[8], uint32_t out[8])
{
    const uint32_t m = 0x5bd1e995u;
    const unsigned char *p = key;
    uint32_t h[8];
    for (int s = 0; s < 8; s++)
        h[s] = seeds[s] ^ (uint32_t)len;
    size_t n = len;
    for (; n >= 4; n -= 4, p += 4) {
        uint32_t k =
            (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        for (int s = 0; s < 8; s++)
            h[s] = (h[s] * m) ^ k;
    }
    if (n) {
        uint32_t t = 0;
        switch (n) {
        case 3: t ^= (uint32_t)p[2] << 16; /* fall through */
        case 2: t ^= (uint32_t)p[1] << 8;  /* fall through */
        default: t ^= p[0];
        }
        for (int s = 0; s < 8; s++)
            h[s] = (h[s] ^ t) * m;
    }
    for (int s = 0; s < 8; s++) {
        uint32_t x = h[s];
        x ^= x >> 13;
        x *= m;
        x ^= x >> 15;
        out[s] = x;
    }
}

/* Seeds first, first + 1, ..., first + 7. */
static inline void murmur2_x8_from(const void *key, size_t len, uint32_t first, uint32_t out[8])
{
    uint32_t seeds[8];
    for (uint32_t s = 0; s < 8; s++)
        seeds[s] = first + s;
    murmur2_x8(key, len, seeds, out);
}

#endif

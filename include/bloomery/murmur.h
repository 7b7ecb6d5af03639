/* MurmurHash64A (MurmurHash2, 64-bit version for 64-bit platforms) and the
 * 32-bit MurmurHash2.
 *
 * Redis's HyperLogLog and RedisBloom both hash with MurmurHash64A, so
 * bit-exact compatibility with them depends on this exact function: 8-byte
 * blocks read little-endian, tail bytes XORed at shifts 0..48, r = 47.
 * RedisBloom's count-min sketch and top-k place items with the 32-bit
 * MurmurHash2 (one seed per row), so ours do too: the same items land in the
 * same counters.
 */
#ifndef BLOOMERY_MURMUR_H
#define BLOOMERY_MURMUR_H

#include <stddef.h>
#include <stdint.h>

#include "bloomery/export.h"

#ifdef __cplusplus
extern "C" {
#endif

BLOOMERY_API uint64_t bloomery_murmur64a(const void *key, size_t len, uint64_t seed);

/* MurmurHash2, 32 bits: 4-byte blocks read little-endian, m = 0x5bd1e995,
 * r = 24, h starts as seed ^ len (the length truncated to 32 bits). */
BLOOMERY_API uint32_t bloomery_murmur2(const void *key, size_t len, uint32_t seed);

#ifdef __cplusplus
}
#endif

#endif

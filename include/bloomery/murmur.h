/* MurmurHash64A (MurmurHash2, 64-bit version for 64-bit platforms).
 *
 * Redis's HyperLogLog and RedisBloom both hash with it, so bit-exact
 * compatibility with them depends on this exact function: 8-byte blocks read
 * little-endian, tail bytes XORed at shifts 0..48, r = 47.
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

#ifdef __cplusplus
}
#endif

#endif

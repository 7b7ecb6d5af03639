/* The blocked layout's bit derivation, shared by the Bloom and counting
 * filters so both place an item identically.
 *
 * Block j of an item: mulhi64(lo + j * (hi | 1), nblocks), a multiply-high
 * range reduction valid for any 64-bit block count. Lane seed of block j:
 * the low 32 bits of hi for j = 0, a 64-bit finaliser of hi + j * golden for
 * the others. Position in lane l: (seed * ODD[l] mod 2^32) >> (32 - log2 w),
 * the multiply-shift family; distinct odd multipliers per lane keep the
 * lanes independent (a cheaper xor-based derivation measured 6x the model's
 * FPR). */
#ifndef BLOOMERY_BLOCKED_KERNEL_H
#define BLOOMERY_BLOCKED_KERNEL_H

#include <stdint.h>

#include "bloomery/blocked.h"

static const uint32_t bk_odd[8] __attribute__((aligned(32))) = {
    0x8e3c1b95u, 0x6b4f2a37u, 0xd1a2b3c5u, 0x3f9e8d7bu,
    0xa5c3e1f9u, 0x5e7d9cb1u, 0xc4b2a09du, 0x27f1e3d5u,
};

static inline uint64_t bk_mulhi(uint64_t x, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)x * n) >> 64);
}

static inline uint64_t bk_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t bk_block(bloomery_hash h, unsigned j, uint64_t nblocks)
{
    return bk_mulhi(h.lo + (uint64_t)j * (h.hi | 1), nblocks);
}

static inline uint32_t bk_seed(bloomery_hash h, unsigned j)
{
    return j == 0 ? (uint32_t)h.hi : (uint32_t)bk_mix64(h.hi + (uint64_t)j * 0x9e3779b97f4a7c15ULL);
}

/* Position (0 .. 2^shift_bits - 1) in lane l for a block seed. */
static inline unsigned bk_pos(uint32_t seed, unsigned l, unsigned pos_bits)
{
    return (unsigned)((uint32_t)(seed * bk_odd[l]) >> (32 - pos_bits));
}

#endif

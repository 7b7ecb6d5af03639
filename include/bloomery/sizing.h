/* Sizing: how many bits a filter needs for a capacity and an error rate, and
 * the false-positive rate a given shape yields. Pure functions, no state.
 *
 * Blocked filters are sized with the exact Poisson-mixture model of a split
 * block (512-bit blocks of eight 64-bit lanes, one bit per lane), solved so the
 * model FPR at capacity is at most 0.95 p. Classic filters use RedisBloom's
 * formulas (bits per entry -ln p / ln^2 2, k = ceil(ln 2 * bpe)).
 */
#ifndef BLOOMERY_SIZING_H
#define BLOOMERY_SIZING_H

#include <stdint.h>

#include "bloomery/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BLOOMERY_BLOCK_BITS 512
#define BLOOMERY_BLOCK_BYTES 64
#define BLOOMERY_LANES 8
#define BLOOMERY_MAX_BLOCKS_PER_KEY 8

/* Fraction of p the model must reach, to absorb hashing and sampling noise. */
#define BLOOMERY_SIZING_MARGIN 0.95

typedef enum bloomery_policy {
    BLOOMERY_POLICY_LATENCY = 0, /* fewest cache lines: b = 1 down to p = 1e-4 */
    BLOOMERY_POLICY_MEMORY = 1,  /* fewest bits per key over b = 1..4 */
} bloomery_policy;

/* Blocks per key chosen from the error rate under a policy. */
BLOOMERY_API unsigned bloomery_blocks_per_key(double p, bloomery_policy policy);

/* Model FPR of a split-block filter with `bits_per_key` bits per key and b
 * blocks per key (lanes of `lane_bits` positions, 8 lanes per block); the
 * Bloom filter uses lane_bits = 64, the counting filter 16. */
BLOOMERY_API double bloomery_model_fpr_split(double bits_per_key, unsigned b, unsigned lane_bits);

/* Smallest bits per key whose model FPR is <= target (bisection). */
BLOOMERY_API double bloomery_bits_per_key_split(double target, unsigned b, unsigned lane_bits);

/* Blocks for n keys at error p and b blocks per key (never 0). Returns 0 when
 * the arguments are out of range (n == 0, p outside (0, 1), b outside
 * 1..BLOOMERY_MAX_BLOCKS_PER_KEY) or the result would not fit 64 bits. */
BLOOMERY_API uint64_t bloomery_blocked_nblocks(uint64_t n, double p, unsigned b);

/* RedisBloom classic sizing. bits is floor(n * bpe) rounded up to a multiple
 * of 64 (never below 64); hashes = ceil(ln 2 * bpe). */
BLOOMERY_API double bloomery_classic_bpe(double p);
BLOOMERY_API unsigned bloomery_classic_hashes(double p);
BLOOMERY_API uint64_t bloomery_classic_bits(uint64_t n, double p);

/* FPR of a classic filter with m/n bits per key and k hashes:
 * (1 - e^(-k n / m))^k. */
BLOOMERY_API double bloomery_classic_fpr(double bits_per_key, unsigned k);

#ifdef __cplusplus
}
#endif

#endif

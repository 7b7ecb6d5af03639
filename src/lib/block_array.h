/* The storage of the block-layout filters (Bloom and counting): a 64-byte
 * aligned array of 512-bit blocks plus the shape and counters both keep, and
 * the planning of that shape from a capacity and an error rate. The filters
 * differ only in what a lane holds: 64 one-bit positions for the Bloom
 * filter, 16 four-bit counters for the counting filter. */
#ifndef BLOOMERY_BLOCK_ARRAY_H
#define BLOOMERY_BLOCK_ARRAY_H

#include <stddef.h>
#include <stdint.h>

#include "bloomery/blocked.h"

typedef struct block_array {
    uint64_t *lanes; /* nblocks * 8 lanes */
    uint64_t nblocks;
    unsigned b; /* blocks per key */
    uint64_t seed;
    uint64_t capacity;
    double error_rate;
    uint64_t count; /* atomic */
    size_t bytes;
} block_array;

/* Blocks and blocks per key for capacity items at error p with lanes of
 * lane_bits positions; opts->blocks_per_key overrides the choice, otherwise
 * opts->policy (or `fallback` when opts is NULL) decides. 0 on success,
 * BLOOMERY_EINVAL or BLOOMERY_ETOOBIG. */
int block_array_plan(uint64_t capacity, double p, const bf_options *opts, unsigned lane_bits,
                     bloomery_policy fallback, uint64_t *nblocks, unsigned *b);

/* Allocates the zeroed array for an explicit shape. */
int block_array_init(block_array *a, uint64_t nblocks, unsigned b, uint64_t seed, uint64_t capacity,
                     double error_rate);
void block_array_release(block_array *a);

#endif

#include "block_array.h"

#include <math.h>

#include "bloomery/bloomery.h"
#include "mem.h"

static unsigned fewest_bits_b(double p, unsigned lane_bits)
{
    unsigned best = 1;
    double best_c = INFINITY;
    for (unsigned b = 1; b <= 4; b++) {
        double c = bloomery_bits_per_key_split(p * BLOOMERY_SIZING_MARGIN, b, lane_bits);
        if (c < best_c) {
            best_c = c;
            best = b;
        }
    }
    return best;
}

int block_array_plan(uint64_t capacity, double p, const bf_options *opts, unsigned lane_bits,
                     bloomery_policy fallback, uint64_t *nblocks, unsigned *b)
{
    if (capacity == 0 || !(p > 0 && p < 1))
        return BLOOMERY_EINVAL;
    bloomery_policy policy = opts ? opts->policy : fallback;
    if (opts && opts->blocks_per_key)
        *b = opts->blocks_per_key;
    else if (policy == BLOOMERY_POLICY_MEMORY)
        *b = fewest_bits_b(p, lane_bits);
    else
        *b = bloomery_blocks_per_key(p, policy);
    if (*b == 0 || *b > BLOOMERY_MAX_BLOCKS_PER_KEY)
        return BLOOMERY_EINVAL;
    double c = bloomery_bits_per_key_split(p * BLOOMERY_SIZING_MARGIN, *b, lane_bits);
    if (isnan(c))
        return BLOOMERY_ETOOBIG;
    double blocks = ceil((double)capacity * c / BLOOMERY_BLOCK_BITS);
    if (blocks >= 9.2e18)
        return BLOOMERY_ETOOBIG;
    *nblocks = blocks < 1 ? 1 : (uint64_t)blocks;
    return BLOOMERY_OK;
}

int block_array_init(block_array *a, uint64_t nblocks, unsigned b, uint64_t seed, uint64_t capacity,
                     double error_rate)
{
    *a = (block_array){0};
    if (nblocks == 0 || b == 0 || b > BLOOMERY_MAX_BLOCKS_PER_KEY)
        return BLOOMERY_EINVAL;
    /* Far beyond any memory, and keeps nblocks * 64 * 128 in range. */
    if (nblocks > (SIZE_MAX >> 7) / BLOOMERY_BLOCK_BYTES)
        return BLOOMERY_ETOOBIG;
    a->bytes = (size_t)nblocks * BLOOMERY_BLOCK_BYTES;
    a->lanes = bloomery_alloc_zeroed(a->bytes);
    if (!a->lanes)
        return BLOOMERY_ENOMEM;
    a->nblocks = nblocks;
    a->b = b;
    a->seed = seed;
    a->capacity = capacity;
    a->error_rate = error_rate;
    return BLOOMERY_OK;
}

void block_array_release(block_array *a)
{
    bloomery_free_zeroed(a->lanes, a->bytes);
    a->lanes = NULL;
}

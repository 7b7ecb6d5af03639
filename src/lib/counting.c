/* Counting Bloom filter on the blocked layout (contract in counting.h).
 *
 * A 512-bit block is eight 64-bit lanes of sixteen 4-bit counters; an item
 * owns one counter per lane of each of its blocks, placed by the same
 * derivation as the Bloom filter (blocked_kernel.h) with 4-bit positions.
 * Keeping one cache line per block keeps one memory access per block, at the
 * price of 16-position lanes, which need more bits per key than 64-position
 * ones: the sizing model is evaluated with w = 16 and b chosen for fewest
 * bits, since memory is this structure's weak side.
 *
 * Counters are changed by compare-and-swap on the whole lane, so concurrent
 * increments and decrements of neighbouring counters never lose one another.
 */
#include "bloomery/counting.h"
#include "bloomery/bloomery.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "block_array.h"
#include "blocked_kernel.h"
#include "estimate.h"
#include "stripe.h"

#define POS_BITS 4
#define SATURATED 15u

struct cntbf {
    block_array a;
    cntbf_write_hook write_hook;
    void *write_hook_ctx;
};

/* Memory is this structure's weak side, so without options it picks the
 * blocks per key that need the fewest bits. */
uint64_t cntbf_bytes_for(uint64_t capacity, double error_rate, const bf_options *opts)
{
    uint64_t nb;
    unsigned b;
    if (block_array_plan(capacity, error_rate, opts, 16, BLOOMERY_POLICY_MEMORY, &nb, &b) != 0 ||
        nb > SIZE_MAX / BLOOMERY_BLOCK_BYTES)
        return 0;
    return nb * BLOOMERY_BLOCK_BYTES;
}

int cntbf_create_shape(cntbf_t **out, uint64_t nblocks, unsigned b, uint64_t seed,
                       uint64_t capacity, double error_rate)
{
    *out = NULL;
    cntbf_t *c = calloc(1, sizeof *c);
    if (!c)
        return BLOOMERY_ENOMEM;
    int rc = block_array_init(&c->a, nblocks, b, seed, capacity, error_rate);
    if (rc != BLOOMERY_OK) {
        free(c);
        return rc;
    }
    *out = c;
    return BLOOMERY_OK;
}

int cntbf_create(cntbf_t **out, uint64_t capacity, double error_rate, const bf_options *opts)
{
    *out = NULL;
    uint64_t nb;
    unsigned b;
    int rc = block_array_plan(capacity, error_rate, opts, 16, BLOOMERY_POLICY_MEMORY, &nb, &b);
    if (rc != BLOOMERY_OK)
        return rc;
    return cntbf_create_shape(out, nb, b, opts ? opts->seed : 0, capacity, error_rate);
}

void cntbf_free(cntbf_t *c)
{
    if (!c)
        return;
    block_array_release(&c->a);
    free(c);
}

static inline uint64_t *block_ptr(const cntbf_t *c, bloomery_hash h, unsigned j)
{
    return c->a.lanes + bk_block(h, j, c->a.nblocks) * 8;
}

static inline unsigned counter(uint64_t lane, unsigned pos)
{
    return (unsigned)(lane >> (4 * pos)) & 0xf;
}

static bool present(const cntbf_t *c, bloomery_hash h)
{
    for (unsigned j = 0; j < c->a.b; j++) {
        const uint64_t *blk = block_ptr(c, h, j);
        uint32_t seed = bk_seed(h, j);
        for (unsigned l = 0; l < 8; l++)
            if (counter(__atomic_load_n(&blk[l], __ATOMIC_RELAXED), bk_pos(seed, l, POS_BITS)) == 0)
                return false;
    }
    return true;
}

/* Adds delta (+1 or -1) to the item's counters, leaving saturated ones. */
static void bump(cntbf_t *c, bloomery_hash h, int delta)
{
    for (unsigned j = 0; j < c->a.b; j++) {
        uint64_t *blk = block_ptr(c, h, j);
        uint32_t seed = bk_seed(h, j);
        for (unsigned l = 0; l < 8; l++) {
            unsigned pos = bk_pos(seed, l, POS_BITS);
            uint64_t one = 1ULL << (4 * pos);
            uint64_t old = __atomic_load_n(&blk[l], __ATOMIC_RELAXED), new;
            do {
                unsigned v = counter(old, pos);
                if (v == SATURATED || (delta < 0 && v == 0))
                    break;
                new = delta > 0 ? old + one : old - one;
            } while (!__atomic_compare_exchange_n(&blk[l], &old, new, true, __ATOMIC_RELAXED,
                                                  __ATOMIC_RELAXED));
        }
    }
}

/* The write barrier (cntbf_set_write_hook) for the item's blocks. */
static void before_write(const cntbf_t *c, bloomery_hash h)
{
    for (unsigned j = 0; j < c->a.b; j++)
        c->write_hook(c->write_hook_ctx, 0, bk_block(h, j, c->a.nblocks) * BLOOMERY_BLOCK_BYTES,
                      BLOOMERY_BLOCK_BYTES);
}

bool cntbf_check_hashed(const cntbf_t *c, bloomery_hash h) { return present(c, h); }

bool cntbf_add_hashed(cntbf_t *c, bloomery_hash h)
{
    if (c->write_hook)
        before_write(c, h);
    uint64_t key = (uint64_t)(uintptr_t)block_ptr(c, h, 0);
    bloomery_stripe_lock(key);
    bool fresh = !present(c, h);
    bump(c, h, +1);
    bloomery_stripe_unlock(key);
    __atomic_fetch_add(&c->a.count, 1, __ATOMIC_RELAXED);
    return fresh;
}

bool cntbf_delete_hashed(cntbf_t *c, bloomery_hash h)
{
    if (c->write_hook)
        before_write(c, h);
    uint64_t key = (uint64_t)(uintptr_t)block_ptr(c, h, 0);
    bloomery_stripe_lock(key);
    bool found = present(c, h);
    if (found)
        bump(c, h, -1);
    bloomery_stripe_unlock(key);
    if (found) {
        uint64_t n = __atomic_load_n(&c->a.count, __ATOMIC_RELAXED);
        while (n > 0 && !__atomic_compare_exchange_n(&c->a.count, &n, n - 1, true, __ATOMIC_RELAXED,
                                                     __ATOMIC_RELAXED))
            ;
    }
    return found;
}

bool cntbf_check(const cntbf_t *c, const void *item, size_t len)
{
    return present(c, bloomery_hash_item(item, len, c->a.seed));
}

bool cntbf_add(cntbf_t *c, const void *item, size_t len)
{
    return cntbf_add_hashed(c, bloomery_hash_item(item, len, c->a.seed));
}

bool cntbf_delete(cntbf_t *c, const void *item, size_t len)
{
    return cntbf_delete_hashed(c, bloomery_hash_item(item, len, c->a.seed));
}

uint64_t cntbf_nblocks(const cntbf_t *c) { return c->a.nblocks; }
uint64_t cntbf_bytes(const cntbf_t *c) { return c->a.bytes; }
unsigned cntbf_blocks_per_key(const cntbf_t *c) { return c->a.b; }
uint64_t cntbf_seed(const cntbf_t *c) { return c->a.seed; }
uint64_t cntbf_capacity(const cntbf_t *c) { return c->a.capacity; }
double cntbf_error_rate(const cntbf_t *c) { return c->a.error_rate; }
const uint8_t *cntbf_data(const cntbf_t *c) { return (const uint8_t *)c->a.lanes; }
uint8_t *cntbf_data_mut(cntbf_t *c) { return (uint8_t *)c->a.lanes; }

void cntbf_set_write_hook(cntbf_t *c, cntbf_write_hook hook, void *ctx)
{
    c->write_hook = hook;
    c->write_hook_ctx = ctx;
}

uint64_t cntbf_count(const cntbf_t *c) { return __atomic_load_n(&c->a.count, __ATOMIC_RELAXED); }

void cntbf_set_count(cntbf_t *c, uint64_t count)
{
    __atomic_store_n(&c->a.count, count, __ATOMIC_RELAXED);
}

/* Block i's share of the estimate: the product of its lanes' fractions
 * of nonzero counters. */
static double block_fill(const cntbf_t *c, uint64_t i)
{
    const uint64_t *blk = c->a.lanes + i * 8;
    double prod = 1.0;
    for (unsigned l = 0; l < 8 && prod > 0; l++) {
        uint64_t w = __atomic_load_n(&blk[l], __ATOMIC_RELAXED);
        unsigned nonzero = 0;
        for (unsigned p = 0; p < 16; p++)
            nonzero += counter(w, p) != 0;
        prod *= nonzero / 16.0;
    }
    return prod;
}

double cntbf_fpr_estimate(const cntbf_t *c)
{
    double sum = 0.0;
    uint64_t n = c->a.nblocks, step = estimate_step(n), read = 0;
    for (uint64_t run = 0; run < n; run += step)
        for (uint64_t i = run; i < run + ESTIMATE_RUN && i < n; i++, read++)
            sum += block_fill(c, i);
    return pow(sum / (double)read, (double)c->a.b);
}

/* Nibble-wise saturating add of two lanes. */
static uint64_t add_saturating(uint64_t a, uint64_t b)
{
    uint64_t r = 0;
    for (unsigned p = 0; p < 16; p++) {
        unsigned v = counter(a, p) + counter(b, p);
        r |= (uint64_t)(v > SATURATED ? SATURATED : v) << (4 * p);
    }
    return r;
}

int cntbf_merge(cntbf_t *dst, const cntbf_t *src)
{
    if (dst->a.nblocks != src->a.nblocks || dst->a.b != src->a.b || dst->a.seed != src->a.seed)
        return BLOOMERY_EINVAL;
    uint64_t words = dst->a.nblocks * 8, hooked = UINT64_MAX;
    for (uint64_t i = 0; i < words; i++) {
        uint64_t add = __atomic_load_n(&src->a.lanes[i], __ATOMIC_RELAXED);
        if (!add)
            continue;
        if (dst->write_hook && i / 8 != hooked) {
            hooked = i / 8;
            dst->write_hook(dst->write_hook_ctx, 0, hooked * BLOOMERY_BLOCK_BYTES,
                            BLOOMERY_BLOCK_BYTES);
        }
        uint64_t old = __atomic_load_n(&dst->a.lanes[i], __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&dst->a.lanes[i], &old, add_saturating(old, add), true,
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
    }
    __atomic_fetch_add(&dst->a.count, cntbf_count(src), __ATOMIC_RELAXED);
    return BLOOMERY_OK;
}

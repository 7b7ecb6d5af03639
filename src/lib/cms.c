/* Count-min sketch (contract in cms.h).
 *
 *   row 0   | c(0,0) | c(0,1) | ... | c(0,w-1) |   item x adds to
 *   row 1   | c(1,0) | c(1,1) | ... | c(1,w-1) |   c(i, MurmurHash2(x, i) % w)
 *   ...                                             in every row i
 *   row d-1 | ...                               |
 *
 * One array of width * depth u32 counters, row-major: exactly RedisBloom's
 * layout and placement, so a sketch fed the same increments holds the same
 * counters. An increment is checked against every counter it touches before
 * any is written, so a refused one leaves nothing to undo.
 */
#include "bloomery/cms.h"
#include "bloomery/bloomery.h"
#include "bloomery/murmur.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fastmod.h"
#include "mem.h"
#include "murmur2_x8.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "the counters are serialized as they lie in memory");

#define TOTAL_MAX ((uint64_t)INT64_MAX)
/* Items hashed ahead of their updates in a batch. */
#define GROUP 16
/* Rows whose columns a batch keeps per item; deeper sketches hash again. */
#define BATCH_ROWS 16

struct cms {
    uint64_t width, depth;
    fastmod32 by_width;
    uint64_t count;
    uint64_t bytes; /* of counters */
    uint32_t *cells;
    cms_write_hook hook;
    void *hook_ctx;
};

uint64_t cms_bytes_for(uint64_t width, uint64_t depth)
{
    if (width == 0 || depth == 0 || width > UINT64_MAX / depth)
        return 0;
    uint64_t cells = width * depth;
    if (cells > (UINT64_MAX - sizeof(struct cms)) / 4)
        return 0;
    return cells * 4 + sizeof(struct cms);
}

int cms_dims_for(double error, double prob, uint64_t *width, uint64_t *depth)
{
    if (!(error > 0 && error < 1) || !(prob > 0 && prob < 1))
        return BLOOMERY_EINVAL;
    /* RedisBloom takes the depth in single precision: a prob that rounds to
     * 1.0f gives depth 0, which it refuses. */
    double w = ceil(2 / error);
    double d = ceil(log10f((float)prob) / log10f(0.5f));
    if (!(w >= 1 && w < 0x1p63) || !(d >= 1 && d < 0x1p63))
        return BLOOMERY_EINVAL;
    *width = (uint64_t)w;
    *depth = (uint64_t)d;
    return BLOOMERY_OK;
}

int cms_create(cms_t **out, uint64_t width, uint64_t depth)
{
    *out = NULL;
    if (width == 0 || depth == 0)
        return BLOOMERY_EINVAL;
    uint64_t total = cms_bytes_for(width, depth);
    if (total == 0 || total > SIZE_MAX / 2)
        return BLOOMERY_ETOOBIG;
    cms_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return BLOOMERY_ENOMEM;
    c->width = width;
    c->by_width = fastmod32_of(width);
    c->depth = depth;
    c->bytes = width * depth * 4;
    c->cells = bloomery_alloc_zeroed((size_t)c->bytes);
    if (c->cells == NULL) {
        free(c);
        return BLOOMERY_ENOMEM;
    }
    *out = c;
    return BLOOMERY_OK;
}

void cms_free(cms_t *c)
{
    if (c == NULL)
        return;
    bloomery_free_zeroed(c->cells, (size_t)c->bytes);
    free(c);
}

uint64_t cms_width(const cms_t *c) { return c->width; }
uint64_t cms_depth(const cms_t *c) { return c->depth; }
uint64_t cms_count(const cms_t *c) { return c->count; }
uint64_t cms_bytes(const cms_t *c) { return c->bytes + sizeof(*c); }

const uint8_t *cms_data(const cms_t *c) { return (const uint8_t *)c->cells; }
uint8_t *cms_data_mut(cms_t *c) { return (uint8_t *)c->cells; }
void cms_set_count(cms_t *c, uint64_t count) { c->count = count; }

void cms_set_write_hook(cms_t *c, cms_write_hook hook, void *ctx)
{
    c->hook = hook;
    c->hook_ctx = ctx;
}

static inline uint64_t cell_of(const cms_t *c, const void *item, size_t len, uint64_t row)
{
    return row * c->width + fastmod32_mod(c->by_width, bloomery_murmur2(item, len, (uint32_t)row));
}

/* Updates the counters at loc[0..depth) (NULL: hash the item again) by
 * incr, or refuses when one of them or the total would overflow. */
static int apply(cms_t *c, const void *item, size_t len, const uint64_t *loc, uint64_t incr,
                 uint32_t *est)
{
    uint32_t min = UINT32_MAX;
    if (incr > TOTAL_MAX - c->count || incr > UINT32_MAX)
        return BLOOMERY_EFULL;
    for (uint64_t i = 0; i < c->depth; i++) {
        uint64_t at = loc && i < BATCH_ROWS ? loc[i] : cell_of(c, item, len, i);
        if (c->cells[at] > UINT32_MAX - incr)
            return BLOOMERY_EFULL;
    }
    for (uint64_t i = 0; i < c->depth; i++) {
        uint64_t at = loc && i < BATCH_ROWS ? loc[i] : cell_of(c, item, len, i);
        if (c->hook)
            c->hook(c->hook_ctx, 0, at * 4, 4);
        c->cells[at] += (uint32_t)incr;
        if (c->cells[at] < min)
            min = c->cells[at];
    }
    c->count += incr;
    if (est)
        *est = min;
    return BLOOMERY_OK;
}

/* apply() for a sketch of at most BATCH_ROWS rows without a write hook,
 * every counter located: one pass finds the largest counter (no branch per
 * row), one adds. */
static inline int apply_at(cms_t *c, const uint64_t *loc, uint64_t incr, uint32_t *est)
{
    if (incr > TOTAL_MAX - c->count || incr > UINT32_MAX)
        return BLOOMERY_EFULL;
    uint32_t *cells = c->cells, add = (uint32_t)incr, max = 0, min = UINT32_MAX;
    for (uint64_t i = 0; i < c->depth; i++) {
        uint32_t v = cells[loc[i]];
        max = v > max ? v : max;
    }
    if (max > UINT32_MAX - add)
        return BLOOMERY_EFULL;
    for (uint64_t i = 0; i < c->depth; i++) {
        uint32_t v = cells[loc[i]] + add;
        cells[loc[i]] = v;
        min = v < min ? v : min;
    }
    c->count += incr;
    *est = min;
    return BLOOMERY_OK;
}

int cms_incrby(cms_t *c, const void *item, size_t len, uint64_t incr, uint32_t *est)
{
    if (incr == 0) {
        if (est)
            *est = cms_query(c, item, len);
        return BLOOMERY_OK;
    }
    return apply(c, item, len, NULL, incr, est);
}

size_t cms_incrby_batch(cms_t *c, const void *const *items, const size_t *lens,
                        const uint64_t *incrs, size_t n, int64_t *res)
{
    uint64_t loc[GROUP][BATCH_ROWS];
    uint64_t rows = c->depth < BATCH_ROWS ? c->depth : BATCH_ROWS;
    bool located = c->depth <= BATCH_ROWS && c->hook == NULL;
    size_t refused = 0;
    for (size_t g = 0; g < n; g += GROUP) {
        size_t m = n - g < GROUP ? n - g : GROUP;
        /* Hash the group and start loading its counters, so their cache
         * misses overlap instead of following one another. */
        for (size_t j = 0; j < m; j++) {
            uint32_t h[8];
            for (uint64_t i = 0; i < rows; i++) {
                if (i % 8 == 0)
                    murmur2_x8_from(items[g + j], lens[g + j], (uint32_t)i, h);
                loc[j][i] = i * c->width + fastmod32_mod(c->by_width, h[i % 8]);
                __builtin_prefetch(&c->cells[loc[j][i]], 1);
            }
        }
        for (size_t j = 0; j < m; j++) {
            uint32_t est;
            int rc;
            if (incrs[g + j] == 0) {
                est = cms_query(c, items[g + j], lens[g + j]);
                rc = BLOOMERY_OK;
            } else if (located) {
                rc = apply_at(c, loc[j], incrs[g + j], &est);
            } else {
                rc = apply(c, items[g + j], lens[g + j], loc[j], incrs[g + j], &est);
            }
            res[g + j] = rc == BLOOMERY_OK ? (int64_t)est : rc;
            refused += rc != BLOOMERY_OK;
        }
    }
    return refused;
}

uint32_t cms_query(const cms_t *c, const void *item, size_t len)
{
    uint32_t min = UINT32_MAX, h[8];
    for (uint64_t i = 0; i < c->depth; i++) {
        if (i % 8 == 0)
            murmur2_x8_from(item, len, (uint32_t)i, h);
        uint32_t v = c->cells[i * c->width + fastmod32_mod(c->by_width, h[i % 8])];
        if (v < min)
            min = v;
    }
    return min;
}

void cms_query_batch(const cms_t *c, const void *const *items, const size_t *lens, size_t n,
                     uint32_t *est)
{
    for (size_t g = 0; g < n; g += GROUP) {
        size_t m = n - g < GROUP ? n - g : GROUP;
        for (size_t j = 0; j < m; j++)
            __builtin_prefetch(&c->cells[cell_of(c, items[g + j], lens[g + j], 0)]);
        for (size_t j = 0; j < m; j++)
            est[g + j] = cms_query(c, items[g + j], lens[g + j]);
    }
}

/* The weighted sum of counter `at` over the sources, or false when it
 * overflows or leaves [0, 2^32 - 1]. */
static bool weighted(const cms_t *const *srcs, const int64_t *weights, size_t n, uint64_t at,
                     int64_t *out)
{
    int64_t sum = 0, term;
    for (size_t k = 0; k < n; k++)
        if (__builtin_mul_overflow((int64_t)srcs[k]->cells[at], weights[k], &term) ||
            __builtin_add_overflow(sum, term, &sum))
            return false;
    *out = sum;
    return sum >= 0 && sum <= (int64_t)UINT32_MAX;
}

int cms_merge(cms_t *dst, const cms_t *const *srcs, const int64_t *weights, size_t n)
{
    if (n == 0)
        return BLOOMERY_EINVAL;
    for (size_t k = 0; k < n; k++)
        if (srcs[k]->width != dst->width || srcs[k]->depth != dst->depth)
            return BLOOMERY_EINVAL;
    int64_t total = 0, term, v;
    for (size_t k = 0; k < n; k++)
        if (__builtin_mul_overflow((int64_t)srcs[k]->count, weights[k], &term) ||
            __builtin_add_overflow(total, term, &total))
            return BLOOMERY_EFULL;
    if (total < 0)
        return BLOOMERY_EFULL;
    /* Check every counter before writing any: dst may be a source. */
    uint64_t cells = dst->width * dst->depth;
    for (uint64_t at = 0; at < cells; at++)
        if (!weighted(srcs, weights, n, at, &v))
            return BLOOMERY_EFULL;
    if (dst->hook)
        dst->hook(dst->hook_ctx, 0, 0, dst->bytes);
    for (uint64_t at = 0; at < cells; at++) {
        weighted(srcs, weights, n, at, &v);
        dst->cells[at] = (uint32_t)v;
    }
    dst->count = (uint64_t)total;
    return BLOOMERY_OK;
}

int cms_check(const cms_t *c)
{
    if (c->count > TOTAL_MAX)
        return BLOOMERY_ECORRUPT;
    for (uint64_t i = 0; i < c->depth; i++) {
        uint64_t sum = 0;
        const uint32_t *row = c->cells + i * c->width;
        /* Each term is below 2^32 and the total below 2^63: stopping once
         * past the total keeps the sum from wrapping. */
        for (uint64_t j = 0; j < c->width && sum <= c->count; j++)
            sum += row[j];
        if (sum != c->count)
            return BLOOMERY_ECORRUPT;
    }
    return BLOOMERY_OK;
}

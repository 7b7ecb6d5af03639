/* Count-min sketch with RedisBloom's dimensions, hashing and limits.
 *
 * depth rows of width 32-bit counters. An item adds to one counter per row,
 * row i's column being MurmurHash2(item, i) % width, and its estimate is the
 * smallest of those counters: never below the true count, and above it by
 * more than error * total with probability at most prob when the sketch was
 * sized by cms_dims_for(error, prob) (width = ceil(2 / error), depth =
 * ceil(log10(prob) / log10(0.5)), RedisBloom's formulas, computed in single
 * precision as it does). The same items land in the same counters as in
 * RedisBloom, so estimates agree with it call for call.
 *
 * Counters never wrap: an increment that would take one of its counters past
 * 2^32 - 1, or the total past 2^63 - 1, is refused and changes nothing.
 * Invariant: the counters of every row sum to the total (cms_check).
 *
 * Not thread-safe: callers serialize access to one cms_t.
 */
#ifndef BLOOMERY_CMS_H
#define BLOOMERY_CMS_H

#include <stddef.h>
#include <stdint.h>

#include "bloomery/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cms cms_t;

/* Bytes a width x depth sketch allocates (counters and header); 0 when the
 * product overflows or either is 0. */
BLOOMERY_API uint64_t cms_bytes_for(uint64_t width, uint64_t depth);

/* RedisBloom's CMS.INITBYPROB dimensions. BLOOMERY_EINVAL when error or
 * prob is not in (0, 1), or a dimension comes out 0 or at least 2^63 (prob
 * so close to 1 that single precision rounds it to 1; error below 2^-62). */
BLOOMERY_API int cms_dims_for(double error, double prob, uint64_t *width, uint64_t *depth);

/* An empty sketch. BLOOMERY_EINVAL for a zero dimension, BLOOMERY_ETOOBIG
 * when cms_bytes_for is 0 or beyond the address space, BLOOMERY_ENOMEM. */
BLOOMERY_API int cms_create(cms_t **out, uint64_t width, uint64_t depth);
BLOOMERY_API void cms_free(cms_t *c);

BLOOMERY_API uint64_t cms_width(const cms_t *c);
BLOOMERY_API uint64_t cms_depth(const cms_t *c);
/* The sum of every accepted increment (merges: the weighted sum). */
BLOOMERY_API uint64_t cms_count(const cms_t *c);
/* Bytes allocated: cms_bytes_for(width, depth). */
BLOOMERY_API uint64_t cms_bytes(const cms_t *c);

/* Add incr to item's counters. BLOOMERY_OK with the new estimate in *est
 * (may be NULL); BLOOMERY_EFULL when a counter or the total would overflow,
 * nothing changed. An increment of 0 changes nothing and answers the
 * estimate. */
BLOOMERY_API int cms_incrby(cms_t *c, const void *item, size_t len, uint64_t incr, uint32_t *est);

/* n increments at once, in order, as n cms_incrby calls: res[i] is the
 * estimate after item i (>= 0) or BLOOMERY_EFULL for a refused one, which
 * changed nothing. Returns how many were refused. Hashes a group of items
 * and prefetches their counters before updating any. */
BLOOMERY_API size_t cms_incrby_batch(cms_t *c, const void *const *items, const size_t *lens,
                                     const uint64_t *incrs, size_t n, int64_t *res);

/* The estimate of item: min over rows of its counter. */
BLOOMERY_API uint32_t cms_query(const cms_t *c, const void *item, size_t len);
BLOOMERY_API void cms_query_batch(const cms_t *c, const void *const *items, const size_t *lens,
                                  size_t n, uint32_t *est);

/* dst = sum of weights[i] * srcs[i], counter by counter and for the total;
 * srcs may include dst. BLOOMERY_EINVAL when a source's width or depth
 * differs from dst's (or n is 0); BLOOMERY_EFULL when a weighted counter
 * falls outside [0, 2^32 - 1], the weighted total below 0, or any product
 * or sum overflows 64 bits (RedisBloom's "MERGE overflow"). On error dst is
 * unchanged. */
BLOOMERY_API int cms_merge(cms_t *dst, const cms_t *const *srcs, const int64_t *weights, size_t n);

/* The counters: depth rows of width little-endian u32 (serial.h's region).
 * cms_data_mut and cms_set_count are for loaders, which then call
 * cms_check. */
BLOOMERY_API const uint8_t *cms_data(const cms_t *c);
BLOOMERY_API uint8_t *cms_data_mut(cms_t *c);
BLOOMERY_API void cms_set_count(cms_t *c, uint64_t count);
/* A write barrier: hook(ctx, 0, offset, len) is called before any of bytes
 * [offset, offset + len) of the counters (serial.h region 0) changes, so a
 * snapshot can keep their old contents (copy-on-write). NULL removes it. */
typedef void (*cms_write_hook)(void *ctx, uint32_t region, uint64_t offset, uint64_t len);
BLOOMERY_API void cms_set_write_hook(cms_t *c, cms_write_hook hook, void *ctx);

/* BLOOMERY_OK when the total is at most 2^63 - 1 and every row sums to it;
 * BLOOMERY_ECORRUPT otherwise. */
BLOOMERY_API int cms_check(const cms_t *c);

#ifdef __cplusplus
}
#endif

#endif

/* Counting Bloom filter on the blocked layout.
 *
 * Each 512-bit block holds 128 four-bit counters as eight 64-bit lanes of 16
 * counters; an item increments one counter per lane of each of its b blocks.
 * A counter saturates at 15 and a saturated counter is never decremented:
 * that cell loses deletability but the filter never gives a false negative.
 * Deleting an item that was never added may remove another item's counts and
 * cause false negatives; delete only what was added.
 *
 * Concurrency: counters are updated with compare-and-swap on their lane, so
 * any mix of calls from any threads is safe; cntbf_add reports "new"
 * linearizably (striped lock on the item's first block).
 */
#ifndef BLOOMERY_COUNTING_H
#define BLOOMERY_COUNTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomery/blocked.h"
#include "bloomery/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cntbf cntbf_t;

BLOOMERY_API int cntbf_create(cntbf_t **out, uint64_t capacity, double error_rate,
                              const bf_options *opts);
BLOOMERY_API int cntbf_create_shape(cntbf_t **out, uint64_t nblocks, unsigned b, uint64_t seed,
                                    uint64_t capacity, double error_rate);
BLOOMERY_API void cntbf_free(cntbf_t *c);
BLOOMERY_API uint64_t cntbf_bytes_for(uint64_t capacity, double error_rate, const bf_options *opts);

/* Returns true if the item was absent before this add (it is added either way). */
BLOOMERY_API bool cntbf_add(cntbf_t *c, const void *item, size_t len);
BLOOMERY_API bool cntbf_check(const cntbf_t *c, const void *item, size_t len);
/* Returns true if the item was present and its counters were decremented;
 * false (nothing changed) if it was absent. */
BLOOMERY_API bool cntbf_delete(cntbf_t *c, const void *item, size_t len);

/* The same for an item hashed with bloomery_hash_item(.., cntbf_seed(c)). */
BLOOMERY_API bool cntbf_add_hashed(cntbf_t *c, bloomery_hash h);
BLOOMERY_API bool cntbf_check_hashed(const cntbf_t *c, bloomery_hash h);
BLOOMERY_API bool cntbf_delete_hashed(cntbf_t *c, bloomery_hash h);

BLOOMERY_API uint64_t cntbf_nblocks(const cntbf_t *c);
BLOOMERY_API uint64_t cntbf_bytes(const cntbf_t *c);
BLOOMERY_API unsigned cntbf_blocks_per_key(const cntbf_t *c);
BLOOMERY_API uint64_t cntbf_seed(const cntbf_t *c);
BLOOMERY_API uint64_t cntbf_capacity(const cntbf_t *c);
BLOOMERY_API double cntbf_error_rate(const cntbf_t *c);
BLOOMERY_API uint64_t cntbf_count(const cntbf_t *c); /* adds minus deletes */
BLOOMERY_API void cntbf_set_count(cntbf_t *c, uint64_t count);
/* As bf_fpr_estimate, with nonzero counters for set bits (a sample of
 * 65536 blocks of a bigger filter). */
BLOOMERY_API double cntbf_fpr_estimate(const cntbf_t *c);
/* Add src's counters into dst's, saturating at 15 (a multiset union). Shapes
 * (nblocks, b, seed) must match, else BLOOMERY_EINVAL. */
BLOOMERY_API int cntbf_merge(cntbf_t *dst, const cntbf_t *src);
BLOOMERY_API const uint8_t *cntbf_data(const cntbf_t *c);
BLOOMERY_API uint8_t *cntbf_data_mut(cntbf_t *c);

#ifdef __cplusplus
}
#endif

/* Write barrier, for copy-on-write snapshots: once set, hook(ctx, 0, offset,
 * len) runs before an add, a delete or a merge may change bytes [offset,
 * offset + len) of the counter array (as cntbf_data shows it: serial.h
 * region 0), one 64-byte block at a time, on the calling thread and before
 * the call takes any lock of its own. A range may cover bytes that end up
 * unchanged (a delete of an absent item, a saturated counter). Set or remove
 * (NULL) it only while no other call on the filter runs. */
typedef void (*cntbf_write_hook)(void *ctx, uint32_t region, uint64_t offset, uint64_t len);
BLOOMERY_API void cntbf_set_write_hook(cntbf_t *c, cntbf_write_hook hook, void *ctx);

#endif

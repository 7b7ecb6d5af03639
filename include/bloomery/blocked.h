/* Blocked Bloom filter: the default layout.
 *
 * The filter is an array of 512-bit blocks, each eight 64-bit lanes. An item
 * is hashed once with XXH3-128 (seeded per filter); the low half picks b
 * blocks by multiply-high range reduction (any 64-bit block count works), the
 * high half gives each block a 32-bit seed from which one bit per lane is
 * derived by multiply-shift with eight fixed odd constants. A lookup reads b
 * cache lines, an insert ORs b lines.
 *
 * Concurrency: every function may be called from any number of threads on the
 * same filter at once. An insert changes a block only under that block's
 * stripe lock (one of a small shared table; the batch calls take a group's
 * stripes once for the group), lookups take no lock and use relaxed atomic
 * loads, so a completed insert is never missed by a later lookup.
 * bf_check_and_add() is linearizable per item: of several threads adding the
 * same new item at once, exactly one is told it was new.
 *
 * The AVX2 kernel is chosen at run time when the CPU has it; the portable
 * kernel sets and tests identical bits, so a filter's bytes do not depend on
 * the machine that built it.
 */
#ifndef BLOOMERY_BLOCKED_H
#define BLOOMERY_BLOCKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomery/sizing.h"
#include "bloomery/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The 128-bit item hash: lo selects blocks, hi derives lane bits. */
typedef struct bloomery_hash {
    uint64_t lo, hi;
} bloomery_hash;

/* XXH3-128 of the item with the filter's seed. */
BLOOMERY_API bloomery_hash bloomery_hash_item(const void *item, size_t len, uint64_t seed);

typedef struct bf bf_t;

typedef struct bf_options {
    uint64_t seed;           /* hash seed, stored with the filter; default 0 */
    unsigned blocks_per_key; /* 0: chosen from p under `policy` */
    bloomery_policy policy;
} bf_options;

/* Sized for `capacity` items at false-positive rate `error_rate` in (0, 1).
 * opts may be NULL. Errors: BLOOMERY_EINVAL, BLOOMERY_ETOOBIG, BLOOMERY_ENOMEM. */
BLOOMERY_API int bf_create(bf_t **out, uint64_t capacity, double error_rate,
                           const bf_options *opts);

/* An explicit shape: nblocks blocks, b blocks per key. capacity and
 * error_rate are recorded for reporting only. */
BLOOMERY_API int bf_create_shape(bf_t **out, uint64_t nblocks, unsigned b, uint64_t seed,
                                 uint64_t capacity, double error_rate);

BLOOMERY_API void bf_free(bf_t *bf);

/* Bytes bf_create would allocate for these parameters (0 if invalid), so a
 * caller can enforce a memory limit before allocating. */
BLOOMERY_API uint64_t bf_bytes_for(uint64_t capacity, double error_rate, const bf_options *opts);

/* Membership. bf_add returns true when any bit went from 0 to 1 (RedisBloom's
 * "newly added"); it is not linearizable under concurrent adds of one item.
 * bf_check_and_add returns true iff the item was absent and this call added
 * it, atomically with respect to other bf_check_and_add calls. Both count the
 * item in bf_count() when they report it new. */
BLOOMERY_API bool bf_check(const bf_t *bf, const void *item, size_t len);
BLOOMERY_API bool bf_add(bf_t *bf, const void *item, size_t len);
BLOOMERY_API bool bf_check_and_add(bf_t *bf, const void *item, size_t len);

/* The same for an item already hashed with bloomery_hash_item(.., bf_seed(bf)). */
BLOOMERY_API bool bf_check_hashed(const bf_t *bf, bloomery_hash h);
BLOOMERY_API bool bf_add_hashed(bf_t *bf, bloomery_hash h);
BLOOMERY_API bool bf_check_and_add_hashed(bf_t *bf, bloomery_hash h);

/* Batches: hash and prefetch a group of items, then probe. out[i] is 1/0 as
 * the single-item call would return; out may be NULL for the add forms. */
BLOOMERY_API void bf_check_many(const bf_t *bf, const void *const *items, const size_t *lens,
                                size_t n, uint8_t *out);
BLOOMERY_API void bf_add_many(bf_t *bf, const void *const *items, const size_t *lens, size_t n,
                              uint8_t *out);
BLOOMERY_API void bf_check_and_add_many(bf_t *bf, const void *const *items, const size_t *lens,
                                        size_t n, uint8_t *out);
BLOOMERY_API void bf_check_many_hashed(const bf_t *bf, const bloomery_hash *h, size_t n,
                                       uint8_t *out);
BLOOMERY_API void bf_add_many_hashed(bf_t *bf, const bloomery_hash *h, size_t n, uint8_t *out);
BLOOMERY_API void bf_check_and_add_many_hashed(bf_t *bf, const bloomery_hash *h, size_t n,
                                               uint8_t *out);

/* Start fetching the blocks of h so a later probe finds them in cache. */
BLOOMERY_API void bf_prefetch(const bf_t *bf, bloomery_hash h, bool for_write);

/* Shape and state. */
BLOOMERY_API uint64_t bf_nblocks(const bf_t *bf);
BLOOMERY_API uint64_t bf_bytes(const bf_t *bf); /* bytes of the bit array */
BLOOMERY_API unsigned bf_blocks_per_key(const bf_t *bf);
BLOOMERY_API uint64_t bf_seed(const bf_t *bf);
BLOOMERY_API uint64_t bf_capacity(const bf_t *bf);
BLOOMERY_API double bf_error_rate(const bf_t *bf);
BLOOMERY_API uint64_t bf_count(const bf_t *bf); /* items reported new */
BLOOMERY_API void bf_set_count(bf_t *bf, uint64_t count);

/* FPR of a random non-member against the bits as they are now: mean over
 * blocks of the product of lane fill ratios, to the power b. Exact for a
 * filter up to 65536 blocks (4 MiB); a bigger one's mean is over an even
 * sample of 65536 blocks, so the estimate costs no more. */
BLOOMERY_API double bf_fpr_estimate(const bf_t *bf);

/* OR src into dst. Shapes (nblocks, b, seed) must match, else BLOOMERY_EINVAL.
 * dst's count becomes the sum (an upper bound of distinct items). */
BLOOMERY_API int bf_merge(bf_t *dst, const bf_t *src);

/* Zero every bit and the count. Not atomic with respect to concurrent adds. */
BLOOMERY_API void bf_clear(bf_t *bf);

/* The raw bit array (nblocks * 64 bytes, little-endian lanes), for
 * serialization. Writable access is for loading only. */
BLOOMERY_API const uint8_t *bf_data(const bf_t *bf);
BLOOMERY_API uint8_t *bf_data_mut(bf_t *bf);

/* Which kernel runs: "avx2" or "portable". bf_force_portable(true) selects the
 * portable kernel for all filters (tests compare both). */
BLOOMERY_API const char *bf_kernel_name(void);
BLOOMERY_API void bf_force_portable(bool on);

#ifdef __cplusplus
}
#endif

#endif

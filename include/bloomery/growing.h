/* Growing filter: a table of fingerprints that doubles instead of adding
 * links, so a lookup reads one cache line however far the filter grows.
 *
 * A scaling chain (scalable.h) answers "absent" only after probing every
 * link, and one grown from RedisBloom's defaults (capacity 100, expansion 2)
 * holds 14 links after 10^6 adds. Here an item's hash, times the bucket
 * count, gives its bucket (the product's high word: a 64-byte line of
 * W-bit fingerprints) and its fingerprint (the next bits of the product).
 * Doubling the buckets splits bucket j into 2j and 2j + 1 by the
 * fingerprint's first bit, which the item then no longer needs: a stored
 * fingerprint loses a bit per doubling (a marker bit records its length)
 * while new ones start whole. W is chosen per error rate so that a filter
 * grown 2^20 times over answers at most p/4 wrongly by the model, and the
 * table grows when its buckets average a load the model picks for W.
 *
 * A full bucket sends items to the table's pool, shared by all buckets
 * (sized for twice what full buckets send at the grow load, a count that
 * hardly varies across a whole table); a lookup reads the pool only when
 * its bucket overflowed. With no room left for an item, a scaling filter
 * grows, unless a bucket fills far below the grow load in a table big
 * enough that one bucket is under p/64 of the lookups: items piled on one
 * spot (hashes crafted to collide), which growth would not split. That
 * bucket, like a full one of a non-scaling filter, saturates: it answers
 * "may exist" for every item from then on, so no item is lost.
 *
 * Growth allocates the table twice the size (2^k times for EXPANSION 2^k)
 * and moves buckets into it a few per add, while lookups and adds go on:
 * a moved bucket is marked, and both follow it into the new table. Once
 * all have moved the old table's pages are given back; tables under a page
 * are kept until the filter is freed.
 *
 * Concurrency: any mix of calls from any threads. A bucket changes only
 * under its sequence lock (seqlock.h); overflow lines take a lock bit and
 * only ever append. Adds are linearizable per item.
 */
#ifndef BLOOMERY_GROWING_H
#define BLOOMERY_GROWING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomery/blocked.h"
#include "bloomery/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf gf_t;

/* Sized for `capacity` items at `error_rate`; expansion is 0 (non-scaling:
 * adds of new items past capacity fail with BLOOMERY_EFULL) or a power of
 * two up to 2^15, the factor each growth multiplies the buckets by.
 * Errors: BLOOMERY_EINVAL, BLOOMERY_ETOOBIG (p below what 27-bit
 * fingerprints give), BLOOMERY_ENOMEM. */
BLOOMERY_API int gf_create(gf_t **out, uint64_t capacity, double error_rate, uint32_t expansion,
                           uint64_t seed);
BLOOMERY_API void gf_free(gf_t *gf);
/* The expansion a growing filter takes for one asked for: buckets split by
 * powers of two, so it rounds up (0 stays 0: non-scaling). */
BLOOMERY_API uint32_t gf_round_expansion(uint32_t expansion);

/* Bytes gf_create would allocate, 0 if invalid. */
BLOOMERY_API uint64_t gf_bytes_for(uint64_t capacity, double error_rate);

/* 1: added (new), 0: may already exist, < 0: BLOOMERY_EFULL,
 * BLOOMERY_ENOMEM, BLOOMERY_ETOOBIG (past 2^37 buckets) or BLOOMERY_EREFUSED
 * (the growth was refused); nothing changed on an error. */
BLOOMERY_API int gf_add(gf_t *gf, const void *item, size_t len);
/* 1: may exist, 0: certainly absent. */
BLOOMERY_API bool gf_check(const gf_t *gf, const void *item, size_t len);
/* The same for an item hashed with bloomery_hash_item(.., gf_seed(gf)). */
BLOOMERY_API int gf_add_hashed(gf_t *gf, bloomery_hash h);
BLOOMERY_API bool gf_check_hashed(const gf_t *gf, bloomery_hash h);
/* res[i] = gf_add_hashed(gf, h[i]), with the lines fetched together; stops
 * at the first error and returns the results written (i + 1), else n. */
BLOOMERY_API size_t gf_add_many_hashed(gf_t *gf, const bloomery_hash *h, size_t n, int *res);
/* out[i] = gf_check_hashed(gf, h[i]), with the lines fetched together. */
BLOOMERY_API void gf_check_many_hashed(const gf_t *gf, const bloomery_hash *h, size_t n,
                                       uint8_t *out);

/* Called before a growth allocates, with the bytes; false refuses it (the
 * add fails with BLOOMERY_EREFUSED). Set before the filter is shared. */
BLOOMERY_API void gf_set_may_allocate(gf_t *gf, bool (*may_allocate)(void *ctx, uint64_t bytes),
                                      void *ctx);

/* Called with a table's bytes when a growth gives them back (tables under
 * a page are kept until the filter is freed). Set before the filter is
 * shared. */
BLOOMERY_API void gf_set_released(gf_t *gf, void (*released)(void *ctx, uint64_t bytes), void *ctx);

/* Moves every bucket still waiting to move, so that one table holds all. */
BLOOMERY_API void gf_settle(gf_t *gf);

BLOOMERY_API uint64_t gf_count(const gf_t *gf);
/* Replaces the count (a log's replay corrects it); not with adds running. */
BLOOMERY_API void gf_set_count(gf_t *gf, uint64_t count);
/* The capacity asked for times the table's growth so far (the table being
 * moved into included), as a chain's sum of links: the newest table takes
 * at least that many items before it grows. Non-scaling: the capacity. */
BLOOMERY_API uint64_t gf_capacity(const gf_t *gf);
/* The count at which the next growth starts (UINT64_MAX: non-scaling). */
BLOOMERY_API uint64_t gf_grows_at(const gf_t *gf);
/* Bytes of the tables in use (both while buckets move). */
BLOOMERY_API uint64_t gf_bytes(const gf_t *gf);
BLOOMERY_API double gf_error_rate(const gf_t *gf);
BLOOMERY_API uint32_t gf_expansion(const gf_t *gf);
BLOOMERY_API uint64_t gf_seed(const gf_t *gf);
/* The rate at which absent items answer "may exist", estimated from the
 * stored fingerprints (a sample of a big table). */
BLOOMERY_API double gf_fpr_estimate(const gf_t *gf);
/* W: the bits a fingerprint starts with, its marker included. */
BLOOMERY_API unsigned gf_fingerprint_bits(const gf_t *gf);

/* Serialization (serial.h): a filter is its state and one table, or two
 * while buckets move (the first the filter's, the second the one they
 * move into), each one region of buckets then pool. Read the state and
 * the tables while no add runs for a consistent image; gf_get_state alone
 * is safe at any time (a glimpse, as BF.DEBUG shows it). */
typedef struct gf_state {
    uint64_t capacity;
    double error_rate;
    uint32_t expansion;
    uint64_t seed, salt, count;
    unsigned ntables;
    uint64_t buckets[2];
    uint64_t cursor; /* with two tables: the first table's buckets moved in order */
} gf_state;
BLOOMERY_API void gf_get_state(const gf_t *gf, gf_state *st);
/* Table i's bytes (NULL past the last table). */
BLOOMERY_API const uint8_t *gf_table_data(const gf_t *gf, unsigned i, uint64_t *bytes);
/* Bytes table i of a filter in state st has, 0 if the state is invalid. */
BLOOMERY_API uint64_t gf_table_bytes_for(const gf_state *st, unsigned i);
/* A filter in state st with zeroed tables, for a loader to fill through
 * gf_table_data_mut; gf_validate before any other call. BLOOMERY_EINVAL
 * for a state no filter has. */
BLOOMERY_API int gf_create_state(gf_t **out, const gf_state *st);
BLOOMERY_API uint8_t *gf_table_data_mut(gf_t *gf, unsigned i, uint64_t *bytes);
/* BLOOMERY_ECORRUPT when the tables hold what no filter writes (a moved
 * bucket where none may be, a pool entry of no bucket). */
BLOOMERY_API int gf_validate(gf_t *gf);

/* A write barrier for copy-on-write snapshots: called before bytes
 * [offset, offset + len) of a table change, region being `region` for the
 * filter's table when set and region + 1 for the one its buckets move into
 * (gf_table_data's 0 and 1). Tables made after it was set report nothing;
 * a table retired while it is set is given back only when it is removed.
 * Set or remove (NULL) it only while no other call on the filter runs. */
typedef void (*gf_write_hook)(void *ctx, uint32_t region, uint64_t offset, uint64_t len);
BLOOMERY_API void gf_set_write_hook(gf_t *gf, gf_write_hook hook, void *ctx, uint32_t region);

#ifdef __cplusplus
}
#endif

#endif

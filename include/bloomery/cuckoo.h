/* Cuckoo filter with RedisBloom's semantics (CF.*), plus tunable fingerprints.
 *
 * A filter is a list of sub-filters, each a table of buckets of b slots
 * (1 <= b <= 255). Sub-filter 0 has nbuckets = next power of two of
 * capacity / b buckets; sub-filter i has nbuckets * expansion^i. An item is
 * hashed once, h = MurmurHash64A(item, seed 0); its fingerprint is
 *
 *     fp = h mod (2^f - 1) + 1            (f = 8: RedisBloom's h mod 255 + 1)
 *
 * a nonzero f-bit value (0 marks an empty slot), and its two buckets in a
 * sub-filter of n buckets are
 *
 *     i1 = h mod n,   i2 = (i1 XOR fp * 0x5bd1e995) mod n.
 *
 * n is a power of two, so the alternate of either bucket is the other one
 * for every f (the map is an XOR with a value that depends on fp only), and
 * a fingerprint can move between its buckets without the item. With f = 8 the
 * slots, their order and every kick are RedisBloom's, so the same commands
 * leave the same bytes as RedisBloom's filter.
 *
 * Memory: slots are packed, f bits each, so a sub-filter takes
 * ceil(nbuckets * b * f / 8) bytes and an item costs f / load bits (load =
 * items / slots). f = 8 is byte-for-byte RedisBloom's layout; f = 12 costs
 * 1.5x its memory, f = 16 2x. Packing instead of rounding to 16 or 32-bit
 * slots keeps every extra bit worth its halving of the false-positive rate.
 * RedisBloom's kick walk fills less than a random walk would: measured load
 * at the first failed add (hence growth), 20 kicks, capacity 1024 / 65536 /
 * 2^20: b = 2, f = 8: 0.72 / 0.60 / 0.45 (f >= 12: 0.58 at 2^20, as 8-bit
 * fingerprints give only 255 alternate offsets); b = 4: 0.88 / 0.83 / 0.78;
 * b = 4 with 500 kicks reaches 0.95. So RedisBloom's defaults cost about
 * 8 / 0.45 = 18 bits per item in a large first sub-filter.
 *
 * False positives: a lookup compares fp with the 2b slots of its two buckets
 * in every sub-filter, so for one sub-filter at load a
 *
 *     eps = 1 - (1 - 1/(2^f - 1))^(2 b a)  ~  2 b a / (2^f - 1),
 *
 * and the rates of the sub-filters add up (measured within 3 sigma for
 * f = 8, 12, 16 at b = 4, load 0.95). RedisBloom's defaults (f = 8, b = 2)
 * give 2 * 2 * a / 255, about 1.1% at a = 0.72; each extra bit halves it.
 *
 * Operations (RedisBloom's order, so counts and replies match):
 * - insert: the first free slot of either bucket in the sub-filters from the
 *   newest to the oldest; otherwise up to max_iterations kicks in the newest
 *   (evict slot 0, 1, ... of successive buckets into their alternates),
 *   undone in reverse if they fail, so a failed insert changes nothing; then
 *   a new sub-filter (or BLOOMERY_EFULL when expansion is 0). Duplicates are
 *   stored again: one item fits at most 2b times in a sub-filter (both of its
 *   buckets full of its fingerprint) before the filter has to grow.
 * - delete: one matching fingerprint, newest sub-filter first. When there is
 *   more than one sub-filter and deletes exceed 10% of the items, the filter
 *   compacts: fingerprints of newer sub-filters move into free slots of older
 *   ones, an emptied newest sub-filter is freed and the delete count resets
 *   (RedisBloom does the same; CF.INFO shows it).
 *
 * False deletion: deleting an item that was never added can remove another
 * item's identical fingerprint and cause a false negative. Delete only items
 * known to be present. Deleting a present item never does: a copy it removes
 * in place of its own belongs to an item with the same fingerprint and the
 * same buckets in that sub-filter, hence in every older (smaller, nested)
 * one, and the deleted item's own copy, in that sub-filter or an older one
 * (deletes search newest first), then serves the other item.
 *
 * Concurrency: none. Inserts kick fingerprints around and deletes compact, so
 * every call, lookups included, needs the caller's exclusive lock (a per-key
 * lock in the server) whenever a writer may run.
 */
#ifndef BLOOMERY_CUCKOO_H
#define BLOOMERY_CUCKOO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomery/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* RedisBloom's defaults and ranges (from its config.c), and our fingerprint range. */
#define CF_DEFAULT_CAPACITY 1024
#define CF_DEFAULT_BUCKET_SIZE 2
#define CF_MAX_BUCKET_SIZE 255
#define CF_DEFAULT_MAX_ITERATIONS 20
#define CF_MAX_MAX_ITERATIONS 65535
#define CF_DEFAULT_EXPANSION 1
#define CF_MAX_EXPANSION 32768
#define CF_DEFAULT_MAX_FILTERS 32
#define CF_MAX_MAX_FILTERS 65536
#define CF_DEFAULT_FINGERPRINT_BITS 8
#define CF_MIN_FINGERPRINT_BITS 8
#define CF_MAX_FINGERPRINT_BITS 32
/* The library's capacity limit (a table far beyond any machine's memory);
 * RedisBloom's commands stop at 2^30, bloomeryd's only at memory. */
#define CF_MAX_CAPACITY (1ULL << 40)
/* Largest sub-filter the library allocates; a growth beyond it fails with
 * BLOOMERY_ETOOBIG. */
#define CF_MAX_FILTER_BYTES (1ULL << 40)

typedef struct cf cf_t;

typedef struct cf_options {
    unsigned bucket_size;      /* slots per bucket, 1..255 */
    unsigned max_iterations;   /* kicks per insert, 1..65535 */
    unsigned expansion;        /* 0..32768, rounded up to a power of two; 0: no growth */
    unsigned max_filters;      /* sub-filters an add may start from, 1..65536 */
    unsigned fingerprint_bits; /* f, 8..32 */
    /* Called with a new sub-filter's size in bytes before it is allocated;
     * returning false refuses the growth (the add fails with BLOOMERY_EREFUSED
     * and nothing changes). May be NULL. */
    bool (*may_allocate)(void *ctx, uint64_t bytes);
    void *may_allocate_ctx;
} cf_options;

/* Fills o with RedisBloom's defaults: b 2, 20 iterations, expansion 1,
 * 32 sub-filters, f 8, no allocation veto. */
BLOOMERY_API void cf_options_init(cf_options *o);

/* A filter for `capacity` items, 2b <= capacity <= CF_MAX_CAPACITY. opts may
 * be NULL for the defaults; otherwise every field is taken as given.
 * Errors: BLOOMERY_EINVAL (a parameter out of range), BLOOMERY_ETOOBIG,
 * BLOOMERY_ENOMEM, BLOOMERY_EREFUSED (a veto from may_allocate). */
BLOOMERY_API int cf_create(cf_t **out, uint64_t capacity, const cf_options *opts);
BLOOMERY_API void cf_free(cf_t *c);

/* Bytes of the first sub-filter's table for these parameters (0 if invalid),
 * so a caller can enforce a memory limit before creating. */
BLOOMERY_API uint64_t cf_bytes_for(uint64_t capacity, const cf_options *opts);

/* The item hash every operation starts from: MurmurHash64A, seed 0. A
 * write-ahead log can record it and replay with the _hashed calls. */
BLOOMERY_API uint64_t cf_hash(const void *item, size_t len);

/* Add (CF.ADD): 1 when stored; duplicates are stored again. Errors, with
 * nothing changed:
 *   BLOOMERY_ETOOBIG  the filter already has max_filters sub-filters
 *                     (RedisBloom's "Maximum expansions reached"); checked
 *                     before anything else, so even an item that would fit
 *                     is refused;
 *   BLOOMERY_EFULL    no room and expansion 0 ("Filter is full");
 *   BLOOMERY_ENOMEM   the new sub-filter could not be allocated (BLOOMERY_EREFUSED: vetoed);
 *                     BLOOMERY_ETOOBIG also when it would exceed
 *                     CF_MAX_FILTER_BYTES. */
BLOOMERY_API int cf_add(cf_t *c, const void *item, size_t len);
/* Add unless present (CF.ADDNX): 1 added, 0 already (probably) present, or
 * the errors of cf_add (the sub-filter limit is checked first). */
BLOOMERY_API int cf_add_nx(cf_t *c, const void *item, size_t len);
/* Membership (CF.EXISTS): false means certainly absent. */
BLOOMERY_API bool cf_exists(const cf_t *c, const void *item, size_t len);
/* Matching fingerprints in the item's buckets over all sub-filters (CF.COUNT):
 * an upper bound of the copies stored. As in RedisBloom, a bucket is counted
 * twice when both of an item's buckets are the same one. */
BLOOMERY_API uint64_t cf_count(const cf_t *c, const void *item, size_t len);
/* Delete one copy (CF.DEL): true if a matching fingerprint was removed, false
 * (nothing changed) if none was found. May compact (see above). */
BLOOMERY_API bool cf_delete(cf_t *c, const void *item, size_t len);

/* The same for h = cf_hash(item, len). */
BLOOMERY_API int cf_add_hashed(cf_t *c, uint64_t h);
BLOOMERY_API int cf_add_nx_hashed(cf_t *c, uint64_t h);
BLOOMERY_API bool cf_exists_hashed(const cf_t *c, uint64_t h);
BLOOMERY_API uint64_t cf_count_hashed(const cf_t *c, uint64_t h);
BLOOMERY_API bool cf_delete_hashed(cf_t *c, uint64_t h);

/* The fingerprint h gets in this filter (1 .. 2^f - 1). */
BLOOMERY_API uint32_t cf_fingerprint(const cf_t *c, uint64_t h);

/* Move fingerprints into older sub-filters and free emptied newest ones, as
 * the automatic compaction does but going on past a sub-filter that cannot
 * be emptied (RedisBloom's CF.COMPACT). Resets the delete count. */
BLOOMERY_API void cf_compact(cf_t *c);

/* CF.INFO, field by field as RedisBloom computes them:
 * - "Size": 40 + 16 * filters + table bytes (RedisBloom's struct sizes; with
 *   f = 8 its exact value)
 * - "Number of buckets": sub-filter 0's
 * - "Number of filters"
 * - "Number of items inserted": adds minus deletes
 * - "Number of items deleted": since the last compaction
 * - "Bucket size"
 * - "Expansion rate": rounded up to a power of two
 * - "Max iterations" */
BLOOMERY_API uint64_t cf_info_size(const cf_t *c);
BLOOMERY_API uint64_t cf_nbuckets(const cf_t *c);
BLOOMERY_API uint32_t cf_nfilters(const cf_t *c);
BLOOMERY_API uint64_t cf_items(const cf_t *c);
BLOOMERY_API uint64_t cf_deletes(const cf_t *c);
BLOOMERY_API unsigned cf_bucket_size(const cf_t *c);
BLOOMERY_API unsigned cf_expansion(const cf_t *c);
BLOOMERY_API unsigned cf_max_iterations(const cf_t *c);

BLOOMERY_API unsigned cf_fingerprint_bits(const cf_t *c);
BLOOMERY_API unsigned cf_max_filters(const cf_t *c);
/* RedisBloom's cf-max-expansions is server configuration read by every add:
 * a server applies its current value here before adding. 1..65536, else
 * BLOOMERY_EINVAL. */
BLOOMERY_API int cf_set_max_filters(cf_t *c, unsigned max_filters);
/* Install or replace the growth veto (see cf_options.may_allocate), e.g. for
 * filters built by cf_create_shape. */
BLOOMERY_API void cf_set_may_allocate(cf_t *c, bool (*may_allocate)(void *ctx, uint64_t bytes),
                                      void *ctx);

/* Write barrier, for copy-on-write snapshots: once set, hook(ctx, i, offset,
 * len) runs before any call changes bytes [offset, offset + len) of
 * sub-filter i's table (as cf_filter_data shows it; i is also the table's
 * serial.h region), and with the whole table before a sub-filter is freed by
 * compaction, so the hook can save the bytes it still needs. It runs on the
 * calling thread, inside the call; a range may cover bytes that end up
 * unchanged. Growth adds tables without calling it (nothing existing
 * changes). cf_free does not call it. Set or remove (NULL) it only while no
 * other call on the filter runs. */
typedef void (*cf_write_hook)(void *ctx, uint32_t filter, uint64_t offset, uint64_t len);
BLOOMERY_API void cf_set_write_hook(cf_t *c, cf_write_hook hook, void *ctx);

BLOOMERY_API uint64_t cf_bytes(const cf_t *c); /* sum of the sub-filter tables */
BLOOMERY_API uint64_t cf_slots(const cf_t *c); /* sum of nbuckets * b */
/* Nonzero slots over all sub-filters (reads every table; for tests and
 * debugging): equals cf_items() unless a false deletion or a loaded image
 * broke the relation. */
BLOOMERY_API uint64_t cf_occupied(const cf_t *c);

/* ---- shape and data, for serialization ---- */

typedef struct cf_shape {
    uint64_t nbuckets; /* sub-filter 0's, a power of two */
    unsigned bucket_size;
    unsigned fingerprint_bits;
    unsigned max_iterations;
    unsigned expansion; /* 0 or a power of two */
    unsigned max_filters;
    uint32_t nfilters; /* >= 1; exactly 1 when expansion is 0 */
    uint64_t items, deletes;
} cf_shape;

BLOOMERY_API void cf_shape_of(const cf_t *c, cf_shape *out);
/* A filter of that shape with every slot empty, to be filled through
 * cf_filter_data_mut. Errors: BLOOMERY_EINVAL (a field out of range),
 * BLOOMERY_ETOOBIG (sizes overflow or exceed CF_MAX_FILTER_BYTES),
 * BLOOMERY_ENOMEM. */
BLOOMERY_API int cf_create_shape(cf_t **out, const cf_shape *shape);
/* Table bytes of sub-filter i for a shape (0 if i or the shape is invalid). */
BLOOMERY_API uint64_t cf_shape_filter_bytes(const cf_shape *shape, uint32_t i);

/* Sub-filter i (0 = oldest): its buckets and its table, slots packed
 * f bits each from bit 0 of byte 0 (little-endian), slot s of bucket j at
 * bit (j * b + s) * f; bits past the last slot are written as zero and never
 * read. Writable access is for loading only. */
BLOOMERY_API uint64_t cf_filter_nbuckets(const cf_t *c, uint32_t i);
BLOOMERY_API uint64_t cf_filter_bytes(const cf_t *c, uint32_t i);
BLOOMERY_API const uint8_t *cf_filter_data(const cf_t *c, uint32_t i);
BLOOMERY_API uint8_t *cf_filter_data_mut(cf_t *c, uint32_t i);
/* Bytes [off, off + len) of sub-filter i's table replaced by p, through
 * the write barrier: a dump chunk loaded into a filter others may be
 * snapshotting. BLOOMERY_EINVAL when the range is not inside the table. */
BLOOMERY_API int cf_filter_write(cf_t *c, uint32_t i, uint64_t off, const void *p, size_t len);

#ifdef __cplusplus
}
#endif

#endif

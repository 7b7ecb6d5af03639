/* Top-k heavy hitters: HeavyKeeper with exponential decay, as RedisBloom's
 * TOPK.* does it.
 *
 * depth rows of width buckets, each a (fingerprint, count) pair, plus a
 * min-heap of the k items with the largest estimated counts. An add of item
 * x by n visits one bucket per row (column MurmurHash2(x, row) % width): an
 * empty bucket takes x's fingerprint (MurmurHash2(x, 1919)) and n; a bucket
 * with x's fingerprint gains n; a bucket of another item is decayed, n times,
 * by one with probability decay^count, and taken over by x with what is left
 * of n when it reaches 0. The largest count x reached in a bucket it owns is
 * its estimate; an estimate at least the heap's minimum enters x into the
 * heap (updating it when present), expelling the minimum item.
 *
 * RedisBloom draws the decay with rand(). Here each value carries its own
 * generator (splitmix64, seeded at creation and serialized with the value),
 * so the same operations from the same state give the same state: a log
 * replayed, or a replica fed the same commands, ends identical.
 *
 * Counts saturate at 2^32 - 1. Items are binary-safe.
 *
 * Not thread-safe: callers serialize access to one topk_t.
 */
#ifndef BLOOMERY_TOPK_H
#define BLOOMERY_TOPK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomery/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TOPK_DEFAULT_WIDTH 8
#define TOPK_DEFAULT_DEPTH 7
#define TOPK_DEFAULT_DECAY 0.9
/* TOPK.INCRBY's largest increment. */
#define TOPK_MAX_INCREMENT 100000
/* RedisBloom's table of decay^i, i < 256; larger counts combine entries. */
#define TOPK_DECAY_TABLE 256

typedef struct topk topk_t;

/* An item of the heap, or an expelled one: pointers into the value. */
typedef struct topk_item {
    const uint8_t *item;
    size_t len;
    uint32_t count;
} topk_item;

/* Bytes a new value allocates (buckets, heap, header); 0 on overflow or a
 * zero size. Items entering the heap add their lengths (topk_bytes). */
BLOOMERY_API uint64_t topk_bytes_for(uint32_t k, uint32_t width, uint32_t depth);

/* A new value: k >= 1 heap slots, width x depth buckets, decay in (0, 1],
 * the generator seeded with seed. BLOOMERY_EINVAL for a parameter out of
 * range, BLOOMERY_ETOOBIG when topk_bytes_for is 0 or beyond the address
 * space, BLOOMERY_ENOMEM. */
BLOOMERY_API int topk_create(topk_t **out, uint32_t k, uint32_t width, uint32_t depth, double decay,
                             uint64_t seed);
BLOOMERY_API void topk_free(topk_t *t);

BLOOMERY_API uint32_t topk_k(const topk_t *t);
BLOOMERY_API uint32_t topk_width(const topk_t *t);
BLOOMERY_API uint32_t topk_depth(const topk_t *t);
BLOOMERY_API double topk_decay(const topk_t *t);
/* The generator's state: what the next decay draw starts from. */
BLOOMERY_API uint64_t topk_rng(const topk_t *t);
/* Bytes allocated now, heap items included. */
BLOOMERY_API uint64_t topk_bytes(const topk_t *t);

/* Add incr (any u32; TOPK.ADD is 1) to item. Returns 1 when the item
 * entered the heap and expelled another, described in *expelled (pointers
 * valid until the next topk_add on t; may be NULL), 0 when nothing was
 * expelled, BLOOMERY_ENOMEM when a copy of the item could not be allocated
 * (checked before anything changes: the value is unchanged). */
BLOOMERY_API int topk_add(topk_t *t, const void *item, size_t len, uint32_t incr,
                          topk_item *expelled);

/* Whether item is in the heap. */
BLOOMERY_API bool topk_query(const topk_t *t, const void *item, size_t len);
/* Its estimated count, as RedisBloom's TOPK.COUNT: the largest count of a
 * bucket holding its fingerprint (for an item in the heap, only buckets
 * counting at least the heap's minimum). */
BLOOMERY_API uint32_t topk_count(const topk_t *t, const void *item, size_t len);
/* The heap's items with a count above 0, largest count first (ties in heap
 * order), into out (room for topk_k items). Returns how many. */
BLOOMERY_API size_t topk_list(const topk_t *t, topk_item *out);

/* ---- serialization (serial.h) ---- */

/* The buckets: depth rows of width (u32 fingerprint, u32 count) pairs,
 * little-endian. */
BLOOMERY_API const uint8_t *topk_buckets(const topk_t *t);
BLOOMERY_API uint8_t *topk_buckets_mut(topk_t *t);
BLOOMERY_API uint64_t topk_buckets_bytes(const topk_t *t);
/* The heap as bytes: k slots, each u8 used (0/1), u32 fingerprint, u32
 * count, u32 length, the item's bytes. Built into a buffer of t that only
 * the next call of this function changes (adds do not): an image's heap
 * region is the heap as it was when the image was made. NULL when it cannot
 * be allocated. */
BLOOMERY_API const uint8_t *topk_heap_image(topk_t *t, size_t *len);
/* A write barrier on the buckets: hook(ctx, 0, offset, len) is called
 * before any of bytes [offset, offset + len) of the buckets (serial.h region
 * 0) changes, so a snapshot can keep their old contents (copy-on-write).
 * NULL removes it. */
typedef void (*topk_write_hook)(void *ctx, uint32_t region, uint64_t offset, uint64_t len);
BLOOMERY_API void topk_set_write_hook(topk_t *t, topk_write_hook hook, void *ctx);

/* Replace the heap with an image of that form and the generator's state
 * with rng (a loader, after the buckets are in place). BLOOMERY_ECORRUPT
 * when the image is malformed (a length past its end, trailing bytes, a
 * flag other than 0/1, an unused slot with a fingerprint, count or length,
 * an item whose fingerprint is not its hash, an item twice);
 * BLOOMERY_ENOMEM. On error t is unchanged. */
BLOOMERY_API int topk_load_heap(topk_t *t, const uint8_t *img, size_t len, uint64_t rng);

#ifdef __cplusplus
}
#endif

#endif

/* Classic Bloom filter, bit for bit as RedisBloom builds it.
 *
 * One bit array of `bits` bits (a multiple of 64) and k probes per item:
 * a = MurmurHash64A(item, 0xc6a4a7935bd1e995), b = MurmurHash64A(item, a),
 * probe i sets bit (a + i*b) mod bits, bit x living in byte x>>3 under mask
 * 1 << (x & 7). Sized as RedisBloom's bloom_init with FORCE64|NOROUND. A dump
 * taken from RedisBloom loads into this layout and answers identically.
 *
 * It is also the reference "plain k-probe" filter the benchmarks compare the
 * blocked layout with. Concurrency: any number of threads; an atomic OR per
 * 64-bit word, relaxed loads; cbf_check_and_add is linearizable per item.
 */
#ifndef BLOOMERY_CLASSIC_H
#define BLOOMERY_CLASSIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomery/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cbf cbf_t;

/* RedisBloom's pair of hashes for an item; computed once per item and reused
 * for every link of a chain. */
typedef struct cbf_hash {
    uint64_t a, b;
} cbf_hash;

BLOOMERY_API cbf_hash cbf_hash_item(const void *item, size_t len);

/* Limits. No valid error rate yields more hashes than CBF_MAX_HASHES (the
 * smallest positive double gives ceil(ln 2 * 1549.5) = 1075), and a link's
 * array is at most CBF_MAX_BYTES (256 TiB), which keeps bit arithmetic far
 * from 64-bit overflow. */
#define CBF_MAX_HASHES 1075u
#define CBF_MAX_BYTES ((uint64_t)1 << 48)

/* Sized for capacity items at error rate p in (0, 1), as RedisBloom's
 * bloom_init(entries = capacity, error = p, FORCE64|NOROUND).
 * Errors: BLOOMERY_EINVAL, BLOOMERY_ETOOBIG (array over CBF_MAX_BYTES),
 * BLOOMERY_ENOMEM. */
BLOOMERY_API int cbf_create(cbf_t **out, uint64_t capacity, double error_rate);

/* An explicit shape as found in a RedisBloom dump header, checked as
 * RedisBloom checks a loaded link: bytes > 0, bits == 8 * bytes, error in
 * (0, 1), bpe finite and > 0, hashes == ceil(ln 2 * bpe) (RedisBloom's
 * ln 2 = 0.693147180559945; at most CBF_MAX_HASHES), capacity > 0, and
 * n2 <= 63 with bits >= 2^n2. n2 > 0 marks a power-of-two filter of old
 * RedisBloom versions, probed mod 2^n2 instead of mod bits (still with the
 * 64-bit hash). The array starts zeroed.
 * Errors: BLOOMERY_EINVAL for an inconsistent shape, BLOOMERY_ETOOBIG for
 * bytes > CBF_MAX_BYTES, BLOOMERY_ENOMEM. */
typedef struct cbf_shape {
    uint64_t capacity; /* "entries" */
    double error_rate;
    double bpe; /* bits per entry as RedisBloom stored it */
    unsigned hashes;
    uint64_t bits;
    uint64_t bytes; /* bits / 8 */
    uint8_t n2;     /* log2 size for legacy power-of-two filters, else 0 */
} cbf_shape;
BLOOMERY_API int cbf_create_shape(cbf_t **out, const cbf_shape *shape);
BLOOMERY_API void cbf_shape_of(const cbf_t *f, cbf_shape *shape);

BLOOMERY_API void cbf_free(cbf_t *f);

/* Bytes cbf_create would allocate (0 if invalid). */
BLOOMERY_API uint64_t cbf_bytes_for(uint64_t capacity, double error_rate);

/* cbf_add returns true when any bit flipped, and then counts the item. Two
 * threads racing to add one new item may both see a flip; cbf_check_and_add
 * serializes adds of one item (striped lock on its hash) so exactly one of
 * them returns true. */
BLOOMERY_API bool cbf_check(const cbf_t *f, const void *item, size_t len);
BLOOMERY_API bool cbf_add(cbf_t *f, const void *item, size_t len);
BLOOMERY_API bool cbf_check_and_add(cbf_t *f, const void *item, size_t len);
BLOOMERY_API bool cbf_check_hashed(const cbf_t *f, cbf_hash h);
BLOOMERY_API bool cbf_add_hashed(cbf_t *f, cbf_hash h);

BLOOMERY_API uint64_t cbf_bits(const cbf_t *f);
BLOOMERY_API uint64_t cbf_bytes(const cbf_t *f);
BLOOMERY_API unsigned cbf_hashes(const cbf_t *f);
BLOOMERY_API uint64_t cbf_capacity(const cbf_t *f);
BLOOMERY_API double cbf_error_rate(const cbf_t *f);
BLOOMERY_API uint64_t cbf_count(const cbf_t *f);
BLOOMERY_API void cbf_set_count(cbf_t *f, uint64_t count);

/* Fraction of bits set, to the power k: the FPR of a random non-member.
 * Beyond 65536 words (4 Mibit) the fraction is of an even sample of them. */
BLOOMERY_API double cbf_fpr_estimate(const cbf_t *f);

/* OR src into dst. Requires equal bits, bytes, hashes and n2, else
 * BLOOMERY_EINVAL (capacity and error rate are not compared). dst's count
 * becomes the sum of both counts (saturating): an upper bound, so a chain
 * grows early rather than overfills. */
BLOOMERY_API int cbf_merge(cbf_t *dst, const cbf_t *src);
/* Zero every bit and the count; not atomic with respect to concurrent adds. */
BLOOMERY_API void cbf_clear(cbf_t *f);
/* The bit array as RedisBloom's byte array (cbf_bytes() bytes): a SCANDUMP
 * data chunk, or the place to copy one when loading. Writes through
 * cbf_data_mut are plain stores: do not load while other threads add. */
BLOOMERY_API const uint8_t *cbf_data(const cbf_t *f);
BLOOMERY_API uint8_t *cbf_data_mut(cbf_t *f);

/* RedisBloom's SCANDUMP header for a chain of classic links (little-endian,
 * packed): u64 total items, u32 nfilters, u32 options, u32 growth, then per
 * link u64 bytes, u64 bits, u64 items, f64 error, f64 bpe, u32 hashes,
 * u64 capacity, u8 n2. */
#define CBF_RB_HEADER_FIXED 20
#define CBF_RB_HEADER_LINK 53
#define CBF_RB_OPT_NOROUND 1
#define CBF_RB_OPT_ENTS_IS_BITS 2
#define CBF_RB_OPT_FORCE64 4
#define CBF_RB_OPT_NO_SCALING 8

typedef struct cbf_rb_link {
    cbf_shape shape;
    uint64_t items;
} cbf_rb_link;

typedef struct cbf_rb_header {
    uint64_t total_items;
    uint32_t nfilters;
    uint32_t options;
    uint32_t growth;
    cbf_rb_link *links; /* nfilters entries */
} cbf_rb_header;

/* Encode into buf (CBF_RB_HEADER_FIXED + nfilters * CBF_RB_HEADER_LINK bytes). */
BLOOMERY_API size_t cbf_rb_header_size(uint32_t nfilters);
BLOOMERY_API void cbf_rb_header_encode(const cbf_rb_header *h, uint8_t *buf);

/* Decode and validate as RedisBloom does (sizes consistent, k matches bpe,
 * error in (0,1), items sum to the total, only FORCE64 filters), and also reject
 * what it could not use: NaN rates, zero-sized links, unknown option bits, a
 * scaling chain with growth 0, and bit arrays summing to more than max_bytes.
 * Every link passes cbf_create_shape's checks. growth is otherwise not
 * checked. On success h->links is malloc'd (free with cbf_rb_header_release);
 * on failure *h is zeroed and owns nothing.
 * Errors: BLOOMERY_ETRUNC (shorter than the header nfilters announces),
 * BLOOMERY_ECORRUPT (longer, or a field fails a check), BLOOMERY_ETOOBIG
 * (max_bytes or CBF_MAX_BYTES exceeded), BLOOMERY_ENOMEM. */
BLOOMERY_API int cbf_rb_header_decode(const uint8_t *buf, size_t len, uint64_t max_bytes,
                                      cbf_rb_header *h);
BLOOMERY_API void cbf_rb_header_release(cbf_rb_header *h);

#ifdef __cplusplus
}
#endif

#endif

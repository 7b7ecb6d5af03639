/* HyperLogLog, bit-exact with Redis 5 and later.
 *
 * The value is Redis's HLL string: the 16-byte "HYLL" header (encoding byte,
 * cached cardinality), then sparse or dense registers (P = 14, 16384
 * registers, 6 bits each when dense). Elements are hashed with MurmurHash64A,
 * seed 0xadc83b19; the count uses Ertl's estimator. A value built here equals
 * byte for byte the one Redis builds from the same PFADD/PFCOUNT/PFMERGE
 * calls, so it can be moved between the two as a string.
 *
 * Not thread-safe: callers serialize access to one hll_t.
 */
#ifndef BLOOMERY_HLL_H
#define BLOOMERY_HLL_H

#include <stddef.h>
#include <stdint.h>

#include "bloomery/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HLL_P 14
#define HLL_REGISTERS 16384
#define HLL_DENSE_SIZE (16 + (HLL_REGISTERS * 6 + 7) / 8) /* 12304 */
#define HLL_SPARSE_MAX_BYTES_DEFAULT 3000

typedef struct hll hll_t;

/* A new, empty (sparse) HLL: header + XZERO:16384, cache marked invalid,
 * i.e. the value Redis stores for a key created by PFADD or PFMERGE.
 * sparse_max_bytes as Redis's hll-sparse-max-bytes, header included (0 means
 * the default 3000). BLOOMERY_EINVAL if out is NULL. */
BLOOMERY_API int hll_create(hll_t **out, size_t sparse_max_bytes);
BLOOMERY_API void hll_free(hll_t *h);

/* Adopt a Redis HLL string (the bytes are copied). Validates as Redis does
 * for PFADD/PFCOUNT: BLOOMERY_ETYPE for a bad magic or encoding, a value
 * shorter than the 16-byte header, or a dense value not exactly
 * HLL_DENSE_SIZE bytes (Redis's WRONGTYPE "not a valid HyperLogLog string
 * value"); BLOOMERY_ECORRUPT for invalid sparse data
 * (Redis's INVALIDOBJ): a truncated opcode or runs not covering exactly
 * 16384 registers. The whole sparse program is checked here, where Redis
 * checks lazily, so some damaged values Redis would still serve are refused.
 * The three unused header bytes are not checked (Redis does not either).
 * A sparse value may be longer than sparse_max_bytes; it is promoted at its
 * next growth. */
BLOOMERY_API int hll_from_bytes(hll_t **out, const uint8_t *buf, size_t len,
                                size_t sparse_max_bytes);

/* Change the sparse limit of an existing value (Redis reads
 * hll-sparse-max-bytes at every update, so a server applies CONFIG SET to
 * every key through this). 0 means the default; Redis's own 0, "promote on
 * any growth", is spelled 1. */
BLOOMERY_API void hll_set_sparse_max(hll_t *h, size_t sparse_max_bytes);

/* PFADD of one element: 1 if a register changed (the cache is then marked
 * invalid), 0 if not, < 0 on error (BLOOMERY_ENOMEM: the value is
 * unchanged). PFADD's reply is 1 also when the command created the key;
 * that is the caller's to add (a fresh hll_t changes on its first add
 * anyway). elem may be NULL when len is 0. */
BLOOMERY_API int hll_add(hll_t *h, const void *elem, size_t len);

/* The element's 64-bit hash (MurmurHash64A, seed 0xadc83b19), and the add
 * of an element known only by it: a log can record hashes, not elements. */
BLOOMERY_API uint64_t hll_hash_elem(const void *elem, size_t len);
BLOOMERY_API int hll_add_hashed(hll_t *h, uint64_t hash);

/* PFCOUNT of one key: returns the cached cardinality when valid, else
 * computes it and stores it in the header (so the bytes change as Redis's
 * do). < 0 on corrupt data (not expected: values are checked on entry). */
BLOOMERY_API int hll_count(hll_t *h, uint64_t *card);

/* PFCOUNT of several keys: union count, no caching. NULL entries are empty. */
BLOOMERY_API int hll_count_union(hll_t *const *hs, size_t n, uint64_t *card);

/* PFMERGE: dst = max(dst, srcs...) per register; NULL entries are empty and
 * srcs may include dst. dst becomes dense if any input (dst included) is
 * dense, else it is updated sparsely and may be promoted, as Redis does; the
 * cache is marked invalid. On error dst is unchanged. */
BLOOMERY_API int hll_merge(hll_t *dst, hll_t *const *srcs, size_t n);

/* The Redis string value. The pointer is valid until the next hll_add,
 * hll_count or hll_merge (as dst) on h. */
BLOOMERY_API const uint8_t *hll_bytes(const hll_t *h, size_t *len);

/* Register j's value (tests, serialization checks): 0..51 from hashing,
 * up to 63 in foreign dense bytes. BLOOMERY_EINVAL for j >= 16384. */
BLOOMERY_API int hll_register(const hll_t *h, unsigned j);

#ifdef __cplusplus
}
#endif

#endif

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

#define HLL_P 14
#define HLL_REGISTERS 16384
#define HLL_DENSE_SIZE (16 + (HLL_REGISTERS * 6 + 7) / 8) /* 12304 */
#define HLL_SPARSE_MAX_BYTES_DEFAULT 3000

typedef struct hll hll_t;

/* A new, empty (sparse) HLL. sparse_max_bytes as Redis's
 * hll-sparse-max-bytes (0 means the default 3000). */
int hll_create(hll_t **out, size_t sparse_max_bytes);
void hll_free(hll_t *h);

/* Adopt a Redis HLL string. Validates as Redis does for PFADD/PFCOUNT:
 * BLOOMERY_ETYPE for a bad magic/encoding/size (Redis's WRONGTYPE "not a
 * valid HyperLogLog string value"); BLOOMERY_ECORRUPT for invalid sparse
 * data (Redis's INVALIDOBJ). */
int hll_from_bytes(hll_t **out, const uint8_t *buf, size_t len, size_t sparse_max_bytes);

/* 1 if a register changed (or the value was just created by the caller and
 * must be reported as updated), 0 if not, < 0 on error. */
int hll_add(hll_t *h, const void *elem, size_t len);

/* PFCOUNT of one key: uses and refreshes the cached cardinality in the header
 * (so the bytes change as Redis's do). < 0 on corrupt data. */
int hll_count(hll_t *h, uint64_t *card);

/* PFCOUNT of several keys: union count, no caching. NULL entries are empty. */
int hll_count_union(hll_t *const *hs, size_t n, uint64_t *card);

/* PFMERGE: dst = max(dst, srcs...) per register, promotion as Redis. */
int hll_merge(hll_t *dst, hll_t *const *srcs, size_t n);

/* The Redis string value. */
const uint8_t *hll_bytes(const hll_t *h, size_t *len);

/* Register j's value, 0..51 (tests, serialization checks). */
int hll_register(const hll_t *h, unsigned j);

#endif

/* Snapshot chunks: a chunk of a filter's image, compressed with zstd and
 * named by the XXH3-128 of its raw bytes (content addressing: a chunk that
 * did not change since the last snapshot already has its file).
 *
 *   chunk file (DIR/chunks/<32 hex digits>.zst)
 *     "BLMRYCHK" | u16 version | u16 0 | u32 raw length |
 *     u64 hash low | u64 hash high | u64 frame length |
 *     u64 XXH3-64 of bytes 0..39 | one zstd frame
 *
 * Small frames (a chunk of zeros compresses to a few dozen bytes) live in
 * the snapshot index instead of a file of their own.
 */
#ifndef BLOOMERY_CHUNK_FORMAT_H
#define BLOOMERY_CHUNK_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHUNK_MAGIC "BLMRYCHK"
#define CHUNK_VERSION 1
#define CHUNK_HEADER_SIZE 48
#define CHUNK_MAX_RAW (64u << 20) /* BLOOMERY_CHUNK_MAX */

typedef struct chunk_hash {
    uint64_t lo, hi;
} chunk_hash;

chunk_hash chunk_hash_of(const void *data, size_t len);
static inline bool chunk_hash_eq(chunk_hash a, chunk_hash b)
{
    return a.lo == b.lo && a.hi == b.hi;
}
/* Order of hashes for qsort/bsearch over arrays of chunk_hash. */
static inline int chunk_hash_cmp(const void *a, const void *b)
{
    const chunk_hash *x = a, *y = b;
    if (x->hi != y->hi)
        return x->hi < y->hi ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}
/* 32 lowercase hex digits, high half first, and a NUL. */
void chunk_hash_hex(chunk_hash h, char out[33]);
bool chunk_hash_from_hex(const char *s, chunk_hash *h);

/* One zstd frame of raw at the given level, malloc'd into *frame. */
bool chunk_compress(const void *raw, size_t len, int level, uint8_t **frame, size_t *flen);

/* The same with a context and an output buffer kept from one chunk to the
 * next: a context made per call costs more than compressing a 1 MiB chunk
 * of a filter (its tables are allocated and cleared each time). The frame
 * is in the compressor's buffer, valid until the next call. */
typedef struct chunk_compressor {
    void *cctx; /* ZSTD_CCtx */
    uint8_t *buf;
    size_t cap;
} chunk_compressor;
bool chunk_compress_with(chunk_compressor *c, const void *raw, size_t len, int level,
                         const uint8_t **frame, size_t *flen);
void chunk_compressor_free(chunk_compressor *c);

/* Decompress one frame that must hold exactly raw_len bytes hashing to
 * want, into out (raw_len bytes). */
bool chunk_frame_decode(const uint8_t *frame, size_t flen, uint32_t raw_len, chunk_hash want,
                        uint8_t *out, char *err, size_t errlen);

void chunk_file_header(uint8_t out[CHUNK_HEADER_SIZE], uint32_t raw_len, chunk_hash h,
                       uint64_t frame_len);
/* Verify a chunk file's header (and that its hash equals *want when want is
 * not NULL); on success *raw_len, *h and *frame (inside buf, the rest of
 * the file) say what chunk_frame_decode needs. *err_off receives the
 * offset of the fault. */
bool chunk_file_header_check(const uint8_t *buf, size_t len, const chunk_hash *want,
                             uint32_t *raw_len, chunk_hash *h, const uint8_t **frame, size_t *flen,
                             char *err, size_t errlen, size_t *err_off);
/* Verify a whole chunk file: header, the frame, the content hash (and that
 * it equals *want when want is not NULL). On success *out is a malloc'd
 * copy of the raw bytes. *err_off receives the offset of the fault. */
bool chunk_file_decode(const uint8_t *buf, size_t len, const chunk_hash *want, uint8_t **out,
                       uint32_t *raw_len, char *err, size_t errlen, size_t *err_off);

#endif

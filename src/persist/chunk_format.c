/* Snapshot chunk files and frames: see chunk_format.h. */
#include "chunk_format.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#include "le.h"

static void setf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

chunk_hash chunk_hash_of(const void *data, size_t len)
{
    XXH128_hash_t h = XXH3_128bits(data, len);
    return (chunk_hash){h.low64, h.high64};
}

void chunk_hash_hex(chunk_hash h, char out[33])
{
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.hi, (unsigned long long)h.lo);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

bool chunk_hash_from_hex(const char *s, chunk_hash *h)
{
    uint64_t v[2] = {0, 0};
    for (int i = 0; i < 32; i++) {
        int d = hexval(s[i]);
        if (d < 0)
            return false;
        v[i / 16] = v[i / 16] << 4 | (uint64_t)d;
    }
    h->hi = v[0];
    h->lo = v[1];
    return true;
}

bool chunk_compress(const void *raw, size_t len, int level, uint8_t **frame, size_t *flen)
{
    chunk_compressor c = {0};
    const uint8_t *f;
    bool ok = chunk_compress_with(&c, raw, len, level, &f, flen);
    if (ok) {
        *frame = malloc(*flen ? *flen : 1);
        ok = *frame != NULL;
        if (ok)
            memcpy(*frame, f, *flen);
    }
    chunk_compressor_free(&c);
    return ok;
}

bool chunk_compress_with(chunk_compressor *c, const void *raw, size_t len, int level,
                         const uint8_t **frame, size_t *flen)
{
    if (c->cctx == NULL && (c->cctx = ZSTD_createCCtx()) == NULL)
        return false;
    size_t cap = ZSTD_compressBound(len);
    if (c->cap < cap) {
        uint8_t *b = realloc(c->buf, cap);
        if (b == NULL)
            return false;
        c->buf = b;
        c->cap = cap;
    }
    size_t n = ZSTD_compressCCtx(c->cctx, c->buf, c->cap, raw, len, level);
    if (ZSTD_isError(n))
        return false;
    *frame = c->buf;
    *flen = n;
    return true;
}

void chunk_compressor_free(chunk_compressor *c)
{
    ZSTD_freeCCtx(c->cctx);
    free(c->buf);
    *c = (chunk_compressor){0};
}

bool chunk_frame_decode(const uint8_t *frame, size_t flen, uint32_t raw_len, chunk_hash want,
                        uint8_t *out, char *err, size_t errlen)
{
    if (raw_len == 0 || raw_len > CHUNK_MAX_RAW) {
        setf(err, errlen, "raw length %u out of range", raw_len);
        return false;
    }
    /* The frame must declare exactly the expected size and be the whole
     * buffer: a size cap before any allocation or copy. */
    unsigned long long declared = ZSTD_getFrameContentSize(frame, flen);
    if (declared != raw_len) {
        setf(err, errlen, "compressed frame declares %s bytes, expected %u",
             declared == ZSTD_CONTENTSIZE_ERROR     ? "an invalid number of"
             : declared == ZSTD_CONTENTSIZE_UNKNOWN ? "an unknown number of"
                                                    : "another number of",
             raw_len);
        return false;
    }
    size_t fsz = ZSTD_findFrameCompressedSize(frame, flen);
    if (ZSTD_isError(fsz) || fsz != flen) {
        setf(err, errlen, "compressed frame is damaged or truncated");
        return false;
    }
    size_t n = ZSTD_decompress(out, raw_len, frame, flen);
    if (ZSTD_isError(n) || n != raw_len) {
        setf(err, errlen, "decompression failed: %s",
             ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short output");
        return false;
    }
    if (!chunk_hash_eq(chunk_hash_of(out, raw_len), want)) {
        setf(err, errlen, "content hash mismatch");
        return false;
    }
    return true;
}

void chunk_file_header(uint8_t out[CHUNK_HEADER_SIZE], uint32_t raw_len, chunk_hash h,
                       uint64_t frame_len)
{
    memcpy(out, CHUNK_MAGIC, 8);
    le_store(out + 8, CHUNK_VERSION, 2);
    le_store(out + 10, 0, 2);
    le_store(out + 12, raw_len, 4);
    le_store(out + 16, h.lo, 8);
    le_store(out + 24, h.hi, 8);
    le_store(out + 32, frame_len, 8);
    le_store(out + 40, XXH3_64bits(out, 40), 8);
}

bool chunk_file_header_check(const uint8_t *buf, size_t len, const chunk_hash *want,
                             uint32_t *raw_len, chunk_hash *hash, const uint8_t **frame,
                             size_t *frame_len, char *err, size_t errlen, size_t *err_off)
{
    *err_off = 0;
    if (len < CHUNK_HEADER_SIZE) {
        setf(err, errlen, "file truncated (%zu bytes, header is %d)", len, CHUNK_HEADER_SIZE);
        *err_off = len;
        return false;
    }
    if (memcmp(buf, CHUNK_MAGIC, 8) != 0) {
        setf(err, errlen, "bad magic: not a bloomery chunk file");
        return false;
    }
    if (le_load(buf + 40, 8) != XXH3_64bits(buf, 40)) {
        setf(err, errlen, "chunk header checksum mismatch");
        *err_off = 40;
        return false;
    }
    if (le_load(buf + 8, 2) != CHUNK_VERSION || le_load(buf + 10, 2) != 0) {
        setf(err, errlen, "unsupported chunk format version %u", (unsigned)le_load(buf + 8, 2));
        *err_off = 8;
        return false;
    }
    uint32_t rl = (uint32_t)le_load(buf + 12, 4);
    chunk_hash h = {le_load(buf + 16, 8), le_load(buf + 24, 8)};
    uint64_t flen = le_load(buf + 32, 8);
    if (want && !chunk_hash_eq(h, *want)) {
        setf(err, errlen, "chunk file holds another chunk (hash differs from its name)");
        *err_off = 16;
        return false;
    }
    if (flen != len - CHUNK_HEADER_SIZE) {
        setf(err, errlen, "frame length %llu does not match the file (%zu bytes after the header)",
             (unsigned long long)flen, len - CHUNK_HEADER_SIZE);
        *err_off = 32;
        return false;
    }
    if (rl == 0 || rl > CHUNK_MAX_RAW) {
        setf(err, errlen, "raw length %u out of range", rl);
        *err_off = 12;
        return false;
    }
    *raw_len = rl;
    *hash = h;
    *frame = buf + CHUNK_HEADER_SIZE;
    *frame_len = (size_t)flen;
    return true;
}

bool chunk_file_decode(const uint8_t *buf, size_t len, const chunk_hash *want, uint8_t **out,
                       uint32_t *raw_len, char *err, size_t errlen, size_t *err_off)
{
    *out = NULL;
    uint32_t rl;
    chunk_hash h;
    const uint8_t *frame;
    size_t flen;
    if (!chunk_file_header_check(buf, len, want, &rl, &h, &frame, &flen, err, errlen, err_off))
        return false;
    uint8_t *raw = malloc(rl);
    if (raw == NULL) {
        setf(err, errlen, "out of memory");
        return false;
    }
    if (!chunk_frame_decode(frame, flen, rl, h, raw, err, errlen)) {
        free(raw);
        *err_off = CHUNK_HEADER_SIZE;
        return false;
    }
    *out = raw;
    *raw_len = rl;
    return true;
}

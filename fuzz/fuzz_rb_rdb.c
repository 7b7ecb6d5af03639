// fuzz-sources: src/server/data/rb_rdb.c -Isrc/server/data
/* Fuzz target: arbitrary bytes as the fields of a RedisBloom RDB value
 * (src/server/data/rb_rdb.c), Bloom or cuckoo, any encoding version. The reader
 * either refuses them with a reason or builds a value; a value built is
 * written back in version 4, which must read again and write the same
 * fields: what the module saves under RedisBloom's names loads back.
 *
 * Input: byte 0 picks the family (bit 7) and the encoding version (bits
 * 0-2, so unknown versions too); then the fields in order, an unsigned as
 * one byte below 0xf0 or 0xf0 and 8 bytes, a double as 8 bytes, a string
 * as a 2-byte length and its bytes.
 *
 * With bit 6 set instead: RedisBloom's CF.SCANDUMP format. 38 bytes of
 * header, then chunks, each an 8-byte iterator, a 2-byte length and its
 * bytes, loaded into the filter the header made (refused or written inside
 * one sub-filter, never past it: ASan watches). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rb_rdb.h"

typedef struct in {
    const uint8_t *p, *end;
} in;

static bool take(in *s, size_t n, const uint8_t **out)
{
    if ((size_t)(s->end - s->p) < n)
        return false;
    *out = s->p;
    s->p += n;
    return true;
}

static uint64_t le64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static bool get_unsigned(void *ctx, uint64_t *v)
{
    const uint8_t *b;
    if (!take(ctx, 1, &b))
        return false;
    if (b[0] < 0xf0) {
        *v = b[0];
        return true;
    }
    if (!take(ctx, 8, &b))
        return false;
    *v = le64(b);
    return true;
}

static bool get_double(void *ctx, double *v)
{
    const uint8_t *b;
    if (!take(ctx, 8, &b))
        return false;
    uint64_t u = le64(b);
    memcpy(v, &u, sizeof(*v));
    return true;
}

static bool get_string(void *ctx, const uint8_t **p, size_t *len)
{
    const uint8_t *b;
    if (!take(ctx, 2, &b))
        return false;
    *len = (size_t)b[0] | (size_t)b[1] << 8;
    return take(ctx, *len, p);
}

/* The writer: the same framing into a growing buffer. */
typedef struct out {
    uint8_t *buf;
    size_t len, cap;
} out;

static void put(out *o, const void *p, size_t n)
{
    if (o->len + n > o->cap) {
        o->cap = (o->len + n) * 2;
        o->buf = realloc(o->buf, o->cap);
        if (o->buf == NULL)
            abort();
    }
    memcpy(o->buf + o->len, p, n);
    o->len += n;
}

static void put_u64(out *o, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(o, b, 8);
}

static void put_unsigned(void *ctx, uint64_t v)
{
    uint8_t tag = v < 0xf0 ? (uint8_t)v : 0xf0;
    put(ctx, &tag, 1);
    if (v >= 0xf0)
        put_u64(ctx, v);
}

static void put_double(void *ctx, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof(u));
    put_u64(ctx, u);
}

static void put_string(void *ctx, const uint8_t *p, size_t len)
{
    /* Strings longer than the framing holds cannot be written back: the
     * reader never builds one (its input framing bounds them). */
    if (len > 0xffff)
        abort();
    uint8_t b[2] = {(uint8_t)len, (uint8_t)(len >> 8)};
    put(ctx, b, 2);
    put(ctx, p, len);
}

/* Read one value from bytes; write it back into o (if built). */
static bool read_write(bool cuckoo, int encver, const uint8_t *data, size_t size, out *o)
{
    in s = {data, data + size};
    rb_reader r = {&s, get_unsigned, get_double, get_string};
    rb_writer w = {o, put_unsigned, put_double, put_string};
    const char *why = NULL;
    if (cuckoo) {
        cf_t *c = NULL;
        if (rb_read_cuckoo(&r, encver, 1 << 24, 32, &c, &why) != BLOOMERY_OK) {
            if (why == NULL || c != NULL)
                abort();
            return false;
        }
        if (!rb_write_cuckoo(&w, c))
            abort();
        cf_free(c);
    } else {
        sbf_t *f = NULL;
        if (rb_read_bloom(&r, encver, 1 << 24, &f, &why) != BLOOMERY_OK) {
            if (why == NULL || f != NULL)
                abort();
            return false;
        }
        if (!rb_write_bloom(&w, f))
            abort();
        sbf_free(f);
    }
    return true;
}

static void cuckoo_dump(const uint8_t *data, size_t size)
{
    in s = {data, data + size};
    const uint8_t *h;
    cf_t *c = NULL;
    const char *why = NULL;
    if (!take(&s, RB_CF_DUMP_HEADER_LEN, &h))
        return;
    if (rb_cuckoo_dump_header(h, RB_CF_DUMP_HEADER_LEN, 1 << 24, 32, &c, &why) != BLOOMERY_OK) {
        if (why == NULL || c != NULL)
            abort();
        return;
    }
    const uint8_t *it, *n, *chunk;
    while (take(&s, 8, &it) && take(&s, 2, &n) &&
           take(&s, (size_t)n[0] | (size_t)n[1] << 8, &chunk))
        rb_cuckoo_dump_chunk(c, (long long)le64(it), chunk, (size_t)n[0] | (size_t)n[1] << 8);
    cf_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 0x40) {
        cuckoo_dump(data + 1, size - 1);
        return 0;
    }
    bool cuckoo = data[0] & 0x80;
    int encver = data[0] & 7;
    out first = {0}, second = {0};
    if (read_write(cuckoo, encver, data + 1, size - 1, &first)) {
        int v = cuckoo ? RB_CUCKOO_ENCVER : RB_BLOOM_ENCVER;
        if (!read_write(cuckoo, v, first.buf, first.len, &second))
            abort(); /* what we write must read back */
        if (second.len != first.len || memcmp(first.buf, second.buf, first.len) != 0)
            abort(); /* and write the same fields again */
    }
    free(first.buf);
    free(second.buf);
    return 0;
}

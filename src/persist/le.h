/* Little-endian byte buffers for the persistence formats: a growing writer
 * and a bounds-checked reader. Every integer on disk is little-endian. */
#ifndef BLOOMERY_PERSIST_LE_H
#define BLOOMERY_PERSIST_LE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct pbuf {
    uint8_t *p;
    size_t len, cap;
    bool failed; /* an allocation failed; everything after is dropped */
} pbuf;

static inline bool pbuf_reserve(pbuf *b, size_t n)
{
    if (b->failed)
        return false;
    if (b->cap - b->len >= n)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) {
        if (cap > SIZE_MAX / 2) {
            b->failed = true;
            return false;
        }
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (p == NULL) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

static inline void pbuf_put(pbuf *b, const void *src, size_t n)
{
    if (n == 0 || !pbuf_reserve(b, n))
        return;
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static inline void le_store(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t le_load(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static inline void pbuf_u8(pbuf *b, uint8_t v) { pbuf_put(b, &v, 1); }
static inline void pbuf_u32(pbuf *b, uint32_t v)
{
    uint8_t t[4];
    le_store(t, v, 4);
    pbuf_put(b, t, 4);
}
static inline void pbuf_u64(pbuf *b, uint64_t v)
{
    uint8_t t[8];
    le_store(t, v, 8);
    pbuf_put(b, t, 8);
}
static inline void pbuf_f64(pbuf *b, double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    pbuf_u64(b, v);
}
/* A byte string: u32 length, bytes. */
static inline void pbuf_str(pbuf *b, const void *s, size_t n)
{
    pbuf_u32(b, (uint32_t)n);
    pbuf_put(b, s, n);
}

typedef struct rdr {
    const uint8_t *p;
    size_t len, off;
    bool bad; /* read past the end */
} rdr;

static inline bool rdr_take(rdr *r, size_t n, const uint8_t **out)
{
    if (r->bad || r->len - r->off < n) {
        r->bad = true;
        *out = NULL;
        return false;
    }
    *out = r->p + r->off;
    r->off += n;
    return true;
}

static inline uint64_t rdr_le(rdr *r, unsigned n)
{
    const uint8_t *p;
    return rdr_take(r, n, &p) ? le_load(p, n) : 0;
}
static inline uint8_t rdr_u8(rdr *r) { return (uint8_t)rdr_le(r, 1); }
static inline uint32_t rdr_u32(rdr *r) { return (uint32_t)rdr_le(r, 4); }
static inline uint64_t rdr_u64(rdr *r) { return rdr_le(r, 8); }
static inline double rdr_f64(rdr *r)
{
    uint64_t v = rdr_u64(r);
    double d;
    memcpy(&d, &v, 8);
    return d;
}
/* u32 length then bytes; false (and r->bad) if it does not fit. */
static inline bool rdr_str(rdr *r, const uint8_t **s, size_t *n)
{
    uint32_t len = rdr_u32(r);
    *n = len;
    return rdr_take(r, len, s);
}

#endif

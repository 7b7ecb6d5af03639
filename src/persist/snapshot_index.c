/* Snapshot index encoding and verification: see snapshot_index.h. */
#include "snapshot_index.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static void setf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Smallest encodings, to bound counts by the bytes left before trusting
 * them with an allocation. */
#define MIN_ENTRY (4 + 1 + 8 + 4 + 8)
#define MIN_CHUNK (1 + 4 + 8 + 16)

void snap_index_free(snap_index *ix)
{
    free(ix->entries);
    free(ix->chunks);
    ix->entries = NULL;
    ix->chunks = NULL;
}

bool snap_index_parse(const uint8_t *buf, size_t len, snap_index *out, char *err, size_t errlen,
                      size_t *err_off)
{
    memset(out, 0, sizeof(*out));
    *err_off = 0;
    if (len < SNAP_HEADER_SIZE + 8) {
        setf(err, errlen, "index truncated (%zu bytes)", len);
        *err_off = len;
        return false;
    }
    if (memcmp(buf, SNAP_MAGIC, 8) != 0) {
        setf(err, errlen, "bad magic: not a bloomery snapshot index");
        return false;
    }
    if (le_load(buf + len - 8, 8) != XXH3_64bits(buf, len - 8)) {
        setf(err, errlen, "index checksum mismatch (damaged or truncated)");
        *err_off = len - 8;
        return false;
    }
    if (le_load(buf + 8, 2) != SNAP_VERSION || le_load(buf + 10, 2) != 0 ||
        le_load(buf + 12, 4) != SNAP_HEADER_SIZE) {
        setf(err, errlen, "unsupported index version %u", (unsigned)le_load(buf + 8, 2));
        *err_off = 8;
        return false;
    }
    out->seq = le_load(buf + 16, 8);
    out->start_lsn = le_load(buf + 24, 8);
    out->created_ms = (int64_t)le_load(buf + 32, 8);
    out->nkeys = le_load(buf + 40, 8);
    size_t body = len - 8;
    if (out->start_lsn == 0 || out->nkeys > (body - SNAP_HEADER_SIZE) / MIN_ENTRY) {
        setf(err, errlen, "bad header fields");
        *err_off = 24;
        return false;
    }
    /* First pass: count chunks, so both arrays are allocated once. */
    rdr r = {buf, body, SNAP_HEADER_SIZE, false};
    uint64_t total = 0;
    const char *why = NULL;
    size_t at = 0;
    for (uint64_t k = 0; k < out->nkeys && !why; k++) {
        at = r.off;
        const uint8_t *p;
        size_t n;
        rdr_str(&r, &p, &n);
        uint8_t kind = rdr_u8(&r);
        bool readonly = kind & SNAP_KIND_READONLY;
        bool exact = kind & SNAP_KIND_EXACT;
        kind &= (uint8_t) ~(SNAP_KIND_READONLY | SNAP_KIND_EXACT);
        int64_t exp = (int64_t)rdr_u64(&r);
        rdr_str(&r, &p, &n);
        uint64_t nc = rdr_u64(&r);
        if (r.bad)
            why = "entry truncated";
        else if (exact && (kind != SNAP_KIND_WINDOW || n <= SNAP_EXACT_META_LEN))
            why = "bad exact entry";
        else if (exact && (le_load(p + n - SNAP_EXACT_META_LEN, 4) != SNAP_EXACT_MAGIC ||
                           le_load(p + n - SNAP_EXACT_META_LEN + 4, 4) != SNAP_EXACT_VERSION ||
                           le_load(p + n - SNAP_EXACT_META_LEN + 8, 8) == 0))
            why = "bad exact filter meta";
        else if (kind < SNAP_KIND_BLOOM || kind > SNAP_KIND_MAX)
            why = "unknown key kind";
        else if (exp < 0)
            why = "negative expiry";
        else if (n == 0)
            why = "empty image header";
        else if (kind == SNAP_KIND_RESTORE && readonly)
            why = "read-only restore entry";
        else if (kind == SNAP_KIND_RESTORE) {
            if (n % 8 != 0)
                why = "bad restore record list";
            else if (nc != 0)
                why = "bad chunk count";
            for (size_t i = 0; i < n / 8 && !why; i++) {
                uint64_t lsn = le_load(p + 8 * i, 8);
                if (lsn == 0 || lsn >= out->start_lsn ||
                    (i > 0 && lsn <= le_load(p + 8 * (i - 1), 8)))
                    why = "restore record LSNs out of order";
            }
        } else if (nc == 0 || nc > (body - r.off) / MIN_CHUNK)
            why = "bad chunk count";
        for (uint64_t i = 0; i < nc && !why; i++) {
            at = r.off;
            uint8_t where = rdr_u8(&r);
            uint32_t raw = rdr_u32(&r);
            rdr_take(&r, 24, &p);
            if (where == SNAP_CHUNK_INLINE)
                rdr_str(&r, &p, &n);
            if (r.bad)
                why = "chunk record truncated";
            else if (where > SNAP_CHUNK_INLINE)
                why = "bad chunk location";
            else if (raw == 0 || raw > CHUNK_MAX_RAW)
                why = "chunk length out of range";
            else if (where == SNAP_CHUNK_INLINE && n == 0)
                why = "empty inline frame";
        }
        total += nc;
    }
    if (!why && r.off != body) {
        at = r.off;
        why = "unexpected bytes after the last entry";
    }
    if (why) {
        setf(err, errlen, "%s", why);
        *err_off = at;
        return false;
    }
    out->entries = calloc(out->nkeys ? out->nkeys : 1, sizeof(snap_entry));
    out->chunks = calloc(total ? total : 1, sizeof(snap_chunk));
    if (out->entries == NULL || out->chunks == NULL) {
        snap_index_free(out);
        setf(err, errlen, "out of memory");
        return false;
    }
    out->nchunks = total;
    r = (rdr){buf, body, SNAP_HEADER_SIZE, false};
    snap_chunk *c = out->chunks;
    for (uint64_t k = 0; k < out->nkeys; k++) {
        snap_entry *e = &out->entries[k];
        e->off = r.off;
        rdr_str(&r, &e->key, &e->klen);
        e->kind = rdr_u8(&r);
        e->readonly = e->kind & SNAP_KIND_READONLY;
        bool exact = e->kind & SNAP_KIND_EXACT;
        e->kind &= (uint8_t) ~(SNAP_KIND_READONLY | SNAP_KIND_EXACT);
        e->expire_ms = (int64_t)rdr_u64(&r);
        rdr_str(&r, &e->header, &e->hlen);
        if (exact) {
            e->hlen -= SNAP_EXACT_META_LEN;
            e->exact = e->header + e->hlen;
        }
        e->nchunks = rdr_u64(&r);
        e->chunks = c;
        for (uint64_t i = 0; i < e->nchunks; i++, c++) {
            c->off = r.off;
            c->where = rdr_u8(&r);
            c->raw_len = rdr_u32(&r);
            c->checksum = rdr_u64(&r);
            c->hash.lo = rdr_u64(&r);
            c->hash.hi = rdr_u64(&r);
            if (c->where == SNAP_CHUNK_INLINE)
                rdr_str(&r, &c->frame, &c->flen);
        }
    }
    return true;
}

void snap_index_begin(pbuf *b, uint64_t seq, uint64_t start_lsn, int64_t created_ms, uint64_t nkeys)
{
    uint8_t h[SNAP_HEADER_SIZE];
    memcpy(h, SNAP_MAGIC, 8);
    le_store(h + 8, SNAP_VERSION, 2);
    le_store(h + 10, 0, 2);
    le_store(h + 12, SNAP_HEADER_SIZE, 4);
    le_store(h + 16, seq, 8);
    le_store(h + 24, start_lsn, 8);
    le_store(h + 32, (uint64_t)created_ms, 8);
    le_store(h + 40, nkeys, 8);
    pbuf_put(b, h, sizeof(h));
}

void snap_index_entry(pbuf *b, const void *key, size_t klen, uint8_t kind, int64_t expire_ms,
                      const uint8_t *header, size_t hlen, uint64_t nchunks)
{
    pbuf_str(b, key, klen);
    pbuf_u8(b, kind);
    pbuf_u64(b, (uint64_t)expire_ms);
    pbuf_str(b, header, hlen);
    pbuf_u64(b, nchunks);
}

void snap_index_chunk(pbuf *b, const snap_chunk *c)
{
    pbuf_u8(b, c->where);
    pbuf_u32(b, c->raw_len);
    pbuf_u64(b, c->checksum);
    pbuf_u64(b, c->hash.lo);
    pbuf_u64(b, c->hash.hi);
    if (c->where == SNAP_CHUNK_INLINE)
        pbuf_str(b, c->frame, c->flen);
}

void snap_index_finish(pbuf *b)
{
    if (b->failed)
        return;
    pbuf_u64(b, XXH3_64bits(b->p, b->len));
}

uint64_t snap_index_log_from(const snap_index *ix)
{
    uint64_t from = ix->start_lsn;
    for (uint64_t k = 0; k < ix->nkeys; k++) {
        const snap_entry *e = &ix->entries[k];
        if (e->kind == SNAP_KIND_RESTORE && snap_restore_lsn(e, 0) < from)
            from = snap_restore_lsn(e, 0);
    }
    return from;
}

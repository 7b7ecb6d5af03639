/* Write-ahead log format: see wal_format.h and docs/PERSISTENCE.md. */
#include "wal_format.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "bloomery/scalable.h"
#include "bloomery/tdigest.h"

static void setf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

const char *wal_type_name(unsigned type)
{
    switch (type) {
    case WAL_BF_ADD: return "bf-add";
    case WAL_CNT_ADD: return "counting-add";
    case WAL_CNT_DEL: return "counting-del";
    case WAL_PF_ADD: return "pf-add";
    case WAL_CREATE: return "create";
    case WAL_DEL: return "del";
    case WAL_EXPIRE: return "expire";
    case WAL_RENAME: return "rename";
    case WAL_FLUSH: return "flush";
    case WAL_BF_MERGE: return "bf-merge";
    case WAL_PF_MERGE: return "pf-merge";
    case WAL_LOADCHUNK: return "loadchunk";
    case WAL_WIN_ADD: return "window-add";
    case WAL_CF_OP: return "cuckoo-op";
    case WAL_WIN_CREATE: return "window-create";
    case WAL_WIN_ROTATE: return "window-rotate";
    case WAL_CF_CREATE: return "cuckoo-create";
    case WAL_CF_LOADCHUNK: return "cuckoo-loadchunk";
    case WAL_CMS_INCRBY: return "cms-incrby";
    case WAL_TOPK_ADD: return "topk-add";
    case WAL_CMS_CREATE: return "cms-create";
    case WAL_CMS_MERGE: return "cms-merge";
    case WAL_TOPK_CREATE: return "topk-create";
    case WAL_TD_ADD: return "tdigest-add";
    case WAL_TD_CREATE: return "tdigest-create";
    case WAL_TD_RESET: return "tdigest-reset";
    case WAL_TD_MERGE: return "tdigest-merge";
    case WAL_VALUE_FLAGS: return "value-flags";
    case WAL_EXACT_CREATE: return "exact-create";
    case WAL_EXACT_PUT: return "exact-put";
    case WAL_EXACT_DROP: return "exact-drop";
    }
    return NULL;
}

void wal_header_encode(uint8_t out[WAL_HEADER_SIZE], uint64_t first_lsn)
{
    memcpy(out, WAL_MAGIC, 8);
    le_store(out + 8, WAL_VERSION, 2);
    le_store(out + 10, 0, 2);
    le_store(out + 12, WAL_HEADER_SIZE, 4);
    le_store(out + 16, first_lsn, 8);
    le_store(out + 24, XXH3_64bits(out, 24), 8);
}

bool wal_header_decode(const uint8_t *buf, size_t len, uint64_t *first_lsn, char *err,
                       size_t errlen)
{
    if (len < WAL_HEADER_SIZE) {
        setf(err, errlen, "file header truncated (%zu of %d bytes)", len, WAL_HEADER_SIZE);
        return false;
    }
    if (memcmp(buf, WAL_MAGIC, 8) != 0) {
        setf(err, errlen, "bad magic: not a bloomery log file");
        return false;
    }
    if (le_load(buf + 24, 8) != XXH3_64bits(buf, 24)) {
        setf(err, errlen, "file header checksum mismatch");
        return false;
    }
    unsigned version = (unsigned)le_load(buf + 8, 2);
    if (version != WAL_VERSION) {
        setf(err, errlen, "unsupported log format version %u", version);
        return false;
    }
    if (le_load(buf + 10, 2) != 0 || le_load(buf + 12, 4) != WAL_HEADER_SIZE) {
        setf(err, errlen, "unexpected header fields");
        return false;
    }
    *first_lsn = le_load(buf + 16, 8);
    if (*first_lsn == 0) {
        setf(err, errlen, "first LSN is 0");
        return false;
    }
    return true;
}

static uint32_t prefix_check(const uint8_t *rec) { return (uint32_t)XXH3_64bits(rec, 13); }

void wal_record_seal(uint8_t *rec, uint8_t type, uint64_t lsn, size_t len)
{
    le_store(rec, len, 4);
    rec[4] = type;
    le_store(rec + 5, lsn, 8);
    le_store(rec + 13, prefix_check(rec), 4);
    le_store(rec + WAL_PREFIX + len, XXH3_64bits(rec, WAL_PREFIX + len), 8);
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

wal_status wal_record_next(const uint8_t *buf, size_t len, size_t off, wal_record *rec, char *err,
                           size_t errlen)
{
    if (off >= len)
        return WAL_REC_END;
    size_t rem = len - off;
    const uint8_t *p = buf + off;
    if (rem < WAL_PREFIX) {
        setf(err, errlen, "%zu bytes after the last record, less than a record header", rem);
        return WAL_REC_TORN;
    }
    if (le_load(p + 13, 4) != prefix_check(p)) {
        /* A cut append leaves a prefix of the record, perhaps followed by
         * zeros where the file system extended the file; anything else is
         * damage. */
        if (all_zero(p + WAL_PREFIX, rem - WAL_PREFIX)) {
            setf(err, errlen, "incomplete record header at the end of the file");
            return WAL_REC_TORN;
        }
        setf(err, errlen, "record header checksum mismatch");
        return WAL_REC_BAD;
    }
    size_t plen = (size_t)le_load(p, 4);
    if (plen > WAL_MAX_PAYLOAD) {
        setf(err, errlen, "record length %zu exceeds the maximum", plen);
        return WAL_REC_BAD;
    }
    size_t size = wal_record_size(plen);
    if (size > rem) {
        setf(err, errlen, "record of %zu bytes cut at the end of the file (%zu bytes present)",
             size, rem);
        return WAL_REC_TORN;
    }
    if (le_load(p + WAL_PREFIX + plen, 8) != XXH3_64bits(p, WAL_PREFIX + plen)) {
        /* A complete record with a wrong checksum is damage, even the last
         * one: a crash leaves a record shorter than its length, or zeros
         * where its bytes never reached the disk. Zeros from its checksum
         * on, or from a sector boundary inside it, to the end of the file
         * read as torn; a flipped byte does not look like that. */
        size_t z = rem; /* start of the zeros that end the file */
        while (z > 0 && p[z - 1] == 0)
            z--;
        size_t sector = (off + z + WAL_SECTOR - 1) / WAL_SECTOR * WAL_SECTOR - off;
        if (z + WAL_TRAILER <= size || sector < size) {
            setf(err, errlen, "record of %zu bytes ends in zeros (an incomplete write)", size);
            return WAL_REC_TORN;
        }
        setf(err, errlen, "record checksum mismatch");
        return WAL_REC_BAD;
    }
    rec->type = p[4];
    rec->lsn = le_load(p + 5, 8);
    rec->payload = p + WAL_PREFIX;
    rec->len = plen;
    rec->size = size;
    if (wal_type_name(rec->type) == NULL) {
        setf(err, errlen, "unknown record type %u", rec->type);
        return WAL_REC_BAD;
    }
    return WAL_REC_OK;
}

/* ---- payloads ---- */

static bool parse_hashes(rdr *r, wal_op *op, size_t width, char *err, size_t errlen)
{
    op->n = rdr_u32(r);
    if (r->bad || op->n == 0 || (size_t)op->n > (r->len - r->off) / width) {
        setf(err, errlen, "bad item count");
        return false;
    }
    op->items_len = (size_t)op->n * width;
    rdr_take(r, op->items_len, &op->items);
    return true;
}

static bool parse_keylist(rdr *r, wal_op *op, uint32_t min, char *err, size_t errlen)
{
    op->n = rdr_u32(r);
    if (r->bad || op->n < min) {
        setf(err, errlen, "bad key count");
        return false;
    }
    size_t start = r->off;
    for (uint32_t i = 0; i < op->n; i++) {
        const uint8_t *k;
        size_t kl;
        if (!rdr_str(r, &k, &kl)) {
            setf(err, errlen, "key %u truncated", i);
            return false;
        }
        if (i == 0) {
            op->key = k;
            op->klen = kl;
        }
    }
    op->items = r->p + start;
    op->items_len = r->off - start;
    return true;
}

/* n >= 1 items, each a string and a u64 increment. */
static bool parse_items(rdr *r, wal_op *op, char *err, size_t errlen)
{
    op->n = rdr_u32(r);
    if (r->bad || op->n == 0 || (size_t)op->n > (r->len - r->off) / 12) {
        setf(err, errlen, "bad item count");
        return false;
    }
    size_t start = r->off;
    for (uint32_t i = 0; i < op->n; i++) {
        const uint8_t *item;
        size_t len;
        bool got = rdr_str(r, &item, &len);
        rdr_u64(r);
        if (!got || r->bad) {
            setf(err, errlen, "item %u truncated", i);
            return false;
        }
    }
    op->items = r->p + start;
    op->items_len = r->off - start;
    return true;
}

bool wal_op_parse(uint8_t type, const uint8_t *p, size_t len, wal_op *op, char *err, size_t errlen)
{
    memset(op, 0, sizeof(*op));
    op->type = type;
    rdr r = {p, len, 0, false};
    bool ok = true;
    switch (type) {
    case WAL_BF_ADD:
    case WAL_CNT_ADD:
    case WAL_CNT_DEL:
        ok = rdr_str(&r, &op->key, &op->klen) && parse_hashes(&r, op, 16, err, errlen);
        if (ok && type == WAL_BF_ADD)
            rdr_take(&r, ((size_t)op->n + 7) / 8, &op->flags);
        break;
    case WAL_PF_ADD: {
        ok = rdr_str(&r, &op->key, &op->klen);
        uint8_t c = rdr_u8(&r);
        if (ok && c > 1) {
            setf(err, errlen, "bad created flag %u", c);
            return false;
        }
        op->created = c == 1;
        /* PFADD with no elements still creates the key: n may be 0. */
        op->n = rdr_u32(&r);
        if (!r.bad && (size_t)op->n > (r.len - r.off) / 8) {
            setf(err, errlen, "bad item count");
            return false;
        }
        op->items_len = (size_t)op->n * 8;
        rdr_take(&r, op->items_len, &op->items);
        break;
    }
    case WAL_CREATE: {
        ok = rdr_str(&r, &op->key, &op->klen);
        wal_create *c = &op->create;
        c->kind = rdr_u8(&r);
        c->layout = rdr_u8(&r);
        c->expansion = rdr_u32(&r);
        c->capacity = rdr_u64(&r);
        c->error = rdr_f64(&r);
        c->expire_ms = (int64_t)rdr_u64(&r);
        if (r.bad)
            break;
        if (c->kind > WAL_KIND_SCALABLE_SHARE || c->layout > BLOOMERY_LAYOUT_GROWING ||
            c->capacity == 0 || !(c->error > 0 && c->error < 1) || c->expire_ms < 0 ||
            (c->kind == WAL_KIND_COUNTING && (c->expansion != 0 || c->layout != 0))) {
            setf(err, errlen, "bad filter parameters");
            return false;
        }
        break;
    }
    case WAL_DEL:
        ok = parse_keylist(&r, op, 1, err, errlen);
        if (!ok)
            return false;
        break;
    case WAL_EXPIRE:
        ok = rdr_str(&r, &op->key, &op->klen);
        op->when_ms = (int64_t)rdr_u64(&r);
        if (!r.bad && op->when_ms < 0) {
            setf(err, errlen, "negative expiry");
            return false;
        }
        break;
    case WAL_RENAME:
        ok = rdr_str(&r, &op->key, &op->klen) && rdr_str(&r, &op->key2, &op->klen2);
        break;
    case WAL_VALUE_FLAGS:
        ok = rdr_str(&r, &op->key, &op->klen);
        op->value_flags = rdr_u8(&r);
        if (!r.bad && (op->value_flags & ~WAL_FLAGS_KNOWN)) {
            setf(err, errlen, "unknown value flags 0x%x", op->value_flags);
            return false;
        }
        break;
    case WAL_EXACT_CREATE:
        ok = rdr_str(&r, &op->key, &op->klen);
        op->store_id = rdr_u64(&r);
        op->retain_ms = rdr_u64(&r);
        break;
    case WAL_EXACT_DROP:
        ok = rdr_str(&r, &op->key, &op->klen);
        op->store_id = rdr_u64(&r);
        op->period = (int64_t)rdr_u64(&r);
        break;
    case WAL_EXACT_PUT: {
        ok = rdr_str(&r, &op->key, &op->klen);
        op->store_id = rdr_u64(&r);
        op->period = (int64_t)rdr_u64(&r);
        uint8_t f = rdr_u8(&r);
        if (!r.bad && f > 1) {
            setf(err, errlen, "bad in-filter flag %u", f);
            return false;
        }
        op->in_filter = f == 1;
        ok = ok && !r.bad && parse_hashes(&r, op, 16, err, errlen);
        if (!ok && !r.bad)
            return false;
        break;
    }
    case WAL_FLUSH: break;
    case WAL_BF_MERGE:
    case WAL_PF_MERGE: {
        uint8_t c = rdr_u8(&r);
        if (!r.bad && c > 1) {
            setf(err, errlen, "bad created flag %u", c);
            return false;
        }
        op->created = c == 1;
        if (r.bad)
            break;
        if (!parse_keylist(&r, op, type == WAL_BF_MERGE ? 2 : 1, err, errlen))
            return false;
        break;
    }
    case WAL_WIN_ADD:
        ok = rdr_str(&r, &op->key, &op->klen);
        op->when_ms = (int64_t)rdr_u64(&r);
        ok = ok && !r.bad && parse_hashes(&r, op, 16, err, errlen);
        if (!ok && !r.bad)
            return false;
        break;
    case WAL_CF_OP:
        ok = rdr_str(&r, &op->key, &op->klen);
        op->cf_op = rdr_u8(&r);
        op->max_filters = rdr_u32(&r);
        if (!r.bad && (op->cf_op > WAL_CF_DEL || op->max_filters == 0)) {
            setf(err, errlen, "bad cuckoo operation %u or limit %u", op->cf_op, op->max_filters);
            return false;
        }
        ok = ok && !r.bad && parse_hashes(&r, op, 8, err, errlen);
        if (!ok && !r.bad)
            return false;
        break;
    case WAL_WIN_CREATE: {
        ok = rdr_str(&r, &op->key, &op->klen);
        wal_window *w = &op->win;
        w->capacity = rdr_u64(&r);
        w->error = rdr_f64(&r);
        w->window_ms = rdr_u64(&r);
        w->slices = rdr_u32(&r);
        w->start_ms = (int64_t)rdr_u64(&r);
        w->expire_ms = (int64_t)rdr_u64(&r);
        if (r.bad)
            break;
        if (w->capacity == 0 || !(w->error > 0 && w->error < 1) || w->window_ms == 0 ||
            w->slices == 0 || w->slices > 64 || w->expire_ms < 0) {
            setf(err, errlen, "bad window parameters");
            return false;
        }
        break;
    }
    case WAL_WIN_ROTATE: {
        ok = rdr_str(&r, &op->key, &op->klen);
        op->when_ms = (int64_t)rdr_u64(&r);
        uint8_t e = rdr_u8(&r);
        if (!r.bad && e > 1) {
            setf(err, errlen, "bad early flag %u", e);
            return false;
        }
        op->early = e == 1;
        break;
    }
    case WAL_CF_CREATE: {
        ok = rdr_str(&r, &op->key, &op->klen);
        wal_cuckoo *c = &op->cf;
        c->capacity = rdr_u64(&r);
        c->bucket_size = rdr_u32(&r);
        c->max_iterations = rdr_u32(&r);
        c->expansion = rdr_u32(&r);
        c->fingerprint_bits = rdr_u32(&r);
        if (r.bad)
            break;
        if (c->capacity == 0 || c->bucket_size == 0 || c->bucket_size > 255 ||
            c->max_iterations == 0 || c->max_iterations > 65535 || c->expansion > 32768 ||
            c->fingerprint_bits < 8 || c->fingerprint_bits > 32) {
            setf(err, errlen, "bad cuckoo filter parameters");
            return false;
        }
        break;
    }
    case WAL_CMS_INCRBY:
    case WAL_TOPK_ADD:
        ok = rdr_str(&r, &op->key, &op->klen);
        if (ok && !parse_items(&r, op, err, errlen))
            return false;
        break;
    case WAL_CMS_CREATE:
        ok = rdr_str(&r, &op->key, &op->klen);
        op->cms.width = rdr_u64(&r);
        op->cms.depth = rdr_u64(&r);
        if (!r.bad && (op->cms.width == 0 || op->cms.depth == 0 ||
                       op->cms.width > UINT64_MAX / op->cms.depth)) {
            setf(err, errlen, "bad sketch dimensions");
            return false;
        }
        break;
    case WAL_CMS_MERGE:
        if (!parse_keylist(&r, op, 2, err, errlen))
            return false;
        if ((size_t)(op->n - 1) > (r.len - r.off) / 8) {
            setf(err, errlen, "weights truncated");
            return false;
        }
        rdr_take(&r, (size_t)(op->n - 1) * 8, &op->weights);
        break;
    case WAL_TOPK_CREATE: {
        ok = rdr_str(&r, &op->key, &op->klen);
        wal_topk *t = &op->topk;
        t->k = rdr_u32(&r);
        t->width = rdr_u32(&r);
        t->depth = rdr_u32(&r);
        t->decay = rdr_f64(&r);
        t->seed = rdr_u64(&r);
        if (!r.bad &&
            (t->k == 0 || t->width == 0 || t->depth == 0 || !(t->decay > 0 && t->decay <= 1))) {
            setf(err, errlen, "bad top-k parameters");
            return false;
        }
        break;
    }
    case WAL_LOADCHUNK:
    case WAL_CF_LOADCHUNK: {
        ok = rdr_str(&r, &op->key, &op->klen);
        op->iter = (int64_t)rdr_u64(&r);
        uint64_t dl = rdr_u64(&r);
        if (!r.bad && dl > r.len - r.off) {
            setf(err, errlen, "chunk data truncated");
            return false;
        }
        op->dlen = (size_t)dl;
        rdr_take(&r, op->dlen, &op->data);
        break;
    }
    case WAL_TD_ADD:
        ok = rdr_str(&r, &op->key, &op->klen);
        ok = ok && !r.bad && parse_hashes(&r, op, 8, err, errlen);
        if (!ok && !r.bad)
            return false;
        /* The library refuses what is not finite: so does the log. */
        for (uint32_t i = 0; ok && !r.bad && i < op->n; i++) {
            uint64_t bits = le_load(op->items + 8 * (size_t)i, 8);
            double v;
            memcpy(&v, &bits, 8);
            if (!isfinite(v)) {
                setf(err, errlen, "value %u is not finite", i);
                return false;
            }
        }
        break;
    case WAL_TD_CREATE:
        ok = rdr_str(&r, &op->key, &op->klen);
        op->compression = rdr_u64(&r);
        if (!r.bad && (op->compression == 0 || op->compression > TDIGEST_MAX_COMPRESSION)) {
            setf(err, errlen, "bad compression %llu", (unsigned long long)op->compression);
            return false;
        }
        break;
    case WAL_TD_RESET: ok = rdr_str(&r, &op->key, &op->klen); break;
    case WAL_TD_MERGE: {
        op->compression = rdr_u64(&r);
        uint8_t o = rdr_u8(&r);
        if (r.bad)
            break;
        if (op->compression == 0 || op->compression > TDIGEST_MAX_COMPRESSION || o > 1) {
            setf(err, errlen, "bad compression %llu or override flag %u",
                 (unsigned long long)op->compression, o);
            return false;
        }
        op->override = o == 1;
        if (!parse_keylist(&r, op, 2, err, errlen))
            return false;
        break;
    }
    default: setf(err, errlen, "unknown record type %u", type); return false;
    }
    if (!ok || r.bad) {
        setf(err, errlen, "%s payload truncated", wal_type_name(type));
        return false;
    }
    if (r.off != len) {
        setf(err, errlen, "%zu unexpected bytes after the %s payload", len - r.off,
             wal_type_name(type));
        return false;
    }
    return true;
}

bool wal_op_next_key(const wal_op *op, size_t *cursor, const uint8_t **key, size_t *klen)
{
    if (*cursor >= op->items_len)
        return false;
    rdr r = {op->items, op->items_len, *cursor, false};
    if (!rdr_str(&r, key, klen))
        return false;
    *cursor = r.off;
    return true;
}

bool wal_op_next_item(const wal_op *op, size_t *cursor, const uint8_t **item, size_t *len,
                      uint64_t *incr)
{
    if (*cursor >= op->items_len)
        return false;
    rdr r = {op->items, op->items_len, *cursor, false};
    if (!rdr_str(&r, item, len))
        return false;
    *incr = rdr_u64(&r);
    if (r.bad)
        return false;
    *cursor = r.off;
    return true;
}

int64_t wal_op_weight(const wal_op *op, uint32_t i)
{
    return (int64_t)le_load(op->weights + 8 * (size_t)i, 8);
}

/* ---- encoders ---- */

/* n bytes at the end of b, for the caller to fill; NULL when b cannot grow. */
static uint8_t *pbuf_take(pbuf *b, size_t n)
{
    if (!pbuf_reserve(b, n))
        return NULL;
    uint8_t *p = b->p + b->len;
    b->len += n;
    return p;
}

uint8_t *wal_enc_hashes_slots(pbuf *b, const void *key, size_t klen, uint32_t n, bool with_new)
{
    pbuf_str(b, key, klen);
    pbuf_u32(b, n);
    size_t nb = with_new ? ((size_t)n + 7) / 8 : 0;
    uint8_t *slots = pbuf_take(b, (size_t)n * 16 + nb);
    if (slots)
        memset(slots + (size_t)n * 16, 0, nb);
    return slots;
}

void wal_enc_hashes(pbuf *b, const void *key, size_t klen, const uint64_t *hashes, uint32_t n,
                    const uint8_t *isnew)
{
    uint8_t *s = wal_enc_hashes_slots(b, key, klen, n, isnew != NULL);
    if (s == NULL)
        return;
    for (uint32_t i = 0; i < n; i++) {
        le_store(s + 16 * (size_t)i, hashes[2 * i], 8);
        le_store(s + 16 * (size_t)i + 8, hashes[2 * i + 1], 8);
        if (isnew && isnew[i])
            wal_slot_set_new(s, n, i);
    }
}

uint8_t *wal_enc_pf_add_slots(pbuf *b, const void *key, size_t klen, bool created, uint32_t n)
{
    pbuf_str(b, key, klen);
    pbuf_u8(b, created ? 1 : 0);
    pbuf_u32(b, n);
    return pbuf_take(b, (size_t)n * 8);
}

void wal_enc_pf_add(pbuf *b, const void *key, size_t klen, bool created, const uint64_t *h,
                    uint32_t n)
{
    uint8_t *s = wal_enc_pf_add_slots(b, key, klen, created, n);
    for (uint32_t i = 0; s && i < n; i++)
        le_store(s + 8 * (size_t)i, h[i], 8);
}

void wal_enc_create(pbuf *b, const void *key, size_t klen, const wal_create *c)
{
    pbuf_str(b, key, klen);
    pbuf_u8(b, c->kind);
    pbuf_u8(b, c->layout);
    pbuf_u32(b, c->expansion);
    pbuf_u64(b, c->capacity);
    pbuf_f64(b, c->error);
    pbuf_u64(b, (uint64_t)c->expire_ms);
}

void wal_enc_keys(pbuf *b, int created, const char *const *keys, const size_t *lens, uint32_t n)
{
    if (created >= 0)
        pbuf_u8(b, created ? 1 : 0);
    pbuf_u32(b, n);
    for (uint32_t i = 0; i < n; i++)
        pbuf_str(b, keys[i], lens[i]);
}

void wal_enc_expire(pbuf *b, const void *key, size_t klen, int64_t when_ms)
{
    pbuf_str(b, key, klen);
    pbuf_u64(b, (uint64_t)when_ms);
}

void wal_enc_value_flags(pbuf *b, const void *key, size_t klen, uint8_t flags)
{
    pbuf_str(b, key, klen);
    pbuf_u8(b, flags);
}

void wal_enc_rename(pbuf *b, const void *src, size_t slen, const void *dst, size_t dlen)
{
    pbuf_str(b, src, slen);
    pbuf_str(b, dst, dlen);
}

void wal_enc_loadchunk(pbuf *b, const void *key, size_t klen, int64_t iter, const void *data,
                       size_t dlen)
{
    pbuf_str(b, key, klen);
    pbuf_u64(b, (uint64_t)iter);
    pbuf_u64(b, dlen);
    pbuf_put(b, data, dlen);
}

void wal_enc_win_create(pbuf *b, const void *key, size_t klen, const wal_window *w)
{
    pbuf_str(b, key, klen);
    pbuf_u64(b, w->capacity);
    pbuf_f64(b, w->error);
    pbuf_u64(b, w->window_ms);
    pbuf_u32(b, w->slices);
    pbuf_u64(b, (uint64_t)w->start_ms);
    pbuf_u64(b, (uint64_t)w->expire_ms);
}

uint8_t *wal_enc_win_add_slots(pbuf *b, const void *key, size_t klen, int64_t now_ms, uint32_t n)
{
    pbuf_str(b, key, klen);
    pbuf_u64(b, (uint64_t)now_ms);
    pbuf_u32(b, n);
    return pbuf_take(b, (size_t)n * 16);
}

void wal_enc_win_add(pbuf *b, const void *key, size_t klen, int64_t now_ms, const uint64_t *h,
                     uint32_t n)
{
    uint8_t *s = wal_enc_win_add_slots(b, key, klen, now_ms, n);
    for (uint32_t i = 0; s && i < 2 * n; i++)
        le_store(s + 8 * (size_t)i, h[i], 8);
}

void wal_enc_win_rotate(pbuf *b, const void *key, size_t klen, int64_t start_ms, bool early)
{
    pbuf_str(b, key, klen);
    pbuf_u64(b, (uint64_t)start_ms);
    pbuf_u8(b, early ? 1 : 0);
}

void wal_enc_exact_create(pbuf *b, const void *key, size_t klen, uint64_t id, uint64_t retain_ms)
{
    pbuf_str(b, key, klen);
    pbuf_u64(b, id);
    pbuf_u64(b, retain_ms);
}

uint8_t *wal_enc_exact_put_slots(pbuf *b, const void *key, size_t klen, uint64_t id, int64_t period,
                                 bool in_filter, uint32_t n)
{
    pbuf_str(b, key, klen);
    pbuf_u64(b, id);
    pbuf_u64(b, (uint64_t)period);
    pbuf_u8(b, in_filter ? 1 : 0);
    pbuf_u32(b, n);
    return pbuf_take(b, (size_t)n * 16);
}

void wal_enc_exact_drop(pbuf *b, const void *key, size_t klen, uint64_t id, int64_t period)
{
    pbuf_str(b, key, klen);
    pbuf_u64(b, id);
    pbuf_u64(b, (uint64_t)period);
}

void wal_enc_cf_create(pbuf *b, const void *key, size_t klen, const wal_cuckoo *c)
{
    pbuf_str(b, key, klen);
    pbuf_u64(b, c->capacity);
    pbuf_u32(b, c->bucket_size);
    pbuf_u32(b, c->max_iterations);
    pbuf_u32(b, c->expansion);
    pbuf_u32(b, c->fingerprint_bits);
}

void wal_enc_td_create(pbuf *b, const void *key, size_t klen, uint64_t compression)
{
    pbuf_str(b, key, klen);
    pbuf_u64(b, compression);
}

void wal_enc_td_add(pbuf *b, const void *key, size_t klen, const double *v, uint32_t n)
{
    pbuf_str(b, key, klen);
    pbuf_u32(b, n);
    for (uint32_t i = 0; i < n; i++)
        pbuf_f64(b, v[i]);
}

void wal_enc_td_merge(pbuf *b, uint64_t compression, bool override, const char *const *keys,
                      const size_t *lens, uint32_t n)
{
    pbuf_u64(b, compression);
    pbuf_u8(b, override ? 1 : 0);
    wal_enc_keys(b, -1, keys, lens, n);
}

void wal_enc_cf_op(pbuf *b, const void *key, size_t klen, uint8_t op, uint32_t max_filters,
                   const uint64_t *h, uint32_t n)
{
    pbuf_str(b, key, klen);
    pbuf_u8(b, op);
    pbuf_u32(b, max_filters);
    pbuf_u32(b, n);
    for (uint32_t i = 0; i < n; i++)
        pbuf_u64(b, h[i]);
}

void wal_enc_items(pbuf *b, const void *key, size_t klen, const char *const *items,
                   const size_t *lens, const uint64_t *incrs, uint32_t n)
{
    pbuf_str(b, key, klen);
    pbuf_u32(b, n);
    for (uint32_t i = 0; i < n; i++) {
        pbuf_str(b, items[i], lens[i]);
        pbuf_u64(b, incrs[i]);
    }
}

void wal_enc_cms_create(pbuf *b, const void *key, size_t klen, const wal_cms *c)
{
    pbuf_str(b, key, klen);
    pbuf_u64(b, c->width);
    pbuf_u64(b, c->depth);
}

void wal_enc_cms_merge(pbuf *b, const char *const *keys, const size_t *lens, uint32_t n,
                       const int64_t *weights)
{
    wal_enc_keys(b, -1, keys, lens, n);
    for (uint32_t i = 0; i + 1 < n; i++)
        pbuf_u64(b, (uint64_t)weights[i]);
}

void wal_enc_topk_create(pbuf *b, const void *key, size_t klen, const wal_topk *t)
{
    pbuf_str(b, key, klen);
    pbuf_u32(b, t->k);
    pbuf_u32(b, t->width);
    pbuf_u32(b, t->depth);
    pbuf_f64(b, t->decay);
    pbuf_u64(b, t->seed);
}

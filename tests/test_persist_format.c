/* Persistence formats (src/persist): log records, snapshot index and chunk
 * files round-trip; every single-byte change and every truncation of an
 * index or a log is detected (refused, or reported as a torn tail only
 * where a crash could have cut the last append), never misread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunk_format.h"
#include "snapshot_index.h"
#include "testutil.h"
#include "wal_format.h"

/* ---- log ---- */

/* A log file with one record of each type; offsets[i] is record i's start. */
static uint8_t *make_log(size_t *len, size_t *offsets, size_t *nrec)
{
    pbuf file = {0};
    uint8_t h[WAL_HEADER_SIZE];
    wal_header_encode(h, 100);
    pbuf_put(&file, h, sizeof(h));
    uint64_t lsn = 100;
    size_t n = 0;
    for (int t = 0; t < 12; t++) {
        pbuf p = {0};
        uint64_t hashes[6] = {1, 2, 3, 4, 5, 6};
        uint8_t isnew[3] = {1, 0, 1};
        const char *keys[3] = {"dest", "a", "b"};
        size_t lens[3] = {4, 1, 1};
        wal_create c = {WAL_KIND_SCALABLE, 1, 2, 1000, 0.01, 1700000000000LL};
        uint8_t type;
        switch (t) {
        case 0:
            type = WAL_BF_ADD;
            wal_enc_hashes(&p, "bf", 2, hashes, 3, isnew);
            break;
        case 1:
            type = WAL_CNT_ADD;
            wal_enc_hashes(&p, "cnt", 3, hashes, 2, NULL);
            break;
        case 2:
            type = WAL_CNT_DEL;
            wal_enc_hashes(&p, "cnt", 3, hashes, 1, NULL);
            break;
        case 3:
            type = WAL_PF_ADD;
            wal_enc_pf_add(&p, "hll", 3, true, hashes, 4);
            break;
        case 4:
            type = WAL_CREATE;
            wal_enc_create(&p, "bf", 2, &c);
            break;
        case 5:
            type = WAL_DEL;
            wal_enc_keys(&p, -1, keys, lens, 3);
            break;
        case 6:
            type = WAL_EXPIRE;
            wal_enc_expire(&p, "bf", 2, 1800000000000LL);
            break;
        case 7:
            type = WAL_RENAME;
            wal_enc_rename(&p, "a", 1, "bcd", 3);
            break;
        case 8: type = WAL_FLUSH; break;
        case 9:
            type = WAL_BF_MERGE;
            wal_enc_keys(&p, 1, keys, lens, 3);
            break;
        case 10:
            type = WAL_PF_MERGE;
            wal_enc_keys(&p, 0, keys, lens, 2);
            break;
        default:
            type = WAL_LOADCHUNK;
            wal_enc_loadchunk(&p, "bf", 2, 7, "chunkdata", 9);
            break;
        }
        assert_false(p.failed);
        size_t at = file.len;
        offsets[n++] = at;
        pbuf_reserve(&file, wal_record_size(p.len));
        if (p.len)
            memcpy(file.p + at + WAL_PREFIX, p.p, p.len);
        wal_record_seal(file.p + at, type, lsn++, p.len);
        file.len += wal_record_size(p.len);
        free(p.p);
    }
    *len = file.len;
    *nrec = n;
    return file.p;
}

typedef struct scan_result {
    size_t ok;      /* records read and parsed */
    wal_status end; /* END, TORN or BAD */
    bool header_bad;
    bool lsn_bad;
} scan_result;

static scan_result scan(const uint8_t *buf, size_t len)
{
    scan_result s = {0, WAL_REC_END, false, false};
    char err[256];
    uint64_t first;
    if (!wal_header_decode(buf, len, &first, err, sizeof(err))) {
        s.header_bad = true;
        return s;
    }
    size_t off = WAL_HEADER_SIZE;
    uint64_t want = first;
    for (;;) {
        wal_record rec;
        wal_status st = wal_record_next(buf, len, off, &rec, err, sizeof(err));
        if (st != WAL_REC_OK) {
            s.end = st;
            return s;
        }
        wal_op op;
        if (!wal_op_parse(rec.type, rec.payload, rec.len, &op, err, sizeof(err))) {
            s.end = WAL_REC_BAD;
            return s;
        }
        if (rec.lsn != want++) {
            s.lsn_bad = true;
            return s;
        }
        s.ok++;
        off += rec.size;
    }
}

static void test_log_round_trip(void **state)
{
    (void)state;
    size_t len, offs[16], n;
    uint8_t *buf = make_log(&len, offs, &n);
    scan_result s = scan(buf, len);
    assert_false(s.header_bad);
    assert_int_equal(s.end, WAL_REC_END);
    assert_int_equal(s.ok, n);

    /* Field values survive. */
    wal_record rec;
    char err[128];
    wal_op op;
    assert_int_equal(wal_record_next(buf, len, offs[0], &rec, err, sizeof(err)), WAL_REC_OK);
    assert_int_equal(rec.lsn, 100);
    assert_true(wal_op_parse(rec.type, rec.payload, rec.len, &op, err, sizeof(err)));
    assert_int_equal(op.n, 3);
    assert_memory_equal(op.key, "bf", 2);
    assert_int_equal(op.flags[0], 0x5);
    assert_int_equal(le_load(op.items + 16, 8), 3);
    assert_int_equal(wal_record_next(buf, len, offs[4], &rec, err, sizeof(err)), WAL_REC_OK);
    assert_true(wal_op_parse(rec.type, rec.payload, rec.len, &op, err, sizeof(err)));
    assert_int_equal(op.create.capacity, 1000);
    assert_true(op.create.error == 0.01);
    assert_int_equal(op.create.expire_ms, 1700000000000LL);
    assert_int_equal(wal_record_next(buf, len, offs[9], &rec, err, sizeof(err)), WAL_REC_OK);
    assert_true(wal_op_parse(rec.type, rec.payload, rec.len, &op, err, sizeof(err)));
    assert_true(op.created);
    size_t cur = 0, kl;
    const uint8_t *k;
    int nk = 0;
    while (wal_op_next_key(&op, &cur, &k, &kl))
        nk++;
    assert_int_equal(nk, 3);
    assert_int_equal(wal_record_next(buf, len, offs[11], &rec, err, sizeof(err)), WAL_REC_OK);
    assert_true(wal_op_parse(rec.type, rec.payload, rec.len, &op, err, sizeof(err)));
    assert_int_equal(op.iter, 7);
    assert_memory_equal(op.data, "chunkdata", 9);
    free(buf);
}

/* Every byte flip is refused, the last record's too: a complete record
 * with a wrong checksum is damage, never a torn tail. */
static void test_log_every_flip(void **state)
{
    (void)state;
    size_t len, offs[16], n;
    uint8_t *buf = make_log(&len, offs, &n);
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            buf[i] ^= (uint8_t)(1u << bit);
            scan_result s = scan(buf, len);
            bool detected = s.header_bad || s.lsn_bad || s.end == WAL_REC_BAD;
            if (!detected)
                fail_msg("flip at byte %zu bit %d not detected (ok=%zu end=%d)", i, bit, s.ok,
                         s.end);
            buf[i] ^= (uint8_t)(1u << bit);
        }
    }
    free(buf);
}

/* Every truncation reads the records before the cut and reports the cut
 * record as torn. */
static void test_log_every_truncation(void **state)
{
    (void)state;
    size_t len, offs[16], n;
    uint8_t *buf = make_log(&len, offs, &n);
    for (size_t cut = 0; cut < len; cut++) {
        scan_result s = scan(buf, cut);
        if (cut < WAL_HEADER_SIZE) {
            assert_true(s.header_bad);
            continue;
        }
        size_t whole = 0;
        while (whole < n &&
               offs[whole] + (whole + 1 < n ? offs[whole + 1] - offs[whole] : len - offs[whole]) <=
                   cut)
            whole++;
        assert_int_equal(s.ok, whole);
        bool at_boundary = cut == WAL_HEADER_SIZE || (whole < n && cut == offs[whole]);
        assert_int_equal(s.end, at_boundary ? WAL_REC_END : WAL_REC_TORN);
    }
    free(buf);
}

/* A zero-filled tail (a file system extended the file but the data never
 * arrived) is a torn tail, not damage. */
static void test_log_zero_tail(void **state)
{
    (void)state;
    size_t len, offs[16], n;
    uint8_t *buf = make_log(&len, offs, &n);
    uint8_t *big = calloc(1, len + 4096);
    memcpy(big, buf, len);
    scan_result s = scan(big, len + 4096);
    assert_int_equal(s.ok, n);
    assert_int_equal(s.end, WAL_REC_TORN);
    /* The last record half written, the rest of its block zeros. */
    memset(big + offs[n - 1] + 20, 0, len - offs[n - 1] - 20);
    s = scan(big, len + 4096);
    assert_int_equal(s.ok, n - 1);
    assert_int_equal(s.end, WAL_REC_TORN);
    free(big);
    free(buf);
}

static void test_log_payload_checks(void **state)
{
    (void)state;
    char err[128];
    wal_op op;
    /* Trailing bytes, short counts, bad parameters are refused. */
    pbuf p = {0};
    uint64_t h[2] = {1, 2};
    wal_enc_hashes(&p, "k", 1, h, 1, NULL);
    pbuf_u8(&p, 0);
    assert_false(wal_op_parse(WAL_CNT_ADD, p.p, p.len, &op, err, sizeof(err)));
    assert_true(wal_op_parse(WAL_CNT_ADD, p.p, p.len - 1, &op, err, sizeof(err)));
    assert_false(wal_op_parse(WAL_CNT_ADD, p.p, p.len - 2, &op, err, sizeof(err)));
    free(p.p);
    p = (pbuf){0};
    wal_create c = {WAL_KIND_COUNTING, 0, 2, 10, 0.01, 0};
    wal_enc_create(&p, "k", 1, &c);
    assert_false(wal_op_parse(WAL_CREATE, p.p, p.len, &op, err, sizeof(err)));
    free(p.p);
    /* Scalable kinds: 0 (earlier versions' schedule) and 2; nothing above. */
    for (uint8_t kind = 0; kind <= 3; kind++) {
        if (kind == WAL_KIND_COUNTING)
            continue;
        p = (pbuf){0};
        c = (wal_create){kind, 0, 2, 10, 0.01, 0};
        wal_enc_create(&p, "k", 1, &c);
        bool ok = wal_op_parse(WAL_CREATE, p.p, p.len, &op, err, sizeof(err));
        assert_int_equal(ok, kind != 3);
        if (ok)
            assert_int_equal(op.create.kind, kind);
        free(p.p);
    }
    assert_false(wal_op_parse(99, NULL, 0, &op, err, sizeof(err)));
    assert_true(wal_op_parse(WAL_FLUSH, NULL, 0, &op, err, sizeof(err)));
}

/* Window and cuckoo records round-trip field by field; bad parameters are
 * refused. */
static void test_log_window_cuckoo(void **state)
{
    (void)state;
    char err[128];
    wal_op op;
    pbuf p = {0};
    wal_window w = {50000000, 0.001, 86400000, 4, 1700000000123LL, 0};
    wal_enc_win_create(&p, "clicks", 6, &w);
    assert_true(wal_op_parse(WAL_WIN_CREATE, p.p, p.len, &op, err, sizeof(err)));
    assert_int_equal(op.klen, 6);
    assert_int_equal(op.win.capacity, 50000000);
    assert_true(op.win.error == 0.001);
    assert_int_equal(op.win.window_ms, 86400000);
    assert_int_equal(op.win.slices, 4);
    assert_int_equal(op.win.start_ms, 1700000000123LL);
    assert_false(wal_op_parse(WAL_WIN_CREATE, p.p, p.len - 1, &op, err, sizeof(err)));
    free(p.p);
    p = (pbuf){0};
    w.slices = 65;
    wal_enc_win_create(&p, "k", 1, &w);
    assert_false(wal_op_parse(WAL_WIN_CREATE, p.p, p.len, &op, err, sizeof(err)));
    free(p.p);

    p = (pbuf){0};
    uint64_t h[4] = {1, 2, 3, 4};
    wal_enc_win_add(&p, "k", 1, 42, h, 2);
    assert_true(wal_op_parse(WAL_WIN_ADD, p.p, p.len, &op, err, sizeof(err)));
    assert_int_equal(op.when_ms, 42);
    assert_int_equal(op.n, 2);
    assert_int_equal(le_load(op.items + 24, 8), 4);
    assert_false(wal_op_parse(WAL_WIN_ADD, p.p, p.len - 8, &op, err, sizeof(err)));
    free(p.p);

    p = (pbuf){0};
    wal_enc_win_rotate(&p, "k", 1, 1234, true);
    assert_true(wal_op_parse(WAL_WIN_ROTATE, p.p, p.len, &op, err, sizeof(err)));
    assert_int_equal(op.when_ms, 1234);
    assert_true(op.early);
    p.p[p.len - 1] = 2;
    assert_false(wal_op_parse(WAL_WIN_ROTATE, p.p, p.len, &op, err, sizeof(err)));
    free(p.p);

    p = (pbuf){0};
    wal_cuckoo c = {1024, 4, 500, 1, 12};
    wal_enc_cf_create(&p, "cf", 2, &c);
    assert_true(wal_op_parse(WAL_CF_CREATE, p.p, p.len, &op, err, sizeof(err)));
    assert_int_equal(op.cf.capacity, 1024);
    assert_int_equal(op.cf.bucket_size, 4);
    assert_int_equal(op.cf.max_iterations, 500);
    assert_int_equal(op.cf.expansion, 1);
    assert_int_equal(op.cf.fingerprint_bits, 12);
    free(p.p);
    p = (pbuf){0};
    c.fingerprint_bits = 7;
    wal_enc_cf_create(&p, "cf", 2, &c);
    assert_false(wal_op_parse(WAL_CF_CREATE, p.p, p.len, &op, err, sizeof(err)));
    free(p.p);

    p = (pbuf){0};
    wal_enc_cf_op(&p, "cf", 2, WAL_CF_DEL, 32, h, 3);
    assert_true(wal_op_parse(WAL_CF_OP, p.p, p.len, &op, err, sizeof(err)));
    assert_int_equal(op.cf_op, WAL_CF_DEL);
    assert_int_equal(op.max_filters, 32);
    assert_int_equal(op.n, 3);
    assert_int_equal(le_load(op.items + 16, 8), 3);
    free(p.p);
    p = (pbuf){0};
    wal_enc_cf_op(&p, "cf", 2, 3, 32, h, 1);
    assert_false(wal_op_parse(WAL_CF_OP, p.p, p.len, &op, err, sizeof(err)));
    free(p.p);

    p = (pbuf){0};
    wal_enc_loadchunk(&p, "cf", 2, 1, "hdr", 3);
    assert_true(wal_op_parse(WAL_CF_LOADCHUNK, p.p, p.len, &op, err, sizeof(err)));
    assert_int_equal(op.dlen, 3);
    free(p.p);
}

static void test_log_cms_topk(void **state)
{
    (void)state;
    char err[128];
    wal_op op;
    pbuf p = {0};
    const char *items[] = {"a", "", "bin\0ary"};
    size_t lens[] = {1, 0, 7};
    uint64_t incrs[] = {5, 0, UINT64_MAX};
    wal_enc_items(&p, "k", 1, items, lens, incrs, 3);
    for (int type = WAL_CMS_INCRBY; type <= WAL_TOPK_ADD; type++) {
        assert_true(wal_op_parse((uint8_t)type, p.p, p.len, &op, err, sizeof(err)));
        assert_int_equal(op.n, 3);
        size_t cur = 0, len;
        const uint8_t *item;
        uint64_t incr;
        for (int i = 0; i < 3; i++) {
            assert_true(wal_op_next_item(&op, &cur, &item, &len, &incr));
            assert_int_equal(len, lens[i]);
            assert_memory_equal(item, items[i], len);
            assert_true(incr == incrs[i]);
        }
        assert_false(wal_op_next_item(&op, &cur, &item, &len, &incr));
        /* Every cut is refused, and so is a count beyond the items. */
        for (size_t cut = 0; cut < p.len; cut++)
            assert_false(wal_op_parse((uint8_t)type, p.p, cut, &op, err, sizeof(err)));
    }
    p.p[5] = 4; /* n = 4 */
    assert_false(wal_op_parse(WAL_CMS_INCRBY, p.p, p.len, &op, err, sizeof(err)));
    free(p.p);

    p = (pbuf){0};
    wal_cms c = {2000, 7};
    wal_enc_cms_create(&p, "c", 1, &c);
    assert_true(wal_op_parse(WAL_CMS_CREATE, p.p, p.len, &op, err, sizeof(err)));
    assert_int_equal(op.cms.width, 2000);
    assert_int_equal(op.cms.depth, 7);
    free(p.p);
    p = (pbuf){0};
    c.depth = 0;
    wal_enc_cms_create(&p, "c", 1, &c);
    assert_false(wal_op_parse(WAL_CMS_CREATE, p.p, p.len, &op, err, sizeof(err)));
    free(p.p);

    p = (pbuf){0};
    const char *keys[] = {"dst", "s1", "s2"};
    size_t klens[] = {3, 2, 2};
    int64_t weights[] = {-3, 7};
    wal_enc_cms_merge(&p, keys, klens, 3, weights);
    assert_true(wal_op_parse(WAL_CMS_MERGE, p.p, p.len, &op, err, sizeof(err)));
    assert_int_equal(op.n, 3);
    assert_int_equal(op.klen, 3);
    assert_true(wal_op_weight(&op, 0) == -3);
    assert_true(wal_op_weight(&op, 1) == 7);
    assert_false(wal_op_parse(WAL_CMS_MERGE, p.p, p.len - 1, &op, err, sizeof(err)));
    free(p.p);

    p = (pbuf){0};
    wal_topk t = {10, 8, 7, 0.9, 12345};
    wal_enc_topk_create(&p, "t", 1, &t);
    assert_true(wal_op_parse(WAL_TOPK_CREATE, p.p, p.len, &op, err, sizeof(err)));
    assert_int_equal(op.topk.k, 10);
    assert_int_equal(op.topk.width, 8);
    assert_int_equal(op.topk.depth, 7);
    assert_true(op.topk.decay == 0.9);
    assert_int_equal(op.topk.seed, 12345);
    assert_false(wal_op_parse(WAL_TOPK_CREATE, p.p, p.len - 1, &op, err, sizeof(err)));
    free(p.p);
    p = (pbuf){0};
    t.decay = 1.5;
    wal_enc_topk_create(&p, "t", 1, &t);
    assert_false(wal_op_parse(WAL_TOPK_CREATE, p.p, p.len, &op, err, sizeof(err)));
    free(p.p);
}

/* ---- snapshot index ---- */

static uint8_t *make_index(size_t *len, uint8_t **frame_out)
{
    pbuf b = {0};
    static const uint8_t zeros[4096];
    uint8_t *frame;
    size_t flen;
    assert_true(chunk_compress(zeros, sizeof(zeros), 1, &frame, &flen));
    snap_index_begin(&b, 7, 1234, 1700000000000LL, 3);
    const uint8_t hdr[20] = "image header bytes!";
    snap_index_entry(&b, "alpha", 5, SNAP_KIND_BLOOM, 0, hdr, sizeof(hdr), 2);
    snap_chunk c = {SNAP_CHUNK_FILE, 2 << 20, 0x1111, {1, 2}, NULL, 0, 0};
    snap_index_chunk(&b, &c);
    c = (snap_chunk){SNAP_CHUNK_INLINE,
                     sizeof(zeros),
                     0x2222,
                     chunk_hash_of(zeros, sizeof(zeros)),
                     frame,
                     flen,
                     0};
    snap_index_chunk(&b, &c);
    snap_index_entry(&b, "", 0, SNAP_KIND_HLL, 1800000000000LL, hdr, 4, 1);
    c = (snap_chunk){SNAP_CHUNK_FILE, 12304, 0x3333, {5, 6}, NULL, 0, 0};
    snap_index_chunk(&b, &c);
    snap_index_entry(&b, "cnt", 3, SNAP_KIND_COUNTING, 0, hdr, 8, 1);
    snap_index_chunk(&b, &c);
    snap_index_finish(&b);
    assert_false(b.failed);
    *len = b.len;
    *frame_out = frame;
    return b.p;
}

static void test_index_round_trip(void **state)
{
    (void)state;
    size_t len, off;
    uint8_t *frame;
    uint8_t *buf = make_index(&len, &frame);
    snap_index ix;
    char err[128];
    assert_true(snap_index_parse(buf, len, &ix, err, sizeof(err), &off));
    assert_int_equal(ix.seq, 7);
    assert_int_equal(ix.start_lsn, 1234);
    assert_int_equal(ix.nkeys, 3);
    assert_int_equal(ix.nchunks, 4);
    assert_memory_equal(ix.entries[0].key, "alpha", 5);
    assert_int_equal(ix.entries[0].nchunks, 2);
    assert_int_equal(ix.entries[0].chunks[1].where, SNAP_CHUNK_INLINE);
    assert_int_equal(ix.entries[1].klen, 0);
    assert_int_equal(ix.entries[1].expire_ms, 1800000000000LL);
    assert_int_equal(ix.entries[2].chunks[0].checksum, 0x3333);
    /* The inline frame decodes to its content. */
    snap_chunk *c = &ix.entries[0].chunks[1];
    uint8_t *out = malloc(c->raw_len);
    assert_true(chunk_frame_decode(c->frame, c->flen, c->raw_len, c->hash, out, err, sizeof(err)));
    free(out);
    snap_index_free(&ix);
    free(frame);
    free(buf);
}

static void test_index_every_flip_and_truncation(void **state)
{
    (void)state;
    size_t len, off;
    uint8_t *frame;
    uint8_t *buf = make_index(&len, &frame);
    snap_index ix;
    char err[128];
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (uint8_t)(1u << bit);
            if (snap_index_parse(buf, len, &ix, err, sizeof(err), &off))
                fail_msg("flip at byte %zu bit %d accepted", i, bit);
            buf[i] ^= (uint8_t)(1u << bit);
        }
    }
    for (size_t cut = 0; cut < len; cut++)
        if (snap_index_parse(buf, cut, &ix, err, sizeof(err), &off))
            fail_msg("truncation to %zu bytes accepted", cut);
    free(frame);
    free(buf);
}

/* A read-only value (BF.CONFIG): its log record, and the flag bit of its
 * snapshot entry's kind, which only such values set. */
static void test_value_flags(void **state)
{
    (void)state;
    pbuf p = {0};
    wal_enc_value_flags(&p, "bf", 2, WAL_FLAG_READONLY);
    assert_false(p.failed);
    wal_op op;
    char err[128];
    assert_true(wal_op_parse(WAL_VALUE_FLAGS, p.p, p.len, &op, err, sizeof(err)));
    assert_memory_equal(op.key, "bf", 2);
    assert_int_equal(op.value_flags, WAL_FLAG_READONLY);
    assert_string_equal(wal_type_name(WAL_VALUE_FLAGS), "value-flags");
    p.p[p.len - 1] = 0x02; /* a flag this version does not know */
    assert_false(wal_op_parse(WAL_VALUE_FLAGS, p.p, p.len, &op, err, sizeof(err)));
    assert_non_null(strstr(err, "unknown value flags"));
    assert_false(wal_op_parse(WAL_VALUE_FLAGS, p.p, p.len - 1, &op, err, sizeof(err)));
    free(p.p);

    const uint8_t hdr[8] = "header!";
    snap_chunk c = {SNAP_CHUNK_FILE, 100, 0x1111, {1, 2}, NULL, 0, 0};
    pbuf b = {0};
    snap_index_begin(&b, 1, 1000, 1700000000000LL, 2);
    snap_index_entry(&b, "ro", 2, SNAP_KIND_BLOOM | SNAP_KIND_READONLY, 0, hdr, 8, 1);
    snap_index_chunk(&b, &c);
    snap_index_entry(&b, "rw", 2, SNAP_KIND_CUCKOO, 0, hdr, 8, 1);
    snap_index_chunk(&b, &c);
    snap_index_finish(&b);
    snap_index ix;
    size_t off;
    assert_true(snap_index_parse(b.p, b.len, &ix, err, sizeof(err), &off));
    assert_int_equal(ix.entries[0].kind, SNAP_KIND_BLOOM);
    assert_true(ix.entries[0].readonly);
    assert_int_equal(ix.entries[1].kind, SNAP_KIND_CUCKOO);
    assert_false(ix.entries[1].readonly);
    snap_index_free(&ix);
    free(b.p);

    /* A restore in progress has no flag to keep: refused, not misread. */
    b = (pbuf){0};
    uint8_t lsn[8];
    le_store(lsn, 5, 8);
    snap_index_begin(&b, 1, 1000, 1700000000000LL, 1);
    snap_index_entry(&b, "r", 1, SNAP_KIND_RESTORE | SNAP_KIND_READONLY, 0, lsn, 8, 0);
    snap_index_finish(&b);
    assert_false(snap_index_parse(b.p, b.len, &ix, err, sizeof(err), &off));
    assert_non_null(strstr(err, "read-only restore"));
    free(b.p);
}

/* ---- chunk files ---- */

static uint8_t *make_chunk_file(size_t *len, chunk_hash *h)
{
    uint8_t raw[10000];
    uint64_t st = 42;
    for (size_t i = 0; i < sizeof(raw); i++)
        raw[i] = i % 3 ? 0 : (uint8_t)tu_next(&st);
    *h = chunk_hash_of(raw, sizeof(raw));
    uint8_t *frame;
    size_t flen;
    assert_true(chunk_compress(raw, sizeof(raw), 1, &frame, &flen));
    uint8_t *buf = malloc(CHUNK_HEADER_SIZE + flen);
    chunk_file_header(buf, sizeof(raw), *h, flen);
    memcpy(buf + CHUNK_HEADER_SIZE, frame, flen);
    free(frame);
    *len = CHUNK_HEADER_SIZE + flen;
    return buf;
}

/* One compressor over chunks of different sizes and contents gives the
 * frames a compressor made per chunk gives, each decoding to its chunk. */
static void test_chunk_compressor_reused(void **state)
{
    (void)state;
    static uint8_t raw[3][70000];
    const size_t lens[3] = {100, 70000, 30000}; /* the buffer grows on the second */
    uint64_t st = 7;
    for (size_t i = 0; i < sizeof(raw[0]); i++) {
        raw[0][i] = (uint8_t)(i % 5);
        raw[1][i] = (uint8_t)tu_next(&st);
        raw[2][i] = i % 7 ? 0 : (uint8_t)tu_next(&st);
    }
    chunk_compressor zc = {0};
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < 3; k++) {
            const uint8_t *frame;
            size_t flen, olen;
            uint8_t *once;
            assert_true(chunk_compress_with(&zc, raw[k], lens[k], 1, &frame, &flen));
            assert_true(chunk_compress(raw[k], lens[k], 1, &once, &olen));
            assert_int_equal(flen, olen);
            assert_memory_equal(frame, once, flen);
            free(once);
            uint8_t out[70000];
            char err[128];
            assert_true(chunk_frame_decode(frame, flen, (uint32_t)lens[k],
                                           chunk_hash_of(raw[k], lens[k]), out, err, sizeof(err)));
            assert_memory_equal(out, raw[k], lens[k]);
        }
    }
    chunk_compressor_free(&zc);
    chunk_compressor_free(&zc); /* a freed one is empty */
}

static void test_chunk_file(void **state)
{
    (void)state;
    size_t len, off;
    chunk_hash h;
    uint8_t *buf = make_chunk_file(&len, &h);
    uint8_t *out;
    uint32_t rl;
    char err[128];
    assert_true(chunk_file_decode(buf, len, &h, &out, &rl, err, sizeof(err), &off));
    assert_int_equal(rl, 10000);
    assert_true(chunk_hash_eq(chunk_hash_of(out, rl), h));
    free(out);
    char hex[33];
    chunk_hash back;
    chunk_hash_hex(h, hex);
    assert_true(chunk_hash_from_hex(hex, &back));
    assert_true(chunk_hash_eq(h, back));
    chunk_hash other = {h.lo ^ 1, h.hi};
    assert_false(chunk_file_decode(buf, len, &other, &out, &rl, err, sizeof(err), &off));
    /* Every flip and truncation: refused or, when zstd's own framing is
     * indifferent to the byte, decoded to the very same content. */
    for (size_t i = 0; i < len; i++) {
        buf[i] ^= 0x41;
        if (chunk_file_decode(buf, len, NULL, &out, &rl, err, sizeof(err), &off)) {
            assert_true(chunk_hash_eq(chunk_hash_of(out, rl), h));
            free(out);
        }
        buf[i] ^= 0x41;
    }
    for (size_t cut = 0; cut < len; cut++)
        assert_false(chunk_file_decode(buf, cut, NULL, &out, &rl, err, sizeof(err), &off));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_round_trip),
        cmocka_unit_test(test_log_every_flip),
        cmocka_unit_test(test_log_every_truncation),
        cmocka_unit_test(test_log_zero_tail),
        cmocka_unit_test(test_log_payload_checks),
        cmocka_unit_test(test_log_window_cuckoo),
        cmocka_unit_test(test_log_cms_topk),
        cmocka_unit_test(test_index_round_trip),
        cmocka_unit_test(test_index_every_flip_and_truncation),
        cmocka_unit_test(test_value_flags),
        cmocka_unit_test(test_chunk_compressor_reused),
        cmocka_unit_test(test_chunk_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

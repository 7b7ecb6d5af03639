/* Reading a data directory (src/persist/datadir.c, wal_last.c): the rules
 * bloomeryd's start-up and `bloomery check-data` share. Names, the snapshot
 * kind of every type against its real image, entries and chunks (inline
 * and files), LAST's codec, one log file's rules (LSNs, the torn tail only
 * at the end of the newest file, a flipped last record is damage, zeros
 * from a sector boundary are torn), and the scan of a directory: a deleted
 * newest file, LAST, keeping a torn tail aside. And the files themselves
 * (datadir_fs.c): no link followed, a link at a name the server writes
 * replaced and its target left alone, who may change the directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bloomery/bloomery.h"
#include "chunk_format.h"
#include "datadir.h"
#include "datadir_fs.h"
#include "snapshot_index.h"
#include "testutil.h"
#include "wal_format.h"
#include "wal_last.h"

/* ---- helpers ---- */

static char tmp_root[256];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* A fresh DIR with log/, snapshots/, chunks/. */
static const char *fresh_dir(void)
{
    if (tmp_root[0])
        nftw(tmp_root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    snprintf(tmp_root, sizeof(tmp_root), "/tmp/bloomery-test-datadir-XXXXXX");
    assert_non_null(mkdtemp(tmp_root));
    const char *subs[] = {"log", "snapshots", "chunks"};
    for (int i = 0; i < 3; i++) {
        char p[300];
        snprintf(p, sizeof(p), "%s/%s", tmp_root, subs[i]);
        assert_int_equal(mkdir(p, 0755), 0);
    }
    return tmp_root;
}

static void cleanup(void)
{
    if (tmp_root[0])
        nftw(tmp_root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    tmp_root[0] = '\0';
}

static void write_file(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    fclose(f);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void add_record(pbuf *f, uint8_t type, uint64_t lsn, const void *payload, size_t plen)
{
    size_t size = wal_record_size(plen);
    assert_true(pbuf_reserve(f, size));
    if (plen)
        memcpy(f->p + f->len + WAL_PREFIX, payload, plen);
    wal_record_seal(f->p + f->len, type, lsn, plen);
    f->len += size;
}

/* A log file starting at first with n DEL records; offs[i]: record i. */
static pbuf make_log(uint64_t first, unsigned n, size_t *offs)
{
    pbuf f = {0};
    uint8_t h[WAL_HEADER_SIZE];
    wal_header_encode(h, first);
    pbuf_put(&f, h, sizeof(h));
    for (unsigned i = 0; i < n; i++) {
        char key[32];
        size_t kl = (size_t)snprintf(key, sizeof(key), "key-%" PRIu64, first + i);
        const char *keys[1] = {key};
        pbuf p = {0};
        wal_enc_keys(&p, -1, keys, &kl, 1);
        if (offs)
            offs[i] = f.len;
        add_record(&f, WAL_DEL, first + i, p.p, p.len);
        free(p.p);
    }
    assert_false(f.failed);
    return f;
}

typedef struct seen {
    uint64_t n, first, last;
} seen;

static void on_record(void *ctx, const wal_record *rec, const wal_op *op)
{
    seen *s = ctx;
    assert_int_equal(op->type, rec->type);
    if (s->n++ == 0)
        s->first = rec->lsn;
    s->last = rec->lsn;
}

static datadir_log new_log(uint64_t start, seen *s)
{
    return (datadir_log){.start = start, .have_snapshot = start > 1, .fn = on_record, .ctx = s};
}

/* ---- names ---- */

static void test_names(void **state)
{
    (void)state;
    uint64_t v;
    assert_true(datadir_parse_name("00000000000000ff.wal", ".wal", &v));
    assert_int_equal(v, 255);
    assert_true(datadir_parse_name("ffffffffffffffff.index", ".index", &v));
    assert_int_equal(v, UINT64_MAX);
    const char *bad[] = {"00000000000000FF.wal",
                         "0000000000000ff.wal",
                         "000000000000000ff.wal",
                         "00000000000000ff.wa",
                         "00000000000000ff.wal.torn-32",
                         "LAST",
                         "00000000000000fg.wal",
                         ".wal",
                         ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(datadir_parse_name(bad[i], ".wal", &v));

    const char *dir = fresh_dir();
    char p[400];
    uint64_t want[] = {3, 0x10, 0xabc};
    for (int i = 2; i >= 0; i--) {
        snprintf(p, sizeof(p), "%s/log/%016" PRIx64 ".wal", dir, want[i]);
        write_file(p, "x", 1);
    }
    snprintf(p, sizeof(p), "%s/log/0000000000000005.wal.torn-40", dir);
    write_file(p, "x", 1);
    snprintf(p, sizeof(p), "%s/log/LAST", dir);
    write_file(p, "x", 1);
    uint64_t *got;
    snprintf(p, sizeof(p), "%s/log", dir);
    assert_int_equal(datadir_list(p, ".wal", &got), 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(got[i], want[i]);
    free(got);
    char **torn;
    assert_int_equal(datadir_torn_files(dir, &torn), 1);
    assert_string_equal(torn[0], "0000000000000005.wal.torn-40");
    free(torn[0]);
    free(torn);
    cleanup();
}

/* ---- snapshot entries: every kind against a real image of its type ---- */

static bloomery_object make_object(uint8_t kind)
{
    bloomery_object o = {0};
    switch (kind) {
    case SNAP_KIND_BLOOM:
        o.type = BLOOMERY_TYPE_SCALABLE;
        assert_int_equal(sbf_create(&o.u.sbf, 5000, 0.01, NULL), BLOOMERY_OK);
        for (int i = 0; i < 100; i++)
            sbf_add(o.u.sbf, &i, sizeof(i));
        break;
    case SNAP_KIND_COUNTING:
        o.type = BLOOMERY_TYPE_COUNTING;
        assert_int_equal(cntbf_create(&o.u.cnt, 5000, 0.01, NULL), BLOOMERY_OK);
        break;
    case SNAP_KIND_HLL:
        o.type = BLOOMERY_TYPE_HLL;
        assert_int_equal(hll_create(&o.u.hll, 3000), BLOOMERY_OK);
        break;
    case SNAP_KIND_WINDOW:
        o.type = BLOOMERY_TYPE_WINDOW;
        assert_int_equal(win_create(&o.u.win, 5000, 0.01, 60000, 4, 1700000000000LL, NULL),
                         BLOOMERY_OK);
        break;
    case SNAP_KIND_CUCKOO:
        o.type = BLOOMERY_TYPE_CUCKOO;
        assert_int_equal(cf_create(&o.u.cf, 5000, NULL), BLOOMERY_OK);
        break;
    }
    return o;
}

typedef struct entry_image {
    bloomery_image *img;
    snap_entry e;
    snap_chunk *chunks;
    uint8_t **frames;
} entry_image;

/* An index entry of the given kind for obj, its chunks inline (or, with
 * dir, in chunk files). */
static entry_image make_entry(bloomery_object obj, uint8_t kind, const char *dir)
{
    entry_image ei = {0};
    assert_int_equal(bloomery_image_create(&ei.img, obj, 4096), BLOOMERY_OK);
    ei.e.key = (const uint8_t *)"key";
    ei.e.klen = 3;
    ei.e.kind = kind;
    ei.e.header = bloomery_image_header(ei.img, &ei.e.hlen);
    ei.e.nchunks = bloomery_image_nchunks(ei.img);
    ei.chunks = calloc(ei.e.nchunks, sizeof(snap_chunk));
    ei.frames = calloc(ei.e.nchunks, sizeof(uint8_t *));
    for (uint64_t i = 0; i < ei.e.nchunks; i++) {
        size_t len, flen;
        const uint8_t *data = bloomery_image_chunk(ei.img, i, &len);
        snap_chunk *c = &ei.chunks[i];
        assert_true(chunk_compress(data, len, 1, &ei.frames[i], &flen));
        c->raw_len = (uint32_t)len;
        c->checksum = bloomery_image_chunk_checksum(ei.img, i, data, len);
        c->hash = chunk_hash_of(data, len);
        c->off = 1000 + i;
        if (dir) {
            char hex[33], path[400];
            uint8_t h[CHUNK_HEADER_SIZE];
            chunk_hash_hex(c->hash, hex);
            snprintf(path, sizeof(path), "%s/chunks/%s.zst", dir, hex);
            chunk_file_header(h, c->raw_len, c->hash, flen);
            pbuf f = {0};
            pbuf_put(&f, h, sizeof(h));
            pbuf_put(&f, ei.frames[i], flen);
            write_file(path, f.p, f.len);
            free(f.p);
            c->where = SNAP_CHUNK_FILE;
        } else {
            c->where = SNAP_CHUNK_INLINE;
            c->frame = ei.frames[i];
            c->flen = flen;
        }
    }
    ei.e.chunks = ei.chunks;
    return ei;
}

static void free_entry(entry_image *ei)
{
    for (uint64_t i = 0; i < ei->e.nchunks; i++)
        free(ei->frames[i]);
    free(ei->frames);
    free(ei->chunks);
    bloomery_image_free(ei->img);
}

/* Open, fill and finish entry e through datadir; NULL error when loaded. */
static bool load_entry(const char *dir, const snap_entry *e, bloomery_type *type, char *err,
                       size_t errlen)
{
    bloomery_loader *l = datadir_open_entry("INDEX", e, err, errlen);
    if (l == NULL)
        return false;
    bool ok = true;
    for (uint64_t i = 0; i < e->nchunks && ok; i++)
        ok = datadir_load_chunk(dir, "INDEX", e, i, l, NULL, err, errlen);
    bloomery_object obj = {0};
    if (ok)
        ok = datadir_finish_entry("INDEX", e, l, &obj, err, errlen);
    if (ok) {
        *type = obj.type;
        bloomery_object_free(&obj);
    }
    bloomery_loader_free(l);
    return ok;
}

static void test_every_kind_loads(void **state)
{
    (void)state;
    const char *dir = fresh_dir();
    assert_int_equal(datadir_kind_type(0), 0);
    assert_int_equal(datadir_kind_type(SNAP_KIND_CUCKOO + 1), 0);
    assert_int_equal(datadir_kind_type(255), 0);
    for (uint8_t kind = SNAP_KIND_BLOOM; kind <= SNAP_KIND_CUCKOO; kind++) {
        bloomery_object obj = make_object(kind);
        assert_int_equal(datadir_kind_type(kind), obj.type);
        for (int files = 0; files < 2; files++) {
            entry_image ei = make_entry(obj, kind, files ? dir : NULL);
            char err[1024];
            bloomery_type t;
            if (!load_entry(dir, &ei.e, &t, err, sizeof(err)))
                fail_msg("kind %u: %s", kind, err);
            assert_int_equal(t, obj.type);
            /* The image under any other kind is refused, naming the index. */
            for (uint8_t other = 0; other <= SNAP_KIND_CUCKOO + 1; other++) {
                if (other == kind)
                    continue;
                ei.e.kind = other;
                assert_false(load_entry(dir, &ei.e, &t, err, sizeof(err)));
                assert_non_null(strstr(err, "INDEX: offset 0: key 'key': image header does not"));
            }
            ei.e.kind = kind;
            /* A chunk length other than the image's. */
            ei.chunks[0].raw_len++;
            assert_false(load_entry(dir, &ei.e, &t, err, sizeof(err)));
            assert_non_null(
                strstr(err, "INDEX: offset 1000: key 'key': chunk 0 has the wrong length"));
            ei.chunks[0].raw_len--;
            if (files) {
                char hex[33], path[400];
                chunk_hash_hex(ei.chunks[0].hash, hex);
                snprintf(path, sizeof(path), "%s/chunks/%s.zst", dir, hex);
                size_t len;
                char *buf = tu_read_file(path, &len);
                buf[len - 1] ^= 1;
                write_file(path, buf, len);
                assert_false(load_entry(dir, &ei.e, &t, err, sizeof(err)));
                assert_non_null(strstr(err, path));
                unlink(path);
                assert_false(load_entry(dir, &ei.e, &t, err, sizeof(err)));
                assert_non_null(strstr(err, "can't read chunk file"));
                assert_non_null(strstr(err, "named by INDEX at offset 1000"));
                free(buf);
            } else {
                /* A wrong serial.h checksum: the loader refuses the chunk. */
                ei.chunks[0].checksum ^= 1;
                assert_false(load_entry(dir, &ei.e, &t, err, sizeof(err)));
                assert_non_null(strstr(err, "INDEX: offset 1000: key 'key': chunk 0: "));
                ei.chunks[0].checksum ^= 1;
            }
            free_entry(&ei);
        }
        bloomery_object_free(&obj);
    }
    cleanup();
}

/* Load entry e's chunks with one buffer kept across them (as a loading
 * thread does); NULL error when loaded. */
static bool load_with_buf(const char *dir, const snap_entry *e, char *err, size_t errlen)
{
    bloomery_loader *l = datadir_open_entry("INDEX", e, err, errlen);
    if (l == NULL)
        return false;
    datadir_chunk_buf b = {0};
    bool ok = true;
    for (uint64_t i = 0; i < e->nchunks && ok; i++)
        ok = datadir_load_chunk(dir, "INDEX", e, i, l, &b, err, errlen);
    datadir_chunk_buf_free(&b);
    bloomery_object obj = {0};
    if (ok)
        ok = datadir_finish_entry("INDEX", e, l, &obj, err, errlen);
    if (ok) {
        int x = 7;
        assert_int_equal(sbf_check(obj.u.sbf, &x, sizeof(x)), 1);
        bloomery_object_free(&obj);
    }
    bloomery_loader_free(l);
    return ok;
}

/* A full filter's chunks hold something on every page: their frames are
 * big enough to decompress straight into the object, and are checked
 * there as strictly as those that go through the scratch buffer. */
static void test_dense_chunks_load_in_place(void **state)
{
    (void)state;
    const char *dir = fresh_dir();
    bloomery_object obj = {.type = BLOOMERY_TYPE_SCALABLE};
    assert_int_equal(sbf_create(&obj.u.sbf, 5000, 0.01, NULL), BLOOMERY_OK);
    for (int i = 0; i < 5000; i++)
        sbf_add(obj.u.sbf, &i, sizeof(i));
    for (int files = 0; files < 2; files++) {
        entry_image ei = make_entry(obj, SNAP_KIND_BLOOM, files ? dir : NULL);
        size_t dense = 0;
        for (uint64_t i = 0; i < ei.e.nchunks; i++) {
            size_t flen = ei.chunks[i].flen;
            if (files) {
                char hex[33], path[400];
                chunk_hash_hex(ei.chunks[i].hash, hex);
                snprintf(path, sizeof(path), "%s/chunks/%s.zst", dir, hex);
                free(tu_read_file(path, &flen));
                flen -= CHUNK_HEADER_SIZE;
            }
            dense += (uint64_t)flen * 64 >= ei.chunks[i].raw_len;
        }
        assert_true(dense >= 1);
        char err[1024];
        if (!load_with_buf(dir, &ei.e, err, sizeof(err)))
            fail_msg("%s", err);
        /* A wrong serial.h checksum is refused after the bytes are in. */
        for (uint64_t i = 0; i < ei.e.nchunks; i++) {
            ei.chunks[i].checksum ^= 1;
            assert_false(load_with_buf(dir, &ei.e, err, sizeof(err)));
            assert_non_null(strstr(err, "checksum mismatch"));
            ei.chunks[i].checksum ^= 1;
        }
        /* So is a frame that decompresses to other bytes. */
        uint8_t *frame = ei.frames[0];
        size_t flen = ei.chunks[0].flen;
        char path[400];
        if (files) {
            char hex[33];
            chunk_hash_hex(ei.chunks[0].hash, hex);
            snprintf(path, sizeof(path), "%s/chunks/%s.zst", dir, hex);
            frame = (uint8_t *)tu_read_file(path, &flen);
        }
        frame[flen / 2] ^= 0x40;
        if (files)
            write_file(path, frame, flen);
        assert_false(load_with_buf(dir, &ei.e, err, sizeof(err)));
        assert_non_null(strstr(err, files ? path : "INDEX: offset 1000: inline chunk"));
        if (files)
            free(frame);
        free_entry(&ei);
    }
    bloomery_object_free(&obj);
    cleanup();
}

/* ---- snapshot index ---- */

static void write_index(const char *dir, uint64_t name_seq, uint64_t seq, const char *k1,
                        const char *k2)
{
    pbuf b = {0};
    snap_index_begin(&b, seq, 10, 1700000000000LL, 2);
    const uint8_t hdr[8] = "hdr";
    snap_chunk c = {SNAP_CHUNK_FILE, 100, 1, {2, 3}, NULL, 0, 0};
    snap_index_entry(&b, k1, strlen(k1), SNAP_KIND_HLL, 0, hdr, sizeof(hdr), 1);
    snap_index_chunk(&b, &c);
    snap_index_entry(&b, k2, strlen(k2), SNAP_KIND_HLL, 0, hdr, sizeof(hdr), 1);
    snap_index_chunk(&b, &c);
    snap_index_finish(&b);
    char path[400];
    snprintf(path, sizeof(path), "%s/snapshots/%016" PRIx64 ".index", dir, name_seq);
    write_file(path, b.p, b.len);
    free(b.p);
}

static void test_snapshot_open(void **state)
{
    (void)state;
    const char *dir = fresh_dir();
    datadir_snapshot s;
    char err[1024];
    assert_int_equal(datadir_snapshot_open(dir, &s, err, sizeof(err)), 0);
    write_index(dir, 1, 1, "a", "b");
    write_index(dir, 2, 2, "a", "c");
    assert_int_equal(datadir_snapshot_open(dir, &s, err, sizeof(err)), 1);
    assert_int_equal(s.ix.seq, 2); /* the newest */
    assert_non_null(strstr(s.path, "0000000000000002.index"));
    datadir_snapshot_close(&s);
    write_index(dir, 3, 4, "a", "b");
    assert_int_equal(datadir_snapshot_open(dir, &s, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "0000000000000003.index: offset 16: holds sequence 4"));
    write_index(dir, 4, 4, "twice", "twice");
    assert_int_equal(datadir_snapshot_open(dir, &s, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "0000000000000004.index: offset "));
    assert_non_null(strstr(err, "key 'twice': key appears twice"));
    cleanup();
}

/* ---- LAST ---- */

static void test_last_codec(void **state)
{
    (void)state;
    uint8_t b[WAL_LAST_SIZE + 1];
    uint64_t v;
    size_t off;
    char err[256];
    wal_last_encode(b, 0x1234);
    assert_true(wal_last_decode(b, WAL_LAST_SIZE, &v, err, sizeof(err), &off));
    assert_int_equal(v, 0x1234);
    for (size_t i = 0; i < WAL_LAST_SIZE; i++)
        for (int bit = 0; bit < 8; bit++) {
            b[i] ^= (uint8_t)(1u << bit);
            if (wal_last_decode(b, WAL_LAST_SIZE, &v, err, sizeof(err), &off))
                fail_msg("flip at byte %zu bit %d accepted", i, bit);
            b[i] ^= (uint8_t)(1u << bit);
        }
    for (size_t n = 0; n < WAL_LAST_SIZE; n++)
        assert_false(wal_last_decode(b, n, &v, err, sizeof(err), &off));
    b[WAL_LAST_SIZE] = 0;
    assert_false(wal_last_decode(b, WAL_LAST_SIZE + 1, &v, err, sizeof(err), &off));

    const char *dir = fresh_dir();
    char ldir[300], path[400];
    snprintf(ldir, sizeof(ldir), "%s/log", dir);
    assert_int_equal(wal_last_read(ldir, &v, err, sizeof(err)), 0);
    assert_true(wal_last_write(ldir, 77, err, sizeof(err)));
    assert_true(wal_last_write(ldir, 78, err, sizeof(err))); /* replaced */
    assert_int_equal(wal_last_read(ldir, &v, err, sizeof(err)), 1);
    assert_int_equal(v, 78);
    snprintf(path, sizeof(path), "%s/LAST.tmp", ldir);
    assert_false(exists(path));
    snprintf(path, sizeof(path), "%s/LAST", ldir);
    size_t len;
    char *buf = tu_read_file(path, &len);
    assert_int_equal(len, WAL_LAST_SIZE);
    buf[17] ^= 4;
    write_file(path, buf, len);
    assert_int_equal(wal_last_read(ldir, &v, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "/log/LAST: offset 24: checksum mismatch"));
    free(buf);
    cleanup();
}

/* ---- one log file ---- */

static void test_log_file_rules(void **state)
{
    (void)state;
    size_t offs[8];
    pbuf f = make_log(10, 5, offs);
    char err[1024];
    size_t torn;
    seen s = {0};

    /* Records from the start on go to the callback; the rest are passed. */
    datadir_log lg = new_log(12, &s);
    assert_int_equal(datadir_log_file(&lg, "F", 10, f.p, f.len, false, &torn, err, sizeof(err)),
                     DATADIR_LOG_OK);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.first, 12);
    assert_int_equal(s.last, 14);
    assert_int_equal(lg.passed, 2);
    assert_int_equal(lg.expect, 15);

    /* The next file must start where this one ended. */
    pbuf g = make_log(16, 1, NULL);
    assert_int_equal(datadir_log_file(&lg, "G", 16, g.p, g.len, true, &torn, err, sizeof(err)),
                     DATADIR_LOG_BAD);
    assert_string_equal(err, "G: offset 16: starts at LSN 16 but LSN 15 was expected (a log file "
                             "is missing)");
    free(g.p);

    /* The name must match the header. */
    lg = new_log(1, &s);
    assert_int_equal(datadir_log_file(&lg, "F", 11, f.p, f.len, false, &torn, err, sizeof(err)),
                     DATADIR_LOG_BAD);
    assert_non_null(strstr(err, "F: offset 16: first LSN 10 does not match the file name"));

    /* The first file used must reach back to the start. */
    lg = new_log(9, &s);
    assert_int_equal(datadir_log_file(&lg, "F", 10, f.p, f.len, false, &torn, err, sizeof(err)),
                     DATADIR_LOG_BAD);
    assert_non_null(strstr(err, "the snapshot needs records from LSN 9"));
    lg = new_log(0, &s); /* unknown start: not checked */
    assert_int_equal(datadir_log_file(&lg, "F", 10, f.p, f.len, false, &torn, err, sizeof(err)),
                     DATADIR_LOG_OK);

    /* Cut in the last record: torn in the newest file only. */
    for (size_t cut = offs[4] + 1; cut < f.len; cut++) {
        lg = new_log(1, &s);
        lg.start = 10;
        assert_int_equal(datadir_log_file(&lg, "F", 10, f.p, cut, true, &torn, err, sizeof(err)),
                         DATADIR_LOG_TORN);
        assert_int_equal(torn, offs[4]);
        assert_int_equal(lg.expect, 14);
        lg = new_log(10, &s);
        assert_int_equal(datadir_log_file(&lg, "F", 10, f.p, cut, false, &torn, err, sizeof(err)),
                         DATADIR_LOG_BAD);
    }

    /* Every flip in the last complete record is damage, in the newest file
     * too (it used to read as a torn tail). */
    for (size_t i = offs[4]; i < f.len; i++) {
        f.p[i] ^= 0x10;
        lg = new_log(10, &s);
        if (datadir_log_file(&lg, "F", 10, f.p, f.len, true, &torn, err, sizeof(err)) !=
            DATADIR_LOG_BAD)
            fail_msg("flip at %zu of the last record not refused", i);
        assert_non_null(strstr(err, "checksum mismatch"));
        f.p[i] ^= 0x10;
    }

    /* A header never completed: torn in the newest file, else damage. */
    uint8_t zeros[WAL_HEADER_SIZE + 100] = {0};
    lg = new_log(1, &s);
    assert_int_equal(
        datadir_log_file(&lg, "N", 20, zeros, sizeof(zeros), true, &torn, err, sizeof(err)),
        DATADIR_LOG_TORN);
    assert_int_equal(torn, 0);
    assert_int_equal(datadir_log_file(&lg, "N", 20, f.p, 20, true, &torn, err, sizeof(err)),
                     DATADIR_LOG_TORN);
    assert_int_equal(
        datadir_log_file(&lg, "N", 20, zeros, sizeof(zeros), false, &torn, err, sizeof(err)),
        DATADIR_LOG_BAD);

    /* LAST is written before a file's first record: a newer file may be
     * there without records (a crash before LAST), never with one. */
    lg = new_log(10, &s);
    lg.have_last = true;
    lg.last = 9;
    assert_int_equal(
        datadir_log_file(&lg, "F", 10, f.p, WAL_HEADER_SIZE, true, &torn, err, sizeof(err)),
        DATADIR_LOG_OK);
    lg = new_log(10, &s);
    lg.have_last = true;
    lg.last = 9;
    assert_int_equal(datadir_log_file(&lg, "F", 10, f.p, f.len, true, &torn, err, sizeof(err)),
                     DATADIR_LOG_BAD);
    assert_string_equal(err, "F: offset 32: a record in a log file newer than "
                             "0000000000000009.wal, the newest one LAST names");
    free(f.p);
}

/* Zeros from a sector boundary inside the last record to the end of the
 * file are a torn write (the sectors after it never arrived); zeros that
 * start elsewhere inside its checksum are damage. */
static void test_zeros_from_a_sector(void **state)
{
    (void)state;
    /* One record whose checksum spans the sector boundary at 512: it
     * starts at 32, so its trailer starts at 32 + 17 + P = 508. */
    pbuf f = {0};
    uint8_t h[WAL_HEADER_SIZE];
    wal_header_encode(h, 1);
    pbuf_put(&f, h, sizeof(h));
    uint8_t data[438];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(i * 7 + 1);
    pbuf p = {0};
    wal_enc_loadchunk(&p, "k", 1, 1, data, sizeof(data));
    assert_int_equal(p.len, 459);
    add_record(&f, WAL_LOADCHUNK, 1, p.p, p.len);
    free(p.p);
    assert_int_equal(f.len, 516);
    uint8_t *buf = calloc(1, 4096);
    char err[1024];
    size_t torn;
    seen s = {0};
    /* From the sector boundary on, and the file extended with zeros. */
    memcpy(buf, f.p, 512);
    datadir_log lg = new_log(1, &s);
    assert_int_equal(datadir_log_file(&lg, "F", 1, buf, 4096, true, &torn, err, sizeof(err)),
                     DATADIR_LOG_TORN);
    assert_int_equal(torn, 32);
    /* From one byte after it: a damaged checksum, not a torn write. */
    memcpy(buf, f.p, 513);
    if (buf[512] == 0)
        buf[512] = 1;
    lg = new_log(1, &s);
    assert_int_equal(datadir_log_file(&lg, "F", 1, buf, 4096, true, &torn, err, sizeof(err)),
                     DATADIR_LOG_BAD);
    assert_non_null(strstr(err, "F: offset 32: record checksum mismatch"));
    /* The whole checksum zero: torn wherever it starts. */
    memcpy(buf, f.p, 508);
    memset(buf + 508, 0, 8);
    lg = new_log(1, &s);
    assert_int_equal(datadir_log_file(&lg, "F", 1, buf, 516, true, &torn, err, sizeof(err)),
                     DATADIR_LOG_TORN);
    free(buf);
    free(f.p);
}

/* ---- a directory's log ---- */

static void put_log(const char *dir, uint64_t first, unsigned n)
{
    pbuf f = make_log(first, n, NULL);
    char path[400];
    snprintf(path, sizeof(path), "%s/log/%016" PRIx64 ".wal", dir, first);
    write_file(path, f.p, f.len);
    free(f.p);
}

static void rm_log(const char *dir, uint64_t first)
{
    char path[400];
    snprintf(path, sizeof(path), "%s/log/%016" PRIx64 ".wal", dir, first);
    assert_int_equal(unlink(path), 0);
}

static void set_last(const char *dir, uint64_t first)
{
    char ldir[300], err[256];
    snprintf(ldir, sizeof(ldir), "%s/log", dir);
    assert_true(wal_last_write(ldir, first, err, sizeof(err)));
}

static bool scan(const char *dir, uint64_t start, seen *s, char *err)
{
    *s = (seen){0};
    datadir_log lg = new_log(start, s);
    return datadir_scan_log(dir, &lg, err, 1024);
}

static void test_scan_directory(void **state)
{
    (void)state;
    const char *dir = fresh_dir();
    char err[1024];
    seen s;
    /* Three files 1..4, 5..7, 8..9; LAST names the newest. */
    put_log(dir, 1, 4);
    put_log(dir, 5, 3);
    put_log(dir, 8, 2);
    set_last(dir, 8);
    assert_true(scan(dir, 1, &s, err));
    assert_int_equal(s.n, 9);
    assert_true(scan(dir, 6, &s, err)); /* a snapshot at 6: the first file is skipped */
    assert_int_equal(s.n, 4);
    assert_int_equal(s.first, 6);

    /* The newest file deleted: LAST names it. */
    rm_log(dir, 8);
    assert_false(scan(dir, 1, &s, err));
    assert_non_null(strstr(err, "/log/LAST: offset 16: log file 0000000000000008.wal named by "
                                "LAST is missing"));
    assert_false(scan(dir, 8, &s, err)); /* a snapshot at its start needs it */
    /* Below a snapshot's start it held nothing the snapshot lacks. */
    assert_true(scan(dir, 9, &s, err));
    /* Without LAST (a directory from before it) the loss can't be seen. */
    char path[400];
    snprintf(path, sizeof(path), "%s/log/LAST", dir);
    unlink(path);
    assert_true(scan(dir, 1, &s, err));
    assert_int_equal(s.n, 7);

    /* All deleted: refused while LAST names one. */
    rm_log(dir, 1);
    rm_log(dir, 5);
    assert_true(scan(dir, 1, &s, err));
    set_last(dir, 5);
    assert_false(scan(dir, 1, &s, err));
    assert_non_null(strstr(err, "0000000000000005.wal named by LAST is missing"));

    /* A middle file deleted: the chain breaks. */
    put_log(dir, 1, 4);
    put_log(dir, 8, 2);
    set_last(dir, 8);
    assert_false(scan(dir, 1, &s, err));
    assert_non_null(strstr(err, "0000000000000008.wal: offset 16: starts at LSN 8 but LSN 5 was "
                                "expected"));
    cleanup();
}

static void test_keep_torn(void **state)
{
    (void)state;
    const char *dir = fresh_dir();
    size_t offs[4];
    pbuf f = make_log(1, 4, offs);
    char path[400], kept[500], err[1024];
    snprintf(path, sizeof(path), "%s/log/0000000000000001.wal", dir);
    size_t cut = offs[3] + 10;
    write_file(path, f.p, cut);
    set_last(dir, 1);
    seen s = {0};

    /* Reported, nothing changed. */
    datadir_log lg = new_log(1, &s);
    assert_true(datadir_scan_log(dir, &lg, err, sizeof(err)));
    assert_true(lg.torn);
    assert_int_equal(lg.torn_off, offs[3]);
    assert_int_equal(lg.torn_len, 10);
    assert_string_equal(lg.torn_file, path);
    assert_string_equal(lg.torn_kept, "");
    assert_int_equal(s.n, 3);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, cut);

    /* Kept aside, then cut off. */
    s = (seen){0};
    lg = new_log(1, &s);
    lg.keep_torn = true;
    assert_true(datadir_scan_log(dir, &lg, err, sizeof(err)));
    snprintf(kept, sizeof(kept), "%s.torn-%zu", path, offs[3]);
    assert_string_equal(lg.torn_kept, kept);
    size_t klen;
    char *k = tu_read_file(kept, &klen);
    assert_int_equal(klen, 10);
    assert_memory_equal(k, f.p + offs[3], 10);
    free(k);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, offs[3]);
    lg = new_log(1, &s);
    assert_true(datadir_scan_log(dir, &lg, err, sizeof(err)));
    assert_false(lg.torn);
    char **torn;
    assert_int_equal(datadir_torn_files(dir, &torn), 1);
    free(torn[0]);
    free(torn);

    /* A new file whose header never completed: kept aside whole, removed. */
    char path2[400];
    snprintf(path2, sizeof(path2), "%s/log/0000000000000004.wal", dir);
    write_file(path2, f.p, 20);
    lg = new_log(1, &s);
    lg.keep_torn = true;
    assert_true(datadir_scan_log(dir, &lg, err, sizeof(err)));
    assert_int_equal(lg.torn_off, 0);
    assert_false(exists(path2));
    snprintf(kept, sizeof(kept), "%s.torn-0", path2);
    assert_true(exists(kept));
    free(f.p);
    cleanup();
}

/* ---- files: no link followed ---- */

static const char VICTIM[] = "a file outside the data directory, never to change\n";

static void victim_untouched(const char *victim)
{
    size_t len;
    char *b = tu_read_file(victim, &len);
    assert_int_equal(len, sizeof(VICTIM) - 1);
    assert_memory_equal(b, VICTIM, len);
    free(b);
    struct stat st;
    assert_int_equal(lstat(victim, &st), 0);
    assert_true(S_ISREG(st.st_mode));
}

static void plant(const char *victim, const char *path)
{
    unlink(path);
    assert_int_equal(symlink(victim, path), 0);
}

static bool is_regular(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void put(int fd, const char *s)
{
    assert_true(fd >= 0);
    assert_int_equal(write(fd, s, strlen(s)), (ssize_t)strlen(s));
    close(fd);
}

static void test_no_link_followed(void **state)
{
    (void)state;
    const char *dir = fresh_dir();
    char victim[300], p[400], q[400], sub[400];
    snprintf(victim, sizeof(victim), "%s/victim", dir);
    write_file(victim, VICTIM, sizeof(VICTIM) - 1);

    /* A new name: the link is removed, not written through. */
    snprintf(p, sizeof(p), "%s/log/LAST.tmp", dir);
    plant(victim, p);
    put(datadir_create(p), "new");
    victim_untouched(victim);
    assert_true(is_regular(p));
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);

    /* Reads refuse a link, and a FIFO without waiting for a writer. */
    snprintf(q, sizeof(q), "%s/snapshots/0000000000000001.index", dir);
    plant(victim, q);
    errno = 0;
    assert_int_equal(datadir_open_read(q), -1);
    assert_int_equal(errno, ELOOP);
    assert_non_null(strstr(datadir_strerror(ELOOP), "symbolic link"));
    uint8_t *buf;
    size_t len;
    assert_false(datadir_read_file(q, &buf, &len));
    assert_false(datadir_is_file(q));
    unlink(q);
    assert_int_equal(mkfifo(q, 0600), 0);
    assert_int_equal(datadir_open_read(q), -1);
    unlink(q);

    /* A whole file through "<path>.tmp": links at both names replaced. */
    snprintf(q, sizeof(q), "%s/snapshots/0000000000000002.index", dir);
    char qt[420];
    snprintf(qt, sizeof(qt), "%s.tmp", q);
    plant(victim, q);
    plant(victim, qt);
    assert_true(datadir_write_file(q, "index", 5));
    victim_untouched(victim);
    assert_true(is_regular(q));
    assert_false(exists(qt));
    assert_true(datadir_read_file(q, &buf, &len));
    assert_int_equal(len, 5);
    assert_memory_equal(buf, "index", 5);
    free(buf);

    /* A name that must not go away (a log file re-created at its LSN): a
     * regular file is truncated in place; a link or a second name of
     * another file is replaced, its target left whole. */
    snprintf(p, sizeof(p), "%s/log/0000000000000001.wal", dir);
    put(datadir_open_write(p, O_CREAT | O_TRUNC | O_APPEND), "first");
    assert_int_equal(stat(p, &st), 0);
    ino_t ino = st.st_ino;
    put(datadir_open_write(p, O_CREAT | O_TRUNC | O_APPEND), "again");
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_ino, ino);
    assert_int_equal(st.st_size, 5);
    plant(victim, p);
    errno = 0;
    assert_int_equal(datadir_open_write(p, 0), -1);
    assert_int_equal(errno, ELOOP);
    put(datadir_open_write(p, O_CREAT | O_TRUNC | O_APPEND), "new");
    victim_untouched(victim);
    assert_true(is_regular(p));
    unlink(p);
    assert_int_equal(link(victim, p), 0);
    errno = 0;
    assert_int_equal(datadir_open_write(p, 0), -1);
    assert_int_equal(errno, EMLINK);
    put(datadir_open_write(p, O_CREAT | O_TRUNC), "new");
    victim_untouched(victim);
    assert_int_equal(stat(victim, &st), 0);
    assert_int_equal(st.st_nlink, 1);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 3);

    /* The pid file's rule: the last component not followed. */
    plant(victim, p);
    assert_int_equal(datadir_open_write_at(AT_FDCWD, p, O_CREAT | O_TRUNC, 0644), -1);
    assert_int_equal(errno, ELOOP);
    victim_untouched(victim);

    /* rename and unlink act on the names. */
    snprintf(q, sizeof(q), "%s/log/other", dir);
    put(datadir_create(q), "x");
    assert_true(datadir_rename(q, p));
    assert_true(is_regular(p));
    victim_untouched(victim);
    assert_false(datadir_rename(p, victim));
    assert_int_equal(errno, EXDEV);
    plant(victim, p);
    assert_true(datadir_unlink(p));
    victim_untouched(victim);

    /* A subdirectory that is a link: refused for every call. */
    char elsewhere[400];
    snprintf(elsewhere, sizeof(elsewhere), "%s/elsewhere", dir);
    assert_int_equal(mkdir(elsewhere, 0700), 0);
    snprintf(sub, sizeof(sub), "%s/linked", dir);
    assert_int_equal(symlink(elsewhere, sub), 0);
    snprintf(p, sizeof(p), "%s/linked/LAST", dir);
    assert_int_equal(datadir_create(p), -1);
    assert_int_equal(errno, ELOOP);
    assert_int_equal(datadir_open_read(p), -1);
    assert_int_equal(datadir_open_write(p, O_CREAT | O_TRUNC), -1);
    assert_false(datadir_write_file(p, "x", 1));
    assert_false(datadir_unlink(p));
    assert_null(datadir_opendir(sub));
    assert_false(datadir_sync_dir(sub));
    assert_false(datadir_mkdir(sub));
    uint64_t *nums;
    assert_int_equal(datadir_list(sub, ".wal", &nums), 0);
    free(nums);
    DIR *d = opendir(elsewhere);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        assert_true(de->d_name[0] == '.');
    closedir(d);

    /* The data directory itself may be a link once named as the root: a
     * file directly in it is reached through it, its subdirectories are
     * still not followed. */
    char root[300];
    snprintf(root, sizeof(root), "%s/rootlink", dir);
    assert_int_equal(symlink(dir, root), 0);
    snprintf(p, sizeof(p), "%s/replid", root);
    assert_false(datadir_write_file(p, "id", 2));
    assert_int_equal(errno, ELOOP);
    datadir_set_root(root);
    assert_true(datadir_write_file(p, "id", 2));
    assert_true(datadir_read_file(p, &buf, &len));
    assert_int_equal(len, 2);
    free(buf);
    snprintf(p, sizeof(p), "%s/log/x", root);
    put(datadir_create(p), "x");
    snprintf(p, sizeof(p), "%s/linked/LAST", root);
    assert_int_equal(datadir_create(p), -1);
    assert_int_equal(errno, ELOOP);
    datadir_set_root(NULL);

    /* Made 0700. */
    snprintf(sub, sizeof(sub), "%s/made", dir);
    assert_true(datadir_mkdir(sub));
    assert_int_equal(stat(sub, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    assert_true(datadir_mkdir(sub));
    cleanup();
}

static void count_msg(void *ctx, const char *msg)
{
    (void)msg;
    (*(int *)ctx)++;
}

static void test_check_access(void **state)
{
    (void)state;
    const char *dir = fresh_dir();
    char err[2048], sub[400], msg[600];
    uid_t me = geteuid();
    assert_true(datadir_check_access(dir, me, err, sizeof(err)));

    /* Another user's directory: its path, owner and mode named. */
    assert_false(datadir_check_access(dir, me + 1, err, sizeof(err)));
    snprintf(msg, sizeof(msg), "data directory \"%s\" has wrong ownership: owned by uid %u", dir,
             (unsigned)me);
    assert_non_null(strstr(err, msg));
    assert_non_null(strstr(err, "mode 0700"));

    /* Writable by group or others; readable is fine (0755 of older
     * versions). */
    static const mode_t bad[] = {0777, 0770, 0720, 0702};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(chmod(dir, bad[i]), 0);
        assert_false(datadir_check_access(dir, me, err, sizeof(err)));
        snprintf(msg, sizeof(msg), "data directory \"%s\" has invalid permissions: mode %04o", dir,
                 (unsigned)bad[i]);
        assert_non_null(strstr(err, msg));
    }
    assert_int_equal(chmod(dir, 0755), 0);
    assert_true(datadir_check_access(dir, me, err, sizeof(err)));
    assert_int_equal(chmod(dir, 0700), 0);

    /* The subdirectories the server makes, by the same rule; a link
     * refused. */
    snprintf(sub, sizeof(sub), "%s/log", dir);
    assert_int_equal(chmod(sub, 0777), 0);
    assert_false(datadir_check_access(dir, me, err, sizeof(err)));
    assert_non_null(strstr(err, sub));
    assert_int_equal(chmod(sub, 0700), 0);
    assert_true(datadir_check_access(dir, me, err, sizeof(err)));
    char elsewhere[400];
    snprintf(elsewhere, sizeof(elsewhere), "%s/elsewhere", dir);
    assert_int_equal(mkdir(elsewhere, 0700), 0);
    assert_int_equal(rmdir(sub), 0);
    assert_int_equal(symlink(elsewhere, sub), 0);
    assert_false(datadir_check_access(dir, me, err, sizeof(err)));
    snprintf(msg, sizeof(msg), "data directory \"%s\" is a symbolic link", sub);
    assert_non_null(strstr(err, msg));
    assert_int_equal(unlink(sub), 0);
    assert_int_equal(mkdir(sub, 0700), 0);

    /* Files inside: check-data's warnings. */
    int n = 0;
    assert_int_equal(datadir_check_files(dir, me, count_msg, &n), 0);
    char p[500];
    snprintf(p, sizeof(p), "%s/chunks/planted.zst", dir);
    assert_int_equal(symlink(elsewhere, p), 0);
    snprintf(p, sizeof(p), "%s/log/open.wal", dir);
    write_file(p, "x", 1);
    assert_int_equal(chmod(p, 0666), 0);
    assert_int_equal(datadir_check_files(dir, me, count_msg, &n), 2);
    assert_int_equal(n, 2);
    cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_every_kind_loads),
        cmocka_unit_test(test_snapshot_open),
        cmocka_unit_test(test_last_codec),
        cmocka_unit_test(test_log_file_rules),
        cmocka_unit_test(test_zeros_from_a_sector),
        cmocka_unit_test(test_scan_directory),
        cmocka_unit_test(test_keep_torn),
        cmocka_unit_test(test_dense_chunks_load_in_place),
        cmocka_unit_test(test_no_link_followed),
        cmocka_unit_test(test_check_access),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

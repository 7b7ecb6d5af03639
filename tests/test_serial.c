/* Serialization: every type round-trips to identical answers and bytes; every
 * single-byte flip and every truncation of a serialized object is rejected
 * with an error, never loaded; chunks may arrive in any order but each must
 * arrive once, intact and in its place. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomery/bloomery.h"
#include "testutil.h"

#include <xxhash.h>

#define MAX_BYTES (1ULL << 30)

static bloomery_object make(bloomery_type type, int variant)
{
    bloomery_object o = {.type = type};
    char key[32];
    switch (type) {
    case BLOOMERY_TYPE_BLOCKED:
        assert_int_equal(bf_create(&o.u.bf, 500, variant ? 1e-6 : 0.01, NULL), BLOOMERY_OK);
        for (uint64_t i = 0; i < 300; i++)
            bf_add(o.u.bf, key, tu_key(key, "s:", i));
        break;
    case BLOOMERY_TYPE_COUNTING:
        assert_int_equal(cntbf_create(&o.u.cnt, 200, 0.01, NULL), BLOOMERY_OK);
        for (uint64_t i = 0; i < 150; i++)
            cntbf_add(o.u.cnt, key, tu_key(key, "s:", i));
        break;
    case BLOOMERY_TYPE_SCALABLE: {
        if (variant >= 3) {
            /* Growing chains with buckets moving into their second table:
             * tables under a page, which are not mapped (every byte flip
             * loads one), or an expansion that rounds up (3 to 4). */
            sbf_options opt = {
                .layout = BLOOMERY_LAYOUT_GROWING, .expansion = variant == 3 ? 2 : 3, .seed = 77};
            assert_int_equal(sbf_create(&o.u.sbf, variant == 3 ? 10 : 50, 0.01, &opt), BLOOMERY_OK);
            gf_state st = {0};
            for (uint64_t i = 0; st.ntables < 2 || i < (variant == 3 ? 100u : 300u); i++) {
                assert_true(sbf_add(o.u.sbf, key, tu_key(key, "s:", i)) >= 0);
                gf_get_state(sbf_link_growing(o.u.sbf, 0), &st);
            }
            break;
        }
        /* Variants: blocked, classic and prefix links. */
        sbf_options opt = {.layout = variant == 2   ? BLOOMERY_LAYOUT_PREFIX
                                     : variant == 1 ? BLOOMERY_LAYOUT_CLASSIC
                                                    : BLOOMERY_LAYOUT_BLOCKED,
                           .expansion = 2,
                           .seed = 77};
        assert_int_equal(sbf_create(&o.u.sbf, 50, 0.01, &opt), BLOOMERY_OK);
        for (uint64_t i = 0; i < 300; i++) /* three links */
            sbf_add(o.u.sbf, key, tu_key(key, "s:", i));
        assert_int_equal(sbf_nlinks(o.u.sbf), 3);
        break;
    }
    case BLOOMERY_TYPE_HLL:
        assert_int_equal(hll_create(&o.u.hll, 0), BLOOMERY_OK);
        for (uint64_t i = 0; i < (variant ? 5000u : 50u); i++)
            hll_add(o.u.hll, key, tu_key(key, "s:", i));
        break;
    case BLOOMERY_TYPE_WINDOW:
        /* A ring that has rotated, so slices hold different items. */
        assert_int_equal(win_create(&o.u.win, 400, 0.01, 1000, variant ? 2 : 4, 0, NULL),
                         BLOOMERY_OK);
        for (uint64_t i = 0; i < 300; i++) {
            int64_t now = (int64_t)(i * 2);
            win_advance(o.u.win, now, NULL, NULL);
            win_check_and_add(o.u.win, key, tu_key(key, "s:", i), now);
        }
        break;
    case BLOOMERY_TYPE_CMS:
        assert_int_equal(cms_create(&o.u.cms, variant ? 700 : 30, variant ? 5 : 2), BLOOMERY_OK);
        for (uint64_t i = 0; i < 300; i++)
            assert_int_equal(cms_incrby(o.u.cms, key, tu_key(key, "s:", i), i % 5, NULL),
                             BLOOMERY_OK);
        break;
    case BLOOMERY_TYPE_TOPK:
        /* Narrow buckets: decays, a generator that moved, items expelled. */
        assert_int_equal(topk_create(&o.u.topk, variant ? 50 : 4, 8, 3, 0.9, 3), BLOOMERY_OK);
        for (uint64_t i = 0; i < 300; i++)
            assert_true(topk_add(o.u.topk, key, tu_key(key, "s:", i % 40 * (i % 3)), 1, NULL) >= 0);
        break;
    case BLOOMERY_TYPE_CUCKOO: {
        /* RedisBloom's 8-bit slots growing by 1, or packed 13-bit slots
         * growing by 2 with some deletes. */
        cf_options opt;
        cf_options_init(&opt);
        if (variant) {
            opt.bucket_size = 3;
            opt.expansion = 2;
            opt.fingerprint_bits = 13;
        }
        assert_int_equal(cf_create(&o.u.cf, 32, &opt), BLOOMERY_OK);
        for (uint64_t i = 0; i < 80; i++)
            assert_int_equal(cf_add(o.u.cf, key, tu_key(key, "s:", i)), 1);
        for (uint64_t i = 0; variant && i < 80; i += 9)
            assert_true(cf_delete(o.u.cf, key, tu_key(key, "s:", i)));
        assert_true(cf_nfilters(o.u.cf) >= 2);
        break;
    }
    case BLOOMERY_TYPE_TDIGEST: {
        /* Compressed centroids and a partly full buffer. */
        assert_int_equal(tdigest_create(&o.u.td, variant ? 100 : 5), BLOOMERY_OK);
        for (uint64_t i = 0; i < 1000; i++) {
            double v = (double)((i * 7919) % 1000) / 7.0 - 50;
            assert_int_equal(tdigest_add(o.u.td, &v, 1), BLOOMERY_OK);
        }
        break;
    }
    }
    return o;
}

/* Answers for members and non-members must agree between a and b. */
static void same_answers(bloomery_object a, bloomery_object b)
{
    assert_int_equal(a.type, b.type);
    char key[32];
    for (uint64_t i = 0; i < 2000; i++) {
        size_t len = tu_key(key, i < 1000 ? "s:" : "z:", i % 1000);
        switch (a.type) {
        case BLOOMERY_TYPE_BLOCKED:
            assert_int_equal(bf_check(a.u.bf, key, len), bf_check(b.u.bf, key, len));
            break;
        case BLOOMERY_TYPE_COUNTING:
            assert_int_equal(cntbf_check(a.u.cnt, key, len), cntbf_check(b.u.cnt, key, len));
            break;
        case BLOOMERY_TYPE_SCALABLE:
            assert_int_equal(sbf_check(a.u.sbf, key, len), sbf_check(b.u.sbf, key, len));
            break;
        case BLOOMERY_TYPE_HLL:
        case BLOOMERY_TYPE_TDIGEST: break;
        case BLOOMERY_TYPE_WINDOW:
            assert_int_equal(win_check(a.u.win, key, len, 600), win_check(b.u.win, key, len, 600));
            break;
        case BLOOMERY_TYPE_CMS:
            assert_int_equal(cms_query(a.u.cms, key, len), cms_query(b.u.cms, key, len));
            break;
        case BLOOMERY_TYPE_TOPK:
            assert_int_equal(topk_query(a.u.topk, key, len), topk_query(b.u.topk, key, len));
            assert_int_equal(topk_count(a.u.topk, key, len), topk_count(b.u.topk, key, len));
            break;
        case BLOOMERY_TYPE_CUCKOO:
            assert_int_equal(cf_exists(a.u.cf, key, len), cf_exists(b.u.cf, key, len));
            assert_int_equal(cf_count(a.u.cf, key, len), cf_count(b.u.cf, key, len));
            break;
        }
    }
    if (a.type == BLOOMERY_TYPE_HLL) {
        size_t la, lb;
        const uint8_t *pa = hll_bytes(a.u.hll, &la), *pb = hll_bytes(b.u.hll, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(pa, pb, la);
    }
    if (a.type == BLOOMERY_TYPE_CMS) {
        assert_int_equal(cms_count(a.u.cms), cms_count(b.u.cms));
        assert_int_equal(cms_width(a.u.cms), cms_width(b.u.cms));
        assert_int_equal(cms_depth(a.u.cms), cms_depth(b.u.cms));
    }
    if (a.type == BLOOMERY_TYPE_TOPK) {
        assert_int_equal(topk_rng(a.u.topk), topk_rng(b.u.topk));
        assert_memory_equal(topk_buckets(a.u.topk), topk_buckets(b.u.topk),
                            topk_buckets_bytes(a.u.topk));
    }
    if (a.type == BLOOMERY_TYPE_TDIGEST) {
        tdigest_state sa, sb;
        tdigest_state_of(a.u.td, &sa);
        tdigest_state_of(b.u.td, &sb);
        assert_memory_equal(&sa, &sb, sizeof sa);
        assert_int_equal(tdigest_capacity(a.u.td), tdigest_capacity(b.u.td));
        assert_memory_equal(tdigest_nodes(a.u.td), tdigest_nodes(b.u.td),
                            tdigest_capacity(a.u.td) * sizeof(tdigest_node));
    }
    if (a.type == BLOOMERY_TYPE_CUCKOO) {
        cf_shape sa, sb;
        cf_shape_of(a.u.cf, &sa);
        cf_shape_of(b.u.cf, &sb);
        assert_memory_equal(&sa, &sb, sizeof sa);
        assert_int_equal(cf_info_size(a.u.cf), cf_info_size(b.u.cf));
        for (uint32_t i = 0; i < cf_nfilters(a.u.cf); i++)
            assert_memory_equal(cf_filter_data(a.u.cf, i), cf_filter_data(b.u.cf, i),
                                cf_filter_bytes(a.u.cf, i));
    }
    if (a.type == BLOOMERY_TYPE_WINDOW) {
        assert_int_equal(win_slices(a.u.win), win_slices(b.u.win));
        assert_int_equal(win_rotations(a.u.win), win_rotations(b.u.win));
        assert_int_equal(win_early_rotations(a.u.win), win_early_rotations(b.u.win));
        for (unsigned i = 0; i <= win_slices(a.u.win); i++) {
            assert_int_equal(win_slice_start(a.u.win, i), win_slice_start(b.u.win, i));
            assert_int_equal(win_slice_count(a.u.win, i), win_slice_count(b.u.win, i));
        }
        assert_int_equal(win_count(a.u.win, 600), win_count(b.u.win, 600));
    }
    if (a.type == BLOOMERY_TYPE_SCALABLE) {
        assert_int_equal(sbf_count(a.u.sbf), sbf_count(b.u.sbf));
        assert_int_equal(sbf_capacity(a.u.sbf), sbf_capacity(b.u.sbf));
        assert_int_equal(sbf_expansion(a.u.sbf), sbf_expansion(b.u.sbf));
        assert_int_equal(sbf_layout(a.u.sbf), sbf_layout(b.u.sbf));
    }
}

static const bloomery_type types[] = {
    BLOOMERY_TYPE_BLOCKED, BLOOMERY_TYPE_COUNTING, BLOOMERY_TYPE_SCALABLE,
    BLOOMERY_TYPE_HLL,     BLOOMERY_TYPE_CUCKOO,   BLOOMERY_TYPE_WINDOW,
    BLOOMERY_TYPE_CMS,     BLOOMERY_TYPE_TOPK,     BLOOMERY_TYPE_TDIGEST};
#define NTYPES (int)(sizeof types / sizeof types[0])

static int variants(bloomery_type t) { return t == BLOOMERY_TYPE_SCALABLE ? 5 : 2; }

static void test_round_trip(void **state)
{
    (void)state;
    for (int t = 0; t < NTYPES; t++) {
        for (int v = 0; v < variants(types[t]); v++) {
            bloomery_object o = make(types[t], v);
            uint8_t *blob;
            size_t len;
            assert_int_equal(bloomery_serialize(o, 256, &blob, &len), BLOOMERY_OK);
            bloomery_object back;
            const char *msg;
            int rc = bloomery_deserialize(blob, len, MAX_BYTES, &back, &msg);
            if (rc != BLOOMERY_OK)
                fail_msg("type %d: %s", types[t], msg);
            same_answers(o, back);
            /* Serializing the loaded copy gives the same bytes. */
            uint8_t *blob2;
            size_t len2;
            assert_int_equal(bloomery_serialize(back, 256, &blob2, &len2), BLOOMERY_OK);
            assert_int_equal(len, len2);
            assert_memory_equal(blob, blob2, len);
            free(blob);
            free(blob2);
            bloomery_object_free(&back);
            bloomery_object_free(&o);
        }
    }
}

static void test_every_flip_and_truncation(void **state)
{
    (void)state;
    for (int t = 0; t <= NTYPES + 1; t++) {
        /* Every type, then the prefix and growing chains. */
        bloomery_object o =
            t < NTYPES ? make(types[t], 0) : make(BLOOMERY_TYPE_SCALABLE, t == NTYPES ? 2 : 3);
        uint8_t *blob;
        size_t len;
        assert_int_equal(bloomery_serialize(o, 128, &blob, &len), BLOOMERY_OK);
        uint8_t *copy = malloc(len);
        unsigned accepted = 0;
        /* Every other value of each byte; under the sanitizers (quick), every
         * one-bit change of each byte: the full set costs minutes there, and
         * the release build tries it all. */
        unsigned step = tu_quick() ? 0 : 1;
        size_t tried = 0;
        for (size_t i = 0; i < len; i++) {
            for (unsigned x = 1; x < 256; x = step ? x + 1 : x << 1) {
                tried++;
                memcpy(copy, blob, len);
                copy[i] ^= (uint8_t)x;
                bloomery_object back;
                if (bloomery_deserialize(copy, len, MAX_BYTES, &back, NULL) == BLOOMERY_OK) {
                    accepted++;
                    bloomery_object_free(&back);
                }
            }
            bloomery_object back;
            /* Every proper prefix is truncated. */
            if (bloomery_deserialize(blob, i, MAX_BYTES, &back, NULL) == BLOOMERY_OK) {
                accepted++;
                bloomery_object_free(&back);
            }
        }
        printf("# type %d: %zu bytes, %zu byte changes and %zu truncations tried\n", o.type, len,
               tried, len);
        assert_int_equal(accepted, 0);
        free(copy);
        free(blob);
        bloomery_object_free(&o);
    }
}

/* In place, as a snapshot's load does it: several threads each write their
 * chunks at bloomery_loader_chunk_dest and have them checked. */
typedef struct placer {
    bloomery_loader *l;
    bloomery_image *img;
    uint64_t first, step;
    int bad; /* failed checks */
} placer;

static void *place_chunks(void *arg)
{
    placer *p = arg;
    uint64_t n = bloomery_image_nchunks(p->img);
    for (uint64_t k = p->first; k < n; k += p->step) {
        size_t cl, dl;
        const uint8_t *c = bloomery_image_chunk(p->img, k, &cl);
        uint8_t *d = bloomery_loader_chunk_dest(p->l, k, &dl);
        char err[160];
        if (d == NULL || dl != cl) {
            p->bad++;
            continue;
        }
        memcpy(d, c, cl);
        if (bloomery_loader_chunk_placed(p->l, k, NULL, 0,
                                         bloomery_image_chunk_checksum(p->img, k, c, cl), err,
                                         sizeof err) != BLOOMERY_OK)
            p->bad++;
    }
    return NULL;
}

static void test_loader_in_place(void **state)
{
    (void)state;
    bloomery_object o = make(BLOOMERY_TYPE_SCALABLE, 0);
    bloomery_image *img;
    assert_int_equal(bloomery_image_create(&img, o, 64), BLOOMERY_OK);
    size_t hl, used;
    const uint8_t *h = bloomery_image_header(img, &hl);
    uint64_t n = bloomery_image_nchunks(img);
    assert_true(n > 8);
    bloomery_loader *l;
    assert_int_equal(bloomery_loader_open(&l, h, hl, MAX_BYTES, &used), BLOOMERY_OK);

    placer p[3];
    pthread_t th[3];
    for (int t = 0; t < 3; t++) {
        p[t] = (placer){l, img, (uint64_t)t, 3, 0};
        assert_int_equal(pthread_create(&th[t], NULL, place_chunks, &p[t]), 0);
    }
    for (int t = 0; t < 3; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        assert_int_equal(p[t].bad, 0);
    }
    /* Each chunk counts once; a wrong checksum, a chunk out of range are
     * refused with their message in the caller's buffer. */
    char err[160] = "";
    size_t cl;
    const uint8_t *c = bloomery_image_chunk(img, 2, &cl);
    uint64_t sum = bloomery_image_chunk_checksum(img, 2, c, cl);
    assert_int_equal(bloomery_loader_chunk_placed(l, 2, NULL, 0, sum, err, sizeof err),
                     BLOOMERY_ECORRUPT);
    assert_string_equal(err, "chunk 2 loaded twice");
    assert_int_equal(bloomery_loader_chunk_placed(l, 2, NULL, 0, sum ^ 1, err, sizeof err),
                     BLOOMERY_ECORRUPT);
    assert_string_equal(err, "chunk 2 checksum mismatch");
    size_t dl = 1;
    assert_null(bloomery_loader_chunk_dest(l, n, &dl));
    assert_int_equal(dl, 0);
    assert_int_equal(bloomery_loader_chunk_placed(l, n, NULL, 0, 0, err, sizeof err),
                     BLOOMERY_ECORRUPT);
    assert_non_null(strstr(err, "out of range"));
    bloomery_object back;
    assert_int_equal(bloomery_loader_finish(l, &back), BLOOMERY_OK);
    bloomery_loader_free(l);
    same_answers(o, back);
    bloomery_object_free(&back);

    /* A damaged chunk written in place fails its check and is not counted:
     * the object is never handed over. */
    assert_int_equal(bloomery_loader_open(&l, h, hl, MAX_BYTES, &used), BLOOMERY_OK);
    for (uint64_t k = 0; k < n; k++) {
        c = bloomery_image_chunk(img, k, &cl);
        uint8_t *d = bloomery_loader_chunk_dest(l, k, &dl);
        assert_non_null(d);
        memcpy(d, c, cl);
        sum = bloomery_image_chunk_checksum(img, k, c, cl);
        if (k == n / 2)
            d[cl / 2] ^= 0x40;
        assert_int_equal(bloomery_loader_chunk_placed(l, k, NULL, 0, sum, err, sizeof err),
                         k == n / 2 ? BLOOMERY_ECORRUPT : BLOOMERY_OK);
    }
    assert_int_equal(bloomery_loader_finish(l, &back), BLOOMERY_ETRUNC);
    bloomery_loader_free(l);
    bloomery_image_free(img);
    bloomery_object_free(&o);
}

static void test_loader_chunks(void **state)
{
    (void)state;
    bloomery_object o = make(BLOOMERY_TYPE_SCALABLE, 0);
    bloomery_image *img;
    assert_int_equal(bloomery_image_create(&img, o, 64), BLOOMERY_OK);
    size_t hl;
    const uint8_t *h = bloomery_image_header(img, &hl);
    uint64_t n = bloomery_image_nchunks(img);
    assert_true(n > 3);

    bloomery_loader *l;
    size_t used;
    assert_int_equal(bloomery_loader_open(&l, h, hl, MAX_BYTES, &used), BLOOMERY_OK);
    assert_int_equal(used, hl);
    assert_int_equal(bloomery_loader_nchunks(l), n);
    /* Reverse order is fine; a chunk in another's place is not. */
    for (uint64_t k = n; k-- > 0;) {
        size_t cl;
        const uint8_t *c = bloomery_image_chunk(img, k, &cl);
        uint64_t sum = bloomery_image_chunk_checksum(img, k, c, cl);
        if (k > 0) {
            size_t pl;
            const uint8_t *prev = bloomery_image_chunk(img, k - 1, &pl);
            if (pl == cl)
                assert_int_equal(
                    bloomery_loader_chunk(l, k, prev, pl,
                                          bloomery_image_chunk_checksum(img, k - 1, prev, pl)),
                    BLOOMERY_ECORRUPT);
        }
        if (k == 1) {
            bloomery_object none;
            assert_int_equal(bloomery_loader_finish(l, &none), BLOOMERY_ETRUNC);
        }
        assert_int_equal(bloomery_loader_chunk(l, k, c, cl, sum), BLOOMERY_OK);
        if (k == n - 1)
            assert_int_equal(bloomery_loader_chunk(l, k, c, cl, sum), BLOOMERY_ECORRUPT);
    }
    assert_int_equal(bloomery_loader_chunk(l, n, NULL, 0, 0), BLOOMERY_ECORRUPT);
    bloomery_object back;
    assert_int_equal(bloomery_loader_finish(l, &back), BLOOMERY_OK);
    bloomery_loader_free(l);
    same_answers(o, back);
    bloomery_object_free(&back);

    /* The size limit is enforced before anything is allocated. */
    assert_int_equal(bloomery_loader_open(&l, h, hl, 16, &used), BLOOMERY_ETOOBIG);
    assert_non_null(strstr(bloomery_loader_error(l), "exceeds"));
    bloomery_loader_free(l);
    bloomery_image_free(img);
    bloomery_object_free(&o);
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A forged cuckoo header with a valid checksum but an impossible shape is
 * refused when opened, before any chunk. */
static void test_cuckoo_forged_shapes(void **state)
{
    (void)state;
    bloomery_object o = make(BLOOMERY_TYPE_CUCKOO, 0);
    uint8_t *blob;
    size_t len;
    assert_int_equal(bloomery_serialize(o, 128, &blob, &len), BLOOMERY_OK);
    uint32_t plen = blob[16] | blob[17] << 8, nreg = blob[20] | blob[21] << 8;
    size_t hlen = 24 + plen + 8 * (size_t)nreg + 8;
    /* params: u64 nbuckets, u32 b, f, iterations, expansion, max filters,
     * nfilters, u64 items, deletes */
    struct {
        size_t off;
        int width;
        uint64_t value;
    } bad[] = {
        {0, 8, 0},      {0, 8, 3},         {0, 8, 32},        {8, 4, 0},      {8, 4, 256},
        {8, 4, 3},      {12, 4, 7},        {12, 4, 33},       {12, 4, 9},     {16, 4, 0},
        {16, 4, 65536}, {20, 4, 3},        {20, 4, 0},        {20, 4, 65536}, {24, 4, 0},
        {28, 4, 0},     {28, 4, nreg + 1}, {24 + plen, 8, 0}, /* first region length */
    };
    uint8_t *copy = malloc(len);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(copy, blob, len);
        size_t at = bad[i].off < plen ? 24 + bad[i].off : bad[i].off;
        put_le(copy + at, bad[i].value, bad[i].width);
        put_le(copy + hlen - 8, XXH3_64bits(copy, hlen - 8), 8);
        bloomery_loader *l;
        size_t used;
        int rc = bloomery_loader_open(&l, copy, len, MAX_BYTES, &used);
        if (rc == BLOOMERY_OK)
            fail_msg("forged field at %zu = %llu accepted", bad[i].off,
                     (unsigned long long)bad[i].value);
        bloomery_loader_free(l);
    }
    /* The unmodified header, re-signed, still opens. */
    memcpy(copy, blob, len);
    bloomery_loader *l;
    assert_int_equal(bloomery_loader_open(&l, copy, len, MAX_BYTES, NULL), BLOOMERY_OK);
    assert_int_equal(bloomery_loader_type(l), BLOOMERY_TYPE_CUCKOO);
    bloomery_loader_free(l);
    free(copy);
    free(blob);
    bloomery_object_free(&o);
}

/* A prefix chain's header with a valid checksum but an impossible link is
 * refused when opened; bins whose checksums are right but whose header
 * holds more fingerprints than a bin can are refused with their chunk, or
 * when the load finishes, before the chain is used. */
static void test_prefix_forged(void **state)
{
    (void)state;
    bloomery_object o = make(BLOOMERY_TYPE_SCALABLE, 2);
    uint8_t *blob;
    size_t len;
    assert_int_equal(bloomery_serialize(o, 128, &blob, &len), BLOOMERY_OK);
    uint32_t plen = blob[16] | blob[17] << 8;
    size_t hlen = 24 + plen + 8 * (size_t)(blob[20] | blob[21] << 8) + 8;
    /* params: u8 layout, u32 expansion, u64 capacity, f64 p, u64 seed, u32
     * links; link 0 from 33: u64 bins, u32 r, S, Q, f64 load, u64 capacity,
     * f64 p, u64 count, spared, then the spare's u64 blocks, u32 b, ... */
    struct {
        size_t off;
        int width;
        uint64_t value;
    } bad[] = {
        {0, 1, 3},  {33, 8, 0},  {33, 8, 1000}, {41, 4, 0},   {41, 4, 40},
        {45, 4, 0}, {45, 4, 60}, {49, 4, 0},    {49, 4, 600}, {53, 8, 0},
        {61, 8, 0}, {69, 8, 0},  {93, 8, 0},    {101, 4, 0},  {101, 4, 99},
    };
    uint8_t *copy = malloc(len);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(copy, blob, len);
        put_le(copy + 24 + bad[i].off, bad[i].value, bad[i].width);
        put_le(copy + hlen - 8, XXH3_64bits(copy, hlen - 8), 8);
        bloomery_loader *l;
        if (bloomery_loader_open(&l, copy, len, MAX_BYTES, NULL) == BLOOMERY_OK)
            fail_msg("forged field at %zu = %llu accepted", bad[i].off,
                     (unsigned long long)bad[i].value);
        bloomery_loader_free(l);
    }
    free(copy);

    /* Chunks of whole bins (64 bytes) are checked as each arrives, by
     * bloomery_loader_chunk and by bloomery_loader_chunk_placed (in place
     * and from a buffer); chunks that split bins (96) at finish. */
    for (int mode = 0; mode < 4; mode++)
        for (int forge = 0; forge < 2; forge++) {
            uint32_t cs = mode == 3 ? 96 : 64;
            bloomery_image *img;
            assert_int_equal(bloomery_image_create(&img, o, cs), BLOOMERY_OK);
            size_t hl;
            const uint8_t *h = bloomery_image_header(img, &hl);
            bloomery_loader *l;
            assert_int_equal(bloomery_loader_open(&l, h, hl, MAX_BYTES, NULL), BLOOMERY_OK);
            int refused = 0;
            char err[160] = "";
            for (uint64_t k = 0; k < bloomery_image_nchunks(img); k++) {
                size_t cl, dl;
                const uint8_t *c = bloomery_image_chunk(img, k, &cl);
                uint8_t buf[96];
                memcpy(buf, c, cl);
                if (forge && k == 0)
                    memset(buf, 0xff, 16); /* the first bin's header: 128 ones */
                uint64_t sum = bloomery_image_chunk_checksum(img, k, buf, cl);
                int rc;
                if (mode == 1) {
                    memcpy(bloomery_loader_chunk_dest(l, k, &dl), buf, cl);
                    rc = bloomery_loader_chunk_placed(l, k, NULL, 0, sum, err, sizeof err);
                } else if (mode == 2) {
                    rc = bloomery_loader_chunk_placed(l, k, buf, cl, sum, err, sizeof err);
                } else {
                    rc = bloomery_loader_chunk(l, k, buf, cl, sum);
                    if (rc != BLOOMERY_OK)
                        snprintf(err, sizeof err, "%s", bloomery_loader_error(l));
                }
                if (rc != BLOOMERY_OK) {
                    assert_int_equal(rc, BLOOMERY_ECORRUPT);
                    assert_true(forge && k == 0 && mode < 3);
                    assert_string_equal(err, "chunk 0 has a prefix bin with too many fingerprints");
                    refused++;
                    if (mode == 1) {
                        /* Refused in place: zeroed again, and the right bytes
                         * may follow from a buffer (all-zero pages skipped). */
                        const uint8_t *d = bloomery_loader_chunk_dest(l, k, &dl);
                        for (size_t b = 0; b < cl; b++)
                            assert_int_equal(d[b], 0);
                        assert_int_equal(bloomery_loader_chunk_placed(
                                             l, k, c, cl,
                                             bloomery_image_chunk_checksum(img, k, c, cl), err,
                                             sizeof err),
                                         BLOOMERY_OK);
                    }
                }
            }
            assert_int_equal(refused, forge && mode < 3);
            bloomery_object back;
            if (forge && mode != 1) {
                assert_int_equal(bloomery_loader_finish(l, &back),
                                 mode < 3 ? BLOOMERY_ETRUNC : BLOOMERY_ECORRUPT);
                if (mode == 3)
                    assert_non_null(strstr(bloomery_loader_error(l), "too many"));
            } else {
                assert_int_equal(bloomery_loader_finish(l, &back), BLOOMERY_OK);
                same_answers(o, back);
                bloomery_object_free(&back);
                /* Spent: nothing reaches the object it handed over. */
                assert_int_equal(bloomery_loader_chunk_placed(l, 0, NULL, 0, 0, err, sizeof err),
                                 BLOOMERY_ESTATE);
                assert_int_equal(bloomery_loader_chunk(l, 0, NULL, 0, 0), BLOOMERY_ESTATE);
            }
            bloomery_loader_free(l);
            bloomery_image_free(img);
        }

    /* Through bloomery_deserialize (whose chunks sit unaligned in the blob),
     * with chunks of two bins: the last bin of link 0's bins forged (in its
     * region's last chunk), every later chunk left as it was. */
    for (int forge = 0; forge < 2; forge++) {
        bloomery_image *img;
        assert_int_equal(bloomery_image_create(&img, o, 128), BLOOMERY_OK);
        uint64_t bins = pf_data_bytes(sbf_link_prefix(o.u.sbf, 0));
        size_t at;
        uint64_t bad = bloomery_image_chunk_at(img, 0, bins - 64, &at);
        size_t hl;
        const uint8_t *h = bloomery_image_header(img, &hl);
        uint64_t n = bloomery_image_nchunks(img);
        uint8_t *flat = malloc(hl + n * (128 + 8)), *w = flat;
        memcpy(w, h, hl);
        w += hl;
        for (uint64_t k = 0; k < n; k++) {
            size_t cl;
            const uint8_t *c = bloomery_image_chunk(img, k, &cl);
            memcpy(w, c, cl);
            if (forge && k == bad)
                memset(w + at, 0xff, 16);
            put_le(w + cl, bloomery_image_chunk_checksum(img, k, w, cl), 8);
            w += cl + 8;
        }
        bloomery_object back;
        const char *msg = NULL;
        int rc = bloomery_deserialize(flat, (size_t)(w - flat), MAX_BYTES, &back, &msg);
        if (forge) {
            assert_int_equal(rc, BLOOMERY_ECORRUPT);
            assert_non_null(strstr(msg, "too many"));
        } else {
            assert_int_equal(rc, BLOOMERY_OK);
            same_answers(o, back);
            bloomery_object_free(&back);
        }
        free(flat);
        bloomery_image_free(img);
    }
    free(blob);
    bloomery_object_free(&o);
}

/* A growing chain's header and tables, forged: fields that no filter has,
 * then tables that no filter writes (moved buckets where none may be, a
 * pool entry of no bucket). */
static void test_growing_forged(void **state)
{
    (void)state;
    bloomery_object o = make(BLOOMERY_TYPE_SCALABLE, 3);
    gf_t *g = sbf_link_growing(o.u.sbf, 0);
    gf_state st;
    gf_get_state(g, &st);
    assert_int_equal(st.ntables, 2);
    uint8_t *blob;
    size_t len;
    assert_int_equal(bloomery_serialize(o, 128, &blob, &len), BLOOMERY_OK);
    uint32_t plen = blob[16] | blob[17] << 8;
    size_t hlen = 24 + plen + 8 * (size_t)(blob[20] | blob[21] << 8) + 8;
    /* params: u8 layout, u32 expansion, u64 capacity, f64 p, u64 seed, u32
     * links; from 33: u64 salt, count, u32 tables, u64 buckets 0 and 1,
     * cursor. */
    uint64_t nb = st.buckets[0];
    struct {
        size_t off;
        int width;
        uint64_t value;
    } bad[] = {
        {0, 1, 4},           {1, 4, 0},       {1, 4, 40000}, {13, 8, 0},  {29, 4, 2},
        {49, 4, 0},          {49, 4, 1},      {49, 4, 3},    {53, 8, 0},  {53, 8, nb + 1},
        {53, 8, 1ULL << 40}, {61, 8, nb * 4}, {61, 8, 0},    {69, 8, nb}, {69, 8, UINT64_MAX},
    };
    uint8_t *copy = malloc(len);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(copy, blob, len);
        put_le(copy + 24 + bad[i].off, bad[i].value, bad[i].width);
        put_le(copy + hlen - 8, XXH3_64bits(copy, hlen - 8), 8);
        bloomery_object back;
        if (bloomery_deserialize(copy, len, MAX_BYTES, &back, NULL) == BLOOMERY_OK)
            fail_msg("forged field at %zu = %llu accepted", bad[i].off,
                     (unsigned long long)bad[i].value);
    }
    free(copy);
    free(blob);

    /* Tables: 0 as made; 1 a moved bucket past the cursor is fine; 2 an
     * unmoved one before it; 3 a moved bucket once settled; 4 a moved one
     * in the second table; 5 a pool entry of no bucket; 6 one whose marker
     * is below a new fingerprint's; 7 a pool with no empty entry, which
     * loads (lookups read at most POOL_PROBES entries of it). */
    for (int forge = 0; forge < 8; forge++) {
        bloomery_object f = make(BLOOMERY_TYPE_SCALABLE, 3);
        g = sbf_link_growing(f.u.sbf, 0);
        if (forge == 3)
            gf_settle(g);
        gf_get_state(g, &st);
        uint64_t bytes, bytes1;
        uint64_t *t0 = (uint64_t *)gf_table_data_mut(g, 0, &bytes);
        uint64_t *t1 = st.ntables > 1 ? (uint64_t *)gf_table_data_mut(g, 1, &bytes1) : NULL;
        if (forge == 1)
            t0[8 * (st.buckets[0] - 1) + 7] |= 1ULL << 63;
        if (forge == 2)
            t0[7] &= ~(1ULL << 63);
        if (forge == 3 || forge == 4)
            (forge == 3 ? t0 : t1)[7] |= 1ULL << 63;
        if (forge == 5)
            t0[8 * st.buckets[0]] = st.buckets[0] << 27 | 1;
        if (forge == 6)
            t0[8 * st.buckets[0]] = 1;
        for (uint64_t i = 8 * st.buckets[0]; forge == 7 && i < bytes / 8; i++)
            t0[i] = 1ULL << 26; /* bucket 0, no bits but the marker */
        uint8_t *b;
        assert_int_equal(bloomery_serialize(f, 128, &b, &len), BLOOMERY_OK);
        bloomery_object back;
        const char *msg;
        int rc = bloomery_deserialize(b, len, MAX_BYTES, &back, &msg);
        if (forge <= 1 || forge == 7) {
            assert_int_equal(rc, BLOOMERY_OK);
            bloomery_object_free(&back);
        } else {
            assert_int_equal(rc, BLOOMERY_ECORRUPT);
            assert_non_null(strstr(msg, "growing filter"));
        }
        free(b);
        bloomery_object_free(&f);
    }
    bloomery_object_free(&o);
}

static void test_garbage(void **state)
{
    (void)state;
    uint64_t seed = 1;
    uint8_t buf[512];
    for (int round = 0; round < 2000; round++) {
        size_t len = tu_next(&seed) % sizeof buf;
        for (size_t i = 0; i < len; i++)
            buf[i] = (uint8_t)tu_next(&seed);
        if (round % 2 && len >= 8)
            memcpy(buf, "BLMRYIMG", 8);
        bloomery_object o;
        const char *msg = NULL;
        assert_int_not_equal(bloomery_deserialize(buf, len, MAX_BYTES, &o, &msg), BLOOMERY_OK);
        assert_non_null(msg);
    }
}

/* bloomery_image_chunk_at locates a write barrier's byte: the chunk and
 * offset it names point at that byte of that region; bytes the image does
 * not have give UINT64_MAX. */
static void test_chunk_at(void **state)
{
    (void)state;
    cf_options o;
    cf_options_init(&o);
    o.fingerprint_bits = 12;
    cf_t *c;
    assert_int_equal(cf_create(&c, 20000, &o), BLOOMERY_OK);
    char key[32];
    for (uint64_t n = 0; cf_nfilters(c) < 3; n++)
        assert_true(cf_add(c, key, tu_key(key, "k:", n)) == 1);
    bloomery_object obj = {.type = BLOOMERY_TYPE_CUCKOO, .u.cf = c};
    bloomery_image *img;
    assert_int_equal(bloomery_image_create(&img, obj, 4096), BLOOMERY_OK);
    uint64_t seen = 0;
    for (uint32_t r = 0; r < 3; r++) {
        uint64_t bytes = cf_filter_bytes(c, r);
        for (uint64_t off = 0; off < bytes; off += 777) {
            size_t at, len;
            uint64_t i = bloomery_image_chunk_at(img, r, off, &at);
            assert_true(i < bloomery_image_nchunks(img));
            const uint8_t *p = bloomery_image_chunk(img, i, &len);
            assert_true(at < len);
            assert_ptr_equal(p + at, cf_filter_data(c, r) + off);
            seen++;
        }
        size_t at;
        uint64_t last = bloomery_image_chunk_at(img, r, bytes - 1, &at);
        assert_ptr_equal(bloomery_image_chunk(img, last, &(size_t){0}) + at,
                         cf_filter_data(c, r) + bytes - 1);
        assert_int_equal(bloomery_image_chunk_at(img, r, bytes, &at), UINT64_MAX);
    }
    assert_true(seen > 100);
    assert_int_equal(bloomery_image_chunk_at(img, 3, 0, NULL), UINT64_MAX);
    bloomery_image_free(img);
    cf_free(c);
}

int main(void)
{
    /* One test per line. */
    /* clang-format off */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_every_flip_and_truncation),
        cmocka_unit_test(test_loader_chunks),
        tu_threaded_test(test_loader_in_place),
        cmocka_unit_test(test_cuckoo_forged_shapes),
        cmocka_unit_test(test_prefix_forged),
        cmocka_unit_test(test_growing_forged),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_chunk_at),
    };
    /* clang-format on */
    return cmocka_run_group_tests_name("serial", tests, NULL, NULL);
}

/* HyperLogLog: byte-for-byte agreement with values recorded from Redis 7.0.15
 * (tests/vectors/redis-hll.json, the value of the element "a" and the count
 * of e:0..e:999999), estimator accuracy, merge/union, and rejection of malformed
 * values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomery/bloomery.h"
#include "bloomery/hll.h"
#include "bloomery/murmur.h"
#include "testutil.h"

#define HDR 16

static tu_flat *vec;

static int load_vectors(void **state)
{
    (void)state;
    vec = tu_flat_load("redis-hll");
    if (!vec)
        fprintf(stderr, "cannot load %s\n", tu_vector_path("redis-hll.flat"));
    return vec ? 0 : -1;
}

static int free_vectors(void **state)
{
    (void)state;
    tu_flat_free(vec);
    return 0;
}

/* A JSON string field holding hex, decoded to the bytes it describes. */
static unsigned char *vec_hex(const char *path, size_t *len)
{
    size_t hlen;
    unsigned char *hex = tu_flat_str(vec, path, &hlen);
    if (!hex)
        return NULL;
    unsigned char *out = tu_hex_decode((const char *)hex, hlen, len);
    free(hex);
    return out;
}

static unsigned char *vec_text(const char *path)
{
    size_t len;
    unsigned char *s = tu_flat_str(vec, path, &len);
    assert_non_null(s);
    s[len] = '\0'; /* tu_hex_decode leaves one spare byte */
    return s;
}

static hll_t *new_hll(void)
{
    hll_t *h;
    assert_int_equal(hll_create(&h, 0), BLOOMERY_OK);
    return h;
}

static void add_range(hll_t *h, const char *prefix, uint64_t from, uint64_t to)
{
    char key[32];
    for (uint64_t i = from; i < to; i++) {
        size_t n = tu_key(key, prefix, i);
        assert_true(hll_add(h, key, n) >= 0);
    }
}

static uint64_t count(hll_t *h)
{
    uint64_t c;
    assert_int_equal(hll_count(h, &c), BLOOMERY_OK);
    return c;
}

static int encoding(const hll_t *h)
{
    size_t len;
    return hll_bytes(h, &len)[4];
}

static size_t strlen_of(const hll_t *h)
{
    size_t len;
    hll_bytes(h, &len);
    return len;
}

static void assert_same_registers(const hll_t *a, const hll_t *b)
{
    for (unsigned j = 0; j < HLL_REGISTERS; j++)
        if (hll_register(a, j) != hll_register(b, j))
            fail_msg("register %u: %d vs %d", j, hll_register(a, j), hll_register(b, j));
}

static hll_t *copy_of(const hll_t *h)
{
    size_t len;
    const uint8_t *b = hll_bytes(h, &len);
    hll_t *c;
    assert_int_equal(hll_from_bytes(&c, b, len, 0), BLOOMERY_OK);
    return c;
}

/* ---- the element "a" ---- */

static void test_single_a(void **state)
{
    (void)state;
    assert_true(bloomery_murmur64a("a", 1, 0xadc83b19) == 0x53d2470a9b43b1a7ULL);

    hll_t *h = new_hll();
    assert_int_equal(hll_add(h, "a", 1), 1);
    assert_int_equal(hll_register(h, 12711), 2);
    for (unsigned j = 0; j < HLL_REGISTERS; j++)
        if (j != 12711)
            assert_int_equal(hll_register(h, j), 0);

    static const uint8_t expected[] = {0x48, 0x59, 0x4c, 0x4c, 0x01, 0,    0,    0,    0,    0,   0,
                                       0,    0,    0,    0,    0x80, 0x71, 0xa6, 0x84, 0x4e, 0x57};
    size_t len;
    const uint8_t *b = hll_bytes(h, &len);
    assert_int_equal(len, sizeof expected);
    assert_memory_equal(b, expected, sizeof expected);

    size_t vlen;
    unsigned char *v = vec_hex("single_a_hex", &vlen);
    assert_non_null(v);
    assert_int_equal(vlen, len);
    assert_memory_equal(b, v, len);
    free(v);

    /* Adding it again changes nothing, not even the cache flag. */
    assert_int_equal(hll_add(h, "a", 1), 0);
    assert_memory_equal(hll_bytes(h, &len), expected, sizeof expected);
    hll_free(h);
}

static void test_new_key(void **state)
{
    (void)state;
    static const uint8_t empty[] = {'H', 'Y', 'L', 'L', 1, 0, 0,    0,    0,
                                    0,   0,   0,   0,   0, 0, 0x80, 0x7f, 0xff};
    hll_t *h = new_hll();
    size_t len;
    const uint8_t *b = hll_bytes(h, &len);
    assert_int_equal(len, sizeof empty);
    assert_memory_equal(b, empty, sizeof empty);
    assert_int_equal(count(h), 0);
    /* The computed 0 is now cached: the flag is clear. */
    assert_int_equal(hll_bytes(h, &len)[15], 0);
    hll_free(h);
}

/* ---- PFCOUNT / STRLEN / GET after PFCOUNT, e:0..e:(n-1) ---- */

static void test_redis_cases(void **state)
{
    (void)state;
    long long ncases = tu_flat_int(vec, "cases");
    assert_true(ncases >= 8);
    for (long long c = 0; c < ncases; c++) {
        char path[64];
        snprintf(path, sizeof path, "cases.%lld.elements", c);
        unsigned char *el = vec_text(path);
        const char *dots = strstr((const char *)el, "..e:");
        assert_non_null(dots);
        uint64_t n = strtoull(dots + 4, NULL, 10) + 1;
        free(el);

        hll_t *h = new_hll();
        add_range(h, "e:", 0, n);
        snprintf(path, sizeof path, "cases.%lld.pfcount", c);
        uint64_t want = (uint64_t)tu_flat_int(vec, path);
        uint64_t got = count(h);
        if (got != want)
            fail_msg("n=%llu: PFCOUNT %llu, Redis %llu", (unsigned long long)n,
                     (unsigned long long)got, (unsigned long long)want);

        size_t len;
        const uint8_t *b = hll_bytes(h, &len);
        snprintf(path, sizeof path, "cases.%lld.strlen", c);
        assert_int_equal(len, (size_t)tu_flat_int(vec, path));

        snprintf(path, sizeof path, "cases.%lld.value_hex_after_pfcount", c);
        if (tu_flat_kind(vec, path) == 's') {
            size_t vlen;
            unsigned char *v = vec_hex(path, &vlen);
            assert_int_equal(vlen, len);
            assert_memory_equal(b, v, len);
            free(v);
        }
        /* A second PFCOUNT is served from the cache and changes nothing. */
        uint8_t *before = malloc(len);
        memcpy(before, b, len);
        assert_true(count(h) == want);
        assert_memory_equal(hll_bytes(h, &len), before, len);
        free(before);
        hll_free(h);
    }
}

/* ---- union and PFMERGE (vectors "union") ---- */

static void test_redis_union(void **state)
{
    (void)state;
    hll_t *h1 = new_hll(), *h2 = new_hll(), *h3 = new_hll();
    add_range(h1, "a", 0, 500);
    add_range(h2, "a", 250, 5000);

    size_t l1, l2;
    const uint8_t *v1 = hll_bytes(h1, &l1), *v2 = hll_bytes(h2, &l2);
    uint8_t *b1 = malloc(l1), *b2 = malloc(l2);
    memcpy(b1, v1, l1);
    memcpy(b2, v2, l2);

    hll_t *both[] = {h1, h2};
    uint64_t u;
    assert_int_equal(hll_count_union(both, 2, &u), BLOOMERY_OK);
    assert_true(u == (uint64_t)tu_flat_int(vec, "union.pfcount_h1_h2"));
    /* The union count caches nothing anywhere. */
    size_t len;
    assert_int_equal(strlen_of(h1), l1);
    assert_memory_equal(hll_bytes(h1, &len), b1, l1);
    assert_memory_equal(hll_bytes(h2, &len), b2, l2);

    assert_int_equal(hll_merge(h3, both, 2), BLOOMERY_OK);
    assert_true(count(h3) == (uint64_t)tu_flat_int(vec, "union.pfcount_after_pfmerge_h3"));
    assert_int_equal(strlen_of(h3), (size_t)tu_flat_int(vec, "union.h3_strlen"));
    assert_memory_equal(hll_bytes(h1, &len), b1, l1);
    assert_memory_equal(hll_bytes(h2, &len), b2, l2);

    /* NULL entries are empty keys. */
    hll_t *with_null[] = {NULL, h1, NULL, h2};
    assert_int_equal(hll_count_union(with_null, 4, &u), BLOOMERY_OK);
    assert_true(u == (uint64_t)tu_flat_int(vec, "union.pfcount_h1_h2"));
    assert_int_equal(hll_count_union(NULL, 0, &u), BLOOMERY_OK);
    assert_true(u == 0);

    free(b1);
    free(b2);
    hll_free(h1);
    hll_free(h2);
    hll_free(h3);
}

/* ---- accuracy, 1 .. 1e7 (and e:0..e:999999 = 1004277) ---- */

static void test_accuracy(void **state)
{
    (void)state;
    uint64_t top = tu_scale(10000000, 1000000);
    hll_t *h = new_hll();
    uint64_t done = 0;
    for (uint64_t n = 1; n <= top; n *= 10) {
        add_range(h, "e:", done, n);
        done = n;
        uint64_t est = count(h);
        double err = fabs((double)est - (double)n);
        /* 3 standard errors; below ~100 elements HLL is near-exact, so allow
         * a small absolute slack rather than a fraction of almost nothing. */
        double tol = fmax(3 * 0.0081 * (double)n, 2.0);
        if (err > tol)
            fail_msg("n=%llu: estimate %llu", (unsigned long long)n, (unsigned long long)est);
        if (n <= 100)
            assert_true(est == n);
        if (n == 1000000)
            assert_true(est == 1004277);
    }
    hll_free(h);
}

/* Random keys too: e:i are not special, but the spread should not be. */
static void test_accuracy_random(void **state)
{
    (void)state;
    uint64_t top = tu_scale(1000000, 100000);
    uint64_t seed = 42;
    hll_t *h = new_hll();
    uint64_t n = 0, next = 1;
    while (n < top) {
        uint64_t k = tu_next(&seed);
        assert_true(hll_add(h, &k, sizeof k) >= 0);
        if (++n == next) {
            uint64_t est = count(h);
            double tol = fmax(3 * 0.0081 * (double)n, 2.0);
            if (fabs((double)est - (double)n) > tol)
                fail_msg("n=%llu: estimate %llu", (unsigned long long)n, (unsigned long long)est);
            next = next < 10 ? next + 1 : next * 3;
        }
    }
    hll_free(h);
}

/* ---- cache semantics ---- */

static void test_cache(void **state)
{
    (void)state;
    hll_t *h = new_hll();
    add_range(h, "e:", 0, 300);
    uint64_t c = count(h);
    size_t len;
    const uint8_t *b = hll_bytes(h, &len);
    for (int i = 0; i < 8; i++)
        assert_int_equal(b[8 + i], (uint8_t)(c >> (8 * i)));

    /* A known element: no update, cache stays valid. */
    assert_int_equal(hll_add(h, "e:7", 3), 0);
    assert_int_equal(hll_bytes(h, &len)[15] & 0x80, 0);

    /* A new one that lands: only the flag bit changes in the header; the
     * stale count stays behind it, as in Redis. */
    char key[32];
    uint64_t i = 300;
    int rc;
    do {
        size_t n = tu_key(key, "x:", i++);
        rc = hll_add(h, key, n);
    } while (rc == 0);
    assert_int_equal(rc, 1);
    b = hll_bytes(h, &len);
    assert_int_equal(b[15], (uint8_t)(c >> 56) | 0x80);
    for (int k = 0; k < 7; k++)
        assert_int_equal(b[8 + k], (uint8_t)(c >> (8 * k)));

    /* A value whose cache claims a number is believed, as Redis does. */
    hll_t *f = copy_of(h);
    hll_free(h);
    size_t flen;
    const uint8_t *fb = hll_bytes(f, &flen);
    uint8_t *raw = malloc(flen);
    memcpy(raw, fb, flen);
    memset(raw + 8, 0, 8);
    raw[8] = 77;
    hll_t *g;
    assert_int_equal(hll_from_bytes(&g, raw, flen, 0), BLOOMERY_OK);
    assert_true(count(g) == 77);
    raw[15] = 0x80; /* invalid: recomputed */
    hll_free(g);
    assert_int_equal(hll_from_bytes(&g, raw, flen, 0), BLOOMERY_OK);
    assert_true(count(g) != 77);
    free(raw);
    hll_free(g);
    hll_free(f);
}

/* ---- merge and union against one HLL fed with everything ---- */

static void check_merge(uint64_t na, uint64_t nb, uint64_t nd)
{
    hll_t *a = new_hll(), *b = new_hll(), *d = new_hll(), *all = new_hll();
    add_range(a, "m:", 0, na);
    add_range(b, "m:", na / 2, na / 2 + nb);   /* overlaps a */
    add_range(d, "m:", na + nb, na + nb + nd); /* dst's own elements count */
    add_range(all, "m:", 0, na);
    add_range(all, "m:", na / 2, na / 2 + nb);
    add_range(all, "m:", na + nb, na + nb + nd);

    int any_dense = encoding(a) == 0 || encoding(b) == 0 || encoding(d) == 0;
    hll_t *srcs[] = {a, NULL, b};
    uint64_t u;
    hll_t *trio[] = {a, b, d};
    assert_int_equal(hll_count_union(trio, 3, &u), BLOOMERY_OK);

    assert_int_equal(hll_merge(d, srcs, 3), BLOOMERY_OK);
    assert_same_registers(d, all);
    size_t len;
    assert_true(hll_bytes(d, &len)[15] & 0x80);
    uint64_t c = count(d);
    assert_true(c == count(all));
    assert_true(u == c);
    if (any_dense)
        assert_int_equal(encoding(d), 0);
    if (encoding(d) == 1)
        assert_true(strlen_of(d) <= HLL_SPARSE_MAX_BYTES_DEFAULT);

    /* Merging again, or with itself, changes no register. */
    hll_t *self[] = {d, a};
    assert_int_equal(hll_merge(d, self, 2), BLOOMERY_OK);
    assert_same_registers(d, all);

    hll_free(a);
    hll_free(b);
    hll_free(d);
    hll_free(all);
}

static void test_merge(void **state)
{
    (void)state;
    check_merge(10, 20, 0);       /* sparse + sparse -> sparse */
    check_merge(300, 400, 50);    /* sparse, grows, may promote */
    check_merge(900, 900, 900);   /* sparse inputs, promotion by size */
    check_merge(100, 20000, 10);  /* dense source -> dense dst */
    check_merge(30000, 20000, 0); /* dense + dense */
    check_merge(10, 10, 50000);   /* dst dense itself */
}

static void test_merge_stays_sparse(void **state)
{
    (void)state;
    hll_t *a = new_hll(), *b = new_hll(), *d = new_hll();
    add_range(a, "s:", 0, 50);
    add_range(b, "s:", 50, 100);
    hll_t *srcs[] = {a, b};
    assert_int_equal(hll_merge(d, srcs, 2), BLOOMERY_OK);
    assert_int_equal(encoding(d), 1);
    assert_true(count(d) == 100);

    /* A tiny limit forces promotion in the middle of the merge. */
    hll_t *t;
    assert_int_equal(hll_create(&t, 40), BLOOMERY_OK);
    assert_int_equal(hll_merge(t, srcs, 2), BLOOMERY_OK);
    assert_int_equal(encoding(t), 0);
    assert_same_registers(t, d);
    assert_true(count(t) == 100);
    hll_free(a);
    hll_free(b);
    hll_free(d);
    hll_free(t);
}

/* ---- promotion and sparse_max_bytes ---- */

static void test_promotion(void **state)
{
    (void)state;
    /* With the default limit the key is dense at 3000 (vectors); with a
     * large one it stays sparse, and the count does not care. */
    hll_t *big, *dflt = new_hll();
    assert_int_equal(hll_create(&big, 16000), BLOOMERY_OK);
    char key[32];
    size_t maxlen = 0;
    for (uint64_t i = 0; i < 3000; i++) {
        size_t n = tu_key(key, "e:", i);
        assert_true(hll_add(dflt, key, n) >= 0);
        assert_true(hll_add(big, key, n) >= 0);
        if (encoding(dflt) == 1 && strlen_of(dflt) > maxlen)
            maxlen = strlen_of(dflt);
    }
    assert_true(maxlen <= 3000 && maxlen > 2900);
    assert_int_equal(encoding(dflt), 0);
    assert_int_equal(encoding(big), 1);
    assert_same_registers(dflt, big);
    assert_true(count(big) == 2981);
    assert_true(count(dflt) == 2981);

    /* An adopted value keeps the limit it is given. */
    size_t len;
    const uint8_t *b = hll_bytes(big, &len);
    hll_t *small;
    assert_int_equal(hll_from_bytes(&small, b, len, 0), BLOOMERY_OK);
    assert_int_equal(encoding(small), 1);
    int rc;
    uint64_t i = 0;
    do {
        size_t n = tu_key(key, "p:", i++);
        rc = hll_add(small, key, n);
    } while (encoding(small) == 1 && i < 100000);
    assert_int_equal(rc, 1);
    assert_int_equal(encoding(small), 0);
    assert_int_equal(strlen_of(small), HLL_DENSE_SIZE);
    hll_free(small);
    hll_free(big);
    hll_free(dflt);
}

/* Elements whose run length does not fit a sparse VAL (found by search; one
 * in 2^32 does). Each is the 8 little-endian bytes of the integer. */
static void le64(uint8_t *out, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

static void test_promotion_by_value(void **state)
{
    (void)state;
    /* Checked against Redis 7.0.15: PFADD k e:0..e:9; PFCOUNT k; PFADD k
     * <3130853818 LE> -> 1, dense, header 48594c4c 00 000000
     * 0a00000000000080 (old cache carried over, then invalidated), register
     * 3655 = 33, 11 registers set; PFCOUNT -> 11. */
    uint8_t big[8];
    le64(big, 3130853818ULL);
    hll_t *h = new_hll();
    add_range(h, "e:", 0, 10);
    assert_true(count(h) == 10);
    hll_t *before = copy_of(h);
    assert_int_equal(hll_add(h, big, sizeof big), 1);

    static const uint8_t hdr[16] = {'H', 'Y', 'L', 'L', 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, 0, 0, 0x80};
    size_t len;
    const uint8_t *b = hll_bytes(h, &len);
    assert_int_equal(len, HLL_DENSE_SIZE);
    assert_memory_equal(b, hdr, 16);
    int set = 0;
    for (unsigned j = 0; j < HLL_REGISTERS; j++) {
        int v = hll_register(h, j);
        set += v != 0;
        if (j == 3655)
            assert_int_equal(v, 33);
        else
            assert_int_equal(v, hll_register(before, j));
    }
    assert_int_equal(set, 11);
    assert_true(count(h) == 11);
    assert_int_equal(hll_bytes(h, &len)[8], 0x0b);
    assert_int_equal(hll_add(h, big, sizeof big), 0);

    /* Count 36, on a value that is already dense. */
    le64(big, 16048431967ULL);
    assert_int_equal(hll_add(h, big, sizeof big), 1);
    assert_int_equal(hll_register(h, 14662), 36);
    hll_free(before);
    hll_free(h);
}

/* ---- dense packing ---- */

static void test_dense_packing(void **state)
{
    (void)state;
    uint8_t *raw = calloc(1, HLL_DENSE_SIZE);
    memcpy(raw, "HYLL", 4);
    raw[15] = 0x80;
    uint64_t seed = 7;
    for (size_t i = HDR; i < HLL_DENSE_SIZE; i++)
        raw[i] = (uint8_t)tu_next(&seed);
    hll_t *h;
    assert_int_equal(hll_from_bytes(&h, raw, HLL_DENSE_SIZE, 0), BLOOMERY_OK);
    for (unsigned j = 0; j < HLL_REGISTERS; j++) {
        unsigned v = 0;
        for (unsigned k = 0; k < 6; k++) {
            unsigned bit = 6 * j + k;
            v |= (unsigned)((raw[HDR + bit / 8] >> (bit % 8)) & 1) << k;
        }
        assert_int_equal(hll_register(h, j), (int)v);
    }
    /* Registers above 51 are foreign but must not break counting. */
    uint64_t c;
    assert_int_equal(hll_count(h, &c), BLOOMERY_OK);
    hll_free(h);

    /* Setting the last register must not disturb its neighbours. */
    memset(raw + HDR, 0, HLL_DENSE_SIZE - HDR);
    assert_int_equal(hll_from_bytes(&h, raw, HLL_DENSE_SIZE, 0), BLOOMERY_OK);
    hll_t *src = new_hll();
    add_range(src, "d:", 0, 40000);
    hll_t *one[] = {src};
    assert_int_equal(hll_merge(h, one, 1), BLOOMERY_OK);
    assert_same_registers(h, src);
    assert_true(count(h) == count(src));
    hll_free(src);
    hll_free(h);
    free(raw);
}

/* ---- rejection of malformed values ---- */

static void expect_reject(const uint8_t *b, size_t len, int err)
{
    hll_t *h = (hll_t *)&h; /* must be reset to NULL */
    int rc = hll_from_bytes(&h, b, len, 0);
    if (rc != err)
        fail_msg("len %zu: got %d, want %d", len, rc, err);
    assert_null(h);
}

static void test_reject_type(void **state)
{
    (void)state;
    hll_t *h = new_hll();
    add_range(h, "e:", 0, 20);
    size_t len;
    const uint8_t *b = hll_bytes(h, &len);
    uint8_t *v = malloc(HLL_DENSE_SIZE + 1);

    for (size_t n = 0; n < HDR; n++)
        expect_reject(b, n, BLOOMERY_ETYPE);

    memcpy(v, b, len);
    v[0] = 'h';
    expect_reject(v, len, BLOOMERY_ETYPE);
    memcpy(v, b, len);
    v[3] = 'X';
    expect_reject(v, len, BLOOMERY_ETYPE);
    for (int enc = 2; enc < 256; enc++) {
        memcpy(v, b, len);
        v[4] = (uint8_t)enc;
        expect_reject(v, len, BLOOMERY_ETYPE);
    }

    /* Dense: the size is exact. */
    memset(v, 0, HLL_DENSE_SIZE + 1);
    memcpy(v, "HYLL", 4);
    expect_reject(v, HLL_DENSE_SIZE - 1, BLOOMERY_ETYPE);
    expect_reject(v, HLL_DENSE_SIZE + 1, BLOOMERY_ETYPE);
    expect_reject(v, HDR, BLOOMERY_ETYPE);
    hll_t *ok;
    assert_int_equal(hll_from_bytes(&ok, v, HLL_DENSE_SIZE, 0), BLOOMERY_OK);
    assert_true(count(ok) == 0);
    hll_free(ok);

    /* The unused bytes are not checked, as in Redis. */
    memcpy(v, b, len);
    v[5] = 1;
    assert_int_equal(hll_from_bytes(&ok, v, len, 0), BLOOMERY_OK);
    hll_free(ok);

    free(v);
    hll_free(h);
}

static void test_reject_sparse(void **state)
{
    (void)state;
    uint8_t v[64] = {'H', 'Y', 'L', 'L', 1};
    hll_t *ok;

    /* Header alone: no registers at all. */
    expect_reject(v, HDR, BLOOMERY_ECORRUPT);

    /* XZERO 16383: one short; + ZERO 1 fixes it; + another is one over. */
    v[16] = 0x7f;
    v[17] = 0xfe;
    expect_reject(v, 18, BLOOMERY_ECORRUPT);
    v[18] = 0x00;
    assert_int_equal(hll_from_bytes(&ok, v, 19, 0), BLOOMERY_OK);
    hll_free(ok);
    v[19] = 0x00;
    expect_reject(v, 20, BLOOMERY_ECORRUPT);
    /* A VAL run crossing the end. */
    v[18] = 0x81; /* value 1 x2 */
    expect_reject(v, 19, BLOOMERY_ECORRUPT);
    v[18] = 0x80; /* value 1 x1 */
    assert_int_equal(hll_from_bytes(&ok, v, 19, 0), BLOOMERY_OK);
    assert_int_equal(hll_register(ok, 16383), 1);
    hll_free(ok);
    /* A lone XZERO first byte at the end. */
    v[18] = 0x40;
    expect_reject(v, 19, BLOOMERY_ECORRUPT);
    /* Several XZERO of the full size. */
    v[16] = 0x7f;
    v[17] = 0xff;
    v[18] = 0x7f;
    v[19] = 0xff;
    expect_reject(v, 20, BLOOMERY_ECORRUPT);
    /* Zero-heavy junk that sums past the end in small steps. */
    memset(v + 16, 0x3f, 48);
    expect_reject(v, 64, BLOOMERY_ECORRUPT);

    /* Every truncation of valid sparse values. */
    for (uint64_t n = 1; n <= 1000; n *= 10) {
        hll_t *h = new_hll();
        add_range(h, "e:", 0, n);
        size_t len;
        const uint8_t *b = hll_bytes(h, &len);
        for (size_t t = 0; t < len; t++)
            expect_reject(b, t, t < HDR ? BLOOMERY_ETYPE : BLOOMERY_ECORRUPT);
        hll_free(h);
    }
}

static void test_bad_args(void **state)
{
    (void)state;
    hll_t *h = new_hll();
    uint64_t c;
    assert_int_equal(hll_create(NULL, 0), BLOOMERY_EINVAL);
    assert_int_equal(hll_from_bytes(NULL, (const uint8_t *)"HYLL", 4, 0), BLOOMERY_EINVAL);
    assert_int_equal(hll_add(NULL, "a", 1), BLOOMERY_EINVAL);
    assert_int_equal(hll_add(h, NULL, 1), BLOOMERY_EINVAL);
    assert_int_equal(hll_add(h, NULL, 0), 1); /* the empty string is an element */
    assert_int_equal(hll_add(h, "", 0), 0);
    assert_int_equal(hll_count(NULL, &c), BLOOMERY_EINVAL);
    assert_int_equal(hll_count(h, NULL), BLOOMERY_EINVAL);
    assert_int_equal(hll_count_union(NULL, 1, &c), BLOOMERY_EINVAL);
    assert_int_equal(hll_merge(NULL, NULL, 0), BLOOMERY_EINVAL);
    assert_int_equal(hll_merge(h, NULL, 1), BLOOMERY_EINVAL);
    assert_int_equal(hll_register(h, HLL_REGISTERS), BLOOMERY_EINVAL);
    assert_int_equal(hll_register(NULL, 0), BLOOMERY_EINVAL);
    hll_free(NULL);
    hll_free(h);
}

/* ---- round trip ---- */

static void test_round_trip(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {0, 1, 10, 1000, 2500, 5000};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        hll_t *h = new_hll();
        add_range(h, "r:", 0, sizes[s]);
        if (s & 1)
            count(h);
        hll_t *c = copy_of(h);
        size_t la, lb;
        const uint8_t *a = hll_bytes(h, &la), *b = hll_bytes(c, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(a, b, la);

        /* The copy goes on exactly as the original would. */
        add_range(h, "q:", 0, 700);
        add_range(c, "q:", 0, 700);
        assert_true(count(h) == count(c));
        a = hll_bytes(h, &la);
        b = hll_bytes(c, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(a, b, la);
        hll_free(h);
        hll_free(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_a),
        cmocka_unit_test(test_new_key),
        cmocka_unit_test(test_redis_cases),
        cmocka_unit_test(test_redis_union),
        cmocka_unit_test(test_accuracy),
        cmocka_unit_test(test_accuracy_random),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_merge_stays_sparse),
        cmocka_unit_test(test_promotion),
        cmocka_unit_test(test_promotion_by_value),
        cmocka_unit_test(test_dense_packing),
        cmocka_unit_test(test_reject_type),
        cmocka_unit_test(test_reject_sparse),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_round_trip),
    };
    return cmocka_run_group_tests(tests, load_vectors, free_vectors);
}

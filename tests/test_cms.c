/* Count-min sketch: RedisBloom's placement (its flow tests' answers, which
 * depend on which items share counters), the error bound measured with a
 * fixed seed, refused overflows that change nothing, weighted merges, the
 * batch path, and images that load back identical while every truncation,
 * byte change and forged counter is refused. */
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
#include "bloomery/cms.h"
#include "fastmod.h"
#include "bloomery/murmur.h"
#include "murmur2_x8.h"
#include "testutil.h"

#define MAX_BYTES (1ULL << 30)

static cms_t *new_cms(uint64_t w, uint64_t d)
{
    cms_t *c;
    assert_int_equal(cms_create(&c, w, d), BLOOMERY_OK);
    return c;
}

static uint32_t incr(cms_t *c, const char *item, uint64_t n)
{
    uint32_t est = 0;
    assert_int_equal(cms_incrby(c, item, strlen(item), n, &est), BLOOMERY_OK);
    return est;
}

static uint32_t query(const cms_t *c, const char *item) { return cms_query(c, item, strlen(item)); }

static void test_murmur2(void **state)
{
    (void)state;
    /* The published algorithm's values for these inputs. */
    assert_int_equal(bloomery_murmur2("", 0, 0), 0);
    assert_int_equal(bloomery_murmur2("", 0, 1), 0x5bd15e36u);
    /* Tails of 1..3 bytes and whole blocks hash differently from their
     * prefixes and from other seeds. */
    uint32_t a = bloomery_murmur2("abcd", 4, 0), b = bloomery_murmur2("abcde", 5, 0);
    assert_int_not_equal(a, b);
    assert_int_not_equal(a, bloomery_murmur2("abcd", 4, 1));
}

/* RedisBloom's flow test: in a 5 x 2 sketch, "b" and "c" share a counter in
 * both rows and "a" and "d" share none with anyone. */
/* The eight-seed form gives MurmurHash2's hashes bit for bit, every tail
 * length and any seeds. */
static void test_murmur2_x8(void **state)
{
    (void)state;
    unsigned char key[64];
    for (size_t i = 0; i < sizeof(key); i++)
        key[i] = (unsigned char)(i * 37 + 11);
    uint32_t seeds[8] = {1919, 0, 1, 2, 3, 4, 5, 0xffffffffu}, h[8];
    for (size_t len = 0; len <= sizeof(key); len++) {
        murmur2_x8(key, len, seeds, h);
        for (int s = 0; s < 8; s++)
            assert_int_equal(h[s], bloomery_murmur2(key, len, seeds[s]));
        murmur2_x8_from(key + 1, len - (len > 0), 13, h);
        for (uint32_t s = 0; s < 8; s++)
            assert_int_equal(h[s], bloomery_murmur2(key + 1, len - (len > 0), 13 + s));
    }
}

static void test_redisbloom_overflow_vector(void **state)
{
    (void)state;
    const uint64_t big = (1ull << 31) - 1;
    cms_t *c = new_cms(5, 2);
    const char *items[] = {"a", "b", "c", "d"};
    uint64_t by[] = {big, 10, 7, 5};
    uint32_t want1[] = {(uint32_t)big, 10, 17, 5}, want2[] = {(uint32_t)(2 * big), 27, 34, 10};
    for (int i = 0; i < 4; i++)
        assert_int_equal(incr(c, items[i], by[i]), want1[i]);
    assert_int_equal(query(c, "b"), 17);
    for (int i = 0; i < 4; i++)
        assert_int_equal(incr(c, items[i], by[i]), want2[i]);
    /* A third "a" would pass 2^32 - 1: refused, the others go through. */
    uint8_t *before = malloc(cms_width(c) * cms_depth(c) * 4);
    memcpy(before, cms_data(c), cms_width(c) * cms_depth(c) * 4);
    uint64_t count = cms_count(c);
    assert_int_equal(cms_incrby(c, "a", 1, big, NULL), BLOOMERY_EFULL);
    assert_memory_equal(before, cms_data(c), cms_width(c) * cms_depth(c) * 4);
    assert_int_equal(cms_count(c), count);
    assert_int_equal(incr(c, "b", 10), 44);
    assert_int_equal(incr(c, "c", 7), 51);
    assert_int_equal(incr(c, "d", 5), 15);
    assert_int_equal(query(c, "a"), 2 * big);
    assert_int_equal(cms_count(c), 2 * (big + 22) + 22);
    assert_int_equal(cms_check(c), BLOOMERY_OK);
    free(before);
    cms_free(c);

    /* Its small set: 2 x 2, no shared counter in at least one row. */
    c = new_cms(2, 2);
    assert_int_equal(incr(c, "foo", 10), 10);
    assert_int_equal(incr(c, "bar", 42), 42);
    assert_int_equal(incr(c, "foo", 0), 10);
    assert_int_equal(cms_count(c), 52);
    cms_free(c);
}

static void test_dims(void **state)
{
    (void)state;
    uint64_t w, d;
    assert_int_equal(cms_dims_for(0.001, 0.01, &w, &d), BLOOMERY_OK);
    assert_int_equal(w, 2000);
    assert_int_equal(d, 7);
    assert_int_equal(cms_dims_for(0.1, 0.1, &w, &d), BLOOMERY_OK);
    assert_int_equal(w, 20);
    assert_int_equal(d, 4);
    /* Single precision rounds this prob to 1: depth 0, refused. */
    assert_int_equal(cms_dims_for(0.9, 0.9999999999999999, &w, &d), BLOOMERY_EINVAL);
    assert_int_equal(cms_dims_for(1e-19, 0.9, &w, &d), BLOOMERY_EINVAL);
    assert_int_equal(cms_dims_for(0, 0.5, &w, &d), BLOOMERY_EINVAL);
    assert_int_equal(cms_dims_for(0.5, 1, &w, &d), BLOOMERY_EINVAL);
    assert_int_equal(cms_dims_for(NAN, 0.5, &w, &d), BLOOMERY_EINVAL);
    cms_t *c;
    assert_int_equal(cms_create(&c, 0, 5), BLOOMERY_EINVAL);
    assert_int_equal(cms_create(&c, 5, 0), BLOOMERY_EINVAL);
    assert_int_equal(cms_create(&c, 1ull << 33, 1ull << 33), BLOOMERY_ETOOBIG);
    assert_int_equal(cms_bytes_for(1ull << 40, 1ull << 40), 0);
}

/* Over-count beyond error * total happens for at most prob of the items
 * (plus three standard deviations of the measurement). */
static void test_error_bound(void **state)
{
    (void)state;
    const double error = 0.01, prob = 0.01;
    uint64_t w, d;
    assert_int_equal(cms_dims_for(error, prob, &w, &d), BLOOMERY_OK);
    cms_t *c = new_cms(w, d);
    const uint64_t nitems = tu_scale(20000, 4000);
    uint32_t *truth = calloc(nitems, sizeof(*truth));
    uint64_t rng = 12345, total = 0;
    char key[32];
    /* Skewed increments: item i gets about 1000 / (i + 1) on average. */
    for (uint64_t r = 0; r < 4 * nitems; r++) {
        uint64_t x = tu_next(&rng);
        uint64_t i = (x % nitems) * ((x >> 32) % nitems) / nitems;
        uint32_t by = 1 + (uint32_t)(tu_next(&rng) % 8);
        size_t len = tu_key(key, "k:", i);
        assert_int_equal(cms_incrby(c, key, len, by, NULL), BLOOMERY_OK);
        truth[i] += by;
        total += by;
    }
    assert_int_equal(cms_count(c), total);
    uint64_t over = 0, queried = 0;
    for (uint64_t i = 0; i < nitems; i++) {
        size_t len = tu_key(key, "k:", i);
        uint32_t est = cms_query(c, key, len);
        assert_true(est >= truth[i]);
        over += est - truth[i] > error * (double)total;
        queried++;
    }
    double rate = (double)over / (double)queried;
    printf("# %llu x %llu, total %llu: %.5f of %llu items over-counted beyond the bound\n",
           (unsigned long long)w, (unsigned long long)d, (unsigned long long)total, rate,
           (unsigned long long)queried);
    assert_true(rate <= tu_fpr_bound(prob, queried));
    assert_int_equal(cms_check(c), BLOOMERY_OK);
    free(truth);
    cms_free(c);
}

static void test_total_overflow(void **state)
{
    (void)state;
    cms_t *c = new_cms(100, 3);
    cms_set_count(c, (uint64_t)INT64_MAX - 5);
    assert_int_equal(cms_incrby(c, "x", 1, 6, NULL), BLOOMERY_EFULL);
    assert_int_equal(cms_count(c), (uint64_t)INT64_MAX - 5);
    assert_int_equal(query(c, "x"), 0);
    assert_int_equal(cms_incrby(c, "x", 1, 5, NULL), BLOOMERY_OK);
    /* More than a counter holds is refused outright. */
    cms_free(c);
    c = new_cms(100, 3);
    assert_int_equal(cms_incrby(c, "x", 1, 1ull << 32, NULL), BLOOMERY_EFULL);
    assert_int_equal(cms_incrby(c, "x", 1, UINT32_MAX, NULL), BLOOMERY_OK);
    assert_int_equal(cms_incrby(c, "x", 1, 1, NULL), BLOOMERY_EFULL);
    assert_int_equal(query(c, "x"), UINT32_MAX);
    cms_free(c);
}

static void test_merge(void **state)
{
    (void)state;
    cms_t *a = new_cms(1000, 5), *b = new_cms(1000, 5), *d = new_cms(1000, 5);
    cms_t *other = new_cms(999, 5);
    char key[32];
    for (uint64_t i = 0; i < 100; i++) {
        incr(a, (tu_key(key, "foo", i), key), 1);
        incr(b, (tu_key(key, "bar", i), key), 2);
    }
    const cms_t *srcs[] = {a, b};
    int64_t w11[] = {1, 1}, w_neg[] = {1, -1}, w3[] = {3, 0};
    assert_int_equal(cms_merge(d, srcs, w11, 2), BLOOMERY_OK);
    assert_int_equal(cms_count(d), 300);
    for (uint64_t i = 0; i < 100; i++) {
        assert_int_equal(query(d, (tu_key(key, "foo", i), key)), 1);
        assert_int_equal(query(d, (tu_key(key, "bar", i), key)), 2);
    }
    assert_int_equal(cms_check(d), BLOOMERY_OK);
    /* d - b is a again, d being a source of its own merge. */
    const cms_t *back[] = {d, b};
    assert_int_equal(cms_merge(d, back, w_neg, 2), BLOOMERY_OK);
    assert_memory_equal(cms_data(d), cms_data(a), 1000 * 5 * 4);
    assert_int_equal(cms_count(d), 100);
    /* Removing b again would go below zero: refused, d unchanged. */
    assert_int_equal(cms_merge(d, back, w_neg, 2), BLOOMERY_EFULL);
    assert_memory_equal(cms_data(d), cms_data(a), 1000 * 5 * 4);
    assert_int_equal(cms_count(d), 100);
    /* Weights scale. */
    assert_int_equal(cms_merge(d, srcs, w3, 2), BLOOMERY_OK);
    assert_int_equal(query(d, "foo7"), 3);
    assert_int_equal(cms_count(d), 300);
    /* A weight that overflows a counter, or 64 bits. */
    int64_t huge[] = {INT64_MAX, 1}, big[] = {1ll << 32, 0};
    assert_int_equal(cms_merge(d, srcs, huge, 2), BLOOMERY_EFULL);
    assert_int_equal(cms_merge(d, srcs, big, 2), BLOOMERY_EFULL);
    assert_int_equal(cms_count(d), 300);
    /* Dimensions must match. */
    const cms_t *mixed[] = {a, other};
    assert_int_equal(cms_merge(d, mixed, w11, 2), BLOOMERY_EINVAL);
    assert_int_equal(cms_merge(d, srcs, w11, 0), BLOOMERY_EINVAL);
    cms_free(a);
    cms_free(b);
    cms_free(d);
    cms_free(other);
}

/* The batch path gives the answers and the counters of one call per item,
 * refusals included, also for sketches deeper than a batch keeps. */
static void test_batch(void **state)
{
    (void)state;
    for (uint64_t depth = 3; depth <= 20; depth += 17) {
        cms_t *one = new_cms(50, depth), *many = new_cms(50, depth);
        enum { N = 200 };
        char keys[N][32];
        const void *items[N];
        size_t lens[N];
        uint64_t incrs[N];
        int64_t res[N];
        uint64_t rng = 7;
        for (int i = 0; i < N; i++) {
            lens[i] = tu_key(keys[i], "b:", tu_next(&rng) % 60);
            items[i] = keys[i];
            incrs[i] = i % 37 == 5 ? (uint64_t)UINT32_MAX : tu_next(&rng) % 5;
        }
        size_t refused = cms_incrby_batch(many, items, lens, incrs, N, res);
        size_t refused_one = 0;
        for (int i = 0; i < N; i++) {
            uint32_t est;
            int rc = cms_incrby(one, items[i], lens[i], incrs[i], &est);
            refused_one += rc != BLOOMERY_OK;
            assert_int_equal(res[i], rc == BLOOMERY_OK ? (int64_t)est : rc);
        }
        assert_true(refused > 0);
        assert_int_equal(refused, refused_one);
        assert_memory_equal(cms_data(one), cms_data(many), 50 * depth * 4);
        assert_int_equal(cms_count(one), cms_count(many));
        uint32_t est[N];
        cms_query_batch(many, items, lens, N, est);
        for (int i = 0; i < N; i++)
            assert_int_equal(est[i], cms_query(one, items[i], lens[i]));
        cms_free(one);
        cms_free(many);
    }
}

/* Bytes the write barrier announced, by region 0 offset. */
typedef struct marks {
    uint8_t *hooked;
    uint64_t len, calls;
} marks;

static void mark(void *ctx, uint32_t region, uint64_t off, uint64_t len)
{
    marks *m = ctx;
    assert_int_equal(region, 0);
    assert_true(off + len <= m->len);
    memset(m->hooked + off, 1, len);
    m->calls++;
}

/* Every byte an increment or a merge changes was announced first, and a
 * refused increment announces nothing. */
static void test_write_hook(void **state)
{
    (void)state;
    cms_t *c = new_cms(64, 4), *other = new_cms(64, 4);
    uint64_t bytes = 64 * 4 * 4;
    marks m = {calloc(bytes, 1), bytes, 0};
    uint8_t *before = malloc(bytes);
    char key[32];
    incr(other, "o", 3);
    cms_set_write_hook(c, mark, &m);
    for (int round = 0; round < 3; round++) {
        memcpy(before, cms_data(c), bytes);
        memset(m.hooked, 0, bytes);
        if (round < 2) {
            for (uint64_t i = 0; i < 50; i++)
                incr(c, (tu_key(key, "h:", i + 100 * (uint64_t)round), key), i % 3 + 1);
        } else {
            const cms_t *srcs[] = {c, other};
            int64_t w[] = {2, 1};
            assert_int_equal(cms_merge(c, srcs, w, 2), BLOOMERY_OK);
        }
        for (uint64_t b = 0; b < bytes; b++)
            if (before[b] != cms_data(c)[b])
                assert_true(m.hooked[b]);
    }
    uint64_t calls = m.calls;
    assert_int_equal(cms_incrby(c, "h:1", 3, 1ull << 32, NULL), BLOOMERY_EFULL);
    assert_int_equal(m.calls, calls);
    cms_set_write_hook(c, NULL, NULL);
    incr(c, "after", 1);
    assert_int_equal(m.calls, calls);
    free(m.hooked);
    free(before);
    cms_free(c);
    cms_free(other);
}

static cms_t *sample(void)
{
    cms_t *c = new_cms(40, 3);
    char key[32];
    for (uint64_t i = 0; i < 60; i++)
        incr(c, (tu_key(key, "s:", i), key), i % 7 + 1);
    return c;
}

static void test_serial_round_trip(void **state)
{
    (void)state;
    cms_t *c = sample();
    bloomery_object o = {.type = BLOOMERY_TYPE_CMS, .u.cms = c};
    uint8_t *blob;
    size_t len;
    assert_int_equal(bloomery_serialize(o, 128, &blob, &len), BLOOMERY_OK);
    bloomery_object back;
    const char *msg;
    assert_int_equal(bloomery_deserialize(blob, len, MAX_BYTES, &back, &msg), BLOOMERY_OK);
    assert_int_equal(back.type, BLOOMERY_TYPE_CMS);
    assert_int_equal(cms_width(back.u.cms), 40);
    assert_int_equal(cms_depth(back.u.cms), 3);
    assert_int_equal(cms_count(back.u.cms), cms_count(c));
    assert_memory_equal(cms_data(back.u.cms), cms_data(c), 40 * 3 * 4);
    /* A size limit below the counters refuses it. */
    bloomery_object none;
    assert_int_equal(bloomery_deserialize(blob, len, 100, &none, &msg), BLOOMERY_ETOOBIG);
    bloomery_object_free(&back);

    unsigned accepted = 0;
    uint8_t *copy = malloc(len);
    for (size_t i = 0; i < len; i++) {
        for (unsigned x = 1; x < 256; x += 3) {
            memcpy(copy, blob, len);
            copy[i] ^= (uint8_t)x;
            if (bloomery_deserialize(copy, len, MAX_BYTES, &back, NULL) == BLOOMERY_OK) {
                accepted++;
                bloomery_object_free(&back);
            }
        }
        if (bloomery_deserialize(blob, i, MAX_BYTES, &back, NULL) == BLOOMERY_OK) {
            accepted++;
            bloomery_object_free(&back);
        }
    }
    assert_int_equal(accepted, 0);
    free(copy);
    free(blob);
    cms_free(c);
}

/* Chunks with valid checksums (as a forger would make them) but counters
 * that do not sum to the total are refused at the end of the load. */
static void test_forged_counters(void **state)
{
    (void)state;
    cms_t *c = sample();
    bloomery_object o = {.type = BLOOMERY_TYPE_CMS, .u.cms = c};
    bloomery_image *img;
    assert_int_equal(bloomery_image_create(&img, o, 0), BLOOMERY_OK);
    size_t hl, cl;
    const uint8_t *h = bloomery_image_header(img, &hl);
    assert_int_equal(bloomery_image_nchunks(img), 1);
    const uint8_t *chunk = bloomery_image_chunk(img, 0, &cl);
    uint8_t *forged = malloc(cl);
    memcpy(forged, chunk, cl);
    forged[4 * 41] ^= 1; /* a counter of row 1 */
    bloomery_loader *l;
    size_t used;
    assert_int_equal(bloomery_loader_open(&l, h, hl, MAX_BYTES, &used), BLOOMERY_OK);
    assert_int_equal(
        bloomery_loader_chunk(l, 0, forged, cl, bloomery_image_chunk_checksum(img, 0, forged, cl)),
        BLOOMERY_OK);
    bloomery_object back;
    assert_int_equal(bloomery_loader_finish(l, &back), BLOOMERY_ECORRUPT);
    printf("# %s\n", bloomery_loader_error(l));
    bloomery_loader_free(l);
    free(forged);
    bloomery_image_free(img);
    cms_free(c);
}

/* The counters' placement divides a 32-bit hash by the width without a
 * division (fastmod.h): it must equal x % d for every x and d. */
static void test_fastmod(void **state)
{
    (void)state;
    const uint64_t ds[] = {
        1,          2,         3,        5,           7,           1000,       2000,
        65535,      65536,     1u << 31, 0xFFFFFFFEu, 0xFFFFFFFFu, 1ull << 32, (1ull << 32) + 1,
        1ull << 40, UINT64_MAX};
    const uint32_t xs[] = {0,    1,           2,           999,         1000,
                           1001, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu};
    uint64_t r = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < sizeof(ds) / sizeof(ds[0]) + 2000; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        uint64_t d = i < sizeof(ds) / sizeof(ds[0]) ? ds[i] : 1 + (r >> (i % 2 ? 32 : 44));
        fastmod32 f = fastmod32_of(d);
        for (size_t j = 0; j < sizeof(xs) / sizeof(xs[0]) + 2000; j++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            uint32_t x = j < sizeof(xs) / sizeof(xs[0]) ? xs[j] : (uint32_t)r;
            assert_int_equal(fastmod32_mod(f, x), x % d);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_murmur2),
        cmocka_unit_test(test_murmur2_x8),
        cmocka_unit_test(test_redisbloom_overflow_vector),
        cmocka_unit_test(test_dims),
        cmocka_unit_test(test_error_bound),
        cmocka_unit_test(test_total_overflow),
        cmocka_unit_test(test_fastmod),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_batch),
        cmocka_unit_test(test_write_hook),
        cmocka_unit_test(test_serial_round_trip),
        cmocka_unit_test(test_forged_counters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Top-k: the true heavy hitters of a Zipf stream are found (fixed seed),
 * expelled items are reported, counts saturate instead of wrapping, the same
 * operations from the same state give the same state (the decay generator
 * lives in the value), and images load back identical while truncations,
 * byte changes and forged heaps are refused. */
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
#include "bloomery/topk.h"
#include "testutil.h"

#define MAX_BYTES (1ULL << 30)

static topk_t *new_topk(uint32_t k, uint32_t w, uint32_t d, double decay, uint64_t seed)
{
    topk_t *t;
    assert_int_equal(topk_create(&t, k, w, d, decay, seed), BLOOMERY_OK);
    return t;
}

static int add(topk_t *t, const char *item, uint32_t n, topk_item *ex)
{
    int rc = topk_add(t, item, strlen(item), n, ex);
    assert_true(rc == 0 || rc == 1);
    return rc;
}

/* A Zipf(s) sample over ranks 0..n-1 from the cumulative weights. */
static uint64_t zipf(const double *cum, uint64_t n, uint64_t *rng)
{
    double u = (double)(tu_next(rng) >> 11) * 0x1p-53 * cum[n - 1];
    uint64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        if (cum[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void test_zipf_heavy_hitters(void **state)
{
    (void)state;
    const uint64_t n = 5000, draws = tu_scale(400000, 100000);
    const uint32_t k = 10;
    double *cum = malloc(n * sizeof(*cum));
    uint64_t *truth = calloc(n, sizeof(*truth));
    for (uint64_t i = 0; i < n; i++)
        cum[i] = (i ? cum[i - 1] : 0) + 1.0 / pow((double)(i + 1), 1.1);
    topk_t *t = new_topk(k, 200, 5, 0.9, 42);
    uint64_t rng = 2024;
    char key[32];
    for (uint64_t r = 0; r < draws; r++) {
        uint64_t i = zipf(cum, n, &rng);
        truth[i]++;
        size_t len = tu_key(key, "z:", i);
        int rc = topk_add(t, key, len, 1, NULL);
        assert_true(rc == 0 || rc == 1);
    }
    /* Ranks 0..k-1 are the true top k (counts fall with rank; check). */
    for (uint64_t i = 1; i < k; i++)
        assert_true(truth[i] <= truth[i - 1] + draws / 100);
    topk_item list[10];
    size_t got = topk_list(t, list);
    assert_int_equal(got, k);
    unsigned found = 0;
    for (uint64_t i = 0; i < k; i++) {
        size_t len = tu_key(key, "z:", i);
        bool in = topk_query(t, key, len);
        found += in;
        uint32_t est = topk_count(t, key, len);
        printf("# rank %llu: true %llu, estimate %u, %s\n", (unsigned long long)i,
               (unsigned long long)truth[i], est, in ? "listed" : "missing");
        /* HeavyKeeper never over-counts an item whose buckets it owns
         * alone; the top items own theirs. */
        if (in)
            assert_true(est <= truth[i] + truth[i] / 20);
    }
    /* The five heaviest always, and at least 9 of the top 10. */
    for (uint64_t i = 0; i < 5; i++)
        assert_true(topk_query(t, key, tu_key(key, "z:", i)));
    assert_true(found >= 9);
    for (size_t i = 1; i < got; i++)
        assert_true(list[i].count <= list[i - 1].count);
    free(cum);
    free(truth);
    topk_free(t);
}

static void test_expelled(void **state)
{
    (void)state;
    topk_t *t = new_topk(1, 50, 3, 0.9, 1);
    topk_item ex;
    /* An empty slot expels nothing. */
    assert_int_equal(add(t, "a", 1, &ex), 0);
    assert_true(topk_query(t, "a", 1));
    /* "b" reaches a's count and takes the only slot: "a" is reported. */
    assert_int_equal(add(t, "b", 1, &ex), 1);
    assert_int_equal(ex.len, 1);
    assert_memory_equal(ex.item, "a", 1);
    assert_false(topk_query(t, "a", 1));
    assert_true(topk_query(t, "b", 1));
    /* An item below the minimum stays out; one already in expels nothing. */
    assert_int_equal(add(t, "b", 5, &ex), 0);
    assert_int_equal(add(t, "c", 1, &ex), 0);
    assert_false(topk_query(t, "c", 1));
    assert_int_equal(topk_count(t, "b", 1), 6);
    assert_int_equal(topk_count(t, "c", 1), 1);
    /* Binary items, the empty item included. */
    assert_int_equal(topk_add(t, "x\0y", 3, 100, &ex), 1);
    assert_memory_equal(ex.item, "b", 1);
    assert_true(topk_query(t, "x\0y", 3));
    assert_false(topk_query(t, "x", 1));
    assert_int_equal(topk_add(t, "", 0, 200, &ex), 1);
    assert_int_equal(ex.len, 3);
    assert_memory_equal(ex.item, "x\0y", 3);
    topk_item list[1];
    assert_int_equal(topk_list(t, list), 1);
    assert_int_equal(list[0].len, 0);
    assert_int_equal(list[0].count, 200);
    topk_free(t);
}

/* TOPK.INCRBY 0 enters an item with count 0: in the heap, not listed. */
static void test_zero_increment(void **state)
{
    (void)state;
    topk_t *t = new_topk(3, 20, 3, 0.9, 1);
    assert_int_equal(add(t, "z", 0, NULL), 0);
    assert_true(topk_query(t, "z", 1));
    topk_item list[3];
    assert_int_equal(topk_list(t, list), 0);
    add(t, "y", 2, NULL);
    add(t, "x", 5, NULL);
    assert_int_equal(topk_list(t, list), 2);
    assert_memory_equal(list[0].item, "x", 1);
    assert_int_equal(list[0].count, 5);
    assert_memory_equal(list[1].item, "y", 1);
    topk_free(t);
}

static void test_saturation(void **state)
{
    (void)state;
    topk_t *t = new_topk(2, 10, 2, 0.9, 1);
    for (int i = 0; i < 3; i++)
        add(t, "big", UINT32_MAX / 2, NULL);
    assert_int_equal(topk_count(t, "big", 3), UINT32_MAX);
    topk_item list[2];
    assert_int_equal(topk_list(t, list), 1);
    assert_int_equal(list[0].count, UINT32_MAX);
    topk_free(t);
}

static void test_params(void **state)
{
    (void)state;
    topk_t *t;
    assert_int_equal(topk_create(&t, 0, 8, 7, 0.9, 0), BLOOMERY_EINVAL);
    assert_int_equal(topk_create(&t, 1, 0, 7, 0.9, 0), BLOOMERY_EINVAL);
    assert_int_equal(topk_create(&t, 1, 8, 0, 0.9, 0), BLOOMERY_EINVAL);
    assert_int_equal(topk_create(&t, 1, 8, 7, 0, 0), BLOOMERY_EINVAL);
    assert_int_equal(topk_create(&t, 1, 8, 7, 1.5, 0), BLOOMERY_EINVAL);
    assert_int_equal(topk_create(&t, 1, 8, 7, NAN, 0), BLOOMERY_EINVAL);
    assert_int_equal(topk_create(&t, 1, 8, 7, 1, 0), BLOOMERY_OK);
    assert_int_equal(topk_k(t), 1);
    assert_int_equal(topk_width(t), 8);
    assert_int_equal(topk_depth(t), 7);
    assert_true(topk_decay(t) == 1);
    assert_true(topk_bytes(t) >= topk_bytes_for(1, 8, 7));
    topk_free(t);
    assert_int_equal(topk_bytes_for(0, 1, 1), 0);
}

/* A contended stream: small buckets, many decays. */
static void feed(topk_t *t, uint64_t seed, uint64_t n)
{
    char key[32];
    for (uint64_t r = 0; r < n; r++) {
        uint64_t x = tu_next(&seed);
        size_t len = tu_key(key, "d:", (x % 64) * ((x >> 32) % 64) / 64);
        assert_true(topk_add(t, key, len, 1 + (uint32_t)(x >> 60), NULL) >= 0);
    }
}

static void same_state(topk_t *a, topk_t *b)
{
    assert_int_equal(topk_rng(a), topk_rng(b));
    assert_memory_equal(topk_buckets(a), topk_buckets(b), topk_buckets_bytes(a));
    size_t la, lb;
    const uint8_t *ha = topk_heap_image(a, &la);
    uint8_t *copy = malloc(la);
    memcpy(copy, ha, la);
    const uint8_t *hb = topk_heap_image(b, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(copy, hb, la);
    free(copy);
}

static void test_deterministic(void **state)
{
    (void)state;
    topk_t *a = new_topk(5, 8, 7, 0.9, 99), *b = new_topk(5, 8, 7, 0.9, 99);
    feed(a, 5, 3000);
    feed(b, 5, 3000);
    same_state(a, b);
    /* The generator moved: decays happened. */
    assert_true(topk_rng(a) != 99);
    topk_free(a);
    topk_free(b);
}

typedef struct marks {
    uint8_t *hooked;
    uint64_t len;
} marks;

static void mark(void *ctx, uint32_t region, uint64_t off, uint64_t len)
{
    marks *m = ctx;
    assert_int_equal(region, 0);
    assert_true(off + len <= m->len);
    memset(m->hooked + off, 1, len);
}

/* Every bucket byte an add changes (decays included) was announced first;
 * the heap image made before the adds stays as it was. */
static void test_write_hook(void **state)
{
    (void)state;
    topk_t *t = new_topk(4, 8, 3, 0.9, 7);
    feed(t, 1, 100);
    uint64_t bytes = topk_buckets_bytes(t);
    marks m = {calloc(bytes, 1), bytes};
    uint8_t *before = malloc(bytes);
    memcpy(before, topk_buckets(t), bytes);
    size_t hlen;
    const uint8_t *heap = topk_heap_image(t, &hlen);
    uint8_t *heap_copy = malloc(hlen);
    memcpy(heap_copy, heap, hlen);
    topk_set_write_hook(t, mark, &m);
    feed(t, 2, 300);
    for (uint64_t b = 0; b < bytes; b++)
        if (before[b] != topk_buckets(t)[b])
            assert_true(m.hooked[b]);
    assert_memory_equal(heap, heap_copy, hlen);
    topk_set_write_hook(t, NULL, NULL);
    free(m.hooked);
    free(before);
    free(heap_copy);
    topk_free(t);
}

static topk_t *sample(void)
{
    topk_t *t = new_topk(4, 8, 3, 0.9, 7);
    feed(t, 11, 200);
    return t;
}

/* Loaded back, the value is the same state: the same adds then give the
 * same answers and the same state on both. */
static void test_serial_round_trip(void **state)
{
    (void)state;
    topk_t *t = sample();
    bloomery_object o = {.type = BLOOMERY_TYPE_TOPK, .u.topk = t};
    uint8_t *blob;
    size_t len;
    assert_int_equal(bloomery_serialize(o, 64, &blob, &len), BLOOMERY_OK);
    bloomery_object back;
    const char *msg;
    int rc = bloomery_deserialize(blob, len, MAX_BYTES, &back, &msg);
    if (rc != BLOOMERY_OK)
        fail_msg("%s", msg);
    assert_int_equal(back.type, BLOOMERY_TYPE_TOPK);
    same_state(t, back.u.topk);
    feed(t, 3, 500);
    feed(back.u.topk, 3, 500);
    same_state(t, back.u.topk);
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
    topk_free(t);
}

/* Heap images a forger could checksum correctly are still checked. */
static void test_forged_heap(void **state)
{
    (void)state;
    topk_t *t = new_topk(3, 8, 3, 0.9, 7);
    add(t, "one", 3, NULL);
    add(t, "two", 2, NULL);
    size_t len;
    const uint8_t *img = topk_heap_image(t, &len);
    uint8_t *good = calloc(1, len + 1), *bad = calloc(1, len + 1);
    memcpy(good, img, len);
    topk_t *u = new_topk(3, 8, 3, 0.9, 0);
    assert_int_equal(topk_load_heap(u, good, len, 5), BLOOMERY_OK);
    assert_true(topk_query(u, "one", 3));
    assert_int_equal(topk_rng(u), 5);
    /* Find the slot of "one": 13 fixed bytes, then the item. */
    size_t at = 0;
    while (!(good[at] == 1 && memcmp(good + at + 13, "one", 3) == 0))
        at += 13 + (good[at + 9] | good[at + 10] << 8);
    struct {
        size_t off;
        uint8_t x;
    } flips[] = {
        {at, 2},              /* flag 3: neither used nor free */
        {at + 1, 1},          /* fingerprint not the item's */
        {at + 9, 1},          /* length past the item */
        {at + 13, 'o' ^ 't'}, /* item changed, fingerprint kept */
    };
    for (size_t f = 0; f < sizeof(flips) / sizeof(flips[0]); f++) {
        memcpy(bad, good, len);
        bad[flips[f].off] ^= flips[f].x;
        assert_int_equal(topk_load_heap(u, bad, len, 0), BLOOMERY_ECORRUPT);
    }
    /* Trailing bytes; a slot cut short. */
    assert_int_equal(topk_load_heap(u, good, len + 1, 0), BLOOMERY_ECORRUPT);
    assert_int_equal(topk_load_heap(u, good, len - 1, 0), BLOOMERY_ECORRUPT);
    /* A free slot with a count. */
    size_t free_at = 0;
    while (good[free_at] == 1)
        free_at += 13 + (good[free_at + 9] | good[free_at + 10] << 8);
    memcpy(bad, good, len);
    bad[free_at + 5] = 1;
    assert_int_equal(topk_load_heap(u, bad, len, 0), BLOOMERY_ECORRUPT);
    /* The same item twice. */
    memcpy(bad, good, len);
    size_t two = 0;
    while (!(bad[two] == 1 && memcmp(bad + two + 13, "two", 3) == 0))
        two += 13 + (bad[two + 9] | bad[two + 10] << 8);
    memcpy(bad + two, bad + at, 16);
    assert_int_equal(topk_load_heap(u, bad, len, 0), BLOOMERY_ECORRUPT);
    /* u kept the heap it loaded. */
    assert_true(topk_query(u, "one", 3));
    assert_true(topk_query(u, "two", 3));
    free(good);
    free(bad);
    topk_free(u);
    topk_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zipf_heavy_hitters),
        cmocka_unit_test(test_expelled),
        cmocka_unit_test(test_zero_increment),
        cmocka_unit_test(test_saturation),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_write_hook),
        cmocka_unit_test(test_serial_round_trip),
        cmocka_unit_test(test_forged_heap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

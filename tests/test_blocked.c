/* Blocked Bloom filter: no false negatives on every path, FPR at capacity
 * within the request, identical bits from both kernels, linearizable
 * check-and-add, and 64-bit sizes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomery/bloomery.h"
#include "testutil.h"

/* Keys in batches of up to 64 for the batch API. */
typedef struct keybatch {
    char buf[64][32];
    const void *ptr[64];
    size_t len[64];
} keybatch;

static size_t fill_batch(keybatch *kb, const char *prefix, uint64_t first, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        kb->len[i] = tu_key(kb->buf[i], prefix, first + i);
        kb->ptr[i] = kb->buf[i];
    }
    return n;
}

static void no_false_negatives(uint64_t n, double p, int batch)
{
    bf_t *bf;
    assert_int_equal(bf_create(&bf, n, p, NULL), BLOOMERY_OK);
    keybatch kb;
    uint8_t out[64];
    char key[32];
    for (uint64_t i = 0; i < n; i += 64) {
        size_t g = n - i < 64 ? (size_t)(n - i) : 64;
        fill_batch(&kb, "m:", i, g);
        if (batch)
            bf_add_many(bf, kb.ptr, kb.len, g, NULL);
        else
            for (size_t j = 0; j < g; j++)
                bf_add(bf, kb.ptr[j], kb.len[j]);
    }
    uint64_t missing = 0;
    for (uint64_t i = 0; i < n; i += 64) {
        size_t g = n - i < 64 ? (size_t)(n - i) : 64;
        fill_batch(&kb, "m:", i, g);
        bf_check_many(bf, kb.ptr, kb.len, g, out);
        for (size_t j = 0; j < g; j++) {
            missing += !out[j];
            if (j % 7 == 0)
                missing += !bf_check(bf, kb.ptr[j], kb.len[j]);
        }
    }
    (void)key;
    assert_int_equal(missing, 0);
    bf_free(bf);
}

static void test_no_false_negatives_single(void **state)
{
    (void)state;
    no_false_negatives(tu_scale(1000000, 50000), 0.01, 0);
    no_false_negatives(tu_scale(300000, 20000), 1e-6, 0); /* b = 2 */
    no_false_negatives(tu_scale(100000, 10000), 1e-9, 0); /* b = 4 */
}

static void test_no_false_negatives_batch(void **state)
{
    (void)state;
    no_false_negatives(tu_scale(1000000, 50000), 0.01, 1);
    no_false_negatives(tu_scale(300000, 20000), 1e-5, 1);
}

static void test_no_false_negatives_portable(void **state)
{
    (void)state;
    bf_force_portable(true);
    no_false_negatives(tu_scale(500000, 20000), 0.001, 0);
    no_false_negatives(tu_scale(500000, 20000), 0.001, 1);
    bf_force_portable(false);
}

/* 1e8 items: sizes where a 32-bit index or hash would already break. */
static void test_no_false_negatives_1e8(void **state)
{
    (void)state;
    uint64_t n = tu_scale(100000000, 1000000);
    no_false_negatives(n, 0.01, 1);
}

static void test_kernels_set_identical_bits(void **state)
{
    (void)state;
    double ps[] = {0.01, 1e-5, 1e-9};
    for (int k = 0; k < 3; k++) {
        bf_t *a, *b;
        assert_int_equal(bf_create(&a, 20000, ps[k], NULL), BLOOMERY_OK);
        assert_int_equal(bf_create(&b, 20000, ps[k], NULL), BLOOMERY_OK);
        char key[32];
        bf_force_portable(false);
        for (uint64_t i = 0; i < 20000; i++) {
            size_t len = tu_key(key, "k:", i);
            bf_add(a, key, len);
        }
        bf_force_portable(true);
        for (uint64_t i = 0; i < 20000; i++) {
            size_t len = tu_key(key, "k:", i);
            bf_add(b, key, len);
        }
        /* And each kernel reads the other's bits the same way. */
        for (uint64_t i = 0; i < 20000; i++) {
            size_t len = tu_key(key, "q:", i);
            bf_force_portable(true);
            bool pa = bf_check(a, key, len);
            bf_force_portable(false);
            assert_int_equal(pa, bf_check(a, key, len));
        }
        bf_force_portable(false);
        assert_int_equal(bf_bytes(a), bf_bytes(b));
        assert_memory_equal(bf_data(a), bf_data(b), bf_bytes(a));
        bf_free(a);
        bf_free(b);
    }
}

static void measure_fpr(double p, uint64_t n, uint64_t q)
{
    bf_t *bf;
    bf_options o = {.seed = 42};
    assert_int_equal(bf_create(&bf, n, p, &o), BLOOMERY_OK);
    keybatch kb;
    uint8_t out[64];
    for (uint64_t i = 0; i < n; i += 64) {
        size_t g = n - i < 64 ? (size_t)(n - i) : 64;
        fill_batch(&kb, "member:", i, g);
        bf_add_many(bf, kb.ptr, kb.len, g, NULL);
    }
    uint64_t fp = 0;
    for (uint64_t i = 0; i < q; i += 64) {
        size_t g = q - i < 64 ? (size_t)(q - i) : 64;
        fill_batch(&kb, "other:", i, g);
        bf_check_many(bf, kb.ptr, kb.len, g, out);
        for (size_t j = 0; j < g; j++)
            fp += out[j];
    }
    double rate = (double)fp / (double)q;
    double bound = tu_fpr_bound(p, q);
    double est = bf_fpr_estimate(bf);
    printf("# blocked p=%g n=%llu q=%llu: measured %.3g (bound %.3g), live estimate %.3g, %.2f "
           "bits/key, b=%u\n",
           p, (unsigned long long)n, (unsigned long long)q, rate, bound, est,
           8.0 * (double)bf_bytes(bf) / (double)n, bf_blocks_per_key(bf));
    assert_true(rate <= bound);
    /* The live estimate is exact in expectation: it must agree with the
     * measurement within sampling noise. */
    assert_true(est <= tu_fpr_bound(rate, q) + 3.0 * rate && est >= rate / 4);
    bf_free(bf);
}

static void test_fpr_at_capacity(void **state)
{
    (void)state;
    measure_fpr(1e-2, tu_scale(1000000, 100000), tu_scale(10000000, 300000));
    measure_fpr(1e-3, tu_scale(1000000, 100000), tu_scale(10000000, 300000));
    measure_fpr(1e-4, tu_scale(1000000, 100000), tu_scale(20000000, 1000000));
    measure_fpr(1e-5, tu_scale(1000000, 100000), tu_scale(100000000, 2000000));
}

static void test_bits_per_key(void **state)
{
    (void)state;
    uint64_t n = 10000000;
    double bpk = 8.0 * (double)bf_bytes_for(n, 0.01, NULL) / (double)n;
    assert_true(bpk <= 10.6);
    assert_int_equal(bloomery_blocks_per_key(0.01, BLOOMERY_POLICY_LATENCY), 1);
    assert_int_equal(bloomery_blocks_per_key(1e-4, BLOOMERY_POLICY_LATENCY), 1);
    assert_int_equal(bloomery_blocks_per_key(1e-5, BLOOMERY_POLICY_LATENCY), 2);
    assert_int_equal(bloomery_blocks_per_key(1e-7, BLOOMERY_POLICY_LATENCY), 3);
    assert_int_equal(bloomery_blocks_per_key(1e-9, BLOOMERY_POLICY_LATENCY), 4);
    assert_int_equal(bloomery_blocks_per_key(1e-4, BLOOMERY_POLICY_MEMORY), 2);
    /* The model reproduces the published split-block figures: 1.049% at
     * 10 bits/key for 512-bit blocks of 8 x 64-bit lanes. */
    double m = bloomery_model_fpr_split(10.0, 1, 64);
    assert_true(m > 0.01045 && m < 0.01053);
}

typedef struct race {
    bf_t *bf;
    uint64_t n;
    const char *prefix;
    uint8_t *fresh;
    unsigned *arrived; /* lockstep barrier shared by the two check-and-adders */
    bool batched;      /* through the batch calls, LOCKSTEP items at a time */
} race;

/* The two check-and-adders meet every LOCKSTEP items, so they reach the same
 * item at nearly the same moment and an unserialized check-and-add shows. */
#define LOCKSTEP 64

static void meet(unsigned *arrived, unsigned round)
{
    __atomic_fetch_add(arrived, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(arrived, __ATOMIC_ACQUIRE) < 2 * round)
        ;
}

static void *adder(void *arg)
{
    race *r = arg;
    keybatch b;
    for (uint64_t i = 0; i < r->n; i += LOCKSTEP) {
        size_t n = fill_batch(&b, r->prefix, i, r->n - i < LOCKSTEP ? r->n - i : LOCKSTEP);
        if (r->batched)
            bf_add_many(r->bf, b.ptr, b.len, n, NULL);
        else
            for (size_t j = 0; j < n; j++)
                bf_add(r->bf, b.ptr[j], b.len[j]);
    }
    return NULL;
}

static void *check_and_adder(void *arg)
{
    race *r = arg;
    keybatch b;
    for (uint64_t i = 0; i < r->n; i += LOCKSTEP) {
        size_t n = fill_batch(&b, "same:", i, r->n - i < LOCKSTEP ? r->n - i : LOCKSTEP);
        meet(r->arrived, (unsigned)(i / LOCKSTEP) + 1);
        if (r->batched)
            bf_check_and_add_many(r->bf, b.ptr, b.len, n, r->fresh + i);
        else
            for (size_t j = 0; j < n; j++)
                r->fresh[i + j] = bf_check_and_add(r->bf, b.ptr[j], b.len[j]);
    }
    return NULL;
}

static void two_writers(bool batched)
{
    uint64_t n = tu_scale(500000, 50000);
    bf_t *bf;
    /* Small filter so the writers share blocks and lanes constantly. */
    assert_int_equal(bf_create(&bf, 2 * n, 0.01, NULL), BLOOMERY_OK);
    race a = {bf, n, "a:", NULL, NULL, batched}, b = {bf, n, "b:", NULL, NULL, batched};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, adder, &a);
    pthread_create(&tb, NULL, adder, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    char key[32];
    uint64_t missing = 0;
    for (uint64_t i = 0; i < n; i++) {
        missing += !bf_check(bf, key, tu_key(key, "a:", i));
        missing += !bf_check(bf, key, tu_key(key, "b:", i));
    }
    assert_int_equal(missing, 0);
    bf_free(bf);
}

static void test_two_writers(void **state)
{
    (void)state;
    two_writers(false);
}

static void test_two_batch_writers(void **state)
{
    (void)state;
    two_writers(true);
}

static void check_and_add_linearizable(bool batched)
{
    uint64_t n = tu_scale(300000, 30000);
    bf_t *bf;
    assert_int_equal(bf_create(&bf, 4 * n, 0.001, NULL), BLOOMERY_OK);
    unsigned arrived = 0;
    race a = {bf, n, NULL, calloc(n, 1), &arrived, batched},
         b = {bf, n, NULL, calloc(n, 1), &arrived, batched};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, check_and_adder, &a);
    pthread_create(&tb, NULL, check_and_adder, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    uint64_t twice = 0, never = 0, fresh = 0;
    for (uint64_t i = 0; i < n; i++) {
        twice += a.fresh[i] && b.fresh[i];
        never += !a.fresh[i] && !b.fresh[i];
        fresh += a.fresh[i] || b.fresh[i];
    }
    assert_int_equal(twice, 0);
    /* An item may be "not new" for both only as a false positive. */
    assert_true((double)never <= tu_fpr_bound(0.001, n) * (double)n);
    assert_int_equal(bf_count(bf), fresh);
    free(a.fresh);
    free(b.fresh);
    bf_free(bf);
}

static void test_check_and_add_linearizable(void **state)
{
    (void)state;
    check_and_add_linearizable(false);
}

static void test_batched_check_and_add_linearizable(void **state)
{
    (void)state;
    check_and_add_linearizable(true);
}

static void test_check_and_add_reports(void **state)
{
    (void)state;
    bf_t *bf;
    assert_int_equal(bf_create(&bf, 1000, 0.01, NULL), BLOOMERY_OK);
    assert_true(bf_check_and_add(bf, "x", 1));
    assert_false(bf_check_and_add(bf, "x", 1));
    assert_false(bf_add(bf, "x", 1));
    assert_true(bf_add(bf, "y", 1));
    assert_int_equal(bf_count(bf), 2);
    const void *items[3] = {"x", "z", "z"};
    size_t lens[3] = {1, 1, 1};
    uint8_t out[3];
    bf_check_and_add_many(bf, items, lens, 3, out);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 1);
    assert_int_equal(out[2], 0);
    assert_int_equal(bf_count(bf), 3);
    /* Empty and binary items are ordinary items. */
    assert_true(bf_check_and_add(bf, "", 0));
    assert_true(bf_check(bf, "", 0));
    assert_true(bf_check_and_add(bf, "\0\xff", 2));
    bf_free(bf);
}

/* A 50-Gbit filter: 6.25 GB mapped lazily, so only touched pages cost
 * (each item may fault in a 2 MiB huge page: keep them few). Skips the
 * test where the address space is refused. */
static bf_t *big_filter(void)
{
    bf_t *bf;
    int rc = bf_create_shape(&bf, 50000000000ULL / 512, 1, 7, 5000000000ULL, 0.01);
    if (rc == BLOOMERY_ENOMEM) {
        skip();
    }
    assert_int_equal(rc, BLOOMERY_OK);
    return bf;
}

static void test_large_shape(void **state)
{
    (void)state;
    bf_t *bf = big_filter();
    assert_int_equal(bf_bytes(bf), 6250000000ULL);
    char key[32];
    for (uint64_t i = 0; i < 200; i++)
        bf_add(bf, key, tu_key(key, "big:", i));
    for (uint64_t i = 0; i < 200; i++)
        assert_true(bf_check(bf, key, tu_key(key, "big:", i)));
    bf_free(bf);
    /* Sizes past 64 bits are refused, not wrapped. */
    assert_int_equal(bf_create(&bf, UINT64_MAX / 2, 1e-9, NULL), BLOOMERY_ETOOBIG);
    assert_int_equal(bf_create(&bf, 0, 0.01, NULL), BLOOMERY_EINVAL);
    assert_int_equal(bf_create(&bf, 10, 1.0, NULL), BLOOMERY_EINVAL);
    assert_int_equal(bf_create(&bf, 10, 0.0, NULL), BLOOMERY_EINVAL);
}

/* Where an item's bits go in a filter of more than 2^32 bits: block
 * mulhi64(lo, nblocks) (b = 1), its lane l holding bit (seed * ODD[l]) >> 26
 * with seed the low 32 bits of hi, computed here in 64/128-bit arithmetic
 * from the item's hash, for items whose block lies past bit 2^32 (and
 * past byte 2^32). A position cut to 32 bits anywhere on the way puts the
 * bits elsewhere, which round-tripping items alone would not notice. */
static const uint32_t lane_odd[8] = {
    0x8e3c1b95u, 0x6b4f2a37u, 0xd1a2b3c5u, 0x3f9e8d7bu,
    0xa5c3e1f9u, 0x5e7d9cb1u, 0xc4b2a09du, 0x27f1e3d5u,
};

static void test_positions_past_2_32_bits(void **state)
{
    (void)state;
    bf_t *bf = big_filter();
    uint64_t nblocks = bf_nblocks(bf);
    const uint8_t *data = bf_data(bf);
    char key[32];
    unsigned past_bit = 0, past_byte = 0;
    for (uint64_t i = 0; i < 400 && past_byte < 8; i++) {
        size_t len = tu_key(key, "far:", i);
        bloomery_hash h = bloomery_hash_item(key, len, bf_seed(bf));
        uint64_t block = (uint64_t)(((unsigned __int128)h.lo * nblocks) >> 64);
        if (block < ((uint64_t)1 << 32) / 512)
            continue;
        past_bit++;
        past_byte += block >= ((uint64_t)1 << 32) / 64;
        const uint64_t *lanes = (const uint64_t *)(const void *)(data + block * 64);
        uint64_t want[8];
        for (unsigned l = 0; l < 8; l++)
            want[l] = (uint64_t)1 << ((uint32_t)((uint32_t)h.hi * lane_odd[l]) >> 26);
        for (unsigned l = 0; l < 8; l++)
            assert_int_equal(lanes[l], 0); /* a few items in 10^8 blocks */
        assert_false(bf_check(bf, key, len));
        bf_add(bf, key, len);
        for (unsigned l = 0; l < 8; l++)
            if ((lanes[l] & want[l]) == 0)
                fail_msg("item %s: block %llu lane %u lacks its bit", key,
                         (unsigned long long)block, l);
        assert_true(bf_check(bf, key, len));
    }
    assert_true(past_bit >= 8);
    assert_int_equal(past_byte, 8);
    bf_free(bf);
}

static void test_merge_and_clear(void **state)
{
    (void)state;
    bf_t *a, *b, *c;
    bf_options o = {.seed = 9};
    assert_int_equal(bf_create(&a, 10000, 0.01, &o), BLOOMERY_OK);
    assert_int_equal(bf_create(&b, 10000, 0.01, &o), BLOOMERY_OK);
    assert_int_equal(bf_create(&c, 20000, 0.01, &o), BLOOMERY_OK);
    char key[32];
    for (uint64_t i = 0; i < 5000; i++) {
        bf_add(a, key, tu_key(key, "a:", i));
        bf_add(b, key, tu_key(key, "b:", i));
    }
    assert_int_equal(bf_merge(a, c), BLOOMERY_EINVAL);
    assert_int_equal(bf_merge(a, b), BLOOMERY_OK);
    for (uint64_t i = 0; i < 5000; i++) {
        assert_true(bf_check(a, key, tu_key(key, "a:", i)));
        assert_true(bf_check(a, key, tu_key(key, "b:", i)));
    }
    bf_clear(a);
    assert_int_equal(bf_count(a), 0);
    assert_true(bf_fpr_estimate(a) == 0.0);
    bf_free(a);
    bf_free(b);
    bf_free(c);
}

int main(void)
{
    printf("# kernel: %s\n", bf_kernel_name());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_false_negatives_single),
        cmocka_unit_test(test_no_false_negatives_batch),
        cmocka_unit_test(test_no_false_negatives_portable),
        cmocka_unit_test(test_no_false_negatives_1e8),
        cmocka_unit_test(test_kernels_set_identical_bits),
        cmocka_unit_test(test_fpr_at_capacity),
        cmocka_unit_test(test_bits_per_key),
        tu_threaded_test(test_two_writers),
        tu_threaded_test(test_check_and_add_linearizable),
        tu_threaded_test(test_two_batch_writers),
        tu_threaded_test(test_batched_check_and_add_linearizable),
        cmocka_unit_test(test_check_and_add_reports),
        cmocka_unit_test(test_large_shape),
        cmocka_unit_test(test_positions_past_2_32_bits),
        cmocka_unit_test(test_merge_and_clear),
    };
    return cmocka_run_group_tests_name("blocked", tests, NULL, NULL);
}

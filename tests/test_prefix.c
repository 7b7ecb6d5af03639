/* Prefix filter: shapes within the line and the rate, no false negatives on
 * every path (bins, spare, evictions), FPR at capacity within the request,
 * fewer bits than a classic filter, the same answers from every copy of the
 * bin code, and concurrent writers and readers that never lose an item. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomery/bloomery.h"
#include "bloomery/prefix.h"
#include "prefix_cpu.h"
#include "testutil.h"

static const double rates[] = {1e-2, 1e-3, 1e-4, 1e-5};
#define NRATES (sizeof rates / sizeof rates[0])

static void test_plan(void **state)
{
    (void)state;
    const double ps[] = {0.5, 0.1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-7, 1e-9};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        pf_shape sh;
        assert_int_equal(pf_plan(ps[i], &sh), BLOOMERY_OK);
        unsigned bits = sh.quotients + sh.slots * (sh.remainder_bits + 1);
        assert_true(bits <= 512);
        assert_true(sh.model_fpr <= 0.95 * ps[i] * (1 + 1e-9));
        assert_true(sh.load > 1);
    }
    pf_shape sh;
    assert_int_equal(pf_plan(0, &sh), BLOOMERY_EINVAL);
    assert_int_equal(pf_plan(1, &sh), BLOOMERY_EINVAL);
    assert_int_equal(pf_plan(1e-30, &sh), BLOOMERY_ETOOBIG);
    pf_t *pf;
    assert_int_equal(pf_create(&pf, 0, 0.01, 0), BLOOMERY_EINVAL);
    assert_int_equal(pf_create(&pf, 12345, 0.001, 0), BLOOMERY_OK);
    assert_int_equal(pf_bytes(pf), pf_bytes_for(12345, 0.001));
    assert_true(pf_nbins(pf) * pf_get_shape(pf).load >= 12345);
    pf_free(pf);
}

/* Memory is why people use a filter: below a classic Bloom filter's optimum
 * (RedisBloom's NONSCALING size) at every rate. */
static void test_fewer_bits_than_classic(void **state)
{
    (void)state;
    for (size_t i = 0; i < NRATES; i++) {
        double bits = (double)pf_bytes_for(10000000, rates[i]) * 8 / 1e7;
        assert_true(bits < bloomery_classic_bpe(rates[i]));
    }
}

static void add_all(pf_t *pf, const char *prefix, uint64_t n, bool batch)
{
    char buf[64][32];
    const void *ptr[64];
    size_t len[64];
    for (uint64_t i = 0; i < n; i += 64) {
        size_t g = n - i < 64 ? (size_t)(n - i) : 64;
        for (size_t j = 0; j < g; j++) {
            len[j] = tu_key(buf[j], prefix, i + j);
            ptr[j] = buf[j];
        }
        if (batch)
            pf_add_many(pf, ptr, len, g, NULL);
        else
            for (size_t j = 0; j < g; j++)
                pf_add(pf, ptr[j], len[j]);
    }
}

static uint64_t count_missing(const pf_t *pf, const char *prefix, uint64_t n)
{
    char buf[64][32];
    const void *ptr[64];
    size_t len[64];
    uint8_t out[64];
    uint64_t missing = 0;
    for (uint64_t i = 0; i < n; i += 64) {
        size_t g = n - i < 64 ? (size_t)(n - i) : 64;
        for (size_t j = 0; j < g; j++) {
            len[j] = tu_key(buf[j], prefix, i + j);
            ptr[j] = buf[j];
        }
        pf_check_many(pf, ptr, len, g, out);
        for (size_t j = 0; j < g; j++) {
            missing += !out[j];
            if (j % 7 == 0)
                missing += !pf_check(pf, ptr[j], len[j]);
        }
    }
    return missing;
}

static uint64_t count_present(const pf_t *pf, const char *prefix, uint64_t n)
{
    char key[32];
    uint64_t hits = 0;
    for (uint64_t i = 0; i < n; i++)
        hits += pf_check(pf, key, tu_key(key, prefix, i));
    return hits;
}

static void test_no_false_negatives(void **state)
{
    (void)state;
    uint64_t n = tu_scale(1000000, 100000);
    for (size_t i = 0; i < NRATES; i++) {
        for (int batch = 0; batch < 2; batch++) {
            pf_t *pf;
            assert_int_equal(pf_create(&pf, n, rates[i], 7), BLOOMERY_OK);
            add_all(pf, "m:", n, batch);
            assert_int_equal(count_missing(pf, "m:", n), 0);
            /* At capacity some bins are full: the spare is in use. */
            assert_true(pf_spare_count(pf) > 0);
            pf_free(pf);
        }
    }
}

/* Past capacity every bin is full and keeps giving up its largest to the
 * spare: none may be lost. */
static void test_overfilled_bins_keep_every_item(void **state)
{
    (void)state;
    for (size_t i = 0; i < NRATES; i++) {
        pf_t *pf;
        assert_int_equal(pf_create(&pf, 1000, rates[i], 3), BLOOMERY_OK);
        add_all(pf, "o:", 3000, false);
        assert_int_equal(count_missing(pf, "o:", 3000), 0);
        /* Hundreds moved (fewer than the 2000 beyond the bins' slots: the
         * overfilled spare soon answers "present" for many). */
        assert_true(pf_spare_count(pf) >= 200);
        pf_free(pf);
    }
}

/* A filter beyond the caches takes another path for adds past half its
 * capacity: each group first reads its bins unlocked to prefetch the spare
 * lines their adds will write. Filled past capacity, it loses no item. */
static void test_far_filter_past_capacity(void **state)
{
    (void)state;
    pf_set_far_bytes(0);
    for (size_t i = 0; i < NRATES; i++) {
        pf_t *pf;
        assert_int_equal(pf_create(&pf, 20000, rates[i], 5), BLOOMERY_OK);
        add_all(pf, "b:", 30000, true);
        assert_int_equal(count_missing(pf, "b:", 30000), 0);
        assert_true(pf_spare_count(pf) >= 1000);
        pf_free(pf);
    }
}

static int restore_far_bytes(void **state)
{
    (void)state;
    pf_set_far_bytes(PF_FAR_BYTES);
    return 0;
}

static void test_fpr_at_capacity(void **state)
{
    (void)state;
    uint64_t n = tu_scale(1000000, 200000);
    for (size_t i = 0; i < NRATES; i++) {
        double p = rates[i];
        uint64_t q = tu_scale((uint64_t)(200 / p), (uint64_t)(20 / p));
        if (q < 1000000)
            q = 1000000;
        pf_t *pf;
        assert_int_equal(pf_create(&pf, n, p, 11), BLOOMERY_OK);
        add_all(pf, "m:", n, true);
        double rate = (double)count_present(pf, "x:", q) / (double)q;
        double est = pf_fpr_estimate(pf);
        printf("p=%g: %.3f bits/item, measured %.3g (%.2f p), estimate %.3g, spare %.3f\n", p,
               (double)pf_bytes(pf) * 8 / (double)n, rate, rate / p, est,
               (double)pf_spare_count(pf) / (double)n);
        assert_true(rate <= tu_fpr_bound(p, q));
        /* The estimate counts what the bins and the spare hold now. */
        assert_true(est <= p && rate <= tu_fpr_bound(est, q) && est <= tu_fpr_bound(rate, q) * 1.3);
        pf_free(pf);
    }
}

/* Every copy of the bin code (baseline, popcnt, popcnt with pdep) must place
 * and find fingerprints identically: a filter filled by one answers the same
 * under the others, and filling under each gives the same estimate. */
static void test_copies_agree(void **state)
{
    (void)state;
    uint64_t n = tu_scale(200000, 40000);
    int top = pf_cpu_level();
    double est[3];
    pf_t *pf[3];
    for (int level = 0; level <= top; level++) {
        pf_set_cpu_level(level);
        assert_int_equal(pf_create(&pf[level], n, 1e-3, 5), BLOOMERY_OK);
        add_all(pf[level], "m:", 2 * n, level == 1);
        est[level] = pf_fpr_estimate(pf[level]);
        assert_int_equal(pf_count(pf[level]), pf_count(pf[0]));
        assert_int_equal(pf_spare_count(pf[level]), pf_spare_count(pf[0]));
        assert_true(est[level] == est[0]);
    }
    for (int level = 0; level <= top; level++) {
        pf_set_cpu_level(level);
        for (int f = 0; f <= top; f++) {
            assert_int_equal(count_missing(pf[f], "m:", 2 * n), 0);
            assert_int_equal(count_present(pf[f], "x:", n), count_present(pf[0], "x:", n));
        }
    }
    pf_set_cpu_level(top);
    for (int level = 0; level <= top; level++)
        pf_free(pf[level]);
}

/* ---- concurrency ---- */

typedef struct race {
    pf_t *pf;
    uint64_t n;
    const char *prefix;
    uint8_t *fresh;
    unsigned *arrived;
    uint64_t *acked; /* items the writer has finished adding (release) */
    uint64_t lost;   /* a reader's count of acknowledged items it missed */
} race;

#define LOCKSTEP 64

static void meet(unsigned *arrived, unsigned round)
{
    __atomic_fetch_add(arrived, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(arrived, __ATOMIC_ACQUIRE) < 2 * round)
        ;
}

static void *writer(void *arg)
{
    race *r = arg;
    char key[32];
    for (uint64_t i = 0; i < r->n; i++) {
        pf_add(r->pf, key, tu_key(key, r->prefix, i));
        if (r->acked)
            __atomic_store_n(r->acked, i + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* Checks, over and over, every item its writer has acknowledged. */
static void *reader(void *arg)
{
    race *r = arg;
    char key[32];
    uint64_t done = 0;
    while (done < r->n) {
        uint64_t upto = __atomic_load_n(r->acked, __ATOMIC_ACQUIRE);
        for (uint64_t i = upto > 64 ? upto - 64 : 0; i < upto; i++)
            r->lost += !pf_check(r->pf, key, tu_key(key, r->prefix, i));
        done = upto;
    }
    return NULL;
}

static void *check_and_adder(void *arg)
{
    race *r = arg;
    char key[32];
    for (uint64_t i = 0; i < r->n; i += LOCKSTEP) {
        meet(r->arrived, (unsigned)(i / LOCKSTEP) + 1);
        for (uint64_t j = i; j < i + LOCKSTEP && j < r->n; j++)
            r->fresh[j] = pf_check_and_add(r->pf, key, tu_key(key, "same:", j));
    }
    return NULL;
}

/* Two writers of distinct items into a small filter, so its few bins are
 * rewritten all the time (and give up fingerprints to the spare), while a
 * reader checks each of writer a's acknowledged items as they come. A
 * reader that took a half-written bin would miss some. */
static void test_writers_and_readers(void **state)
{
    (void)state;
    uint64_t n = 5000, rounds = tu_scale(200, 40), lost = 0;
    for (uint64_t round = 0; round < rounds; round++) {
        pf_t *pf;
        assert_int_equal(pf_create(&pf, n, 0.01, round), BLOOMERY_OK);
        uint64_t acked = 0;
        race a = {.pf = pf, .n = n, .prefix = "a:", .acked = &acked};
        race ra = a, b = {.pf = pf, .n = n, .prefix = "b:"};
        pthread_t ta, tb, tr;
        pthread_create(&ta, NULL, writer, &a);
        pthread_create(&tb, NULL, writer, &b);
        pthread_create(&tr, NULL, reader, &ra);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        pthread_join(tr, NULL);
        lost += ra.lost;
        assert_int_equal(count_missing(pf, "a:", n), 0);
        assert_int_equal(count_missing(pf, "b:", n), 0);
        assert_true(pf_spare_count(pf) > n / 2);
        pf_free(pf);
    }
    assert_int_equal(lost, 0);
}

static void test_check_and_add_linearizable(void **state)
{
    (void)state;
    uint64_t n = tu_scale(300000, 30000);
    pf_t *pf;
    /* Filled to capacity: full bins give up fingerprints from about half way. */
    assert_int_equal(pf_create(&pf, n, 0.001, 13), BLOOMERY_OK);
    unsigned arrived = 0;
    race a = {.pf = pf, .n = n, .fresh = calloc(n, 1), .arrived = &arrived};
    race b = {.pf = pf, .n = n, .fresh = calloc(n, 1), .arrived = &arrived};
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
    /* Not new for both only as a false positive. */
    assert_true((double)never <= tu_fpr_bound(0.001, n) * (double)n);
    assert_true(pf_spare_count(pf) > n / 50);
    assert_int_equal(pf_count(pf), fresh);
    assert_int_equal(count_missing(pf, "same:", n), 0);
    free(a.fresh);
    free(b.fresh);
    pf_free(pf);
}

/* A merge keeps, per bin, the S smallest fingerprints of both and sends the
 * rest to the spare, as one filter given both sets would: the image is that
 * filter's, byte for byte, bins and spare, at capacity and beyond it. */
static void test_merge_is_one_filter_of_both(void **state)
{
    (void)state;
    for (size_t i = 0; i < NRATES; i++) {
        for (uint64_t each = 2000; each <= 6000; each += 4000) {
            pf_t *a, *b, *both, *other;
            assert_int_equal(pf_create(&a, 4000, rates[i], 5), BLOOMERY_OK);
            assert_int_equal(pf_create(&b, 4000, rates[i], 5), BLOOMERY_OK);
            assert_int_equal(pf_create(&both, 4000, rates[i], 5), BLOOMERY_OK);
            add_all(a, "ma:", each, true);
            add_all(b, "mb:", each, false);
            add_all(both, "mb:", each, true);
            add_all(both, "ma:", each, false);
            uint64_t count = pf_count(a) + pf_count(b);
            assert_int_equal(pf_merge(a, b), BLOOMERY_OK);
            assert_int_equal(pf_validate(a), BLOOMERY_OK);
            assert_int_equal(count_missing(a, "ma:", each), 0);
            assert_int_equal(count_missing(a, "mb:", each), 0);
            assert_int_equal(pf_count(a), count);
            assert_memory_equal(pf_data(a), pf_data(both), pf_data_bytes(a));
            assert_memory_equal(bf_data(pf_spare(a)), bf_data(pf_spare(both)),
                                bf_bytes(pf_spare(a)));
            /* Other shapes or seeds are refused, dst unchanged. */
            assert_int_equal(pf_create(&other, 4000, rates[i], 6), BLOOMERY_OK);
            assert_int_equal(pf_merge(a, other), BLOOMERY_EINVAL);
            pf_free(other);
            assert_int_equal(pf_create(&other, 8000, rates[i], 5), BLOOMERY_OK);
            assert_int_equal(pf_merge(a, other), BLOOMERY_EINVAL);
            pf_free(other);
            assert_memory_equal(pf_data(a), pf_data(both), pf_data_bytes(a));
            pf_free(a);
            pf_free(b);
            pf_free(both);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_fewer_bits_than_classic),
        cmocka_unit_test(test_no_false_negatives),
        cmocka_unit_test(test_overfilled_bins_keep_every_item),
        cmocka_unit_test_teardown(test_far_filter_past_capacity, restore_far_bytes),
        cmocka_unit_test(test_fpr_at_capacity),
        cmocka_unit_test(test_copies_agree),
        cmocka_unit_test(test_merge_is_one_filter_of_both),
        tu_threaded_test(test_writers_and_readers),
        tu_threaded_test(test_check_and_add_linearizable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

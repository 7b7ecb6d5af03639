/* Counting filter: add/check/delete, no false negatives for items added and
 * not deleted, FPR at capacity, saturation keeps items present. */
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

static void test_add_check_delete(void **state)
{
    (void)state;
    cntbf_t *c;
    assert_int_equal(cntbf_create(&c, 1000, 0.01, NULL), BLOOMERY_OK);
    assert_true(cntbf_add(c, "a", 1));
    assert_false(cntbf_add(c, "a", 1));
    assert_true(cntbf_check(c, "a", 1));
    assert_true(cntbf_delete(c, "a", 1));
    assert_true(cntbf_check(c, "a", 1)); /* added twice, deleted once */
    assert_true(cntbf_delete(c, "a", 1));
    assert_false(cntbf_check(c, "a", 1));
    assert_false(cntbf_delete(c, "a", 1));
    assert_int_equal(cntbf_count(c), 0);
    cntbf_free(c);
}

static void test_no_false_negatives_after_deletes(void **state)
{
    (void)state;
    uint64_t n = tu_scale(500000, 30000);
    cntbf_t *c;
    assert_int_equal(cntbf_create(&c, n, 0.01, NULL), BLOOMERY_OK);
    char key[32];
    for (uint64_t i = 0; i < n; i++)
        cntbf_add(c, key, tu_key(key, "k:", i));
    /* Delete every odd item; even ones must all remain. */
    uint64_t deleted = 0;
    for (uint64_t i = 1; i < n; i += 2)
        deleted += cntbf_delete(c, key, tu_key(key, "k:", i));
    assert_int_equal(deleted, n / 2);
    uint64_t missing = 0, still = 0;
    for (uint64_t i = 0; i < n; i++) {
        bool in = cntbf_check(c, key, tu_key(key, "k:", i));
        if (i % 2 == 0)
            missing += !in;
        else
            still += in;
    }
    assert_int_equal(missing, 0);
    /* Deleted items linger only as false positives of the half-full filter. */
    assert_true((double)still / (double)(n / 2) < 0.01);
    cntbf_free(c);
}

static void test_no_false_negatives_1e8(void **state)
{
    (void)state;
    uint64_t n = tu_scale(100000000, 300000);
    cntbf_t *c;
    assert_int_equal(cntbf_create(&c, n, 0.01, NULL), BLOOMERY_OK);
    char key[32];
    for (uint64_t i = 0; i < n; i++)
        cntbf_add(c, key, tu_key(key, "h:", i));
    uint64_t missing = 0;
    for (uint64_t i = 0; i < n; i++)
        missing += !cntbf_check(c, key, tu_key(key, "h:", i));
    assert_int_equal(missing, 0);
    cntbf_free(c);
}

static void test_fpr_at_capacity(void **state)
{
    (void)state;
    double ps[] = {1e-2, 1e-3, 1e-4};
    for (int k = 0; k < 3; k++) {
        uint64_t n = tu_scale(300000, 30000), q = tu_scale(5000000, 300000);
        cntbf_t *c;
        assert_int_equal(cntbf_create(&c, n, ps[k], NULL), BLOOMERY_OK);
        char key[32];
        for (uint64_t i = 0; i < n; i++)
            cntbf_add(c, key, tu_key(key, "m:", i));
        uint64_t fp = 0;
        for (uint64_t i = 0; i < q; i++)
            fp += cntbf_check(c, key, tu_key(key, "x:", i));
        double rate = (double)fp / (double)q;
        printf("# counting p=%g: measured %.3g (bound %.3g), estimate %.3g, %.1f bits/key, b=%u\n",
               ps[k], rate, tu_fpr_bound(ps[k], q), cntbf_fpr_estimate(c),
               8.0 * (double)cntbf_bytes(c) / (double)n, cntbf_blocks_per_key(c));
        assert_true(rate <= tu_fpr_bound(ps[k], q));
        cntbf_free(c);
    }
}

static void test_saturation(void **state)
{
    (void)state;
    cntbf_t *c;
    assert_int_equal(cntbf_create(&c, 100, 0.01, NULL), BLOOMERY_OK);
    for (int i = 0; i < 40; i++)
        cntbf_add(c, "hot", 3);
    /* Counters stuck at 15 are never decremented: the item cannot vanish. */
    for (int i = 0; i < 40; i++)
        assert_true(cntbf_delete(c, "hot", 3));
    assert_true(cntbf_check(c, "hot", 3));
    cntbf_free(c);
}

typedef struct race {
    cntbf_t *c;
    const char *prefix;
    uint64_t n;
} race;

static void *churn(void *arg)
{
    race *r = arg;
    char key[32];
    for (uint64_t i = 0; i < r->n; i++) {
        size_t len = tu_key(key, r->prefix, i);
        cntbf_add(r->c, key, len);
        cntbf_add(r->c, key, len);
        cntbf_delete(r->c, key, len);
    }
    return NULL;
}

static void test_concurrent_counters(void **state)
{
    (void)state;
    uint64_t n = tu_scale(200000, 20000);
    cntbf_t *c;
    assert_int_equal(cntbf_create(&c, 2 * n, 0.01, NULL), BLOOMERY_OK);
    race a = {c, "a:", n}, b = {c, "b:", n};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, churn, &a);
    pthread_create(&tb, NULL, churn, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    char key[32];
    uint64_t missing = 0;
    for (uint64_t i = 0; i < n; i++) {
        missing += !cntbf_check(c, key, tu_key(key, "a:", i));
        missing += !cntbf_check(c, key, tu_key(key, "b:", i));
    }
    assert_int_equal(missing, 0);
    cntbf_free(c);
}

static void test_merge(void **state)
{
    (void)state;
    cntbf_t *a, *b, *c;
    assert_int_equal(cntbf_create(&a, 1000, 0.01, NULL), BLOOMERY_OK);
    assert_int_equal(cntbf_create(&b, 1000, 0.01, NULL), BLOOMERY_OK);
    assert_int_equal(cntbf_create(&c, 5000, 0.01, NULL), BLOOMERY_OK);
    cntbf_add(a, "x", 1);
    cntbf_add(b, "x", 1);
    cntbf_add(b, "y", 1);
    assert_int_equal(cntbf_merge(a, c), BLOOMERY_EINVAL);
    assert_int_equal(cntbf_merge(a, b), BLOOMERY_OK);
    /* x was added twice in all: it survives one delete. */
    assert_true(cntbf_delete(a, "x", 1));
    assert_true(cntbf_check(a, "x", 1));
    assert_true(cntbf_delete(a, "y", 1));
    assert_false(cntbf_check(a, "y", 1));
    cntbf_free(a);
    cntbf_free(b);
    cntbf_free(c);
}

/* The write barrier, used as a snapshot uses it: the hook saves each block
 * it is told about, once, as it is then; the saved blocks over the live
 * array must give back the array as it was when the hook was set, after
 * adds, deletes (of present and absent items, up to saturation) and a
 * merge. A change without a hook call before it shows up as a byte that
 * differs. */
typedef struct shadow {
    const cntbf_t *c;
    uint64_t len;
    uint8_t *orig, *saved, *mark;
    uint64_t calls;
} shadow;

static void shadow_hook(void *ctx, uint32_t region, uint64_t off, uint64_t len)
{
    shadow *sh = ctx;
    sh->calls++;
    assert_int_equal(region, 0);
    assert_int_equal(len, 64);
    assert_int_equal(off % 64, 0);
    assert_true(off + len <= sh->len);
    const uint8_t *live = cntbf_data(sh->c);
    for (uint64_t b = off; b < off + len; b++)
        if (!sh->mark[b]) {
            sh->saved[b] = live[b];
            sh->mark[b] = 1;
        }
}

static void test_write_hook(void **state)
{
    (void)state;
    cntbf_t *c, *other;
    assert_int_equal(cntbf_create(&c, 20000, 0.01, NULL), BLOOMERY_OK);
    assert_int_equal(cntbf_create(&other, 20000, 0.01, NULL), BLOOMERY_OK);
    char key[32];
    for (uint64_t i = 0; i < 5000; i++)
        cntbf_add(c, key, tu_key(key, "a:", i));
    for (uint64_t i = 0; i < 300; i++)
        cntbf_add(other, key, tu_key(key, "o:", i));
    shadow sh = {.c = c, .len = cntbf_bytes(c)};
    sh.orig = malloc(sh.len);
    sh.saved = malloc(sh.len);
    sh.mark = calloc(sh.len, 1);
    assert_non_null(sh.orig);
    assert_non_null(sh.saved);
    assert_non_null(sh.mark);
    memcpy(sh.orig, cntbf_data(c), sh.len);
    cntbf_set_write_hook(c, shadow_hook, &sh);
    for (uint64_t i = 0; i < 2000; i++)
        assert_true(cntbf_delete(c, key, tu_key(key, "a:", i)));
    for (uint64_t i = 0; i < 2000; i++)
        cntbf_delete(c, key, tu_key(key, "absent:", i));
    for (uint64_t i = 0; i < 3000; i++)
        cntbf_add(c, key, tu_key(key, "b:", i));
    for (int r = 0; r < 20; r++) /* saturates */
        cntbf_add(c, "hot", 3);
    assert_int_equal(cntbf_merge(c, other), BLOOMERY_OK);
    uint64_t saved = 0;
    const uint8_t *live = cntbf_data(c);
    for (uint64_t b = 0; b < sh.len; b++) {
        saved += sh.mark[b];
        if ((sh.mark[b] ? sh.saved[b] : live[b]) != sh.orig[b])
            fail_msg("byte %llu changed without the hook", (unsigned long long)b);
    }
    assert_true(saved > 0 && saved < sh.len);
    uint64_t calls = sh.calls;
    cntbf_set_write_hook(c, NULL, NULL);
    cntbf_add(c, "x", 1);
    assert_int_equal(sh.calls, calls);
    free(sh.orig);
    free(sh.saved);
    free(sh.mark);
    cntbf_free(c);
    cntbf_free(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_check_delete),
        cmocka_unit_test(test_no_false_negatives_after_deletes),
        cmocka_unit_test(test_no_false_negatives_1e8),
        cmocka_unit_test(test_fpr_at_capacity),
        cmocka_unit_test(test_saturation),
        cmocka_unit_test(test_merge),
        tu_threaded_test(test_concurrent_counters),
        cmocka_unit_test(test_write_hook),
    };
    return cmocka_run_group_tests_name("counting", tests, NULL, NULL);
}

/* Windowed filter: items inside the window always found, items past the
 * slack forgotten, FPR at capacity, linearizable check-and-add, early and
 * skipped rotations, memory per item. Time is simulated. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "bloomery/bloomery.h"
#include "testutil.h"

static void test_window_semantics(void **state)
{
    (void)state;
    /* T = 2 s in 2 slices: each item added at t must be found until t + 2 s
     * and gone after t + 3 s. Items are added every 10 ms for 20 s while the
     * ring is advanced every 10 ms, as a server's clock would. */
    const int64_t T = 2000, step = 10, end = 20000;
    win_t *w;
    assert_int_equal(win_create(&w, 100000, 0.001, T, 2, 0, NULL), BLOOMERY_OK);
    char key[32];
    uint64_t false_old = 0, old_checks = 0;
    for (int64_t t = 0; t <= end; t += step) {
        win_advance(w, t, NULL, NULL);
        uint64_t id = (uint64_t)(t / step);
        assert_int_equal(win_check_and_add(w, key, tu_key(key, "w:", id), t), 1);
        /* Everything added in (t - T, t] is present. */
        for (int64_t back = 0; back < T && back <= t; back += 7 * step) {
            uint64_t j = (uint64_t)((t - back) / step);
            assert_true(win_check(w, key, tu_key(key, "w:", j), t));
        }
        /* Everything added at or before t - T - T/S is gone (but for FPs). */
        if (t >= 3 * T) {
            uint64_t j = (uint64_t)((t - T - T / 2) / step);
            old_checks++;
            false_old += win_check(w, key, tu_key(key, "w:", j), t);
        }
    }
    assert_true(false_old <= 2 + old_checks / 100);
    /* A re-add of a forgotten item is new again. */
    assert_int_equal(win_check_and_add(w, key, tu_key(key, "w:", 0), end), 1);
    assert_int_equal(win_check_and_add(w, key, tu_key(key, "w:", 0), end), 0);
    assert_true(win_rotations(w) >= (uint64_t)(end / (T / 2)) - 1);
    assert_int_equal(win_early_rotations(w), 0);
    win_free(w);
}

static void test_reads_ignore_overdue_slices(void **state)
{
    (void)state;
    win_t *w;
    assert_int_equal(win_create(&w, 1000, 0.01, 1000, 4, 0, NULL), BLOOMERY_OK);
    assert_int_equal(win_check_and_add(w, "x", 1, 0), 1);
    assert_true(win_check(w, "x", 1, 999));
    /* No rotation has happened, yet past T + T/S the item is gone. */
    assert_false(win_check(w, "x", 1, 1250));
    assert_int_equal(win_check_and_add(w, "x", 1, 1250), 1);
    int64_t start;
    assert_int_equal(win_rotation_due(w, 1250, &start), WIN_DUE_TIME);
    assert_int_equal(start, 250);
    win_free(w);
}

static void test_long_gap(void **state)
{
    (void)state;
    win_t *w;
    assert_int_equal(win_create(&w, 1000, 0.01, 1000, 4, 0, NULL), BLOOMERY_OK);
    char key[32];
    for (uint64_t i = 0; i < 500; i++)
        win_check_and_add(w, key, tu_key(key, "g:", i), 100);
    /* Down for an hour: at most S+1 rotations clear the ring. */
    unsigned n = win_advance(w, 3600000, NULL, NULL);
    assert_true(n <= 5 && n >= 4);
    assert_int_equal(win_count(w, 3600000), 0);
    for (uint64_t i = 0; i < 500; i++)
        assert_false(win_check(w, key, tu_key(key, "g:", i), 3600000));
    assert_true(win_slice_start(w, 0) <= 3600000 && win_slice_start(w, 0) > 3600000 - 250);
    assert_int_equal(win_rotation_due(w, 3600000, NULL), WIN_DUE_NONE);
    win_free(w);
}

static void test_early_rotation(void **state)
{
    (void)state;
    win_t *w;
    assert_int_equal(win_create(&w, 400, 0.01, 1000, 4, 0, NULL), BLOOMERY_OK);
    assert_int_equal(win_slice_capacity(w), 100);
    char key[32];
    uint64_t i = 0;
    while (win_rotation_due(w, 10, NULL) == WIN_DUE_NONE)
        win_check_and_add(w, key, tu_key(key, "e:", i++), 10);
    assert_true(i >= 100);
    int64_t start;
    assert_int_equal(win_rotation_due(w, 10, &start), WIN_DUE_FULL);
    assert_int_equal(win_advance(w, 10, NULL, NULL), 1);
    assert_int_equal(win_early_rotations(w), 1);
    assert_int_equal(win_slice_count(w, 0), 0);
    /* The burst is still remembered in the previous slice. */
    for (uint64_t j = 0; j < i; j++)
        assert_true(win_check(w, key, tu_key(key, "e:", j), 20));
    win_free(w);
}

static void test_fpr_at_capacity(void **state)
{
    (void)state;
    double ps[] = {1e-2, 1e-3};
    unsigned ss[] = {1, 4, 8};
    for (int a = 0; a < 2; a++) {
        for (int b = 0; b < 3; b++) {
            uint64_t cap = tu_scale(400000, 40000), q = tu_scale(5000000, 200000);
            unsigned s = ss[b];
            const int64_t T = 8000, period = T / s;
            win_t *w;
            assert_int_equal(win_create(&w, cap, ps[a], T, s, 0, NULL), BLOOMERY_OK);
            /* Steady state at capacity: cap / s items in every period, run
             * for two windows so every slice holds a full share. */
            char key[32];
            uint64_t id = 0;
            for (int64_t t = 0; t < 2 * T; t += period) {
                win_advance(w, t, NULL, NULL);
                for (uint64_t i = 0; i < cap / s; i++)
                    win_check_and_add(w, key, tu_key(key, "m:", id++), t);
            }
            int64_t now = 2 * T - 1;
            uint64_t fp = 0;
            for (uint64_t i = 0; i < q; i++)
                fp += win_check(w, key, tu_key(key, "x:", i), now);
            double rate = (double)fp / (double)q;
            printf("# window p=%g S=%u: measured %.3g (bound %.3g), %.1f bits per windowed item\n",
                   ps[a], s, rate, tu_fpr_bound(ps[a], q),
                   8.0 * (double)win_bytes(w) / (double)cap);
            assert_true(rate <= tu_fpr_bound(ps[a], q));
            win_free(w);
        }
    }
}

static void test_bits_per_item(void **state)
{
    (void)state;
    uint64_t cap = 10000000;
    double bits = 8.0 * (double)win_bytes_for(cap, 1e-3, 4, NULL) / (double)cap;
    printf("# p=1e-3, S=4: %.2f bits per windowed item\n", bits);
    assert_true(bits < 24.5);
}

typedef struct race {
    win_t *w;
    uint64_t n;
    uint8_t *fresh;
} race;

static void *adder(void *arg)
{
    race *r = arg;
    char key[32];
    for (uint64_t i = 0; i < r->n; i++)
        r->fresh[i] = (uint8_t)win_check_and_add(r->w, key, tu_key(key, "c:", i), 5);
    return NULL;
}

static void test_concurrent_check_and_add(void **state)
{
    (void)state;
    uint64_t n = tu_scale(200000, 20000);
    win_t *w;
    assert_int_equal(win_create(&w, 4 * n, 0.001, 1000, 4, 0, NULL), BLOOMERY_OK);
    race a = {w, n, calloc(n, 1)}, b = {w, n, calloc(n, 1)};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, adder, &a);
    pthread_create(&tb, NULL, adder, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    uint64_t twice = 0, never = 0;
    char key[32];
    for (uint64_t i = 0; i < n; i++) {
        twice += a.fresh[i] && b.fresh[i];
        never += !a.fresh[i] && !b.fresh[i];
        assert_true(win_check(w, key, tu_key(key, "c:", i), 5));
    }
    assert_int_equal(twice, 0);
    assert_true((double)never <= tu_fpr_bound(0.001, n) * (double)n);
    free(a.fresh);
    free(b.fresh);
    win_free(w);
}

static void test_invalid(void **state)
{
    (void)state;
    win_t *w;
    assert_int_equal(win_create(&w, 0, 0.01, 1000, 4, 0, NULL), BLOOMERY_EINVAL);
    assert_int_equal(win_create(&w, 10, 0.01, 0, 4, 0, NULL), BLOOMERY_EINVAL);
    assert_int_equal(win_create(&w, 10, 0.01, 1000, WIN_MAX_SLICES + 1, 0, NULL), BLOOMERY_EINVAL);
    assert_int_equal(win_create(&w, 10, 1.0, 1000, 4, 0, NULL), BLOOMERY_EINVAL);
    assert_int_equal(win_create(&w, 10, 0.01, 1000, 0, 0, NULL), BLOOMERY_OK);
    assert_int_equal(win_slices(w), WIN_DEFAULT_SLICES);
    win_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_semantics),
        cmocka_unit_test(test_reads_ignore_overdue_slices),
        cmocka_unit_test(test_long_gap),
        cmocka_unit_test(test_early_rotation),
        cmocka_unit_test(test_fpr_at_capacity),
        cmocka_unit_test(test_bits_per_item),
        cmocka_unit_test(test_concurrent_check_and_add),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests_name("window", tests, NULL, NULL);
}

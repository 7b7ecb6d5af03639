/* The memory rebalancing planner (src/cli/rebalance_plan.c): balanced
 * masters give no move, a heavy slot moves to the lightest master, a
 * target's maxmemory refuses a slot it cannot hold, no move makes the
 * spread wider, the same input gives the same plan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/rebalance_plan.c"

#define MB (1024ULL * 1024)

/* A plan over n masters using used[i] bytes each (maxmemory max[i], or
 * none when max is NULL). */
static reb_plan masters(size_t n, const unsigned long long *used, const unsigned long long *max)
{
    reb_plan p = {0};
    p.nodes = calloc(n, sizeof *p.nodes);
    assert_non_null(p.nodes);
    p.nnodes = n;
    for (size_t i = 0; i < n; i++) {
        snprintf(p.nodes[i].addr, sizeof p.nodes[i].addr, "127.0.0.1:%zu", 7000 + i);
        p.nodes[i].used = used[i];
        p.nodes[i].maxmemory = max ? max[i] : 0;
    }
    return p;
}

static unsigned long long spread(const reb_plan *p, int after)
{
    unsigned long long lo = ~0ULL, hi = 0;
    for (size_t i = 0; i < p->nnodes; i++) {
        unsigned long long v = after ? p->nodes[i].after : p->nodes[i].used;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    return hi - lo;
}

static void test_balanced_gives_no_move(void **state)
{
    (void)state;
    const unsigned long long used[] = {10 * MB, 10 * MB + 1000, 10 * MB - 500};
    reb_slot slots[] = {{1, 0, 1, 3 * MB}, {6000, 1, 2, 3 * MB}, {12000, 2, 1, 3 * MB}};
    reb_plan p = masters(3, used, NULL);
    assert_int_equal(reb_plan_compute(&p, slots, 3, 0.1), 0);
    assert_int_equal(p.nmoves, 0);
    assert_int_equal(p.nrefused, 0);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(p.nodes[i].after, p.nodes[i].used);
    reb_plan_free(&p);
}

static void test_one_heavy_slot_moves_to_the_lightest(void **state)
{
    (void)state;
    /* Master 0 holds a 20 MB slot over its 2 MB base; 2 is the lightest. */
    const unsigned long long used[] = {23 * MB, 3 * MB, 2 * MB};
    reb_slot slots[] = {{5, 0, 1, 20 * MB}, {7, 0, 3, MB / 2}, {8000, 1, 1, MB / 2}};
    reb_plan p = masters(3, used, NULL);
    assert_int_equal(reb_plan_compute(&p, slots, 3, 0.1), 0);
    assert_true(p.nmoves >= 1);
    assert_int_equal(p.moves[0].slot, 5);
    assert_int_equal(p.moves[0].from, 0);
    assert_int_equal(p.moves[0].to, 2);
    assert_int_equal(p.moves[0].keys, 1);
    assert_int_equal(p.moves[0].bytes, 20 * MB);
    assert_true(spread(&p, 1) < spread(&p, 0));
    reb_plan_free(&p);
}

static void test_refused_when_maxmemory_cannot_hold_it(void **state)
{
    (void)state;
    /* Neither 1 nor 2 can take the 20 MB slot; 2 can take a 4 MB one. */
    const unsigned long long used[] = {30 * MB, 3 * MB, 2 * MB};
    const unsigned long long max[] = {0, 10 * MB, 10 * MB};
    reb_slot slots[] = {{5, 0, 1, 20 * MB}, {9, 0, 2, 4 * MB}};
    reb_plan p = masters(3, used, max);
    assert_int_equal(reb_plan_compute(&p, slots, 2, 0.1), 0);
    for (size_t i = 0; i < p.nmoves; i++) {
        assert_int_not_equal(p.moves[i].slot, 5);
        assert_true(p.nodes[p.moves[i].to].after <= 10 * MB);
    }
    assert_int_equal(p.nmoves, 1);
    assert_int_equal(p.moves[0].slot, 9);
    assert_int_equal(p.moves[0].to, 2);
    assert_true(p.nrefused >= 1);
    assert_non_null(strstr(p.refused[0], "slot 5 "));
    assert_non_null(strstr(p.refused[0], "maxmemory 10485760"));
    for (size_t i = 0; i < p.nrefused; i++)
        assert_null(strstr(p.refused[i], "slot 9 "));
    reb_plan_free(&p);
}

static void test_never_makes_it_worse(void **state)
{
    (void)state;
    /* A slot larger than the gap would only move the imbalance: stays. */
    const unsigned long long used[] = {12 * MB, 2 * MB};
    reb_slot slots[] = {{1, 0, 1, 10 * MB}, {2, 0, 1, 11 * MB}};
    reb_plan p = masters(2, used, NULL);
    assert_int_equal(reb_plan_compute(&p, slots, 2, 0.1), 0);
    assert_int_equal(p.nmoves, 0);
    reb_plan_free(&p);

    /* Many random slots: every move shrinks the gap between its two
     * masters without swapping them, and the spread never grows. */
    srand(7);
    for (int round = 0; round < 50; round++) {
        unsigned long long u[4] = {MB, MB, MB, MB};
        reb_slot s[200];
        for (int i = 0; i < 200; i++) {
            s[i] = (reb_slot){.slot = i * 80,
                              .owner = (size_t)(rand() % 4),
                              .keys = 1,
                              .bytes = (unsigned long long)(rand() % 1000 + 1) * 4096};
            if (rand() % 3 == 0)
                s[i].owner = 0; /* master 0 heavier */
            u[s[i].owner] += s[i].bytes;
        }
        reb_plan q = masters(4, u, NULL);
        assert_int_equal(reb_plan_compute(&q, s, 200, 0.05), 0);
        unsigned long long cur[4];
        memcpy(cur, u, sizeof cur);
        for (size_t m = 0; m < q.nmoves; m++) {
            const reb_move *mv = &q.moves[m];
            assert_true(cur[mv->from] > cur[mv->to]);
            assert_true(mv->bytes < cur[mv->from] - cur[mv->to]);
            cur[mv->from] -= mv->bytes;
            cur[mv->to] += mv->bytes;
        }
        for (size_t i = 0; i < 4; i++)
            assert_int_equal(cur[i], q.nodes[i].after);
        assert_true(spread(&q, 1) <= spread(&q, 0));
        reb_plan_free(&q);
    }
}

static void test_deterministic(void **state)
{
    (void)state;
    const unsigned long long used[] = {40 * MB, 5 * MB, 5 * MB, 6 * MB};
    reb_slot slots[64];
    for (int i = 0; i < 64; i++)
        slots[i] = (reb_slot){
            .slot = 100 + i, .owner = 0, .keys = 1, .bytes = (i % 4 == 0 ? 2 : 1) * MB / 2};
    reb_plan a = masters(4, used, NULL), b = masters(4, used, NULL);
    assert_int_equal(reb_plan_compute(&a, slots, 64, 0.1), 0);
    assert_int_equal(reb_plan_compute(&b, slots, 64, 0.1), 0);
    assert_true(a.nmoves > 0);
    assert_int_equal(a.nmoves, b.nmoves);
    for (size_t i = 0; i < a.nmoves; i++) {
        assert_int_equal(a.moves[i].slot, b.moves[i].slot);
        assert_int_equal(a.moves[i].from, b.moves[i].from);
        assert_int_equal(a.moves[i].to, b.moves[i].to);
    }
    /* Within the band at the end. */
    unsigned long long total = 56 * MB;
    for (size_t i = 0; i < 4; i++)
        assert_true((double)a.nodes[i].after <= total / 4.0 * 1.1 + 1);
    reb_plan_free(&a);
    reb_plan_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_balanced_gives_no_move),
        cmocka_unit_test(test_one_heavy_slot_moves_to_the_lightest),
        cmocka_unit_test(test_refused_when_maxmemory_cannot_hold_it),
        cmocka_unit_test(test_never_makes_it_worse),
        cmocka_unit_test(test_deterministic),
    };
    return cmocka_run_group_tests_name("rebalance_plan", tests, NULL, NULL);
}

/* Scalable chain: RedisBloom's growth rules, the non-scaling "full" error,
 * no false negatives across links, compound FPR within p, linearizable adds
 * from two threads, and the allocation veto. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomery/bloomery.h"
#include "prefix_cpu.h"
#include "test_point.h"
#include "testutil.h"

static void test_growth_rules(void **state)
{
    (void)state;
    for (int layout = 0; layout < 3; layout++) {
        sbf_t *s;
        sbf_options o = {.layout = (bloomery_layout)layout, .expansion = 2};
        assert_int_equal(sbf_create(&s, 100, 0.01, &o), BLOOMERY_OK);
        assert_int_equal(sbf_nlinks(s), 1);
        assert_int_equal(sbf_capacity(s), 100);
        char key[32];
        for (uint64_t i = 0; i < 100; i++)
            sbf_add(s, key, tu_key(key, "g:", i));
        assert_int_equal(sbf_nlinks(s), 1);
        /* The 101st new item opens a second link of twice the capacity. */
        uint64_t i = 100;
        while (sbf_nlinks(s) == 1)
            sbf_add(s, key, tu_key(key, "g:", i++));
        assert_int_equal(sbf_capacity(s), 300);
        while (sbf_nlinks(s) == 2)
            sbf_add(s, key, tu_key(key, "g:", i++));
        assert_int_equal(sbf_capacity(s), 700);
        /* Classic: errors halve link by link from p/2, as in RedisBloom.
         * Blocked: the first link takes p_0 in [p/2, 0.9 p], the second
         * half of the rest, then halving. */
        if (layout == BLOOMERY_LAYOUT_BLOCKED) {
            double e0 = bf_error_rate(sbf_link_blocked(s, 0));
            assert_true(e0 > 0.005 && e0 <= 0.01 * 0.9);
            assert_true(bf_error_rate(sbf_link_blocked(s, 1)) == (0.01 - e0) * 0.5);
            assert_true(bf_error_rate(sbf_link_blocked(s, 2)) == (0.01 - e0) * 0.25);
        } else if (layout == BLOOMERY_LAYOUT_PREFIX) {
            /* Prefix: RedisBloom's rates, in fewer bits. */
            assert_true(pf_error_rate(sbf_link_prefix(s, 0)) == 0.005);
            assert_true(pf_error_rate(sbf_link_prefix(s, 2)) == 0.00125);
            assert_null(sbf_link_blocked(s, 0));
            assert_null(sbf_link_classic(s, 0));
        } else {
            assert_true(cbf_error_rate(sbf_link_classic(s, 0)) == 0.005);
            assert_true(cbf_error_rate(sbf_link_classic(s, 2)) == 0.00125);
        }
        for (uint64_t j = 0; j < i; j++)
            assert_int_equal(sbf_check(s, key, tu_key(key, "g:", j)), 1);
        sbf_free(s);
    }
}

static void test_nonscaling_full(void **state)
{
    (void)state;
    sbf_t *s;
    sbf_options o = {.expansion = 0};
    assert_int_equal(sbf_create(&s, 3, 0.01, &o), BLOOMERY_OK);
    assert_int_equal(sbf_add(s, "a", 1), 1);
    assert_int_equal(sbf_add(s, "b", 1), 1);
    assert_int_equal(sbf_add(s, "c", 1), 1);
    /* Present items still answer 0; a new one is refused. */
    assert_int_equal(sbf_add(s, "a", 1), 0);
    assert_int_equal(sbf_add(s, "d", 1), BLOOMERY_EFULL);
    assert_int_equal(sbf_count(s), 3);
    assert_int_equal(sbf_nlinks(s), 1);
    /* A batch stops at the first failure, as BF.MADD does. */
    const void *items[5] = {"a", "b", "c", "d", "d"};
    size_t lens[5] = {1, 1, 1, 1, 1};
    int res[5] = {9, 9, 9, 9, 9};
    assert_int_equal(sbf_add_many(s, items, lens, 5, res), 4);
    assert_int_equal(res[0], 0);
    assert_int_equal(res[2], 0);
    assert_int_equal(res[3], BLOOMERY_EFULL);
    assert_int_equal(res[4], 9);
    sbf_free(s);
}

static void chain_fpr(bloomery_layout layout, double p, uint64_t cap0, uint64_t n, uint64_t q)
{
    sbf_t *s;
    sbf_options o = {.layout = layout, .expansion = 2, .seed = 3};
    assert_int_equal(sbf_create(&s, cap0, p, &o), BLOOMERY_OK);
    enum { G = 64 };
    char buf[G][32];
    const void *ptr[G];
    size_t len[G];
    int res[G];
    for (uint64_t i = 0; i < n; i += G) {
        size_t g = n - i < G ? (size_t)(n - i) : G;
        for (size_t j = 0; j < g; j++) {
            len[j] = tu_key(buf[j], "m:", i + j);
            ptr[j] = buf[j];
        }
        assert_int_equal(sbf_add_many(s, ptr, len, g, res), g);
    }
    uint64_t missing = 0;
    for (uint64_t i = 0; i < n; i += G) {
        size_t g = n - i < G ? (size_t)(n - i) : G;
        for (size_t j = 0; j < g; j++) {
            len[j] = tu_key(buf[j], "m:", i + j);
            ptr[j] = buf[j];
        }
        sbf_check_many(s, ptr, len, g, res);
        for (size_t j = 0; j < g; j++)
            missing += res[j] != 1;
    }
    assert_int_equal(missing, 0);
    uint64_t fp = 0;
    for (uint64_t i = 0; i < q; i += G) {
        size_t g = q - i < G ? (size_t)(q - i) : G;
        for (size_t j = 0; j < g; j++) {
            len[j] = tu_key(buf[j], "x:", i + j);
            ptr[j] = buf[j];
        }
        sbf_check_many(s, ptr, len, g, res);
        for (size_t j = 0; j < g; j++)
            fp += res[j];
    }
    double rate = (double)fp / (double)q;
    printf("# %s chain p=%g cap0=%llu n=%llu links=%zu: measured %.3g (bound %.3g), estimate %.3g, "
           "%.2f bits/item\n",
           layout == BLOOMERY_LAYOUT_CLASSIC  ? "classic"
           : layout == BLOOMERY_LAYOUT_PREFIX ? "prefix"
                                              : "blocked",
           p, (unsigned long long)cap0, (unsigned long long)n, sbf_nlinks(s), rate,
           tu_fpr_bound(p, q), sbf_fpr_estimate(s), 8.0 * (double)sbf_bytes(s) / (double)n);
    assert_true(rate <= tu_fpr_bound(p, q));
    sbf_free(s);
}

/* Blocked chains made before the first link took most of the budget have
 * p_0 = p/2; growing one must keep RedisBloom's p/4, p/8, ... */
static void test_legacy_schedule(void **state)
{
    (void)state;
    bf_t *l0;
    assert_int_equal(bf_create(&l0, 100, 0.005, NULL), BLOOMERY_OK);
    void *links[1] = {l0};
    sbf_t *s;
    assert_int_equal(sbf_assemble(&s, BLOOMERY_LAYOUT_BLOCKED, 100, 0.01, 2, 0, links, 1),
                     BLOOMERY_OK);
    char key[32];
    for (uint64_t i = 0; sbf_nlinks(s) < 4; i++)
        assert_true(sbf_add(s, key, tu_key(key, "l:", i)) >= 0);
    assert_true(bf_error_rate(sbf_link_blocked(s, 1)) == 0.0025);
    assert_true(bf_error_rate(sbf_link_blocked(s, 2)) == 0.00125);
    assert_true(bf_error_rate(sbf_link_blocked(s, 3)) == 0.000625);
    sbf_free(s);
    /* Recreated from a record of an earlier version: the same first link. */
    sbf_options o = {.expansion = 2, .schedule = SBF_SCHEDULE_HALVES};
    assert_int_equal(sbf_create(&s, 100, 0.01, &o), BLOOMERY_OK);
    assert_true(bf_error_rate(sbf_link_blocked(s, 0)) == 0.005);
    assert_int_equal(sbf_bytes(s), bf_bytes_for(100, 0.005, NULL));
    assert_int_equal(sbf_bytes_for(100, 0.01, &o), bf_bytes_for(100, 0.005, NULL));
    sbf_free(s);
    o.schedule = (sbf_schedule)7;
    assert_int_equal(sbf_create(&s, 100, 0.01, &o), BLOOMERY_EINVAL);
}

/* A scaling blocked reserve takes at most the memory of RedisBloom's (a
 * classic first link at p/2) where the layout allows; at 1e-3 and 1e-5 one
 * or two blocks per key cost more than a classic filter even at 0.9 p (and
 * below 2.5e-5), and
 * the reserve stays within 3% of it. The errors of any number of links sum
 * to less than p. */
static void test_reserve_bits(void **state)
{
    (void)state;
    const uint64_t n = 10000000;
    const double within[] = {1e-2, 5e-3, 2e-3, 1e-4, 5e-5};
    for (size_t i = 0; i < sizeof within / sizeof within[0]; i++) {
        double p = within[i];
        uint64_t ours = 8 * sbf_bytes_for(n, p, NULL);
        uint64_t rb = bloomery_classic_bits(n, p * 0.5);
        printf("# reserve p=%g: %.2f bits/item, RedisBloom %.2f\n", p, (double)ours / (double)n,
               (double)rb / (double)n);
        assert_true(ours <= rb);
    }
    const double close[] = {1e-3, 2e-5, 1e-5};
    for (size_t i = 0; i < 3; i++) {
        double p = close[i];
        uint64_t ours = 8 * sbf_bytes_for(n, p, NULL);
        uint64_t rb = bloomery_classic_bits(n, p * 0.5);
        printf("# reserve p=%g: %.2f bits/item, RedisBloom %.2f\n", p, (double)ours / (double)n,
               (double)rb / (double)n);
        assert_true((double)ours <= 1.03 * (double)rb);
    }
    /* Non-scaling: one link at p, so the classic layout is the comparison. */
    sbf_options o = {.expansion = 0};
    assert_true(8 * sbf_bytes_for(n, 0.01, &o) < bloomery_classic_bits(n, 0.005));
    const double all[] = {1e-2, 1e-3, 1e-4, 1e-5, 0.2, 0.5, 1e-9};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        sbf_t *s;
        sbf_options one = {.expansion = 1}; /* 30 links of one item */
        assert_int_equal(sbf_create(&s, 1, all[i], &one), BLOOMERY_OK);
        char key[32];
        for (uint64_t j = 0; sbf_nlinks(s) < 30; j++)
            assert_true(sbf_add(s, key, tu_key(key, "r:", j)) >= 0);
        double sum = 0;
        for (size_t k = 0; k < 30; k++)
            sum += bf_error_rate(sbf_link_blocked(s, k));
        assert_true(sum < all[i]);
        double e0 = bf_error_rate(sbf_link_blocked(s, 0));
        assert_true(e0 >= 0.5 * all[i] && e0 <= 0.9 * all[i]);
        sbf_free(s);
    }
}

/* The compound rate of a chain grown to 2x, 4x and 8x its first capacity
 * stays within p at every rate asked for (blocked and classic). */
static void test_growth_fpr(void **state)
{
    (void)state;
    uint64_t cap0 = tu_scale(200000, 20000);
    const double rates[] = {1e-2, 1e-3, 1e-4, 1e-5};
    for (size_t i = 0; i < 4; i++) {
        double p = rates[i];
        uint64_t q = (uint64_t)(tu_scale(100, 30) / p);
        for (uint64_t m = 2; m <= 8; m *= 2) {
            chain_fpr(BLOOMERY_LAYOUT_BLOCKED, p, cap0, m * cap0, q);
            chain_fpr(BLOOMERY_LAYOUT_PREFIX, p, cap0, m * cap0, q);
        }
    }
    chain_fpr(BLOOMERY_LAYOUT_CLASSIC, 1e-3, cap0, 8 * cap0, (uint64_t)(tu_scale(100, 30) / 1e-3));
}

static void test_chain_fpr(void **state)
{
    (void)state;
    uint64_t n = tu_scale(1000000, 50000);
    uint64_t q = tu_scale(10000000, 300000);
    /* Filled to exactly the capacity of 10 links. */
    uint64_t cap0 = n / 1023;
    uint64_t filled = cap0 * 1023;
    chain_fpr(BLOOMERY_LAYOUT_BLOCKED, 0.01, cap0, filled, q);
    chain_fpr(BLOOMERY_LAYOUT_BLOCKED, 0.001, cap0, filled, q);
    chain_fpr(BLOOMERY_LAYOUT_BLOCKED, 1e-4, cap0, filled, tu_scale(20000000, 1000000));
    chain_fpr(BLOOMERY_LAYOUT_BLOCKED, 1e-5, cap0, filled, tu_scale(50000000, 1000000));
    chain_fpr(BLOOMERY_LAYOUT_PREFIX, 0.01, cap0, filled, q);
    chain_fpr(BLOOMERY_LAYOUT_PREFIX, 0.001, cap0, filled, q);
    chain_fpr(BLOOMERY_LAYOUT_PREFIX, 1e-4, cap0, filled, tu_scale(20000000, 1000000));
    /* Classic links keep RedisBloom's sizing, whose (1 - e^(-kn/m))^k model
     * is optimistic for small arrays (double hashing modulo a small m): with
     * ten links of a few thousand items the compound rate lands a few
     * percent above p. Three links of 1/7 of the items each stay within. */
    cap0 = n / 7;
    filled = cap0 * 7;
    chain_fpr(BLOOMERY_LAYOUT_CLASSIC, 0.01, cap0, filled, q);
    chain_fpr(BLOOMERY_LAYOUT_CLASSIC, 0.001, cap0, filled, q);
    chain_fpr(BLOOMERY_LAYOUT_CLASSIC, 1e-4, cap0, filled, tu_scale(20000000, 1000000));
    chain_fpr(BLOOMERY_LAYOUT_CLASSIC, 1e-5, cap0, filled, tu_scale(50000000, 1000000));
}

/* 1e8 items through the batch path, growing from a tenth of that. */
static void test_no_false_negatives_1e8(void **state)
{
    (void)state;
    uint64_t n = tu_scale(100000000, 300000);
    for (int layout = 0; layout < 2; layout++) {
        sbf_t *s;
        sbf_options o = {.layout = (bloomery_layout)layout, .expansion = 2};
        assert_int_equal(sbf_create(&s, n / 10, 0.01, &o), BLOOMERY_OK);
        enum { G = 256 };
        static char buf[G][32];
        const void *ptr[G];
        size_t len[G];
        int res[G];
        uint64_t missing = 0;
        for (int pass = 0; pass < 2; pass++) {
            for (uint64_t i = 0; i < n; i += G) {
                size_t g = n - i < G ? (size_t)(n - i) : G;
                for (size_t j = 0; j < g; j++) {
                    len[j] = tu_key(buf[j], "h:", i + j);
                    ptr[j] = buf[j];
                }
                if (pass == 0) {
                    assert_int_equal(sbf_add_many(s, ptr, len, g, res), g);
                } else {
                    sbf_check_many(s, ptr, len, g, res);
                    for (size_t j = 0; j < g; j++)
                        missing += res[j] != 1;
                }
            }
        }
        printf("# %s chain, %llu items: %zu links, %llu missing\n", layout ? "classic" : "blocked",
               (unsigned long long)n, sbf_nlinks(s), (unsigned long long)missing);
        assert_int_equal(missing, 0);
        sbf_free(s);
    }
}

/* A chain grown from capacity 100 has links of one block per key and,
 * at the tighter rates of later links, of several: the chain's probe (one
 * set of lane masks for all links) answers as the links one by one do, with
 * both kernels, for members and for non-members. */
static void test_chain_probe_matches_links(void **state)
{
    (void)state;
    sbf_t *s;
    sbf_options o = {.layout = BLOOMERY_LAYOUT_BLOCKED, .expansion = 2, .seed = 7};
    assert_int_equal(sbf_create(&s, 100, 0.01, &o), BLOOMERY_OK);
    uint64_t n = tu_scale(1000000, 200000);
    char key[32];
    for (uint64_t i = 0; i < n; i++)
        sbf_add(s, key, tu_key(key, "c:", i));
    size_t links = sbf_nlinks(s);
    unsigned bmax = 1;
    for (size_t i = 0; i < links; i++)
        if (bf_blocks_per_key(sbf_link_blocked(s, i)) > bmax)
            bmax = bf_blocks_per_key(sbf_link_blocked(s, i));
    assert_true(links >= 10);
    assert_true(bmax > 1);
    for (int portable = 0; portable < 2; portable++) {
        bf_force_portable(portable);
        uint64_t missing = 0, disagree = 0, fp = 0;
        for (uint64_t i = 0; i < 2 * n; i++) {
            size_t len = i < n ? tu_key(key, "c:", i) : tu_key(key, "x:", i);
            int got = sbf_check(s, key, len);
            int want = 0;
            for (size_t l = 0; l < links && !want; l++)
                want = bf_check(sbf_link_blocked(s, l), key, len);
            disagree += got != want;
            if (i < n)
                missing += got != 1;
            else
                fp += got == 1;
        }
        assert_int_equal(missing, 0);
        assert_int_equal(disagree, 0);
        assert_true(fp < n / 50);
    }
    bf_force_portable(false);
    sbf_free(s);
}

/* A batch that adds items an older link already holds answers 0 for each
 * and adds nothing, while the newest link has room for far more than the
 * group (the group path of every layout). */
static void test_batch_finds_older_links(void **state)
{
    (void)state;
    for (int layout = 0; layout < 3; layout++) {
        sbf_t *s;
        sbf_options o = {.layout = (bloomery_layout)layout, .expansion = 2, .seed = 5};
        assert_int_equal(sbf_create(&s, 5000, 0.01, &o), BLOOMERY_OK);
        char buf[64][32];
        const void *ptr[64];
        size_t len[64];
        int res[64];
        uint64_t i = 0;
        for (char key[32]; sbf_nlinks(s) < 2; i++)
            sbf_add(s, key, tu_key(key, "old:", i));
        uint64_t count = sbf_count(s);
        for (size_t j = 0; j < 64; j++) {
            len[j] = tu_key(buf[j], "old:", j * 50);
            ptr[j] = buf[j];
        }
        assert_int_equal(sbf_add_many(s, ptr, len, 64, res), 64);
        for (size_t j = 0; j < 64; j++)
            assert_int_equal(res[j], 0);
        assert_int_equal(sbf_count(s), count);
        sbf_free(s);
    }
}

typedef struct race {
    sbf_t *s;
    uint64_t n;
    int *res;
    bool batched;      /* sbf_add_many of LOCKSTEP items at a time */
    unsigned *arrived; /* the batched adders meet before every batch */
} race;

/* Batched adders meet before each batch of LOCKSTEP items, so both add the
 * same items at nearly the same moment. */
#define LOCKSTEP 64

static void *adder(void *arg)
{
    race *r = arg;
    char buf[LOCKSTEP][32];
    const void *items[LOCKSTEP];
    size_t lens[LOCKSTEP];
    for (uint64_t i = 0; i < r->n; i += LOCKSTEP) {
        size_t m = r->n - i < LOCKSTEP ? (size_t)(r->n - i) : LOCKSTEP;
        for (size_t j = 0; j < m; j++) {
            lens[j] = tu_key(buf[j], "same:", i + j);
            items[j] = buf[j];
        }
        if (!r->batched) {
            for (size_t j = 0; j < m; j++)
                r->res[i + j] = sbf_add(r->s, items[j], lens[j]);
            continue;
        }
        unsigned round = (unsigned)(i / LOCKSTEP) + 1;
        __atomic_fetch_add(r->arrived, 1, __ATOMIC_ACQ_REL);
        while (__atomic_load_n(r->arrived, __ATOMIC_ACQUIRE) < 2 * round)
            ;
        assert_int_equal(sbf_add_many(r->s, items, lens, m, r->res + i), m);
    }
    return NULL;
}

static void concurrent_adds_with_growth(bool batched)
{
    uint64_t n = tu_scale(300000, 30000);
    for (int layout = 0; layout < 3; layout++) {
        sbf_t *s;
        sbf_options o = {.layout = (bloomery_layout)layout, .expansion = 2};
        /* Tiny first link: the chain grows many times during the race. */
        assert_int_equal(sbf_create(&s, 100, 0.001, &o), BLOOMERY_OK);
        unsigned arrived = 0;
        race a = {s, n, calloc(n, sizeof(int)), batched, &arrived},
             b = {s, n, calloc(n, sizeof(int)), batched, &arrived};
        pthread_t ta, tb;
        pthread_create(&ta, NULL, adder, &a);
        pthread_create(&tb, NULL, adder, &b);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        uint64_t twice = 0, fresh = 0, missing = 0;
        char key[32];
        for (uint64_t i = 0; i < n; i++) {
            assert_true(a.res[i] >= 0 && b.res[i] >= 0);
            twice += a.res[i] == 1 && b.res[i] == 1;
            fresh += a.res[i] == 1 || b.res[i] == 1;
            missing += sbf_check(s, key, tu_key(key, "same:", i)) != 1;
        }
        assert_int_equal(twice, 0);
        assert_int_equal(missing, 0);
        assert_int_equal(sbf_count(s), fresh);
        assert_true(sbf_nlinks(s) > 5);
        free(a.res);
        free(b.res);
        sbf_free(s);
    }
}

static void test_concurrent_adds_with_growth(void **state)
{
    (void)state;
    concurrent_adds_with_growth(false);
}

/* Every prefix link counts as beyond the caches here, so batched adds past
 * half a link's capacity also read bins unlocked for their spare lines. */
static void test_concurrent_batched_adds_with_growth(void **state)
{
    (void)state;
    pf_set_far_bytes(0);
    concurrent_adds_with_growth(true);
}

static int restore_far_bytes(void **state)
{
    (void)state;
    pf_set_far_bytes(PF_FAR_BYTES);
    return 0;
}

/* An add overtaken by growth, in a fixed order (blocked and prefix
 * chains): thread A has chosen the newest link for item x and stops before
 * locking there; the main thread
 * fills that link, grows the chain and adds x to the new link. A must see x
 * once it locks (it reads the link count again), so exactly one of the two
 * adds reports x new. Otherwise a chance race of one in millions. */
static __thread bool overtaken_thread;
static unsigned overtake_stage; /* 1: A stopped at the point; 2: go on */
static test_point_id overtake_point;

static void overtake_hook(test_point_id point)
{
    if (!overtaken_thread || point != overtake_point ||
        __atomic_load_n(&overtake_stage, __ATOMIC_ACQUIRE) != 0)
        return;
    __atomic_store_n(&overtake_stage, 1, __ATOMIC_RELEASE);
    while (__atomic_load_n(&overtake_stage, __ATOMIC_ACQUIRE) != 2)
        ;
}

typedef struct overtaken {
    sbf_t *s;
    bool batched;
    int res;
} overtaken;

static void *overtaken_adder(void *arg)
{
    overtaken *o = arg;
    overtaken_thread = true;
    const void *items[1] = {"x"};
    size_t lens[1] = {1};
    if (o->batched)
        assert_int_equal(sbf_add_many(o->s, items, lens, 1, &o->res), 1);
    else
        o->res = sbf_add(o->s, "x", 1);
    return NULL;
}

static void overtaken_add(bool batched, bloomery_layout layout)
{
    /* A batch's group goes to the newest link at once only while it has
     * room for far more than the group: a fresh link of 5000; a single add
     * needs one free slot. */
    bool group = batched;
    uint64_t cap = group ? 5000 : 100, i = 0;
    sbf_t *s;
    sbf_options o = {.layout = layout, .expansion = 2, .seed = 11};
    assert_int_equal(sbf_create(&s, cap, 0.01, &o), BLOOMERY_OK);
    char key[32];
    while (!group && sbf_count(s) < cap - 1)
        sbf_add(s, key, tu_key(key, "fill:", i++));
    assert_int_equal(sbf_check(s, "x", 1), 0);
    overtake_point = group ? TEST_POINT_CHAIN_GROUP_LOCK : TEST_POINT_CHAIN_ADD_LOCK;
    overtake_stage = 0;
    test_point_set(overtake_hook);
    overtaken a = {s, batched, -1};
    pthread_t t;
    pthread_create(&t, NULL, overtaken_adder, &a);
    while (__atomic_load_n(&overtake_stage, __ATOMIC_ACQUIRE) != 1)
        ;
    while (sbf_count(s) < cap)
        sbf_add(s, key, tu_key(key, "fill:", i++));
    int mine = sbf_add(s, "x", 1);
    assert_int_equal(sbf_nlinks(s), 2);
    __atomic_store_n(&overtake_stage, 2, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    test_point_set(NULL);
    assert_int_equal(mine, 1);
    assert_int_equal(a.res, 0);
    assert_int_equal(sbf_count(s), cap + 1);
    sbf_free(s);
}

static void test_add_overtaken_by_growth(void **state)
{
    (void)state;
    overtaken_add(false, BLOOMERY_LAYOUT_BLOCKED);
    overtaken_add(false, BLOOMERY_LAYOUT_PREFIX);
}

static void test_batch_overtaken_by_growth(void **state)
{
    (void)state;
    overtaken_add(true, BLOOMERY_LAYOUT_BLOCKED);
    overtaken_add(true, BLOOMERY_LAYOUT_PREFIX);
}

static bool veto(void *ctx, uint64_t bytes)
{
    uint64_t *limit = ctx;
    return bytes <= *limit;
}

static void test_allocation_veto(void **state)
{
    (void)state;
    uint64_t limit = 4096;
    sbf_options o = {.expansion = 4, .may_allocate = veto, .may_allocate_ctx = &limit};
    sbf_t *s;
    assert_int_equal(sbf_create(&s, 100, 0.01, &o), BLOOMERY_OK);
    char key[32];
    uint64_t i = 0;
    int rc;
    while ((rc = sbf_add(s, key, tu_key(key, "v:", i))) >= 0)
        i++;
    assert_int_equal(rc, BLOOMERY_EREFUSED);
    size_t links = sbf_nlinks(s);
    uint64_t count = sbf_count(s);
    /* Nothing changed by the refused growth; present items still answer. */
    assert_int_equal(sbf_add(s, key, tu_key(key, "v:", i)), BLOOMERY_EREFUSED);
    assert_int_equal(sbf_nlinks(s), links);
    assert_int_equal(sbf_count(s), count);
    assert_int_equal(sbf_add(s, key, tu_key(key, "v:", 0)), 0);
    limit = 1 << 30;
    assert_int_equal(sbf_add(s, key, tu_key(key, "v:", i)), 1);
    assert_int_equal(sbf_nlinks(s), links + 1);
    sbf_free(s);
    limit = 10;
    assert_int_equal(sbf_create(&s, 100000, 0.01, &o), BLOOMERY_EREFUSED);
}

static void test_merge(void **state)
{
    (void)state;
    sbf_t *a, *b, *c;
    sbf_options o = {.expansion = 0};
    assert_int_equal(sbf_create(&a, 1000, 0.01, &o), BLOOMERY_OK);
    assert_int_equal(sbf_create(&b, 1000, 0.01, &o), BLOOMERY_OK);
    assert_int_equal(sbf_create(&c, 2000, 0.01, &o), BLOOMERY_OK);
    char key[32];
    for (uint64_t i = 0; i < 400; i++) {
        sbf_add(a, key, tu_key(key, "a:", i));
        sbf_add(b, key, tu_key(key, "b:", i));
    }
    assert_int_equal(sbf_merge(a, c), BLOOMERY_EINVAL);
    assert_int_equal(sbf_merge(a, b), BLOOMERY_OK);
    for (uint64_t i = 0; i < 400; i++) {
        assert_int_equal(sbf_check(a, key, tu_key(key, "a:", i)), 1);
        assert_int_equal(sbf_check(a, key, tu_key(key, "b:", i)), 1);
    }
    sbf_free(a);
    sbf_free(b);
    sbf_free(c);
    /* Prefix chains, grown to three links each: every item of both. */
    o.layout = BLOOMERY_LAYOUT_PREFIX;
    o.expansion = 2;
    assert_int_equal(sbf_create(&a, 1000, 0.01, &o), BLOOMERY_OK);
    assert_int_equal(sbf_create(&b, 1000, 0.01, &o), BLOOMERY_OK);
    assert_int_equal(sbf_create(&c, 1000, 0.01, &o), BLOOMERY_OK);
    for (uint64_t i = 0; i < 6000; i++) {
        sbf_add(a, key, tu_key(key, "a:", i));
        sbf_add(b, key, tu_key(key, "b:", i));
    }
    assert_int_equal(sbf_nlinks(a), 3);
    assert_int_equal(sbf_nlinks(b), 3);
    /* A chain's adds count what their full bins moved to the spare. */
    assert_true(pf_spare_count(sbf_link_prefix(a, 0)) > 0);
    assert_int_equal(sbf_merge(a, c), BLOOMERY_EINVAL); /* one link against three */
    uint64_t count = sbf_count(a) + sbf_count(b);
    assert_int_equal(sbf_merge(a, b), BLOOMERY_OK);
    assert_int_equal(sbf_count(a), count);
    for (uint64_t i = 0; i < 6000; i++) {
        assert_int_equal(sbf_check(a, key, tu_key(key, "a:", i)), 1);
        assert_int_equal(sbf_check(a, key, tu_key(key, "b:", i)), 1);
    }
    sbf_free(a);
    sbf_free(b);
    sbf_free(c);
}

/* Replaying logged hashes rebuilds the same chain as adding the items. */
static void test_hashed_replay(void **state)
{
    (void)state;
    for (int layout = 0; layout < 2; layout++) {
        sbf_t *a, *b;
        sbf_options o = {.layout = (bloomery_layout)layout, .expansion = 2, .seed = 5};
        assert_int_equal(sbf_create(&a, 50, 0.01, &o), BLOOMERY_OK);
        assert_int_equal(sbf_create(&b, 50, 0.01, &o), BLOOMERY_OK);
        char key[32];
        for (uint64_t i = 0; i < 500; i++) {
            size_t len = tu_key(key, "r:", i);
            sbf_hash h = sbf_hash_item(a, key, len);
            assert_int_equal(sbf_add(a, key, len), sbf_add_hashed(b, h));
            assert_int_equal(sbf_check_hashed(b, h), 1);
        }
        assert_int_equal(sbf_nlinks(a), sbf_nlinks(b));
        assert_int_equal(sbf_count(a), sbf_count(b));
        for (size_t i = 0; i < sbf_nlinks(a); i++) {
            if (layout)
                assert_memory_equal(cbf_data(sbf_link_classic(a, i)),
                                    cbf_data(sbf_link_classic(b, i)),
                                    cbf_bytes(sbf_link_classic(a, i)));
            else
                assert_memory_equal(bf_data(sbf_link_blocked(a, i)),
                                    bf_data(sbf_link_blocked(b, i)),
                                    bf_bytes(sbf_link_blocked(a, i)));
        }
        sbf_free(a);
        sbf_free(b);
    }
    hll_t *x, *y;
    assert_int_equal(hll_create(&x, 0), BLOOMERY_OK);
    assert_int_equal(hll_create(&y, 0), BLOOMERY_OK);
    char key[32];
    for (uint64_t i = 0; i < 5000; i++) {
        size_t len = tu_key(key, "h:", i);
        assert_int_equal(hll_add(x, key, len), hll_add_hashed(y, hll_hash_elem(key, len)));
    }
    size_t lx, ly;
    const uint8_t *px = hll_bytes(x, &lx), *py = hll_bytes(y, &ly);
    assert_int_equal(lx, ly);
    assert_memory_equal(px, py, lx);
    hll_free(x);
    hll_free(y);
}

static void test_invalid(void **state)
{
    (void)state;
    sbf_t *s;
    sbf_options o = {.expansion = SBF_MAX_EXPANSION + 1};
    assert_int_equal(sbf_create(&s, 100, 0.01, &o), BLOOMERY_EINVAL);
    assert_int_equal(sbf_create(&s, 0, 0.01, NULL), BLOOMERY_EINVAL);
    assert_int_equal(sbf_create(&s, 100, 1.5, NULL), BLOOMERY_EINVAL);
    assert_int_equal(sbf_bytes_for(0, 0.01, NULL), 0);
    assert_true(sbf_bytes_for(100, 0.01, NULL) > 0);
}

/* A prefix chain's write barrier names every bin before it changes: the
 * bins as they were when it was set, rebuilt from the live ones and a copy
 * of each bin the barrier named, are exactly the bins then, across bins
 * that fill and give fingerprints to the spare, and growth. */
typedef struct barrier_log {
    const sbf_t *s;
    uint8_t *saved[2]; /* per link: the bins' bytes as first named */
    uint8_t *named[2]; /* per bin: whether it was named */
    uint64_t calls;
} barrier_log;

static void record_write(void *ctx, uint32_t region, uint64_t off, uint64_t len)
{
    barrier_log *b = ctx;
    assert_true(region % 2 == 0 && region / 2 < 2 && len == 64 && off % 64 == 0);
    const pf_t *l = sbf_link_prefix(b->s, region / 2);
    assert_true(off + len <= pf_data_bytes(l));
    if (!b->named[region / 2][off / 64]) {
        memcpy(b->saved[region / 2] + off, pf_data(l) + off, 64);
        b->named[region / 2][off / 64] = 1;
    }
    b->calls++;
}

static void test_prefix_write_barrier(void **state)
{
    (void)state;
    sbf_options o = {.layout = BLOOMERY_LAYOUT_PREFIX, .expansion = 2, .seed = 9};
    sbf_t *s;
    assert_int_equal(sbf_create(&s, 2000, 0.01, &o), BLOOMERY_OK);
    char key[32];
    for (uint64_t i = 0; i < 3000; i++) /* two links, the second part full */
        sbf_add(s, key, tu_key(key, "w:", i));
    assert_int_equal(sbf_nlinks(s), 2);
    barrier_log b = {.s = s};
    uint8_t *at_start[2];
    for (int i = 0; i < 2; i++) {
        const pf_t *l = sbf_link_prefix(s, i);
        size_t n = pf_data_bytes(l);
        at_start[i] = malloc(n);
        memcpy(at_start[i], pf_data(l), n);
        b.saved[i] = malloc(n);
        b.named[i] = calloc(n / 64, 1);
    }
    sbf_set_write_hook(s, record_write, &b);
    /* The newest link fills (bins overflow to the spare) and a third grows;
     * old items are added again (present: named or not, nothing changes). */
    for (uint64_t i = 0; i < 9000; i++)
        sbf_add(s, key, tu_key(key, "w:", i));
    assert_int_equal(sbf_nlinks(s), 3);
    assert_true(pf_spare_count(sbf_link_prefix(s, 1)) > 0);
    sbf_set_write_hook(s, NULL, NULL);
    for (uint64_t i = 9000; i < 10000; i++) /* unhooked: no calls */
        sbf_add(s, key, tu_key(key, "w:", i));
    uint64_t changed = 0;
    for (int i = 0; i < 2; i++) {
        const pf_t *l = sbf_link_prefix(s, i);
        for (uint64_t bin = 0; bin < pf_data_bytes(l) / 64; bin++) {
            const uint8_t *was = b.named[i][bin] ? b.saved[i] + bin * 64 : pf_data(l) + bin * 64;
            if (i == 1 && !b.named[i][bin])
                changed += memcmp(pf_data(l) + bin * 64, at_start[i] + bin * 64, 64) != 0;
            assert_memory_equal(was, at_start[i] + bin * 64, 64);
        }
        free(at_start[i]);
        free(b.saved[i]);
        free(b.named[i]);
    }
    assert_true(b.calls >= 2500); /* the 3000 adds to link 1 less false positives */
    assert_int_equal(changed, 0);
    sbf_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_growth_rules),
        cmocka_unit_test(test_nonscaling_full),
        cmocka_unit_test(test_chain_fpr),
        cmocka_unit_test(test_legacy_schedule),
        cmocka_unit_test(test_reserve_bits),
        cmocka_unit_test(test_growth_fpr),
        cmocka_unit_test(test_no_false_negatives_1e8),
        cmocka_unit_test(test_chain_probe_matches_links),
        cmocka_unit_test(test_batch_finds_older_links),
        tu_threaded_test(test_concurrent_adds_with_growth),
        tu_threaded_test_teardown(test_concurrent_batched_adds_with_growth, restore_far_bytes),
        tu_threaded_test(test_add_overtaken_by_growth),
        tu_threaded_test(test_batch_overtaken_by_growth),
        cmocka_unit_test(test_allocation_veto),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_prefix_write_barrier),
        cmocka_unit_test(test_hashed_replay),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests_name("scalable", tests, NULL, NULL);
}

/* Growing filter: no false negative across any number of growths, alone or
 * under concurrent adds and lookups, the error rate after growth, and the
 * paths a growth rarely takes (fingerprints run out, buckets saturate, a
 * growth refused). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <unistd.h>

#include "bloomery/bloomery.h"
#include "estimate.h"
#include "growing_cpu.h"
#include "testutil.h"

static uint64_t count_missing(const gf_t *gf, const char *prefix, uint64_t n)
{
    char key[32];
    uint64_t missing = 0;
    for (uint64_t i = 0; i < n; i++)
        missing += !gf_check(gf, key, tu_key(key, prefix, i));
    return missing;
}

static uint64_t count_hits(const gf_t *gf, const char *prefix, uint64_t n)
{
    char key[32];
    uint64_t hits = 0;
    for (uint64_t i = 0; i < n; i++)
        hits += gf_check(gf, key, tu_key(key, prefix, i));
    return hits;
}

/* Returns how many were new. */
static uint64_t add_range(gf_t *gf, const char *prefix, uint64_t from, uint64_t to)
{
    char key[32];
    uint64_t fresh = 0;
    for (uint64_t i = from; i < to; i++) {
        int rc = gf_add(gf, key, tu_key(key, prefix, i));
        assert_true(rc >= 0);
        fresh += (uint64_t)rc;
    }
    return fresh;
}

static void test_arguments(void **state)
{
    (void)state;
    gf_t *gf;
    assert_int_equal(gf_create(&gf, 0, 0.01, 2, 0), BLOOMERY_EINVAL);
    assert_int_equal(gf_create(&gf, 100, 0, 2, 0), BLOOMERY_EINVAL);
    assert_int_equal(gf_create(&gf, 100, 1, 2, 0), BLOOMERY_EINVAL);
    assert_int_equal(gf_create(&gf, 100, 0.01, 3, 0), BLOOMERY_EINVAL);
    assert_int_equal(gf_create(&gf, 100, 0.01, 1, 0), BLOOMERY_EINVAL);
    assert_int_equal(gf_create(&gf, 100, 0.01, 65536, 0), BLOOMERY_EINVAL);
    assert_int_equal(gf_create(&gf, 100, 1e-12, 2, 0), BLOOMERY_ETOOBIG);
    assert_int_equal(gf_bytes_for(100, 1e-12), 0);
    /* Fingerprints widen as the rate falls. */
    unsigned last = 0;
    const double rates[] = {0.1, 0.01, 1e-3, 1e-4, 1e-5};
    for (unsigned i = 0; i < 5; i++) {
        assert_int_equal(gf_create(&gf, 1000, rates[i], 2, 7), BLOOMERY_OK);
        assert_true(gf_fingerprint_bits(gf) >= last);
        last = gf_fingerprint_bits(gf);
        assert_int_equal(gf_bytes(gf), gf_bytes_for(1000, rates[i]));
        assert_int_equal(gf_capacity(gf), 1000);
        assert_true(gf_grows_at(gf) >= 1000);
        assert_int_equal(gf_expansion(gf), 2);
        assert_int_equal(gf_seed(gf), 7);
        gf_free(gf);
    }
    assert_true(last > 18);
}

/* From one bucket to millions of items: 2^17 times and more, so the first
 * items run out of fingerprint bits and spread over several buckets (with
 * expansion 4 some have one bit left for two). Nothing added goes missing,
 * at any step. */
static void grow_far(uint32_t expansion)
{
    uint64_t n = tu_scale(3000000, 400000);
    gf_t *gf;
    assert_int_equal(gf_create(&gf, 1, 0.01, expansion, 3), BLOOMERY_OK);
    uint64_t done = 0, fresh = 0;
    for (uint64_t step = 1000; done < n; step *= 4) {
        uint64_t to = done + step < n ? done + step : n;
        fresh += add_range(gf, "m:", done, to);
        done = to;
        assert_int_equal(count_missing(gf, "m:", done), 0);
    }
    assert_int_equal(gf_count(gf), fresh);
    assert_true(fresh > n - n / 100);
    /* Duplicates are present already. */
    char key[32];
    for (uint64_t i = 0; i < 1000; i++)
        assert_int_equal(gf_add(gf, key, tu_key(key, "m:", i)), 0);
    gf_settle(gf);
    assert_int_equal(count_missing(gf, "m:", n), 0);
    gf_free(gf);
}

static void test_grow_far(void **state)
{
    (void)state;
    grow_far(2);
}

static void test_grow_far_by_four(void **state)
{
    (void)state;
    grow_far(4);
}

/* Every copy of the lookup code answers the same, on grown filters of
 * every fingerprint width (fields cross 32-bit words at their own
 * places). */
static void test_cpu_levels_agree(void **state)
{
    (void)state;
    uint64_t n = tu_scale(100000, 20000);
    int top = gf_cpu_level();
    unsigned seen = 0;
    for (double p = 0.5;; p *= 0.7) {
        gf_t *gf;
        int rc = gf_create(&gf, 100, p, 2, 5);
        if (rc == BLOOMERY_ETOOBIG) /* below what 27 bits give */
            break;
        assert_int_equal(rc, BLOOMERY_OK);
        seen |= 1U << (gf_fingerprint_bits(gf) - 16);
        add_range(gf, "m:", 0, n);
        uint64_t hits[3] = {0};
        for (int level = 0; level <= top; level++) {
            gf_set_cpu_level(level);
            assert_int_equal(count_missing(gf, "m:", n), 0);
            hits[level] = count_hits(gf, "x:", n);
            assert_int_equal(hits[level], hits[0]);
        }
        gf_set_cpu_level(top);
        gf_free(gf);
    }
    assert_int_equal(seen, 0xfff); /* W = 16 to 27 */
}

/* The rate after growing from RedisBloom's defaults to 10^6 items is at
 * most p, and the batched lookup agrees with the single one. */
static void test_rate_after_growth(void **state)
{
    (void)state;
    const double rates[] = {0.01, 1e-3};
    for (unsigned r = 0; r < 2; r++) {
        double p = rates[r];
        uint64_t n = tu_scale(1000000, 100000), q = tu_scale(2000000, 200000);
        gf_t *gf;
        assert_int_equal(gf_create(&gf, 100, p, 2, 11), BLOOMERY_OK);
        add_range(gf, "m:", 0, n);
        uint64_t fp = count_hits(gf, "x:", q);
        double rate = (double)fp / (double)q;
        print_message("p %g: %zu bytes, %.2f bits per item, rate %.6f\n", p, (size_t)gf_bytes(gf),
                      8.0 * (double)gf_bytes(gf) / (double)n, rate);
        assert_true(rate <= p);
        bloomery_hash h[100];
        uint8_t out[100];
        char key[32];
        uint64_t fp2 = 0;
        for (uint64_t i = 0; i < q; i += 100) {
            for (unsigned k = 0; k < 100; k++)
                h[k] = bloomery_hash_item(key, tu_key(key, "x:", i + k), 11);
            gf_check_many_hashed(gf, h, 100, out);
            for (unsigned k = 0; k < 100; k++)
                fp2 += out[k];
        }
        assert_int_equal(fp2, fp);
        gf_free(gf);
    }
}

/* Batched adds answer as single ones, duplicates within a batch
 * included, through growth. */
static void test_batched_adds(void **state)
{
    (void)state;
    uint64_t n = tu_scale(300000, 60000);
    gf_t *one, *many;
    assert_int_equal(gf_create(&one, 1, 0.01, 2, 9), BLOOMERY_OK);
    assert_int_equal(gf_create(&many, 1, 0.01, 2, 9), BLOOMERY_OK);
    bloomery_hash h[100];
    int res[100];
    char key[32];
    for (uint64_t i = 0; i < n; i += 100) {
        for (unsigned k = 0; k < 100; k++) /* every tenth a repeat of the one before */
            h[k] = bloomery_hash_item(key, tu_key(key, "m:", i + k - (k % 10 == 9)), 9);
        assert_int_equal(gf_add_many_hashed(many, h, 100, res), 100);
        for (unsigned k = 0; k < 100; k++)
            assert_int_equal(res[k], gf_add_hashed(one, h[k]));
    }
    assert_int_equal(gf_count(one), gf_count(many));
    uint64_t missing = 0;
    for (uint64_t i = 0; i < n; i++)
        missing += i % 10 != 9 && !gf_check(many, key, tu_key(key, "m:", i));
    assert_int_equal(missing, 0);
    gf_free(one);
    gf_free(many);
}

/* The estimate follows the measured rate, on grown filters and a filled
 * non-scaling one, whole and sampled. */
static void test_estimate(void **state)
{
    (void)state;
    uint64_t n = tu_scale(1000000, 200000), q = tu_scale(4000000, 1000000);
    const double rates[] = {0.01, 1e-3};
    for (unsigned r = 0; r < 2; r++) {
        for (uint32_t expansion = 0; expansion <= 4; expansion += 2) {
            gf_t *gf;
            assert_int_equal(gf_create(&gf, expansion ? 100 : n, rates[r], expansion, 3),
                             BLOOMERY_OK);
            add_range(gf, "m:", 0, n);
            double measured = (double)count_hits(gf, "x:", q) / (double)q;
            double whole = gf_fpr_estimate(gf);
            estimate_set_sample(2048);
            double sampled = gf_fpr_estimate(gf);
            estimate_set_sample(ESTIMATE_SAMPLE);
            print_message("p %g expansion %u: measured %.6f, estimate %.6f, sampled %.6f\n",
                          rates[r], expansion, measured, whole, sampled);
            /* 4 sigma of the measurement, and 10% of the model's rate. */
            double slack = 4 * sqrt(measured / (double)q) + measured / 10;
            assert_true(fabs(whole - measured) <= slack);
            /* The sample reads over 2048 buckets: a third off, or one
             * saturated bucket's share of them. */
            assert_true(fabs(sampled - whole) <= whole / 3 + 1.0 / 2048);
            gf_free(gf);
        }
    }
}

static void test_non_scaling(void **state)
{
    (void)state;
    gf_t *gf;
    assert_int_equal(gf_create(&gf, 5000, 0.01, 0, 1), BLOOMERY_OK);
    uint64_t bytes = gf_bytes(gf), added = 0;
    char key[32];
    uint64_t i = 0;
    int rc;
    while ((rc = gf_add(gf, key, tu_key(key, "m:", i))) >= 0) {
        added += (uint64_t)rc;
        i++;
    }
    assert_int_equal(rc, BLOOMERY_EFULL);
    assert_int_equal(added, 5000);
    assert_int_equal(gf_count(gf), 5000);
    assert_int_equal(gf_bytes(gf), bytes);
    assert_int_equal(count_missing(gf, "m:", i), 0);
    assert_int_equal(gf_add(gf, key, tu_key(key, "m:", 0)), 0);
    gf_free(gf);
}

/* Small non-scaling filters filled to capacity: their few buckets' loads
 * vary far more than a big table's, and with no growth to fall back on, a
 * pool sized for the mean alone would saturate buckets, each a share of
 * all lookups. */
static void test_small_non_scaling_rate(void **state)
{
    (void)state;
    const double rates[] = {0.01, 1e-3, 1e-4, 3e-5};
    uint64_t q = 20000;
    for (double cap = 100; cap < 5000; cap *= 1.1) {
        for (unsigned r = 0; r < 4; r++) {
            gf_t *gf;
            assert_int_equal(gf_create(&gf, (uint64_t)cap, rates[r], 0, 1), BLOOMERY_OK);
            char key[32];
            uint64_t i = 0;
            while (gf_add(gf, key, tu_key(key, "m:", i)) >= 0)
                i++;
            assert_int_equal(gf_count(gf), (uint64_t)cap);
            assert_true((double)count_hits(gf, "x:", q) / (double)q <= tu_fpr_bound(rates[r], q));
            gf_free(gf);
        }
    }
}

/* Hashes that all land on one spot, as crafted ones would: they pile into
 * one bucket and the pool until the bucket saturates, and the table does
 * not grow for them (growth would not split them). */
static void test_pile_saturates(void **state)
{
    (void)state;
    gf_t *gf;
    assert_int_equal(gf_create(&gf, 1000000, 0.01, 2, 1), BLOOMERY_OK);
    uint64_t bytes = gf_bytes(gf);
    /* 2^63 is half way along the buckets; steps of 2^36 stay in one
     * bucket (fewer than 600000 of them) but change the fingerprint. */
    bloomery_hash h[200], other = {0, (1ULL << 63) + (1000ULL << 36)};
    for (unsigned i = 0; i < 200; i++) {
        h[i] = (bloomery_hash){i, (1ULL << 63) + ((uint64_t)i << 36)};
        assert_true(gf_add_hashed(gf, h[i]) >= 0);
        /* A bucket's 28 slots and 24 entries in the pool, then it
         * saturates: any item of that bucket may exist. */
        assert_int_equal(gf_check_hashed(gf, other), i >= 28 + 24);
    }
    assert_int_equal(gf_bytes(gf), bytes);
    for (unsigned i = 0; i < 200; i++)
        assert_true(gf_check_hashed(gf, h[i]));
    /* The rest of the filter grows as ever. */
    add_range(gf, "m:", 0, 3000000);
    assert_true(gf_bytes(gf) > bytes);
    assert_int_equal(count_missing(gf, "m:", 3000000), 0);
    for (unsigned i = 0; i < 200; i++)
        assert_true(gf_check_hashed(gf, h[i]));
    gf_free(gf);
}

/* A pile in a small table: saturating a bucket there would cost the rate
 * more than p/64, so the table grows (a few times, while it is small)
 * until the pile spreads, and the rate stays within p. */
static void test_pile_in_small_table(void **state)
{
    (void)state;
    gf_t *gf;
    assert_int_equal(gf_create(&gf, 100, 0.01, 2, 1), BLOOMERY_OK);
    bloomery_hash h[60];
    for (unsigned i = 0; i < 60; i++) {
        h[i] = (bloomery_hash){i, (1ULL << 63) + ((uint64_t)i << 52)};
        assert_true(gf_add_hashed(gf, h[i]) >= 0);
    }
    uint64_t n = tu_scale(1000000, 200000), q = tu_scale(1000000, 200000);
    add_range(gf, "m:", 0, n);
    for (unsigned i = 0; i < 60; i++)
        assert_true(gf_check_hashed(gf, h[i]));
    assert_true((double)count_hits(gf, "x:", q) / (double)q <= 0.01);
    gf_free(gf);
}

static bool refuse(void *ctx, uint64_t bytes)
{
    (void)bytes;
    return !*(bool *)ctx;
}

/* A refused growth fails an add only when a bucket and the pool have no room, with
 * BLOOMERY_EREFUSED and nothing lost; allowed again, the filter grows. */
static void test_growth_refused(void **state)
{
    (void)state;
    gf_t *gf;
    assert_int_equal(gf_create(&gf, 1000, 0.01, 2, 1), BLOOMERY_OK);
    bool refusing = true;
    gf_set_may_allocate(gf, refuse, &refusing);
    uint64_t bytes = gf_bytes(gf), i = 0;
    char key[32];
    int rc;
    while ((rc = gf_add(gf, key, tu_key(key, "m:", i))) >= 0)
        i++;
    assert_int_equal(rc, BLOOMERY_EREFUSED);
    assert_true(i >= 1000);
    assert_int_equal(gf_bytes(gf), bytes);
    assert_int_equal(count_missing(gf, "m:", i), 0);
    refusing = false;
    add_range(gf, "m:", i, i + 100000);
    assert_true(gf_bytes(gf) > bytes);
    assert_int_equal(count_missing(gf, "m:", i + 100000), 0);
    gf_free(gf);
}

typedef struct race {
    gf_t *gf;
    uint64_t n;
    const char *prefix;
    uint64_t *acked; /* items the writer has finished adding (release) */
    uint64_t lost;   /* a reader's count of acknowledged items it missed */
    unsigned char *fresh;
} race;

static void *writer(void *arg)
{
    race *r = arg;
    char key[32];
    for (uint64_t i = 0; i < r->n; i++) {
        if (gf_add(r->gf, key, tu_key(key, r->prefix, i)) < 0)
            abort();
        if (r->acked)
            __atomic_store_n(r->acked, i + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* Checks, over and over, the latest items its writer has acknowledged. */
static void *reader(void *arg)
{
    race *r = arg;
    char key[32];
    uint64_t done = 0;
    while (done < r->n) {
        uint64_t upto = __atomic_load_n(r->acked, __ATOMIC_ACQUIRE);
        for (uint64_t i = upto > 64 ? upto - 64 : 0; i < upto; i++)
            r->lost += !gf_check(r->gf, key, tu_key(key, r->prefix, i));
        done = upto;
    }
    return NULL;
}

/* Two writers grow a filter from one bucket while a reader checks writer
 * a's acknowledged items as they come: it meets buckets while they move
 * and tables as they retire. */
static void test_writers_and_readers_while_growing(void **state)
{
    (void)state;
    uint64_t n = tu_scale(200000, 40000), rounds = tu_scale(20, 4), lost = 0;
    for (uint64_t round = 0; round < rounds; round++) {
        gf_t *gf;
        assert_int_equal(gf_create(&gf, 1, 0.01, 2, round), BLOOMERY_OK);
        uint64_t acked = 0;
        race a = {.gf = gf, .n = n, .prefix = "a:", .acked = &acked};
        race ra = a, b = {.gf = gf, .n = n, .prefix = "b:"};
        pthread_t ta, tb, tr;
        pthread_create(&ta, NULL, writer, &a);
        pthread_create(&tb, NULL, writer, &b);
        pthread_create(&tr, NULL, reader, &ra);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        pthread_join(tr, NULL);
        lost += ra.lost;
        assert_int_equal(count_missing(gf, "a:", n), 0);
        assert_int_equal(count_missing(gf, "b:", n), 0);
        /* And no bucket saturated in the race: nearly all were new, and
         * absent items are answered at the rate. */
        assert_true(gf_count(gf) >= 2 * n - 2 * n / 50);
        assert_true((double)count_hits(gf, "x:", n) / (double)n <= tu_fpr_bound(0.01, n));
        gf_free(gf);
    }
    assert_int_equal(lost, 0);
}

static void *grower(void *arg)
{
    race *r = arg;
    assert_int_equal(gf_create(&r->gf, 1, 0.01, 2, 0), BLOOMERY_OK);
    writer(r);
    return NULL;
}

/* Filters growing in two threads at once: their buckets share sequence
 * locks, and moving one must not wait on a lock the other's mover holds
 * (a hang here is the failure; the alarm ends it). */
static void test_filters_grow_side_by_side(void **state)
{
    (void)state;
    uint64_t n = tu_scale(1000000, 200000);
    alarm(600); /* far beyond a sanitized build on a loaded machine */
    for (unsigned round = 0; round < 3; round++) {
        race a = {.n = n, .prefix = "a:"}, b = {.n = n, .prefix = "b:"};
        pthread_t ta, tb;
        pthread_create(&ta, NULL, grower, &a);
        pthread_create(&tb, NULL, grower, &b);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        assert_int_equal(count_missing(a.gf, "a:", n), 0);
        assert_int_equal(count_missing(b.gf, "b:", n), 0);
        gf_free(a.gf);
        gf_free(b.gf);
    }
    alarm(0);
}

static void *same_adder(void *arg)
{
    race *r = arg;
    char key[32];
    for (uint64_t i = 0; i < r->n; i++) {
        int rc = gf_add(r->gf, key, tu_key(key, "same:", i));
        if (rc < 0)
            abort();
        r->fresh[i] = (unsigned char)rc;
    }
    return NULL;
}

/* Two threads add the same items while the filter grows: no item is new
 * to both. */
static void test_add_linearizable(void **state)
{
    (void)state;
    uint64_t n = tu_scale(500000, 50000);
    gf_t *gf;
    assert_int_equal(gf_create(&gf, 1, 0.001, 2, 13), BLOOMERY_OK);
    race a = {.gf = gf, .n = n, .fresh = calloc(n, 1)};
    race b = {.gf = gf, .n = n, .fresh = calloc(n, 1)};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, same_adder, &a);
    pthread_create(&tb, NULL, same_adder, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    uint64_t twice = 0, fresh = 0;
    for (uint64_t i = 0; i < n; i++) {
        twice += a.fresh[i] && b.fresh[i];
        fresh += a.fresh[i] || b.fresh[i];
    }
    assert_int_equal(twice, 0);
    assert_int_equal(gf_count(gf), fresh);
    assert_true(fresh >= n - n / 100);
    assert_int_equal(count_missing(gf, "same:", n), 0);
    free(a.fresh);
    free(b.fresh);
    gf_free(gf);
}

/* ---- copy-on-write snapshots ---- */

#define PAGE 4096

/* What a copy-on-write snapshot keeps of a filter's tables as at its start
 * (as bloomeryd's snapshot.c does): each page's bytes from before the
 * first write the hook reports, else the live page when read. */
typedef struct cow_image {
    gf_state st;
    const uint8_t *live[2];
    uint64_t bytes[2];
    uint8_t **saved[2];
} cow_image;

static void cow_hook(void *ctx, uint32_t region, uint64_t offset, uint64_t len)
{
    cow_image *im = ctx;
    assert_true(region < im->st.ntables && len > 0 && offset + len <= im->bytes[region]);
    for (uint64_t p = offset / PAGE; p <= (offset + len - 1) / PAGE; p++) {
        if (im->saved[region][p])
            continue;
        uint64_t n = im->bytes[region] - p * PAGE < PAGE ? im->bytes[region] - p * PAGE : PAGE;
        im->saved[region][p] = malloc(n);
        assert_non_null(im->saved[region][p]);
        memcpy(im->saved[region][p], im->live[region] + p * PAGE, n);
    }
}

static void cow_start(cow_image *im, gf_t *gf)
{
    memset(im, 0, sizeof *im);
    gf_get_state(gf, &im->st);
    for (unsigned i = 0; i < im->st.ntables; i++) {
        im->live[i] = gf_table_data(gf, i, &im->bytes[i]);
        im->saved[i] = calloc(im->bytes[i] / PAGE + 1, sizeof(uint8_t *));
        assert_non_null(im->saved[i]);
    }
    gf_set_write_hook(gf, cow_hook, im, 0);
}

/* The snapshot's reading: into a new filter, validated. Frees im. */
static gf_t *cow_finish(cow_image *im, gf_t *gf)
{
    gf_t *r;
    assert_int_equal(gf_create_state(&r, &im->st), BLOOMERY_OK);
    for (unsigned i = 0; i < im->st.ntables; i++) {
        uint64_t bytes;
        uint8_t *dst = gf_table_data_mut(r, i, &bytes);
        assert_int_equal(bytes, im->bytes[i]);
        for (uint64_t p = 0; p * PAGE < bytes; p++) {
            uint64_t n = bytes - p * PAGE < PAGE ? bytes - p * PAGE : PAGE;
            const uint8_t *src = im->saved[i][p] ? im->saved[i][p] : im->live[i] + p * PAGE;
            memcpy(dst + p * PAGE, src, n);
            free(im->saved[i][p]);
        }
        free(im->saved[i]);
    }
    gf_set_write_hook(gf, NULL, NULL, 0);
    assert_int_equal(gf_validate(r), BLOOMERY_OK);
    return r;
}

static void count_released(void *ctx, uint64_t bytes) { *(uint64_t *)ctx += bytes; }

typedef enum at_start { SETTLED, MOVING, ALMOST_MOVED } at_start;

/* Fills a filter to a few items short of its growth, or on until a growth
 * is under way (or has a few buckets left to move: the old table is given
 * back before adds write most of its pool's pages); takes the snapshot
 * there and grows the filter twice more before reading it. The copy
 * answers exactly as the filter did at the start, for the items added
 * before and after; it goes on growing from where it was. */
static void snapshot_while_growing(at_start when)
{
    bool moving = when != SETTLED;
    gf_t *gf;
    assert_int_equal(gf_create(&gf, 100000, 0.01, 2, 7), BLOOMERY_OK);
    uint64_t old = 0;
    while (gf_count(gf) + 20 < gf_grows_at(gf)) {
        uint64_t k = gf_grows_at(gf) - 20 - gf_count(gf);
        add_range(gf, "o", old, old + k);
        old += k;
    }
    char key[32];
    gf_state st;
    for (gf_get_state(gf, &st); moving && st.ntables == 1; gf_get_state(gf, &st))
        add_range(gf, "o", old, old + 1), old++;
    for (; when == ALMOST_MOVED && st.cursor + 8 < st.buckets[0]; gf_get_state(gf, &st))
        add_range(gf, "o", old, old + 1), old++;
    assert_int_equal(st.ntables, moving ? 2 : 1);
    uint64_t count0 = gf_count(gf), bytes0 = gf_bytes(gf), cap0 = gf_capacity(gf);
    enum { NEW = 400000 };
    uint8_t *at0 = malloc(NEW);
    assert_non_null(at0);
    for (uint64_t i = 0; i < NEW; i++)
        at0[i] = gf_check(gf, key, tu_key(key, "n", i));
    uint64_t released = 0;
    gf_set_released(gf, count_released, &released);
    cow_image im;
    cow_start(&im, gf);
    add_range(gf, "n", 0, NEW);
    assert_true(gf_capacity(gf) >= (moving ? 2 : 4) * cap0);
    /* The tables the snapshot reads are kept until it ends, then given
     * back; the others as soon as they retire. */
    uint64_t before = released;
    gf_t *r = cow_finish(&im, gf);
    assert_int_equal(released - before, bytes0);
    assert_int_equal(gf_count(r), count0);
    assert_int_equal(gf_bytes(r), bytes0);
    assert_int_equal(count_missing(r, "o", old), 0);
    uint64_t differ = 0;
    for (uint64_t i = 0; i < NEW; i++)
        differ += gf_check(r, key, tu_key(key, "n", i)) != at0[i];
    assert_int_equal(differ, 0);
    add_range(r, "z", 0, old);
    assert_int_equal(count_missing(r, "o", old), 0);
    assert_int_equal(count_missing(r, "z", old), 0);
    free(at0);
    gf_free(r);
    gf_free(gf);
}

/* A table loaded as it was passes gf_validate; one whose pool holds an
 * entry no insert leaves (a marker below a new fingerprint's, an entry
 * after an empty one on its way from home) does not. */
static void test_validate_pool(void **state)
{
    (void)state;
    gf_t *gf;
    assert_int_equal(gf_create(&gf, 3000, 0.01, 0, 7), BLOOMERY_OK);
    char key[32];
    for (uint64_t i = 0; gf_count(gf) < 3000; i++)
        assert_true(gf_add(gf, key, tu_key(key, "v", i)) >= 0);
    gf_state st;
    gf_get_state(gf, &st);
    uint64_t bytes;
    const uint64_t *live = (const uint64_t *)gf_table_data(gf, 0, &bytes);
    uint64_t pool = 8 * st.buckets[0], npool = bytes / 8 - pool, last = UINT64_MAX;
    for (uint64_t i = 0; i + 1 < npool; i++)
        if (live[pool + i] && !live[pool + i + 1])
            last = i; /* the end of a run */
    assert_true(last != UINT64_MAX);
    for (int forge = 0; forge < 3; forge++) {
        gf_t *r;
        assert_int_equal(gf_create_state(&r, &st), BLOOMERY_OK);
        uint64_t *t = (uint64_t *)gf_table_data_mut(r, 0, &bytes);
        memcpy(t, live, bytes);
        uint64_t *e = &t[pool + last];
        if (forge == 1)
            *e = (*e & ~((1ULL << 27) - 1)) | 1;
        if (forge == 2)
            e[1] = e[0], e[0] = 0;
        assert_int_equal(gf_validate(r), forge ? BLOOMERY_ECORRUPT : BLOOMERY_OK);
        if (!forge)
            assert_int_equal(count_missing(r, "v", 3000), 0);
        gf_free(r);
    }
    gf_free(gf);
}

static void test_snapshot_settled(void **state)
{
    (void)state;
    snapshot_while_growing(SETTLED);
}

static void test_snapshot_moving(void **state)
{
    (void)state;
    snapshot_while_growing(MOVING);
}

static void test_snapshot_almost_moved(void **state)
{
    (void)state;
    snapshot_while_growing(ALMOST_MOVED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_grow_far),
        cmocka_unit_test(test_grow_far_by_four),
        cmocka_unit_test(test_cpu_levels_agree),
        cmocka_unit_test(test_rate_after_growth),
        cmocka_unit_test(test_batched_adds),
        cmocka_unit_test(test_estimate),
        cmocka_unit_test(test_non_scaling),
        cmocka_unit_test(test_small_non_scaling_rate),
        cmocka_unit_test(test_pile_saturates),
        cmocka_unit_test(test_pile_in_small_table),
        cmocka_unit_test(test_growth_refused),
        tu_threaded_test(test_writers_and_readers_while_growing),
        tu_threaded_test(test_add_linearizable),
        tu_threaded_test(test_filters_grow_side_by_side),
        cmocka_unit_test(test_validate_pool),
        cmocka_unit_test(test_snapshot_settled),
        cmocka_unit_test(test_snapshot_moving),
        cmocka_unit_test(test_snapshot_almost_moved),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

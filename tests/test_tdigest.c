/* t-digest: quantile and CDF error against the exact answers on uniform,
 * normal and heavy-tailed data (fixed seeds), RedisBloom's documented
 * examples, ranks, merges, determinism and serialization. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bloomery/bloomery.h"
#include "testutil.h"

/* ---- data ---- */

static double uniform01(uint64_t *s)
{
    return ((double)(tu_next(s) >> 11) + 0.5) / 9007199254740992.0;
}

static double normal01(uint64_t *s)
{
    double u = uniform01(s), v = uniform01(s);
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

enum dist { UNIFORM, NORMAL, LOGNORMAL, PARETO, NDIST };
static const char *dist_name[] = {"uniform", "normal", "lognormal", "pareto"};

static double draw(enum dist d, uint64_t *s)
{
    switch (d) {
    case UNIFORM: return uniform01(s) * 1000 - 200;
    case NORMAL: return 50 + 10 * normal01(s);
    case LOGNORMAL: return exp(2 * normal01(s));     /* sigma 2: a heavy right tail */
    case PARETO: return pow(uniform01(s), -1 / 1.2); /* alpha 1.2: infinite variance */
    default: return 0;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Fractions of the sorted data below and up to x. */
static void true_cdf(const double *sorted, size_t n, double x, double *lt, double *le)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sorted[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t a = lo;
    hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sorted[mid] <= x)
            lo = mid + 1;
        else
            hi = mid;
    }
    *lt = (double)a / (double)n;
    *le = (double)lo / (double)n;
}

/* Distance from q to the true rank interval of x. */
static double rank_error(const double *sorted, size_t n, double x, double q)
{
    double lt, le;
    true_cdf(sorted, n, x, &lt, &le);
    return q < lt ? lt - q : q > le ? q - le : 0;
}

static tdigest_t *digest_of(const double *v, size_t n, uint64_t compression)
{
    tdigest_t *t;
    assert_int_equal(tdigest_create(&t, compression), BLOOMERY_OK);
    /* In batches of 100, as TDIGEST.ADD sends them. */
    for (size_t i = 0; i < n; i += 100)
        assert_int_equal(tdigest_add(t, v + i, n - i < 100 ? n - i : 100), BLOOMERY_OK);
    return t;
}

static const double qs[] = {0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999};
#define NQ (sizeof qs / sizeof qs[0])

/* The bounds tdigest.h documents: a rank error of at most half the share
 * of q's centroid, pi ln(W) q (1 - q) / c (plus one value), whatever the
 * data; and for smooth unimodal data at c = 100, 0.02 as well. */
static double bound(double q, double W, double c, int smooth)
{
    double b = M_PI * log(W) * q * (1 - q) / c + 1 / W;
    return smooth && b > 0.02 ? 0.02 : b;
}

/* ---- accuracy ---- */

static void check_accuracy(const tdigest_t *t, const double *sorted, size_t n, int smooth,
                           const char *what)
{
    tdigest_state st;
    tdigest_state_of(t, &st);
    double est[NQ];
    assert_int_equal(tdigest_quantiles(t, qs, est, NQ), BLOOMERY_OK);
    double worst_mid = 0, worst_tail = 0;
    for (size_t i = 0; i < NQ; i++) {
        double e = rank_error(sorted, n, est[i], qs[i]);
        double b = bound(qs[i], (double)n, (double)st.compression, smooth);
        if (qs[i] < 0.005 || qs[i] > 0.995)
            worst_tail = e > worst_tail ? e : worst_tail;
        else
            worst_mid = e > worst_mid ? e : worst_mid;
        if (e > b)
            fail_msg("%s: q %g estimated %g, rank error %g over %g", what, qs[i], est[i], e, b);
        /* The CDF at the true quantile is within the same bound. */
        double x = sorted[(size_t)(qs[i] * (double)(n - 1))], c, lt, le;
        assert_int_equal(tdigest_cdfs(t, &x, &c, 1), BLOOMERY_OK);
        true_cdf(sorted, n, x, &lt, &le);
        double ce = c < lt ? lt - c : c > le ? c - le : 0;
        if (ce > b)
            fail_msg("%s: cdf(%g) = %g, true [%g, %g]", what, x, c, lt, le);
    }
    printf("# %s: worst rank error %.5f (middle), %.5f (tails)\n", what, worst_mid, worst_tail);
    /* The extremes are exact. */
    double ends[2] = {0, 1}, got[2];
    assert_int_equal(tdigest_quantiles(t, ends, got, 2), BLOOMERY_OK);
    assert_true(got[0] == sorted[0] && got[1] == sorted[n - 1]);
    assert_true(tdigest_min(t) == sorted[0] && tdigest_max(t) == sorted[n - 1]);
}

static void test_quantile_accuracy(void **state)
{
    (void)state;
    size_t n = (size_t)tu_scale(100000, 20000);
    double *v = malloc(n * sizeof(*v));
    for (int d = 0; d < NDIST; d++) {
        for (uint64_t seed = 1; seed <= 3; seed++) {
            uint64_t s = seed * 0x9e3779b97f4a7c15ULL + (uint64_t)d;
            for (size_t i = 0; i < n; i++)
                v[i] = draw((enum dist)d, &s);
            tdigest_t *t = digest_of(v, n, TDIGEST_DEFAULT_COMPRESSION);
            assert_int_equal(tdigest_count(t), n);
            qsort(v, n, sizeof(*v), cmp_double);
            char what[64];
            snprintf(what, sizeof what, "%s seed %llu", dist_name[d], (unsigned long long)seed);
            check_accuracy(t, v, n, 1, what);
            tdigest_free(t);
        }
    }
    free(v);
}

/* Sorted input is the classic hard case for a buffer-and-merge digest. */
static void test_sorted_input(void **state)
{
    (void)state;
    size_t n = (size_t)tu_scale(100000, 20000);
    double *v = malloc(n * sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = (double)i;
    tdigest_t *t = digest_of(v, n, TDIGEST_DEFAULT_COMPRESSION);
    check_accuracy(t, v, n, 1, "ascending");
    tdigest_free(t);
    for (size_t i = 0; i < n; i++)
        v[i] = (double)(n - i);
    t = digest_of(v, n, TDIGEST_DEFAULT_COMPRESSION);
    qsort(v, n, sizeof(*v), cmp_double);
    check_accuracy(t, v, n, 1, "descending");
    tdigest_free(t);
    free(v);
}

/* ---- RedisBloom's documented examples ---- */

static tdigest_t *digest_list(const double *v, size_t n)
{
    tdigest_t *t;
    assert_int_equal(tdigest_create(&t, 100), BLOOMERY_OK);
    assert_int_equal(tdigest_add(t, v, n), BLOOMERY_OK);
    return t;
}

static void test_documented_examples(void **state)
{
    (void)state;
    const double v[] = {1, 2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 5};
    tdigest_t *t = digest_list(v, 15);
    const double x[] = {0, 1, 2, 3, 4, 5, 6};
    const double cdf[] = {0, 1.0 / 30, 2.0 / 15, 0.3, 8.0 / 15, 12.5 / 15, 1};
    double out[11];
    assert_int_equal(tdigest_cdfs(t, x, out, 7), BLOOMERY_OK);
    for (int i = 0; i < 7; i++)
        assert_float_equal(out[i], cdf[i], 1e-12);
    const double q[] = {0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1};
    const double qv[] = {1, 2, 3, 3, 4, 4, 4, 5, 5, 5, 5};
    assert_int_equal(tdigest_quantiles(t, q, out, 11), BLOOMERY_OK);
    for (int i = 0; i < 11; i++)
        assert_float_equal(out[i], qv[i], 0);
    tdigest_free(t);

    const double w[] = {10, 20, 30, 40, 50, 60};
    t = digest_list(w, 6);
    const double rx[] = {0, 10, 20, 30, 40, 50, 60, 70};
    int64_t ranks[8];
    const int64_t rank[] = {-1, 0, 1, 2, 3, 4, 5, 6}, revrank[] = {6, 5, 4, 3, 2, 1, 0, -1};
    assert_int_equal(tdigest_ranks(t, rx, ranks, 8, 0), BLOOMERY_OK);
    assert_memory_equal(ranks, rank, sizeof rank);
    assert_int_equal(tdigest_ranks(t, rx, ranks, 8, 1), BLOOMERY_OK);
    assert_memory_equal(ranks, revrank, sizeof revrank);
    const uint64_t r[] = {0, 1, 2, 3, 4, 5, 6, 7};
    const double byrank[] = {10, 20, 30, 40, 50, 60, INFINITY, INFINITY};
    const double byrev[] = {60, 50, 40, 30, 20, 10, -INFINITY, -INFINITY};
    assert_int_equal(tdigest_by_ranks(t, r, out, 8, 0), BLOOMERY_OK);
    for (int i = 0; i < 8; i++)
        assert_true(out[i] == byrank[i]);
    assert_int_equal(tdigest_by_ranks(t, r, out, 8, 1), BLOOMERY_OK);
    for (int i = 0; i < 8; i++)
        assert_true(out[i] == byrev[i]);
    tdigest_free(t);

    const double ten[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    t = digest_list(ten, 10);
    double m;
    assert_int_equal(tdigest_trimmed_mean(t, 0.1, 0.6, &m), BLOOMERY_OK);
    assert_float_equal(m, 4, 1e-12);
    assert_int_equal(tdigest_trimmed_mean(t, 0.3, 0.9, &m), BLOOMERY_OK);
    assert_float_equal(m, 6.5, 1e-12);
    assert_int_equal(tdigest_trimmed_mean(t, 0, 1, &m), BLOOMERY_OK);
    assert_float_equal(m, 5.5, 1e-12);
    tdigest_free(t);
}

static void test_empty_and_invalid(void **state)
{
    (void)state;
    tdigest_t *t;
    assert_int_equal(tdigest_create(&t, 0), BLOOMERY_EINVAL);
    assert_int_equal(tdigest_create(&t, TDIGEST_MAX_COMPRESSION + 1), BLOOMERY_EINVAL);
    assert_int_equal(tdigest_capacity_for(100), 610);
    assert_int_equal(tdigest_create(&t, 100), BLOOMERY_OK);
    assert_int_equal(tdigest_capacity(t), 610);
    assert_true(isnan(tdigest_min(t)) && isnan(tdigest_max(t)));
    double q = 0.5, out;
    assert_int_equal(tdigest_quantiles(t, &q, &out, 1), BLOOMERY_OK);
    assert_true(isnan(out));
    assert_int_equal(tdigest_cdfs(t, &q, &out, 1), BLOOMERY_OK);
    assert_true(isnan(out));
    int64_t rk;
    assert_int_equal(tdigest_ranks(t, &q, &rk, 1, 0), BLOOMERY_OK);
    assert_int_equal(rk, -2);
    assert_int_equal(tdigest_trimmed_mean(t, 0.1, 0.9, &out), BLOOMERY_OK);
    assert_true(isnan(out));
    /* Non-finite values are refused whole. */
    const double bad[] = {1, NAN}, inf[] = {2, INFINITY}, ninf[] = {-INFINITY};
    assert_int_equal(tdigest_add(t, bad, 2), BLOOMERY_EINVAL);
    assert_int_equal(tdigest_add(t, inf, 2), BLOOMERY_EINVAL);
    assert_int_equal(tdigest_add(t, ninf, 1), BLOOMERY_EINVAL);
    assert_int_equal(tdigest_count(t), 0);
    /* Extreme finite values do not overflow the interpolations. */
    const double big[] = {-DBL_MAX, DBL_MAX, -DBL_MAX / 3, DBL_MAX / 2, 0};
    assert_int_equal(tdigest_add(t, big, 5), BLOOMERY_OK);
    double qq[] = {0, 0.3, 0.5, 0.7, 1}, got[5];
    assert_int_equal(tdigest_quantiles(t, qq, got, 5), BLOOMERY_OK);
    for (int i = 0; i < 5; i++)
        assert_true(isfinite(got[i]));
    assert_int_equal(tdigest_cdfs(t, big, got, 5), BLOOMERY_OK);
    for (int i = 0; i < 5; i++)
        assert_true(got[i] >= 0 && got[i] <= 1);
    assert_int_equal(tdigest_trimmed_mean(t, 0, 1, &out), BLOOMERY_OK);
    assert_true(isfinite(out));
    q = 2;
    assert_int_equal(tdigest_quantiles(t, &q, &out, 1), BLOOMERY_OK);
    assert_true(isnan(out));
    tdigest_free(t);
}

/* ---- consistency ---- */

static void test_cdf_rank_consistency(void **state)
{
    (void)state;
    uint64_t s = 42;
    size_t n = 20000;
    double *v = malloc(n * sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = draw(LOGNORMAL, &s);
    tdigest_t *t = digest_of(v, n, 100);
    qsort(v, n, sizeof(*v), cmp_double);
    double prev_c = 0, prev_q = -INFINITY;
    for (int i = 0; i <= 1000; i++) {
        double p = i / 1000.0, x = v[(size_t)(p * (double)(n - 1))], c, qv;
        int64_t rk, rrk;
        assert_int_equal(tdigest_cdfs(t, &x, &c, 1), BLOOMERY_OK);
        assert_int_equal(tdigest_quantiles(t, &p, &qv, 1), BLOOMERY_OK);
        assert_int_equal(tdigest_ranks(t, &x, &rk, 1, 0), BLOOMERY_OK);
        assert_int_equal(tdigest_ranks(t, &x, &rrk, 1, 1), BLOOMERY_OK);
        /* Monotone CDF and quantiles; rank + revrank = count. */
        assert_true(c >= prev_c && qv >= prev_q);
        prev_c = c;
        prev_q = qv;
        assert_true(llabs(rk - (int64_t)llround(c * (double)n)) <= 1);
        assert_true(llabs(rk + rrk - (int64_t)n) <= 1);
        /* quantile and cdf invert each other within the bound. */
        double back;
        assert_int_equal(tdigest_cdfs(t, &qv, &back, 1), BLOOMERY_OK);
        assert_true(fabs(back - p) <= 0.02);
    }
    /* byrank(rank(x)) lands on a value of about the same rank. */
    for (uint64_t r = 1; r < n; r += 997) {
        double x;
        assert_int_equal(tdigest_by_ranks(t, &r, &x, 1, 0), BLOOMERY_OK);
        double e = rank_error(v, n, x, (double)r / (double)n);
        if (e > 0.02)
            fail_msg("byrank %llu: %g, rank error %g", (unsigned long long)r, x, e);
    }
    tdigest_free(t);
    free(v);
}

static void test_merge_equals_union(void **state)
{
    (void)state;
    size_t n = (size_t)tu_scale(60000, 15000);
    double *v = malloc(n * sizeof(*v));
    uint64_t s = 7;
    for (size_t i = 0; i < n; i++)
        v[i] = draw(i % 3 == 0 ? NORMAL : LOGNORMAL, &s);
    /* Three parts merged into a fourth (a merged centroid is never split,
     * so the coarsest part bounds the result: all of compression 100). */
    tdigest_t *parts[3];
    size_t third = n / 3;
    const uint64_t comp[] = {100, 100, 100};
    for (int k = 0; k < 3; k++)
        parts[k] = digest_of(v + k * third, k == 2 ? n - 2 * third : third, comp[k]);
    tdigest_t *dst;
    assert_int_equal(tdigest_create(&dst, 100), BLOOMERY_OK);
    assert_int_equal(tdigest_merge(dst, (const tdigest_t *const *)parts, 3), BLOOMERY_OK);
    assert_int_equal(tdigest_count(dst), n);
    tdigest_t *whole = digest_of(v, n, 100);
    qsort(v, n, sizeof(*v), cmp_double);
    check_accuracy(whole, v, n, 0, "union");
    check_accuracy(dst, v, n, 0, "merged");
    /* A digest merged into itself doubles and keeps its quantiles. */
    double before, after, half = 0.5;
    assert_int_equal(tdigest_quantiles(dst, &half, &before, 1), BLOOMERY_OK);
    const tdigest_t *self[] = {dst, NULL};
    assert_int_equal(tdigest_merge(dst, self, 2), BLOOMERY_OK);
    assert_int_equal(tdigest_count(dst), 2 * n);
    assert_int_equal(tdigest_quantiles(dst, &half, &after, 1), BLOOMERY_OK);
    assert_true(rank_error(v, n, after, 0.5) <= bound(0.5, (double)n, 100, 0));
    /* Doubling again and again reaches the weight limit: refused whole. */
    int rc = BLOOMERY_OK;
    int doublings = 0;
    while (rc == BLOOMERY_OK && doublings < 80) {
        rc = tdigest_merge(dst, self, 1);
        doublings++;
    }
    assert_int_equal(rc, BLOOMERY_ETOOBIG);
    assert_true(tdigest_count(dst) <= TDIGEST_MAX_WEIGHT);
    for (int k = 0; k < 3; k++)
        tdigest_free(parts[k]);
    tdigest_free(dst);
    tdigest_free(whole);
    free(v);
}

/* ---- determinism and serialization ---- */

static uint8_t *blob_of(const tdigest_t *t, size_t *len)
{
    uint8_t *b;
    bloomery_object o = {.type = BLOOMERY_TYPE_TDIGEST, .u.td = (tdigest_t *)t};
    assert_int_equal(bloomery_serialize(o, 256, &b, len), BLOOMERY_OK);
    return b;
}

static void test_deterministic(void **state)
{
    (void)state;
    uint64_t s = 99;
    double v[5000];
    for (size_t i = 0; i < 5000; i++)
        v[i] = draw(PARETO, &s);
    tdigest_t *a = digest_of(v, 5000, 30), *b = digest_of(v, 5000, 30);
    size_t la, lb;
    uint8_t *ba = blob_of(a, &la);
    /* Queries do not change the digest. */
    double q = 0.3, out;
    assert_int_equal(tdigest_quantiles(b, &q, &out, 1), BLOOMERY_OK);
    assert_int_equal(tdigest_cdfs(b, &q, &out, 1), BLOOMERY_OK);
    uint8_t *bb = blob_of(b, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(ba, bb, la);
    tdigest_state st;
    tdigest_state_of(a, &st);
    assert_true(st.total_compressions > 0 && st.unmerged_nodes > 0);
    /* Reset empties it to the bytes of a new digest. */
    tdigest_t *fresh;
    assert_int_equal(tdigest_create(&fresh, 30), BLOOMERY_OK);
    tdigest_reset(a);
    free(ba);
    free(bb);
    ba = blob_of(a, &la);
    bb = blob_of(fresh, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(ba, bb, la);
    free(ba);
    free(bb);
    tdigest_free(a);
    tdigest_free(b);
    tdigest_free(fresh);
}

static void test_round_trip_and_damage(void **state)
{
    (void)state;
    uint64_t s = 5;
    double v[700];
    for (size_t i = 0; i < 700; i++)
        v[i] = draw(NORMAL, &s);
    tdigest_t *t = digest_of(v, 700, 10);
    size_t len;
    uint8_t *blob = blob_of(t, &len);
    bloomery_object back;
    const char *msg;
    assert_int_equal(bloomery_deserialize(blob, len, 0, &back, &msg), BLOOMERY_OK);
    assert_int_equal(back.type, BLOOMERY_TYPE_TDIGEST);
    size_t len2;
    uint8_t *blob2 = blob_of(back.u.td, &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(blob, blob2, len);
    double q[] = {0.01, 0.5, 0.99}, a[3], b[3];
    assert_int_equal(tdigest_quantiles(t, q, a, 3), BLOOMERY_OK);
    assert_int_equal(tdigest_quantiles(back.u.td, q, b, 3), BLOOMERY_OK);
    assert_memory_equal(a, b, sizeof a);
    bloomery_object_free(&back);
    free(blob2);
    /* Every truncation and every changed byte is refused. */
    uint8_t *copy = malloc(len);
    size_t accepted = 0;
    for (size_t i = 0; i < len; i++) {
        if (bloomery_deserialize(blob, i, 0, &back, NULL) == BLOOMERY_OK) {
            accepted++;
            bloomery_object_free(&back);
        }
        for (unsigned x = 1; x < 256; x += tu_quick() ? 37 : 1) {
            memcpy(copy, blob, len);
            copy[i] ^= (uint8_t)x;
            if (bloomery_deserialize(copy, len, 0, &back, NULL) == BLOOMERY_OK) {
                accepted++;
                bloomery_object_free(&back);
            }
        }
    }
    assert_int_equal(accepted, 0);
    free(copy);
    free(blob);
    tdigest_free(t);
}

/* Images with valid checksums but impossible contents: nodes damaged in
 * memory before serializing. */
static void test_forged_images_refused(void **state)
{
    (void)state;
    for (int k = 0; k < 8; k++) {
        tdigest_t *t;
        assert_int_equal(tdigest_create(&t, 5), BLOOMERY_OK);
        double v[100];
        for (int i = 0; i < 100; i++)
            v[i] = (double)((i * 37) % 100);
        assert_int_equal(tdigest_add(t, v, 100), BLOOMERY_OK);
        tdigest_state st;
        tdigest_state_of(t, &st);
        assert_true(st.merged_nodes >= 3 && st.unmerged_nodes >= 1);
        tdigest_node *n = tdigest_nodes_mut(t);
        uint64_t used = st.merged_nodes + st.unmerged_nodes;
        const char *what = "";
        switch (k) {
        case 0: n[1].mean = NAN, what = "NaN mean"; break;
        case 1: n[2].mean = INFINITY, what = "infinite mean"; break;
        case 2: {
            tdigest_node x = n[0];
            n[0] = n[1];
            n[1] = x;
            what = "unsorted centroids";
            break;
        }
        case 3: n[1].weight = 0, what = "zero weight"; break;
        case 4: n[1].weight = UINT64_MAX, what = "weight past the total"; break;
        case 5: n[0].weight += 1, what = "weights not adding up"; break;
        case 6: n[used].weight = 1, what = "a node past the used ones"; break;
        case 7: n[used - 1].mean = 1000, what = "a mean above the maximum"; break;
        }
        size_t len;
        uint8_t *blob = blob_of(t, &len);
        bloomery_object back;
        const char *msg;
        int rc = bloomery_deserialize(blob, len, 0, &back, &msg);
        if (rc != BLOOMERY_ECORRUPT)
            fail_msg("%s accepted (rc %d)", what, rc);
        printf("# %s: %s\n", what, msg);
        free(blob);
        tdigest_free(t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantile_accuracy),     cmocka_unit_test(test_sorted_input),
        cmocka_unit_test(test_documented_examples),   cmocka_unit_test(test_empty_and_invalid),
        cmocka_unit_test(test_cdf_rank_consistency),  cmocka_unit_test(test_merge_equals_union),
        cmocka_unit_test(test_deterministic),         cmocka_unit_test(test_round_trip_and_damage),
        cmocka_unit_test(test_forged_images_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

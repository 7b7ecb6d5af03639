/* Cuckoo filter: RedisBloom's defaults, limits and CF.INFO fields; zero false
 * negatives for items added and not deleted; delete semantics; measured FPR
 * for 8, 12 and 16-bit fingerprints against the formula; failed inserts
 * change nothing; duplicates; compaction; packed slots for every width. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomery/bloomery.h"
#include "bloomery/murmur.h"
#include "testutil.h"

#define ALT_MULT 0x5bd1e995ULL

static cf_options opts_with(unsigned b, unsigned expansion, unsigned max_iter, unsigned f)
{
    cf_options o;
    cf_options_init(&o);
    o.bucket_size = b;
    o.expansion = expansion;
    o.max_iterations = max_iter;
    o.fingerprint_bits = f;
    return o;
}

/* All sub-filter tables, concatenated, to compare states. */
static uint8_t *snapshot(const cf_t *c, size_t *len)
{
    size_t n = (size_t)cf_bytes(c), at = 0;
    uint8_t *p = malloc(n ? n : 1);
    assert_non_null(p);
    for (uint32_t i = 0; i < cf_nfilters(c); i++) {
        memcpy(p + at, cf_filter_data(c, i), (size_t)cf_filter_bytes(c, i));
        at += (size_t)cf_filter_bytes(c, i);
    }
    *len = n;
    return p;
}

static void test_defaults_and_info(void **state)
{
    (void)state;
    cf_t *c;
    /* CF.RESERVE cf 1000 in RedisBloom: Size 1080, 512 buckets, 1 filter. */
    assert_int_equal(cf_create(&c, 1000, NULL), BLOOMERY_OK);
    assert_int_equal(cf_info_size(c), 1080);
    assert_int_equal(cf_nbuckets(c), 512);
    assert_int_equal(cf_nfilters(c), 1);
    assert_int_equal(cf_items(c), 0);
    assert_int_equal(cf_deletes(c), 0);
    assert_int_equal(cf_bucket_size(c), 2);
    assert_int_equal(cf_expansion(c), 1);
    assert_int_equal(cf_max_iterations(c), 20);
    assert_int_equal(cf_fingerprint_bits(c), 8);
    assert_int_equal(cf_max_filters(c), 32);
    assert_int_equal(cf_bytes(c), 1024);
    assert_int_equal(cf_slots(c), 1024);
    assert_int_equal(cf_bytes_for(1000, NULL), 1024);
    cf_free(c);
    cf_free(NULL);

    /* Auto-created filter: capacity 1024, bucket 2. */
    assert_int_equal(cf_create(&c, CF_DEFAULT_CAPACITY, NULL), BLOOMERY_OK);
    assert_int_equal(cf_nbuckets(c), 512);
    cf_free(c);

    /* Buckets: next power of two of capacity / bucket size. */
    cf_options o = opts_with(4, 1, 20, 8);
    assert_int_equal(cf_create(&c, 1001, &o), BLOOMERY_OK);
    assert_int_equal(cf_nbuckets(c), 256);
    assert_int_equal(cf_info_size(c), 40 + 16 + 1024);
    cf_free(c);
    o = opts_with(3, 1, 20, 8);
    assert_int_equal(cf_create(&c, 6, &o), BLOOMERY_OK);
    assert_int_equal(cf_nbuckets(c), 2);
    cf_free(c);

    /* Expansion is rounded up to a power of two; 0 stays 0. */
    unsigned in[] = {0, 1, 2, 3, 5, 1000, 20000, 32768},
             want[] = {0, 1, 2, 4, 8, 1024, 32768, 32768};
    for (int i = 0; i < 8; i++) {
        o = opts_with(2, in[i], 20, 8);
        assert_int_equal(cf_create(&c, 1000, &o), BLOOMERY_OK);
        assert_int_equal(cf_expansion(c), want[i]);
        cf_free(c);
    }

    /* Packed fingerprints: the table costs f bits per slot. */
    for (unsigned f = 8; f <= 32; f++) {
        o = opts_with(2, 1, 20, f);
        assert_int_equal(cf_create(&c, 1000, &o), BLOOMERY_OK);
        assert_int_equal(cf_bytes(c), 1024 * f / 8);
        assert_int_equal(cf_info_size(c), 40 + 16 + 1024 * f / 8);
        cf_free(c);
    }
}

static void test_limits(void **state)
{
    (void)state;
    cf_t *c = NULL;
    struct {
        unsigned b, exp, iter, f, maxf;
        uint64_t cap;
        int ok;
    } cases[] = {
        {1, 1, 20, 8, 32, 2, 1},        {255, 1, 20, 8, 32, 510, 1},
        {0, 1, 20, 8, 32, 1000, 0},     {256, 1, 20, 8, 32, 1000, 0},
        {2, 1, 20, 8, 32, 4, 1},        {2, 1, 20, 8, 32, 3, 0}, /* capacity >= 2b */
        {255, 1, 20, 8, 32, 509, 0},    {2, 1, 1, 8, 32, 1000, 1},
        {2, 1, 65535, 8, 32, 1000, 1},  {2, 1, 0, 8, 32, 1000, 0},
        {2, 1, 65536, 8, 32, 1000, 0},  {2, 32768, 20, 8, 32, 1000, 1},
        {2, 32769, 20, 8, 32, 1000, 0}, {2, 1, 20, 7, 32, 1000, 0},
        {2, 1, 20, 33, 32, 1000, 0},    {2, 1, 20, 32, 32, 1000, 1},
        {2, 1, 20, 8, 0, 1000, 0},      {2, 1, 20, 8, 65536, 1000, 1},
        {2, 1, 20, 8, 65537, 1000, 0},  {2, 1, 20, 8, 32, CF_MAX_CAPACITY + 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cf_options o = opts_with(cases[i].b, cases[i].exp, cases[i].iter, cases[i].f);
        o.max_filters = cases[i].maxf;
        int rc = cf_create(&c, cases[i].cap, &o);
        if (cases[i].ok) {
            assert_int_equal(rc, BLOOMERY_OK);
            assert_true(cf_bytes_for(cases[i].cap, &o) > 0);
            cf_free(c);
        } else {
            assert_int_equal(rc, BLOOMERY_EINVAL);
            assert_null(c);
            assert_int_equal(cf_bytes_for(cases[i].cap, &o), 0);
        }
    }
    assert_int_equal(cf_create(&c, 1000, NULL), BLOOMERY_OK);
    assert_int_equal(cf_set_max_filters(c, 0), BLOOMERY_EINVAL);
    assert_int_equal(cf_set_max_filters(c, 65537), BLOOMERY_EINVAL);
    assert_int_equal(cf_set_max_filters(c, 7), BLOOMERY_OK);
    assert_int_equal(cf_max_filters(c), 7);
    cf_free(c);
}

static void test_add_exists_count_delete(void **state)
{
    (void)state;
    cf_t *c;
    assert_int_equal(cf_create(&c, 1000, NULL), BLOOMERY_OK);
    assert_false(cf_exists(c, "a", 1));
    assert_int_equal(cf_add(c, "a", 1), 1);
    assert_true(cf_exists(c, "a", 1));
    assert_int_equal(cf_add_nx(c, "a", 1), 0);
    assert_int_equal(cf_add_nx(c, "b", 1), 1);
    assert_int_equal(cf_add(c, "a", 1), 1); /* duplicates are stored again */
    assert_int_equal(cf_count(c, "a", 1), 2);
    assert_int_equal(cf_items(c), 3);
    assert_true(cf_delete(c, "a", 1)); /* one copy */
    assert_true(cf_exists(c, "a", 1));
    assert_int_equal(cf_count(c, "a", 1), 1);
    assert_true(cf_delete(c, "a", 1));
    assert_false(cf_exists(c, "a", 1));
    assert_false(cf_delete(c, "a", 1));
    assert_true(cf_exists(c, "b", 1));
    assert_int_equal(cf_items(c), 1);
    assert_int_equal(cf_deletes(c), 2);
    assert_int_equal(cf_occupied(c), 1);
    cf_free(c);
}

/* RedisBloom's hashing, exactly: fp = h mod 255 + 1 in byte (h mod n) * b
 * (+ slot) of the table, or in its alternate bucket. */
static void test_redisbloom_layout(void **state)
{
    (void)state;
    cf_t *c;
    assert_int_equal(cf_create(&c, 1000, NULL), BLOOMERY_OK);
    char key[32];
    for (uint64_t i = 0; i < 50; i++) {
        size_t len = tu_key(key, "l:", i);
        uint64_t h = bloomery_murmur64a(key, len, 0);
        assert_int_equal(cf_hash(key, len), h);
        assert_int_equal(cf_fingerprint(c, h), h % 255 + 1);
    }
    size_t len = tu_key(key, "l:", 7);
    uint64_t h = cf_hash(key, len);
    assert_int_equal(cf_add(c, key, len), 1);
    const uint8_t *d = cf_filter_data(c, 0);
    assert_int_equal(d[(h % 512) * 2], h % 255 + 1);
    /* The second copy takes slot 1 of the same bucket, the third and fourth
     * the alternate bucket. */
    assert_int_equal(cf_add(c, key, len), 1);
    assert_int_equal(d[(h % 512) * 2 + 1], h % 255 + 1);
    uint64_t alt = (h ^ (h % 255 + 1) * ALT_MULT) % 512;
    if (alt != h % 512) {
        assert_int_equal(cf_add(c, key, len), 1);
        assert_int_equal(d[alt * 2], h % 255 + 1);
    }
    cf_free(c);

    /* Other widths use the generalized formula. */
    cf_options o = opts_with(2, 1, 20, 12);
    assert_int_equal(cf_create(&c, 1000, &o), BLOOMERY_OK);
    assert_int_equal(cf_fingerprint(c, h), h % 4095 + 1);
    cf_free(c);
    o = opts_with(2, 1, 20, 32);
    assert_int_equal(cf_create(&c, 1000, &o), BLOOMERY_OK);
    assert_int_equal(cf_fingerprint(c, h), h % 0xffffffffULL + 1);
    cf_free(c);
}

/* An item whose two buckets differ in a table of n buckets. */
static size_t two_bucket_key(char *key, const cf_t *c, uint64_t n)
{
    for (uint64_t i = 0;; i++) {
        size_t len = tu_key(key, "d:", i);
        uint64_t h = cf_hash(key, len);
        uint64_t fp = cf_fingerprint(c, h);
        if (((h ^ fp * ALT_MULT) & (n - 1)) != (h & (n - 1)))
            return len;
    }
}

static void test_duplicates_fill_2b_slots(void **state)
{
    (void)state;
    for (unsigned b = 1; b <= 4; b++) {
        for (unsigned exp = 0; exp <= 1; exp++) {
            cf_options o = opts_with(b, exp, 20, 8);
            cf_t *c;
            assert_int_equal(cf_create(&c, 1024 * b, &o), BLOOMERY_OK);
            char key[32];
            size_t len = two_bucket_key(key, c, cf_nbuckets(c));
            for (unsigned i = 0; i < 2 * b; i++)
                assert_int_equal(cf_add(c, key, len), 1);
            assert_int_equal(cf_count(c, key, len), 2 * b);
            assert_int_equal(cf_nfilters(c), 1);
            if (exp == 0) {
                /* "Filter is full": both buckets hold only this item. */
                size_t n;
                uint8_t *before = snapshot(c, &n);
                assert_int_equal(cf_add(c, key, len), BLOOMERY_EFULL);
                assert_int_equal(cf_add_nx(c, key, len), 0);
                uint8_t *after = snapshot(c, &n);
                assert_memory_equal(before, after, n);
                assert_int_equal(cf_items(c), 2 * b);
                free(before);
                free(after);
            } else {
                assert_int_equal(cf_add(c, key, len), 1);
                assert_int_equal(cf_nfilters(c), 2);
                assert_int_equal(cf_count(c, key, len), 2 * b + 1);
            }
            cf_free(c);
        }
    }
}

static void test_failed_inserts_change_nothing(void **state)
{
    (void)state;
    for (unsigned f = 8; f <= 16; f += 4) {
        cf_options o = opts_with(2, 0, 20, f);
        cf_t *c;
        assert_int_equal(cf_create(&c, 512, &o), BLOOMERY_OK);
        char key[32];
        uint64_t i = 0, fails = 0;
        size_t n;
        uint8_t *before = snapshot(c, &n);
        for (; i < 2000; i++) {
            size_t len = tu_key(key, "f:", i);
            uint64_t items = cf_items(c);
            int rc = cf_add(c, key, len);
            uint8_t *after = snapshot(c, &n);
            if (rc == BLOOMERY_EFULL) {
                fails++;
                assert_memory_equal(before, after, n);
                assert_int_equal(cf_items(c), items);
                free(after);
            } else {
                assert_int_equal(rc, 1);
                free(before);
                before = after;
            }
        }
        free(before);
        assert_true(fails > 1000);
        /* Every stored item is still found. */
        assert_int_equal(cf_occupied(c), cf_items(c));
        assert_true(cf_items(c) > 400); /* of 512 slots */
        cf_free(c);
    }
}

static bool veto(void *ctx, uint64_t bytes)
{
    (void)bytes;
    ++*(int *)ctx;
    return false;
}

static void test_growth_veto(void **state)
{
    (void)state;
    int asked = 0;
    cf_options o = opts_with(2, 2, 20, 8);
    cf_t *c;
    assert_int_equal(cf_create(&c, 256, &o), BLOOMERY_OK);
    cf_set_may_allocate(c, veto, &asked);
    char key[32];
    int enomem = 0;
    size_t n;
    uint8_t *before = snapshot(c, &n);
    for (uint64_t i = 0; i < 1000; i++) {
        int rc = cf_add(c, key, tu_key(key, "v:", i));
        uint8_t *after = snapshot(c, &n);
        if (rc == BLOOMERY_EREFUSED) {
            enomem++;
            assert_memory_equal(before, after, n);
            free(after);
        } else {
            assert_int_equal(rc, 1);
            free(before);
            before = after;
        }
    }
    free(before);
    assert_true(enomem > 0);
    assert_int_equal(asked, enomem);
    assert_int_equal(cf_nfilters(c), 1);
    cf_free(c);
}

static void test_maximum_expansions(void **state)
{
    (void)state;
    cf_options o = opts_with(1, 1, 2, 8);
    o.max_filters = 3;
    cf_t *c;
    assert_int_equal(cf_create(&c, 2, &o), BLOOMERY_OK);
    char key[32];
    uint64_t i = 0;
    int rc;
    while ((rc = cf_add(c, key, tu_key(key, "m:", i))) == 1)
        i++;
    assert_int_equal(rc, BLOOMERY_ETOOBIG);
    assert_int_equal(cf_nfilters(c), 3);
    /* Checked before trying: existing items and items that would fit are
     * refused too, by both add forms. */
    assert_int_equal(cf_add(c, key, tu_key(key, "m:", 0)), BLOOMERY_ETOOBIG);
    assert_int_equal(cf_add_nx(c, key, tu_key(key, "m:", 0)), BLOOMERY_ETOOBIG);
    for (uint64_t k = 0; k < i; k++)
        assert_true(cf_exists(c, key, tu_key(key, "m:", k)));
    assert_int_equal(cf_items(c), i);
    /* A server applying a larger cf-max-expansions lets adds go on. */
    assert_int_equal(cf_set_max_filters(c, 4), BLOOMERY_OK);
    assert_int_equal(cf_add(c, key, tu_key(key, "m:", i)), 1);
    cf_free(c);
}

static void test_no_false_negatives_with_growth(void **state)
{
    (void)state;
    uint64_t n = tu_scale(1000000, 50000);
    cf_options o = opts_with(2, 2, 20, 8);
    cf_t *c;
    assert_int_equal(cf_create(&c, n / 16, &o), BLOOMERY_OK);
    char key[32];
    for (uint64_t i = 0; i < n; i++)
        assert_int_equal(cf_add(c, key, tu_key(key, "g:", i)), 1);
    assert_true(cf_nfilters(c) >= 4);
    uint64_t missing = 0;
    for (uint64_t i = 0; i < n; i++)
        missing += !cf_exists(c, key, tu_key(key, "g:", i));
    assert_int_equal(missing, 0);
    assert_int_equal(cf_items(c), n);
    assert_int_equal(cf_occupied(c), n);
    printf("# %llu items: %u sub-filters, %.2f bits per item, load %.3f\n", (unsigned long long)n,
           cf_nfilters(c), 8.0 * (double)cf_bytes(c) / (double)n, (double)n / (double)cf_slots(c));

    /* Delete every odd item (compactions happen on the way); the even ones
     * must all remain. */
    uint64_t deleted = 0;
    for (uint64_t i = 1; i < n; i += 2)
        deleted += cf_delete(c, key, tu_key(key, "g:", i));
    assert_int_equal(deleted, n / 2);
    missing = 0;
    for (uint64_t i = 0; i < n; i += 2)
        missing += !cf_exists(c, key, tu_key(key, "g:", i));
    assert_int_equal(missing, 0);
    assert_int_equal(cf_items(c), n - n / 2);
    assert_int_equal(cf_occupied(c), cf_items(c));
    cf_free(c);
}

static void test_delete_absent_changes_nothing_else(void **state)
{
    (void)state;
    cf_t *c;
    assert_int_equal(cf_create(&c, 4096, NULL), BLOOMERY_OK);
    char key[32];
    uint64_t n = 3000;
    for (uint64_t i = 0; i < n; i++)
        assert_int_equal(cf_add(c, key, tu_key(key, "p:", i)), 1);
    /* Deleting an absent item whose fingerprint matches nothing in its
     * buckets returns 0 and changes nothing. A match (a false positive) would
     * remove another item's copy: the false-deletion caveat. */
    size_t len0;
    uint8_t *before = snapshot(c, &len0);
    uint64_t zero = 0, false_deletes = 0;
    for (uint64_t i = 0; i < 20000; i++) {
        size_t len = tu_key(key, "absent:", i);
        if (cf_exists(c, key, len)) {
            false_deletes++;
            continue;
        }
        assert_false(cf_delete(c, key, len));
        zero++;
    }
    size_t len1;
    uint8_t *after = snapshot(c, &len1);
    assert_memory_equal(before, after, len0);
    assert_int_equal(cf_deletes(c), 0);
    assert_int_equal(cf_items(c), n);
    assert_true(false_deletes > 0 && false_deletes < 20000 / 20);

    /* The caveat itself: deleting a false positive takes a member's copy. */
    uint64_t i = 0;
    size_t len;
    do
        len = tu_key(key, "absent:", i++);
    while (!cf_exists(c, key, len));
    assert_true(cf_delete(c, key, len));
    assert_int_equal(cf_items(c), n - 1);
    uint64_t missing = 0;
    for (uint64_t k = 0; k < n; k++)
        missing += !cf_exists(c, key, tu_key(key, "p:", k));
    assert_true(missing <= 1);
    free(before);
    free(after);
    cf_free(c);
}

static void test_compaction(void **state)
{
    (void)state;
    cf_options o = opts_with(2, 1, 20, 8);
    cf_t *c;
    assert_int_equal(cf_create(&c, 64, &o), BLOOMERY_OK);
    char key[32];
    uint64_t n = 400;
    for (uint64_t i = 0; i < n; i++)
        assert_int_equal(cf_add(c, key, tu_key(key, "c:", i)), 1);
    uint32_t grown = cf_nfilters(c);
    assert_true(grown >= 6);
    /* Deleting most items compacts into the older sub-filters. */
    uint64_t kept = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (i % 8 == 0) {
            kept++;
            continue;
        }
        assert_true(cf_delete(c, key, tu_key(key, "c:", i)));
        assert_true((double)cf_deletes(c) <= (double)cf_items(c) * 0.10 || cf_nfilters(c) == 1);
    }
    assert_true(cf_nfilters(c) < grown);
    assert_int_equal(cf_items(c), kept);
    assert_int_equal(cf_occupied(c), kept);
    for (uint64_t i = 0; i < n; i += 8)
        assert_true(cf_exists(c, key, tu_key(key, "c:", i)));

    /* An explicit compaction resets the delete count. */
    assert_int_equal(cf_add(c, key, tu_key(key, "c:", 1)), 1);
    assert_true(cf_delete(c, key, tu_key(key, "c:", 1)));
    cf_compact(c);
    assert_int_equal(cf_deletes(c), 0);
    for (uint64_t i = 0; i < n; i += 8)
        assert_true(cf_exists(c, key, tu_key(key, "c:", i)));
    cf_free(c);
}

/* Random adds and deletes of present items against an exact multiset, for
 * every fingerprint width, so packed slots of every alignment are exercised. */
static void test_model_every_width(void **state)
{
    (void)state;
    enum { KEYS = 600 };
    unsigned counts[KEYS];
    for (unsigned f = 8; f <= 32; f++) {
        memset(counts, 0, sizeof counts);
        cf_options o = opts_with(1 + f % 4, f % 3, 10, f);
        cf_t *c;
        assert_int_equal(cf_create(&c, 200, &o), BLOOMERY_OK);
        uint64_t rng = f, stored = 0;
        char key[32];
        for (int step = 0; step < 4000; step++) {
            uint64_t r = tu_next(&rng);
            unsigned k = (unsigned)(r % KEYS);
            size_t len = tu_key(key, "w:", k);
            if ((r >> 32) % 3 == 0 && counts[k]) {
                assert_true(cf_delete(c, key, len));
                counts[k]--;
                stored--;
            } else {
                int rc = cf_add(c, key, len);
                if (rc == 1) {
                    counts[k]++;
                    stored++;
                } else {
                    assert_true(rc == BLOOMERY_EFULL || rc == BLOOMERY_ETOOBIG);
                }
            }
        }
        assert_int_equal(cf_items(c), stored);
        assert_int_equal(cf_occupied(c), stored);
        for (unsigned k = 0; k < KEYS; k++) {
            size_t len = tu_key(key, "w:", k);
            if (counts[k]) {
                assert_true(cf_exists(c, key, len));
                assert_true(cf_count(c, key, len) >= counts[k]);
            }
        }
        cf_free(c);
    }
}

static void test_hashed_replay(void **state)
{
    (void)state;
    cf_options o = opts_with(2, 2, 20, 12);
    cf_t *a, *b;
    assert_int_equal(cf_create(&a, 100, &o), BLOOMERY_OK);
    assert_int_equal(cf_create(&b, 100, &o), BLOOMERY_OK);
    char key[32];
    for (uint64_t i = 0; i < 1500; i++) {
        size_t len = tu_key(key, "r:", i % 1000);
        uint64_t h = cf_hash(key, len);
        if (i % 5 == 4) {
            assert_int_equal(cf_delete(a, key, len), cf_delete_hashed(b, h));
        } else if (i % 2) {
            assert_int_equal(cf_add_nx(a, key, len), cf_add_nx_hashed(b, h));
        } else {
            assert_int_equal(cf_add(a, key, len), cf_add_hashed(b, h));
        }
        assert_int_equal(cf_exists(a, key, len), cf_exists_hashed(b, h));
        assert_int_equal(cf_count(a, key, len), cf_count_hashed(b, h));
    }
    assert_int_equal(cf_nfilters(a), cf_nfilters(b));
    size_t la, lb;
    uint8_t *sa = snapshot(a, &la), *sb = snapshot(b, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(sa, sb, la);
    free(sa);
    free(sb);
    cf_free(a);
    cf_free(b);
}

/* One sub-filter with b = 4 at 95% load: measured FPR against
 * eps = 1 - (1 - 1/(2^f - 1))^(2 b load), the exact rate for 2b slots of
 * which a fraction `load` is occupied by uniform nonzero fingerprints
 * (~ 2 b load / 2^f), within 3 sigma of q queries. */
static void test_fpr_matches_formula(void **state)
{
    (void)state;
    unsigned fs[] = {8, 12, 16};
    uint64_t q = tu_scale(10000000, 1000000);
    for (int t = 0; t < 3; t++) {
        unsigned f = fs[t];
        cf_options o = opts_with(4, 0, 500, f);
        cf_t *c;
        assert_int_equal(cf_create(&c, 4 << 16, &o), BLOOMERY_OK);
        uint64_t n = cf_slots(c) * 95 / 100;
        char key[32];
        for (uint64_t i = 0; i < n; i++)
            assert_int_equal(cf_add(c, key, tu_key(key, "m:", i)), 1);
        double load = (double)n / (double)cf_slots(c);
        uint64_t fp = 0;
        for (uint64_t i = 0; i < q; i++)
            fp += cf_exists(c, key, tu_key(key, "x:", i));
        double rate = (double)fp / (double)q;
        double eps = 1 - pow(1 - 1 / (ldexp(1, (int)f) - 1), 2 * 4 * load);
        double sigma = sqrt(eps * (1 - eps) / (double)q);
        printf("# f=%u b=4 load %.3f: FPR %.3e, formula %.3e (+-3 sigma %.1e), %.2f bits/item\n", f,
               load, rate, eps, 3 * sigma, 8.0 * (double)cf_bytes(c) / (double)n);
        assert_true(fabs(rate - eps) <= 3 * sigma);
        cf_free(c);
    }
}

/* The write barrier, used as a snapshot uses it: the hook saves the bytes
 * it is told about, once, as they are then; at the end the saved bytes over
 * the live tables must give back the tables as they were when the hook was
 * set, through kicks, deletes, growth, compaction that frees sub-filters
 * and regrowth in their place. A store without a hook call before it, or a
 * freed table not announced, shows up as a byte that differs. */
#define SHADOW_MAX 16

typedef struct shadow {
    const cf_t *c;
    uint32_t n; /* sub-filters when the hook was set */
    uint64_t len[SHADOW_MAX];
    uint8_t *orig[SHADOW_MAX], *saved[SHADOW_MAX], *mark[SHADOW_MAX];
    uint64_t calls, outside, whole;
} shadow;

static void shadow_hook(void *ctx, uint32_t i, uint64_t off, uint64_t len)
{
    shadow *sh = ctx;
    sh->calls++;
    assert_true(i < cf_nfilters(sh->c));
    assert_true(len > 0 && off + len <= cf_filter_bytes(sh->c, i));
    if (off == 0 && len == cf_filter_bytes(sh->c, i))
        sh->whole++;
    if (i >= sh->n || off >= sh->len[i]) {
        sh->outside++;
        return;
    }
    const uint8_t *live = cf_filter_data(sh->c, i);
    for (uint64_t b = off; b < off + len && b < sh->len[i]; b++)
        if (!sh->mark[i][b]) {
            sh->saved[i][b] = live[b];
            sh->mark[i][b] = 1;
        }
}

static void shadow_start(shadow *sh, cf_t *c)
{
    memset(sh, 0, sizeof *sh);
    sh->c = c;
    sh->n = cf_nfilters(c);
    assert_true(sh->n <= SHADOW_MAX);
    for (uint32_t i = 0; i < sh->n; i++) {
        sh->len[i] = cf_filter_bytes(c, i);
        sh->orig[i] = malloc(sh->len[i]);
        sh->saved[i] = malloc(sh->len[i]);
        sh->mark[i] = calloc(sh->len[i], 1);
        assert_non_null(sh->orig[i]);
        assert_non_null(sh->saved[i]);
        assert_non_null(sh->mark[i]);
        memcpy(sh->orig[i], cf_filter_data(c, i), sh->len[i]);
    }
    cf_set_write_hook(c, shadow_hook, sh);
}

/* Rebuilds the start's tables from saved and live bytes; returns the
 * bytes saved. */
static uint64_t shadow_check(shadow *sh)
{
    uint64_t saved = 0;
    for (uint32_t i = 0; i < sh->n; i++) {
        /* A sub-filter freed since (or freed and grown again) must have
         * been saved whole before it went. */
        bool live = i < cf_nfilters(sh->c) && cf_filter_data(sh->c, i) != NULL;
        for (uint64_t b = 0; b < sh->len[i]; b++) {
            saved += sh->mark[i][b];
            if (!sh->mark[i][b] && !live)
                fail_msg("sub-filter %u byte %llu: freed without the hook", i,
                         (unsigned long long)b);
            uint8_t v = sh->mark[i][b] ? sh->saved[i][b] : cf_filter_data(sh->c, i)[b];
            if (v != sh->orig[i][b])
                fail_msg("sub-filter %u byte %llu changed without the hook", i,
                         (unsigned long long)b);
        }
        free(sh->orig[i]);
        free(sh->saved[i]);
        free(sh->mark[i]);
    }
    return saved;
}

static void test_write_hook(void **state)
{
    (void)state;
    static const unsigned widths[] = {8, 12, 13, 16};
    char key[32];
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        cf_options o = opts_with(2, 1, 20, widths[wi]);
        cf_t *c;
        assert_int_equal(cf_create(&c, 1024, &o), BLOOMERY_OK);
        uint64_t n = 0;
        while (cf_nfilters(c) < 4)
            assert_int_equal(cf_add(c, key, tu_key(key, "h:", n++)), 1);
        shadow sh;
        shadow_start(&sh, c);
        uint32_t grown = cf_nfilters(c), least = grown;
        /* Adds (kicks, growth), then deletes of 7 items in 8, which
         * compacts and frees emptied newest sub-filters, then adds again,
         * growing in their place. */
        uint64_t more = n + 2000;
        for (; n < more; n++)
            assert_int_equal(cf_add(c, key, tu_key(key, "h:", n)), 1);
        if (cf_nfilters(c) > grown)
            grown = cf_nfilters(c);
        for (uint64_t i = 0; i < n; i++) {
            if (i % 8 == 7)
                continue;
            assert_true(cf_delete(c, key, tu_key(key, "h:", i)));
            if (cf_nfilters(c) < least)
                least = cf_nfilters(c);
        }
        for (uint64_t i = 0; i < 1500; i++)
            assert_int_equal(cf_add(c, key, tu_key(key, "g:", i)), 1);
        cf_compact(c);
        for (uint64_t i = 7; i < n; i += 8)
            assert_true(cf_exists(c, key, tu_key(key, "h:", i)));
        printf("# f=%u: %u sub-filters, %u at most, %u at least; %llu hook calls\n", widths[wi],
               sh.n, grown, least, (unsigned long long)sh.calls);
        uint64_t calls = sh.calls, saved = shadow_check(&sh);
        assert_true(saved > 0);
        assert_true(least < sh.n); /* a sub-filter of the start was freed */
        assert_true(sh.whole > 0);
        assert_true(sh.outside > 0); /* and tables grown later were written */
        /* Removed: no more calls. */
        cf_set_write_hook(c, NULL, NULL);
        assert_int_equal(cf_add(c, "x", 1), 1);
        assert_int_equal(sh.calls, calls);
        cf_free(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_info),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_add_exists_count_delete),
        cmocka_unit_test(test_redisbloom_layout),
        cmocka_unit_test(test_duplicates_fill_2b_slots),
        cmocka_unit_test(test_failed_inserts_change_nothing),
        cmocka_unit_test(test_growth_veto),
        cmocka_unit_test(test_maximum_expansions),
        cmocka_unit_test(test_no_false_negatives_with_growth),
        cmocka_unit_test(test_delete_absent_changes_nothing_else),
        cmocka_unit_test(test_compaction),
        cmocka_unit_test(test_model_every_width),
        cmocka_unit_test(test_hashed_replay),
        cmocka_unit_test(test_fpr_matches_formula),
        cmocka_unit_test(test_write_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

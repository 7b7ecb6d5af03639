/* The exact store's write buffer (src/server/data/exact_buffer.c): a set of
 * 16-byte fingerprints that answers membership exactly across growth and
 * hands its keys out sorted, each once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "exact_buffer.h"

/* Keys from a counter through splitmix64, so some share a home slot. */
static void key_of(uint64_t i, uint8_t out[16])
{
    for (int half = 0; half < 2; half++) {
        uint64_t z = (i * 2 + (uint64_t)half + 1) * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        memcpy(out + 8 * half, &z, 8);
    }
}

static void test_membership_across_growth(void **state)
{
    (void)state;
    xs_buffer b = {0};
    uint8_t k[16];
    enum { N = 50000 };
    for (uint64_t i = 0; i < N; i++) {
        key_of(i, k);
        assert_true(xb_add(&b, k));
        assert_true(xb_add(&b, k)); /* again: no second copy */
    }
    assert_int_equal(b.n, N);
    for (uint64_t i = 0; i < 2 * N; i++) {
        key_of(i, k);
        assert_int_equal(xb_has(&b, k), i < N);
    }
    xb_clear(&b);
    key_of(0, k);
    assert_false(xb_has(&b, k));
}

static void test_same_tag_different_key(void **state)
{
    (void)state;
    /* Equal first 12 bytes (home slot and tag), different last bytes. */
    xs_buffer b = {0};
    uint8_t a[16] = {0}, c[16] = {0};
    a[15] = 1;
    c[15] = 2;
    assert_true(xb_add(&b, a));
    assert_false(xb_has(&b, c));
    assert_true(xb_add(&b, c));
    assert_true(xb_has(&b, a) && xb_has(&b, c));
    assert_int_equal(b.n, 2);
    xb_clear(&b);
}

static int cmp16(const void *x, const void *y) { return memcmp(x, y, 16); }

static void test_sorted_copy(void **state)
{
    (void)state;
    xs_buffer b = {0};
    enum { N = 100000 };
    assert_true(xb_reserve(&b, N));
    uint8_t *want = malloc(16 * N);
    for (uint64_t i = 0; i < N; i++) {
        key_of(i, want + 16 * i);
        assert_true(xb_add_many(&b, want + 16 * i, 1));
    }
    size_t cap = b.cap;
    uint8_t *got = malloc(16 * N);
    assert_non_null(got);
    xb_sorted_into(&b, got);
    assert_int_equal(b.cap, cap); /* reserved once: never grew */
    qsort(want, N, 16, cmp16);
    assert_memory_equal(got, want, 16 * N);
    /* The buffer still answers until it is cleared. */
    assert_true(xb_has(&b, want));
    free(got);
    free(want);
    xb_clear(&b);
}

/* Keys that agree on long prefixes (all in one first-byte bucket, many
 * sharing 12 bytes, a few differing in the last byte only): every depth of
 * the radix sort and its short runs, checked against qsort. */
static void test_sorted_copy_shared_prefixes(void **state)
{
    (void)state;
    xs_buffer b = {0};
    enum { N = 30000 };
    uint8_t *want = malloc(16 * N);
    assert_non_null(want);
    for (uint64_t i = 0; i < N; i++) {
        uint8_t *k = want + 16 * i;
        key_of(i, k);
        k[0] = 0x5a;
        if (i % 3 == 0)
            memset(k + 1, 0x11, 11); /* 12 shared bytes, 4 random */
        if (i % 3 == 1 && i < 3 * 200) {
            memset(k + 1, 0x22, 14); /* the last byte only */
            k[15] = (uint8_t)(i / 3);
        }
        assert_true(xb_add(&b, k));
    }
    size_t n = b.n; /* a few collide in the shortened keys */
    uint8_t *got = malloc(16 * n);
    assert_non_null(got);
    xb_sorted_into(&b, got);
    uint8_t *sorted = malloc(16 * n);
    assert_non_null(sorted);
    memcpy(sorted, b.keys, 16 * n);
    qsort(sorted, n, 16, cmp16);
    assert_memory_equal(got, sorted, 16 * n);
    free(sorted);
    free(got);
    free(want);
    xb_clear(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_membership_across_growth),
        cmocka_unit_test(test_same_tag_different_key),
        cmocka_unit_test(test_sorted_copy),
        cmocka_unit_test(test_sorted_copy_shared_prefixes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

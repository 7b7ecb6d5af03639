/* The dedup CLI's exact suspect set (src/cli/hset.c): inserts, lookups,
 * growth, colliding hashes, empty and long keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/hset.c"

/* Three keys per hash value (spread over the table like real hashes). */
static uint64_t weak(unsigned i) { return (uint64_t)(i / 3) * 0x9e3779b97f4a7c15ULL; }

static void test_insert_find_grow(void **state)
{
    (void)state;
    hset s;
    hset_init(&s);
    assert_null(hset_find(&s, "x", 1, 1));
    char key[32];
    const unsigned n = 100000;
    for (unsigned i = 0; i < n; i++) {
        int len = snprintf(key, sizeof key, "key-%u", i);
        bool added;
        /* A weak hash on purpose: many keys share a hash, so equal hashes
         * must be told apart by their bytes. */
        hset_entry *e = hset_insert(&s, key, (size_t)len, weak(i), &added);
        assert_non_null(e);
        assert_true(added);
        assert_int_equal(e->seen, 0);
    }
    assert_int_equal(s.count, n);
    for (unsigned i = 0; i < n; i++) {
        int len = snprintf(key, sizeof key, "key-%u", i);
        hset_entry *e = hset_find(&s, key, (size_t)len, weak(i));
        assert_non_null(e);
        assert_memory_equal(s.arena + e->off, key, (size_t)len);
        assert_int_equal(e->seen, 0);
        e->seen = 1;
        bool added;
        assert_ptr_equal(hset_insert(&s, key, (size_t)len, weak(i), &added), e);
        assert_false(added);
        /* Same bytes, another hash: a different slot chain, not found. */
        assert_null(hset_find(&s, "nokey", 5, weak(i)));
    }
    for (unsigned i = 0; i < n; i++) {
        int len = snprintf(key, sizeof key, "key-%u", i);
        assert_int_equal(hset_find(&s, key, (size_t)len, weak(i))->seen, 1);
    }
    assert_true(hset_bytes(&s) >= n * sizeof(hset_entry));
    hset_free(&s);
    hset_free(&s);
}

static void test_empty_zero_hash_and_long_keys(void **state)
{
    (void)state;
    hset s;
    hset_init(&s);
    bool added;
    assert_non_null(hset_insert(&s, "", 0, 0, &added));
    assert_true(added);
    assert_non_null(hset_find(&s, "", 0, 0));
    assert_null(hset_find(&s, "a", 1, 0));
    /* Hash 0 is stored as 1: a key hashed 1 is distinct. */
    assert_non_null(hset_insert(&s, "b", 1, 1, &added));
    assert_true(added);
    assert_non_null(hset_find(&s, "", 0, 0));
    assert_non_null(hset_find(&s, "b", 1, 1));
    size_t big = (size_t)3 << 20;
    char *k = malloc(big);
    assert_non_null(k);
    memset(k, 'z', big);
    assert_non_null(hset_insert(&s, k, big, 42, &added));
    assert_true(added);
    k[big - 1] = 'y';
    assert_null(hset_find(&s, k, big, 42));
    k[big - 1] = 'z';
    assert_non_null(hset_find(&s, k, big, 42));
    free(k);
    hset_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_insert_find_grow),
        cmocka_unit_test(test_empty_zero_hash_and_long_keys),
    };
    return cmocka_run_group_tests_name("cli_hset", tests, NULL, NULL);
}

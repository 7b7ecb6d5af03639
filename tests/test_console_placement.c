/* Where the fleet console puts a new filter (src/cli/console/placement.c,
 * seed 001's rule) and the Redis Cluster key slot it uses under a cluster
 * (slot.c, checked against values CLUSTER KEYSLOT gives). Pure: the
 * suite builds both from source. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <string.h>

#include "console.h"

static void test_most_free_memory_first(void **state)
{
    (void)state;
    pl_group g[] = {{"a", true, 600, 1000, 1}, {"b", true, 100, 1000, 50}, {"c", true, 0, 500, 0}};
    /* b has 900 free, a 400, c 500: b despite its filters. */
    assert_int_equal(placement_pick(g, 3), 1);
}

static void test_then_fewest_filters(void **state)
{
    (void)state;
    pl_group g[] = {
        {"a", true, 100, 1000, 7}, {"b", true, 100, 1000, 3}, {"c", true, 100, 1000, 5}};
    assert_int_equal(placement_pick(g, 3), 1);
    /* All equal: the first given. */
    pl_group e[] = {{"a", true, 0, 0, 2}, {"b", true, 0, 0, 2}};
    assert_int_equal(placement_pick(e, 2), 0);
}

static void test_down_groups_and_over_limit(void **state)
{
    (void)state;
    /* The best group is down; a group over its limit has no free memory. */
    pl_group g[] = {
        {"a", false, 0, 1000, 0}, {"b", true, 2000, 1000, 0}, {"c", true, 900, 1000, 9}};
    assert_int_equal(placement_pick(g, 3), 2);
    pl_group none[] = {{"a", false, 0, 1000, 0}};
    assert_int_equal(placement_pick(none, 1), -1);
    assert_int_equal(placement_pick(NULL, 0), -1);
}

static void test_key_slots(void **state)
{
    (void)state;
    /* CLUSTER KEYSLOT of Redis 7. */
    assert_int_equal(slot_of("foo", 3), 12182);
    assert_int_equal(slot_of("bar", 3), 5061);
    assert_int_equal(slot_of("123456789", 9), 12739);
    /* Hash tags: only what is inside the first {...} counts. */
    assert_int_equal(slot_of("{user1000}.following", 21), slot_of("user1000", 8));
    assert_int_equal(slot_of("foo{}{bar}", 10), 8363); /* an empty tag: the whole key */
    assert_int_equal(slot_of("foo{{bar}}zap", 13), 4015);
    assert_int_equal(slot_of("foo{bar}{zap}", 13), slot_of("bar", 3));
    assert_int_equal(slot_of("", 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_most_free_memory_first),
        cmocka_unit_test(test_then_fewest_filters),
        cmocka_unit_test(test_down_groups_and_over_limit),
        cmocka_unit_test(test_key_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

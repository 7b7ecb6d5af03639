/* Points where a test can stop a thread, to put it in a race that is
 * otherwise one in millions (an add overtaken by a chain's growth) in a
 * fixed order. The hook is NULL outside tests: each point costs one
 * relaxed load. */
#ifndef BLOOMERY_TEST_POINT_H
#define BLOOMERY_TEST_POINT_H

#include <stddef.h>

typedef enum {
    /* A chain's add has chosen its newest link and is about to lock there
     * (one item, then a batch's group). */
    TEST_POINT_CHAIN_ADD_LOCK,
    TEST_POINT_CHAIN_GROUP_LOCK,
} test_point_id;

typedef void (*test_point_fn)(test_point_id point);

void test_point_set(test_point_fn fn);

extern test_point_fn test_point_hook;

static inline void test_point(test_point_id point)
{
    test_point_fn fn = __atomic_load_n(&test_point_hook, __ATOMIC_RELAXED);
    if (__builtin_expect(fn != NULL, 0))
        fn(point);
}

#endif

#include "test_point.h"

test_point_fn test_point_hook;

void test_point_set(test_point_fn fn) { __atomic_store_n(&test_point_hook, fn, __ATOMIC_RELAXED); }

/* Striped spinlocks shared by all filters.
 *
 * Item locks (bloomery_stripe_lock) make check-and-add linearizable per item
 * where a filter has no better key: two threads adding the same new item
 * hash to the same stripe, while adds of different items almost never
 * contend. The blocked layout locks by block instead (blocked_lock.h),
 * through the index functions. The critical sections are a few loads and
 * stores, so a spinlock is cheaper than a mutex.
 *
 * Deadlock freedom: a thread holding an item lock takes no other stripe;
 * a thread taking several stripes takes them in ascending index order. */
#ifndef BLOOMERY_STRIPE_H
#define BLOOMERY_STRIPE_H

#include <stdint.h>

#define BLOOMERY_STRIPES 1024

void bloomery_stripe_lock(uint64_t key);
void bloomery_stripe_unlock(uint64_t key);

/* The stripe a key maps to, and locking by index. */
unsigned bloomery_stripe_of(uint64_t key);
void bloomery_stripe_lock_at(unsigned i);
void bloomery_stripe_unlock_at(unsigned i);

#endif

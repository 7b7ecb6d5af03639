/* Striped spinlocks shared by all filters.
 *
 * Item locks (bloomery_stripe_lock) make check-and-add linearizable per item
 * where a filter has no better key: two threads adding the same new item
 * hash to the same stripe, while adds of different items almost never
 * contend. The blocked layout locks by block instead (blocked_lock.h),
 * through the index functions. The critical sections are a few loads and
 * stores, so a spinlock is cheaper than a mutex.
 *
 * Item locks and the index stripes are two tables, so that an add holding
 * an item lock may write a blocked filter (a prefix chain's add reaches its
 * link's spare). Deadlock freedom: locks are taken in the order item lock,
 * then a prefix bin's sequence lock (prefix.c), then index stripes; a
 * thread holds at most one item lock, and takes several index stripes in
 * ascending index order. */
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

/* Striped spinlocks that make check-and-add linearizable per item.
 *
 * Two threads adding the same new item must not both be told "new". Both hash
 * to the same first block, so a lock chosen by that block's address
 * serializes them, while adds of different items almost never contend. The
 * critical section is a few loads and atomic ORs, so a spinlock is cheaper
 * than a mutex. The table is shared by all filters. */
#ifndef BLOOMERY_STRIPE_H
#define BLOOMERY_STRIPE_H

#include <stdint.h>

void bloomery_stripe_lock(uint64_t key);
void bloomery_stripe_unlock(uint64_t key);

#endif

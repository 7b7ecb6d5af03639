/* Writers of the prefix layout (prefix.c) for the chains built of prefix
 * filters (scalable.c).
 *
 * A chain's add of an item checks its older links without a lock, then adds
 * to the newest link under that item's bin lock, but only if the chain
 * still has the links it checked: pf_add_if takes the bin's sequence lock
 * and then reads the chain's link count. The lock, the count and the
 * readers' loads of a bin's sequence are sequentially consistent, so of an
 * add that saw n links and one that saw the link published after them,
 * either the first reads the new count and starts over, or the second,
 * which checks the older links after reading the count, reads this bin
 * after the first took its lock and waits for it to finish. Two adds that
 * saw the same links meet at the same bin lock. No item lock, and no lock
 * held while other bins are read. */
#ifndef BLOOMERY_PREFIX_LOCK_H
#define BLOOMERY_PREFIX_LOCK_H

#include <stddef.h>
#include <stdint.h>

#include "bloomery/prefix.h"

/* Adds h under its bin's lock if *guard (loaded once the lock is held)
 * equals expect: 1 added, 0 present, -1 guard changed (nothing added). The
 * count is the caller's (pf_count_add). */
int pf_add_if(pf_t *pf, bloomery_hash h, const size_t *guard, size_t expect);
/* The same for g items in order, res[i] for h[i]: one call for a group
 * (their spare lines prefetched together in a filter too big for the
 * caches). With a NULL guard the filter counts the adds itself. */
void pf_add_many_if(pf_t *pf, const bloomery_hash *h, size_t g, const size_t *guard, size_t expect,
                    int *res);
void pf_count_add(pf_t *pf, uint64_t n);

#endif

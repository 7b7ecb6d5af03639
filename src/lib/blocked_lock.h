/* Writers of the blocked layout (blocked.c), for the filters built of
 * blocked ones (scalable.c, window.c).
 *
 * A lane changes only under the stripe of its block, by a plain load and
 * store: one locked instruction per item (the stripe) instead of a locked
 * read-modify-write per lane that gains a bit, which stalls the core until
 * the line is owned and keeps the next items' misses from overlapping.
 * Readers stay lock-free (relaxed loads see a lane before or after a store,
 * never a lost bit), and a thread that holds an item's stripes is the only
 * writer of its blocks, so a check under them followed by the add is
 * linearizable.
 *
 * A filter's blocks map onto BF_STRIPE_SPAN stripes from its base; filters
 * that must exclude each other's writers of one item (the links of a chain,
 * the slices of a window) share a base, and a chain that publishes a new
 * link holds the whole span, so no add is in flight across it. The span is
 * small so that a batch's group of items meets most of it and takes each
 * stripe once for the group (blocked.c): eight writers of one filter can
 * still add single items side by side. */
#ifndef BLOOMERY_BLOCKED_LOCK_H
#define BLOOMERY_BLOCKED_LOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "bloomery/blocked.h"

#define BF_STRIPE_SPAN 8 /* at most 64: a span's stripes are bits of a word */

/* The stripes of h's blocks in bf as bits of its span (bit i: base + i),
 * for a writer that takes a group's stripes at once: OR the items' sets,
 * then lock and unlock the union (ascending, each once). */
uint64_t bf_stripes_of(const bf_t *bf, bloomery_hash h);
void bf_lock_stripes(const bf_t *bf, uint64_t mask);
void bf_unlock_stripes(const bf_t *bf, uint64_t mask);

/* Takes the stripes of h's blocks in bf; returns the set for
 * bf_unlock_stripes. */
uint64_t bf_lock_item(const bf_t *bf, bloomery_hash h);

/* Sets h's bits; the caller holds bf_lock_item(bf, h). True if any bit was
 * 0. The count is the caller's (bf_count_add). */
bool bf_set_locked(bf_t *bf, bloomery_hash h);
void bf_count_add(bf_t *bf, uint64_t n);

/* dst's writers take the stripes src's do. */
void bf_share_stripes(bf_t *dst, const bf_t *src);

/* Every stripe a writer of bf can take, for publishing a new link. */
void bf_lock_span(const bf_t *bf);
void bf_unlock_span(const bf_t *bf);

#endif

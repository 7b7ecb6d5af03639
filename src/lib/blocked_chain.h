/* Probing the links of a scalable filter (scalable.c) at once: blocked
 * filters of one seed, so one item hash serves them all. In blocked.c,
 * beside the kernels, since a link of one block per key lets the lane masks
 * be derived once for the whole chain. */
#ifndef BLOOMERY_BLOCKED_CHAIN_H
#define BLOOMERY_BLOCKED_CHAIN_H

#include <stdbool.h>
#include <stddef.h>

#include "bloomery/blocked.h"

/* True if any of f[0..n) holds h; the newest (last) is probed first. */
bool bf_check_any_hashed(const bf_t *const *f, size_t n, bloomery_hash h);

/* Start fetching h's blocks in every filter, for reading. */
void bf_prefetch_all(const bf_t *const *f, size_t n, bloomery_hash h);

#endif

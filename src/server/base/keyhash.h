/* The hash of the server's in-memory tables (the keyspace, Pub/Sub
 * channels): XXH3 keyed with a secret drawn from the kernel at start-up.
 *
 * A public, unkeyed hash lets a client choose keys that all land in one
 * bucket (only the low bits of the hash pick it, so brute force finds them
 * in seconds) and turn every lookup in that stripe into a list walk. Redis
 * keys SipHash for the same reason; XXH3 with a random secret keeps the
 * speed of the unkeyed hash. Nothing persisted or replicated depends on the
 * value, so it may differ between runs and between master and replica.
 */
#ifndef BLOOMERYD_KEYHASH_H
#define BLOOMERYD_KEYHASH_H

#include <stddef.h>
#include <stdint.h>

/* Draws the secret; called once before any table is used (safe to call
 * again: later calls do nothing). */
void keyhash_init(void);
uint64_t keyhash(const void *data, size_t len);

#endif

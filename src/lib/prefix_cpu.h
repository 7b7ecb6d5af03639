/* Which paths of the prefix filter's code run (prefix.c), so that tests
 * take each on one machine.
 *
 * The copy of the bin code: 0 baseline x86-64 (or another architecture),
 * 1 with popcnt, 2 with popcnt, pdep and AVX2. The copies must agree bit
 * for bit. */
#ifndef BLOOMERY_PREFIX_CPU_H
#define BLOOMERY_PREFIX_CPU_H

#include <stdint.h>

/* The best level this CPU has. */
int pf_cpu_level(void);

/* Runs `level` (at most pf_cpu_level()) from now on, for every filter. */
void pf_set_cpu_level(int level);

/* Filters created from now on with more bytes than this (default
 * PF_FAR_BYTES) count as beyond the caches: adds past half their capacity
 * prefetch spare lines first. Measured a loss at 8 MiB and a gain at
 * 32 MiB with a 32 MiB last-level cache. */
#define PF_FAR_BYTES (16u << 20)
void pf_set_far_bytes(uint64_t bytes);

#endif

/* Which copy of the prefix filter's bin code runs (prefix.c): 0 baseline
 * x86-64 (or another architecture), 1 with popcnt, 2 with popcnt, pdep and
 * AVX2.
 * The copies must agree bit for bit; tests run each on one machine. */
#ifndef BLOOMERY_PREFIX_CPU_H
#define BLOOMERY_PREFIX_CPU_H

/* The best level this CPU has. */
int pf_cpu_level(void);

/* Runs `level` (at most pf_cpu_level()) from now on, for every filter. */
void pf_set_cpu_level(int level);

#endif

/* Which copy of the growing filter's lookup code runs (growing.c), so that
 * tests take each on one machine: 0 scalar (baseline x86-64, other
 * architectures), 1 AVX2, 2 AVX-512. The copies must agree bit for bit. */
#ifndef BLOOMERY_GROWING_CPU_H
#define BLOOMERY_GROWING_CPU_H

/* The best level this CPU has. */
int gf_cpu_level(void);

/* Runs `level` (at most gf_cpu_level()) from now on, for every filter. */
void gf_set_cpu_level(int level);

#endif

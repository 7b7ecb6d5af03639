/* Live false-positive estimates (blocked.c, prefix.c) read at most a
 * sample of a filter's blocks or bins: every step-th one. Items land at
 * hashed positions, so a stride is a fair sample, and BF.INFO ALL, the
 * console's history and /metrics stay cheap on filters of gigabytes. */
#ifndef BLOOMERY_ESTIMATE_H
#define BLOOMERY_ESTIMATE_H

#include <stdint.h>

/* The stride over n blocks or bins: 1 (all of them) up to the sample. */
uint64_t estimate_step(uint64_t n);

/* How many an estimate reads at most (default 65536); for tests. */
void estimate_set_sample(uint64_t n);

#endif

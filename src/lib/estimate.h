/* Live false-positive estimates (blocked.c, prefix.c, classic.c,
 * counting.c) read at most a sample of a filter's blocks, bins or words:
 * runs of ESTIMATE_RUN consecutive ones, one run every step. Items land at
 * hashed positions, so any fixed subset is a fair sample, and BF.INFO ALL,
 * the console's history and /metrics stay cheap on filters of gigabytes.
 * Runs, not single units: a run is read at the memory's streaming speed,
 * where lone units a stride apart each wait for a miss. */
#ifndef BLOOMERY_ESTIMATE_H
#define BLOOMERY_ESTIMATE_H

#include <stdint.h>

#define ESTIMATE_RUN 64

/* Units from one run's start to the next's over n of them: ESTIMATE_RUN
 * when every one is read. */
uint64_t estimate_step(uint64_t n);

/* How many an estimate reads at most (default ESTIMATE_SAMPLE); for tests. */
#define ESTIMATE_SAMPLE (1u << 16)
void estimate_set_sample(uint64_t n);

#endif

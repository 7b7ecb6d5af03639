/* Live false-positive estimates (blocked.c, prefix.c, classic.c,
 * counting.c) read at most a sample of a filter's blocks, bins or words:
 * runs of ESTIMATE_RUN consecutive ones, one run every step. Items land at
 * hashed positions, so any fixed subset is a fair sample, and BF.INFO ALL,
 * the console's history and /metrics stay cheap on filters of gigabytes.
 * Runs, not single units: a run is read at the memory's streaming speed,
 * where lone units a stride apart each wait for a miss. Long runs, few of
 * them: on a kernel that backs a read fault in a MADV_HUGEPAGE region with
 * a whole 2 MiB page, each run into untouched memory makes 2 MiB resident;
 * 1024 runs of 64 made BF.INFO ALL on an empty 13.6 GB filter take 2 GB,
 * 64 runs of 1024 take 128 MB. */
#ifndef BLOOMERY_ESTIMATE_H
#define BLOOMERY_ESTIMATE_H

#include <stdint.h>

#define ESTIMATE_RUN 1024

/* Units from one run's start to the next's over n of them: ESTIMATE_RUN
 * when every one is read. */
uint64_t estimate_step(uint64_t n);

/* How many an estimate reads at most (default ESTIMATE_SAMPLE); for tests. */
#define ESTIMATE_SAMPLE (1u << 16)
void estimate_set_sample(uint64_t n);

#endif

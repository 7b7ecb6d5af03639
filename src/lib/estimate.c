#include "estimate.h"

static uint64_t sample = ESTIMATE_SAMPLE;

uint64_t estimate_step(uint64_t n)
{
    uint64_t s = __atomic_load_n(&sample, __ATOMIC_RELAXED);
    return s && n > s ? n / s * ESTIMATE_RUN : ESTIMATE_RUN;
}

void estimate_set_sample(uint64_t n) { __atomic_store_n(&sample, n, __ATOMIC_RELAXED); }

#include "stripe.h"

#include <sched.h>

#define STRIPES 1024

/* One lock per cache line so neighbouring stripes do not false-share. */
static struct {
    unsigned char locked;
    unsigned char pad[63];
} stripes[STRIPES] __attribute__((aligned(64)));

static inline unsigned stripe_of(uint64_t key)
{
    key ^= key >> 29;
    key *= 0xbf58476d1ce4e5b9ULL;
    return (unsigned)(key >> 54) & (STRIPES - 1);
}

void bloomery_stripe_lock(uint64_t key)
{
    unsigned char *l = &stripes[stripe_of(key)].locked;
    for (unsigned spins = 0;; spins++) {
        if (!__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
            return;
        while (__atomic_load_n(l, __ATOMIC_RELAXED)) {
            if (++spins > 1000) {
                sched_yield();
                spins = 0;
            } else {
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
#endif
            }
        }
    }
}

void bloomery_stripe_unlock(uint64_t key)
{
    __atomic_store_n(&stripes[stripe_of(key)].locked, 0, __ATOMIC_RELEASE);
}

#include "stripe.h"

#include <sched.h>

/* One lock per cache line so neighbouring stripes do not false-share. */
static struct {
    unsigned char locked;
    unsigned char pad[63];
} stripes[BLOOMERY_STRIPES] __attribute__((aligned(64)));

unsigned bloomery_stripe_of(uint64_t key)
{
    key ^= key >> 29;
    key *= 0xbf58476d1ce4e5b9ULL;
    return (unsigned)(key >> 54) & (BLOOMERY_STRIPES - 1);
}

void bloomery_stripe_lock_at(unsigned i)
{
    unsigned char *l = &stripes[i].locked;
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

void bloomery_stripe_unlock_at(unsigned i)
{
    __atomic_store_n(&stripes[i].locked, 0, __ATOMIC_RELEASE);
}

void bloomery_stripe_lock(uint64_t key) { bloomery_stripe_lock_at(bloomery_stripe_of(key)); }

void bloomery_stripe_unlock(uint64_t key) { bloomery_stripe_unlock_at(bloomery_stripe_of(key)); }

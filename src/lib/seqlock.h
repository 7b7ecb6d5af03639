/* Sequence locks over 64-byte lines, for the layouts whose writers rewrite
 * a whole line (prefix.c, growing.c).
 *
 * A writer makes the sequence odd, stores the line and makes it even again;
 * a reader copies the line between two loads of an even, unchanged
 * sequence. The lock and the first load are sequentially consistent, which
 * the prefix chains' guard needs (prefix_lock.h) and which costs no more
 * than acquire on x86 or Arm. */
#ifndef BLOOMERY_SEQLOCK_H
#define BLOOMERY_SEQLOCK_H

#include <sched.h>
#include <stdint.h>

static inline void seq_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Copies the 8 words at src into w, consistent with seq. */
static inline __attribute__((always_inline)) void seq_read_line(const uint32_t *seq,
                                                                const uint64_t *src, uint64_t *w)
{
    for (;;) {
        uint32_t s1 = __atomic_load_n(seq, __ATOMIC_SEQ_CST);
        if (!(s1 & 1)) {
            /* Acquire loads keep the second read of the sequence after them,
             * and one that sees a writer's (release) store sees its odd
             * sequence: no fences, which x86 would not need either. */
            for (unsigned i = 0; i < 8; i++)
                w[i] = __atomic_load_n(&src[i], __ATOMIC_ACQUIRE);
            if (__atomic_load_n(seq, __ATOMIC_RELAXED) == s1)
                return;
        }
        seq_pause();
    }
}

/* Takes the lock; returns the sequence seq_unlock stores. */
static inline uint32_t seq_lock(uint32_t *seq)
{
    for (unsigned spins = 0;; spins++) {
        uint32_t s = __atomic_load_n(seq, __ATOMIC_RELAXED);
        if (!(s & 1) &&
            __atomic_compare_exchange_n(seq, &s, s + 1, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
            return s + 2;
        if (spins > 1000) {
            sched_yield();
            spins = 0;
        }
        seq_pause();
    }
}

static inline void seq_unlock(uint32_t *seq, uint32_t next)
{
    __atomic_store_n(seq, next, __ATOMIC_RELEASE);
}

#endif

/* Prefix filter: fingerprints kept in one cache line per bin, for the error
 * rates where a fingerprint costs fewer bits than a Bloom filter's bits.
 *
 * An item is hashed once (XXH3-128, as the blocked layout); the low half picks
 * a bin, the high half a fingerprint (a quotient below Q and an r-bit
 * remainder). A bin is a 64-byte line holding up to S fingerprints in order:
 * a unary header (each quotient's count in ones, ended by a zero) and the
 * packed remainders. A bin keeps the S smallest fingerprints that reached
 * it; a larger one, or the largest when a smaller one arrives at a full bin,
 * moves to the spare, a small blocked Bloom filter keyed by (bin,
 * fingerprint). So a lookup reads its bin and, only when the bin is full and
 * the fingerprint is above the bin's largest (a few percent of lookups),
 * the spare: about one cache line, and no false negative.
 *
 * The shape (r, S, Q and the load per bin) is chosen per error rate by a
 * model of the bins' Poisson loads: the fewest bits per item whose model
 * rate at capacity is at most 0.95 p with at most 5% of lookups reading the
 * spare. Against a classic Bloom filter at its optimum for the same rate
 * (RedisBloom's non-scaling size) that is 1% fewer bits at 1e-2, 5% at 1e-3
 * and 8% at 1e-4 and 1e-5.
 *
 * Concurrency: any mix of calls from any threads on one filter. A bin
 * changes only under its stripe, a sequence lock: writers make it odd, store
 * the line and make it even again; readers copy the line and retry if the
 * sequence moved. An item moving to the spare is added there before its bin
 * drops it, so a reader never misses it. pf_check_and_add is linearizable
 * per item: all writers of a bin, spare included, hold its stripe.
 */
#ifndef BLOOMERY_PREFIX_H
#define BLOOMERY_PREFIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomery/blocked.h"
#include "bloomery/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pf pf_t;

/* A bin's geometry and how full the bins are at capacity. */
typedef struct pf_shape {
    unsigned remainder_bits; /* r */
    unsigned slots;          /* S: fingerprints a bin holds */
    unsigned quotients;      /* Q */
    double load;             /* items per bin at capacity */
    double model_fpr;        /* the model's rate at capacity */
    double to_spare;         /* share of lookups at capacity that also read the spare */
} pf_shape;

/* The shape pf_create uses for error rate p; BLOOMERY_EINVAL outside (0, 1),
 * BLOOMERY_ETOOBIG when no bin fits p. */
BLOOMERY_API int pf_plan(double p, pf_shape *out);

/* Sized for `capacity` items at `error_rate`. Errors: BLOOMERY_EINVAL,
 * BLOOMERY_ETOOBIG, BLOOMERY_ENOMEM. */
BLOOMERY_API int pf_create(pf_t **out, uint64_t capacity, double error_rate, uint64_t seed);
BLOOMERY_API void pf_free(pf_t *pf);

/* Bytes pf_create would allocate (bins and spare), 0 if invalid. */
BLOOMERY_API uint64_t pf_bytes_for(uint64_t capacity, double error_rate);

/* As the blocked filter's: pf_add and pf_check_and_add return true when the
 * item was absent and is now added (both are linearizable per item here). */
BLOOMERY_API bool pf_check(const pf_t *pf, const void *item, size_t len);
BLOOMERY_API bool pf_add(pf_t *pf, const void *item, size_t len);
BLOOMERY_API bool pf_check_and_add(pf_t *pf, const void *item, size_t len);
BLOOMERY_API bool pf_check_hashed(const pf_t *pf, bloomery_hash h);
BLOOMERY_API bool pf_add_hashed(pf_t *pf, bloomery_hash h);

/* Adds src's fingerprints to dst, bin by bin (each bin keeps the S smallest
 * of both, the rest go to dst's spare, and src's spare is ORed into dst's):
 * dst then holds every item of both, at a rate near that of one filter
 * holding them all. BLOOMERY_EINVAL unless both have one shape, bin count
 * and seed. src must not change meanwhile; dst may be read. */
BLOOMERY_API int pf_merge(pf_t *dst, const pf_t *src);
/* Whether pf_merge takes these two. */
BLOOMERY_API bool pf_same_shape(const pf_t *a, const pf_t *b);

/* Starts loading h's bin (for a batch's later probe of it). */
BLOOMERY_API void pf_prefetch(const pf_t *pf, bloomery_hash h, bool for_write);

/* Batches: hash and prefetch a group, then probe; out[i] as the single call
 * (out may be NULL for adds). */
BLOOMERY_API void pf_check_many(const pf_t *pf, const void *const *items, const size_t *lens,
                                size_t n, uint8_t *out);
BLOOMERY_API void pf_add_many(pf_t *pf, const void *const *items, const size_t *lens, size_t n,
                              uint8_t *out);

BLOOMERY_API pf_shape pf_get_shape(const pf_t *pf);
BLOOMERY_API uint64_t pf_nbins(const pf_t *pf);
BLOOMERY_API uint64_t pf_bytes(const pf_t *pf); /* bins and spare */
BLOOMERY_API uint64_t pf_seed(const pf_t *pf);
BLOOMERY_API uint64_t pf_capacity(const pf_t *pf);
BLOOMERY_API double pf_error_rate(const pf_t *pf);
BLOOMERY_API uint64_t pf_count(const pf_t *pf);       /* items reported new */
BLOOMERY_API uint64_t pf_spare_count(const pf_t *pf); /* fingerprints moved to the spare */

/* For serialization: the bins (pf_data_bytes() bytes) and the spare; an
 * explicit shape whose spare the filter takes over; the counters; and a
 * check of loaded bins (BLOOMERY_ECORRUPT when a header holds more than S
 * fingerprints), to run before a loaded filter is used. */
BLOOMERY_API int pf_create_shape(pf_t **out, uint64_t nbins, const pf_shape *shape, bf_t *spare,
                                 uint64_t seed, uint64_t capacity, double error_rate);
BLOOMERY_API const uint8_t *pf_data(const pf_t *pf);
BLOOMERY_API uint8_t *pf_data_mut(pf_t *pf);
BLOOMERY_API uint64_t pf_data_bytes(const pf_t *pf);
BLOOMERY_API const bf_t *pf_spare(const pf_t *pf);
BLOOMERY_API void pf_set_count(pf_t *pf, uint64_t count);
BLOOMERY_API void pf_set_spare_count(pf_t *pf, uint64_t n);
BLOOMERY_API int pf_validate(const pf_t *pf);
/* The same check of nbins bins laid out as pf's (at bins, any alignment):
 * a loader checks each chunk as it arrives, in whichever thread loads it. */
BLOOMERY_API int pf_validate_bins(const pf_t *pf, const uint8_t *bins, uint64_t nbins);

/* A write barrier for copy-on-write snapshots: called with region, the
 * bin's byte offset and 64 before a writer may change a bin (also when the
 * item turns out present). The spare is not reported: its bits only go from
 * 0 to 1, and every fingerprint in it belongs to an added item, so a copy of
 * it taken later than the bins holds no less than they gave up. Set or
 * remove (NULL) it only while no other call on the filter runs. */
typedef void (*pf_write_hook)(void *ctx, uint32_t region, uint64_t offset, uint64_t len);
BLOOMERY_API void pf_set_write_hook(pf_t *pf, pf_write_hook hook, void *ctx, uint32_t region);

/* FPR of a random non-member against the filter as it is now, from the
 * bins' fingerprints and the spare's bits: every bin of a filter up to
 * 65536 bins, an even sample of 65536 bins (and of the spare's blocks) of
 * a bigger one. */
BLOOMERY_API double pf_fpr_estimate(const pf_t *pf);

#ifdef __cplusplus
}
#endif

#endif

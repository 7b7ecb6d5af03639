/* t-digest: a merging digest of a stream of numbers for quantiles, CDF and
 * ranks (Dunning & Ertl, "Computing extremely accurate quantiles using
 * t-digests"), with RedisBloom's compression semantics (TDIGEST.*).
 *
 * A digest keeps centroids (mean, weight) sorted by mean, plus a buffer of
 * values not yet merged. Its compression c fixes the capacity, 6c + 10 nodes
 * (merged and buffered together), as RedisBloom's does. When the buffer
 * fills, everything is sorted and merged in one pass: a centroid absorbs its
 * neighbour while, for the quantiles q0 before and q2 after the proposed
 * centroid of weight w in a digest of total weight W,
 *
 *     w * c / (2 pi W ln W)  <=  q0 (1 - q0)   and   <=  q2 (1 - q2).
 *
 * So a centroid at quantile q holds at most a fraction
 * 2 pi ln(W) q (1 - q) / c of the data: large in the middle, a single value
 * at the ends (the first and the last node never absorb anything), and the
 * exact minimum and maximum are kept besides.
 *
 * Error bounds: quantile and cdf interpolate between neighbouring centroids
 * (a unit-weight centroid is a value, not a range), so the rank error of a
 * quantile, |F(quantile(q)) - q| with F the data's true CDF, is at most
 * half the share of q's centroid plus one value:
 *
 *     pi ln(W) q (1 - q) / c + 1 / W,
 *
 * about 0.09 at the median but 0.00035 at q = 0.001 for W = 10^5 and
 * c = 100: tight at the tails, loose in the middle (RedisBloom's scale; a
 * larger c buys the middle back linearly). The same holds for cdf. On
 * smooth data the interpolation does much better; measured by
 * tests/test_tdigest.c with c = 100 on 10^5 values (fixed seeds), worst over
 * q in [0.01, 0.99]: uniform 0.004, normal 0.0013, lognormal (sigma 2)
 * 0.017, Pareto (alpha 1.2) 0.006; at q = 0.001 and 0.999 at most 0.0001.
 * A bimodal mixture reaches 0.034, a merge of three digests of it 0.064:
 * merged centroids are never split, so a merge is as coarse as its inputs.
 * quantile(0) is the minimum and quantile(1) the maximum, exactly.
 *
 * RedisBloom parity: the buffer compresses when one node short of full and
 * means and interpolations use RedisBloom's arithmetic, so the same adds
 * and merges answer to the bit as RedisBloom 2.4 does on data without ties
 * (tests/server/test_tdigest.py checks it when REDISBLOOM_SO is set); equal
 * means may sort in another order, which moves answers within the bounds.
 *
 * Determinism: the state after a sequence of adds, merges and resets
 * depends only on that sequence (a stable sort, no randomness), and queries
 * never change it (they merge a copy of a non-empty buffer), so replaying a
 * log of the changes rebuilds the same bytes. Weights are integers: each
 * added value weighs 1.
 *
 * Not thread-safe: callers serialize writers, and readers against writers.
 */
#ifndef BLOOMERY_TDIGEST_H
#define BLOOMERY_TDIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "bloomery/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TDIGEST_DEFAULT_COMPRESSION 100
/* RedisBloom keeps the capacity 6c + 10 in an int. */
#define TDIGEST_MAX_COMPRESSION 357913939ULL
/* Total weight limit (RedisBloom counts weights in a long long). */
#define TDIGEST_MAX_WEIGHT ((uint64_t)INT64_MAX)

typedef struct tdigest tdigest_t;

/* One node as stored (16 bytes, the serialized layout on a little-endian
 * host): merged centroids first, sorted by mean, then the buffer. */
typedef struct tdigest_node {
    double mean;
    uint64_t weight;
} tdigest_node;

/* The counters beside the nodes (serialization, INFO). */
typedef struct tdigest_state {
    uint64_t compression;
    uint64_t merged_nodes, unmerged_nodes;
    uint64_t merged_weight, unmerged_weight;
    uint64_t total_compressions;
    double min, max; /* 0 and 0 while empty */
} tdigest_state;

/* Nodes for compression c: 6c + 10; 0 when c is 0 or above
 * TDIGEST_MAX_COMPRESSION. */
BLOOMERY_API uint64_t tdigest_capacity_for(uint64_t compression);
/* What tdigest_create allocates for c (struct and nodes); 0 when refused. */
BLOOMERY_API uint64_t tdigest_bytes_for(uint64_t compression);

/* An empty digest. BLOOMERY_EINVAL for compression 0 or above
 * TDIGEST_MAX_COMPRESSION, BLOOMERY_ENOMEM. */
BLOOMERY_API int tdigest_create(tdigest_t **out, uint64_t compression);
BLOOMERY_API void tdigest_free(tdigest_t *t);
/* Back to empty, compression kept, total compressions cleared. */
BLOOMERY_API void tdigest_reset(tdigest_t *t);

/* Add n values, each with weight 1. BLOOMERY_EINVAL if any value is not
 * finite, BLOOMERY_ETOOBIG if the total weight would pass
 * TDIGEST_MAX_WEIGHT: in both cases nothing is added. (BLOOMERY_EFULL if a
 * full node array did not compress: not expected, see tdigest.c.) */
BLOOMERY_API int tdigest_add(tdigest_t *t, const double *values, size_t n);

/* Add the centroids of srcs[0..n) into dst (each source's buffer merged in
 * a copy first; NULL entries skipped; a source may be dst itself, read as
 * it was before the call). BLOOMERY_ETOOBIG when the total weight would
 * pass TDIGEST_MAX_WEIGHT, BLOOMERY_ENOMEM: dst is unchanged then. */
BLOOMERY_API int tdigest_merge(tdigest_t *dst, const tdigest_t *const *srcs, size_t n);

/* ---- queries (the digest is not changed) ---- */

/* Total weight (number of values added). */
BLOOMERY_API uint64_t tdigest_count(const tdigest_t *t);
/* Smallest and largest value added; NAN when empty. */
BLOOMERY_API double tdigest_min(const tdigest_t *t);
BLOOMERY_API double tdigest_max(const tdigest_t *t);

/* out[i] = the value below which a fraction q[i] of the data lies; NAN when
 * empty or q[i] outside [0, 1]. BLOOMERY_ENOMEM (merging the buffer needs a
 * copy). */
BLOOMERY_API int tdigest_quantiles(const tdigest_t *t, const double *q, double *out, size_t n);
/* out[i] = the fraction of the data below x[i], counting half of the
 * values equal to it; NAN when empty. */
BLOOMERY_API int tdigest_cdfs(const tdigest_t *t, const double *x, double *out, size_t n);
/* RedisBloom's TDIGEST.RANK (reverse 0) and REVRANK (reverse 1) of x[i]:
 * the number of values below (above) x[i] plus half those equal, rounded;
 * -2 when empty; below the minimum -1 (reverse: the count), above the
 * maximum the count (reverse: -1). */
BLOOMERY_API int tdigest_ranks(const tdigest_t *t, const double *x, int64_t *out, size_t n,
                               int reverse);
/* TDIGEST.BYRANK / BYREVRANK: the value of rank r[i] (r >= 0): the minimum
 * (reverse: maximum) for 0, +inf (reverse: -inf) from the count on, NAN
 * when empty. */
BLOOMERY_API int tdigest_by_ranks(const tdigest_t *t, const uint64_t *r, double *out, size_t n,
                                  int reverse);
/* Mean of the values between quantiles lo and hi (0 <= lo < hi <= 1);
 * NAN when empty or out of range. */
BLOOMERY_API int tdigest_trimmed_mean(const tdigest_t *t, double lo, double hi, double *out);

/* ---- state (INFO, serialization) ---- */

BLOOMERY_API void tdigest_state_of(const tdigest_t *t, tdigest_state *st);
BLOOMERY_API uint64_t tdigest_capacity(const tdigest_t *t);
/* Bytes the digest allocated (struct and nodes). */
BLOOMERY_API uint64_t tdigest_bytes(const tdigest_t *t);
/* The node array: capacity nodes, unused ones zero. */
BLOOMERY_API const tdigest_node *tdigest_nodes(const tdigest_t *t);
BLOOMERY_API tdigest_node *tdigest_nodes_mut(tdigest_t *t);
/* After the nodes were written through tdigest_nodes_mut (a loader): take
 * the counters st and verify everything before trusting it: same
 * compression, node counts within the capacity, every used node a finite
 * mean with a nonzero weight, merged means sorted, weights adding up to
 * the counts, the total within TDIGEST_MAX_WEIGHT, unused nodes zero, min
 * and max finite and bounding every mean (both 0 when empty).
 * BLOOMERY_ECORRUPT leaves t empty. */
BLOOMERY_API int tdigest_restore(tdigest_t *t, const tdigest_state *st);

#ifdef __cplusplus
}
#endif

#endif

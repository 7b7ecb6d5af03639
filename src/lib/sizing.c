/* Sizing of blocked and classic filters.
 *
 * Blocked filters: the number of keys landing in a block is Poisson with mean
 * lambda = b * 512 / c (c bits per key, b blocks per key). A query's probes in
 * one block are all set with probability f(i) = (1 - (1 - 1/w)^i)^8 when the
 * block holds i keys (one probe per lane of w positions), so
 *     FPR(c) = [ sum_i Pois(i; lambda) f(i) ]^b.
 * Overloaded blocks dominate, which is why the naive (1 - e^(-kn/m))^k formula
 * under-sizes block filters. The pmf is evaluated in log space because
 * e^(-lambda) underflows for large lambda.
 *
 * Classic filters follow RedisBloom's formulas and constants exactly, since
 * its dumps carry these values and a loaded filter must agree with them.
 */
#include "bloomery/sizing.h"

#include <math.h>

unsigned bloomery_blocks_per_key(double p, bloomery_policy policy)
{
    if (policy == BLOOMERY_POLICY_MEMORY) {
        unsigned best = 1;
        double best_c = INFINITY;
        for (unsigned b = 1; b <= 4; b++) {
            double c = bloomery_bits_per_key_split(p * BLOOMERY_SIZING_MARGIN, b, 64);
            if (c < best_c) {
                best_c = c;
                best = b;
            }
        }
        return best;
    }
    if (p >= 1e-4)
        return 1;
    if (p >= 3e-6)
        return 2;
    if (p >= 1e-8)
        return 3;
    return 4;
}

double bloomery_model_fpr_split(double bits_per_key, unsigned b, unsigned lane_bits)
{
    if (bits_per_key <= 0 || b == 0 || lane_bits < 2)
        return 1.0;
    double lambda = (double)b * BLOOMERY_BLOCK_BITS / bits_per_key;
    double miss = log1p(-1.0 / lane_bits); /* ln(1 - 1/w) */
    double hi = lambda + 12.0 * sqrt(lambda) + 40.0;
    double sum = 0.0;
    int sign; /* lgamma writes the global signgam: a race between threads sizing filters */
    for (double i = 0; i <= hi; i += 1.0) {
        double logpmf = -lambda + (i > 0 ? i * log(lambda) : 0.0) - lgamma_r(i + 1.0, &sign);
        double lane_full = -expm1(i * miss); /* 1 - (1 - 1/w)^i */
        sum += exp(logpmf) * pow(lane_full, BLOOMERY_LANES);
    }
    if (sum > 1.0)
        sum = 1.0;
    return pow(sum, (double)b);
}

static double split_search(double target, unsigned b, unsigned lane_bits)
{
    double lo = 0.25, hi = 1.0;
    while (bloomery_model_fpr_split(hi, b, lane_bits) > target) {
        lo = hi;
        hi *= 2;
        if (hi > 1e7)
            return NAN;
    }
    for (int it = 0; it < 100 && hi - lo > 1e-9 * hi; it++) {
        double mid = 0.5 * (lo + hi);
        if (bloomery_model_fpr_split(mid, b, lane_bits) > target)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

/* The search above evaluates the model some 40 times, and sizing one
 * filter searches up to five times (once per blocks-per-key choice): a few
 * milliseconds for each BF.RESERVE and each new link. The same rates come
 * back again and again (a service's filters share their error rate, links
 * follow a fixed schedule), so each thread keeps its last answers, which
 * are the search's own to the bit. */
#define SPLIT_MEMO 32
static _Thread_local struct split_memo {
    double target;
    unsigned b, lane_bits; /* b 0: an empty slot */
    double c;
} split_memo[SPLIT_MEMO];
static _Thread_local unsigned split_memo_next;

double bloomery_bits_per_key_split(double target, unsigned b, unsigned lane_bits)
{
    if (!(target > 0 && target < 1))
        return NAN;
    for (unsigned i = 0; i < SPLIT_MEMO; i++) {
        const struct split_memo *m = &split_memo[i];
        if (m->b == b && m->lane_bits == lane_bits && m->target == target && b != 0)
            return m->c;
    }
    double c = split_search(target, b, lane_bits);
    split_memo[split_memo_next] = (struct split_memo){target, b, lane_bits, c};
    split_memo_next = (split_memo_next + 1) % SPLIT_MEMO;
    return c;
}

uint64_t bloomery_blocked_nblocks(uint64_t n, double p, unsigned b)
{
    if (n == 0 || !(p > 0 && p < 1) || b == 0 || b > BLOOMERY_MAX_BLOCKS_PER_KEY)
        return 0;
    double c = bloomery_bits_per_key_split(p * BLOOMERY_SIZING_MARGIN, b, 64);
    if (isnan(c))
        return 0;
    double blocks = ceil((double)n * c / BLOOMERY_BLOCK_BITS);
    if (blocks >= 9.2e18)
        return 0;
    return blocks < 1 ? 1 : (uint64_t)blocks;
}

/* RedisBloom's constants, kept as it writes them: ln(2)^2 and ln(2). */
#define RB_LN2_SQUARED 0.480453013918201
#define RB_LN2 0.693147180559945

double bloomery_classic_bpe(double p) { return -(log(p) / RB_LN2_SQUARED); }

unsigned bloomery_classic_hashes(double p)
{
    return (unsigned)ceil(RB_LN2 * bloomery_classic_bpe(p));
}

uint64_t bloomery_classic_bits(uint64_t n, double p)
{
    double bits = (double)n * bloomery_classic_bpe(p);
    if (!(bits < 1.8e19))
        return 0;
    uint64_t b = (uint64_t)bits;
    if (b == 0)
        b = 1;
    uint64_t words = b / 64 + (b % 64 != 0);
    if (words > UINT64_MAX / 64)
        return 0;
    return words * 64;
}

double bloomery_classic_fpr(double bits_per_key, unsigned k)
{
    if (bits_per_key <= 0 || k == 0)
        return 1.0;
    return pow(-expm1(-(double)k / bits_per_key), (double)k);
}

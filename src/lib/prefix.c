/* Prefix filter (see include/bloomery/prefix.h for the contract).
 *
 *   bin (64 bytes, one cache line, little-endian bits)
 *   +----------------------------+------------------------------------------+
 *   | header: Q + S bits         | body: S remainders of r bits, in order   |
 *   +----------------------------+------------------------------------------+
 *     for quotient 0, 1, ..., Q-1: its count in ones, then a zero; the unused
 *     tail of both parts is zero, so an empty bin is all zeros.
 *
 * A fingerprint is v = q * 2^r + rem; the bin's fingerprints are sorted by v,
 * so the largest is the last slot and its quotient is where the header's
 * last one is. Keeping the S smallest is what bounds the spare's share of
 * lookups: only a fingerprint above a full bin's largest can be in the spare.
 * Every fingerprint in the spare for a bin is above that bin's largest, since
 * the largest only falls.
 *
 * Writers rebuild nothing: an insert shifts the header above the new one up
 * by one bit and the remainders above the new slot up by r bits. A writer
 * holds its bin's sequence lock (odd) for the whole change, the spare's part
 * included, so a reader that finds the sequence even and unchanged around
 * its copy of the bin has a bin as it was between two writes, and any
 * fingerprint that bin gave up is in the spare already.
 */
#include "bloomery/prefix.h"
#include "bloomery/bloomery.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "blocked_kernel.h"
#include "mem.h"
#include "blocked_lock.h"
#include "prefix_cpu.h"
#include "estimate.h"
#include "prefix_lock.h"
#include "seqlock.h"

#define WORDS 8
#define COPY_WORDS (WORDS + 1) /* a line copied with a zero word after it */
#define LINE_BITS 512
#define GROUP 16
#define MAX_R 32  /* rem is the hash's low r bits, q comes from its high 32 */
#define MAX_S 256 /* S * (r + 1) + Q fits a line */
#define SEQ_STRIPES 256

/* The bin code inlines into one copy per instruction set: the *_fast ones
 * are built for popcnt, which x86-64's baseline lacks, and chosen at run
 * time (prefix_cpu.h). */
#define PF_INLINE static inline __attribute__((always_inline))
/* The spare is sized for its expected fingerprints times this, plus a few
 * deviations: more only raises the spare's rate, never loses an item. */
#define SPARE_SLACK 1.25
/* At capacity at most this share of lookups reads the spare too: about one
 * cache line per lookup, for 1-2% more bits than the fewest. */
#define MAX_TO_SPARE 0.05

struct pf {
    uint64_t *bins; /* nbins * WORDS */
    uint64_t nbins;
    unsigned r, S, Q, H;            /* H = Q + S header bits */
    unsigned body_end;              /* H + S * r */
    unsigned hwords;                /* words the header touches */
    uint64_t hmask[WORDS];          /* the header's bits in each of them */
    uint64_t field_ones, field_low; /* per r-bit field of a word: 1, 2^(r-1) - 1 */
    uint64_t rmask;
    pf_shape shape;
    uint64_t seed, capacity;
    uint64_t salt;        /* the spare's keys: from the seed, so stored filters keep them */
    uint64_t stripe_salt; /* spreads filters over the sequence locks */
    double error_rate;
    bf_t *spare;
    size_t bin_bytes;
    bool spare_far;  /* too big for the caches: adds prefetch spare lines */
    uint64_t count;  /* atomic */
    uint64_t spared; /* atomic */
    pf_write_hook write_hook;
    void *write_hook_ctx;
    uint32_t write_hook_region;
};

/* From this size on, adds prefetch spare lines (spare_lines_far). */
static uint64_t far_bytes = PF_FAR_BYTES;

void pf_set_far_bytes(uint64_t bytes) { __atomic_store_n(&far_bytes, bytes, __ATOMIC_RELAXED); }

/* Sequence locks shared by all filters, one per cache line: odd while a
 * writer holds it. */
static struct {
    uint32_t seq;
    char pad[60];
} seqs[SEQ_STRIPES] __attribute__((aligned(64)));

/* ---- the model ---- */

/* For a bin whose load is Poisson(lam): the mean number of fingerprints it
 * sends to the spare, and the chance that a random fingerprint is above a
 * full bin's largest (the S smallest of X uniform values leave
 * (X - S + 1) / (X + 1) of the range above them). */
static void bin_tail(double lam, unsigned S, double *spared, double *to_spare)
{
    double pm = exp(-lam), sp = 0, ts = 0;
    unsigned xmax = (unsigned)(lam + 14 * sqrt(lam) + 30);
    for (unsigned x = 0; x <= xmax; x++) {
        if (x >= S) {
            sp += (double)(x - S) * pm;
            ts += pm * (double)(x - S + 1) / (double)(x + 1);
        }
        pm *= lam / (double)(x + 1);
    }
    *spared = sp;
    *to_spare = ts;
}

static double spare_error(double p) { return p / 2; }

static double model_fpr(double lam, unsigned r, unsigned S, unsigned Q, double p)
{
    double spared, to_spare;
    bin_tail(lam, S, &spared, &to_spare);
    return lam / ((double)Q * ldexp(1, (int)r)) + to_spare * spare_error(p);
}

/* Whether bins of this geometry may hold lam items on average: within the
 * target rate, and few enough lookups sent on to the spare. */
static bool load_fits(double lam, unsigned r, unsigned S, unsigned Q, double p)
{
    double spared, to_spare;
    bin_tail(lam, S, &spared, &to_spare);
    return lam / ((double)Q * ldexp(1, (int)r)) + to_spare * spare_error(p) <=
               p * BLOOMERY_SIZING_MARGIN &&
           to_spare <= MAX_TO_SPARE;
}

/* The most items per bin this bin geometry takes within the target rate,
 * and what that costs per item; kept in *out when it beats *best. */
static void try_shape(double p, unsigned r, unsigned S, double spare_bpk, double *best,
                      pf_shape *out)
{
    unsigned Q = LINE_BITS - S * (r + 1); /* the rest of the line: Q only lowers the rate */
    if (S * (r + 1) >= LINE_BITS || r + 64 - (unsigned)__builtin_clzll(Q) > 63)
        return;
    /* The rate grows with the load and is above lam / (Q 2^r) alone, which
     * bounds what this shape can reach. */
    double target = p * BLOOMERY_SIZING_MARGIN, lo = 0;
    double hi = fmin(1.5 * S, target * Q * ldexp(1, (int)r));
    if (LINE_BITS / hi >= *best || !load_fits(0.5, r, S, Q, p))
        return;
    for (int it = 0; it < 20; it++) {
        double mid = (lo + hi) / 2;
        if (load_fits(mid, r, S, Q, p))
            lo = mid;
        else
            hi = mid;
    }
    double spared, to_spare;
    bin_tail(lo, S, &spared, &to_spare);
    double bits = (LINE_BITS + SPARE_SLACK * spared * spare_bpk) / lo;
    if (bits < *best) {
        *best = bits;
        *out = (pf_shape){.remainder_bits = r,
                          .slots = S,
                          .quotients = Q,
                          .load = lo,
                          .model_fpr = model_fpr(lo, r, S, Q, p),
                          .to_spare = to_spare};
    }
}

/* pf_plan's search takes milliseconds and filters are made at a few
 * rates over and over: the last plans are kept. */
#define PLANS 8
static struct {
    double p;
    pf_shape shape;
} plans[PLANS];
static unsigned plans_next;
static unsigned char plans_lock;

static bool plan_cached(double p, pf_shape *out, const pf_shape *put)
{
    bool hit = false;
    while (__atomic_exchange_n(&plans_lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    for (unsigned i = 0; i < PLANS && !hit; i++) {
        if (plans[i].p == p) {
            *out = plans[i].shape;
            hit = true;
        }
    }
    if (put && !hit) {
        plans[plans_next % PLANS].p = p;
        plans[plans_next % PLANS].shape = *put;
        plans_next++;
    }
    __atomic_store_n(&plans_lock, 0, __ATOMIC_RELEASE);
    return hit;
}

static int plan_search(double p, pf_shape *out);

int pf_plan(double p, pf_shape *out)
{
    if (!(p > 0 && p < 1))
        return BLOOMERY_EINVAL;
    if (plan_cached(p, out, NULL))
        return BLOOMERY_OK;
    int rc = plan_search(p, out);
    if (rc == BLOOMERY_OK)
        plan_cached(p, out, out);
    return rc;
}

static int plan_search(double p, pf_shape *out)
{
    bf_options so = {.policy = BLOOMERY_POLICY_MEMORY};
    double spare_bpk = (double)bf_bytes_for(1000000, spare_error(p), &so) * 8 / 1e6;
    double best = INFINITY;
    /* Remainders of about log2(1/p) bits first, so that the bound prunes
     * most of the other shapes. */
    unsigned r0 = (unsigned)fmax(1, fmin(MAX_R, ceil(-log2(p))));
    for (unsigned r = r0 > 1 ? r0 - 1 : 1; r <= r0 + 1 && r <= MAX_R; r++)
        for (unsigned S = 4; S * (r + 1) < LINE_BITS; S++)
            try_shape(p, r, S, spare_bpk, &best, out);
    for (unsigned r = 1; r <= MAX_R; r++)
        for (unsigned S = 4; S * (r + 1) < LINE_BITS; S++)
            try_shape(p, r, S, spare_bpk, &best, out);
    return isinf(best) ? BLOOMERY_ETOOBIG : BLOOMERY_OK;
}

static int plan_sizes(uint64_t capacity, double p, pf_shape *sh, uint64_t *nbins,
                      uint64_t *spare_cap)
{
    if (capacity == 0)
        return BLOOMERY_EINVAL;
    int rc = pf_plan(p, sh);
    if (rc)
        return rc;
    double bins = ceil((double)capacity / sh->load);
    if (bins >= (double)(SIZE_MAX / 64 / WORDS / 2))
        return BLOOMERY_ETOOBIG;
    *nbins = bins < 1 ? 1 : (uint64_t)bins;
    double spared, to_spare;
    bin_tail(sh->load, sh->slots, &spared, &to_spare);
    double mean = spared * (double)*nbins;
    *spare_cap = (uint64_t)ceil(SPARE_SLACK * mean + 4 * sqrt(mean) + 16);
    return BLOOMERY_OK;
}

uint64_t pf_bytes_for(uint64_t capacity, double error_rate)
{
    pf_shape sh;
    uint64_t nbins, spare_cap;
    if (plan_sizes(capacity, error_rate, &sh, &nbins, &spare_cap))
        return 0;
    bf_options so = {.policy = BLOOMERY_POLICY_MEMORY};
    uint64_t spare = bf_bytes_for(spare_cap, spare_error(error_rate), &so);
    return spare ? nbins * 64 + spare : 0;
}

/* Whether a bin geometry fits the line and the fingerprint a 64-bit word. */
static bool shape_ok(unsigned r, unsigned S, unsigned Q)
{
    return r >= 1 && r <= MAX_R && S >= 1 && Q >= 1 && (uint64_t)S * (r + 1) + Q <= LINE_BITS &&
           r + 64 - (unsigned)__builtin_clzll(Q) <= 63;
}

int pf_create_shape(pf_t **out, uint64_t nbins, const pf_shape *shape, bf_t *spare, uint64_t seed,
                    uint64_t capacity, double error_rate)
{
    *out = NULL;
    unsigned r = shape->remainder_bits, S = shape->slots, Q = shape->quotients;
    if (nbins == 0 || !shape_ok(r, S, Q) || !spare || capacity == 0 ||
        !(error_rate > 0 && error_rate < 1))
        return BLOOMERY_EINVAL;
    if (nbins > SIZE_MAX / 64 / WORDS / 2)
        return BLOOMERY_ETOOBIG;
    pf_t *pf = calloc(1, sizeof *pf);
    if (!pf)
        return BLOOMERY_ENOMEM;
    pf->bin_bytes = (size_t)nbins * 64;
    pf->bins = bloomery_alloc_zeroed(pf->bin_bytes);
    if (!pf->bins) {
        free(pf);
        return BLOOMERY_ENOMEM;
    }
    pf->spare = spare;
    pf->nbins = nbins;
    pf->r = r;
    pf->S = S;
    pf->Q = Q;
    pf->H = Q + S;
    pf->body_end = pf->H + S * r;
    pf->hwords = (pf->H + 63) / 64;
    for (unsigned f = 0; f + r <= 64; f += r)
        pf->field_ones |= 1ULL << f;
    pf->field_low = pf->field_ones * ((1ULL << (r - 1)) - 1);
    for (unsigned i = 0; i < pf->hwords; i++)
        pf->hmask[i] = pf->H >= 64 * (i + 1) ? ~0ULL : (1ULL << (pf->H % 64)) - 1;
    pf->rmask = (1ULL << r) - 1;
    pf->shape = *shape;
    pf->seed = seed;
    pf->capacity = capacity;
    pf->error_rate = error_rate;
    pf->salt = bk_mix64(seed ^ 0x243f6a8885a308d3ULL);
    pf->stripe_salt = bk_mix64((uint64_t)(uintptr_t)pf);
    pf->spare_far = pf->bin_bytes + bf_bytes(spare) > __atomic_load_n(&far_bytes, __ATOMIC_RELAXED);
    *out = pf;
    return BLOOMERY_OK;
}

int pf_create(pf_t **out, uint64_t capacity, double error_rate, uint64_t seed)
{
    *out = NULL;
    pf_shape sh;
    uint64_t nbins, spare_cap;
    int rc = plan_sizes(capacity, error_rate, &sh, &nbins, &spare_cap);
    if (rc)
        return rc;
    bf_t *spare;
    bf_options so = {.seed = seed ^ 0x5be0cd19137e2179ULL, .policy = BLOOMERY_POLICY_MEMORY};
    rc = bf_create(&spare, spare_cap, spare_error(error_rate), &so);
    if (rc)
        return rc;
    rc = pf_create_shape(out, nbins, &sh, spare, seed, capacity, error_rate);
    if (rc)
        bf_free(spare);
    return rc;
}

void pf_free(pf_t *pf)
{
    if (!pf)
        return;
    bloomery_free_zeroed(pf->bins, pf->bin_bytes);
    bf_free(pf->spare);
    free(pf);
}

/* ---- bits of a line ---- */

/* The 64 bits from pos of a padded copy. */
PF_INLINE uint64_t get64(const uint64_t *w, unsigned pos)
{
    unsigned i = pos >> 6, o = pos & 63;
    return o ? (w[i] >> o) | (w[i + 1] << (64 - o)) : w[i];
}

/* n < 64 bits from pos of a padded copy. */
PF_INLINE uint64_t get_bits(const uint64_t *w, unsigned pos, unsigned n)
{
    return get64(w, pos) & ((1ULL << n) - 1);
}

/* Stores v (below 2^n, n < 64) at pos of a padded copy. */
PF_INLINE void put_bits(uint64_t *w, unsigned pos, unsigned n, uint64_t v)
{
    unsigned i = pos >> 6, o = pos & 63;
    uint64_t field = (1ULL << n) - 1;
    w[i] = (w[i] & ~(field << o)) | (v << o);
    /* The part past the word, if any: x >> (64 - o) without a shift by 64. */
    w[i + 1] = (w[i + 1] & ~((field >> 1) >> (63 - o))) | ((v >> 1) >> (63 - o));
}

/* A line as one value, so that a shift across it is a few vector
 * operations wherever it starts: a loop over the words paid for each word
 * and for mispredicting where it stopped, at a position that changes with
 * every insert. */
typedef uint64_t line_v __attribute__((vector_size(64)));

static const uint64_t ones_then_zeros[16] = {~0ULL, ~0ULL, ~0ULL, ~0ULL,
                                             ~0ULL, ~0ULL, ~0ULL, ~0ULL};
static const uint64_t one_word[16] = {[8] = ~0ULL};

/* The line's bits below x (0 <= x <= 512). Through a pointer: a 64-byte
 * vector has no return convention below AVX-512. */
PF_INLINE void below(unsigned x, line_v *m)
{
    unsigned k = x >> 6;
    line_v full, at;
    memcpy(&full, ones_then_zeros + 8 - k, sizeof full); /* words below k */
    memcpy(&at, one_word + 8 - k, sizeof at);            /* word k */
    *m = full | (at & (uint64_t)((1ULL << (x & 63)) - 1));
}

/* Word k of a line (k <= 8; 8 is none). */
PF_INLINE void word_mask(unsigned k, line_v *m) { memcpy(m, one_word + 8 - k, sizeof *m); }

/* Moves bits [a, b - n) to [a + n, b) and clears [a, a + n); 0 < n < 64,
 * a + n <= b <= 512. */
PF_INLINE void shift_up(line_v *v, unsigned a, unsigned b, unsigned n)
{
    line_v prev = __builtin_shufflevector(*v, (line_v){0}, 8, 0, 1, 2, 3, 4, 5, 6);
    line_v s = (*v << n) | (prev >> (64 - n));
    line_v la, lan, lb;
    below(a, &la);
    below(a + n, &lan);
    below(b, &lb);
    *v = (*v & (la | ~lb)) | (s & ~lan & lb);
}

/* x (below 2^63) moved to bit pos of a line: its low part in the word of
 * pos, the rest, if any, in the next (x >> (64 - o) without a shift by
 * 64). */
PF_INLINE void placed(unsigned pos, uint64_t x, line_v *m)
{
    unsigned o = pos & 63;
    line_v lo, hi;
    word_mask(pos >> 6, &lo);
    word_mask((pos >> 6) + 1, &hi);
    *m = (lo & (x << o)) | (hi & ((x >> 1) >> (63 - o)));
}

PF_INLINE void clear_at(line_v *v, unsigned pos, uint64_t x)
{
    line_v m;
    placed(pos, x, &m);
    *v &= ~m;
}

PF_INLINE void or_at(line_v *v, unsigned pos, uint64_t x)
{
    line_v m;
    placed(pos, x, &m);
    *v |= m;
}

static int cpu_level = -1; /* as pf_set_cpu_level; -1 until detected */

int pf_cpu_level(void)
{
    int c = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("popcnt"))
        c = __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("avx2") ? 2 : 1;
#endif
    return c;
}

void pf_set_cpu_level(int level)
{
    int top = pf_cpu_level();
    __atomic_store_n(&cpu_level, level < top ? level : top, __ATOMIC_RELAXED);
}

static inline int cpu(void)
{
    int c = __atomic_load_n(&cpu_level, __ATOMIC_RELAXED);
    if (c < 0) {
        c = pf_cpu_level();
        __atomic_store_n(&cpu_level, c, __ATOMIC_RELAXED);
    }
    return c;
}

/* Position of the k-th (from 0) set bit of x, which has more than k. */
PF_INLINE unsigned select64(uint64_t x, unsigned k)
{
#if defined(__x86_64__)
    if (__atomic_load_n(&cpu_level, __ATOMIC_RELAXED) == 2) {
        uint64_t r; /* pdep by hand: the portable copy must compile without bmi2 */
        __asm__("pdepq %2, %1, %0" : "=r"(r) : "r"(1ULL << k), "r"(x));
        return (unsigned)__builtin_ctzll(r);
    }
#endif
    /* Byte counts, their running sums, then the byte where the sum passes k. */
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t c = x - ((x >> 1) & 0x5555555555555555ULL);
    c = (c & 0x3333333333333333ULL) + ((c >> 2) & 0x3333333333333333ULL);
    c = ((c + (c >> 4)) & 0x0f0f0f0f0f0f0f0fULL) * ones;
    uint64_t le = (((k | 0x80) * ones) - c) & highs; /* bytes whose sum is at most k */
    unsigned byte = (unsigned)__builtin_ctzll(~le & highs) >> 3;
    unsigned kk = k - (unsigned)(((c << 8) >> (8 * byte)) & 0xff);
    uint64_t y = (x >> (8 * byte)) & 0xff;
    for (; kk; kk--)
        y &= y - 1;
    return byte * 8 + (unsigned)__builtin_ctzll(y);
}

/* Position of the k-th zero of the header (there are at least Q). */
PF_INLINE unsigned select0(const pf_t *pf, const uint64_t *w, unsigned k)
{
    if (pf->hwords <= 4) { /* every shape below p = 0.1: pick the word without a branch */
        uint64_t z = 0;
        unsigned base = 0, before = 0, kk = 0;
        for (unsigned i = 0; i < 4; i++) {
            uint64_t zi = ~w[i] & pf->hmask[i];
            unsigned c = (unsigned)__builtin_popcountll(zi);
            bool here = k - before < c;
            z = here ? zi : z;
            kk = here ? k - before : kk;
            base = here ? i * 64 : base;
            before += c;
        }
        return base + select64(z, kk);
    }
    for (unsigned i = 0;; i++) {
        uint64_t z = ~w[i] & pf->hmask[i];
        unsigned c = (unsigned)__builtin_popcountll(z);
        if (k < c)
            return i * 64 + select64(z, k);
        k -= c;
    }
}

PF_INLINE unsigned header_ones(const pf_t *pf, const uint64_t *w)
{
    unsigned m = 0;
    for (unsigned i = 0; i < pf->hwords; i++)
        m += (unsigned)__builtin_popcountll(w[i] & pf->hmask[i]);
    return m;
}

/* The header's last one (the bin holds at least one fingerprint; else 0). */
PF_INLINE unsigned header_top(const pf_t *pf, const uint64_t *w)
{
    /* Every word, without a branch on the data (see check_core). */
    unsigned top = 0;
    for (unsigned i = 0; i < pf->hwords; i++) {
        uint64_t x = w[i] & pf->hmask[i];
        unsigned at = i * 64 + 63 - (unsigned)__builtin_clzll(x | 1);
        top = x ? at : top;
    }
    return top;
}

/* Where quotient q's run starts in the header, its length, and how many of
 * its remainders are below rem (*found when one equals it). */
typedef struct run {
    unsigned start, len, below;
    bool found;
} run;

PF_INLINE run find_run(const pf_t *pf, const uint64_t *w, unsigned q, uint64_t rem)
{
    run u = {.start = q ? select0(pf, w, q - 1) + 1 : 0};
    for (unsigned p = u.start;; p += 64) {
        uint64_t zeros = ~get64(w, p); /* the run ends before the header does */
        if (zeros) {
            u.len += (unsigned)__builtin_ctzll(zeros);
            break;
        }
        u.len += 64;
    }
    unsigned slot = u.start - q;
    for (; u.below < u.len; u.below++) {
        uint64_t x = get_bits(w, pf->H + (slot + u.below) * pf->r, pf->r);
        if (x >= rem) {
            u.found = x == rem;
            break;
        }
    }
    return u;
}

/* Whether quotient q's run holds rem (a reader's question): the run's
 * remainders are compared at once as r-bit fields of one word when it fits
 * there, as nearly every run does. */
PF_INLINE bool run_has(const pf_t *pf, const uint64_t *w, unsigned q, uint64_t rem)
{
    unsigned start = q ? select0(pf, w, q - 1) + 1 : 0;
    uint64_t zeros = ~get64(w, start);
    unsigned len = zeros ? (unsigned)__builtin_ctzll(zeros) : 64;
    if (len * pf->r >= 64)
        return find_run(pf, w, q, rem).found;
    uint64_t x = get64(w, pf->H + (start - q) * pf->r) ^ (rem * pf->field_ones);
    /* A field's top bit ends up set iff the field is zero. */
    uint64_t zero = ~(((x & pf->field_low) + pf->field_low) | x | pf->field_low);
    return (zero & ((1ULL << (len * pf->r)) - 1)) != 0;
}

/* The largest fingerprint of a bin holding m > 0: its quotient is the
 * count of zeros before the header's last one. */
PF_INLINE uint64_t bin_max(const pf_t *pf, const uint64_t *w, unsigned m)
{
    uint64_t q = header_top(pf, w) - (m - 1);
    return (q << pf->r) | get_bits(w, pf->H + (m - 1) * pf->r, pf->r);
}

/* ---- hashing ---- */

typedef struct key {
    uint64_t bin;
    unsigned q;
    uint64_t rem;
} key;

static inline key key_of(const pf_t *pf, bloomery_hash h)
{
    return (key){.bin = bk_mulhi(h.lo, pf->nbins),
                 .q = (unsigned)(((h.hi >> 32) * pf->Q) >> 32),
                 .rem = h.hi & pf->rmask};
}

/* The spare's key for a bin's fingerprint. */
static inline bloomery_hash spare_hash(const pf_t *pf, uint64_t bin, uint64_t v)
{
    uint64_t lo = bk_mix64(bin * 0x9e3779b97f4a7c15ULL ^ bk_mix64(v + pf->salt));
    return (bloomery_hash){lo, bk_mix64(lo ^ v ^ 0xd6e8feb86659fd93ULL)};
}

static inline uint32_t *seq_of(const pf_t *pf, uint64_t bin)
{
    return &seqs[bk_mix64(bin ^ pf->stripe_salt) & (SEQ_STRIPES - 1)].seq;
}

/* ---- readers ---- */

static inline void read_bin(const pf_t *pf, uint64_t bin, uint64_t *w)
{
    /* Sequentially consistent (prefix_lock.h). */
    seq_read_line(seq_of(pf, bin), pf->bins + bin * WORDS, w);
}

PF_INLINE bool check_core(const pf_t *pf, bloomery_hash h)
{
    key k = key_of(pf, h);
    uint64_t w[COPY_WORDS] = {0};
    read_bin(pf, k.bin, w);
    if (run_has(pf, w, k.q, k.rem))
        return true;
    /* Whether the spare may hold it, computed without branching on the
     * bin: a mispredicted branch here discarded the next lookup's miss,
     * already under way. A bin below S holds garbage for bin_max, unused. */
    bool full = header_ones(pf, w) == pf->S;
    uint64_t v = ((uint64_t)k.q << pf->r) | k.rem;
    if (!(full & (v > bin_max(pf, w, pf->S))))
        return false;
    return bf_check_hashed(pf->spare, spare_hash(pf, k.bin, v));
}

/* ---- writers ---- */

static inline uint32_t lock_bin(const pf_t *pf, uint64_t bin) { return seq_lock(seq_of(pf, bin)); }

static inline void unlock_bin(const pf_t *pf, uint64_t bin, uint32_t next)
{
    seq_unlock(seq_of(pf, bin), next);
}

/* A writer's start on a bin: the barrier first (it may wait for a
 * snapshot's copy, so not under the lock), then the lock. */
static inline uint32_t begin_write(const pf_t *pf, uint64_t bin)
{
    if (pf->write_hook)
        pf->write_hook(pf->write_hook_ctx, pf->write_hook_region, bin * 64, 64);
    return lock_bin(pf, bin);
}

/* The bin at src with rem inserted at u, into w. It stays one vector from
 * load to store: rebuilding it from words between the steps stalled on
 * store forwarding. */
PF_INLINE void insert_at(const pf_t *pf, const uint64_t *src, uint64_t *w, unsigned q, run u,
                         uint64_t rem, unsigned drop)
{
    unsigned one = u.start + u.below, at = pf->H + (u.start - q + u.below) * pf->r;
    line_v v;
    memcpy(&v, src, sizeof v);
    /* A full bin first drops its largest: the header's last one (a zero
     * left there ends its quotient's run) and the last remainder. Both lie
     * at or above the insert, so u holds as it was found. */
    clear_at(&v, drop ? drop - 1 : 0, drop ? 1 : 0);
    clear_at(&v, pf->H + (pf->S - 1) * pf->r, drop ? pf->rmask : 0);
    shift_up(&v, one, pf->H, 1);
    or_at(&v, one, 1);
    shift_up(&v, at, pf->body_end, pf->r); /* the bin has room: at + r <= body_end */
    or_at(&v, at, rem);
    memcpy(w, &v, sizeof v);
}

/* Counts a group's writers sum up, one atomic add each per group. */
typedef struct tally {
    uint64_t added, spared, spare_set;
} tally;

/* Puts a fingerprint in the spare: true if that set a bit (it was not
 * there). One probe under the spare block's stripe. */
PF_INLINE bool spare_put(pf_t *pf, uint64_t bin, uint64_t v, tally *t)
{
    bloomery_hash sh = spare_hash(pf, bin, v);
    uint64_t held = bf_lock_item(pf->spare, sh);
    bool set = bf_set_locked(pf->spare, sh);
    bf_unlock_stripes(pf->spare, held);
    t->spare_set += set;
    return set;
}

PF_INLINE void tally_flush(pf_t *pf, const tally *t)
{
    if (t->added)
        __atomic_fetch_add(&pf->count, t->added, __ATOMIC_RELAXED);
    if (t->spared)
        __atomic_fetch_add(&pf->spared, t->spared, __ATOMIC_RELAXED);
    bf_count_add(pf->spare, t->spare_set);
}

PF_INLINE bool add_locked(pf_t *pf, key k, tally *t)
{
    uint64_t *dst = pf->bins + k.bin * WORDS;
    uint64_t w[COPY_WORDS] = {0};
    for (unsigned i = 0; i < WORDS; i++)
        w[i] = __atomic_load_n(&dst[i], __ATOMIC_RELAXED);
    run u = find_run(pf, w, k.q, k.rem);
    if (u.found)
        return false;
    unsigned m = header_ones(pf, w);
    uint64_t v = ((uint64_t)k.q << pf->r) | k.rem;
    unsigned drop = 0; /* 1 + the header position of a largest to drop */
    if (m == pf->S) {
        unsigned top_one = header_top(pf, w);
        uint64_t top = (uint64_t)(top_one - (m - 1)) << pf->r |
                       get_bits(w, pf->H + (m - 1) * pf->r, pf->r); /* bin_max */
        if (v > top) {
            if (!spare_put(pf, k.bin, v, t))
                return false; /* every bit set: present */
            t->spared++;
            return true;
        }
        /* The spare has the largest before the bin lets it go. */
        spare_put(pf, k.bin, top, t);
        t->spared++;
        drop = top_one + 1;
    }
    insert_at(pf, dst, w, k.q, u, k.rem, drop); /* no writer but us: read as one vector */
    for (unsigned i = 0; i < WORDS; i++)        /* release: after the odd sequence (read_bin) */
        __atomic_store_n(&dst[i], w[i], __ATOMIC_RELEASE);
    return true;
}

/* Whether adds should prefetch spare lines: the filter is beyond the
 * caches (a spare line is then a second miss after the bin's) and filled
 * far enough for full bins to be common. Below either, the guess costs
 * more than the miss it hides. */
PF_INLINE bool spare_lines_far(const pf_t *pf)
{
    return pf->spare_far && __atomic_load_n(&pf->count, __ATOMIC_RELAXED) >= pf->capacity / 2;
}

/* Prefetches the spare line an add to a full bin will write: the item's
 * own, or the one of the largest fingerprint it pushes out. The bin, in
 * cache by now, is read without its lock as a guess; a wrong one costs
 * only the prefetch. Taken for a group before its adds, the spare misses
 * overlap instead of coming one by one under each bin's lock. */
PF_INLINE void prefetch_spare_core(const pf_t *pf, bloomery_hash h)
{
    key k = key_of(pf, h);
    const uint64_t *src = pf->bins + k.bin * WORDS;
    uint64_t w[COPY_WORDS] = {0};
    for (unsigned i = 0; i < WORDS; i++)
        w[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    if (header_ones(pf, w) != pf->S)
        return;
    uint64_t v = ((uint64_t)k.q << pf->r) | k.rem, top = bin_max(pf, w, pf->S);
    bf_prefetch(pf->spare, spare_hash(pf, k.bin, v > top ? v : top), true);
}

/* Adds g hashed items, each under its bin's lock: res[i] 1 added, 0
 * present. With a guard (a chain's adds, prefix_lock.h) an item is added
 * only if *guard, read under the lock, equals expect, else res[i] is -1,
 * and the chain counts the adds; without one, the filter counts them, with
 * one atomic add for the group. */
PF_INLINE void add_core(pf_t *pf, const bloomery_hash *h, size_t g, const size_t *guard,
                        size_t expect, int *res)
{
    tally t = {0};
    if (spare_lines_far(pf))
        for (size_t i = 0; i < g; i++)
            prefetch_spare_core(pf, h[i]);
    for (size_t i = 0; i < g; i++) {
        key k = key_of(pf, h[i]);
        uint32_t next = begin_write(pf, k.bin);
        int rc = -1;
        if (!guard || __atomic_load_n(guard, __ATOMIC_SEQ_CST) == expect)
            rc = add_locked(pf, k, &t);
        unlock_bin(pf, k.bin, next);
        t.added += !guard && rc > 0;
        res[i] = rc;
    }
    tally_flush(pf, &t);
}

void pf_count_add(pf_t *pf, uint64_t n)
{
    if (n)
        __atomic_fetch_add(&pf->count, n, __ATOMIC_RELAXED);
}

/* ---- merging ---- */

/* A bin's fingerprints in order (at most S); returns how many. The i-th
 * one of the header sits at i + its quotient. */
static unsigned bin_fingerprints(const pf_t *pf, const uint64_t *w, uint64_t *v)
{
    unsigned m = 0;
    for (unsigned i = 0; i < pf->hwords; i++)
        for (uint64_t x = w[i] & pf->hmask[i]; x && m < pf->S; x &= x - 1, m++) {
            uint64_t q = i * 64 + (unsigned)__builtin_ctzll(x) - m;
            v[m] = (q << pf->r) | get_bits(w, pf->H + m * pf->r, pf->r);
        }
    return m;
}

bool pf_same_shape(const pf_t *a, const pf_t *b)
{
    return a->nbins == b->nbins && a->r == b->r && a->S == b->S && a->Q == b->Q &&
           a->seed == b->seed && bf_nblocks(a->spare) == bf_nblocks(b->spare) &&
           bf_blocks_per_key(a->spare) == bf_blocks_per_key(b->spare);
}

int pf_merge(pf_t *dst, const pf_t *src)
{
    if (!pf_same_shape(dst, src))
        return BLOOMERY_EINVAL;
    /* src's spare first: its fingerprints are keyed by bin and value alike
     * here, and each stays above its bin's largest, which merging only
     * lowers (the bin keeps the S smallest of both). */
    int rc = bf_merge(dst->spare, src->spare);
    if (rc != BLOOMERY_OK)
        return rc;
    uint64_t a[MAX_S], b[MAX_S], both[2 * MAX_S], spared = 0;
    uint64_t ws[COPY_WORDS] = {0};
    for (uint64_t bin = 0; bin < dst->nbins; bin++) {
        read_bin(src, bin, ws);
        unsigned nb = bin_fingerprints(src, ws, b);
        if (nb == 0)
            continue;
        uint64_t *line = dst->bins + bin * WORDS;
        uint32_t next = begin_write(dst, bin);
        uint64_t w[COPY_WORDS] = {0};
        for (unsigned i = 0; i < WORDS; i++)
            w[i] = __atomic_load_n(&line[i], __ATOMIC_RELAXED);
        unsigned na = bin_fingerprints(dst, w, a), n = 0, i = 0, j = 0;
        while (i < na || j < nb) {
            uint64_t x = j == nb || (i < na && a[i] <= b[j]) ? a[i] : b[j];
            i += i < na && a[i] == x;
            j += j < nb && b[j] == x;
            both[n++] = x;
        }
        /* The spare has what the bin lets go before the bin does. */
        for (unsigned k = dst->S; k < n; k++)
            bf_add_hashed(dst->spare, spare_hash(dst, bin, both[k]));
        spared += n > dst->S ? n - dst->S : 0;
        n = n < dst->S ? n : dst->S;
        memset(w, 0, sizeof w);
        for (unsigned k = 0; k < n; k++) {
            unsigned one = (unsigned)(both[k] >> dst->r) + k;
            w[one >> 6] |= 1ULL << (one & 63);
            put_bits(w, dst->H + k * dst->r, dst->r, both[k] & dst->rmask);
        }
        for (unsigned k = 0; k < WORDS; k++)
            __atomic_store_n(&line[k], w[k], __ATOMIC_RELEASE);
        unlock_bin(dst, bin, next);
    }
    __atomic_fetch_add(&dst->spared, spared + pf_spare_count(src), __ATOMIC_RELAXED);
    __atomic_fetch_add(&dst->count, pf_count(src), __ATOMIC_RELAXED);
    return BLOOMERY_OK;
}

/* ---- batches ---- */

void pf_prefetch(const pf_t *pf, bloomery_hash h, bool for_write)
{
    const uint64_t *bin = pf->bins + bk_mulhi(h.lo, pf->nbins) * WORDS;
    if (for_write)
        __builtin_prefetch(bin, 1);
    else
        __builtin_prefetch(bin, 0);
}

static void add_hashed_group(pf_t *pf, const bloomery_hash *h, size_t g, uint8_t *out);

void pf_check_many(const pf_t *pf, const void *const *items, const size_t *lens, size_t n,
                   uint8_t *out)
{
    bloomery_hash h[GROUP];
    for (size_t base = 0; base < n; base += GROUP) {
        size_t g = n - base < GROUP ? n - base : GROUP;
        for (size_t i = 0; i < g; i++) {
            h[i] = bloomery_hash_item(items[base + i], lens[base + i], pf->seed);
            __builtin_prefetch(pf->bins + bk_mulhi(h[i].lo, pf->nbins) * WORDS, 0);
        }
        for (size_t i = 0; i < g; i++)
            out[base + i] = pf_check_hashed(pf, h[i]);
    }
}

void pf_add_many(pf_t *pf, const void *const *items, const size_t *lens, size_t n, uint8_t *out)
{
    bloomery_hash h[GROUP];
    for (size_t base = 0; base < n; base += GROUP) {
        size_t g = n - base < GROUP ? n - base : GROUP;
        for (size_t i = 0; i < g; i++) {
            h[i] = bloomery_hash_item(items[base + i], lens[base + i], pf->seed);
            __builtin_prefetch(pf->bins + bk_mulhi(h[i].lo, pf->nbins) * WORDS, 1);
        }
        add_hashed_group(pf, h, g, out ? out + base : NULL);
    }
}

/* ---- state ---- */

pf_shape pf_get_shape(const pf_t *pf) { return pf->shape; }
uint64_t pf_nbins(const pf_t *pf) { return pf->nbins; }
uint64_t pf_bytes(const pf_t *pf) { return pf->bin_bytes + bf_bytes(pf->spare); }
uint64_t pf_seed(const pf_t *pf) { return pf->seed; }
uint64_t pf_capacity(const pf_t *pf) { return pf->capacity; }
double pf_error_rate(const pf_t *pf) { return pf->error_rate; }
const bf_t *pf_spare(const pf_t *pf) { return pf->spare; }
const uint8_t *pf_data(const pf_t *pf) { return (const uint8_t *)pf->bins; }
uint8_t *pf_data_mut(pf_t *pf) { return (uint8_t *)pf->bins; }
uint64_t pf_data_bytes(const pf_t *pf) { return pf->bin_bytes; }
void pf_set_write_hook(pf_t *pf, pf_write_hook hook, void *ctx, uint32_t region)
{
    pf->write_hook = hook;
    pf->write_hook_ctx = ctx;
    pf->write_hook_region = region;
}
void pf_set_count(pf_t *pf, uint64_t count)
{
    __atomic_store_n(&pf->count, count, __ATOMIC_RELAXED);
}
void pf_set_spare_count(pf_t *pf, uint64_t n)
{
    __atomic_store_n(&pf->spared, n, __ATOMIC_RELAXED);
}

/* At most S ones leaves every quotient its zero: all a lookup needs to stay
 * within the line. */
PF_INLINE int validate_core(const pf_t *pf, const uint64_t *bins, uint64_t n)
{
    for (uint64_t b = 0; b < n; b++)
        if (header_ones(pf, bins + b * WORDS) > pf->S)
            return BLOOMERY_ECORRUPT;
    return BLOOMERY_OK;
}
uint64_t pf_count(const pf_t *pf) { return __atomic_load_n(&pf->count, __ATOMIC_RELAXED); }
uint64_t pf_spare_count(const pf_t *pf) { return __atomic_load_n(&pf->spared, __ATOMIC_RELAXED); }

PF_INLINE double estimate_core(const pf_t *pf)
{
    double space = (double)pf->Q * ldexp(1, (int)pf->r);
    double spare = bf_fpr_estimate(pf->spare), sum = 0;
    uint64_t w[COPY_WORDS] = {0};
    uint64_t n = pf->nbins, step = estimate_step(n), read = 0;
    for (uint64_t run = 0; run < n; run += step)
        for (uint64_t b = run; b < run + ESTIMATE_RUN && b < n; b++, read++) {
            read_bin(pf, b, w);
            unsigned m = header_ones(pf, w);
            sum += m / space;
            if (m == pf->S)
                sum += (space - 1 - (double)bin_max(pf, w, m)) / space * spare;
        }
    /* A fingerprint equal to one that went to the spare. */
    return sum / (double)read + (double)pf_spare_count(pf) / (double)pf->nbins / space;
}

/* ---- one copy per instruction set ---- */

/* base: x86-64's baseline; fast: popcnt; wide: popcnt, bmi2 and AVX2 (a
 * line in two registers). */
#if defined(__x86_64__)
#define FAST __attribute__((target("popcnt")))
#define WIDE __attribute__((target("popcnt,bmi2,avx2")))
#else
#define FAST
#define WIDE
#endif
#define PF_COPIES(name, attr)                                                                      \
    attr static bool check_##name(const pf_t *pf, bloomery_hash h) { return check_core(pf, h); }   \
    attr static void add_##name(pf_t *pf, const bloomery_hash *h, size_t g, const size_t *guard,   \
                                size_t expect, int *res)                                           \
    {                                                                                              \
        add_core(pf, h, g, guard, expect, res);                                                    \
    }                                                                                              \
    attr static double estimate_##name(const pf_t *pf) { return estimate_core(pf); }               \
    attr static int validate_##name(const pf_t *pf, const uint64_t *bins, uint64_t n)              \
    {                                                                                              \
        return validate_core(pf, bins, n);                                                         \
    }
PF_COPIES(base, )
PF_COPIES(fast, FAST)
PF_COPIES(wide, WIDE)

bool pf_check_hashed(const pf_t *pf, bloomery_hash h)
{
    int c = cpu();
    return c == 2 ? check_wide(pf, h) : c ? check_fast(pf, h) : check_base(pf, h);
}

void pf_add_many_if(pf_t *pf, const bloomery_hash *h, size_t g, const size_t *guard, size_t expect,
                    int *res)
{
    int c = cpu();
    if (c == 2)
        add_wide(pf, h, g, guard, expect, res);
    else if (c)
        add_fast(pf, h, g, guard, expect, res);
    else
        add_base(pf, h, g, guard, expect, res);
}

/* Up to GROUP items, counted by the filter; out may be NULL. */
static void add_hashed_group(pf_t *pf, const bloomery_hash *h, size_t g, uint8_t *out)
{
    int res[GROUP];
    pf_add_many_if(pf, h, g, NULL, 0, res);
    for (size_t i = 0; out && i < g; i++)
        out[i] = (uint8_t)res[i];
}

int pf_add_if(pf_t *pf, bloomery_hash h, const size_t *guard, size_t expect)
{
    int rc;
    pf_add_many_if(pf, &h, 1, guard, expect, &rc);
    return rc;
}

bool pf_add_hashed(pf_t *pf, bloomery_hash h)
{
    uint8_t added;
    add_hashed_group(pf, &h, 1, &added);
    return added;
}

double pf_fpr_estimate(const pf_t *pf)
{
    int c = cpu();
    return c == 2 ? estimate_wide(pf) : c ? estimate_fast(pf) : estimate_base(pf);
}

int pf_validate_bins(const pf_t *pf, const uint8_t *bins, uint64_t nbins)
{
    if ((uintptr_t)bins % 8) { /* a chunk inside a flat image: one bin at a time */
        for (uint64_t b = 0; b < nbins; b++) {
            uint64_t w[WORDS];
            memcpy(w, bins + b * WORDS * 8, sizeof(w));
            if (pf_validate_bins(pf, (const uint8_t *)w, 1) != BLOOMERY_OK)
                return BLOOMERY_ECORRUPT;
        }
        return BLOOMERY_OK;
    }
    const uint64_t *w = (const uint64_t *)(const void *)bins;
    int c = cpu();
    return c == 2 ? validate_wide(pf, w, nbins)
           : c    ? validate_fast(pf, w, nbins)
                  : validate_base(pf, w, nbins);
}

int pf_validate(const pf_t *pf) { return pf_validate_bins(pf, pf_data(pf), pf->nbins); }

bool pf_check(const pf_t *pf, const void *item, size_t len)
{
    return pf_check_hashed(pf, bloomery_hash_item(item, len, pf->seed));
}

bool pf_add(pf_t *pf, const void *item, size_t len)
{
    return pf_add_hashed(pf, bloomery_hash_item(item, len, pf->seed));
}

bool pf_check_and_add(pf_t *pf, const void *item, size_t len) { return pf_add(pf, item, len); }

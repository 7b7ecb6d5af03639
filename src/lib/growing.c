/* Growing filter (see include/bloomery/growing.h for the contract).
 *
 *   bucket (64 bytes, little-endian bits)
 *   +--------------------------------------------+-----------+
 *   | S fingerprints of W bits, filled in order  | flags     |
 *   +--------------------------------------------+-----------+
 *     bit 511 MOVED (its items are in the next table), 510 OVER (some of
 *     its items are in the pool), 509 SATURATED (it answers "may exist" to
 *     every item); 0 is an empty slot.
 *
 *   pool: after the buckets, a power of two of 64-bit entries, j << 27 |
 *     v >> 5 (0 empty), in open addressing from a hash of j. It is sized
 *     for twice the items the model expects full buckets to send there
 *     when the table grows, plus their spread; pooled across the whole
 *     table, that count hardly varies, where a per-bucket or per-group
 *     spill would have to be sized for its tail.
 *
 * A fingerprint is held as v, 32 bits aligned to the top: its L known bits,
 * then a one (the marker), then zeros. An item at position P = hash * nb
 * (128 bits) is in bucket P >> 64, and v takes the top W - 1 bits of P's
 * low word. Multiplying the buckets by 2^e multiplies P by 2^e, so the
 * item's new bucket is (j << e) | (v's top e bits) and its new v is v << e:
 * the marker climbs, the bits left still match the lookup's. A v with fewer
 * than e bits left goes to every bucket it may belong to. A lookup's q is
 * the top 32 bits of P's low word; v matches q when they agree above v's
 * marker. */
#include "bloomery/growing.h"
#include "bloomery/bloomery.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "blocked_kernel.h"
#include "estimate.h"
#include "mem.h"
#include "growing_cpu.h"
#include "seqlock.h"

#define WORDS 8
#define LINE_BITS 512
#define FLAG_BITS 3
#define MOVED (1ULL << 63) /* in a bucket's word 7 */
#define OVER (1ULL << 62)
#define SATURATED (1ULL << 61)
#define ENTRY_V 27 /* a pool entry's fingerprint bits; j takes the rest */
#define MAX_BUCKETS (1ULL << (64 - ENTRY_V))
#define MIN_W 16
#define MAX_W ENTRY_V
/* At the load a table grows at, at most this share of lookups (those whose
 * bucket is full) also read the pool. */
#define MAX_TO_POOL 0.10
#define POOL_MIN 32
/* An insert looks this far for a free entry; the pool counts as full at
 * three quarters. Either starts a growth. At the half the grow load
 * fills, runs of 256 taken entries are rarer than one in 10^9. */
#define POOL_PROBES 256
/* A bucket with this many items in the pool saturates instead, when it
 * may (add_core): at the grow load one in about 10^7 buckets has that
 * many; items piled on one spot (hashes crafted to collide) stop here. */
#define PILE 24
/* The model's filter has grown this many doublings: the oldest items have
 * lost up to as many bits, and each generation weighs as much as the next
 * (half the items, twice the rate). */
#define MODEL_DOUBLINGS 20
/* Buckets moved by each add while a growth is under way: the move ends
 * long before the new table fills. */
#define MOVE_PER_ADD 4
#define SEQ_STRIPES 1024
/* Tables from a page up are mapped, so they can be given back while
 * readers may still be crossing them (mem.h). */
#define PAGE_BYTES 4096

typedef struct gtable {
    uint64_t *lines; /* nb buckets, then the pool */
    uint64_t nb;
    uint64_t *pool;
    uint64_t npool;
    uint64_t pooled; /* atomic: entries taken */
    size_t bytes;
    bool mapped;
    uint64_t salt;          /* places its pool entries (from the filter's salt) */
    uint64_t lock_salt;     /* spreads its buckets over the sequence locks */
    struct gtable *next;    /* atomic: the table its buckets move into */
    struct gtable *retired; /* the filter's older tables */
    uint64_t cursor;        /* next bucket to move; written under the filter's grow lock */
    int64_t region;         /* its region in the image the write hook reports for, or -1 */
    bool held;              /* retired while a snapshot reads it: given back when the hook goes */
} gtable;

typedef uint32_t v16u __attribute__((vector_size(64)));
typedef uint64_t v8u64 __attribute__((vector_size(64)));

struct gf {
    gtable *cur; /* atomic: where lookups start */
    pthread_mutex_t grow;
    unsigned W, S, e; /* e: log2(expansion), 0 when non-scaling */
    double load;      /* items per bucket slot when the table grows */
    double pool_per_bucket;
    uint64_t capacity, seed, salt;
    double error_rate;
    uint32_t expansion;
    uint64_t count;         /* atomic */
    uint64_t limit;         /* atomic: the count that starts a growth */
    uint64_t nb0;           /* the first table's buckets, for capacity */
    uint64_t retry_at;      /* under grow: the count before which a refused growth is not retried */
    uint64_t saturate_from; /* the fewest buckets at which one may saturate */
    gtable *retired;
    bool (*may_allocate)(void *ctx, uint64_t bytes);
    void *may_allocate_ctx;
    gf_write_hook hook;
    void *hook_ctx;
    void (*released)(void *ctx, uint64_t bytes);
    void *released_ctx;
    /* line_has_vec's lanes for slots 16k to 16k + 15 (lanes_init). */
    v16u lanes[2][6]; /* the struct is 64-byte aligned for these */
};

static struct {
    uint32_t seq;
    char pad[60];
} seqs[SEQ_STRIPES] __attribute__((aligned(64)));

static inline uint32_t *seq_of(const gtable *t, uint64_t j)
{
    return &seqs[bk_mix64(j ^ t->lock_salt) & (SEQ_STRIPES - 1)].seq;
}

/* ---- the model ---- */

/* For a bucket of S slots with a Poisson(lam) load: the mean number of
 * items it sends to the pool, and the chance that it is full. */
static void overflow(double lam, unsigned S, double *mean, double *full)
{
    double pm = exp(-lam), sum = 0, p = 0;
    unsigned xmax = (unsigned)(lam + 14 * sqrt(lam) + 30);
    for (unsigned x = 0; x <= xmax; x++) {
        if (x >= S) {
            sum += (double)(x - S) * pm;
            p += pm;
        }
        pm *= lam / (double)(x + 1);
    }
    *mean = sum;
    *full = p;
}

static unsigned slots_for(unsigned W) { return (LINE_BITS - FLAG_BITS) / W; }

/* The highest load at which at most MAX_TO_POOL of the buckets are full. */
static double load_for(unsigned S)
{
    double a = 0.95, mean, full;
    for (;; a -= 0.01) {
        overflow(a * S, S, &mean, &full);
        if (full <= MAX_TO_POOL || a < 0.5)
            return a;
    }
}

static double model_fpr(unsigned W)
{
    unsigned S = slots_for(W);
    return load_for(S) * S * (1 + MODEL_DOUBLINGS / 2.0) * ldexp(1, -(int)(W - 1));
}

static int plan(double p, unsigned *W)
{
    if (!(p > 0 && p < 1))
        return BLOOMERY_EINVAL;
    for (unsigned w = MIN_W; w <= MAX_W; w++) {
        if (model_fpr(w) <= p / 4) {
            *W = w;
            return BLOOMERY_OK;
        }
    }
    return BLOOMERY_ETOOBIG;
}

typedef struct shape {
    unsigned W, S;
    double load, pool_per_bucket;
} shape;

static int plan_buckets(uint64_t capacity, double p, shape *sh, uint64_t *nb)
{
    if (capacity == 0)
        return BLOOMERY_EINVAL;
    int rc = plan(p, &sh->W);
    if (rc)
        return rc;
    sh->S = slots_for(sh->W);
    sh->load = load_for(sh->S);
    double mean, full;
    overflow(sh->load * sh->S, sh->S, &mean, &full);
    sh->pool_per_bucket = mean;
    double b = ceil((double)capacity / (sh->load * sh->S));
    if (b > (double)MAX_BUCKETS)
        return BLOOMERY_ETOOBIG;
    *nb = b < 1 ? 1 : (uint64_t)b;
    return BLOOMERY_OK;
}

/* Twice the entries full buckets send at the grow load, and room for their
 * spread: a small table's count varies far more than twice over (a
 * non-scaling filter fills to that load, and has no growth to fall back
 * on). */
static uint64_t pool_for(double per_bucket, uint64_t nb)
{
    double m = per_bucket * (double)nb, want = 2 * m + 8 * sqrt(m) + 16;
    uint64_t n = POOL_MIN;
    while ((double)n < want)
        n <<= 1;
    return n;
}

static size_t table_bytes(double per_bucket, uint64_t nb)
{
    return (size_t)nb * 64 + (size_t)pool_for(per_bucket, nb) * 8;
}

/* ---- tables ---- */

static gtable *table_new(const gf_t *gf, uint64_t nb)
{
    gtable *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->nb = nb;
    t->npool = pool_for(gf->pool_per_bucket, nb);
    t->bytes = table_bytes(gf->pool_per_bucket, nb);
    t->mapped = t->bytes >= PAGE_BYTES;
    t->lines = t->mapped ? bloomery_alloc_mapped(t->bytes) : bloomery_alloc_zeroed(t->bytes);
    if (!t->lines) {
        free(t);
        return NULL;
    }
    t->pool = t->lines + nb * WORDS;
    t->salt = bk_mix64(gf->salt ^ nb);
    /* Filters side by side take different locks for the same bucket. */
    t->lock_salt = bk_mix64((uint64_t)(uintptr_t)t ^ nb);
    t->region = -1;
    return t;
}

static void table_free(gtable *t)
{
    if (t->mapped)
        bloomery_free_mapped(t->lines, t->bytes);
    else
        bloomery_free_zeroed(t->lines, t->bytes);
    free(t);
}

static inline uint64_t *bucket_at(const gtable *t, uint64_t j) { return t->lines + j * WORDS; }

static inline uint64_t pool_home(const gtable *t, uint64_t j)
{
    return bk_mix64(j ^ t->salt ^ 0x9e3779b97f4a7c15ULL) & (t->npool - 1);
}

static inline uint32_t entry_v(uint64_t e) { return (uint32_t)(e << (32 - ENTRY_V)); }

/* The write barrier (gf_set_write_hook): len bytes at p of table t are
 * about to change. */
static inline void before_write(const gf_t *gf, const gtable *t, const void *p, uint64_t len)
{
    if (__builtin_expect(t->region >= 0, 0))
        gf->hook(gf->hook_ctx, (uint32_t)t->region,
                 (uint64_t)((const uint8_t *)p - (const uint8_t *)t->lines), len);
}

/* ---- fingerprints ---- */

static inline uint64_t get_bits(const uint64_t *w, unsigned pos, unsigned n)
{
    unsigned i = pos / 64, off = pos % 64;
    uint64_t x = w[i] >> off;
    if (off + n > 64)
        x |= w[i + 1] << (64 - off);
    return x & ((1ULL << n) - 1);
}

static inline void set_bits(uint64_t *w, unsigned pos, unsigned n, uint64_t x)
{
    unsigned i = pos / 64, off = pos % 64;
    w[i] |= x << off;
    if (off + n > 64)
        w[i + 1] |= x >> (64 - off);
}

/* Whether stored v matches lookup q: they agree above v's marker. A v
 * whose marker is its top bit has no bits left and matches every q. */
static inline bool v_matches(uint32_t v, uint32_t q)
{
    uint32_t m = v & -v;
    return ((v ^ q) & -(m << 1)) == 0;
}

static inline uint32_t v_new(const gf_t *gf, uint32_t q)
{
    unsigned drop = 33 - gf->W; /* keep W - 1 bits */
    return (q >> drop << drop) | (1U << (drop - 1));
}

/* v in the slot's W bits, and back. */
static inline uint64_t v_field(const gf_t *gf, uint32_t v) { return v >> (32 - gf->W); }
static inline uint32_t field_v(const gf_t *gf, uint64_t f) { return (uint32_t)(f << (32 - gf->W)); }

/* A bucket's position: the product's high word and its fraction. */
typedef struct pos {
    uint64_t j, f;
} pos;

static inline pos pos_of(const gtable *t, bloomery_hash h)
{
    unsigned __int128 P = (unsigned __int128)h.hi * t->nb;
    return (pos){(uint64_t)(P >> 64), (uint64_t)P};
}

static inline pos pos_next(const gf_t *gf, pos p)
{
    return (pos){p.j << gf->e | p.f >> (64 - gf->e), p.f << gf->e};
}

static inline __attribute__((always_inline)) bool line_has_base(const gf_t *gf, const uint64_t *w,
                                                                uint32_t q)
{
    for (unsigned i = 0; i < gf->S; i++) {
        uint64_t f = get_bits(w, i * gf->W, gf->W);
        if (!f)
            return false; /* slots fill in order */
        if (v_matches(field_v(gf, f), q))
            return true;
    }
    return false;
}

/* Every slot at once, in GCC's vector extensions (one copy per
 * instruction set: AVX-512 holds the line in one register, AVX2 in two):
 * each lane takes the two 32-bit words its field spans and shifts the
 * field to the top; empty slots (0) never match. */

/* The line's words at the lanes' indices: one permute in GCC; clang has
 * no variable shuffle (it builds only the fuzz targets). A macro: a
 * function returning a 64-byte vector would trip GCC's ABI warning. */
#if defined(__clang__)
#define pick(line, idx)                                                                            \
    ({                                                                                             \
        v16u r_;                                                                                   \
        for (int i_ = 0; i_ < 16; i_++)                                                            \
            r_[i_] = (line)[(idx)[i_] & 15];                                                       \
        r_;                                                                                        \
    })
#else
#define pick(line, idx) __builtin_shuffle(line, idx)
#endif

static inline __attribute__((always_inline)) bool line_has_vec(const gf_t *gf, const uint64_t *w,
                                                               uint32_t q)
{
    /* Built from the words, not copied through memory: a vector load
     * after eight word stores stalls on store forwarding. */
    v8u64 words = {w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]};
    v16u line = (v16u)words, acc = {0};
    for (unsigned k = 0; k < 2; k++) {
        const v16u *x = gf->lanes[k];
        v16u f = pick(line, x[0]) >> x[2] | (pick(line, x[1]) << x[3] & x[4]);
        v16u v = f << (32 - gf->W);
        v16u m = v & -v;
        v16u t = (v ^ q) & -(m + m);
        /* Top bit: t == 0 and v != 0 (no vector compares: their masks
         * cost more to move than these three operations). */
        acc |= ~t & (t - 1) & (v | -v) & x[5];
    }
    uint64_t r[8];
    memcpy(r, &acc, 64);
    return ((r[0] | r[1] | r[2] | r[3] | r[4] | r[5] | r[6] | r[7]) & 0x8000000080000000ULL) != 0;
}

static inline __attribute__((always_inline)) bool line_has(const gf_t *gf, const uint64_t *w,
                                                           uint32_t q, bool wide)
{
    return wide ? line_has_vec(gf, w, q) : line_has_base(gf, w, q);
}

/* The copy of the lookup code: 0 scalar (baseline x86-64, other
 * architectures), 1 AVX2, 2 AVX-512; -1 until detected. */
static int cpu_level = -1;

int gf_cpu_level(void)
{
    int c = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    c = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
    return c;
}

void gf_set_cpu_level(int level)
{
    int top = gf_cpu_level();
    __atomic_store_n(&cpu_level, level < top ? level : top, __ATOMIC_RELAXED);
}

static inline int cpu(void)
{
    int c = __atomic_load_n(&cpu_level, __ATOMIC_RELAXED);
    if (c < 0) {
        c = gf_cpu_level();
        __atomic_store_n(&cpu_level, c, __ATOMIC_RELAXED);
    }
    return c;
}

/* For each group of 16 slots, line_has_vec's lanes: the words each field
 * starts and ends in, the shifts that bring it down, a mask for the second
 * word (none when the field starts a word: no shift by 32) and which lanes
 * are slots. */
static void lanes_init(gf_t *gf)
{
    for (unsigned k = 0; k < 2; k++) {
        for (unsigned l = 0; l < 16; l++) {
            unsigned i = 16 * k + l, bit = i < gf->S ? i * gf->W : 0;
            unsigned d = bit / 32, sh = bit % 32;
            gf->lanes[k][0][l] = d;
            gf->lanes[k][1][l] = d < 15 ? d + 1 : 15;
            gf->lanes[k][2][l] = sh;
            gf->lanes[k][3][l] = (32 - sh) % 32;
            gf->lanes[k][4][l] = sh ? ~0U : 0;
            gf->lanes[k][5][l] = i < gf->S ? ~0U : 0;
        }
    }
}

/* Slots taken: they fill in order, so a binary search for the first
 * empty one. */
static inline unsigned line_used(const gf_t *gf, const uint64_t *w)
{
    unsigned lo = 0, hi = gf->S; /* slots below lo are taken, from hi on empty */
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (get_bits(w, mid * gf->W, gf->W))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Whether the pool holds a match for bucket j's q; with `mine`, the scan
 * goes on to count j's entries. Entries are only ever added, each before
 * its bucket is marked OVER and within POOL_PROBES of its home, so a scan
 * that far, or up to the first empty entry, sees every one. */
static bool pool_scan(const gtable *t, uint64_t j, uint32_t q, unsigned *mine)
{
    uint64_t mask = t->npool - 1;
    unsigned n = 0;
    bool hit = false;
    for (uint64_t i = pool_home(t, j), k = 0; k < POOL_PROBES && k <= mask;
         i = (i + 1) & mask, k++) {
        uint64_t e = __atomic_load_n(&t->pool[i], __ATOMIC_ACQUIRE);
        if (!e)
            break;
        if (e >> ENTRY_V == j) {
            hit |= v_matches(entry_v(e), q);
            n++;
            if (hit && !mine)
                return true;
        }
    }
    if (mine)
        *mine = n;
    return hit;
}

/* Whether a bucket's words w answer "may exist" for q, pool included. */
static inline __attribute__((always_inline)) bool
bucket_has(const gf_t *gf, const gtable *t, uint64_t j, const uint64_t *w, uint32_t q, bool wide)
{
    uint64_t flags = w[WORDS - 1];
    return line_has(gf, w, q, wide) || (flags & SATURATED) ||
           ((flags & OVER) && pool_scan(t, j, q, NULL));
}

/* ---- lookups ---- */

/* The lookup from position p in table t, read as the filter's: 1 may
 * exist, 0 absent, -1 when t was retired meanwhile (start again). */
static inline __attribute__((always_inline)) int check_at(const gf_t *gf, const gtable *t, pos p,
                                                          bool wide)
{
    const gtable *u = t;
    uint64_t w[WORDS + 1] = {0};
    for (;;) {
        seq_read_line(seq_of(u, p.j), bucket_at(u, p.j), w);
        if (!(w[WORDS - 1] & MOVED))
            break;
        u = __atomic_load_n(&u->next, __ATOMIC_ACQUIRE);
        p = pos_next(gf, p);
    }
    if (bucket_has(gf, u, p.j, w, (uint32_t)(p.f >> 32), wide))
        return 1;
    /* A table retired meanwhile reads as zeros: absent only if the table
     * we started from is still the filter's. */
    return __atomic_load_n(&gf->cur, __ATOMIC_SEQ_CST) == t ? 0 : -1;
}

static inline __attribute__((always_inline)) bool check_core(const gf_t *gf, bloomery_hash h,
                                                             bool wide)
{
    for (;;) {
        const gtable *t = __atomic_load_n(&gf->cur, __ATOMIC_SEQ_CST);
        int r = check_at(gf, t, pos_of(t, h), wide);
        if (r >= 0)
            return r;
    }
}

/* Batches: every position first and its line fetched, then the lookups,
 * so the misses overlap. */
static inline __attribute__((always_inline)) void
check_many_core(const gf_t *gf, const bloomery_hash *h, size_t n, uint8_t *out, bool wide)
{
    enum { AHEAD = 16 };
    pos p[AHEAD];
    for (size_t base = 0; base < n; base += AHEAD) {
        size_t g = n - base < AHEAD ? n - base : AHEAD;
        const gtable *t = __atomic_load_n(&gf->cur, __ATOMIC_SEQ_CST);
        for (size_t i = 0; i < g; i++) {
            p[i] = pos_of(t, h[base + i]);
            __builtin_prefetch(bucket_at(t, p[i].j));
        }
        for (size_t i = 0; i < g; i++) {
            int r = check_at(gf, t, p[i], wide);
            out[base + i] = (uint8_t)(r < 0 ? check_core(gf, h[base + i], wide) : r);
        }
    }
}

#if defined(__x86_64__)
#define AVX2 __attribute__((target("avx2")))
#define AVX512 __attribute__((target("avx512f")))
#else
#define AVX2
#define AVX512
#endif
static bool check_base(const gf_t *gf, bloomery_hash h) { return check_core(gf, h, false); }
AVX2 static bool check_avx2(const gf_t *gf, bloomery_hash h) { return check_core(gf, h, true); }
AVX512 static bool check_avx512(const gf_t *gf, bloomery_hash h) { return check_core(gf, h, true); }
#define CHECK_MANY(name, attr, wide)                                                               \
    attr static void check_many_##name(const gf_t *gf, const bloomery_hash *h, size_t n,           \
                                       uint8_t *out)                                               \
    {                                                                                              \
        check_many_core(gf, h, n, out, wide);                                                      \
    }
CHECK_MANY(base, , false)
CHECK_MANY(avx2, AVX2, true)
CHECK_MANY(avx512, AVX512, true)

bool gf_check_hashed(const gf_t *gf, bloomery_hash h)
{
    int c = cpu();
    return c == 2 ? check_avx512(gf, h) : c ? check_avx2(gf, h) : check_base(gf, h);
}

bool gf_check(const gf_t *gf, const void *item, size_t len)
{
    return gf_check_hashed(gf, bloomery_hash_item(item, len, gf->seed));
}

void gf_check_many_hashed(const gf_t *gf, const bloomery_hash *h, size_t n, uint8_t *out)
{
    int c = cpu();
    if (c == 2)
        check_many_avx512(gf, h, n, out);
    else if (c)
        check_many_avx2(gf, h, n, out);
    else
        check_many_base(gf, h, n, out);
}

/* ---- adds ---- */

static void line_store(uint64_t *dst, const uint64_t *w)
{
    for (unsigned i = 0; i < WORDS; i++) /* release: after the odd sequence */
        __atomic_store_n(&dst[i], w[i], __ATOMIC_RELEASE);
}

/* Takes a free pool entry for v of bucket j; false when the pool counts
 * as full or none is near. */
static bool pool_put(const gf_t *gf, gtable *t, uint64_t j, uint32_t v)
{
    if (__atomic_load_n(&t->pooled, __ATOMIC_RELAXED) >= t->npool / 4 * 3)
        return false;
    uint64_t mask = t->npool - 1, e = j << ENTRY_V | v >> (32 - ENTRY_V);
    uint64_t i = pool_home(t, j);
    for (unsigned k = 0; k < POOL_PROBES && k <= mask;) {
        uint64_t x = 0;
        before_write(gf, t, &t->pool[i], 8);
        if (__atomic_compare_exchange_n(&t->pool[i], &x, e, false, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED)) {
            __atomic_fetch_add(&t->pooled, 1, __ATOMIC_RELAXED);
            return true;
        }
        i = (i + 1) & mask; /* x was taken, by now or before */
        k++;
    }
    return false;
}

/* What an item that finds its bucket and the pool without room does. */
typedef enum room {
    ROOM_GROW,     /* nothing: the caller grows the table and tries again */
    ROOM_SATURATE, /* saturates the bucket, PILE pool entries on */
    ROOM_MOVING,   /* saturates, but takes the pool past PILE first */
} room;

/* Puts v for bucket j (whose lock the caller holds, its words in w) into
 * the bucket or the pool, and stores the bucket. false: no room, nothing
 * changed (ROOM_GROW only). */
static bool put_locked(const gf_t *gf, gtable *t, uint64_t j, uint64_t *w, uint32_t v, room r)
{
    unsigned used = line_used(gf, w);
    if (used < gf->S) {
        set_bits(w, used * gf->W, gf->W, v_field(gf, v));
    } else if (!(w[WORDS - 1] & SATURATED)) {
        unsigned mine = 0;
        if (r == ROOM_SATURATE && (w[WORDS - 1] & OVER))
            pool_scan(t, j, 0, &mine);
        if (mine < PILE && pool_put(gf, t, j, v))
            w[WORDS - 1] |= OVER;
        else if (r != ROOM_GROW)
            w[WORDS - 1] |= SATURATED;
        else
            return false;
    }
    before_write(gf, t, bucket_at(t, j), 64);
    line_store(bucket_at(t, j), w);
    return true;
}

static inline void read_locked(const gtable *t, uint64_t j, uint64_t *w)
{
    const uint64_t *src = bucket_at(t, j);
    for (unsigned i = 0; i < WORDS; i++)
        w[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

/* Adds v to bucket j of the next table t, which no one else writes or
 * reads yet: its parent is locked and unmoved, and both adds and lookups
 * reach it only through the parent's MOVED, stored (release) after this.
 * So no lock: a mover holds one stripe only, its parent's, and stripes
 * shared between filters cannot make two movers wait on each other. */
static void put_moving(const gf_t *gf, gtable *t, uint64_t j, uint32_t v)
{
    uint64_t w[WORDS + 1] = {0};
    read_locked(t, j, w);
    put_locked(gf, t, j, w, v, ROOM_MOVING);
}

static void saturate_moving(const gf_t *gf, gtable *t, uint64_t j)
{
    uint64_t *line = bucket_at(t, j);
    before_write(gf, t, &line[WORDS - 1], 8);
    __atomic_store_n(&line[WORDS - 1],
                     __atomic_load_n(&line[WORDS - 1], __ATOMIC_RELAXED) | SATURATED,
                     __ATOMIC_RELEASE);
}

/* v's place(s) in the next table, from bucket j. */
/* v's place in the next table, from bucket j. A v with fewer than e bits
 * left would match every item in each bucket it may belong to: those
 * buckets saturate, which answers the same without filling them. */
static void move_v(const gf_t *gf, gtable *n, uint64_t j, uint32_t v)
{
    unsigned e = gf->e, L = 31 - (unsigned)__builtin_ctz(v);
    if (L >= e) {
        put_moving(gf, n, j << e | v >> (32 - e), v << e);
        return;
    }
    uint64_t base = j << e | (L ? (uint64_t)(v >> (32 - L)) << (e - L) : 0);
    for (uint64_t k = 0; k < (1ULL << (e - L)); k++)
        saturate_moving(gf, n, base + k);
}

/* Moves bucket j of the current table t into t->next. Under the grow lock. */
static void move_bucket(const gf_t *gf, const gtable *t, uint64_t j)
{
    gtable *n = t->next;
    uint32_t *seq = seq_of(t, j);
    uint32_t next = seq_lock(seq);
    uint64_t w[WORDS + 1] = {0};
    read_locked(t, j, w);
    if (w[WORDS - 1] & MOVED) {
        seq_unlock(seq, next);
        return;
    }
    for (unsigned i = 0; i < gf->S; i++) {
        uint64_t f = get_bits(w, i * gf->W, gf->W);
        if (!f)
            break;
        move_v(gf, n, j, field_v(gf, f));
    }
    if (w[WORDS - 1] & OVER) {
        /* Its entries were added under this bucket's lock, held, and lie
         * within POOL_PROBES of its home (pool_scan). */
        uint64_t mask = t->npool - 1;
        for (uint64_t i = pool_home(t, j), k = 0; k < POOL_PROBES && k <= mask;
             i = (i + 1) & mask, k++) {
            uint64_t e = __atomic_load_n(&t->pool[i], __ATOMIC_ACQUIRE);
            if (!e)
                break;
            if (e >> ENTRY_V == j)
                move_v(gf, n, j, entry_v(e));
        }
    }
    if (w[WORDS - 1] & SATURATED) /* what it answered for, its children answer for */
        for (uint64_t k = 0; k < (1ULL << gf->e); k++)
            saturate_moving(gf, n, j << gf->e | k);
    w[WORDS - 1] |= MOVED;
    before_write(gf, t, &bucket_at(t, j)[WORDS - 1], 8);
    __atomic_store_n(&bucket_at(t, j)[WORDS - 1], w[WORDS - 1], __ATOMIC_RELEASE);
    seq_unlock(seq, next);
}

/* A retired table's pages go back to the system (its mapping stays). */
static void give_back(gf_t *gf, gtable *t)
{
    bloomery_discard_mapped(t->lines, t->bytes);
    if (gf->released)
        gf->released(gf->released_ctx, t->bytes);
}

/* The last bucket has moved: the next table becomes the filter's and the
 * old one's pages go back. Under the grow lock. */
static void finish_move(gf_t *gf, gtable *t)
{
    gtable *n = t->next;
    __atomic_store_n(&gf->limit, (uint64_t)(gf->load * gf->S * (double)n->nb), __ATOMIC_RELAXED);
    __atomic_store_n(&gf->cur, n, __ATOMIC_SEQ_CST);
    /* Readers and writers still in t find zeros and start again from cur,
     * which they read after the line (check_core, add_core). */
    /* A table in a snapshot being read is kept whole until the snapshot
     * removes its hook: giving it back would have the hook save all of it. */
    if (t->mapped && t->region < 0)
        give_back(gf, t);
    else if (t->mapped)
        t->held = true;
    t->retired = gf->retired;
    gf->retired = t;
}

/* Under the grow lock: the current table gets its next one. */
static int start_growth(gf_t *gf, gtable *t)
{
    if (t->next)
        return BLOOMERY_OK;
    if (t->nb > MAX_BUCKETS >> gf->e) /* pool entries hold a bucket in 37 bits */
        return BLOOMERY_ETOOBIG;
    uint64_t nb = t->nb << gf->e;
    /* A refusal holds until the count has grown a little: not a call to
     * the hook on every add. */
    if (__atomic_load_n(&gf->count, __ATOMIC_RELAXED) < gf->retry_at)
        return BLOOMERY_EREFUSED;
    if (gf->may_allocate &&
        !gf->may_allocate(gf->may_allocate_ctx, table_bytes(gf->pool_per_bucket, nb))) {
        gf->retry_at = __atomic_load_n(&gf->count, __ATOMIC_RELAXED) + gf->limit / 64 + 1;
        return BLOOMERY_EREFUSED;
    }
    gtable *n = table_new(gf, nb);
    if (!n) {
        if (gf->may_allocate && gf->released) /* the reservation, undone */
            gf->released(gf->released_ctx, table_bytes(gf->pool_per_bucket, nb));
        return BLOOMERY_ENOMEM;
    }
    __atomic_store_n(&t->next, n, __ATOMIC_RELEASE);
    return BLOOMERY_OK;
}

/* Under the grow lock: moves up to k buckets (all for k == 0). */
static void move_some(gf_t *gf, size_t k)
{
    gtable *t = gf->cur;
    if (!t->next)
        return;
    uint64_t c = t->cursor;
    for (size_t i = 0; c < t->nb && (k == 0 || i < k); i++)
        move_bucket(gf, t, c++);
    __atomic_store_n(&t->cursor, c, __ATOMIC_RELAXED); /* gf_get_state may read it */
    if (c == t->nb)
        finish_move(gf, t);
}

/* After an add: start or carry on a growth, unless another thread is at
 * it (it does the work then). */
static void after_add(gf_t *gf)
{
    if (!gf->e)
        return;
    const gtable *t = __atomic_load_n(&gf->cur, __ATOMIC_ACQUIRE);
    bool moving = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE) != NULL;
    if (!moving && __atomic_load_n(&gf->count, __ATOMIC_RELAXED) <
                       __atomic_load_n(&gf->limit, __ATOMIC_RELAXED))
        return;
    if (pthread_mutex_trylock(&gf->grow))
        return;
    gtable *c = gf->cur;
    if (!c->next && __atomic_load_n(&gf->count, __ATOMIC_RELAXED) >=
                        __atomic_load_n(&gf->limit, __ATOMIC_RELAXED))
        (void)start_growth(gf, c); /* on failure the next add tries again */
    move_some(gf, MOVE_PER_ADD);
    pthread_mutex_unlock(&gf->grow);
}

/* Bucket j of t had no room for an item: make some, by moving the bucket
 * into a table twice the size. If the full bucket is in the new table of a
 * growth under way, that growth finishes first and the add tries again
 * (it then grows only if the bigger table's load calls for it). */
static int make_room(gf_t *gf, const gtable *t, uint64_t j)
{
    pthread_mutex_lock(&gf->grow);
    int rc = BLOOMERY_OK;
    gtable *c = gf->cur;
    if (c->next && t == c->next) {
        move_some(gf, 0);
    } else if (t == c) {
        gf->retry_at = 0; /* this add cannot go on without it */
        rc = start_growth(gf, c);
        if (!rc)
            move_bucket(gf, c, j);
    }
    pthread_mutex_unlock(&gf->grow);
    return rc;
}

static inline __attribute__((always_inline)) int add_core(gf_t *gf, bloomery_hash h, bool wide)
{
    for (;;) {
        gtable *t = __atomic_load_n(&gf->cur, __ATOMIC_SEQ_CST);
        pos p = pos_of(t, h);
        for (;;) {
            /* The line's miss under way before the lock, whose atomic
             * holds back the loads after it. */
            __builtin_prefetch(bucket_at(t, p.j), 1);
            uint32_t *seq = seq_of(t, p.j), next = seq_lock(seq);
            uint64_t w[WORDS + 1] = {0};
            read_locked(t, p.j, w);
            if (w[WORDS - 1] & MOVED) {
                seq_unlock(seq, next);
                t = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE);
                p = pos_next(gf, p);
                continue;
            }
            /* Unmoved under its lock, t stays until we let go, unless it
             * was retired before (its zeros read as unmoved). */
            const gtable *c = __atomic_load_n(&gf->cur, __ATOMIC_SEQ_CST);
            if (t != c && t != __atomic_load_n(&c->next, __ATOMIC_ACQUIRE)) {
                seq_unlock(seq, next);
                break;
            }
            uint32_t q = (uint32_t)(p.f >> 32);
            if (bucket_has(gf, t, p.j, w, q, wide)) {
                seq_unlock(seq, next);
                after_add(gf); /* a growth due still moves on */
                return 0;
            }
            /* A non-scaling filter's adds take their place in the count
             * first, so that racing ones cannot pass the capacity. */
            if (!gf->e && __atomic_fetch_add(&gf->count, 1, __ATOMIC_RELAXED) >= gf->capacity) {
                __atomic_fetch_sub(&gf->count, 1, __ATOMIC_RELAXED);
                seq_unlock(seq, next);
                return BLOOMERY_EFULL;
            }
            /* No room: a scaling filter grows while a growth is under way
             * (the bucket moves), while saturating a bucket would cost the
             * rate more than p/64, or when the table nears its load. Else a
             * bucket full that early holds items piled on one spot (hashes
             * crafted to collide, say), which growth would not split but
             * multiply: it saturates, and a non-scaling filter's always do. */
            bool grow = gf->e && (t != c || __atomic_load_n(&c->next, __ATOMIC_ACQUIRE) ||
                                  t->nb < gf->saturate_from ||
                                  __atomic_load_n(&gf->count, __ATOMIC_RELAXED) >=
                                      __atomic_load_n(&gf->limit, __ATOMIC_RELAXED) / 4 * 3);
            bool ok = put_locked(gf, t, p.j, w, v_new(gf, q), grow ? ROOM_GROW : ROOM_SATURATE);
            seq_unlock(seq, next);
            if (ok) {
                if (gf->e)
                    __atomic_fetch_add(&gf->count, 1, __ATOMIC_RELAXED);
                after_add(gf);
                return 1;
            }
            int rc = make_room(gf, t, p.j);
            if (rc)
                return rc;
            break;
        }
    }
}

static int add_base(gf_t *gf, bloomery_hash h) { return add_core(gf, h, false); }
AVX2 static int add_avx2(gf_t *gf, bloomery_hash h) { return add_core(gf, h, true); }
AVX512 static int add_avx512(gf_t *gf, bloomery_hash h) { return add_core(gf, h, true); }

int gf_add_hashed(gf_t *gf, bloomery_hash h)
{
    int c = cpu();
    return c == 2 ? add_avx512(gf, h) : c ? add_avx2(gf, h) : add_base(gf, h);
}

/* Batches: every line fetched first, then the adds in order. */
static inline __attribute__((always_inline)) size_t add_many_core(gf_t *gf, const bloomery_hash *h,
                                                                  size_t n, int *res, bool wide)
{
    enum { AHEAD = 16 };
    for (size_t base = 0; base < n; base += AHEAD) {
        size_t g = n - base < AHEAD ? n - base : AHEAD;
        const gtable *t = __atomic_load_n(&gf->cur, __ATOMIC_ACQUIRE);
        for (size_t i = 0; i < g; i++)
            __builtin_prefetch(bucket_at(t, pos_of(t, h[base + i]).j), 1);
        for (size_t i = 0; i < g; i++) {
            res[base + i] = add_core(gf, h[base + i], wide);
            if (res[base + i] < 0)
                return base + i + 1;
        }
    }
    return n;
}
#define ADD_MANY(name, attr, wide)                                                                 \
    attr static size_t add_many_##name(gf_t *gf, const bloomery_hash *h, size_t n, int *res)       \
    {                                                                                              \
        return add_many_core(gf, h, n, res, wide);                                                 \
    }
ADD_MANY(base, , false)
ADD_MANY(avx2, AVX2, true)
ADD_MANY(avx512, AVX512, true)

size_t gf_add_many_hashed(gf_t *gf, const bloomery_hash *h, size_t n, int *res)
{
    int c = cpu();
    return c == 2 ? add_many_avx512(gf, h, n, res)
           : c    ? add_many_avx2(gf, h, n, res)
                  : add_many_base(gf, h, n, res);
}

int gf_add(gf_t *gf, const void *item, size_t len)
{
    return gf_add_hashed(gf, bloomery_hash_item(item, len, gf->seed));
}

/* ---- life ---- */

/* A filter with its first table of nb buckets, zeroed. */
static int filter_new(gf_t **out, uint64_t capacity, double error_rate, uint32_t expansion,
                      uint64_t seed, const uint64_t *salt, uint64_t nb)
{
    *out = NULL;
    if (expansion && (expansion < 2 || expansion > 32768 || (expansion & (expansion - 1))))
        return BLOOMERY_EINVAL;
    shape sh;
    uint64_t min_nb;
    int rc = plan_buckets(capacity, error_rate, &sh, &min_nb);
    if (rc)
        return rc;
    if (!nb)
        nb = min_nb;
    /* A table grown from this capacity: min_nb times a power of the
     * expansion. */
    uint64_t times = nb / min_nb;
    unsigned e = expansion ? (unsigned)__builtin_ctz(expansion) : 0;
    if (nb % min_nb || times == 0 || (times & (times - 1)) ||
        (e ? (unsigned)__builtin_ctzll(times) % e : times != 1))
        return BLOOMERY_EINVAL;
    gf_t *gf = aligned_alloc(64, (sizeof *gf + 63) / 64 * 64);
    if (!gf)
        return BLOOMERY_ENOMEM;
    memset(gf, 0, sizeof *gf);
    gf->W = sh.W;
    gf->S = sh.S;
    gf->e = e;
    gf->load = sh.load;
    gf->pool_per_bucket = sh.pool_per_bucket;
    gf->saturate_from = (uint64_t)ceil(64 / error_rate);
    gf->nb0 = min_nb;
    gf->capacity = capacity;
    gf->seed = seed;
    /* From the seed: a filter built by the same adds (a replica's) is the
     * same bytes. */
    gf->salt = salt ? *salt : bk_mix64(seed ^ 0x6a09e667f3bcc909ULL);
    gf->error_rate = error_rate;
    gf->expansion = expansion;
    lanes_init(gf);
    pthread_mutex_init(&gf->grow, NULL);
    gf->cur = table_new(gf, nb);
    if (!gf->cur) {
        pthread_mutex_destroy(&gf->grow);
        free(gf);
        return BLOOMERY_ENOMEM;
    }
    gf->limit = (uint64_t)(gf->load * gf->S * (double)nb);
    *out = gf;
    return BLOOMERY_OK;
}

uint32_t gf_round_expansion(uint32_t expansion)
{
    if (!expansion)
        return 0;
    uint32_t e = 2;
    while (e < expansion && e < (1U << 31))
        e <<= 1;
    return e;
}

int gf_create(gf_t **out, uint64_t capacity, double error_rate, uint32_t expansion, uint64_t seed)
{
    return filter_new(out, capacity, error_rate, expansion, seed, NULL, 0);
}

void gf_free(gf_t *gf)
{
    if (!gf)
        return;
    if (gf->cur->next)
        table_free(gf->cur->next);
    table_free(gf->cur);
    while (gf->retired) {
        gtable *t = gf->retired;
        gf->retired = t->retired;
        table_free(t);
    }
    pthread_mutex_destroy(&gf->grow);
    free(gf);
}

uint64_t gf_bytes_for(uint64_t capacity, double error_rate)
{
    shape sh;
    uint64_t nb;
    return plan_buckets(capacity, error_rate, &sh, &nb) ? 0 : table_bytes(sh.pool_per_bucket, nb);
}

void gf_set_may_allocate(gf_t *gf, bool (*may_allocate)(void *ctx, uint64_t bytes), void *ctx)
{
    gf->may_allocate = may_allocate;
    gf->may_allocate_ctx = ctx;
}

void gf_settle(gf_t *gf)
{
    pthread_mutex_lock(&gf->grow);
    move_some(gf, 0);
    pthread_mutex_unlock(&gf->grow);
}

uint64_t gf_count(const gf_t *gf) { return __atomic_load_n(&gf->count, __ATOMIC_RELAXED); }
void gf_set_count(gf_t *gf, uint64_t count)
{
    __atomic_store_n(&gf->count, count, __ATOMIC_RELAXED);
}

uint64_t gf_capacity(const gf_t *gf)
{
    if (!gf->e)
        return gf->capacity;
    const gtable *t = __atomic_load_n(&gf->cur, __ATOMIC_ACQUIRE);
    const gtable *n = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE);
    uint64_t times = (n ? n : t)->nb / gf->nb0;
    return gf->capacity > UINT64_MAX / times ? UINT64_MAX : gf->capacity * times;
}

uint64_t gf_grows_at(const gf_t *gf)
{
    return gf->e ? __atomic_load_n(&gf->limit, __ATOMIC_RELAXED) : UINT64_MAX;
}

/* What a fingerprint with its marker at bit b matches: 2^-(31 - b) of
 * lookups (b = 31: all). */
static double v_rate(uint32_t v) { return ldexp(1, __builtin_ctz(v) - 31); }

/* The rate for an absent item: each stored fingerprint matches its share
 * of its bucket's lookups, a saturated bucket all of them, and a pool
 * entry its share of its bucket's (a bucket's lookups are 1/nb of all).
 * Reads the current table, whose lines keep what moved out of them (an
 * item's share is the same in the next table: half the lookups, one bit
 * less), in sampled runs of buckets and of pool entries (estimate.h). */
static double estimate_table(const gf_t *gf, const gtable *t)
{
    uint64_t w[WORDS + 1] = {0};
    uint64_t n = t->nb, step = estimate_step(n), read = 0;
    double sum = 0;
    for (uint64_t run = 0; run < n; run += step)
        for (uint64_t b = run; b < run + ESTIMATE_RUN && b < n; b++, read++) {
            seq_read_line(seq_of(t, b), bucket_at(t, b), w);
            if (w[WORDS - 1] & SATURATED) {
                sum += 1;
                continue;
            }
            for (unsigned i = 0, used = line_used(gf, w); i < used; i++)
                sum += v_rate(field_v(gf, get_bits(w, i * gf->W, gf->W)));
        }
    double pooled = 0;
    uint64_t pstep = estimate_step(t->npool), pread = 0;
    for (uint64_t run = 0; run < t->npool; run += pstep)
        for (uint64_t i = run; i < run + ESTIMATE_RUN && i < t->npool; i++, pread++) {
            uint64_t e = __atomic_load_n(&t->pool[i], __ATOMIC_RELAXED);
            if (e)
                pooled += v_rate(entry_v(e));
        }
    double r = sum / (double)read + pooled * (double)t->npool / (double)pread / (double)n;
    return r < 1 ? r : 1;
}

double gf_fpr_estimate(const gf_t *gf)
{
    for (;;) {
        const gtable *t = __atomic_load_n(&gf->cur, __ATOMIC_SEQ_CST);
        double r = estimate_table(gf, t);
        if (__atomic_load_n(&gf->cur, __ATOMIC_SEQ_CST) == t) /* else it read zeros, maybe */
            return r;
    }
}

uint64_t gf_bytes(const gf_t *gf)
{
    const gtable *t = __atomic_load_n(&gf->cur, __ATOMIC_ACQUIRE);
    const gtable *n = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE);
    return t->bytes + (n ? n->bytes : 0);
}

double gf_error_rate(const gf_t *gf) { return gf->error_rate; }
uint32_t gf_expansion(const gf_t *gf) { return gf->expansion; }
uint64_t gf_seed(const gf_t *gf) { return gf->seed; }
unsigned gf_fingerprint_bits(const gf_t *gf) { return gf->W; }

/* ---- serialization ---- */

void gf_get_state(const gf_t *gf, gf_state *st)
{
    const gtable *t = __atomic_load_n(&gf->cur, __ATOMIC_ACQUIRE);
    const gtable *n = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE);
    *st = (gf_state){.capacity = gf->capacity,
                     .error_rate = gf->error_rate,
                     .expansion = gf->expansion,
                     .seed = gf->seed,
                     .salt = gf->salt,
                     .count = gf_count(gf),
                     .ntables = n ? 2 : 1,
                     .buckets = {t->nb, n ? n->nb : 0},
                     .cursor = n ? __atomic_load_n(&t->cursor, __ATOMIC_RELAXED) : 0};
}

static gtable *table_at(const gf_t *gf, unsigned i)
{
    return i == 0 ? gf->cur : i == 1 ? gf->cur->next : NULL;
}

const uint8_t *gf_table_data(const gf_t *gf, unsigned i, uint64_t *bytes)
{
    return gf_table_data_mut((gf_t *)gf, i, bytes);
}

uint8_t *gf_table_data_mut(gf_t *gf, unsigned i, uint64_t *bytes)
{
    gtable *t = table_at(gf, i);
    *bytes = t ? t->bytes : 0;
    return t ? (uint8_t *)t->lines : NULL;
}

uint64_t gf_table_bytes_for(const gf_state *st, unsigned i)
{
    shape sh;
    uint64_t nb;
    if (i >= st->ntables || plan_buckets(st->capacity, st->error_rate, &sh, &nb) ||
        st->buckets[i] == 0 || st->buckets[i] > MAX_BUCKETS)
        return 0;
    return table_bytes(sh.pool_per_bucket, st->buckets[i]);
}

int gf_create_state(gf_t **out, const gf_state *st)
{
    *out = NULL;
    uint64_t nb = st->buckets[0];
    if (st->ntables < 1 || st->ntables > 2 || nb == 0 || nb > MAX_BUCKETS)
        return BLOOMERY_EINVAL;
    unsigned e = st->expansion ? (unsigned)__builtin_ctz(st->expansion) : 0;
    if (st->ntables == 2 &&
        (!e || nb > MAX_BUCKETS >> e || st->buckets[1] != nb << e || st->cursor >= nb))
        return BLOOMERY_EINVAL;
    gf_t *gf;
    int rc = filter_new(&gf, st->capacity, st->error_rate, st->expansion, st->seed, &st->salt, nb);
    if (rc)
        return rc;
    if (st->ntables == 2) {
        gf->cur->next = table_new(gf, st->buckets[1]);
        if (!gf->cur->next) {
            gf_free(gf);
            return BLOOMERY_ENOMEM;
        }
        gf->cur->cursor = st->cursor;
    }
    gf->count = st->count;
    *out = gf;
    return BLOOMERY_OK;
}

/* A loaded table: pool entries name one of its buckets and hold a
 * fingerprint with its marker; only a table with a next one has moved
 * buckets, and then every one before the cursor. Counts the pool. */
static int validate_table(const gf_t *gf, gtable *t, bool first)
{
    bool moving = first && t->next;
    for (uint64_t j = 0; j < t->nb; j++) {
        bool moved = bucket_at(t, j)[WORDS - 1] & MOVED;
        if (moved ? !moving : moving && j < t->cursor)
            return BLOOMERY_ECORRUPT;
    }
    /* Pool entries as inserts leave them: a bucket of the table, a marker
     * no lower than a new fingerprint's, within POOL_PROBES of the
     * bucket's home with no empty entry between (else lookups, which stop
     * at the first empty entry, would miss it). Scanned from an empty
     * entry, so a run wrapping past the end counts as one; run: the taken
     * entries ending at i. */
    uint64_t mask = t->npool - 1, pooled = 0, z = 0;
    while (z <= mask && t->pool[z])
        z++;
    uint64_t run = z > mask ? t->npool : 0; /* full: no gap anywhere */
    for (uint64_t k = 1; k <= t->npool; k++) {
        uint64_t i = (z + k) & mask, e = t->pool[i];
        if (!e) {
            run = 0;
            continue;
        }
        run++;
        uint64_t j = e >> ENTRY_V, home = j < t->nb ? pool_home(t, j) : 0;
        uint64_t d = (i - home) & mask;
        if (j >= t->nb || !entry_v(e) || (unsigned)__builtin_ctz(entry_v(e)) < 32 - gf->W ||
            d >= POOL_PROBES || d >= run)
            return BLOOMERY_ECORRUPT;
        pooled++;
    }
    t->pooled = pooled;
    return BLOOMERY_OK;
}

int gf_validate(gf_t *gf)
{
    int rc = validate_table(gf, gf->cur, true);
    if (!rc && gf->cur->next)
        rc = validate_table(gf, gf->cur->next, false);
    return rc;
}

void gf_set_write_hook(gf_t *gf, gf_write_hook hook, void *ctx, uint32_t region)
{
    gf->hook = hook;
    gf->hook_ctx = ctx;
    gtable *t = gf->cur, *n = t->next;
    t->region = hook ? (int64_t)region : -1;
    if (n)
        n->region = hook ? (int64_t)region + 1 : -1;
    for (gtable *r = gf->retired; r; r = r->retired) {
        r->region = -1;
        if (r->held && !hook) {
            give_back(gf, r);
            r->held = false;
        }
    }
}

void gf_set_released(gf_t *gf, void (*released)(void *ctx, uint64_t bytes), void *ctx)
{
    gf->released = released;
    gf->released_ctx = ctx;
}

/* Classic Bloom filter, bit for bit as RedisBloom builds it, and the header of
 * RedisBloom's BF.SCANDUMP.
 *
 * Layout. RedisBloom keeps a link's bits in a byte array, bit x in byte x>>3
 * under mask 1 << (x & 7). We keep the same array as 64-bit words so that
 * inserts can use one atomic OR per probe: on a little-endian host word
 * x>>6, bit x&63 is exactly that byte and mask, so cbf_data() is the byte
 * array RedisBloom dumps and a chunk from BF.SCANDUMP can be copied straight
 * in. A big-endian host would need byte-wise atomics; we refuse to build there
 * rather than silently produce foreign dumps.
 *
 *     byte:   0        1            7        8
 *           [b7..b0][b15..b8] ... [b63..b56][b71..b64] ...
 *     word:  \_____________ word 0 ________/\__ word 1 ...
 *
 * Hashing. a = MurmurHash64A(item, 0xc6a4a7935bd1e995), b = MurmurHash64A(
 * item, a); probe i is (a + i*b) mod m, the sum taken modulo 2^64 first
 * (Kirsch-Mitzenmacher double hashing). m is the bit count, or 2^n2 for the
 * power-of-two filters old RedisBloom versions made. We compute each probe
 * with its own division, as the formula reads. Stepping from one probe to the
 * next (add b mod m, fold, correct for the 2^64 wrap) needs two divisions per
 * item instead of k, but it chains every probe on the previous one; on a
 * current core with a fast divider the independent divisions overlap and were
 * faster (21 against 37 ns per lookup in a 1 MiB filter, Zen 5), and a
 * precomputed-reciprocal modulo (Lemire's fastmod) was no faster either.
 *
 * Memory. An insert must touch all k words, and each atomic OR is a full
 * barrier on x86, so k cache misses would be taken one after the other. Once
 * the array is too big for the caches we first compute all positions and
 * prefetch them for writing, so the misses overlap. Lookups need no help:
 * their loads are independent and the core already overlaps them.
 *
 * Sizing. As bloom_init with FORCE64|NOROUND: bits per entry -ln p / ln^2 2,
 * bits = floor(capacity * bpe) rounded up to a multiple of 64, k = ceil(ln 2 *
 * bpe). The constants and the order of the floating-point operations are
 * RedisBloom's (see sizing.c); a different rounding of bpe changes k or the bit
 * count for some p and the dump would no longer match.
 *
 * Concurrency. Adds set bits with relaxed atomic ORs (reading first, so a
 * present item dirties no cache line) and lookups read with relaxed loads:
 * a bit once set stays set, so no ordering beyond atomicity is needed, and a
 * completed add is seen by every later check. "New" from cbf_add means some
 * bit flipped, which two racing adds of one item can both observe;
 * cbf_check_and_add serializes adds of equal hashes on a striped spinlock
 * so exactly one of them is told the item was new. The lock table is private
 * to this file: the scalable chain takes its own stripes around calls into
 * us, and a shared non-reentrant table could deadlock on that nesting.
 *
 * Header codec. BF.SCANDUMP's first chunk is RedisBloom's packed C struct,
 * little-endian:
 *
 *     u64 total items | u32 nfilters | u32 options | u32 growth    (20 bytes)
 *     per link: u64 bytes | u64 bits | u64 items | f64 error | f64 bpe |
 *               u32 hashes | u64 capacity | u8 n2                  (53 bytes)
 *
 * The decoder accepts what RedisBloom's BF.LOADCHUNK accepts and is stricter
 * where RedisBloom would load something it cannot use or that overflows:
 * NaN error rates, zero-sized links, 32-bit-hash (non-FORCE64) chains,
 * totals that wrap, and bit arrays beyond the caller's memory limit.
 */
#include "bloomery/classic.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "bloomery/bloomery.h"
#include "bloomery/murmur.h"
#include "bloomery/sizing.h"
#include "estimate.h"
#include "mem.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "classic.c aliases RedisBloom's byte array with 64-bit words: little-endian hosts only"
#endif

_Static_assert(sizeof(size_t) >= sizeof(uint64_t), "64-bit platforms only, as RedisBloom");

/* RedisBloom's truncated ln 2, which decides k when a loaded bpe is checked;
 * M_LN2 would give a different ceiling for some bpe. */
#define RB_LN2 0.693147180559945
#define RB_HASH_SEED 0xc6a4a7935bd1e995ULL

struct cbf {
    uint64_t *words;
    uint64_t mod; /* probe modulus: bits, or 2^n2 for a legacy filter */
    uint64_t bits;
    uint64_t bytes;
    uint64_t alloc; /* bytes allocated (bytes rounded up to whole words) */
    uint64_t capacity;
    double error_rate;
    double bpe;
    unsigned hashes;
    uint8_t n2;
    uint64_t count; /* atomic */
};

/* ---- striped lock for cbf_check_and_add ---- */

#define STRIPES 256

/* One lock per cache line so that unrelated items do not false-share. */
static struct {
    _Alignas(64) unsigned locked;
} stripes[STRIPES];

static unsigned *stripe_for(cbf_hash h)
{
    /* b is a hash seeded with a, so its top bits are as good as any. */
    return &stripes[h.b >> 56 & (STRIPES - 1)].locked;
}

static void stripe_lock(unsigned *l)
{
    for (;;) {
        if (!__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
            return;
        /* Spin on a plain load so waiters share the line instead of bouncing
         * it; yield eventually in case the holder was preempted. */
        for (unsigned spins = 0; __atomic_load_n(l, __ATOMIC_RELAXED); spins++) {
            if (spins >= 1000) {
                sched_yield();
                spins = 0;
            }
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    }
}

static void stripe_unlock(unsigned *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

/* ---- hashing and probing ---- */

cbf_hash cbf_hash_item(const void *item, size_t len)
{
    cbf_hash h;
    h.a = bloomery_murmur64a(item, len, RB_HASH_SEED);
    h.b = bloomery_murmur64a(item, len, h.a);
    return h;
}

/* Probe i of an item: wrap-around sum first, then the modulus. */
static inline uint64_t probe_at(const cbf_t *f, cbf_hash h, uint64_t i)
{
    return (h.a + i * h.b) % f->mod;
}

bool cbf_check_hashed(const cbf_t *f, cbf_hash h)
{
    for (uint64_t i = 0; i < f->hashes; i++) {
        uint64_t x = probe_at(f, h, i);
        if (!(__atomic_load_n(&f->words[x >> 6], __ATOMIC_RELAXED) >> (x & 63) & 1))
            return false;
    }
    return true;
}

/* Sets bit x; true if it was clear. The plain load first keeps the line
 * shared (and skips the locked instruction) when the bit is already set,
 * which it mostly is for repeated items. */
static inline bool set_bit(cbf_t *f, uint64_t x)
{
    uint64_t *w = &f->words[x >> 6];
    uint64_t mask = (uint64_t)1 << (x & 63);
    return !(__atomic_load_n(w, __ATOMIC_RELAXED) & mask) &&
           !(__atomic_fetch_or(w, mask, __ATOMIC_RELAXED) & mask);
}

/* Below this the array lives in L2/L3 and the extra pass costs more than the
 * overlap saves (+3 ns per add at 1 MiB, -28 ns at 64 MiB, Zen 5). */
#define PREFETCH_MIN_BYTES ((uint64_t)4 << 20)
#define PREFETCH_BATCH 16

bool cbf_add_hashed(cbf_t *f, cbf_hash h)
{
    bool flipped = false;
    if (f->bytes < PREFETCH_MIN_BYTES) {
        for (uint64_t i = 0; i < f->hashes; i++)
            flipped |= set_bit(f, probe_at(f, h, i));
    } else {
        uint64_t pos[PREFETCH_BATCH];
        for (uint64_t i = 0; i < f->hashes; i += PREFETCH_BATCH) {
            uint64_t n = f->hashes - i < PREFETCH_BATCH ? f->hashes - i : PREFETCH_BATCH;
            for (uint64_t j = 0; j < n; j++) {
                pos[j] = probe_at(f, h, i + j);
                __builtin_prefetch(&f->words[pos[j] >> 6], 1);
            }
            for (uint64_t j = 0; j < n; j++)
                flipped |= set_bit(f, pos[j]);
        }
    }
    if (flipped)
        __atomic_fetch_add(&f->count, 1, __ATOMIC_RELAXED);
    return flipped;
}

bool cbf_check(const cbf_t *f, const void *item, size_t len)
{
    return cbf_check_hashed(f, cbf_hash_item(item, len));
}

bool cbf_add(cbf_t *f, const void *item, size_t len)
{
    return cbf_add_hashed(f, cbf_hash_item(item, len));
}

bool cbf_check_and_add(cbf_t *f, const void *item, size_t len)
{
    cbf_hash h = cbf_hash_item(item, len);
    unsigned *l = stripe_for(h);
    stripe_lock(l);
    bool added = cbf_add_hashed(f, h);
    stripe_unlock(l);
    return added;
}

/* ---- creation ---- */

/* A shape RedisBloom's bloom_validate_integrity would pass, minus what we
 * cannot use. Returns 0, BLOOMERY_EINVAL or BLOOMERY_ETOOBIG. */
static int shape_check(const cbf_shape *s)
{
    if (s->bytes == 0 || s->capacity == 0)
        return BLOOMERY_EINVAL;
    if (s->bytes > CBF_MAX_BYTES)
        return BLOOMERY_ETOOBIG;
    if (s->bits != s->bytes * 8)
        return BLOOMERY_EINVAL;
    if (!(s->error_rate > 0 && s->error_rate < 1)) /* also NaN */
        return BLOOMERY_EINVAL;
    if (!(s->bpe > 0 && isfinite(s->bpe)))
        return BLOOMERY_EINVAL;
    double k = ceil(RB_LN2 * s->bpe);
    if (k > CBF_MAX_HASHES || s->hashes != (unsigned)k)
        return BLOOMERY_EINVAL;
    if (s->n2 > 63 || (s->n2 > 0 && s->bits < (uint64_t)1 << s->n2))
        return BLOOMERY_EINVAL;
    return 0;
}

int cbf_create_shape(cbf_t **out, const cbf_shape *shape)
{
    if (!out)
        return BLOOMERY_EINVAL;
    *out = NULL;
    if (!shape)
        return BLOOMERY_EINVAL;
    int rc = shape_check(shape);
    if (rc)
        return rc;

    cbf_t *f = calloc(1, sizeof *f);
    if (!f)
        return BLOOMERY_ENOMEM;
    f->bits = shape->bits;
    f->bytes = shape->bytes;
    f->capacity = shape->capacity;
    f->error_rate = shape->error_rate;
    f->bpe = shape->bpe;
    f->hashes = shape->hashes;
    f->n2 = shape->n2;
    f->mod = shape->n2 ? (uint64_t)1 << shape->n2 : shape->bits;
    /* A dumped link may have any byte count; whole words keep every probe's
     * word inside the allocation. */
    f->alloc = (shape->bytes + 7) / 8 * 8;
    f->words = bloomery_alloc_zeroed((size_t)f->alloc);
    if (!f->words) {
        free(f);
        return BLOOMERY_ENOMEM;
    }
    *out = f;
    return BLOOMERY_OK;
}

/* RedisBloom's bloom_init(capacity, p, FORCE64|NOROUND) as a shape. */
static int shape_for(uint64_t capacity, double p, cbf_shape *s)
{
    if (capacity < 1 || !(p > 0 && p < 1))
        return BLOOMERY_EINVAL;
    uint64_t bits = bloomery_classic_bits(capacity, p);
    if (bits == 0 || bits / 8 > CBF_MAX_BYTES)
        return BLOOMERY_ETOOBIG;
    *s = (cbf_shape){
        .capacity = capacity,
        .error_rate = p,
        .bpe = bloomery_classic_bpe(p),
        .hashes = bloomery_classic_hashes(p),
        .bits = bits,
        .bytes = bits / 8,
        .n2 = 0,
    };
    return 0;
}

int cbf_create(cbf_t **out, uint64_t capacity, double error_rate)
{
    if (!out)
        return BLOOMERY_EINVAL;
    *out = NULL;
    cbf_shape s;
    int rc = shape_for(capacity, error_rate, &s);
    return rc ? rc : cbf_create_shape(out, &s);
}

uint64_t cbf_bytes_for(uint64_t capacity, double error_rate)
{
    cbf_shape s;
    return shape_for(capacity, error_rate, &s) ? 0 : s.bytes;
}

void cbf_shape_of(const cbf_t *f, cbf_shape *s)
{
    *s = (cbf_shape){
        .capacity = f->capacity,
        .error_rate = f->error_rate,
        .bpe = f->bpe,
        .hashes = f->hashes,
        .bits = f->bits,
        .bytes = f->bytes,
        .n2 = f->n2,
    };
}

void cbf_free(cbf_t *f)
{
    if (!f)
        return;
    bloomery_free_zeroed(f->words, (size_t)f->alloc);
    free(f);
}

/* ---- accessors and whole-filter operations ---- */

uint64_t cbf_bits(const cbf_t *f) { return f->bits; }
uint64_t cbf_bytes(const cbf_t *f) { return f->bytes; }
unsigned cbf_hashes(const cbf_t *f) { return f->hashes; }
uint64_t cbf_capacity(const cbf_t *f) { return f->capacity; }
double cbf_error_rate(const cbf_t *f) { return f->error_rate; }

uint64_t cbf_count(const cbf_t *f) { return __atomic_load_n(&f->count, __ATOMIC_RELAXED); }

void cbf_set_count(cbf_t *f, uint64_t count)
{
    __atomic_store_n(&f->count, count, __ATOMIC_RELAXED);
}

double cbf_fpr_estimate(const cbf_t *f)
{
    /* Only bits below the modulus can be probed; count those alone. */
    uint64_t full = f->mod / 64, set = 0, step = estimate_step(full), read = 0;
    for (uint64_t run = 0; run < full; run += step)
        for (uint64_t i = run; i < run + ESTIMATE_RUN && i < full; i++, read++)
            set += (uint64_t)__builtin_popcountll(__atomic_load_n(&f->words[i], __ATOMIC_RELAXED));
    if (read < full) /* a sample of the words below the modulus */
        return pow((double)set / (double)(read * 64), (double)f->hashes);
    if (f->mod % 64) {
        uint64_t tail = __atomic_load_n(&f->words[full], __ATOMIC_RELAXED);
        set += (uint64_t)__builtin_popcountll(tail & (((uint64_t)1 << (f->mod % 64)) - 1));
    }
    return pow((double)set / (double)f->mod, (double)f->hashes);
}

int cbf_merge(cbf_t *dst, const cbf_t *src)
{
    if (!dst || !src)
        return BLOOMERY_EINVAL;
    if (dst->bits != src->bits || dst->bytes != src->bytes || dst->hashes != src->hashes ||
        dst->n2 != src->n2)
        return BLOOMERY_EINVAL;
    if (dst == src)
        return BLOOMERY_OK;
    uint64_t n = dst->alloc / 8;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t w = __atomic_load_n(&src->words[i], __ATOMIC_RELAXED);
        if (w)
            __atomic_fetch_or(&dst->words[i], w, __ATOMIC_RELAXED);
    }
    /* The sum over-counts items the two filters share; as a link's fill level
     * it errs towards growing early, never towards overfilling. */
    uint64_t a = cbf_count(dst), b = cbf_count(src);
    cbf_set_count(dst, a > UINT64_MAX - b ? UINT64_MAX : a + b);
    return BLOOMERY_OK;
}

void cbf_clear(cbf_t *f)
{
    uint64_t n = f->alloc / 8;
    for (uint64_t i = 0; i < n; i++)
        __atomic_store_n(&f->words[i], 0, __ATOMIC_RELAXED);
    cbf_set_count(f, 0);
}

const uint8_t *cbf_data(const cbf_t *f) { return (const uint8_t *)f->words; }

uint8_t *cbf_data_mut(cbf_t *f) { return (uint8_t *)f->words; }

/* ---- RedisBloom SCANDUMP header ---- */

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_f64(uint8_t *p, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    put_u64(p, v);
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static double get_f64(const uint8_t *p)
{
    uint64_t v = get_u64(p);
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}

size_t cbf_rb_header_size(uint32_t nfilters)
{
    return CBF_RB_HEADER_FIXED + (size_t)nfilters * CBF_RB_HEADER_LINK;
}

void cbf_rb_header_encode(const cbf_rb_header *h, uint8_t *buf)
{
    put_u64(buf, h->total_items);
    put_u32(buf + 8, h->nfilters);
    put_u32(buf + 12, h->options);
    put_u32(buf + 16, h->growth);
    uint8_t *p = buf + CBF_RB_HEADER_FIXED;
    for (uint32_t i = 0; i < h->nfilters; i++, p += CBF_RB_HEADER_LINK) {
        const cbf_shape *s = &h->links[i].shape;
        put_u64(p, s->bytes);
        put_u64(p + 8, s->bits);
        put_u64(p + 16, h->links[i].items);
        put_f64(p + 24, s->error_rate);
        put_f64(p + 32, s->bpe);
        put_u32(p + 40, s->hashes);
        put_u64(p + 44, s->capacity);
        p[52] = s->n2;
    }
}

#define RB_KNOWN_OPTIONS                                                                           \
    (CBF_RB_OPT_NOROUND | CBF_RB_OPT_ENTS_IS_BITS | CBF_RB_OPT_FORCE64 | CBF_RB_OPT_NO_SCALING)

int cbf_rb_header_decode(const uint8_t *buf, size_t len, uint64_t max_bytes, cbf_rb_header *h)
{
    if (!h)
        return BLOOMERY_EINVAL;
    memset(h, 0, sizeof *h);
    if (!buf || len < CBF_RB_HEADER_FIXED)
        return BLOOMERY_ETRUNC;

    uint64_t total = get_u64(buf);
    uint32_t nfilters = get_u32(buf + 8);
    uint32_t options = get_u32(buf + 12);
    uint32_t growth = get_u32(buf + 16);
    if (nfilters == 0)
        return BLOOMERY_ECORRUPT;
    /* The length is the only framing, so it must match exactly; checking it
     * before allocating also bounds the allocation by the input size. */
    uint64_t need = CBF_RB_HEADER_FIXED + (uint64_t)nfilters * CBF_RB_HEADER_LINK;
    if (len < need)
        return BLOOMERY_ETRUNC;
    if (len > need)
        return BLOOMERY_ECORRUPT;
    /* Without FORCE64 the links hash with 32-bit MurmurHash2, which we do not
     * implement; unknown bits mean a format we do not know. */
    if ((options & ~(uint32_t)RB_KNOWN_OPTIONS) || !(options & CBF_RB_OPT_FORCE64))
        return BLOOMERY_ECORRUPT;
    /* RedisBloom turns EXPANSION 0 into NONSCALING, so a scaling chain with
     * growth 0 was never written by it and could not grow. */
    if (growth == 0 && !(options & CBF_RB_OPT_NO_SCALING))
        return BLOOMERY_ECORRUPT;

    cbf_rb_link *links = calloc(nfilters, sizeof *links);
    if (!links)
        return BLOOMERY_ENOMEM;
    uint64_t items_sum = 0, bytes_sum = 0;
    int rc = BLOOMERY_OK;
    const uint8_t *p = buf + CBF_RB_HEADER_FIXED;
    for (uint32_t i = 0; i < nfilters; i++, p += CBF_RB_HEADER_LINK) {
        cbf_shape *s = &links[i].shape;
        s->bytes = get_u64(p);
        s->bits = get_u64(p + 8);
        links[i].items = get_u64(p + 16);
        s->error_rate = get_f64(p + 24);
        s->bpe = get_f64(p + 32);
        s->hashes = get_u32(p + 40);
        s->capacity = get_u64(p + 44);
        s->n2 = p[52];

        int sc = shape_check(s);
        if (sc) {
            rc = sc == BLOOMERY_ETOOBIG ? BLOOMERY_ETOOBIG : BLOOMERY_ECORRUPT;
            break;
        }
        if (links[i].items > UINT64_MAX - items_sum) {
            rc = BLOOMERY_ECORRUPT;
            break;
        }
        items_sum += links[i].items;
        /* bytes_sum <= max_bytes holds throughout, so this cannot wrap. */
        if (s->bytes > max_bytes - bytes_sum) {
            rc = BLOOMERY_ETOOBIG;
            break;
        }
        bytes_sum += s->bytes;
    }
    if (rc == BLOOMERY_OK && items_sum != total)
        rc = BLOOMERY_ECORRUPT;
    if (rc != BLOOMERY_OK) {
        free(links);
        return rc;
    }
    h->total_items = total;
    h->nfilters = nfilters;
    h->options = options;
    h->growth = growth;
    h->links = links;
    return BLOOMERY_OK;
}

void cbf_rb_header_release(cbf_rb_header *h)
{
    if (!h)
        return;
    free(h->links);
    h->links = NULL;
    h->nfilters = 0;
}

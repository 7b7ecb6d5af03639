/* Cuckoo filter with RedisBloom's semantics (contract in cuckoo.h).
 *
 * A sub-filter's table is nbuckets * b slots of f bits, packed:
 *
 *   bucket 0                bucket 1
 *   +-------+-------+-----+-------+-------+-----+
 *   | slot0 | slot1 | ... | slot0 | slot1 | ... |   slot s of bucket j at
 *   +-------+-------+-----+-------+-------+-----+   bit (j * b + s) * f
 *
 * A slot is read with one unaligned little-endian 64-bit load: f <= 32 and a
 * slot starts at most 7 bits into its first byte, so it always fits. Tables
 * are allocated 8 bytes longer than their data so the load at the last slot
 * stays inside the allocation; those bytes are never serialized. With f = 8
 * every slot is a byte and the table is exactly RedisBloom's.
 *
 * Everything that decides where a fingerprint goes follows RedisBloom
 * (src/cuckoo.c) so that the server's replies, item counts and sub-filter
 * counts match it command for command: free slots newest sub-filter first,
 * the kick walk (victim slot 0, 1, ... of successive buckets) and its exact
 * reversal, deletes newest first, and compaction after deletes.
 */
#include "bloomery/cuckoo.h"
#include "bloomery/bloomery.h"
#include "bloomery/murmur.h"

#include <stdlib.h>
#include <string.h>

#include "mem.h"

#define ALT_MULT 0x5bd1e995ULL
#define SLACK 8
/* RedisBloom's CuckooFilter and SubCF structs, as CF.INFO's Size counts them. */
#define INFO_HEADER_BYTES 40
#define INFO_FILTER_BYTES 16

typedef struct subcf {
    uint64_t nbuckets;
    uint64_t mask;  /* nbuckets - 1 */
    uint64_t bytes; /* table bytes without the slack */
    uint8_t *data;
} subcf;

struct cf {
    subcf *filters;
    uint32_t nfilters, cap;
    uint64_t nbuckets; /* sub-filter 0's */
    unsigned b, f, max_iter, expansion, max_filters;
    uint32_t fpmask; /* 2^f - 1: the slot mask and the fingerprint modulus */
    uint64_t items, deletes;
    bool (*may_allocate)(void *ctx, uint64_t bytes);
    void *may_allocate_ctx;
    cf_write_hook write_hook;
    void *write_hook_ctx;
};

/* ---- slots ---- */

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void store_le64(uint8_t *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, 8);
}

static inline uint32_t slot_get(const cf_t *c, const uint8_t *d, uint64_t slot)
{
    if (c->f == 8)
        return d[slot];
    uint64_t bit = slot * c->f;
    return (uint32_t)(load_le64(d + (bit >> 3)) >> (bit & 7)) & c->fpmask;
}

/* The write barrier (cf_set_write_hook): the bytes holding the slot's bits.
 * Wider stores below rewrite neighbouring bytes with their own values. */
static void before_write(const cf_t *c, const subcf *s, uint64_t slot)
{
    uint64_t bit = slot * c->f;
    uint64_t first = bit >> 3, last = (bit + c->f - 1) >> 3;
    c->write_hook(c->write_hook_ctx, (uint32_t)(s - c->filters), first, last - first + 1);
}

static inline void slot_set(const cf_t *c, const subcf *s, uint64_t slot, uint32_t v)
{
    if (c->write_hook)
        before_write(c, s, slot);
    uint8_t *d = s->data;
    if (c->f == 8) {
        d[slot] = (uint8_t)v;
        return;
    }
    uint64_t bit = slot * c->f;
    unsigned sh = (unsigned)(bit & 7);
    uint8_t *p = d + (bit >> 3);
    uint64_t w = load_le64(p);
    w = (w & ~((uint64_t)c->fpmask << sh)) | ((uint64_t)v << sh);
    store_le64(p, w);
}

/* First slot of bucket j holding v, or -1. */
static inline int bucket_find(const cf_t *c, const uint8_t *d, uint64_t j, uint32_t v)
{
    uint64_t s0 = j * c->b;
    for (unsigned s = 0; s < c->b; s++)
        if (slot_get(c, d, s0 + s) == v)
            return (int)s;
    return -1;
}

static inline unsigned bucket_count(const cf_t *c, const uint8_t *d, uint64_t j, uint32_t v)
{
    uint64_t s0 = j * c->b;
    unsigned n = 0;
    for (unsigned s = 0; s < c->b; s++)
        n += slot_get(c, d, s0 + s) == v;
    return n;
}

/* ---- hashing ---- */

static inline uint32_t fingerprint(const cf_t *c, uint64_t h)
{
    if (c->f == 8)
        return (uint32_t)(h % 255) + 1; /* a constant divisor: no division */
    return (uint32_t)(h % c->fpmask) + 1;
}

static inline uint64_t alt_index(uint64_t i, uint32_t fp) { return i ^ ((uint64_t)fp * ALT_MULT); }

uint64_t cf_hash(const void *item, size_t len) { return bloomery_murmur64a(item, len, 0); }

uint32_t cf_fingerprint(const cf_t *c, uint64_t h) { return fingerprint(c, h); }

/* ---- shapes ---- */

static uint64_t next_pow2(uint64_t n)
{
    /* RedisBloom's getNextN2: 0 stays 0 (expansion 0 means no growth). */
    n--;
    n |= n >> 1;
    n |= n >> 2;
    n |= n >> 4;
    n |= n >> 8;
    n |= n >> 16;
    n |= n >> 32;
    return n + 1;
}

void cf_options_init(cf_options *o)
{
    memset(o, 0, sizeof *o);
    o->bucket_size = CF_DEFAULT_BUCKET_SIZE;
    o->max_iterations = CF_DEFAULT_MAX_ITERATIONS;
    o->expansion = CF_DEFAULT_EXPANSION;
    o->max_filters = CF_DEFAULT_MAX_FILTERS;
    o->fingerprint_bits = CF_DEFAULT_FINGERPRINT_BITS;
}

static bool valid_params(unsigned b, unsigned f, unsigned max_iter, unsigned max_filters)
{
    return b >= 1 && b <= CF_MAX_BUCKET_SIZE && f >= CF_MIN_FINGERPRINT_BITS &&
           f <= CF_MAX_FINGERPRINT_BITS && max_iter >= 1 && max_iter <= CF_MAX_MAX_ITERATIONS &&
           max_filters >= 1 && max_filters <= CF_MAX_MAX_FILTERS;
}

/* Buckets of sub-filter i, or 0 on overflow. */
static uint64_t filter_nbuckets(uint64_t nbuckets, unsigned expansion, uint32_t i)
{
    uint64_t n = nbuckets;
    if (expansion == 1 || i == 0)
        return n;
    for (uint32_t k = 0; k < i; k++) { /* overflows within 64 steps */
        if (expansion == 0 || n > UINT64_MAX / expansion)
            return 0;
        n *= expansion;
    }
    return n;
}

/* Table bytes for n buckets, or 0 when too big. */
static uint64_t table_bytes(uint64_t n, unsigned b, unsigned f)
{
    uint64_t per_bucket = (uint64_t)b * f; /* bits, < 2^13 */
    if (n == 0 || n > (CF_MAX_FILTER_BYTES * 8) / per_bucket)
        return 0;
    return (n * per_bucket + 7) / 8;
}

uint64_t cf_shape_filter_bytes(const cf_shape *s, uint32_t i)
{
    if (i >= s->nfilters || !valid_params(s->bucket_size, s->fingerprint_bits, 1, 1))
        return 0;
    return table_bytes(filter_nbuckets(s->nbuckets, s->expansion, i), s->bucket_size,
                       s->fingerprint_bits);
}

static uint64_t first_nbuckets(uint64_t capacity, unsigned b)
{
    uint64_t n = next_pow2(capacity / b);
    return n ? n : 1;
}

uint64_t cf_bytes_for(uint64_t capacity, const cf_options *opts)
{
    cf_options d;
    if (!opts) {
        cf_options_init(&d);
        opts = &d;
    }
    if (!valid_params(opts->bucket_size, opts->fingerprint_bits, opts->max_iterations,
                      opts->max_filters) ||
        opts->expansion > CF_MAX_EXPANSION || capacity < 2ULL * opts->bucket_size ||
        capacity > CF_MAX_CAPACITY)
        return 0;
    return table_bytes(first_nbuckets(capacity, opts->bucket_size), opts->bucket_size,
                       opts->fingerprint_bits);
}

/* ---- creation ---- */

static int add_filter(cf_t *c, bool ask)
{
    uint64_t n = filter_nbuckets(c->nbuckets, c->expansion, c->nfilters);
    uint64_t bytes = table_bytes(n, c->b, c->f);
    if (bytes == 0 || bytes > SIZE_MAX - SLACK || c->nfilters >= UINT32_MAX)
        return BLOOMERY_ETOOBIG;
    if (ask && c->may_allocate && !c->may_allocate(c->may_allocate_ctx, bytes))
        return BLOOMERY_EREFUSED;
    if (c->nfilters == c->cap) {
        uint32_t cap = c->cap ? c->cap * 2 : 4;
        subcf *p = realloc(c->filters, (size_t)cap * sizeof *p);
        if (!p)
            return BLOOMERY_ENOMEM;
        c->filters = p;
        c->cap = cap;
    }
    uint8_t *data = bloomery_alloc_zeroed((size_t)bytes + SLACK);
    if (!data)
        return BLOOMERY_ENOMEM;
    c->filters[c->nfilters++] = (subcf){n, n - 1, bytes, data};
    return BLOOMERY_OK;
}

static void drop_newest(cf_t *c)
{
    if (c->write_hook) /* the whole table goes */
        c->write_hook(c->write_hook_ctx, c->nfilters - 1, 0, c->filters[c->nfilters - 1].bytes);
    subcf *s = &c->filters[--c->nfilters];
    bloomery_free_zeroed(s->data, (size_t)s->bytes + SLACK);
    s->data = NULL;
}

void cf_free(cf_t *c)
{
    if (!c)
        return;
    c->write_hook = NULL; /* freeing is no change anyone keeps */
    while (c->nfilters)
        drop_newest(c);
    free(c->filters);
    free(c);
}

int cf_create_shape(cf_t **out, const cf_shape *s)
{
    *out = NULL;
    if (!valid_params(s->bucket_size, s->fingerprint_bits, s->max_iterations, s->max_filters) ||
        s->nbuckets == 0 || (s->nbuckets & (s->nbuckets - 1)) != 0 ||
        s->expansion > CF_MAX_EXPANSION || (s->expansion & (s->expansion - 1)) != 0 ||
        s->nfilters == 0 || s->nfilters > CF_MAX_MAX_FILTERS ||
        (s->expansion == 0 && s->nfilters != 1))
        return BLOOMERY_EINVAL;
    cf_t *c = calloc(1, sizeof *c);
    if (!c)
        return BLOOMERY_ENOMEM;
    c->nbuckets = s->nbuckets;
    c->b = s->bucket_size;
    c->f = s->fingerprint_bits;
    c->fpmask = (uint32_t)((1ULL << c->f) - 1);
    c->max_iter = s->max_iterations;
    c->expansion = s->expansion;
    c->max_filters = s->max_filters;
    c->items = s->items;
    c->deletes = s->deletes;
    for (uint32_t i = 0; i < s->nfilters; i++) {
        int rc = add_filter(c, false);
        if (rc != BLOOMERY_OK) {
            cf_free(c);
            return rc;
        }
    }
    *out = c;
    return BLOOMERY_OK;
}

int cf_create(cf_t **out, uint64_t capacity, const cf_options *opts)
{
    *out = NULL;
    cf_options d;
    if (!opts) {
        cf_options_init(&d);
        opts = &d;
    }
    if (!valid_params(opts->bucket_size, opts->fingerprint_bits, opts->max_iterations,
                      opts->max_filters) ||
        opts->expansion > CF_MAX_EXPANSION || capacity < 2ULL * opts->bucket_size ||
        capacity > CF_MAX_CAPACITY)
        return BLOOMERY_EINVAL;
    cf_shape s = {
        .nbuckets = first_nbuckets(capacity, opts->bucket_size),
        .bucket_size = opts->bucket_size,
        .fingerprint_bits = opts->fingerprint_bits,
        .max_iterations = opts->max_iterations,
        .expansion = (unsigned)next_pow2(opts->expansion),
        .max_filters = opts->max_filters,
        .nfilters = 1,
    };
    uint64_t bytes = table_bytes(s.nbuckets, s.bucket_size, s.fingerprint_bits);
    if (bytes == 0)
        return BLOOMERY_ETOOBIG;
    if (opts->may_allocate && !opts->may_allocate(opts->may_allocate_ctx, bytes))
        return BLOOMERY_EREFUSED;
    int rc = cf_create_shape(out, &s);
    if (rc == BLOOMERY_OK)
        cf_set_may_allocate(*out, opts->may_allocate, opts->may_allocate_ctx);
    return rc;
}

void cf_set_may_allocate(cf_t *c, bool (*may_allocate)(void *ctx, uint64_t bytes), void *ctx)
{
    c->may_allocate = may_allocate;
    c->may_allocate_ctx = ctx;
}

void cf_set_write_hook(cf_t *c, cf_write_hook hook, void *ctx)
{
    c->write_hook = hook;
    c->write_hook_ctx = ctx;
}

int cf_set_max_filters(cf_t *c, unsigned max_filters)
{
    if (max_filters < 1 || max_filters > CF_MAX_MAX_FILTERS)
        return BLOOMERY_EINVAL;
    c->max_filters = max_filters;
    return BLOOMERY_OK;
}

/* ---- lookups ---- */

bool cf_exists_hashed(const cf_t *c, uint64_t h)
{
    uint32_t fp = fingerprint(c, h);
    uint64_t h2 = alt_index(h, fp);
    for (uint32_t k = 0; k < c->nfilters; k++) {
        const subcf *s = &c->filters[k];
        if (bucket_find(c, s->data, h & s->mask, fp) >= 0 ||
            bucket_find(c, s->data, h2 & s->mask, fp) >= 0)
            return true;
    }
    return false;
}

uint64_t cf_count_hashed(const cf_t *c, uint64_t h)
{
    uint32_t fp = fingerprint(c, h);
    uint64_t h2 = alt_index(h, fp), n = 0;
    for (uint32_t k = 0; k < c->nfilters; k++) {
        const subcf *s = &c->filters[k];
        n += bucket_count(c, s->data, h & s->mask, fp) + bucket_count(c, s->data, h2 & s->mask, fp);
    }
    return n;
}

/* ---- inserts ---- */

/* Puts fp into a free slot of bucket i1 or i2 of s. */
static bool place_free(const cf_t *c, subcf *s, uint64_t i1, uint64_t i2, uint32_t fp)
{
    int slot = bucket_find(c, s->data, i1 & s->mask, 0);
    uint64_t j = i1 & s->mask;
    if (slot < 0) {
        j = i2 & s->mask;
        slot = bucket_find(c, s->data, j, 0);
    }
    if (slot < 0)
        return false;
    slot_set(c, s, j * c->b + (unsigned)slot, fp);
    return true;
}

static inline void swap_slot(const cf_t *c, const subcf *s, uint64_t slot, uint32_t *fp)
{
    uint32_t old = slot_get(c, s->data, slot);
    slot_set(c, s, slot, *fp);
    *fp = old;
}

/* Kicks fingerprints along their alternates in s, starting from bucket h;
 * on failure replays the walk backwards so every slot is as before. */
static bool kick_insert(const cf_t *c, subcf *s, uint64_t h, uint32_t fp)
{
    uint64_t j = h & s->mask;
    unsigned victim = 0;
    for (unsigned n = 0; n < c->max_iter; n++) {
        swap_slot(c, s, j * c->b + victim, &fp);
        j = alt_index(j, fp) & s->mask;
        int free_slot = bucket_find(c, s->data, j, 0);
        if (free_slot >= 0) {
            slot_set(c, s, j * c->b + (unsigned)free_slot, fp);
            return true;
        }
        victim = (victim + 1) % c->b;
    }
    for (unsigned n = 0; n < c->max_iter; n++) {
        victim = (victim + c->b - 1) % c->b;
        j = alt_index(j, fp) & s->mask;
        swap_slot(c, s, j * c->b + victim, &fp);
    }
    return false;
}

static int insert(cf_t *c, uint64_t h, uint32_t fp)
{
    uint64_t h2 = alt_index(h, fp);
    for (;;) {
        for (uint32_t k = c->nfilters; k > 0; k--) {
            if (place_free(c, &c->filters[k - 1], h, h2, fp)) {
                c->items++;
                return 1;
            }
        }
        if (kick_insert(c, &c->filters[c->nfilters - 1], h, fp)) {
            c->items++;
            return 1;
        }
        if (c->expansion == 0)
            return BLOOMERY_EFULL;
        int rc = add_filter(c, true);
        if (rc != BLOOMERY_OK)
            return rc;
        /* The new sub-filter is empty, so the next pass places fp there. */
    }
}

int cf_add_hashed(cf_t *c, uint64_t h)
{
    if (c->nfilters >= c->max_filters)
        return BLOOMERY_ETOOBIG;
    return insert(c, h, fingerprint(c, h));
}

int cf_add_nx_hashed(cf_t *c, uint64_t h)
{
    if (c->nfilters >= c->max_filters)
        return BLOOMERY_ETOOBIG;
    if (cf_exists_hashed(c, h))
        return 0;
    return insert(c, h, fingerprint(c, h));
}

/* ---- deletes and compaction ---- */

/* Moves the fingerprint in slot `slot` of bucket j of sub-filter k into a
 * free slot of an older sub-filter. Older sub-filters have a power-of-two
 * divisor of k's bucket count, so j and its alternate, reduced, are the
 * item's buckets there too. Returns 1 moved, 0 empty slot, -1 no room. */
static int relocate(cf_t *c, uint32_t k, uint64_t j, unsigned slot)
{
    subcf *s = &c->filters[k];
    uint64_t at = j * c->b + slot;
    uint32_t fp = slot_get(c, s->data, at);
    if (fp == 0)
        return 0;
    uint64_t j2 = alt_index(j, fp);
    for (uint32_t o = 0; o < k; o++) {
        if (place_free(c, &c->filters[o], j, j2, fp)) {
            slot_set(c, s, at, 0);
            return 1;
        }
    }
    return -1;
}

static bool compact_one(cf_t *c, uint32_t k)
{
    bool all = true;
    const subcf *s = &c->filters[k];
    for (uint64_t j = 0; j < s->nbuckets; j++)
        for (unsigned slot = 0; slot < c->b; slot++)
            if (relocate(c, k, j, slot) < 0)
                all = false;
    if (all && k == c->nfilters - 1)
        drop_newest(c);
    return all;
}

static void compact(cf_t *c, bool go_on)
{
    for (uint32_t k = c->nfilters; k > 1; k--)
        if (!compact_one(c, k - 1) && !go_on)
            break;
    c->deletes = 0;
}

void cf_compact(cf_t *c) { compact(c, true); }

bool cf_delete_hashed(cf_t *c, uint64_t h)
{
    uint32_t fp = fingerprint(c, h);
    uint64_t h2 = alt_index(h, fp);
    for (uint32_t k = c->nfilters; k > 0; k--) {
        subcf *s = &c->filters[k - 1];
        uint64_t j = h & s->mask;
        int slot = bucket_find(c, s->data, j, fp);
        if (slot < 0) {
            j = h2 & s->mask;
            slot = bucket_find(c, s->data, j, fp);
        }
        if (slot < 0)
            continue;
        slot_set(c, s, j * c->b + (unsigned)slot, 0);
        /* RedisBloom's count would wrap below zero after a false deletion
         * in a loaded filter; ours stays at zero. */
        if (c->items)
            c->items--;
        c->deletes++;
        if (c->nfilters > 1 && (double)c->deletes > (double)c->items * 0.10)
            compact(c, false);
        return true;
    }
    return false;
}

/* ---- item forms ---- */

int cf_add(cf_t *c, const void *item, size_t len) { return cf_add_hashed(c, cf_hash(item, len)); }

int cf_add_nx(cf_t *c, const void *item, size_t len)
{
    return cf_add_nx_hashed(c, cf_hash(item, len));
}

bool cf_exists(const cf_t *c, const void *item, size_t len)
{
    return cf_exists_hashed(c, cf_hash(item, len));
}

uint64_t cf_count(const cf_t *c, const void *item, size_t len)
{
    return cf_count_hashed(c, cf_hash(item, len));
}

bool cf_delete(cf_t *c, const void *item, size_t len)
{
    return cf_delete_hashed(c, cf_hash(item, len));
}

/* ---- state ---- */

uint64_t cf_bytes(const cf_t *c)
{
    uint64_t n = 0;
    for (uint32_t k = 0; k < c->nfilters; k++)
        n += c->filters[k].bytes;
    return n;
}

uint64_t cf_slots(const cf_t *c)
{
    uint64_t n = 0;
    for (uint32_t k = 0; k < c->nfilters; k++)
        n += c->filters[k].nbuckets * c->b;
    return n;
}

uint64_t cf_occupied(const cf_t *c)
{
    uint64_t n = 0;
    for (uint32_t k = 0; k < c->nfilters; k++) {
        const subcf *s = &c->filters[k];
        uint64_t slots = s->nbuckets * c->b;
        for (uint64_t i = 0; i < slots; i++)
            n += slot_get(c, s->data, i) != 0;
    }
    return n;
}

uint64_t cf_info_size(const cf_t *c)
{
    return INFO_HEADER_BYTES + (uint64_t)INFO_FILTER_BYTES * c->nfilters + cf_bytes(c);
}

uint64_t cf_nbuckets(const cf_t *c) { return c->nbuckets; }
uint32_t cf_nfilters(const cf_t *c) { return c->nfilters; }
uint64_t cf_items(const cf_t *c) { return c->items; }
uint64_t cf_deletes(const cf_t *c) { return c->deletes; }
unsigned cf_bucket_size(const cf_t *c) { return c->b; }
unsigned cf_expansion(const cf_t *c) { return c->expansion; }
unsigned cf_max_iterations(const cf_t *c) { return c->max_iter; }
unsigned cf_fingerprint_bits(const cf_t *c) { return c->f; }
unsigned cf_max_filters(const cf_t *c) { return c->max_filters; }

void cf_shape_of(const cf_t *c, cf_shape *out)
{
    *out = (cf_shape){
        .nbuckets = c->nbuckets,
        .bucket_size = c->b,
        .fingerprint_bits = c->f,
        .max_iterations = c->max_iter,
        .expansion = c->expansion,
        .max_filters = c->max_filters,
        .nfilters = c->nfilters,
        .items = c->items,
        .deletes = c->deletes,
    };
}

uint64_t cf_filter_nbuckets(const cf_t *c, uint32_t i)
{
    return i < c->nfilters ? c->filters[i].nbuckets : 0;
}

uint64_t cf_filter_bytes(const cf_t *c, uint32_t i)
{
    return i < c->nfilters ? c->filters[i].bytes : 0;
}

const uint8_t *cf_filter_data(const cf_t *c, uint32_t i)
{
    return i < c->nfilters ? c->filters[i].data : NULL;
}

uint8_t *cf_filter_data_mut(cf_t *c, uint32_t i)
{
    return i < c->nfilters ? c->filters[i].data : NULL;
}

int cf_filter_write(cf_t *c, uint32_t i, uint64_t off, const void *p, size_t len)
{
    if (i >= c->nfilters || off > c->filters[i].bytes || len > c->filters[i].bytes - off)
        return BLOOMERY_EINVAL;
    if (len == 0)
        return BLOOMERY_OK;
    if (c->write_hook)
        c->write_hook(c->write_hook_ctx, i, off, len);
    memcpy(c->filters[i].data + off, p, len);
    return BLOOMERY_OK;
}

/* Serialization of every structure as a header plus checksummed chunks
 * (contract in serial.h). Format version 1, all integers little-endian:
 *
 *   header
 *   +----------+---------+------+------------+---------+----------+
 *   | "BLMRYIMG"| version | type | chunk size | P bytes | R regions|
 *   |    8     |   u16   | u16  |    u32     |   u32   |   u32    |
 *   +----------+---------+------+------------+---------+----------+
 *   | params (P bytes, per type) | R x u64 region lengths | XXH3-64 |
 *   +----------------------------+------------------------+---------+
 *
 *   blocked, counting: u64 nblocks, u32 b, u64 seed, u64 capacity,
 *                      f64 error, u64 count; one region of nblocks * 64.
 *   scalable:          u8 layout, u32 expansion, u64 capacity, f64 error,
 *                      u64 seed, u32 nlinks, then per link
 *                        blocked: u64 nblocks, u32 b, u64 capacity, f64 error,
 *                                 u64 count
 *                        classic: u64 capacity, f64 error, f64 bpe,
 *                                 u32 hashes, u64 bits, u64 count
 *                      one region per link.
 *   hll:               no params; one region, the Redis HLL string.
 *   cuckoo:            u64 nbuckets, u32 bucket size, u32 fingerprint bits,
 *                      u32 max iterations, u32 expansion, u32 max filters,
 *                      u32 nfilters, u64 items, u64 deletes; one region per
 *                      sub-filter, its packed slot table (cuckoo.h).
 *   window:            u64 capacity, f64 error, u64 window ms, u32 slices S,
 *                      u64 seed, u64 rotations, u64 early rotations, then
 *                      for each of the S+1 slices, current first:
 *                      u64 nblocks, u32 b, u64 capacity, f64 error,
 *                      u64 count, i64 start ms; one region per slice.
 *   count-min:         u64 width, u64 depth, u64 total; one region, the
 *                      counters (cms.h). Loading checks that every row sums
 *                      to the total.
 *   top-k:             u32 k, u32 width, u32 depth, f64 decay, u64 generator
 *                      state; two regions: the buckets and the heap image
 *                      (topk.h), which loading parses and checks.
 *   t-digest:          u64 compression, u64 merged nodes, u64 unmerged
 *                      nodes, u64 merged weight, u64 unmerged weight,
 *                      u64 total compressions, f64 min, f64 max; one region,
 *                      the 6c + 10 nodes (f64 mean, u64 weight) of
 *                      tdigest.h, unused ones zero.
 *
 * Regions are cut into chunks of `chunk size` bytes (the last of a region may
 * be shorter), numbered across regions. Chunk i's checksum is XXH3-64 of its
 * bytes seeded with header_checksum ^ (i * golden ratio), binding it to its
 * place and to this header. A blob is the header followed by every chunk and
 * its u64 checksum.
 */
#include "bloomery/serial.h"
#include "bloomery/bloomery.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#define MAGIC "BLMRYIMG"
#define FIXED_HEADER 24
#define MAX_PARAMS (1u << 20)
#define MAX_REGIONS (1u << 16)
#define MIN_CHUNK 64u
#define GOLDEN 0x9e3779b97f4a7c15ULL

/* ---- little-endian buffer ---- */

typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
    int failed;
} wbuf;

static void put(wbuf *w, const void *src, size_t n)
{
    if (w->failed || n == 0)
        return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        while (cap < w->len + n)
            cap *= 2;
        uint8_t *p = realloc(w->p, cap);
        if (!p) {
            w->failed = 1;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

static void put_u64(wbuf *w, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, 8);
}

static void put_u32(wbuf *w, uint32_t v)
{
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, 4);
}

static void put_u16(wbuf *w, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(w, b, 2);
}

static void put_f64(wbuf *w, double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    put_u64(w, v);
}

typedef struct rbuf {
    const uint8_t *p;
    size_t len, off;
    int short_read;
} rbuf;

static uint64_t get_le(rbuf *r, unsigned n)
{
    if (r->len - r->off < n) {
        r->short_read = 1;
        r->off = r->len;
        return 0;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)r->p[r->off + i] << (8 * i);
    r->off += n;
    return v;
}

static uint64_t get_u64(rbuf *r) { return get_le(r, 8); }
static uint32_t get_u32(rbuf *r) { return (uint32_t)get_le(r, 4); }
static uint8_t get_u8(rbuf *r) { return (uint8_t)get_le(r, 1); }

static double get_f64(rbuf *r)
{
    uint64_t v = get_u64(r);
    double d;
    memcpy(&d, &v, 8);
    return d;
}

/* ---- images ---- */

typedef struct region {
    const uint8_t *data;
    uint64_t len;
} region;

struct bloomery_image {
    uint8_t *header;
    size_t header_len;
    uint64_t header_sum;
    uint32_t chunk_size;
    region *regions;
    uint32_t nregions;
    uint64_t *first_chunk; /* nregions + 1 prefix counts */
};

static uint64_t chunks_of(uint64_t len, uint32_t cs) { return len / cs + (len % cs != 0); }

static uint64_t chunk_sum(uint64_t header_sum, uint64_t i, const uint8_t *data, size_t len)
{
    return XXH3_64bits_withSeed(data, len, header_sum ^ (i * GOLDEN));
}

static void put_blocked_params(wbuf *w, uint64_t nblocks, unsigned b, uint64_t seed,
                               uint64_t capacity, double error, uint64_t count)
{
    put_u64(w, nblocks);
    put_u32(w, b);
    put_u64(w, seed);
    put_u64(w, capacity);
    put_f64(w, error);
    put_u64(w, count);
}

static void put_chain_params(wbuf *w, const sbf_t *s, uint32_t nlinks)
{
    uint8_t layout = (uint8_t)sbf_layout(s);
    put(w, &layout, 1);
    put_u32(w, sbf_expansion(s));
    put_u64(w, sbf_initial_capacity(s));
    put_f64(w, sbf_error_rate(s));
    put_u64(w, sbf_seed(s));
    put_u32(w, nlinks);
}

/* A growing chain: its one filter's state, and a region per table (one,
 * or two while buckets move). */
static int describe_growing(const sbf_t *s, wbuf *params, region **regions, uint32_t *nregions)
{
    const gf_t *g = sbf_link_growing(s, 0);
    gf_state st;
    gf_get_state(g, &st);
    put_chain_params(params, s, 1);
    put_u64(params, st.salt);
    put_u64(params, st.count);
    put_u32(params, st.ntables);
    put_u64(params, st.buckets[0]);
    put_u64(params, st.buckets[1]);
    put_u64(params, st.cursor);
    *regions = malloc(st.ntables * sizeof **regions);
    if (!*regions)
        return BLOOMERY_ENOMEM;
    for (unsigned i = 0; i < st.ntables; i++) {
        uint64_t len;
        const uint8_t *data = gf_table_data(g, i, &len);
        (*regions)[i] = (region){data, len};
    }
    *nregions = st.ntables;
    return BLOOMERY_OK;
}

/* Fills params and regions for obj. */
static int describe(bloomery_object obj, wbuf *params, region **regions, uint32_t *nregions)
{
    *regions = NULL;
    *nregions = 0;
    switch (obj.type) {
    case BLOOMERY_TYPE_BLOCKED: {
        const bf_t *f = obj.u.bf;
        put_blocked_params(params, bf_nblocks(f), bf_blocks_per_key(f), bf_seed(f), bf_capacity(f),
                           bf_error_rate(f), bf_count(f));
        *regions = malloc(sizeof **regions);
        if (!*regions)
            return BLOOMERY_ENOMEM;
        (*regions)[0] = (region){bf_data(f), bf_bytes(f)};
        *nregions = 1;
        return BLOOMERY_OK;
    }
    case BLOOMERY_TYPE_COUNTING: {
        const cntbf_t *c = obj.u.cnt;
        put_blocked_params(params, cntbf_nblocks(c), cntbf_blocks_per_key(c), cntbf_seed(c),
                           cntbf_capacity(c), cntbf_error_rate(c), cntbf_count(c));
        *regions = malloc(sizeof **regions);
        if (!*regions)
            return BLOOMERY_ENOMEM;
        (*regions)[0] = (region){cntbf_data(c), cntbf_bytes(c)};
        *nregions = 1;
        return BLOOMERY_OK;
    }
    case BLOOMERY_TYPE_SCALABLE: {
        const sbf_t *s = obj.u.sbf;
        size_t n = sbf_nlinks(s);
        /* A prefix link is two regions: its bins and its spare's blocks. */
        size_t per = sbf_layout(s) == BLOOMERY_LAYOUT_PREFIX ? 2 : 1;
        if (sbf_layout(s) == BLOOMERY_LAYOUT_GROWING)
            return describe_growing(s, params, regions, nregions);
        if (n * per > MAX_REGIONS)
            return BLOOMERY_ETOOBIG;
        put_chain_params(params, s, (uint32_t)n);
        *regions = malloc(n * per * sizeof **regions);
        if (!*regions)
            return BLOOMERY_ENOMEM;
        for (size_t i = 0; i < n; i++) {
            if (sbf_layout(s) == BLOOMERY_LAYOUT_PREFIX) {
                const pf_t *l = sbf_link_prefix(s, i);
                const bf_t *sp = pf_spare(l);
                pf_shape sh = pf_get_shape(l);
                put_u64(params, pf_nbins(l));
                put_u32(params, sh.remainder_bits);
                put_u32(params, sh.slots);
                put_u32(params, sh.quotients);
                put_f64(params, sh.load);
                put_u64(params, pf_capacity(l));
                put_f64(params, pf_error_rate(l));
                put_u64(params, pf_count(l));
                put_u64(params, pf_spare_count(l));
                put_blocked_params(params, bf_nblocks(sp), bf_blocks_per_key(sp), bf_seed(sp),
                                   bf_capacity(sp), bf_error_rate(sp), bf_count(sp));
                (*regions)[2 * i] = (region){pf_data(l), pf_data_bytes(l)};
                (*regions)[2 * i + 1] = (region){bf_data(sp), bf_bytes(sp)};
            } else if (sbf_layout(s) == BLOOMERY_LAYOUT_CLASSIC) {
                const cbf_t *l = sbf_link_classic(s, i);
                cbf_shape sh;
                cbf_shape_of(l, &sh);
                put_u64(params, sh.capacity);
                put_f64(params, sh.error_rate);
                put_f64(params, sh.bpe);
                put_u32(params, sh.hashes);
                put_u64(params, sh.bits);
                put_u64(params, cbf_count(l));
                (*regions)[i] = (region){cbf_data(l), cbf_bytes(l)};
            } else {
                const bf_t *l = sbf_link_blocked(s, i);
                put_u64(params, bf_nblocks(l));
                put_u32(params, bf_blocks_per_key(l));
                put_u64(params, bf_capacity(l));
                put_f64(params, bf_error_rate(l));
                put_u64(params, bf_count(l));
                (*regions)[i] = (region){bf_data(l), bf_bytes(l)};
            }
        }
        *nregions = (uint32_t)(n * per);
        return BLOOMERY_OK;
    }
    case BLOOMERY_TYPE_HLL: {
        size_t len;
        const uint8_t *p = hll_bytes(obj.u.hll, &len);
        *regions = malloc(sizeof **regions);
        if (!*regions)
            return BLOOMERY_ENOMEM;
        (*regions)[0] = (region){p, len};
        *nregions = 1;
        return BLOOMERY_OK;
    }
    case BLOOMERY_TYPE_WINDOW: {
        const win_t *w = obj.u.win;
        unsigned n = win_slices(w) + 1;
        put_u64(params, win_capacity(w));
        put_f64(params, win_error_rate(w));
        put_u64(params, win_window_ms(w));
        put_u32(params, win_slices(w));
        put_u64(params, win_seed(w));
        put_u64(params, win_rotations(w));
        put_u64(params, win_early_rotations(w));
        *regions = malloc(n * sizeof **regions);
        if (!*regions)
            return BLOOMERY_ENOMEM;
        for (unsigned i = 0; i < n; i++) {
            const bf_t *f = win_slice(w, i);
            put_u64(params, bf_nblocks(f));
            put_u32(params, bf_blocks_per_key(f));
            put_u64(params, bf_capacity(f));
            put_f64(params, bf_error_rate(f));
            put_u64(params, bf_count(f));
            put_u64(params, (uint64_t)win_slice_start(w, i));
            (*regions)[i] = (region){bf_data(f), bf_bytes(f)};
        }
        *nregions = n;
        return BLOOMERY_OK;
    }
    case BLOOMERY_TYPE_CMS: {
        const cms_t *c = obj.u.cms;
        put_u64(params, cms_width(c));
        put_u64(params, cms_depth(c));
        put_u64(params, cms_count(c));
        *regions = malloc(sizeof **regions);
        if (!*regions)
            return BLOOMERY_ENOMEM;
        (*regions)[0] = (region){cms_data(c), cms_width(c) * cms_depth(c) * 4};
        *nregions = 1;
        return BLOOMERY_OK;
    }
    case BLOOMERY_TYPE_TOPK: {
        topk_t *t = obj.u.topk;
        size_t hlen;
        const uint8_t *heap = topk_heap_image(t, &hlen);
        if (heap == NULL)
            return BLOOMERY_ENOMEM;
        put_u32(params, topk_k(t));
        put_u32(params, topk_width(t));
        put_u32(params, topk_depth(t));
        put_f64(params, topk_decay(t));
        put_u64(params, topk_rng(t));
        *regions = malloc(2 * sizeof **regions);
        if (!*regions)
            return BLOOMERY_ENOMEM;
        (*regions)[0] = (region){topk_buckets(t), topk_buckets_bytes(t)};
        (*regions)[1] = (region){heap, hlen};
        *nregions = 2;
        return BLOOMERY_OK;
    }
    case BLOOMERY_TYPE_CUCKOO: {
        const cf_t *c = obj.u.cf;
        cf_shape sh;
        cf_shape_of(c, &sh);
        if (sh.nfilters > MAX_REGIONS)
            return BLOOMERY_ETOOBIG;
        put_u64(params, sh.nbuckets);
        put_u32(params, sh.bucket_size);
        put_u32(params, sh.fingerprint_bits);
        put_u32(params, sh.max_iterations);
        put_u32(params, sh.expansion);
        put_u32(params, sh.max_filters);
        put_u32(params, sh.nfilters);
        put_u64(params, sh.items);
        put_u64(params, sh.deletes);
        *regions = malloc(sh.nfilters * sizeof **regions);
        if (!*regions)
            return BLOOMERY_ENOMEM;
        for (uint32_t i = 0; i < sh.nfilters; i++)
            (*regions)[i] = (region){cf_filter_data(c, i), cf_filter_bytes(c, i)};
        *nregions = sh.nfilters;
        return BLOOMERY_OK;
    }
    case BLOOMERY_TYPE_TDIGEST: {
        const tdigest_t *t = obj.u.td;
        tdigest_state st;
        tdigest_state_of(t, &st);
        put_u64(params, st.compression);
        put_u64(params, st.merged_nodes);
        put_u64(params, st.unmerged_nodes);
        put_u64(params, st.merged_weight);
        put_u64(params, st.unmerged_weight);
        put_u64(params, st.total_compressions);
        put_f64(params, st.min);
        put_f64(params, st.max);
        *regions = malloc(sizeof **regions);
        if (!*regions)
            return BLOOMERY_ENOMEM;
        (*regions)[0] =
            (region){(const uint8_t *)tdigest_nodes(t), tdigest_capacity(t) * sizeof(tdigest_node)};
        *nregions = 1;
        return BLOOMERY_OK;
    }
    }
    return BLOOMERY_EINVAL;
}

int bloomery_image_create(bloomery_image **out, bloomery_object obj, uint32_t chunk_size)
{
    *out = NULL;
    if (chunk_size == 0)
        chunk_size = BLOOMERY_CHUNK_DEFAULT;
    if (chunk_size < MIN_CHUNK || chunk_size > BLOOMERY_CHUNK_MAX)
        return BLOOMERY_EINVAL;
    bloomery_image *img = calloc(1, sizeof *img);
    wbuf params = {0}, h = {0};
    if (!img)
        return BLOOMERY_ENOMEM;
    int rc = describe(obj, &params, &img->regions, &img->nregions);
    if (rc == BLOOMERY_OK && params.failed)
        rc = BLOOMERY_ENOMEM;
    if (rc == BLOOMERY_OK) {
        img->chunk_size = chunk_size;
        img->first_chunk = malloc((img->nregions + 1) * sizeof *img->first_chunk);
        if (!img->first_chunk)
            rc = BLOOMERY_ENOMEM;
    }
    if (rc == BLOOMERY_OK) {
        img->first_chunk[0] = 0;
        for (uint32_t r = 0; r < img->nregions; r++)
            img->first_chunk[r + 1] =
                img->first_chunk[r] + chunks_of(img->regions[r].len, chunk_size);
        put(&h, MAGIC, 8);
        put_u16(&h, BLOOMERY_SERIAL_VERSION);
        put_u16(&h, (uint16_t)obj.type);
        put_u32(&h, chunk_size);
        put_u32(&h, (uint32_t)params.len);
        put_u32(&h, img->nregions);
        put(&h, params.p, params.len);
        for (uint32_t r = 0; r < img->nregions; r++)
            put_u64(&h, img->regions[r].len);
        if (!h.failed)
            img->header_sum = XXH3_64bits(h.p, h.len);
        put_u64(&h, img->header_sum);
        if (h.failed)
            rc = BLOOMERY_ENOMEM;
    }
    free(params.p);
    if (rc != BLOOMERY_OK) {
        free(h.p);
        bloomery_image_free(img);
        return rc;
    }
    img->header = h.p;
    img->header_len = h.len;
    *out = img;
    return BLOOMERY_OK;
}

void bloomery_image_free(bloomery_image *img)
{
    if (!img)
        return;
    free(img->header);
    free(img->regions);
    free(img->first_chunk);
    free(img);
}

const uint8_t *bloomery_image_header(const bloomery_image *img, size_t *len)
{
    *len = img->header_len;
    return img->header;
}

uint64_t bloomery_image_nchunks(const bloomery_image *img)
{
    return img->first_chunk[img->nregions];
}

/* Region holding global chunk i (binary search over the prefix counts). */
static uint32_t region_of(const uint64_t *first_chunk, uint32_t nregions, uint64_t i)
{
    uint32_t lo = 0, hi = nregions;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (first_chunk[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static void chunk_span(const uint64_t *first_chunk, uint32_t nregions, const uint64_t *lens,
                       uint32_t cs, uint64_t i, uint32_t *r, uint64_t *off, size_t *len)
{
    *r = region_of(first_chunk, nregions, i);
    *off = (i - first_chunk[*r]) * cs;
    uint64_t left = lens[*r] - *off;
    *len = (size_t)(left < cs ? left : cs);
}

const uint8_t *bloomery_image_chunk(const bloomery_image *img, uint64_t i, size_t *len)
{
    if (i >= bloomery_image_nchunks(img)) {
        *len = 0;
        return NULL;
    }
    uint32_t r = region_of(img->first_chunk, img->nregions, i);
    uint64_t off = (i - img->first_chunk[r]) * img->chunk_size;
    uint64_t left = img->regions[r].len - off;
    *len = (size_t)(left < img->chunk_size ? left : img->chunk_size);
    return img->regions[r].data + off;
}

uint64_t bloomery_image_chunk_at(const bloomery_image *img, uint32_t r, uint64_t offset, size_t *at)
{
    if (r >= img->nregions || offset >= img->regions[r].len)
        return UINT64_MAX;
    if (at)
        *at = (size_t)(offset % img->chunk_size);
    return img->first_chunk[r] + offset / img->chunk_size;
}

uint64_t bloomery_image_chunk_checksum(const bloomery_image *img, uint64_t i, const uint8_t *data,
                                       size_t len)
{
    return chunk_sum(img->header_sum, i, data, len);
}

int bloomery_serialize(bloomery_object obj, uint32_t chunk_size, uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    bloomery_image *img;
    int rc = bloomery_image_create(&img, obj, chunk_size);
    if (rc != BLOOMERY_OK)
        return rc;
    wbuf w = {0};
    size_t hl;
    const uint8_t *h = bloomery_image_header(img, &hl);
    put(&w, h, hl);
    uint64_t n = bloomery_image_nchunks(img);
    for (uint64_t i = 0; i < n && !w.failed; i++) {
        size_t cl;
        const uint8_t *c = bloomery_image_chunk(img, i, &cl);
        /* Checksum what is written, not what the live object holds later. */
        size_t at = w.len;
        put(&w, c, cl);
        if (!w.failed)
            put_u64(&w, bloomery_image_chunk_checksum(img, i, w.p + at, cl));
    }
    bloomery_image_free(img);
    if (w.failed) {
        free(w.p);
        return BLOOMERY_ENOMEM;
    }
    *out = w.p;
    *len = w.len;
    return BLOOMERY_OK;
}

/* ---- loading ---- */

struct bloomery_loader {
    bloomery_type type;
    uint64_t header_sum;
    uint32_t chunk_size;
    uint32_t nregions;
    uint64_t *lens;
    uint8_t **dest; /* where each region's bytes go */
    pf_t **bins_of; /* the prefix link whose bins a region holds, or NULL */
    uint64_t *first_chunk;
    uint8_t *loaded; /* one flag per chunk */
    uint64_t nchunks, nloaded;
    bloomery_object obj; /* zeroed object being filled; HLL: NULL until finish */
    uint8_t *hll_buf;
    uint8_t *heap_buf; /* top-k: the heap image, parsed at finish */
    uint64_t topk_rng;
    tdigest_state td; /* t-digest: the counters, checked against the nodes at finish */
    char err[160];
};

static int fail(bloomery_loader *l, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(bloomery_loader *l, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->err, sizeof l->err, fmt, ap);
    va_end(ap);
    return rc;
}

static int valid_error(double e) { return e > 0 && e < 1; }

/* Link i of a prefix chain: its bins (region 2i) and its spare (2i + 1). */
static int build_prefix_link(bloomery_loader *l, rbuf *p, uint32_t i, uint64_t seed, pf_t **out)
{
    pf_shape sh = {0};
    uint64_t nbins = get_u64(p);
    sh.remainder_bits = get_u32(p);
    sh.slots = get_u32(p);
    sh.quotients = get_u32(p);
    sh.load = get_f64(p);
    uint64_t cap = get_u64(p);
    double e = get_f64(p);
    uint64_t count = get_u64(p), spared = get_u64(p);
    uint64_t snblocks = get_u64(p);
    uint32_t sb = get_u32(p);
    uint64_t sseed = get_u64(p), scap = get_u64(p);
    double se = get_f64(p);
    uint64_t scount = get_u64(p);
    if (p->short_read || nbins == 0 || nbins > UINT64_MAX / 64 || nbins * 64 != l->lens[2 * i] ||
        snblocks == 0 || snblocks > UINT64_MAX / 64 || snblocks * 64 != l->lens[2 * i + 1] ||
        sb == 0 || sb > BLOOMERY_MAX_BLOCKS_PER_KEY || !valid_error(e) || !valid_error(se) ||
        cap == 0 || scap == 0 || !(sh.load > 0))
        return fail(l, BLOOMERY_ECORRUPT, "invalid prefix link %u", i);
    bf_t *spare;
    int rc = bf_create_shape(&spare, snblocks, sb, sseed, scap, se);
    if (rc != BLOOMERY_OK)
        return fail(l, rc, "cannot allocate link %u: %s", i, bloomery_strerror(rc));
    rc = pf_create_shape(out, nbins, &sh, spare, seed, cap, e);
    if (rc != BLOOMERY_OK) {
        bf_free(spare);
        return fail(l, rc == BLOOMERY_EINVAL ? BLOOMERY_ECORRUPT : rc, "invalid prefix link %u: %s",
                    i, bloomery_strerror(rc));
    }
    bf_set_count(spare, scount);
    pf_set_count(*out, count);
    pf_set_spare_count(*out, spared);
    l->dest[2 * i] = pf_data_mut(*out);
    l->bins_of[2 * i] = *out;
    l->dest[2 * i + 1] = bf_data_mut(spare);
    return BLOOMERY_OK;
}

/* A growing chain (describe_growing): its filter with zeroed tables, which
 * bloomery_loader_finish validates once they are filled. */
static int build_growing(bloomery_loader *l, rbuf *p, uint32_t expansion, uint64_t capacity,
                         double error, uint64_t seed, uint32_t nlinks)
{
    gf_state st = {.capacity = capacity, .error_rate = error, .seed = seed};
    st.salt = get_u64(p);
    st.count = get_u64(p);
    st.ntables = get_u32(p);
    st.buckets[0] = get_u64(p);
    st.buckets[1] = get_u64(p);
    st.cursor = get_u64(p);
    if (p->short_read || p->off != p->len)
        return fail(l, BLOOMERY_ECORRUPT, "parameters have the wrong length");
    sbf_options o = {.layout = BLOOMERY_LAYOUT_GROWING, .expansion = expansion, .seed = seed};
    if (expansion > SBF_MAX_EXPANSION || !valid_error(error) || capacity == 0 || nlinks != 1 ||
        st.ntables < 1 || st.ntables > 2 || l->nregions != st.ntables)
        return fail(l, BLOOMERY_ECORRUPT, "invalid chain parameters");
    for (unsigned i = 0; i < st.ntables; i++)
        if (l->lens[i] != gf_table_bytes_for(&st, i))
            return fail(l, BLOOMERY_ECORRUPT, "table %u has the wrong size", i);
    if (sbf_bytes_for(capacity, error, &o) == 0)
        return fail(l, BLOOMERY_ECORRUPT, "invalid chain parameters");
    st.expansion = gf_round_expansion(expansion);
    gf_t *g;
    int rc = gf_create_state(&g, &st);
    if (rc != BLOOMERY_OK)
        return fail(l, rc == BLOOMERY_EINVAL ? BLOOMERY_ECORRUPT : rc, "invalid growing filter: %s",
                    bloomery_strerror(rc));
    void *link = g;
    rc = sbf_assemble(&l->obj.u.sbf, BLOOMERY_LAYOUT_GROWING, capacity, error, expansion, seed,
                      &link, 1);
    if (rc != BLOOMERY_OK) {
        gf_free(g);
        return fail(l, rc, "cannot assemble the chain: %s", bloomery_strerror(rc));
    }
    for (unsigned i = 0; i < st.ntables; i++) {
        uint64_t len;
        l->dest[i] = gf_table_data_mut(g, i, &len);
    }
    l->obj.type = l->type;
    return BLOOMERY_OK;
}

/* Creates the zeroed object the header describes and points dest at its
 * regions. The params reader must be consumed exactly. */
static int build_object(bloomery_loader *l, rbuf *p, uint64_t max_bytes)
{
    uint64_t total = 0;
    for (uint32_t r = 0; r < l->nregions; r++) {
        if (l->lens[r] > UINT64_MAX - total)
            return fail(l, BLOOMERY_ETOOBIG, "region sizes overflow");
        total += l->lens[r];
    }
    if (max_bytes && total > max_bytes)
        return fail(l, BLOOMERY_ETOOBIG, "object of %llu bytes exceeds the limit of %llu",
                    (unsigned long long)total, (unsigned long long)max_bytes);

    switch (l->type) {
    case BLOOMERY_TYPE_BLOCKED:
    case BLOOMERY_TYPE_COUNTING: {
        uint64_t nblocks = get_u64(p);
        uint32_t b = get_u32(p);
        uint64_t seed = get_u64(p), capacity = get_u64(p);
        double error = get_f64(p);
        uint64_t count = get_u64(p);
        if (p->short_read || p->off != p->len)
            return fail(l, BLOOMERY_ECORRUPT, "parameters have the wrong length");
        if (l->nregions != 1 || nblocks == 0 || nblocks > UINT64_MAX / 64 ||
            l->lens[0] != nblocks * 64)
            return fail(l, BLOOMERY_ECORRUPT, "data size does not match %llu blocks",
                        (unsigned long long)nblocks);
        if (b == 0 || b > BLOOMERY_MAX_BLOCKS_PER_KEY || !valid_error(error) || capacity == 0)
            return fail(l, BLOOMERY_ECORRUPT, "invalid filter parameters");
        int rc;
        if (l->type == BLOOMERY_TYPE_BLOCKED) {
            rc = bf_create_shape(&l->obj.u.bf, nblocks, b, seed, capacity, error);
            if (rc == BLOOMERY_OK) {
                bf_set_count(l->obj.u.bf, count);
                l->dest[0] = bf_data_mut(l->obj.u.bf);
            }
        } else {
            rc = cntbf_create_shape(&l->obj.u.cnt, nblocks, b, seed, capacity, error);
            if (rc == BLOOMERY_OK) {
                cntbf_set_count(l->obj.u.cnt, count);
                l->dest[0] = cntbf_data_mut(l->obj.u.cnt);
            }
        }
        if (rc != BLOOMERY_OK)
            return fail(l, rc, "cannot allocate the filter: %s", bloomery_strerror(rc));
        l->obj.type = l->type;
        return BLOOMERY_OK;
    }
    case BLOOMERY_TYPE_SCALABLE: {
        uint8_t layout = get_u8(p);
        uint32_t expansion = get_u32(p);
        uint64_t capacity = get_u64(p);
        double error = get_f64(p);
        uint64_t seed = get_u64(p);
        uint32_t nlinks = get_u32(p);
        if (p->short_read)
            return fail(l, BLOOMERY_ECORRUPT, "parameters are truncated");
        if (layout == BLOOMERY_LAYOUT_GROWING)
            return build_growing(l, p, expansion, capacity, error, seed, nlinks);
        uint32_t per = layout == BLOOMERY_LAYOUT_PREFIX ? 2 : 1;
        if (layout > BLOOMERY_LAYOUT_PREFIX || expansion > SBF_MAX_EXPANSION || capacity == 0 ||
            !valid_error(error) || nlinks == 0 || nlinks > MAX_REGIONS ||
            (uint64_t)nlinks * per != l->nregions)
            return fail(l, BLOOMERY_ECORRUPT, "invalid chain parameters");
        void **links = calloc(nlinks, sizeof *links);
        if (!links)
            return fail(l, BLOOMERY_ENOMEM, "out of memory");
        int rc = BLOOMERY_OK;
        uint32_t made = 0;
        for (; made < nlinks && rc == BLOOMERY_OK; made++) {
            if (layout == BLOOMERY_LAYOUT_PREFIX) {
                rc = build_prefix_link(l, p, made, seed, (pf_t **)&links[made]);
            } else if (layout == BLOOMERY_LAYOUT_CLASSIC) {
                cbf_shape sh = {0};
                sh.capacity = get_u64(p);
                sh.error_rate = get_f64(p);
                sh.bpe = get_f64(p);
                sh.hashes = get_u32(p);
                sh.bits = get_u64(p);
                sh.bytes = sh.bits / 8;
                uint64_t count = get_u64(p);
                if (p->short_read || sh.bits % 64 != 0 || sh.bytes != l->lens[made] ||
                    !valid_error(sh.error_rate) || sh.capacity == 0) {
                    rc = fail(l, BLOOMERY_ECORRUPT, "invalid classic link %u", made);
                    break;
                }
                rc = cbf_create_shape((cbf_t **)&links[made], &sh);
                if (rc == BLOOMERY_OK) {
                    cbf_set_count(links[made], count);
                    l->dest[made] = cbf_data_mut(links[made]);
                } else {
                    rc = fail(l, rc == BLOOMERY_EINVAL ? BLOOMERY_ECORRUPT : rc,
                              "invalid classic link %u: %s", made, bloomery_strerror(rc));
                }
            } else {
                uint64_t nblocks = get_u64(p);
                uint32_t b = get_u32(p);
                uint64_t cap = get_u64(p);
                double e = get_f64(p);
                uint64_t count = get_u64(p);
                if (p->short_read || nblocks == 0 || nblocks > UINT64_MAX / 64 ||
                    nblocks * 64 != l->lens[made] || b == 0 || b > BLOOMERY_MAX_BLOCKS_PER_KEY ||
                    !valid_error(e) || cap == 0) {
                    rc = fail(l, BLOOMERY_ECORRUPT, "invalid blocked link %u", made);
                    break;
                }
                rc = bf_create_shape((bf_t **)&links[made], nblocks, b, seed, cap, e);
                if (rc == BLOOMERY_OK) {
                    bf_set_count(links[made], count);
                    l->dest[made] = bf_data_mut(links[made]);
                } else {
                    rc = fail(l, rc, "cannot allocate link %u: %s", made, bloomery_strerror(rc));
                }
            }
        }
        if (rc == BLOOMERY_OK && p->off != p->len)
            rc = fail(l, BLOOMERY_ECORRUPT, "parameters have trailing bytes");
        if (rc == BLOOMERY_OK) {
            rc = sbf_assemble(&l->obj.u.sbf, (bloomery_layout)layout, capacity, error, expansion,
                              seed, links, nlinks);
            if (rc != BLOOMERY_OK)
                fail(l, rc, "cannot assemble the chain: %s", bloomery_strerror(rc));
        }
        if (rc != BLOOMERY_OK) {
            for (uint32_t i = 0; i < nlinks; i++) {
                if (layout == BLOOMERY_LAYOUT_PREFIX)
                    pf_free(links[i]);
                else if (layout == BLOOMERY_LAYOUT_CLASSIC)
                    cbf_free(links[i]);
                else
                    bf_free(links[i]);
            }
        } else {
            l->obj.type = l->type;
        }
        free(links);
        return rc;
    }
    case BLOOMERY_TYPE_HLL:
        if (p->len != 0 || l->nregions != 1 || l->lens[0] < 16 || l->lens[0] > HLL_DENSE_SIZE)
            return fail(l, BLOOMERY_ECORRUPT, "invalid HyperLogLog size");
        l->hll_buf = calloc(1, (size_t)l->lens[0]); /* zeroed, as every dest */
        if (!l->hll_buf)
            return fail(l, BLOOMERY_ENOMEM, "out of memory");
        l->dest[0] = l->hll_buf;
        return BLOOMERY_OK;
    case BLOOMERY_TYPE_WINDOW: {
        uint64_t capacity = get_u64(p);
        double error = get_f64(p);
        uint64_t window_ms = get_u64(p);
        uint32_t s = get_u32(p);
        uint64_t seed = get_u64(p), rotations = get_u64(p), early = get_u64(p);
        if (p->short_read || capacity == 0 || !valid_error(error) || window_ms == 0 || s == 0 ||
            s > WIN_MAX_SLICES || l->nregions != s + 1)
            return fail(l, BLOOMERY_ECORRUPT, "invalid window parameters");
        bf_t *slices[WIN_MAX_SLICES + 1] = {0};
        int64_t starts[WIN_MAX_SLICES + 1];
        int rc = BLOOMERY_OK;
        for (uint32_t i = 0; i <= s && rc == BLOOMERY_OK; i++) {
            uint64_t nblocks = get_u64(p);
            uint32_t b = get_u32(p);
            uint64_t cap = get_u64(p);
            double e = get_f64(p);
            uint64_t count = get_u64(p);
            starts[i] = (int64_t)get_u64(p);
            if (p->short_read || nblocks == 0 || nblocks > UINT64_MAX / 64 ||
                nblocks * 64 != l->lens[i] || b == 0 || b > BLOOMERY_MAX_BLOCKS_PER_KEY ||
                !valid_error(e) || cap == 0) {
                rc = fail(l, BLOOMERY_ECORRUPT, "invalid window slice %u", i);
                break;
            }
            rc = bf_create_shape(&slices[i], nblocks, b, seed, cap, e);
            if (rc != BLOOMERY_OK) {
                fail(l, rc, "cannot allocate slice %u: %s", i, bloomery_strerror(rc));
                break;
            }
            bf_set_count(slices[i], count);
            l->dest[i] = bf_data_mut(slices[i]);
        }
        if (rc == BLOOMERY_OK && p->off != p->len)
            rc = fail(l, BLOOMERY_ECORRUPT, "parameters have trailing bytes");
        if (rc == BLOOMERY_OK) {
            rc = win_assemble(&l->obj.u.win, capacity, error, window_ms, s, slices, starts,
                              rotations, early);
            if (rc != BLOOMERY_OK)
                rc = fail(l, BLOOMERY_ECORRUPT, "slices of different shapes");
        }
        if (rc != BLOOMERY_OK) {
            for (uint32_t i = 0; i <= s; i++)
                bf_free(slices[i]);
            return rc;
        }
        l->obj.type = l->type;
        return BLOOMERY_OK;
    }
    case BLOOMERY_TYPE_CMS: {
        uint64_t width = get_u64(p), depth = get_u64(p), count = get_u64(p);
        if (p->short_read || p->off != p->len)
            return fail(l, BLOOMERY_ECORRUPT, "parameters have the wrong length");
        uint64_t bytes = cms_bytes_for(width, depth);
        if (bytes == 0 || l->nregions != 1 || l->lens[0] != width * depth * 4)
            return fail(l, BLOOMERY_ECORRUPT, "data size does not match the dimensions");
        if (count > (uint64_t)INT64_MAX)
            return fail(l, BLOOMERY_ECORRUPT, "total count out of range");
        int rc = cms_create(&l->obj.u.cms, width, depth);
        if (rc != BLOOMERY_OK)
            return fail(l, rc, "cannot allocate the sketch: %s", bloomery_strerror(rc));
        cms_set_count(l->obj.u.cms, count);
        l->dest[0] = cms_data_mut(l->obj.u.cms);
        l->obj.type = l->type;
        return BLOOMERY_OK;
    }
    case BLOOMERY_TYPE_TOPK: {
        uint32_t k = get_u32(p), width = get_u32(p), depth = get_u32(p);
        double decay = get_f64(p);
        uint64_t rng = get_u64(p);
        if (p->short_read || p->off != p->len)
            return fail(l, BLOOMERY_ECORRUPT, "parameters have the wrong length");
        if (k == 0 || width == 0 || depth == 0 || !(decay > 0 && decay <= 1))
            return fail(l, BLOOMERY_ECORRUPT, "invalid top-k parameters");
        if (l->nregions != 2 || l->lens[0] != (uint64_t)width * depth * 8 ||
            l->lens[1] < (uint64_t)k * 13 || l->lens[1] > SIZE_MAX / 2)
            return fail(l, BLOOMERY_ECORRUPT, "data sizes do not match the parameters");
        int rc = topk_create(&l->obj.u.topk, k, width, depth, decay, rng);
        if (rc != BLOOMERY_OK)
            return fail(l, rc, "cannot allocate the top-k: %s", bloomery_strerror(rc));
        l->heap_buf = calloc(1, (size_t)l->lens[1]); /* zeroed, as every dest */
        if (!l->heap_buf)
            return fail(l, BLOOMERY_ENOMEM, "out of memory");
        l->topk_rng = rng;
        l->dest[0] = topk_buckets_mut(l->obj.u.topk);
        l->dest[1] = l->heap_buf;
        l->obj.type = l->type;
        return BLOOMERY_OK;
    }
    case BLOOMERY_TYPE_CUCKOO: {
        cf_shape sh = {0};
        sh.nbuckets = get_u64(p);
        sh.bucket_size = get_u32(p);
        sh.fingerprint_bits = get_u32(p);
        sh.max_iterations = get_u32(p);
        sh.expansion = get_u32(p);
        sh.max_filters = get_u32(p);
        sh.nfilters = get_u32(p);
        sh.items = get_u64(p);
        sh.deletes = get_u64(p);
        if (p->short_read || p->off != p->len)
            return fail(l, BLOOMERY_ECORRUPT, "parameters have the wrong length");
        if (sh.nfilters != l->nregions)
            return fail(l, BLOOMERY_ECORRUPT, "%u sub-filters but %u regions", sh.nfilters,
                        l->nregions);
        for (uint32_t i = 0; i < sh.nfilters; i++) {
            uint64_t want = cf_shape_filter_bytes(&sh, i);
            if (want == 0 || l->lens[i] != want)
                return fail(l, BLOOMERY_ECORRUPT, "sub-filter %u size does not match its shape", i);
        }
        int rc = cf_create_shape(&l->obj.u.cf, &sh);
        if (rc != BLOOMERY_OK)
            return fail(l, rc == BLOOMERY_EINVAL ? BLOOMERY_ECORRUPT : rc,
                        "invalid cuckoo filter: %s", bloomery_strerror(rc));
        for (uint32_t i = 0; i < sh.nfilters; i++)
            l->dest[i] = cf_filter_data_mut(l->obj.u.cf, i);
        l->obj.type = l->type;
        return BLOOMERY_OK;
    }
    case BLOOMERY_TYPE_TDIGEST: {
        tdigest_state *st = &l->td;
        st->compression = get_u64(p);
        st->merged_nodes = get_u64(p);
        st->unmerged_nodes = get_u64(p);
        st->merged_weight = get_u64(p);
        st->unmerged_weight = get_u64(p);
        st->total_compressions = get_u64(p);
        st->min = get_f64(p);
        st->max = get_f64(p);
        if (p->short_read || p->off != p->len)
            return fail(l, BLOOMERY_ECORRUPT, "parameters have the wrong length");
        uint64_t cap = tdigest_capacity_for(st->compression);
        if (cap == 0 || l->nregions != 1 || l->lens[0] != cap * sizeof(tdigest_node))
            return fail(l, BLOOMERY_ECORRUPT, "invalid t-digest compression or size");
        int rc = tdigest_create(&l->obj.u.td, st->compression);
        if (rc != BLOOMERY_OK)
            return fail(l, rc, "cannot allocate the t-digest: %s", bloomery_strerror(rc));
        l->dest[0] = (uint8_t *)tdigest_nodes_mut(l->obj.u.td);
        l->obj.type = l->type;
        return BLOOMERY_OK;
    }
    }
    return fail(l, BLOOMERY_ETYPE, "unknown object type %u", (unsigned)l->type);
}

int bloomery_loader_open(bloomery_loader **out, const uint8_t *buf, size_t len, uint64_t max_bytes,
                         size_t *used)
{
    *out = NULL;
    bloomery_loader *l = calloc(1, sizeof *l);
    if (!l)
        return BLOOMERY_ENOMEM;
    *out = l; /* so the caller can read the message even on failure */
    if (len < FIXED_HEADER)
        return fail(l, BLOOMERY_ETRUNC, "header is truncated (%zu bytes)", len);
    if (memcmp(buf, MAGIC, 8) != 0)
        return fail(l, BLOOMERY_ECORRUPT, "bad magic: not a bloomery image");
    rbuf r = {buf, len, 8, 0};
    uint16_t version = (uint16_t)get_le(&r, 2);
    uint16_t type = (uint16_t)get_le(&r, 2);
    uint32_t cs = get_u32(&r), plen = get_u32(&r), nregions = get_u32(&r);
    if (plen > MAX_PARAMS || nregions > MAX_REGIONS)
        return fail(l, BLOOMERY_ECORRUPT, "header sizes out of range");
    size_t hlen = FIXED_HEADER + (size_t)plen + 8 * (size_t)nregions + 8;
    if (len < hlen)
        return fail(l, BLOOMERY_ETRUNC, "header is truncated (%zu of %zu bytes)", len, hlen);
    uint64_t sum = XXH3_64bits(buf, hlen - 8);
    rbuf tail = {buf, hlen, hlen - 8, 0};
    if (get_u64(&tail) != sum)
        return fail(l, BLOOMERY_ECORRUPT, "header checksum mismatch");
    /* The checksum is good, so what follows was written by us: still check
     * every field, since a forged header can carry a valid checksum. */
    if (version != BLOOMERY_SERIAL_VERSION)
        return fail(l, BLOOMERY_EVERSION, "unsupported format version %u", version);
    if (type < BLOOMERY_TYPE_BLOCKED || type > BLOOMERY_TYPE_TDIGEST)
        return fail(l, BLOOMERY_ETYPE, "unknown object type %u", type);
    if (cs < MIN_CHUNK || cs > BLOOMERY_CHUNK_MAX)
        return fail(l, BLOOMERY_ECORRUPT, "chunk size %u out of range", cs);
    if (nregions == 0)
        return fail(l, BLOOMERY_ECORRUPT, "no data regions");
    l->type = (bloomery_type)type;
    l->header_sum = sum;
    l->chunk_size = cs;
    l->nregions = nregions;
    l->lens = calloc(nregions, sizeof *l->lens);
    l->dest = calloc(nregions, sizeof *l->dest);
    l->bins_of = calloc(nregions, sizeof *l->bins_of);
    l->first_chunk = calloc(nregions + 1, sizeof *l->first_chunk);
    if (!l->lens || !l->dest || !l->bins_of || !l->first_chunk)
        return fail(l, BLOOMERY_ENOMEM, "out of memory");
    rbuf lens = {buf, hlen - 8, FIXED_HEADER + plen, 0};
    for (uint32_t i = 0; i < nregions; i++) {
        l->lens[i] = get_u64(&lens);
        if (l->lens[i] == 0)
            return fail(l, BLOOMERY_ECORRUPT, "region %u is empty", i);
        l->first_chunk[i + 1] = l->first_chunk[i] + chunks_of(l->lens[i], cs);
    }
    rbuf params = {buf + FIXED_HEADER, plen, 0, 0};
    int rc = build_object(l, &params, max_bytes);
    if (rc != BLOOMERY_OK)
        return rc;
    l->nchunks = l->first_chunk[nregions];
    l->loaded = calloc(l->nchunks, 1);
    if (!l->loaded)
        return fail(l, BLOOMERY_ENOMEM, "out of memory");
    if (used)
        *used = hlen;
    return BLOOMERY_OK;
}

bloomery_type bloomery_loader_type(const bloomery_loader *l) { return l->type; }

uint64_t bloomery_loader_nchunks(const bloomery_loader *l) { return l->nchunks; }

size_t bloomery_loader_chunk_len(const bloomery_loader *l, uint64_t i)
{
    if (i >= l->nchunks)
        return 0;
    uint32_t r;
    uint64_t off;
    size_t len;
    chunk_span(l->first_chunk, l->nregions, l->lens, l->chunk_size, i, &r, &off, &len);
    return len;
}

/* Every destination starts zeroed, and a large one is lazily allocated
 * (mem.c): copy only the pages of a chunk that hold something, so a mostly
 * empty filter loads without touching its untouched pages. */
#define LOAD_PAGE 4096u

static void copy_nonzero(uint8_t *dst, const uint8_t *src, size_t len)
{
    for (size_t off = 0; off < len; off += LOAD_PAGE) {
        size_t n = len - off < LOAD_PAGE ? len - off : LOAD_PAGE;
        const uint8_t *p = src + off;
        if (p[0] != 0 || memcmp(p, p + 1, n - 1) != 0)
            memcpy(dst + off, p, n);
    }
}

/* Prefix bins are checked chunk by chunk, while the chunk is in the cache
 * and on whichever thread loads it, when chunks hold whole bins (every
 * chunk size this project writes); otherwise once at finish. */
static bool bins_per_chunk(const bloomery_loader *l) { return l->chunk_size % 64 == 0; }

static bool chunk_valid(const bloomery_loader *l, uint32_t r, const uint8_t *bytes, size_t len)
{
    return !bins_per_chunk(l) || l->bins_of[r] == NULL ||
           pf_validate_bins(l->bins_of[r], bytes, len / 64) == BLOOMERY_OK;
}

#define BAD_BINS "a prefix bin with too many fingerprints"

int bloomery_loader_chunk(bloomery_loader *l, uint64_t i, const uint8_t *data, size_t len,
                          uint64_t checksum)
{
    if (!l->loaded)
        return fail(l, BLOOMERY_ESTATE, "no valid header loaded");
    if (i >= l->nchunks)
        return fail(l, BLOOMERY_ECORRUPT, "chunk %llu out of range (%llu chunks)",
                    (unsigned long long)i, (unsigned long long)l->nchunks);
    uint32_t r;
    uint64_t off;
    size_t want;
    chunk_span(l->first_chunk, l->nregions, l->lens, l->chunk_size, i, &r, &off, &want);
    if (len != want)
        return fail(l, len < want ? BLOOMERY_ETRUNC : BLOOMERY_ECORRUPT,
                    "chunk %llu has %zu bytes, expected %zu", (unsigned long long)i, len, want);
    if (chunk_sum(l->header_sum, i, data, len) != checksum)
        return fail(l, BLOOMERY_ECORRUPT, "chunk %llu checksum mismatch", (unsigned long long)i);
    if (l->loaded[i])
        return fail(l, BLOOMERY_ECORRUPT, "chunk %llu loaded twice", (unsigned long long)i);
    if (!chunk_valid(l, r, data, len))
        return fail(l, BLOOMERY_ECORRUPT, "chunk %llu has " BAD_BINS, (unsigned long long)i);
    if (len > 0)
        copy_nonzero(l->dest[r] + off, data, len);
    l->loaded[i] = 1;
    l->nloaded++;
    return BLOOMERY_OK;
}

uint8_t *bloomery_loader_chunk_dest(bloomery_loader *l, uint64_t i, size_t *len)
{
    *len = 0;
    if (!l->loaded || i >= l->nchunks)
        return NULL;
    uint32_t r;
    uint64_t off;
    chunk_span(l->first_chunk, l->nregions, l->lens, l->chunk_size, i, &r, &off, len);
    return l->dest[r] + off;
}

static int fail_to(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail_to(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* Threads share the loader: only its flags and count change here, with
 * atomics (each chunk's flag claimed once, before any byte is copied). */
int bloomery_loader_chunk_placed(bloomery_loader *l, uint64_t i, const uint8_t *data,
                                 size_t data_len, uint64_t checksum, char *err, size_t errlen)
{
    if (!l->loaded)
        return fail_to(err, errlen, BLOOMERY_ESTATE, "no valid header loaded");
    if (i >= l->nchunks)
        return fail_to(err, errlen, BLOOMERY_ECORRUPT, "chunk %llu out of range (%llu chunks)",
                       (unsigned long long)i, (unsigned long long)l->nchunks);
    uint32_t r;
    uint64_t off;
    size_t len;
    chunk_span(l->first_chunk, l->nregions, l->lens, l->chunk_size, i, &r, &off, &len);
    uint8_t *dest = l->dest[r] + off;
    if (data && data_len != len)
        return fail_to(err, errlen, data_len < len ? BLOOMERY_ETRUNC : BLOOMERY_ECORRUPT,
                       "chunk %llu has %zu bytes, expected %zu", (unsigned long long)i, data_len,
                       len);
    bool sum_ok = chunk_sum(l->header_sum, i, data ? data : dest, len) == checksum;
    bool valid = sum_ok && chunk_valid(l, r, data ? data : dest, len);
    if (!valid) {
        /* Refused bytes written in place are zeroed again (unless the chunk
         * is in already), so a retry from a buffer, which skips zero pages,
         * cannot leave any behind unchecked. */
        if (!data && !__atomic_load_n(&l->loaded[i], __ATOMIC_RELAXED))
            memset(dest, 0, len);
        return fail_to(err, errlen, BLOOMERY_ECORRUPT,
                       sum_ok ? "chunk %llu has " BAD_BINS : "chunk %llu checksum mismatch",
                       (unsigned long long)i);
    }
    if (__atomic_exchange_n(&l->loaded[i], 1, __ATOMIC_RELAXED))
        return fail_to(err, errlen, BLOOMERY_ECORRUPT, "chunk %llu loaded twice",
                       (unsigned long long)i);
    if (data && len > 0)
        copy_nonzero(dest, data, len);
    __atomic_add_fetch(&l->nloaded, 1, __ATOMIC_RELAXED);
    return BLOOMERY_OK;
}

int bloomery_loader_finish(bloomery_loader *l, bloomery_object *out)
{
    if (!l->loaded)
        return fail(l, BLOOMERY_ESTATE, "no valid header loaded");
    if (l->nloaded != l->nchunks)
        return fail(l, BLOOMERY_ETRUNC, "%llu of %llu chunks missing",
                    (unsigned long long)(l->nchunks - l->nloaded), (unsigned long long)l->nchunks);
    if (l->type == BLOOMERY_TYPE_HLL) {
        hll_t *h;
        int rc = hll_from_bytes(&h, l->hll_buf, (size_t)l->lens[0], 0);
        if (rc != BLOOMERY_OK)
            return fail(l, BLOOMERY_ECORRUPT, "invalid HyperLogLog value: %s",
                        bloomery_strerror(rc));
        l->obj.type = BLOOMERY_TYPE_HLL;
        l->obj.u.hll = h;
    }
    if (l->type == BLOOMERY_TYPE_SCALABLE && sbf_layout(l->obj.u.sbf) == BLOOMERY_LAYOUT_PREFIX &&
        !bins_per_chunk(l)) {
        for (size_t i = 0; i < sbf_nlinks(l->obj.u.sbf); i++)
            if (pf_validate(sbf_link_prefix(l->obj.u.sbf, i)) != BLOOMERY_OK)
                return fail(l, BLOOMERY_ECORRUPT,
                            "prefix link %zu has a bin with too many "
                            "fingerprints",
                            i);
    }
    if (l->type == BLOOMERY_TYPE_SCALABLE && sbf_layout(l->obj.u.sbf) == BLOOMERY_LAYOUT_GROWING &&
        gf_validate(sbf_link_growing(l->obj.u.sbf, 0)) != BLOOMERY_OK)
        return fail(l, BLOOMERY_ECORRUPT,
                    "growing filter has a moved bucket or pool entry "
                    "no filter writes");
    if (l->type == BLOOMERY_TYPE_CMS && cms_check(l->obj.u.cms) != BLOOMERY_OK)
        return fail(l, BLOOMERY_ECORRUPT, "the counters do not sum to the total in every row");
    if (l->type == BLOOMERY_TYPE_TOPK) {
        int rc = topk_load_heap(l->obj.u.topk, l->heap_buf, (size_t)l->lens[1], l->topk_rng);
        if (rc != BLOOMERY_OK)
            return fail(l, rc, "invalid top-k heap: %s", bloomery_strerror(rc));
    }
    /* The nodes are in: only now can the counters be checked against them. */
    if (l->type == BLOOMERY_TYPE_TDIGEST && tdigest_restore(l->obj.u.td, &l->td) != BLOOMERY_OK)
        return fail(l, BLOOMERY_ECORRUPT, "t-digest nodes do not match their counters");
    *out = l->obj;
    l->obj.u.any = NULL;
    /* Spent: the object is the caller's now, so no later call may reach it
     * through dest or bins_of ("no valid header loaded"). */
    free(l->loaded);
    l->loaded = NULL;
    return BLOOMERY_OK;
}

const char *bloomery_loader_error(const bloomery_loader *l)
{
    return l->err[0] ? l->err : "no error";
}

void bloomery_object_free(bloomery_object *o)
{
    if (!o || !o->u.any)
        return;
    switch (o->type) {
    case BLOOMERY_TYPE_BLOCKED: bf_free(o->u.bf); break;
    case BLOOMERY_TYPE_SCALABLE: sbf_free(o->u.sbf); break;
    case BLOOMERY_TYPE_COUNTING: cntbf_free(o->u.cnt); break;
    case BLOOMERY_TYPE_HLL: hll_free(o->u.hll); break;
    case BLOOMERY_TYPE_CUCKOO: cf_free(o->u.cf); break;
    case BLOOMERY_TYPE_WINDOW: win_free(o->u.win); break;
    case BLOOMERY_TYPE_CMS: cms_free(o->u.cms); break;
    case BLOOMERY_TYPE_TOPK: topk_free(o->u.topk); break;
    case BLOOMERY_TYPE_TDIGEST: tdigest_free(o->u.td); break;
    }
    o->u.any = NULL;
}

void bloomery_loader_free(bloomery_loader *l)
{
    if (!l)
        return;
    if (l->obj.u.any) {
        l->obj.type = l->type;
        bloomery_object_free(&l->obj);
    }
    free(l->lens);
    free(l->dest);
    free(l->bins_of);
    free(l->first_chunk);
    free(l->loaded);
    free(l->hll_buf);
    free(l->heap_buf);
    free(l);
}

static _Thread_local char deser_msg[160];

int bloomery_deserialize(const uint8_t *buf, size_t len, uint64_t max_bytes, bloomery_object *out,
                         const char **msg)
{
    out->u.any = NULL;
    bloomery_loader *l;
    size_t off;
    int rc = bloomery_loader_open(&l, buf, len, max_bytes, &off);
    for (uint64_t i = 0; rc == BLOOMERY_OK && i < bloomery_loader_nchunks(l); i++) {
        size_t cl = bloomery_loader_chunk_len(l, i);
        if (len - off < cl + 8) {
            rc = fail(l, BLOOMERY_ETRUNC, "data ends inside chunk %llu", (unsigned long long)i);
            break;
        }
        rbuf sum = {buf + off + cl, 8, 0, 0};
        rc = bloomery_loader_chunk(l, i, buf + off, cl, get_u64(&sum));
        off += cl + 8;
    }
    if (rc == BLOOMERY_OK && off != len)
        rc = fail(l, BLOOMERY_ECORRUPT, "%zu trailing bytes after the last chunk", len - off);
    if (rc == BLOOMERY_OK)
        rc = bloomery_loader_finish(l, out);
    if (msg) {
        snprintf(deser_msg, sizeof deser_msg, "%s", l ? bloomery_loader_error(l) : "out of memory");
        *msg = deser_msg;
    }
    bloomery_loader_free(l);
    return rc;
}

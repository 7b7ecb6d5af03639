/* Top-k by HeavyKeeper (contract in topk.h).
 *
 *   buckets, row-major            heap (min on count, k slots)
 *   row 0 | fp,n | fp,n | ... |        [0] smallest count
 *   ...                               /   \
 *   row d-1 | ...             |     [1]   [2] ...
 *
 * Every decision follows RedisBloom's TOPK so that the same adds give the
 * same buckets and heap, but for the decay draws: the bucket walk, the
 * decay probability (a table of decay^i for i < 256, larger counts as
 * table[255]^(n / 255) * table[n % 255]), the take-over of a bucket with the
 * rest of the increment, the heap's "at least the minimum" entry rule and
 * its sift-down (which, as RedisBloom's, only sifts down: a decayed count in
 * the heap stays where it is). The draws come from the value's own
 * splitmix64 generator, one per decay attempt as RedisBloom calls rand()
 * once per attempt.
 *
 * An add never allocates after changing anything: a spare buffer large
 * enough for the item is made first. When the item enters the heap, the
 * minimum slot's buffer and the spare swap, so the expelled item is left in
 * the spare, where the caller reads it until the next add.
 */
#include "bloomery/topk.h"
#include "bloomery/bloomery.h"
#include "bloomery/murmur.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fastmod.h"
#include "mem.h"
#include "murmur2_x8.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "the buckets are serialized as they lie in memory");

#define FP_SEED 1919  /* RedisBloom's fingerprint seed */
#define SLOT_FIXED 13 /* image bytes of a slot before its item */

typedef struct bucket {
    uint32_t fp, count;
} bucket;

typedef struct slot {
    uint32_t fp, count;
    uint32_t len;
    bool used;
    uint8_t *item;
    size_t cap;
} slot;

struct topk {
    uint32_t k, width, depth;
    fastmod32 by_width;
    double decay;
    uint64_t rng;
    bucket *buckets;
    uint64_t buckets_bytes;
    slot *heap;
    uint8_t *spare; /* holds the last expelled item */
    size_t spare_cap, spare_len;
    uint64_t item_bytes; /* capacity of every item buffer, spare included */
    uint8_t *img;        /* topk_heap_image's buffer */
    size_t img_cap;
    topk_write_hook hook;
    void *hook_ctx;
    double table[TOPK_DECAY_TABLE];
};

uint64_t topk_bytes_for(uint32_t k, uint32_t width, uint32_t depth)
{
    if (k == 0 || width == 0 || depth == 0)
        return 0;
    /* 32-bit factors: the products fit in 64 bits. */
    return (uint64_t)width * depth * sizeof(bucket) + (uint64_t)k * sizeof(slot) +
           sizeof(struct topk);
}

int topk_create(topk_t **out, uint32_t k, uint32_t width, uint32_t depth, double decay,
                uint64_t seed)
{
    *out = NULL;
    if (k == 0 || width == 0 || depth == 0 || !(decay > 0 && decay <= 1))
        return BLOOMERY_EINVAL;
    if (topk_bytes_for(k, width, depth) > SIZE_MAX / 2)
        return BLOOMERY_ETOOBIG;
    topk_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return BLOOMERY_ENOMEM;
    t->k = k;
    t->width = width;
    t->by_width = fastmod32_of(width);
    t->depth = depth;
    t->decay = decay;
    t->rng = seed;
    t->buckets_bytes = (uint64_t)width * depth * sizeof(bucket);
    t->buckets = bloomery_alloc_zeroed((size_t)t->buckets_bytes);
    t->heap = calloc(k, sizeof(slot));
    if (t->buckets == NULL || t->heap == NULL) {
        topk_free(t);
        return BLOOMERY_ENOMEM;
    }
    for (unsigned i = 0; i < TOPK_DECAY_TABLE; i++)
        t->table[i] = pow(decay, i);
    *out = t;
    return BLOOMERY_OK;
}

void topk_free(topk_t *t)
{
    if (t == NULL)
        return;
    if (t->heap)
        for (uint32_t i = 0; i < t->k; i++)
            free(t->heap[i].item);
    free(t->heap);
    bloomery_free_zeroed(t->buckets, (size_t)t->buckets_bytes);
    free(t->spare);
    free(t->img);
    free(t);
}

uint32_t topk_k(const topk_t *t) { return t->k; }
uint32_t topk_width(const topk_t *t) { return t->width; }
uint32_t topk_depth(const topk_t *t) { return t->depth; }
double topk_decay(const topk_t *t) { return t->decay; }
uint64_t topk_rng(const topk_t *t) { return t->rng; }

uint64_t topk_bytes(const topk_t *t)
{
    return topk_bytes_for(t->k, t->width, t->depth) + t->item_bytes + t->img_cap;
}

void topk_set_write_hook(topk_t *t, topk_write_hook hook, void *ctx)
{
    t->hook = hook;
    t->hook_ctx = ctx;
}

const uint8_t *topk_buckets(const topk_t *t) { return (const uint8_t *)t->buckets; }
uint8_t *topk_buckets_mut(topk_t *t) { return (uint8_t *)t->buckets; }
uint64_t topk_buckets_bytes(const topk_t *t) { return t->buckets_bytes; }

/* ---- decay ---- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A uniform draw in [0, 1), as rand() / RAND_MAX is in RedisBloom. */
static double draw(topk_t *t) { return (double)(splitmix64(&t->rng) >> 11) * 0x1p-53; }

static double decay_of(const topk_t *t, uint32_t count)
{
    if (count < TOPK_DECAY_TABLE)
        return t->table[count];
    return pow(t->table[TOPK_DECAY_TABLE - 1], (double)(count / (TOPK_DECAY_TABLE - 1))) *
           t->table[count % (TOPK_DECAY_TABLE - 1)];
}

/* ---- heap ---- */

static uint32_t fingerprint(const void *item, size_t len)
{
    return bloomery_murmur2(item, len, FP_SEED);
}

/* The item's hashes: from row 0, the fingerprint then rows 0-6 in h[0..8);
 * from a row r = 8j - 1 (7, 15, ...), rows r to r + 7 in h[0..8). */
static void hash_rows(const void *item, size_t len, uint32_t from, uint32_t h[8])
{
    if (from == 0) {
        static const uint32_t first[8] = {FP_SEED, 0, 1, 2, 3, 4, 5, 6};
        murmur2_x8(item, len, first, h);
    } else {
        murmur2_x8_from(item, len, from, h);
    }
}

static slot *find(const topk_t *t, uint32_t fp, const void *item, size_t len)
{
    /* From the end, as RedisBloom scans. */
    for (uint32_t i = t->k; i-- > 0;) {
        slot *s = &t->heap[i];
        if (s->used && s->fp == fp && s->len == len && (len == 0 || !memcmp(s->item, item, len)))
            return s;
    }
    return NULL;
}

/* RedisBloom's sift-down, comparisons included, so equal counts end in the
 * same places. */
static void sift_down(slot *a, size_t len, size_t start)
{
    if (len < 2 || (len - 2) / 2 < start)
        return;
    size_t child = 2 * start + 1;
    if (child + 1 < len && a[child].count > a[child + 1].count)
        child++;
    if (a[child].count > a[start].count)
        return;
    slot top = a[start];
    do {
        a[start] = a[child];
        start = child;
        if ((len - 2) / 2 < child)
            break;
        child = 2 * child + 1;
        if (child + 1 < len && a[child].count > a[child + 1].count)
            child++;
    } while (a[child].count < top.count);
    a[start] = top;
}

static int reserve_spare(topk_t *t, size_t len)
{
    if (t->spare_cap >= len && t->spare)
        return BLOOMERY_OK;
    size_t cap = len < 16 ? 16 : len;
    uint8_t *p = realloc(t->spare, cap);
    if (p == NULL)
        return BLOOMERY_ENOMEM;
    t->item_bytes += cap - t->spare_cap;
    t->spare = p;
    t->spare_cap = cap;
    return BLOOMERY_OK;
}

/* ---- add, query ---- */

int topk_add(topk_t *t, const void *item, size_t len, uint32_t incr, topk_item *expelled)
{
    if (len > UINT32_MAX)
        return BLOOMERY_EINVAL;
    if (reserve_spare(t, len) != BLOOMERY_OK)
        return BLOOMERY_ENOMEM;
    uint32_t h[8];
    hash_rows(item, len, 0, h);
    uint32_t fp = h[0];
    uint32_t heap_min = t->heap[0].count, max = 0;
    for (uint32_t i = 0; i < t->depth;) {
        /* Rows 0-6 (hashed with the fingerprint), then eight at a time:
         * every bucket of a group is located and loading before the first
         * is read, so their cache misses overlap. */
        bucket *row[8];
        uint32_t lane = i == 0 ? 1 : 0, n = t->depth - i < 8 - lane ? t->depth - i : 8 - lane;
        if (i > 0)
            hash_rows(item, len, i, h);
        for (uint32_t r = 0; r < n; r++) {
            row[r] =
                &t->buckets[(uint64_t)(i + r) * t->width + fastmod32_mod(t->by_width, h[lane + r])];
            __builtin_prefetch(row[r], 1);
        }
        i += n;
        for (uint32_t r = 0; r < n; r++) {
            bucket *b = row[r];
            if (t->hook)
                t->hook(t->hook_ctx, 0, (uint64_t)(b - t->buckets) * sizeof(*b), sizeof(*b));
            if (b->count == 0) {
                b->fp = fp;
                b->count = incr;
            } else if (b->fp == fp) {
                b->count = b->count > UINT32_MAX - incr ? UINT32_MAX : b->count + incr;
            } else {
                for (uint32_t left = incr; left > 0; left--) {
                    if (draw(t) < decay_of(t, b->count) && --b->count == 0) {
                        b->fp = fp;
                        b->count = left;
                        break;
                    }
                }
                if (b->fp != fp)
                    continue;
            }
            if (b->count > max)
                max = b->count;
        }
    }
    if (max < heap_min)
        return 0;
    slot *s = find(t, fp, item, len);
    if (s) {
        /* Not the larger of the two: the count may have decayed. */
        s->count = max;
        sift_down(t->heap, t->k, (size_t)(s - t->heap));
        return 0;
    }
    slot *m = &t->heap[0];
    bool was_used = m->used;
    uint8_t *buf = t->spare;
    size_t cap = t->spare_cap;
    t->spare = m->item;
    t->spare_cap = m->cap;
    t->spare_len = m->len;
    if (len)
        memcpy(buf, item, len);
    *m =
        (slot){.fp = fp, .count = max, .len = (uint32_t)len, .used = true, .item = buf, .cap = cap};
    sift_down(t->heap, t->k, 0);
    if (!was_used)
        return 0;
    if (expelled)
        *expelled = (topk_item){t->spare, t->spare_len, 0};
    return 1;
}

bool topk_query(const topk_t *t, const void *item, size_t len)
{
    return find(t, fingerprint(item, len), item, len) != NULL;
}

uint32_t topk_count(const topk_t *t, const void *item, size_t len)
{
    uint32_t h[8];
    hash_rows(item, len, 0, h);
    uint32_t fp = h[0];
    uint32_t heap_min = t->heap[0].count, res = 0;
    bool in_heap = find(t, fp, item, len) != NULL;
    for (uint32_t i = 0; i < t->depth; i++) {
        if ((i + 1) % 8 == 0)
            hash_rows(item, len, i, h);
        const bucket *b =
            &t->buckets[(uint64_t)i * t->width + fastmod32_mod(t->by_width, h[(i + 1) % 8])];
        if (b->fp == fp && (!in_heap || b->count >= heap_min) && b->count > res)
            res = b->count;
    }
    return res;
}

/* Largest count first; ties by heap index, which topk_list keeps in len
 * until the sort is done (RedisBloom's qsort of the heap is glibc's merge
 * sort, stable, so ties come out in heap order there too). */
static int by_count_desc(const void *a, const void *b)
{
    const topk_item *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return x->len < y->len ? -1 : x->len > y->len;
}

size_t topk_list(const topk_t *t, topk_item *out)
{
    size_t n = 0;
    for (uint32_t i = 0; i < t->k; i++)
        if (t->heap[i].used && t->heap[i].count > 0)
            out[n++] = (topk_item){NULL, i, t->heap[i].count};
    qsort(out, n, sizeof(*out), by_count_desc);
    for (size_t i = 0; i < n; i++) {
        const slot *s = &t->heap[out[i].len];
        out[i].item = s->item;
        out[i].len = s->len;
    }
    return n;
}

/* ---- serialization ---- */

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

const uint8_t *topk_heap_image(topk_t *t, size_t *len)
{
    size_t need = 0;
    for (uint32_t i = 0; i < t->k; i++)
        need += SLOT_FIXED + t->heap[i].len;
    if (need > t->img_cap) {
        uint8_t *p = realloc(t->img, need);
        if (p == NULL)
            return NULL;
        t->img = p;
        t->img_cap = need;
    }
    uint8_t *w = t->img;
    for (uint32_t i = 0; i < t->k; i++) {
        const slot *s = &t->heap[i];
        w[0] = s->used;
        put32(w + 1, s->fp);
        put32(w + 5, s->count);
        put32(w + 9, s->len);
        if (s->len)
            memcpy(w + SLOT_FIXED, s->item, s->len);
        w += SLOT_FIXED + s->len;
    }
    *len = need;
    return t->img;
}

static int cmp_slot(const void *a, const void *b, void *ctx)
{
    const slot *heap = ctx;
    const slot *x = &heap[*(const uint32_t *)a], *y = &heap[*(const uint32_t *)b];
    if (x->fp != y->fp)
        return x->fp < y->fp ? -1 : 1;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->len ? memcmp(x->item, y->item, x->len) : 0;
}

/* 1 when two used slots hold the same item, 0 when not, BLOOMERY_ENOMEM. */
static int has_duplicate(slot *heap, uint32_t k)
{
    uint32_t *idx = malloc((size_t)k * sizeof(*idx));
    if (idx == NULL)
        return BLOOMERY_ENOMEM;
    uint32_t n = 0;
    for (uint32_t i = 0; i < k; i++)
        if (heap[i].used)
            idx[n++] = i;
    qsort_r(idx, n, sizeof(*idx), cmp_slot, heap);
    int dup = 0;
    for (uint32_t i = 1; i < n && !dup; i++)
        dup = cmp_slot(&idx[i - 1], &idx[i], heap) == 0;
    free(idx);
    return dup;
}

int topk_load_heap(topk_t *t, const uint8_t *img, size_t len, uint64_t rng)
{
    slot *heap = calloc(t->k, sizeof(slot));
    if (heap == NULL)
        return BLOOMERY_ENOMEM;
    uint64_t bytes = 0;
    size_t off = 0;
    int rc = BLOOMERY_OK;
    for (uint32_t i = 0; i < t->k && rc == BLOOMERY_OK; i++) {
        if (len - off < SLOT_FIXED) {
            rc = BLOOMERY_ECORRUPT;
            break;
        }
        const uint8_t *p = img + off;
        slot *s = &heap[i];
        s->fp = get32(p + 1);
        s->count = get32(p + 5);
        s->len = get32(p + 9);
        off += SLOT_FIXED;
        if (p[0] > 1 || s->len > len - off) {
            rc = BLOOMERY_ECORRUPT;
            break;
        }
        s->used = p[0] == 1;
        if (!s->used) {
            if (s->fp || s->count || s->len)
                rc = BLOOMERY_ECORRUPT;
            continue;
        }
        if (fingerprint(img + off, s->len) != s->fp) {
            rc = BLOOMERY_ECORRUPT;
            break;
        }
        s->cap = s->len < 16 ? 16 : s->len;
        s->item = malloc(s->cap);
        if (s->item == NULL) {
            rc = BLOOMERY_ENOMEM;
            break;
        }
        memcpy(s->item, img + off, s->len);
        bytes += s->cap;
        off += s->len;
    }
    if (rc == BLOOMERY_OK && off != len)
        rc = BLOOMERY_ECORRUPT;
    if (rc == BLOOMERY_OK) {
        int dup = has_duplicate(heap, t->k);
        rc = dup < 0 ? dup : dup ? BLOOMERY_ECORRUPT : BLOOMERY_OK;
    }
    if (rc != BLOOMERY_OK) {
        for (uint32_t i = 0; i < t->k; i++)
            free(heap[i].item);
        free(heap);
        return rc;
    }
    for (uint32_t i = 0; i < t->k; i++)
        free(t->heap[i].item);
    free(t->heap);
    t->heap = heap;
    t->item_bytes = bytes + t->spare_cap;
    t->rng = rng;
    return BLOOMERY_OK;
}

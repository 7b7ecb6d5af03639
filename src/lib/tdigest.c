/* t-digest with RedisBloom's compression semantics (contract in tdigest.h).
 *
 *   nodes[0 .. cap)
 *   +----------------------+------------------+---------------+
 *   | merged centroids     | buffer (adds and | zero          |
 *   | sorted by mean       | merged-in nodes) |               |
 *   +----------------------+------------------+---------------+
 *   0                 merged_nodes      merged + unmerged      cap
 *
 * An add appends to the buffer; when the array is full, compress() sorts
 * every used node by (mean, weight) and merges neighbours in one pass under
 * the k-scale rule of tdigest.h. The total order makes the result the same
 * whatever sort runs. The buffer is radix-sorted beside the array, on the
 * stack for compressions up to 105, and merged with the sorted centroids;
 * should a larger digest's buffer not be allocated, an introsort runs in
 * place, so an add never fails half-way. Queries run on a merged view:
 * the merged nodes as they are when the buffer is empty, else a compressed
 * copy, so reading never changes the bytes a log replay must reproduce.
 */
#include "bloomery/tdigest.h"
#include "bloomery/bloomery.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tdigest.c serializes its node array as is: little-endian hosts only"
#endif

_Static_assert(sizeof(tdigest_node) == 16, "a node is 16 bytes, the serialized layout");

struct tdigest {
    tdigest_state st;
    uint64_t cap;
    tdigest_node *nodes;
};

uint64_t tdigest_capacity_for(uint64_t compression)
{
    if (compression == 0 || compression > TDIGEST_MAX_COMPRESSION)
        return 0;
    return 6 * compression + 10;
}

uint64_t tdigest_bytes_for(uint64_t compression)
{
    uint64_t cap = tdigest_capacity_for(compression);
    return cap ? sizeof(tdigest_t) + cap * sizeof(tdigest_node) : 0;
}

int tdigest_create(tdigest_t **out, uint64_t compression)
{
    *out = NULL;
    uint64_t cap = tdigest_capacity_for(compression);
    if (cap == 0)
        return BLOOMERY_EINVAL;
    if (cap > SIZE_MAX / sizeof(tdigest_node))
        return BLOOMERY_ETOOBIG;
    tdigest_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return BLOOMERY_ENOMEM;
    t->nodes = calloc((size_t)cap, sizeof(tdigest_node));
    if (t->nodes == NULL) {
        free(t);
        return BLOOMERY_ENOMEM;
    }
    t->cap = cap;
    t->st.compression = compression;
    *out = t;
    return BLOOMERY_OK;
}

void tdigest_free(tdigest_t *t)
{
    if (t == NULL)
        return;
    free(t->nodes);
    free(t);
}

void tdigest_reset(tdigest_t *t)
{
    uint64_t c = t->st.compression;
    memset(t->nodes, 0, (size_t)t->cap * sizeof(tdigest_node));
    memset(&t->st, 0, sizeof(t->st));
    t->st.compression = c;
}

/* ---- compression ---- */

/* The order of nodes: by mean, -0 before +0, then by weight. Equal keys
 * are equal nodes, so every sort gives the same array. A mean's key is its
 * bits with the sign bit flipped, or all bits flipped when negative, which
 * orders as the doubles do but for -0 < +0 (means are finite). */
static inline uint64_t mean_key(double mean)
{
    uint64_t u;
    memcpy(&u, &mean, sizeof(u));
    return u ^ ((uint64_t)((int64_t)u >> 63) | UINT64_C(0x8000000000000000));
}

static inline unsigned __int128 node_key(const tdigest_node *a)
{
    return (unsigned __int128)mean_key(a->mean) << 64 | a->weight;
}

static inline int node_less(const tdigest_node *a, const tdigest_node *b)
{
    return node_key(a) < node_key(b);
}

static void sift_down(tdigest_node *a, size_t i, size_t n)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && node_less(&a[c], &a[c + 1]))
            c++;
        if (!node_less(&a[i], &a[c]))
            return;
        tdigest_node tmp = a[i];
        a[i] = a[c];
        a[c] = tmp;
        i = c;
    }
}

static void heap_sort(tdigest_node *a, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        sift_down(a, i, n);
    for (size_t end = n - 1; end > 0; end--) {
        tdigest_node tmp = a[0];
        a[0] = a[end];
        a[end] = tmp;
        sift_down(a, 0, end);
    }
}

static void insertion_sort(tdigest_node *a, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        tdigest_node x = a[i];
        size_t j = i;
        for (; j > 0 && node_less(&x, &a[j - 1]); j--)
            a[j] = a[j - 1];
        a[j] = x;
    }
}

/* Introsort: quicksort with a median-of-three pivot, insertion sort for
 * short ranges and heapsort past a depth limit, so O(n log n) whatever the
 * input. Keys are totally ordered, so every sort gives the same array.
 * Against heapsort alone, TDIGEST.ADD of 100 values went from 0.130 to
 * 0.109 us of server CPU per value, pipelined (bench/server/tdigest --quick). */
static void intro_sort(tdigest_node *a, size_t n, unsigned depth)
{
    while (n > 16) {
        if (depth-- == 0) {
            heap_sort(a, n);
            return;
        }
        tdigest_node *m = &a[n / 2], *z = &a[n - 1], tmp;
        if (node_less(m, a))
            tmp = *m, *m = *a, *a = tmp;
        if (node_less(z, a))
            tmp = *z, *z = *a, *a = tmp;
        if (node_less(z, m))
            tmp = *z, *z = *m, *m = tmp;
        tdigest_node pivot = *m;
        size_t i = 0, j = n - 1;
        for (;;) {
            while (node_less(&a[i], &pivot))
                i++;
            while (node_less(&pivot, &a[j]))
                j--;
            if (i >= j)
                break;
            tmp = a[i], a[i] = a[j], a[j] = tmp;
            i++;
            j--;
        }
        /* a[0..j] <= pivot <= a[j+1..n): recurse into the smaller side. */
        size_t left = j + 1;
        if (left < n - left) {
            intro_sort(a, left, depth);
            a += left;
            n -= left;
        } else {
            intro_sort(a + left, n - left, depth);
            n = left;
        }
    }
    insertion_sort(a, n);
}

static void intro_sort_all(tdigest_node *a, size_t n)
{
    unsigned depth = 0;
    for (size_t k = n; k > 1; k >>= 1)
        depth += 2;
    intro_sort(a, n, depth);
}

/* Buffer nodes a compression sorts on the stack, in two arrays of them
 * (20 KiB): the whole buffer of a digest of compression up to 105. */
#define STACK_NODES 640

/* Byte d of a node's key: bytes 0-7 of the weight, then 0-7 of mean_key. */
static inline unsigned key_byte(const tdigest_node *x, unsigned d)
{
    uint64_t v = d < 8 ? x->weight : mean_key(x->mean);
    return (unsigned)(v >> (8 * (d & 7))) & 255;
}

/* Stable counting sort of src[0..n) into dst by key byte d. */
static void radix_pass(const tdigest_node *src, tdigest_node *dst, size_t n, unsigned d)
{
    size_t at[256] = {0};
    for (size_t i = 0; i < n; i++)
        at[key_byte(&src[i], d)]++;
    size_t sum = 0;
    for (unsigned v = 0; v < 256; v++) {
        size_t c = at[v];
        at[v] = sum;
        sum += c;
    }
    for (size_t i = 0; i < n; i++)
        dst[at[key_byte(&src[i], d)]++] = src[i];
}

/* Sort a[0..n) by node_less into a or tmp, returning which: a byte of the
 * key at a time from the least significant, skipping the bytes that every
 * key shares (the weights of a buffer of adds are all 1, whole numbers leave
 * the low bytes of a mean zero). */
static tdigest_node *radix_sort(tdigest_node *a, tdigest_node *tmp, size_t n)
{
    uint64_t w_or = 0, w_and = UINT64_MAX, k_or = 0, k_and = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = mean_key(a[i].mean);
        w_or |= a[i].weight;
        w_and &= a[i].weight;
        k_or |= k;
        k_and &= k;
    }
    tdigest_node *src = a, *dst = tmp;
    for (unsigned d = 0; d < 16; d++) {
        uint64_t varies = d < 8 ? w_or ^ w_and : k_or ^ k_and;
        if (((varies >> (8 * (d & 7))) & 255) == 0)
            continue;
        radix_pass(src, dst, n, d);
        tdigest_node *x = src;
        src = dst;
        dst = x;
    }
    return src;
}

/* p if t is 0, else q, without a branch. */
static inline const tdigest_node *pick(int t, const tdigest_node *p, const tdigest_node *q)
{
    uintptr_t x = (uintptr_t)p, y = (uintptr_t)q;
    return (const tdigest_node *)(x ^ ((x ^ y) & (0 - (uintptr_t)t)));
}

/* Sort a[0..n), of which a[0..sorted) should be in order already (the
 * merged centroids; checked, as a loaded image's need not be). The rest is
 * radix-sorted beside the array and merged into it from the end, choosing
 * without branches. A comparison sort's branches on random means
 * mispredict about half the time: the introsort of every node was half the
 * server's CPU for TDIGEST.ADD. With this sort TDIGEST.ADD of 100 values
 * pipelined went from 0.081 to 0.058-0.072 us of server CPU per value (load 3.5). */
static void sort_nodes(tdigest_node *a, size_t sorted, size_t n)
{
    for (size_t i = 1; i < sorted; i++)
        if (node_less(&a[i], &a[i - 1])) {
            sorted = 0;
            break;
        }
    size_t b = n - sorted;
    if (b <= 16) {
        insertion_sort(a, n);
        return;
    }
    tdigest_node stack[2 * STACK_NODES];
    tdigest_node *buf = b <= STACK_NODES ? stack : malloc(2 * b * sizeof(*buf));
    if (buf == NULL) {
        intro_sort_all(a, n);
        return;
    }
    memcpy(buf, a + sorted, b * sizeof(*buf));
    const tdigest_node *s = radix_sort(buf, buf + b, b);
    size_t i = sorted, j = b, k = n;
    while (i > 0 && j > 0) {
        int t = node_less(&s[j - 1], &a[i - 1]);
        a[--k] = *pick(t, &s[j - 1], &a[i - 1]);
        i -= (size_t)t;
        j -= (size_t)!t;
    }
    memcpy(a, s, j * sizeof(*s));
    if (buf != stack)
        free(buf);
}

/* x1 and x2 weighted by w1 and w2 (w1 + w2 > 0), kept between them:
 * RedisBloom's arithmetic, so that answers match it to the bit, or the
 * weights split first when the products overflow (means near DBL_MAX). */
static double weighted(double x1, double w1, double x2, double w2)
{
    double s = w1 + w2;
    double x = (x1 * w1 + x2 * w2) / s;
    if (!isfinite(x))
        x = x1 * (w1 / s) + x2 * (w2 / s);
    double lo = x1 < x2 ? x1 : x2, hi = x1 < x2 ? x2 : x1;
    return x < lo ? lo : x > hi ? hi : x;
}

/* The mean of cur (its weight already including next's) after absorbing
 * next, computed as RedisBloom does so that the same adds give the same
 * bits; the split form when the difference of the means overflows. */
static double merged_mean(const tdigest_node *cur, const tdigest_node *next)
{
    double delta = next->mean - cur->mean;
    double w = (double)cur->weight, wn = (double)next->weight;
    if (!isfinite(delta))
        return weighted(cur->mean, w - wn, next->mean, wn);
    double m = cur->mean + delta * wn / w;
    return m < cur->mean ? cur->mean : m > next->mean ? next->mean : m;
}

/* Sort nodes[0..used) (nodes[0..sorted) the merged centroids, in order)
 * and merge them under the k-scale rule; returns the number of centroids,
 * nodes past them zeroed. total is their weight. */
static uint64_t compress_nodes(tdigest_node *nodes, uint64_t sorted, uint64_t used, uint64_t total,
                               uint64_t compression)
{
    sort_nodes(nodes, (size_t)sorted, (size_t)used);
    if (used < 2 || total <= 1)
        return used;
    double W = (double)total;
    double normalizer = (double)compression / (2 * M_PI * W * log(W));
    uint64_t cur = 0;
    double so_far = 0;
    /* q0 (1 - q0) changes only with so_far: computed once per centroid. */
    double q0 = so_far / W, lim0 = q0 * (1 - q0);
    for (uint64_t i = 1; i < used; i++) {
        double proposed = (double)nodes[cur].weight + (double)nodes[i].weight;
        double z = proposed * normalizer;
        double q2 = (so_far + proposed) / W;
        if (z <= lim0 && z <= q2 * (1 - q2)) {
            nodes[cur].weight += nodes[i].weight;
            nodes[cur].mean = merged_mean(&nodes[cur], &nodes[i]);
        } else {
            so_far += (double)nodes[cur].weight;
            q0 = so_far / W;
            lim0 = q0 * (1 - q0);
            nodes[++cur] = nodes[i];
        }
    }
    uint64_t k = cur + 1;
    memset(nodes + k, 0, (size_t)(used - k) * sizeof(*nodes));
    return k;
}

static void compress(tdigest_t *t)
{
    tdigest_state *s = &t->st;
    if (s->unmerged_nodes == 0)
        return;
    uint64_t total = s->merged_weight + s->unmerged_weight;
    s->merged_nodes = compress_nodes(t->nodes, s->merged_nodes, s->merged_nodes + s->unmerged_nodes,
                                     total, s->compression);
    s->merged_weight = total;
    s->unmerged_nodes = 0;
    s->unmerged_weight = 0;
    s->total_compressions++;
}

/* Append one node, compressing first when the array is one short of full,
 * as RedisBloom does, so that the same adds leave the same centroids. The
 * caller checked the weight limit. */
static int push(tdigest_t *t, double mean, uint64_t weight)
{
    tdigest_state *s = &t->st;
    if (s->merged_nodes + s->unmerged_nodes >= t->cap - 1)
        compress(t);
    /* A full array always compresses: two middle neighbours of total weight
     * w merge once w c / (2 pi W ln W) <= 1/4, and with 6c + 10 nodes some
     * neighbouring pair weighs at most about W / 3c. Guarded all the same. */
    if (s->merged_nodes + s->unmerged_nodes >= t->cap)
        return BLOOMERY_EFULL;
    tdigest_node *n = &t->nodes[s->merged_nodes + s->unmerged_nodes];
    n->mean = mean;
    n->weight = weight;
    s->unmerged_nodes++;
    s->unmerged_weight += weight;
    if (s->merged_weight + s->unmerged_weight == weight) {
        s->min = s->max = mean;
    } else {
        if (mean < s->min)
            s->min = mean;
        if (mean > s->max)
            s->max = mean;
    }
    return BLOOMERY_OK;
}

uint64_t tdigest_count(const tdigest_t *t) { return t->st.merged_weight + t->st.unmerged_weight; }

int tdigest_add(tdigest_t *t, const double *values, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(values[i]))
            return BLOOMERY_EINVAL;
    if (n > TDIGEST_MAX_WEIGHT - tdigest_count(t))
        return BLOOMERY_ETOOBIG;
    for (size_t i = 0; i < n; i++)
        if (push(t, values[i], 1) != BLOOMERY_OK)
            return BLOOMERY_EFULL;
    return BLOOMERY_OK;
}

/* ---- merged views ---- */

typedef struct view {
    const tdigest_node *nodes;
    uint64_t n;
    double W, min, max;
    tdigest_node *owned;
} view;

static int view_of(const tdigest_t *t, view *v)
{
    const tdigest_state *s = &t->st;
    uint64_t used = s->merged_nodes + s->unmerged_nodes;
    uint64_t total = tdigest_count(t);
    memset(v, 0, sizeof(*v));
    v->W = (double)total;
    v->min = s->min;
    v->max = s->max;
    if (s->unmerged_nodes == 0) {
        v->nodes = t->nodes;
        v->n = s->merged_nodes;
        return BLOOMERY_OK;
    }
    v->owned = malloc((size_t)used * sizeof(tdigest_node));
    if (v->owned == NULL)
        return BLOOMERY_ENOMEM;
    memcpy(v->owned, t->nodes, (size_t)used * sizeof(tdigest_node));
    v->n = compress_nodes(v->owned, s->merged_nodes, used, total, s->compression);
    v->nodes = v->owned;
    return BLOOMERY_OK;
}

static void view_free(view *v) { free(v->owned); }

int tdigest_merge(tdigest_t *dst, const tdigest_t *const *srcs, size_t n)
{
    uint64_t total = tdigest_count(dst);
    for (size_t i = 0; i < n; i++) {
        if (srcs[i] == NULL)
            continue;
        uint64_t c = tdigest_count(srcs[i]);
        if (c > TDIGEST_MAX_WEIGHT - total)
            return BLOOMERY_ETOOBIG;
        total += c;
    }
    /* Every view before dst changes: a source may be dst. */
    view *views = calloc(n ? n : 1, sizeof(*views));
    if (views == NULL)
        return BLOOMERY_ENOMEM;
    int rc = BLOOMERY_OK;
    for (size_t i = 0; i < n && rc == BLOOMERY_OK; i++)
        if (srcs[i])
            rc = view_of(srcs[i], &views[i]);
    if (rc == BLOOMERY_OK) {
        /* RedisBloom merges each source into a compressed destination:
         * the sources before the last one end up merged. */
        for (size_t i = 0; i < n && rc == BLOOMERY_OK; i++) {
            if (srcs[i] == NULL)
                continue;
            compress(dst);
            for (uint64_t j = 0; j < views[i].n && rc == BLOOMERY_OK; j++)
                rc = push(dst, views[i].nodes[j].mean, views[i].nodes[j].weight);
        }
    }
    for (size_t i = 0; i < n; i++)
        view_free(&views[i]);
    free(views);
    return rc;
}

/* ---- queries ---- */

double tdigest_min(const tdigest_t *t) { return tdigest_count(t) ? t->st.min : NAN; }
double tdigest_max(const tdigest_t *t) { return tdigest_count(t) ? t->st.max : NAN; }

/* (x - lo) / (hi - lo) for lo <= x <= hi, hi > lo, without overflowing
 * when the span exceeds DBL_MAX. */
static double frac(double x, double lo, double hi)
{
    double span = hi - lo;
    if (isfinite(span))
        return (x - lo) / span;
    return (x / 2 - lo / 2) / (hi / 2 - lo / 2);
}

/* x within [lo, hi]; NAN stays NAN. */
static double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

static double quantile_of(const view *v, double q)
{
    if (v->n == 0 || !(q >= 0 && q <= 1))
        return NAN;
    const tdigest_node *c = v->nodes;
    uint64_t n = v->n;
    if (n == 1)
        return c[0].mean;
    double W = v->W, index = q * W;
    if (index < 1)
        return v->min;
    /* One value of an end centroid of weight > 2 is its extreme: the rest
     * spreads between the extreme and the mean. */
    double wl = (double)c[0].weight, wr = (double)c[n - 1].weight;
    if (wl > 2 && index < wl / 2)
        return v->min + (index - 1) / (wl / 2 - 1) * (c[0].mean - v->min);
    if (index > W - 1)
        return v->max;
    if (wr > 2 && W - index <= wr / 2)
        return v->max - (W - index - 1) / (wr / 2 - 1) * (v->max - c[n - 1].mean);
    double so_far = wl / 2;
    for (uint64_t i = 0; i + 1 < n; i++) {
        double w = (double)c[i].weight, wn = (double)c[i + 1].weight;
        double dw = (w + wn) / 2;
        if (so_far + dw <= index) {
            so_far += dw;
            continue;
        }
        /* A unit centroid is one value: no interpolation inside it. */
        double left = 0, right = 0;
        if (c[i].weight == 1) {
            if (index - so_far < 0.5)
                return c[i].mean;
            left = 0.5;
        }
        if (c[i + 1].weight == 1) {
            if (so_far + dw - index <= 0.5)
                return c[i + 1].mean;
            right = 0.5;
        }
        double z1 = index - so_far - left, z2 = so_far + dw - index - right;
        return weighted(c[i].mean, z2, c[i + 1].mean, z1);
    }
    double z1 = index - (W - wr / 2), z2 = wr / 2 - z1;
    if (z1 <= 0)
        return c[n - 1].mean;
    if (z2 <= 0)
        return v->max;
    return weighted(c[n - 1].mean, z2, v->max, z1);
}

static double cdf_of(const view *v, double x)
{
    if (v->n == 0 || isnan(x))
        return NAN;
    if (x < v->min)
        return 0;
    if (x > v->max)
        return 1;
    const tdigest_node *c = v->nodes;
    uint64_t n = v->n;
    double W = v->W;
    if (n == 1)
        return 0.5;
    double m0 = c[0].mean, w0 = (double)c[0].weight;
    if (x < m0) {
        if (!(m0 - v->min > 0))
            return 0;
        if (x == v->min)
            return 0.5 / W;
        return (1 + frac(x, v->min, m0) * (w0 / 2 - 1)) / W;
    }
    double ml = c[n - 1].mean, wl = (double)c[n - 1].weight;
    if (x > ml) {
        if (!(v->max - ml > 0))
            return 1;
        if (x == v->max)
            return 1 - 0.5 / W;
        double g = (v->max - x) / (v->max - ml);
        if (!isfinite(g))
            g = 1 - frac(x, ml, v->max);
        return 1 - (1 + g * (wl / 2 - 1)) / W;
    }
    double so_far = 0;
    for (uint64_t i = 0; i + 1 < n; i++) {
        if (c[i].mean == x) {
            /* Centroids at exactly x count half. */
            double dw = 0;
            for (; i < n && c[i].mean == x; i++)
                dw += (double)c[i].weight;
            return (so_far + dw / 2) / W;
        }
        double w = (double)c[i].weight, wn = (double)c[i + 1].weight;
        if (c[i].mean < x && x < c[i + 1].mean) {
            double left = 0, right = 0;
            if (c[i].weight == 1) {
                if (c[i + 1].weight == 1)
                    return (so_far + 1) / W;
                left = 0.5;
            } else if (c[i + 1].weight == 1) {
                right = 0.5;
            }
            double dw = (w + wn) / 2;
            double base = so_far + w / 2 + left;
            double part = (dw - left - right) * (x - c[i].mean) / (c[i + 1].mean - c[i].mean);
            if (!isfinite(part))
                part = (dw - left - right) * frac(x, c[i].mean, c[i + 1].mean);
            return (base + part) / W;
        }
        so_far += w;
    }
    return 1 - 0.5 / W;
}

int tdigest_quantiles(const tdigest_t *t, const double *q, double *out, size_t n)
{
    view v;
    int rc = view_of(t, &v);
    if (rc != BLOOMERY_OK)
        return rc;
    /* Weights past 2^53 are not exact in a double: keep the
     * interpolations' rounding inside the data's range. */
    for (size_t i = 0; i < n; i++)
        out[i] = clamp(quantile_of(&v, q[i]), v.min, v.max);
    view_free(&v);
    return BLOOMERY_OK;
}

int tdigest_cdfs(const tdigest_t *t, const double *x, double *out, size_t n)
{
    view v;
    int rc = view_of(t, &v);
    if (rc != BLOOMERY_OK)
        return rc;
    for (size_t i = 0; i < n; i++)
        out[i] = clamp(cdf_of(&v, x[i]), 0, 1);
    view_free(&v);
    return BLOOMERY_OK;
}

/* RedisBloom's rounding of a rank: halves go down. */
static double half_round_down(double f)
{
    double ip;
    double fp = modf(f, &ip);
    if (fabs(fp) <= 0.5)
        return ip;
    return ip >= 0 ? ip + 1 : ip - 1;
}

int tdigest_ranks(const tdigest_t *t, const double *x, int64_t *out, size_t n, int reverse)
{
    view v;
    int rc = view_of(t, &v);
    if (rc != BLOOMERY_OK)
        return rc;
    double size = v.W;
    for (size_t i = 0; i < n; i++) {
        if (size == 0)
            out[i] = -2;
        else if (x[i] < v.min)
            out[i] = reverse ? (int64_t)size : -1;
        else if (x[i] > v.max)
            out[i] = reverse ? -1 : (int64_t)size;
        else if (reverse)
            out[i] = (int64_t)round(size - round(cdf_of(&v, x[i]) * size));
        else
            out[i] = (int64_t)half_round_down(cdf_of(&v, x[i]) * size);
    }
    view_free(&v);
    return BLOOMERY_OK;
}

int tdigest_by_ranks(const tdigest_t *t, const uint64_t *r, double *out, size_t n, int reverse)
{
    view v;
    int rc = view_of(t, &v);
    if (rc != BLOOMERY_OK)
        return rc;
    double size = v.W;
    for (size_t i = 0; i < n; i++) {
        double rank = (double)r[i];
        if (size == 0)
            out[i] = NAN;
        else if (r[i] == 0)
            out[i] = reverse ? v.max : v.min;
        else if (rank >= size)
            out[i] = reverse ? -INFINITY : INFINITY;
        else
            out[i] =
                clamp(quantile_of(&v, (reverse ? size - rank - 1 : rank) / size), v.min, v.max);
    }
    view_free(&v);
    return BLOOMERY_OK;
}

int tdigest_trimmed_mean(const tdigest_t *t, double lo, double hi, double *out)
{
    *out = NAN;
    if (!(lo >= 0 && lo <= 1 && hi >= 0 && hi <= 1))
        return BLOOMERY_OK;
    view v;
    int rc = view_of(t, &v);
    if (rc != BLOOMERY_OK)
        return rc;
    if (v.n == 1) {
        *out = v.nodes[0].mean;
    } else if (v.n > 1) {
        double left = floor(v.W * lo), right = ceil(v.W * hi);
        double norm = right - left > 0 ? right - left : 1;
        double done = 0, sum = 0, kept = 0, scaled = 0;
        for (uint64_t i = 0; i < v.n; i++) {
            double w = (double)v.nodes[i].weight, add = w;
            double skip = left - done > 0 ? left - done : 0;
            add -= skip < add ? skip : add;
            double room = right - done > 0 ? right - done : 0;
            add = room < add ? room : add;
            done += w;
            sum += v.nodes[i].mean * add;
            /* The same in shares of the kept weight, which cannot overflow
             * for values near DBL_MAX. */
            scaled += v.nodes[i].mean * (add / norm);
            kept += add;
            if (done >= right)
                break;
        }
        *out = isfinite(sum) ? sum / kept : scaled / (kept / norm);
    }
    view_free(&v);
    return BLOOMERY_OK;
}

/* ---- state ---- */

void tdigest_state_of(const tdigest_t *t, tdigest_state *st) { *st = t->st; }
uint64_t tdigest_capacity(const tdigest_t *t) { return t->cap; }
uint64_t tdigest_bytes(const tdigest_t *t) { return sizeof(*t) + t->cap * sizeof(tdigest_node); }
const tdigest_node *tdigest_nodes(const tdigest_t *t) { return t->nodes; }
tdigest_node *tdigest_nodes_mut(tdigest_t *t) { return t->nodes; }

static int check_state(const tdigest_t *t, const tdigest_state *st)
{
    if (st->compression != t->st.compression || st->merged_nodes > t->cap ||
        st->unmerged_nodes > t->cap - st->merged_nodes)
        return BLOOMERY_ECORRUPT;
    uint64_t used = st->merged_nodes + st->unmerged_nodes;
    uint64_t sums[2] = {0, 0};
    for (uint64_t i = 0; i < used; i++) {
        const tdigest_node *n = &t->nodes[i];
        int part = i >= st->merged_nodes;
        if (!isfinite(n->mean) || n->weight == 0 || n->weight > TDIGEST_MAX_WEIGHT - sums[part])
            return BLOOMERY_ECORRUPT;
        if (!part && i > 0 && n->mean < t->nodes[i - 1].mean)
            return BLOOMERY_ECORRUPT;
        if (n->mean < st->min || n->mean > st->max)
            return BLOOMERY_ECORRUPT;
        sums[part] += n->weight;
    }
    if (sums[0] != st->merged_weight || sums[1] != st->unmerged_weight ||
        sums[0] > TDIGEST_MAX_WEIGHT - sums[1])
        return BLOOMERY_ECORRUPT;
    for (uint64_t i = used; i < t->cap; i++)
        if (t->nodes[i].weight != 0 || memcmp(&t->nodes[i].mean, &(double){0}, sizeof(double)))
            return BLOOMERY_ECORRUPT;
    if (used == 0)
        return st->min == 0 && st->max == 0 && !signbit(st->min) && !signbit(st->max) &&
                       st->total_compressions == 0
                   ? BLOOMERY_OK
                   : BLOOMERY_ECORRUPT;
    if (!isfinite(st->min) || !isfinite(st->max) || st->min > st->max)
        return BLOOMERY_ECORRUPT;
    return BLOOMERY_OK;
}

int tdigest_restore(tdigest_t *t, const tdigest_state *st)
{
    if (check_state(t, st) != BLOOMERY_OK) {
        tdigest_reset(t);
        return BLOOMERY_ECORRUPT;
    }
    t->st = *st;
    return BLOOMERY_OK;
}

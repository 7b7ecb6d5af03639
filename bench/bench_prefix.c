/* Prefix filter against the blocked filter and RedisBloom's classic layout
 * at the same request (capacity, error rate), as a non-scaling filter is
 * sized: bits per item, false-positive rate measured at capacity, and ns per
 * check of an absent item and per add, single-threaded.
 *
 *   bench_prefix [--items N | --gib G] [--ops N]
 *
 * Each filter is filled with N random 16-byte items (adds timed as they go:
 * the mean over an empty-to-full fill), then probed with max(ops, 100/p)
 * other items for the rate and timed over `ops` of them, best of three;
 * then min(ops, N/10) more items are added to the full filter ("at
 * capacity"). Items are made in chunks as the fill goes, so N may be
 * billions. --gib G sizes the prefix and blocked filters (only) at p = 0.01
 * for G GiB of prefix bins: the big-filter rows of the library's add/check
 * comparison.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bloomery/bloomery.h"

#define KEY_LEN 16
#define GROUP 64

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct keys {
    uint8_t *data;
    const void **ptr;
    size_t *len;
    uint64_t n;
} keys;

#define CHUNK (1u << 20)

/* Items first .. first + n - 1 of a stream (the same bytes whatever the
 * chunking). */
static keys make_keys_at(uint64_t n, uint64_t stream, uint64_t first)
{
    keys k = {malloc(n * KEY_LEN), malloc(n * sizeof(void *)), malloc(n * sizeof(size_t)), n};
    if (!k.data || !k.ptr || !k.len) {
        fprintf(stderr, "bench_prefix: out of memory for keys\n");
        exit(1);
    }
    uint64_t s = (0x5eed ^ (stream * 0x1000193ULL)) + 2 * first * 0x9e3779b97f4a7c15ULL;
    for (uint64_t i = 0; i < 2 * n; i++) {
        uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= (z >> 31) ^ (i & 1 ? stream : 0);
        memcpy(k.data + i * 8, &z, 8);
    }
    for (uint64_t i = 0; i < n; i++) {
        k.ptr[i] = k.data + i * KEY_LEN;
        k.len[i] = KEY_LEN;
    }
    return k;
}

static keys make_keys(uint64_t n, uint64_t stream) { return make_keys_at(n, stream, 0); }

static void free_keys(keys *k)
{
    free(k->data);
    free(k->ptr);
    free(k->len);
}

/* The three layouts behind one set of calls. */
typedef struct layout {
    const char *name;
    void *(*create)(uint64_t n, double p);
    void (*destroy)(void *f);
    uint64_t (*bytes)(const void *f);
    void (*add)(void *f, const keys *k, uint64_t i, size_t g);
    void (*check)(const void *f, const keys *k, uint64_t i, size_t g, uint8_t *out);
    bool (*check_one)(const void *f, const void *item, size_t len);
} layout;

static void *pf_new(uint64_t n, double p)
{
    pf_t *f;
    return pf_create(&f, n, p, 1) == BLOOMERY_OK ? f : NULL;
}
static void pf_del(void *f) { pf_free(f); }
static uint64_t pf_size(const void *f) { return pf_bytes(f); }
static void pf_put(void *f, const keys *k, uint64_t i, size_t g)
{
    pf_add_many(f, k->ptr + i, k->len + i, g, NULL);
}
static void pf_get(const void *f, const keys *k, uint64_t i, size_t g, uint8_t *out)
{
    pf_check_many(f, k->ptr + i, k->len + i, g, out);
}
static bool pf_one(const void *f, const void *item, size_t len) { return pf_check(f, item, len); }

static void *bf_new(uint64_t n, double p)
{
    bf_options o = {.seed = 1, .policy = BLOOMERY_POLICY_MEMORY};
    bf_t *f;
    return bf_create(&f, n, p, &o) == BLOOMERY_OK ? f : NULL;
}
static void bf_del(void *f) { bf_free(f); }
static uint64_t bf_size(const void *f) { return bf_bytes(f); }
static void bf_put(void *f, const keys *k, uint64_t i, size_t g)
{
    bf_add_many(f, k->ptr + i, k->len + i, g, NULL);
}
static void bf_get(const void *f, const keys *k, uint64_t i, size_t g, uint8_t *out)
{
    bf_check_many(f, k->ptr + i, k->len + i, g, out);
}
static bool bf_one(const void *f, const void *item, size_t len) { return bf_check(f, item, len); }

static void *cbf_new(uint64_t n, double p)
{
    cbf_t *f;
    return cbf_create(&f, n, p) == BLOOMERY_OK ? f : NULL;
}
static void cbf_del(void *f) { cbf_free(f); }
static uint64_t cbf_size(const void *f) { return cbf_bytes(f); }
static void cbf_put(void *f, const keys *k, uint64_t i, size_t g)
{
    for (size_t j = 0; j < g; j++)
        cbf_add(f, k->ptr[i + j], k->len[i + j]);
}
static void cbf_get(const void *f, const keys *k, uint64_t i, size_t g, uint8_t *out)
{
    for (size_t j = 0; j < g; j++)
        out[j] = cbf_check(f, k->ptr[i + j], k->len[i + j]);
}
static bool cbf_one(const void *f, const void *item, size_t len) { return cbf_check(f, item, len); }

static const layout layouts[] = {
    {"prefix", pf_new, pf_del, pf_size, pf_put, pf_get, pf_one},
    {"blocked (memory policy)", bf_new, bf_del, bf_size, bf_put, bf_get, bf_one},
    {"classic (RedisBloom's)", cbf_new, cbf_del, cbf_size, cbf_put, cbf_get, cbf_one},
};

/* Adds items first .. first + n - 1 of a stream in chunks; the ns per add,
 * the making of the items not counted. */
static double timed_adds(const layout *l, void *f, uint64_t stream, uint64_t first, uint64_t n)
{
    double spent = 0;
    for (uint64_t c = 0; c < n; c += CHUNK) {
        uint64_t m = n - c < CHUNK ? n - c : CHUNK;
        keys k = make_keys_at(m, stream, first + c);
        double t0 = now();
        for (uint64_t i = 0; i < m; i += GROUP)
            l->add(f, &k, i, m - i < GROUP ? (size_t)(m - i) : GROUP);
        spent += now() - t0;
        free_keys(&k);
    }
    return spent * 1e9 / (double)n;
}

static volatile uint64_t sink;

static double time_checks(const layout *l, const void *f, const keys *q, uint64_t ops, int batched)
{
    double best = INFINITY;
    uint8_t out[GROUP];
    for (int r = 0; r < 3; r++) {
        uint64_t hits = 0;
        double t0 = now();
        for (uint64_t i = 0; i < ops; i += GROUP) {
            size_t g = ops - i < GROUP ? (size_t)(ops - i) : GROUP;
            if (batched) {
                l->check(f, q, i, g, out);
                for (size_t j = 0; j < g; j++)
                    hits += out[j];
            } else {
                for (size_t j = 0; j < g; j++)
                    hits += l->check_one(f, q->ptr[i + j], KEY_LEN);
            }
        }
        double t = (now() - t0) * 1e9 / (double)ops;
        best = t < best ? t : best;
        sink += hits;
    }
    return best;
}

int main(int argc, char **argv)
{
    uint64_t n = 10000000, ops = 2000000;
    double gib = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--items") == 0 && i + 1 < argc)
            n = (uint64_t)strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--gib") == 0 && i + 1 < argc)
            gib = strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc)
            ops = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: bench_prefix [--items N | --gib G] [--ops N]\n");
            return 2;
        }
    }
    const double rates[] = {1e-2, 1e-3, 1e-4, 1e-5};
    size_t nrates = sizeof rates / sizeof rates[0], nlayouts = sizeof layouts / sizeof layouts[0];
    if (gib > 0) {
        n = (uint64_t)(gib * 8 * 1073741824.0 / (pf_bytes_for(100000000, 0.01) * 8 / 1e8));
        nrates = 1;
        nlayouts = 2;
    }
    uint64_t more = ops < n / 10 ? ops : n / 10;
    printf("%llu items per filter; checks of absent items, best of 3 over %llu; adds: mean of "
           "the fill, then of %llu more at capacity\n\n",
           (unsigned long long)n, (unsigned long long)ops, (unsigned long long)more);
    printf("| p | layout | bits/item | measured FPR (probes) | ns/check single | ns/check batched "
           "| ns/add batched | ns/add batched at capacity | add / check batched |\n");
    printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t r = 0; r < nrates; r++) {
        double p = rates[r];
        uint64_t nq = (uint64_t)(100 / p) > ops ? (uint64_t)(100 / p) : ops;
        keys probes = make_keys(nq, 2 + r);
        for (size_t li = 0; li < nlayouts; li++) {
            const layout *l = &layouts[li];
            void *f = l->create(n, p);
            if (!f) {
                fprintf(stderr, "bench_prefix: cannot create %s\n", l->name);
                return 1;
            }
            double add_ns = timed_adds(l, f, 1, 0, n);
            uint64_t fp = 0;
            uint8_t out[GROUP];
            for (uint64_t i = 0; i < nq; i += GROUP) {
                size_t g = nq - i < GROUP ? (size_t)(nq - i) : GROUP;
                l->check(f, &probes, i, g, out);
                for (size_t j = 0; j < g; j++)
                    fp += out[j];
            }
            double single = time_checks(l, f, &probes, ops, 0);
            double batched = time_checks(l, f, &probes, ops, 1);
            double full_ns = timed_adds(l, f, 1, n, more);
            printf("| %g | %s | %.2f | %.3g (%llu) | %.1f | %.1f | %.1f | %.1f | %.2f |\n", p,
                   l->name, (double)l->bytes(f) * 8 / (double)n, (double)fp / (double)nq,
                   (unsigned long long)fp, single, batched, add_ns, full_ns, full_ns / batched);
            fflush(stdout);
            l->destroy(f);
        }
        free_keys(&probes);
    }
    return 0;
}

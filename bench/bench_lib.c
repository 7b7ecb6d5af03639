/* Library benchmark: ns per add, check and check-and-add, one item at a time
 * and in batches, for the blocked filter and the classic k-probe filter
 * (RedisBloom's layout, the reference), on a cache-resident 1 MiB filter and
 * a 4 GiB one, single-threaded.
 *
 * The 1 MiB filters are filled with real items to capacity. Filling 4 GiB
 * filters with ~3.4e9 items would take minutes, so they are brought to the
 * state a filter at capacity has: for the blocked filter every block draws its
 * item count from the Poisson distribution the sizing model uses and each
 * lane receives that many random bits; for the classic filter every bit is
 * set with probability 1 - e^(-kn/m). Timed operations then run through the
 * public API on real keys, and the FPR column is measured on that state.
 * Lookups are best of three runs; adds run once (a repeat would find its
 * items present). Adds into the 1 MiB filters go in slices of a tenth of
 * its capacity, the filter put back to its state at capacity (untimed)
 * before each, so every add meets a filter at capacity rather than one
 * that millions of adds have saturated. Last, scalable filters grown from
 * RedisBloom's defaults against reserved ones (blocked and prefix), and the
 * growing layout grown from the same defaults: checks of absent items visit
 * every link of a chain, one line of the growing table.
 *
 * --chains-only runs only the scalable filters, at 10^6 and 10^8 items.
 *
 *   bench_lib [--small-only] [--chains-only] [--ops N]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bloomery/bloomery.h"

#define KEY_LEN 16
#define GROUP 64

static uint64_t rng_state = 0x5eed;

static uint64_t next64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

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

/* n random 16-byte keys; distinct streams never collide in practice. */
static keys make_keys(uint64_t n, uint64_t stream)
{
    keys k = {malloc(n * KEY_LEN), malloc(n * sizeof(void *)), malloc(n * sizeof(size_t)), n};
    if (!k.data || !k.ptr || !k.len) {
        fprintf(stderr, "bench_lib: out of memory for keys\n");
        exit(1);
    }
    rng_state = 0x5eed ^ (stream * 0x1000193ULL);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t a = next64(), b = next64() ^ stream;
        memcpy(k.data + i * KEY_LEN, &a, 8);
        memcpy(k.data + i * KEY_LEN + 8, &b, 8);
        k.ptr[i] = k.data + i * KEY_LEN;
        k.len[i] = KEY_LEN;
    }
    return k;
}

static void free_keys(keys *k)
{
    free(k->data);
    free(k->ptr);
    free(k->len);
}

/* ---- synthetic fill at capacity ---- */

/* Lane words holding the union of i random bits, i = 0..MAXI. */
#define MAXI 160
#define SAMPLES 1024
static uint64_t lane_table[MAXI + 1][SAMPLES];

static void fill_blocked(bf_t *bf, uint64_t capacity)
{
    for (int i = 0; i <= MAXI; i++)
        for (int s = 0; s < SAMPLES; s++) {
            uint64_t w = 0;
            for (int j = 0; j < i; j++)
                w |= 1ULL << (next64() & 63);
            lane_table[i][s] = w;
        }
    uint64_t nblocks = bf_nblocks(bf);
    double lambda = (double)capacity * bf_blocks_per_key(bf) / (double)nblocks;
    /* Poisson CDF for inverse sampling. */
    double cdf[MAXI + 1], p = exp(-lambda), acc = 0;
    for (int i = 0; i <= MAXI; i++) {
        acc += p;
        cdf[i] = acc;
        p *= lambda / (i + 1);
    }
    uint64_t *lanes = (uint64_t *)bf_data_mut(bf);
    for (uint64_t b = 0; b < nblocks; b++) {
        double u = (double)(next64() >> 11) * 0x1p-53;
        int i = 0;
        while (i < MAXI && cdf[i] < u)
            i++;
        for (int l = 0; l < 8; l++)
            lanes[b * 8 + l] = lane_table[i][next64() & (SAMPLES - 1)];
    }
    bf_set_count(bf, capacity);
}

static void fill_classic(cbf_t *f, uint64_t capacity)
{
    double fill = -expm1(-(double)cbf_hashes(f) * (double)capacity / (double)cbf_bits(f));
    uint64_t words[SAMPLES];
    for (int s = 0; s < SAMPLES; s++) {
        uint64_t w = 0;
        for (int j = 0; j < 64; j++)
            if ((double)(next64() >> 11) * 0x1p-53 < fill)
                w |= 1ULL << j;
        words[s] = w;
    }
    uint64_t n = cbf_bytes(f) / 8;
    uint64_t *d = (uint64_t *)cbf_data_mut(f);
    for (uint64_t i = 0; i < n; i++)
        d[i] = words[next64() & (SAMPLES - 1)];
    cbf_set_count(f, capacity);
}

/* ---- timing ---- */

typedef enum { ADD, CHECK, CHECK_AND_ADD } op;

static volatile uint64_t sink;

static double time_blocked(bf_t *bf, op o, int batched, const keys *k)
{
    uint8_t out[GROUP];
    uint64_t hits = 0;
    double t0 = now();
    if (batched) {
        for (uint64_t i = 0; i < k->n; i += GROUP) {
            size_t g = k->n - i < GROUP ? (size_t)(k->n - i) : GROUP;
            if (o == ADD)
                bf_add_many(bf, k->ptr + i, k->len + i, g, out);
            else if (o == CHECK)
                bf_check_many(bf, k->ptr + i, k->len + i, g, out);
            else
                bf_check_and_add_many(bf, k->ptr + i, k->len + i, g, out);
            hits += out[0];
        }
    } else {
        for (uint64_t i = 0; i < k->n; i++) {
            if (o == ADD)
                hits += bf_add(bf, k->ptr[i], KEY_LEN);
            else if (o == CHECK)
                hits += bf_check(bf, k->ptr[i], KEY_LEN);
            else
                hits += bf_check_and_add(bf, k->ptr[i], KEY_LEN);
        }
    }
    double dt = now() - t0;
    sink += hits;
    return dt * 1e9 / (double)k->n;
}

static double time_classic(cbf_t *f, op o, const keys *k)
{
    uint64_t hits = 0;
    double t0 = now();
    for (uint64_t i = 0; i < k->n; i++) {
        if (o == ADD)
            hits += cbf_add(f, k->ptr[i], KEY_LEN);
        else if (o == CHECK)
            hits += cbf_check(f, k->ptr[i], KEY_LEN);
        else
            hits += cbf_check_and_add(f, k->ptr[i], KEY_LEN);
    }
    double dt = now() - t0;
    sink += hits;
    return dt * 1e9 / (double)k->n;
}

/* Adds of k in slices, each into the filter as `saved` holds it (the state
 * at capacity); only the adds are timed. */
static double time_blocked_slices(bf_t *bf, const uint8_t *saved, uint64_t count, op o, int batched,
                                  const keys *k, uint64_t slice)
{
    double total = 0;
    for (uint64_t i = 0; i < k->n; i += slice) {
        memcpy(bf_data_mut(bf), saved, bf_bytes(bf));
        bf_set_count(bf, count);
        keys part = {NULL, k->ptr + i, k->len + i, k->n - i < slice ? k->n - i : slice};
        total += time_blocked(bf, o, batched, &part) * (double)part.n;
    }
    return total / (double)k->n;
}

static double time_classic_slices(cbf_t *f, const uint8_t *saved, uint64_t count, op o,
                                  const keys *k, uint64_t slice)
{
    double total = 0;
    for (uint64_t i = 0; i < k->n; i += slice) {
        memcpy(cbf_data_mut(f), saved, cbf_bytes(f));
        cbf_set_count(f, count);
        keys part = {NULL, k->ptr + i, k->len + i, k->n - i < slice ? k->n - i : slice};
        total += time_classic(f, o, &part) * (double)part.n;
    }
    return total / (double)k->n;
}

/* Lookups change nothing, so they are timed three times and the best kept,
 * which filters out moments when another process had the memory bus. */
static double best_blocked_check(bf_t *bf, int batched, const keys *k)
{
    double best = time_blocked(bf, CHECK, batched, k);
    for (int r = 0; r < 2; r++) {
        double t = time_blocked(bf, CHECK, batched, k);
        best = t < best ? t : best;
    }
    return best;
}

static double best_classic_check(cbf_t *f, const keys *k)
{
    double best = time_classic(f, CHECK, k);
    for (int r = 0; r < 2; r++) {
        double t = time_classic(f, CHECK, k);
        best = t < best ? t : best;
    }
    return best;
}

static double fpr_blocked(const bf_t *bf, const keys *q)
{
    uint8_t out[GROUP];
    uint64_t fp = 0;
    for (uint64_t i = 0; i < q->n; i += GROUP) {
        size_t g = q->n - i < GROUP ? (size_t)(q->n - i) : GROUP;
        bf_check_many(bf, q->ptr + i, q->len + i, g, out);
        for (size_t j = 0; j < g; j++)
            fp += out[j];
    }
    return (double)fp / (double)q->n;
}

static double fpr_classic(const cbf_t *f, const keys *q)
{
    uint64_t fp = 0;
    for (uint64_t i = 0; i < q->n; i++)
        fp += cbf_check(f, q->ptr[i], KEY_LEN);
    return (double)fp / (double)q->n;
}

static void row(const char *size, const char *layout, double bpk, double fpr, const char *what,
                double single, double batched)
{
    char b[32] = "-", bm[32] = "-";
    if (batched > 0) {
        snprintf(b, sizeof b, "%.1f", batched);
        snprintf(bm, sizeof bm, "%.1f", 1e3 / batched);
    }
    printf("| %s | %s | %.2f | %.3g | %s | %.1f | %.1f | %s | %s |\n", size, layout, bpk, fpr, what,
           single, 1e3 / single, b, bm);
}

/* One size: the blocked and the classic filter of about `bytes` bytes at
 * p = 0.01, at capacity, then each operation timed. */
static void run_size(const char *label, uint64_t bytes, int synthetic, uint64_t ops)
{
    const double p = 0.01;
    /* Capacity that makes each layout's array about `bytes` long. */
    uint64_t bcap = (uint64_t)((double)bytes * 8 / (bf_bytes_for(1000000, p, NULL) * 8.0 / 1e6));
    uint64_t ccap = (uint64_t)((double)bytes * 8 / bloomery_classic_bpe(p));
    bf_options o = {.seed = 1};
    bf_t *bf;
    cbf_t *cf;
    if (bf_create(&bf, bcap, p, &o) != BLOOMERY_OK || cbf_create(&cf, ccap, p) != BLOOMERY_OK) {
        fprintf(stderr, "bench_lib: cannot allocate %s filters\n", label);
        exit(1);
    }
    keys members = make_keys(synthetic ? ops : bcap > ccap ? bcap : ccap, 1);
    keys probes = make_keys(ops, 2);
    keys fresh = make_keys(ops, 3);
    if (synthetic) {
        fill_blocked(bf, bcap);
        fill_classic(cf, ccap);
    } else {
        members.n = bcap;
        for (uint64_t i = 0; i < bcap; i += GROUP)
            bf_add_many(bf, members.ptr + i, members.len + i, bcap - i < GROUP ? bcap - i : GROUP,
                        NULL);
        members.n = ccap;
        for (uint64_t i = 0; i < ccap; i++)
            cbf_add(cf, members.ptr[i], KEY_LEN);
    }
    double bbpk = 8.0 * (double)bf_bytes(bf) / (double)bcap;
    double cbpk = 8.0 * (double)cbf_bytes(cf) / (double)ccap;
    double bfpr = fpr_blocked(bf, &probes), cfpr = fpr_classic(cf, &probes);
    char bsize[64], csize[64];
    snprintf(bsize, sizeof bsize, "%s (%.0f MiB, %.3g items)", label, bf_bytes(bf) / 1048576.0,
             (double)bcap);
    snprintf(csize, sizeof csize, "%s (%.0f MiB, %.3g items)", label, cbf_bytes(cf) / 1048576.0,
             (double)ccap);

    /* Lookups of absent items (mostly negatives at p = 1%), then of present
     * ones (every probe is read), then adds of new items. */
    row(bsize, "blocked", bbpk, bfpr, "check absent", best_blocked_check(bf, 0, &probes),
        best_blocked_check(bf, 1, &probes));
    row(csize, "classic", cbpk, cfpr, "check absent", best_classic_check(cf, &probes), 0);
    keys present = members;
    present.n = ops < members.n ? ops : members.n;
    if (synthetic) {
        /* Known members of a synthetic state: add a slice first. */
        time_blocked(bf, ADD, 1, &present);
        time_classic(cf, ADD, &present);
    }
    row(bsize, "blocked", bbpk, bfpr, "check present", best_blocked_check(bf, 0, &present),
        best_blocked_check(bf, 1, &present));
    row(csize, "classic", cbpk, cfpr, "check present", best_classic_check(cf, &present), 0);
    /* Adds and check-and-adds of new items: halves of `fresh` for each form.
     * The synthetic 4 GiB filters gain a negligible share of their capacity;
     * the 1 MiB ones go back to capacity for every slice. */
    keys a = fresh, b = fresh;
    a.n = fresh.n / 2;
    b.ptr += a.n;
    b.len += a.n;
    b.n = fresh.n - a.n;
    keys c = make_keys(ops, 4), d = c;
    c.n = ops / 2;
    d.ptr += c.n;
    d.len += c.n;
    d.n = ops - c.n;
    if (synthetic) {
        double s_add = time_blocked(bf, ADD, 0, &a), b_add = time_blocked(bf, ADD, 1, &b);
        row(bsize, "blocked", bbpk, bfpr, "add", s_add, b_add);
        row(csize, "classic", cbpk, cfpr, "add", time_classic(cf, ADD, &a), 0);
        double s_caa = time_blocked(bf, CHECK_AND_ADD, 0, &c),
               b_caa = time_blocked(bf, CHECK_AND_ADD, 1, &d);
        row(bsize, "blocked", bbpk, bfpr, "check-and-add", s_caa, b_caa);
        row(csize, "classic", cbpk, cfpr, "check-and-add", time_classic(cf, CHECK_AND_ADD, &c), 0);
    } else {
        uint8_t *bsaved = malloc(bf_bytes(bf)), *csaved = malloc(cbf_bytes(cf));
        if (!bsaved || !csaved) {
            fprintf(stderr, "bench_lib: out of memory for the saved filters\n");
            exit(1);
        }
        memcpy(bsaved, bf_data(bf), bf_bytes(bf));
        memcpy(csaved, cbf_data(cf), cbf_bytes(cf));
        uint64_t bslice = bcap / 10, cslice = ccap / 10;
        row(bsize, "blocked", bbpk, bfpr, "add",
            time_blocked_slices(bf, bsaved, bcap, ADD, 0, &a, bslice),
            time_blocked_slices(bf, bsaved, bcap, ADD, 1, &b, bslice));
        row(csize, "classic", cbpk, cfpr, "add",
            time_classic_slices(cf, csaved, ccap, ADD, &a, cslice), 0);
        row(bsize, "blocked", bbpk, bfpr, "check-and-add",
            time_blocked_slices(bf, bsaved, bcap, CHECK_AND_ADD, 0, &c, bslice),
            time_blocked_slices(bf, bsaved, bcap, CHECK_AND_ADD, 1, &d, bslice));
        row(csize, "classic", cbpk, cfpr, "check-and-add",
            time_classic_slices(cf, csaved, ccap, CHECK_AND_ADD, &c, cslice), 0);
        free(bsaved);
        free(csaved);
    }
    c.n = ops;
    free_keys(&c);
    free_keys(&members);
    free_keys(&probes);
    free_keys(&fresh);
    bf_free(bf);
    cbf_free(cf);
}

/* Scalable filters: one grown from RedisBloom's defaults (capacity 100,
 * expansion 2; BF.ADD on a missing key creates it) against one reserved for
 * the n items it holds, both filled with the same n items. A check of an
 * absent item visits every link of the grown one. */
static double time_chain(const sbf_t *s, int batched, const keys *k)
{
    int out[GROUP];
    uint64_t hits = 0;
    double best = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = now();
        for (uint64_t i = 0; i < k->n; i += GROUP) {
            size_t g = k->n - i < GROUP ? (size_t)(k->n - i) : GROUP;
            if (batched) {
                sbf_check_many(s, k->ptr + i, k->len + i, g, out);
                for (size_t j = 0; j < g; j++)
                    hits += (uint64_t)out[j];
            } else {
                for (size_t j = 0; j < g; j++)
                    hits += (uint64_t)sbf_check(s, k->ptr[i + j], KEY_LEN);
            }
        }
        double t = (now() - t0) * 1e9 / (double)k->n;
        best = r == 0 || t < best ? t : best;
    }
    sink += hits;
    return best;
}

/* The growing layout (one table that doubles) in place of a chain. */
static double time_growing(const gf_t *g, int batched, const keys *k)
{
    bloomery_hash h[GROUP];
    uint8_t out[GROUP];
    uint64_t hits = 0;
    double best = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = now();
        for (uint64_t i = 0; i < k->n; i += GROUP) {
            size_t n = k->n - i < GROUP ? (size_t)(k->n - i) : GROUP;
            if (batched) {
                for (size_t j = 0; j < n; j++)
                    h[j] = bloomery_hash_item(k->ptr[i + j], KEY_LEN, gf_seed(g));
                gf_check_many_hashed(g, h, n, out);
                for (size_t j = 0; j < n; j++)
                    hits += out[j];
            } else {
                for (size_t j = 0; j < n; j++)
                    hits += gf_check(g, k->ptr[i + j], KEY_LEN);
            }
        }
        double t = (now() - t0) * 1e9 / (double)k->n;
        best = r == 0 || t < best ? t : best;
    }
    sink += hits;
    return best;
}

static void run_chain(uint64_t n, uint64_t ops)
{
    /* As the server makes them: an add's filter keeps RedisBloom's halves,
     * a reserved one gives its first link most of the budget. */
    sbf_options og = {.layout = BLOOMERY_LAYOUT_BLOCKED,
                      .expansion = 2,
                      .seed = 1,
                      .schedule = SBF_SCHEDULE_HALVES};
    sbf_options os = og;
    os.schedule = SBF_SCHEDULE_FIRST_SHARE;
    sbf_options op = {.layout = BLOOMERY_LAYOUT_PREFIX, .expansion = 2, .seed = 1};
    sbf_t *grown, *sized, *sized_prefix;
    gf_t *growing;
    if (sbf_create(&grown, 100, 0.01, &og) != BLOOMERY_OK ||
        sbf_create(&sized, n, 0.01, &os) != BLOOMERY_OK ||
        sbf_create(&sized_prefix, n, 0.01, &op) != BLOOMERY_OK ||
        gf_create(&growing, 100, 0.01, 2, 1) != BLOOMERY_OK) {
        fprintf(stderr, "bench_lib: cannot allocate the scalable filters\n");
        exit(1);
    }
    keys members = make_keys(n, 5), probes = make_keys(ops, 6);
    /* Filled one item at a time, each filter on its own, timed. */
    sbf_t *fill[3] = {grown, sized, sized_prefix};
    double add_ns[4];
    for (int w = 0; w < 4; w++) {
        double t0 = now();
        for (uint64_t i = 0; i < n; i++) {
            if (w < 3)
                sbf_add(fill[w], members.ptr[i], KEY_LEN);
            else
                gf_add(growing, members.ptr[i], KEY_LEN);
        }
        add_ns[w] = (now() - t0) * 1e9 / (double)n;
    }
    const sbf_t *f[3] = {grown, sized, sized_prefix};
    const char *name[3] = {"grown from 100", "reserved", "reserved, prefix"};
    for (int w = 0; w < 3; w++) {
        int out[GROUP];
        uint64_t fp = 0;
        for (uint64_t i = 0; i < probes.n; i += GROUP) {
            size_t g = probes.n - i < GROUP ? (size_t)(probes.n - i) : GROUP;
            sbf_check_many(f[w], probes.ptr + i, probes.len + i, g, out);
            for (size_t j = 0; j < g; j++)
                fp += (uint64_t)out[j];
        }
        printf("| %.3g | %s | %zu | %.2f | %.3g | %.1f | %.1f | %.1f |\n", (double)n, name[w],
               sbf_nlinks(f[w]), 8.0 * (double)sbf_bytes(f[w]) / (double)n,
               (double)fp / (double)probes.n, time_chain(f[w], 0, &probes),
               time_chain(f[w], 1, &probes), add_ns[w]);
    }
    uint64_t fp = 0;
    for (uint64_t i = 0; i < probes.n; i++)
        fp += gf_check(growing, probes.ptr[i], KEY_LEN);
    printf("| %.3g | grown from 100, growing layout | 1 | %.2f | %.3g | %.1f | %.1f | %.1f |\n",
           (double)n, 8.0 * (double)gf_bytes(growing) / (double)n, (double)fp / (double)probes.n,
           time_growing(growing, 0, &probes), time_growing(growing, 1, &probes), add_ns[3]);
    free_keys(&members);
    free_keys(&probes);
    sbf_free(grown);
    sbf_free(sized);
    sbf_free(sized_prefix);
    gf_free(growing);
}

int main(int argc, char **argv)
{
    int small_only = 0, chains_only = 0;
    uint64_t ops = 10000000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--small-only") == 0)
            small_only = 1;
        else if (strcmp(argv[i], "--chains-only") == 0)
            chains_only = 1;
        else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc)
            ops = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: bench_lib [--small-only] [--chains-only] [--ops N]\n");
            return 2;
        }
    }
    printf("kernel: %s; p = 0.01; %llu operations per figure; batches of %d\n\n", bf_kernel_name(),
           (unsigned long long)ops, GROUP);
    if (!chains_only) {
        printf("| filter | layout | bits/key | measured FPR | operation | ns/op single | M ops/s "
               "single | ns/op batched | M ops/s batched |\n");
        printf("|---|---|---|---|---|---|---|---|---|\n");
        run_size("1 MiB", 1 << 20, 0, ops);
        if (!small_only)
            run_size("4 GiB", 4ULL << 30, 1, ops);
    }
    printf("\nscalable filters at p = 0.01, checks of absent items\n\n");
    printf("| items | filter | links | bits/item | measured FPR | ns/check single | ns/check "
           "batched | ns/add (fill) |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    run_chain(1000000, ops);
    if (!small_only)
        run_chain(100000000, ops);
    uint64_t n = 10000000;
    printf("\nnon-scaling blocked filter at p = 0.01: %.2f bits per key (classic: %.2f)\n",
           8.0 * (double)bf_bytes_for(n, 0.01, NULL) / (double)n, bloomery_classic_bpe(0.01));
    return 0;
}

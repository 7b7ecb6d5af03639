/* bloomery calc: the sizing calculator.
 *
 * Forward: capacity and error rate in; for both layouts the bits per key,
 * total bits and bytes, probes and the expected FPR at capacity.
 * Inverse: bits per key (m/n) and k in; the FPR each layout gives. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bloomery/bloomery.h"
#include "cli.h"

static void calc_usage(FILE *f)
{
    fprintf(f, "usage: bloomery calc CAPACITY ERROR_RATE [--policy latency|memory]\n"
               "       bloomery calc --bits-per-key M --hashes K [--capacity N]\n"
               "\n"
               "The first form sizes a filter for CAPACITY items at false-positive rate\n"
               "ERROR_RATE (0 < p < 1) in the blocked, classic (RedisBloom's) and prefix\n"
               "layouts; BF.RESERVE makes a prefix filter by default. The second gives the "
               "false-positive rate of\n"
               "M bits per item and K hash probes, and the memory for N items.\n"
               "Numbers may be written as 1e9.\n");
}

/* "304.00 MiB (0.30 GiB)": the GiB figure is how the seeds' tables read. */
static void human_bytes(double bytes, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = bytes;
    unsigned u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (u == 2)
        snprintf(buf, len, "%.2f %s (%.2f GiB)", v, units[u], bytes / 1073741824.0);
    else
        snprintf(buf, len, "%.2f %s", v, units[u]);
}

static int forward(unsigned long long n, double p, bloomery_policy policy)
{
    unsigned b = bloomery_blocks_per_key(p, policy);
    uint64_t nblocks = bloomery_blocked_nblocks(n, p, b);
    uint64_t cbits = bloomery_classic_bits(n, p);
    uint64_t pbytes = pf_bytes_for(n, p);
    pf_shape sh;
    if (nblocks == 0 || cbits == 0 || pbytes == 0 || pf_plan(p, &sh) != BLOOMERY_OK) {
        fprintf(stderr, "bloomery calc: a filter of that size does not fit 64-bit sizes\n");
        return CLI_ERROR;
    }
    double bbits = (double)nblocks * BLOOMERY_BLOCK_BITS;
    double bpk = bbits / (double)n;
    unsigned k = bloomery_classic_hashes(p);
    double cbpk = (double)cbits / (double)n;
    double pbpk = (double)pbytes * 8 / (double)n;
    char hb[48], hc[48], hp[48];
    human_bytes(bbits / 8, hb, sizeof hb);
    human_bytes((double)cbits / 8, hc, sizeof hc);
    human_bytes((double)pbytes, hp, sizeof hp);

    printf("capacity       %llu\n", n);
    printf("error rate     %g\n\n", p);
    printf("%-22s %-24s %-24s %s\n", "", "blocked", "classic", "prefix");
    printf("%-22s %-24.2f %-24.2f %.2f\n", "bits per key", bpk, cbpk, pbpk);
    printf("%-22s %-24.4g %-24.4g %.4g\n", "bits", bbits, (double)cbits, (double)pbytes * 8);
    printf("%-22s %-24s %-24s %s\n", "memory", hb, hc, hp);
    printf("%-22s %-24llu %-24llu %llu\n", "bytes", (unsigned long long)(bbits / 8),
           (unsigned long long)(cbits / 8), (unsigned long long)pbytes);
    char probes[32], fp[32];
    snprintf(probes, sizeof probes, "%u (%u per block)", 8 * b, 8u);
    snprintf(fp, sizeof fp, "1 (%u-bit fingerprint)", sh.remainder_bits);
    printf("%-22s %-24s %-24u %s\n", "hashes (k)", probes, k, fp);
    char lines[32], klines[32], plines[48];
    snprintf(lines, sizeof lines, "%u", b);
    snprintf(klines, sizeof klines, "up to %u", k);
    snprintf(plines, sizeof plines, "1 (2 for %.1f%%)", 100 * sh.to_spare);
    printf("%-22s %-24s %-24s %s\n", "cache lines per op", lines, klines, plines);
    printf("%-22s %-24.3g %-24.3g %.3g\n", "expected FPR", bloomery_model_fpr_split(bpk, b, 64),
           bloomery_classic_fpr(cbpk, k), sh.model_fpr);
    return CLI_OK;
}

static int inverse(double bpk, unsigned k, unsigned long long n)
{
    unsigned b = k / 8 ? k / 8 : 1;
    printf("bits per key   %g\n", bpk);
    printf("hashes (k)     %u\n", k);
    printf("classic FPR    %.3g\n", bloomery_classic_fpr(bpk, k));
    printf("blocked FPR    %.3g (%u block%s per key, %u probes)\n",
           bloomery_model_fpr_split(bpk, b, 64), b, b == 1 ? "" : "s", 8 * b);
    if (n) {
        double bits = bpk * (double)n;
        char h[32];
        human_bytes(bits / 8, h, sizeof h);
        printf("capacity       %llu\n", n);
        printf("bits           %.4g\n", bits);
        printf("memory         %s\n", h);
    }
    return CLI_OK;
}

int cmd_calc(int argc, char **argv)
{
    double bpk = 0, p = 0;
    unsigned long long k = 0, n = 0;
    const char *pos[2] = {0};
    int npos = 0;
    bloomery_policy policy = BLOOMERY_POLICY_LATENCY;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            calc_usage(stdout);
            return CLI_OK;
        }
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--bits-per-key") == 0 || strcmp(a, "--hashes") == 0 ||
            strcmp(a, "--capacity") == 0 || strcmp(a, "--policy") == 0) {
            if (!val) {
                fprintf(stderr, "bloomery calc: %s needs a value\n", a);
                return CLI_USAGE;
            }
            i++;
            int bad = 0;
            if (strcmp(a, "--bits-per-key") == 0)
                bad = cli_parse_double(val, &bpk) != 0 || !(bpk > 0);
            else if (strcmp(a, "--hashes") == 0)
                bad = cli_parse_count(val, &k) != 0 || k == 0 || k > 64;
            else if (strcmp(a, "--capacity") == 0)
                bad = cli_parse_count(val, &n) != 0 || n == 0;
            else if (strcmp(val, "latency") == 0)
                policy = BLOOMERY_POLICY_LATENCY;
            else if (strcmp(val, "memory") == 0)
                policy = BLOOMERY_POLICY_MEMORY;
            else
                bad = 1;
            if (bad) {
                fprintf(stderr, "bloomery calc: bad value for %s: '%s'\n", a, val);
                return CLI_USAGE;
            }
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "bloomery calc: unknown option '%s'\n", a);
            return CLI_USAGE;
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            fprintf(stderr, "bloomery calc: too many arguments\n");
            return CLI_USAGE;
        }
    }
    if (bpk > 0 || k > 0) {
        if (!(bpk > 0) || k == 0 || npos) {
            fprintf(stderr, "bloomery calc: the inverse form takes --bits-per-key and --hashes\n");
            return CLI_USAGE;
        }
        return inverse(bpk, (unsigned)k, n);
    }
    if (npos != 2) {
        calc_usage(stderr);
        return CLI_USAGE;
    }
    if (cli_parse_count(pos[0], &n) != 0 || n == 0) {
        fprintf(stderr, "bloomery calc: capacity must be a positive integer: '%s'\n", pos[0]);
        return CLI_USAGE;
    }
    if (cli_parse_double(pos[1], &p) != 0 || !(p > 0 && p < 1)) {
        fprintf(stderr, "bloomery calc: error rate must be in (0, 1): '%s'\n", pos[1]);
        return CLI_USAGE;
    }
    return forward(n, p, policy);
}

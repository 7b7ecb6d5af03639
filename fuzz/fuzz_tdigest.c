/* Fuzz target: arbitrary bytes as a t-digest. Two ways in, chosen by the
 * first byte:
 *
 *   even: the rest is a serialized image (bloomery_deserialize), also tried
 *         with its header checksum recomputed, as a forger would;
 *   odd:  the rest is a digest's inside as a loader sees it once checksums
 *         passed: byte 1 the compression (1..64), then the other seven
 *         counters of tdigest_state (u64 or f64, little-endian, node
 *         counts folded below 512), then the node array;
 *         bytes past the nodes are values to add afterwards.
 *
 * tdigest_restore must refuse every impossible state (and leave the digest
 * empty), and whatever it accepts must answer sanely: quantiles within
 * [min, max] and monotone, CDF within [0, 1], a serialization that loads
 * back to the same bytes, adds and merges that keep it valid. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bloomery/bloomery.h"

#include <xxhash.h>

static void check(int ok)
{
    if (!ok)
        abort();
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static double f64(const uint8_t *p)
{
    uint64_t v = le64(p);
    double d;
    memcpy(&d, &v, 8);
    return d;
}

/* A valid digest answers within its own bounds and serializes back. */
static void exercise(tdigest_t *t)
{
    static const double q[] = {0, 0.001, 0.1, 0.5, 0.9, 0.999, 1};
    double v[7];
    check(tdigest_quantiles(t, q, v, 7) == BLOOMERY_OK);
    uint64_t n = tdigest_count(t);
    for (int i = 0; i < 7 && n; i++) {
        check(v[i] >= tdigest_min(t) && v[i] <= tdigest_max(t));
        check(i == 0 || v[i] >= v[i - 1]);
    }
    double c[7];
    check(tdigest_cdfs(t, v, c, 7) == BLOOMERY_OK);
    for (int i = 0; i < 7 && n; i++)
        check(c[i] >= 0 && c[i] <= 1);
    int64_t r[7];
    check(tdigest_ranks(t, v, r, 7, 1) == BLOOMERY_OK);
    double m;
    check(tdigest_trimmed_mean(t, 0.1, 0.9, &m) == BLOOMERY_OK);
    bloomery_object o = {.type = BLOOMERY_TYPE_TDIGEST, .u.td = t};
    uint8_t *blob, *blob2;
    size_t len, len2;
    check(bloomery_serialize(o, 0, &blob, &len) == BLOOMERY_OK);
    bloomery_object back;
    check(bloomery_deserialize(blob, len, 0, &back, NULL) == BLOOMERY_OK);
    check(bloomery_serialize(back, 0, &blob2, &len2) == BLOOMERY_OK);
    check(len == len2 && memcmp(blob, blob2, len) == 0);
    free(blob);
    free(blob2);
    bloomery_object_free(&back);
}

static void from_state(const uint8_t *data, size_t size)
{
    if (size < 57)
        return;
    uint64_t compression = data[0] % 64 + 1;
    tdigest_state st = {
        .compression = compression,
        .merged_nodes = le64(data + 1),
        .unmerged_nodes = le64(data + 9),
        .merged_weight = le64(data + 17),
        .unmerged_weight = le64(data + 25),
        .total_compressions = le64(data + 33),
        .min = f64(data + 41),
        .max = f64(data + 49),
    };
    /* Small counts are the interesting ones: fold the node counts. */
    st.merged_nodes %= 512;
    st.unmerged_nodes %= 512;
    data += 57;
    size -= 57;
    tdigest_t *t;
    check(tdigest_create(&t, compression) == BLOOMERY_OK);
    size_t nbytes = (size_t)tdigest_capacity(t) * sizeof(tdigest_node);
    size_t take = size < nbytes ? size : nbytes;
    memcpy(tdigest_nodes_mut(t), data, take);
    if (tdigest_restore(t, &st) != BLOOMERY_OK) {
        check(tdigest_count(t) == 0);
        tdigest_free(t);
        return;
    }
    exercise(t);
    size_t nvals = (size - take) / 8;
    double *vals = malloc((nvals ? nvals : 1) * sizeof(double));
    for (size_t i = 0; i < nvals; i++)
        vals[i] = f64(data + take + 8 * i);
    if (tdigest_add(t, vals, nvals) == BLOOMERY_OK)
        exercise(t);
    const tdigest_t *self[] = {t, t};
    if (tdigest_merge(t, self, 2) == BLOOMERY_OK)
        exercise(t);
    free(vals);
    tdigest_free(t);
}

static void from_image(const uint8_t *data, size_t size)
{
    bloomery_object o;
    if (bloomery_deserialize(data, size, 1 << 22, &o, NULL) == BLOOMERY_OK) {
        if (o.type == BLOOMERY_TYPE_TDIGEST)
            exercise(o.u.td);
        bloomery_object_free(&o);
    }
    if (size < 24 || memcmp(data, "BLMRYIMG", 8) != 0)
        return;
    uint32_t plen = (uint32_t)(le64(data + 16) & 0xffffffffu);
    uint32_t nreg = (uint32_t)(le64(data + 16) >> 32);
    if (plen > (1u << 20) || nreg > (1u << 16))
        return;
    size_t hlen = 24 + (size_t)plen + 8 * (size_t)nreg + 8;
    if (size < hlen)
        return;
    uint8_t *copy = malloc(size);
    memcpy(copy, data, size);
    uint64_t sum = XXH3_64bits(copy, hlen - 8);
    for (int i = 0; i < 8; i++)
        copy[hlen - 8 + i] = (uint8_t)(sum >> (8 * i));
    bloomery_loader *l;
    size_t used;
    if (bloomery_loader_open(&l, copy, size, 1 << 22, &used) == BLOOMERY_OK) {
        bloomery_object back;
        if (bloomery_loader_finish(l, &back) == BLOOMERY_OK)
            bloomery_object_free(&back);
    }
    (void)bloomery_loader_error(l);
    bloomery_loader_free(l);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        from_state(data + 1, size - 1);
    else
        from_image(data + 1, size - 1);
    return 0;
}

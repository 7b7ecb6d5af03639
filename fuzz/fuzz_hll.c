/* libFuzzer target for the HyperLogLog string parser and everything that
 * runs on an accepted value.
 *
 * Input: one control byte, then the payload.
 *   bits 0-2  hll-sparse-max-bytes: 0 (default), 1, 16, 40, 300, 3000, 20000
 *   bits 3-4  how the payload becomes a value:
 *             0 as is (header included)
 *             1 a sparse header is prepended: the payload is the opcode
 *               program, so the fuzzer does not have to rediscover "HYLL"
 *             2 a dense header is prepended and the registers are the
 *               payload repeated to 12288 bytes
 *             3 as 1, but a few add/merge steps more
 * Whatever hll_from_bytes accepts is then counted, extended with elements
 * cut from the payload, merged (with itself, an empty and a NULL source)
 * and union-counted. After every change the value must still parse, and the
 * single-key and union counts of one value must agree; a violation aborts so
 * that it is reported like a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bloomery/bloomery.h"
#include "bloomery/hll.h"

static const size_t sparse_limits[8] = {0, 1, 16, 40, 300, 3000, 20000, 0};

static void check(int cond)
{
    if (!cond)
        abort();
}

/* The value must stay a valid HLL string, and the histogram of the stored
 * encoding must give the same estimate as the union path's raw registers. */
static void check_value(hll_t *h, size_t limit)
{
    size_t len;
    const uint8_t *b = hll_bytes(h, &len);
    hll_t *copy = NULL;
    int rc = hll_from_bytes(&copy, b, len, limit);
    if (rc == BLOOMERY_ENOMEM)
        return;
    check(rc == BLOOMERY_OK);
    check(b[4] == 0 ? len == HLL_DENSE_SIZE : (len <= HLL_DENSE_SIZE * 3));

    /* Force a recount on the copy: set the "cache invalid" bit. */
    uint8_t *raw = malloc(len);
    if (raw) {
        memcpy(raw, b, len);
        raw[15] |= 0x80;
        hll_t *fresh = NULL;
        if (hll_from_bytes(&fresh, raw, len, limit) == BLOOMERY_OK) {
            uint64_t single, uni;
            hll_t *one[1] = {fresh};
            check(hll_count(fresh, &single) == BLOOMERY_OK);
            check(hll_count_union(one, 1, &uni) == BLOOMERY_OK);
            check(single == uni);
        }
        hll_free(fresh);
        free(raw);
    }
    hll_free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    const uint8_t *payload = data + 1;
    size_t plen = size - 1;
    size_t limit = sparse_limits[ctl & 7];
    unsigned mode = (ctl >> 3) & 3;

    uint8_t *value = NULL;
    size_t vlen = 0;
    if (mode == 0) {
        value = malloc(plen ? plen : 1);
        if (!value)
            return 0;
        if (plen)
            memcpy(value, payload, plen);
        vlen = plen;
    } else if (mode == 2) {
        vlen = HLL_DENSE_SIZE;
        value = calloc(1, vlen);
        if (!value)
            return 0;
        memcpy(value, "HYLL", 4);
        value[15] = 0x80;
        for (size_t i = 16; plen && i < vlen; i++)
            value[i] = payload[(i - 16) % plen];
    } else {
        vlen = 16 + plen;
        value = calloc(1, vlen);
        if (!value)
            return 0;
        memcpy(value, "HYLL", 4);
        value[4] = 1;
        value[15] = 0x80;
        if (plen)
            memcpy(value + 16, payload, plen);
    }

    hll_t *h = NULL;
    int rc = hll_from_bytes(&h, value, vlen, limit);
    free(value);
    if (rc != BLOOMERY_OK) {
        check(h == NULL);
        check(rc == BLOOMERY_ETYPE || rc == BLOOMERY_ECORRUPT || rc == BLOOMERY_ENOMEM);
        return 0;
    }

    uint64_t card, again;
    check(hll_count(h, &card) == BLOOMERY_OK);
    check(hll_count(h, &again) == BLOOMERY_OK && again == card);
    check_value(h, limit);

    /* Elements: consecutive slices of the payload, 0..7 bytes each. */
    unsigned rounds = mode == 3 ? 4 : 1;
    for (unsigned r = 0; r < rounds; r++) {
        size_t pos = 0;
        for (unsigned k = 0; k < 64 && pos <= plen; k++) {
            size_t n = (payload && plen) ? (size_t)(payload[pos % plen] + k + r) & 7 : 0;
            if (n > plen - pos)
                n = plen - pos;
            rc = hll_add(h, plen ? payload + pos : NULL, n);
            check(rc == 0 || rc == 1 || rc == BLOOMERY_ENOMEM);
            if (rc == 1) {
                size_t len;
                check((hll_bytes(h, &len)[15] & 0x80) != 0);
            }
            pos += n + 1;
        }
        check_value(h, limit);

        hll_t *empty = NULL;
        if (hll_create(&empty, limit) == BLOOMERY_OK) {
            hll_t *srcs[3] = {h, empty, NULL};
            uint64_t before;
            check(hll_count_union(srcs, 3, &before) == BLOOMERY_OK);
            int merged = hll_merge(h, srcs, 3);
            check(merged == BLOOMERY_OK || merged == BLOOMERY_ENOMEM);
            check_value(h, limit);

            /* Merging the other way round gives the same registers. (Only
             * a successful merge drops a cached count that came with the
             * input, which could be anything.) */
            hll_t *back[1] = {h};
            rc = hll_merge(empty, back, 1);
            check(rc == BLOOMERY_OK || rc == BLOOMERY_ENOMEM);
            if (merged == BLOOMERY_OK && rc == BLOOMERY_OK) {
                uint64_t a, b;
                check(hll_count(h, &a) == BLOOMERY_OK);
                check(hll_count(empty, &b) == BLOOMERY_OK);
                check(a == b && a == before);
                check_value(empty, limit);
            }
            hll_free(empty);
        }
    }

    for (unsigned j = 0; j < HLL_REGISTERS; j += 4099) {
        int v = hll_register(h, j);
        check(v >= 0 && v <= 63);
    }
    hll_free(h);
    return 0;
}

/* Fuzz target: arbitrary bytes as a serialized object. Loading must refuse
 * anything damaged with an error and a message, and anything it accepts must
 * be a working object that serializes back to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bloomery/bloomery.h"

#include <xxhash.h>

/* Random mutations almost never carry a valid header checksum, which would
 * leave the parameter checks behind it unexplored; so each input is also
 * tried with its header checksum recomputed, as a forger would. */
static void header_with_valid_checksum(const uint8_t *data, size_t size)
{
    if (size < 24 || memcmp(data, "BLMRYIMG", 8) != 0)
        return;
    uint32_t plen = (uint32_t)data[16] | (uint32_t)data[17] << 8 | (uint32_t)data[18] << 16 |
                    (uint32_t)data[19] << 24;
    uint32_t nreg = (uint32_t)data[20] | (uint32_t)data[21] << 8 | (uint32_t)data[22] << 16 |
                    (uint32_t)data[23] << 24;
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
        for (uint64_t i = 0; i < bloomery_loader_nchunks(l) && i < 4; i++) {
            size_t cl = bloomery_loader_chunk_len(l, i);
            if (used + cl <= size)
                (void)bloomery_loader_chunk(l, i, copy + used, cl, 0);
        }
        bloomery_object o;
        if (bloomery_loader_finish(l, &o) == BLOOMERY_OK)
            bloomery_object_free(&o);
    }
    (void)bloomery_loader_error(l);
    bloomery_loader_free(l);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    header_with_valid_checksum(data, size);
    bloomery_object o;
    const char *msg;
    /* A small limit keeps forged headers from allocating gigabytes. */
    if (bloomery_deserialize(data, size, 1 << 22, &o, &msg) != BLOOMERY_OK)
        return 0;
    switch (o.type) {
    case BLOOMERY_TYPE_BLOCKED:
        bf_add(o.u.bf, data, size < 16 ? size : 16);
        (void)bf_check(o.u.bf, data, size);
        break;
    case BLOOMERY_TYPE_COUNTING:
        cntbf_add(o.u.cnt, data, size < 16 ? size : 16);
        (void)cntbf_delete(o.u.cnt, data, size < 16 ? size : 16);
        break;
    case BLOOMERY_TYPE_SCALABLE:
        (void)sbf_add(o.u.sbf, data, size < 16 ? size : 16);
        (void)sbf_check(o.u.sbf, data, size);
        break;
    case BLOOMERY_TYPE_HLL: {
        uint64_t card;
        (void)hll_add(o.u.hll, data, size < 16 ? size : 16);
        (void)hll_count(o.u.hll, &card);
        break;
    }
    default:
        /* Types with their own fuzz target (cuckoo): loading is the test. */
        break;
    }
    bloomery_object_free(&o);
    return 0;
}

// fuzz-sources: src/persist/snapshot_index.c src/persist/chunk_format.c
/* Fuzz target: arbitrary bytes as a snapshot index, as found and again with
 * its trailing checksum recomputed (so the structure checks behind the
 * checksum are explored). Whatever parses must be safe to walk, and its
 * inline frames safe to decode. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "../src/persist/snapshot_index.h"

static void parse(const uint8_t *buf, size_t len)
{
    snap_index ix;
    char err[256];
    size_t off;
    if (!snap_index_parse(buf, len, &ix, err, sizeof(err), &off))
        return;
    static uint8_t out[1 << 16];
    for (uint64_t k = 0; k < ix.nkeys; k++) {
        snap_entry *e = &ix.entries[k];
        volatile size_t sum = e->klen + e->hlen + (e->hlen ? e->header[e->hlen - 1] : 0);
        (void)sum;
        for (uint64_t i = 0; i < e->nchunks; i++) {
            snap_chunk *c = &e->chunks[i];
            if (c->where == SNAP_CHUNK_INLINE && c->raw_len <= sizeof(out))
                chunk_frame_decode(c->frame, c->flen, c->raw_len, c->hash, out, err, sizeof(err));
        }
    }
    snap_index_free(&ix);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse(data, size);
    if (size < SNAP_HEADER_SIZE + 8 || memcmp(data, SNAP_MAGIC, 8) != 0)
        return 0;
    uint8_t *copy = malloc(size);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    le_store(copy + size - 8, XXH3_64bits(copy, size - 8), 8);
    parse(copy, size);
    free(copy);
    return 0;
}

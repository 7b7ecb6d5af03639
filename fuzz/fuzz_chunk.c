// fuzz-sources: src/persist/chunk_format.c
/* Fuzz target: arbitrary bytes as a chunk file (header, zstd frame). The
 * reader must cap decompression at the declared size, and accept only a
 * frame whose content hashes to the header's hash. Also tried with the
 * header checksum recomputed, to reach the frame decoder with odd sizes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "../src/persist/chunk_format.h"
#include "../src/persist/le.h"

static void decode(const uint8_t *buf, size_t len)
{
    uint8_t *out;
    uint32_t rl;
    char err[256];
    size_t off;
    if (chunk_file_decode(buf, len, NULL, &out, &rl, err, sizeof(err), &off)) {
        if (!chunk_hash_eq(chunk_hash_of(out, rl),
                           (chunk_hash){le_load(buf + 16, 8), le_load(buf + 24, 8)}))
            abort();
        free(out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode(data, size);
    if (size < CHUNK_HEADER_SIZE || memcmp(data, CHUNK_MAGIC, 8) != 0)
        return 0;
    uint8_t *copy = malloc(size);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    /* Keep the declared raw length small enough for quick runs. */
    uint32_t rl = (uint32_t)le_load(copy + 12, 4) & 0xfffff;
    le_store(copy + 12, rl, 4);
    le_store(copy + 32, size - CHUNK_HEADER_SIZE, 8);
    le_store(copy + 40, XXH3_64bits(copy, 40), 8);
    decode(copy, size);
    free(copy);
    return 0;
}

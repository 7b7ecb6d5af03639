/* The list of an exact store's files as a master sends it in a full resync
 * (src/server/data/exact_ship.c): u32 count, then per file its name (u32
 * length, bytes), u64 size, u64 hash low, u64 hash high (XXH3-128 of its
 * bytes, which name it on the replica). */
#ifndef BLOOMERY_EXACT_MANIFEST_H
#define BLOOMERY_EXACT_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chunk_format.h"
#include "le.h"

#define EXACT_MANIFEST_MAX_FILES 100000

typedef struct exact_file {
    char name[64]; /* the store's own file name */
    uint64_t size;
    chunk_hash hash; /* XXH3-128 of its bytes */
} exact_file;

/* A store period's column family name, x<id, 16 hex>.<period start ms>:
 * made by the server, read back by it at open and by check-data. */
void exact_period_name(char *out, size_t len, uint64_t id, int64_t period);
bool exact_period_parse(const char *name, uint64_t *id, int64_t *period);

void exact_manifest_encode(pbuf *b, const exact_file *files, size_t n);
/* Every length checked; a name that is not a bare file name of the store
 * (empty, with '/' or NUL, starting with '.') refuses the list. */
bool exact_manifest_decode(const uint8_t *p, size_t len, exact_file **files, size_t *n);

#endif

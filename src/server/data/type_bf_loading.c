/* A Bloom filter dump being restored with BF.LOADCHUNK (cmd/dump.c): a
 * serial.h loader that becomes a Bloom or counting filter value when its
 * last chunk arrives. A loader is not safe for concurrent use: the object's
 * lock guards it. Its records (WAL_LOADCHUNK) replay through the restore.
 */
#include "keyspace.h"
#include "types.h"

static void free_value(void *v) { bloomery_loader_free(v); }

const value_type bf_loading_type = {
    .name = "Bloom filter being loaded",
    .type_reply = "MBbloom--",
    .snap_kind = SNAP_KIND_RESTORE,
    .locked = true,
    .filter = true,
    .free_value = free_value,
};

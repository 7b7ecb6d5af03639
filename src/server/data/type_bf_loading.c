/* A Bloom filter dump being restored with BF.LOADCHUNK (dump.c): a
 * serial.h loader that becomes a Bloom or counting filter value when its
 * last chunk arrives. A loader is not safe for concurrent use: the object's
 * lock guards it.
 *
 * Log: WAL_LOADCHUNK, each accepted chunk as it came, replayed through the
 * restore itself (restore.c, the core the command runs) on the replayed
 * state; a header (iterator 1) loads only onto a missing key, so the key is
 * dropped first, as it was missing then. A snapshot taken during the
 * restore lists its records (SNAP_KIND_RESTORE).
 */
#include "keyspace.h"
#include "restore.h"
#include "types.h"

static void free_value(void *v) { bloomery_loader_free(v); }

static const uint8_t records[] = {WAL_LOADCHUNK, 0};

const value_type bf_loading_type = {
    .name = "Bloom filter being loaded",
    .type_reply = "MBbloom--",
    .module_type = "bloomerBF",
    .snap_kind = SNAP_KIND_RESTORE,
    .locked = true,
    .filter = true,
    .free_value = free_value,
    .records = records,
    .replay = restore_replay,
};

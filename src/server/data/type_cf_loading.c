/* A cuckoo filter dump being restored with CF.LOADCHUNK (dump.c): a
 * serial.h loader that becomes a cuckoo filter value when its last chunk
 * arrives, guarded by the object's lock. Its records (WAL_CF_LOADCHUNK)
 * replay through the restore itself (restore.c), as for BF.LOADCHUNK
 * (type_bf_loading.c).
 */
#include "keyspace.h"
#include "restore.h"
#include "types.h"

static void free_value(void *v) { bloomery_loader_free(v); }

static const uint8_t records[] = {WAL_CF_LOADCHUNK, 0};

const value_type cf_loading_type = {
    .name = "cuckoo filter being loaded",
    .type_reply = "MBbloomCF",
    .module_type = "bloomerCF",
    .snap_kind = SNAP_KIND_RESTORE,
    .locked = true,
    .filter = true,
    .free_value = free_value,
    .records = records,
    .replay = restore_replay,
};

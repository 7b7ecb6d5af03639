/* A dump being restored with BF.LOADCHUNK or CF.LOADCHUNK (dump.c): a
 * serial.h loader that becomes a Bloom or cuckoo filter value when its last
 * chunk arrives. Loaders are not safe for concurrent use (the object's lock
 * guards them). Its records (WAL_LOADCHUNK, WAL_CF_LOADCHUNK) replay
 * through the restore itself.
 */
#include "keyspace.h"
#include "types.h"

static void free_value(void *v) { bloomery_loader_free(v); }

const value_type bf_loading_type = {
    .name = "Bloom filter being loaded",
    .type_reply = "MBbloom--",
    .locked = true,
    .filter = true,
    .free_value = free_value,
};

const value_type cf_loading_type = {
    .name = "cuckoo filter being loaded",
    .type_reply = "MBbloomCF",
    .locked = true,
    .filter = true,
    .free_value = free_value,
};

/* A dump being restored with BF.LOADCHUNK or CF.LOADCHUNK (dump.c): a
 * serial.h loader that becomes a Bloom or cuckoo filter value when its last
 * chunk arrives. Loaders are not safe for concurrent use (the object's lock
 * guards them).
 *
 * Log: WAL_LOADCHUNK and WAL_CF_LOADCHUNK, each accepted chunk as it came.
 * They replay through the restore itself (restore.c, the core the commands
 * run) on the replayed state; a header (iterator 1) loads only onto a
 * missing key, so the key is dropped first, as it was missing then.
 */
#include "keyspace.h"
#include "restore.h"
#include "types.h"

static void free_value(void *v) { bloomery_loader_free(v); }

static const char *replay(const wal_op *op) {
    ks_ref ref;
    kv_entry *e = ks_open(&ref, (const char *)op->key, op->klen, true);
    if (e && op->iter == 1) {
        ks_remove(&ref);
        e = NULL;
    }
    const char *detail;
    value_status st = op->type == WAL_CF_LOADCHUNK
                          ? restore_cf_chunk(&ref, e, op->iter, op->data, op->dlen)
                          : restore_bf_chunk(&ref, e, op->iter, op->data, op->dlen, &detail);
    ks_close(&ref);
    return st == VS_OK ? NULL : value_status_text(st);
}

static const uint8_t bf_records[] = {WAL_LOADCHUNK, 0};
static const uint8_t cf_records[] = {WAL_CF_LOADCHUNK, 0};

const value_type bf_loading_type = {
    .name = "Bloom filter being loaded",
    .type_reply = "MBbloom--",
    .locked = true,
    .filter = true,
    .free_value = free_value,
    .records = bf_records,
    .replay = replay,
};

const value_type cf_loading_type = {
    .name = "cuckoo filter being loaded",
    .type_reply = "MBbloomCF",
    .locked = true,
    .filter = true,
    .free_value = free_value,
    .records = cf_records,
    .replay = replay,
};

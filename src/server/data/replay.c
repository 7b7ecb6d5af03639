/* Replay of log records on the recovered keyspace (recovery.c calls it for
 * every record at or after the snapshot's start LSN, in LSN order, on one
 * thread, before any client connects).
 *
 * Data records apply hashes through the library's *_hashed calls. Bloom
 * adds are idempotent ORs, so a record whose bits a snapshot already copied
 * changes nothing but the item count, which the record's "new" bit
 * corrects. Counting filters and HLLs were copied exactly at the
 * snapshot's start, so their records apply once each.
 *
 * Barriers re-create the structural change: creation with the logged
 * parameters, deletion, expiry, a forced rename, flush. Merges and loaded
 * chunks run again on the replayed state through the core their command
 * ran (bloom_merge, hll_merge_keys, restore.c), reached through their
 * type's descriptor: replay never calls a command handler. Expiry is
 * paused meanwhile (keyspace.h), so the keyspace looks as it did when the
 * records were written; a key that existed then exists now.
 *
 * A record that no longer fits the state (its key missing, another type)
 * is skipped with a warning: the state is what the log produced, and a
 * replay never stops half way for a semantic mismatch.
 */
#include <inttypes.h>
#include <string.h>

#include "persist.h"
#include "replay.h"
#include "log.h"
#include "util.h"

static uint64_t skipped;

static void skip(const wal_record *rec, const char *why)
{
    if (skipped++ < 20)
        server_log(LOG_WARNING, "Replay: %s record LSN %" PRIu64 " skipped: %s",
                   wal_type_name(rec->type), rec->lsn, why);
}

uint64_t replay_skipped(void) { return skipped; }

static void drop_key(const uint8_t *key, size_t klen)
{
    ks_ref ref;
    if (ks_open(&ref, (const char *)key, klen, true))
        ks_remove(&ref);
    ks_close(&ref);
}

static void apply_rename(const wal_op *op)
{
    const char *keys[2] = {(const char *)op->key, (const char *)op->key2};
    size_t lens[2] = {op->klen, op->klen2};
    if (lens[0] == lens[1] && memcmp(keys[0], keys[1], lens[0]) == 0)
        return;
    ks_multi m;
    ks_lock_many(&m, keys, lens, 2, true);
    ks_ref src, dst;
    kv_entry *e = ks_find_locked(keys[0], lens[0], &src, true);
    if (ks_find_locked(keys[1], lens[1], &dst, true))
        ks_remove(&dst);
    kv_obj *placeholder = e ? kv_obj_new(&hll_type, NULL) : NULL;
    if (e && placeholder && ks_add(&dst, e->obj)) {
        if (e->expire_ms)
            ks_set_expire(&dst, e->expire_ms);
        /* As RENAME does: the old entry keeps an empty object. */
        e->obj = placeholder;
        src.e = e;
        ks_remove(&src);
    } else {
        kv_obj_free(placeholder);
    }
    ks_unlock_many(&m);
}

void replay_apply(const wal_record *rec, const wal_op *op)
{
    switch (op->type) {
    case WAL_DEL: {
        size_t cur = 0, klen;
        const uint8_t *key;
        while (wal_op_next_key(op, &cur, &key, &klen))
            drop_key(key, klen);
        return;
    }
    case WAL_EXPIRE: {
        ks_ref ref;
        if (ks_open(&ref, (const char *)op->key, op->klen, true))
            ks_set_expire(&ref, op->when_ms);
        else
            skip(rec, "key is missing");
        ks_close(&ref);
        return;
    }
    case WAL_VALUE_FLAGS: {
        ks_ref ref;
        kv_entry *e = ks_open(&ref, (const char *)op->key, op->klen, true);
        if (e)
            e->obj->readonly = op->value_flags & WAL_FLAG_READONLY;
        else
            skip(rec, "key is missing");
        ks_close(&ref);
        return;
    }
    case WAL_RENAME: apply_rename(op); return;
    case WAL_FLUSH: ks_flush(); return;
    }
    /* A value's own records (merges and restored chunks included): its
     * type replays them. */
    const value_type *t = type_by_record(op->type);
    const char *why = t ? t->replay(op) : "no type replays this record";
    if (why)
        skip(rec, why);
}

/* The t-digest value (tdigest_t) behind TDIGEST.* (t_tdigest.c). Adds
 * reorder the buffer and queries merge a copy of it, so every access holds
 * the object's lock; a value is a few kilobytes of fixed size (6c + 10
 * nodes), so a snapshot copies it at its capture. Log: WAL_TD_CREATE with
 * the compression, WAL_TD_ADD with the values as doubles, WAL_TD_RESET, and
 * WAL_TD_MERGE naming its keys with the compression the command resolved,
 * replayed through tdigest_merge_keys, the core TDIGEST.MERGE runs.
 */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "keyspace.h"
#include "le.h"
#include "types.h"

static void free_value(void *v) { tdigest_free(v); }

static uint64_t adopt(kv_obj *o) { return tdigest_bytes(o->v); }

kv_obj *tdigest_value_new(uint64_t compression, size_t klen, value_status *st)
{
    uint64_t maxmem = (uint64_t)atomic_load_explicit(&cfg.maxmemory, memory_order_relaxed);
    uint64_t bytes = tdigest_bytes_for(compression);
    if (bytes == 0) {
        *st = VS_FAILED;
        return NULL;
    }
    /* The key's entry has to fit too when the value takes a new key. */
    uint64_t overhead = klen ? ks_entry_overhead(klen) : 0;
    if (!ks_mem_try_reserve(bytes + overhead, maxmem)) {
        *st = maxmem ? VS_OOM : VS_NOMEM;
        return NULL;
    }
    ks_mem_add(-(int64_t)overhead); /* ks_add counts it */
    tdigest_t *t = NULL;
    int rc = tdigest_create(&t, compression);
    kv_obj *o = rc == BLOOMERY_OK ? kv_obj_new(&tdigest_type, t) : NULL;
    if (o == NULL) {
        tdigest_free(t);
        ks_mem_add(-(int64_t)bytes);
        *st = rc == BLOOMERY_ENOMEM || rc == BLOOMERY_OK ? VS_NOMEM : VS_FAILED;
        return NULL;
    }
    atomic_store(&o->value_bytes, bytes);
    return o;
}

value_status tdigest_merge_keys(const char *const *keys, const size_t *lens, size_t n,
                                uint64_t compression, bool override, uint64_t *used_compression,
                                bool *used_override)
{
    if (n < 2)
        return VS_NOT_FOUND;
    ks_ref dref;
    kv_entry *dst = ks_find_locked(keys[0], lens[0], &dref, true);
    if (dst && dst->obj->type != &tdigest_type)
        return VS_WRONGTYPE;
    const tdigest_t *small[16];
    const tdigest_t **srcs = n <= 16 ? small : malloc(n * sizeof(*srcs));
    if (srcs == NULL)
        return VS_NOMEM;
    value_status st = VS_OK;
    /* srcs[0] is the destination's old value, kept unless overridden. */
    bool keep_old = dst && !override;
    srcs[0] = keep_old ? dst->obj->v : NULL;
    uint64_t widest = 0;
    for (size_t i = 1; i < n && st == VS_OK; i++) {
        ks_ref r;
        kv_entry *e = ks_find_locked(keys[i], lens[i], &r, false);
        if (e == NULL)
            st = VS_NOT_FOUND;
        else if (e->obj->type != &tdigest_type)
            st = VS_WRONGTYPE;
        else {
            srcs[i] = e->obj->v;
            tdigest_state s;
            tdigest_state_of(srcs[i], &s);
            widest = s.compression > widest ? s.compression : widest;
        }
    }
    if (st != VS_OK)
        goto out;
    /* RedisBloom's rule: the destination's compression when it is kept,
     * else the largest of the sources', unless the command named one. */
    if (compression == 0) {
        tdigest_state s = {0};
        if (keep_old)
            tdigest_state_of(dst->obj->v, &s);
        compression = keep_old ? s.compression : widest;
    }
    kv_obj *o = tdigest_value_new(compression, dst ? 0 : lens[0], &st);
    if (o == NULL)
        goto out;
    if (tdigest_merge(o->v, srcs, n) != BLOOMERY_OK) {
        ks_mem_add(-(int64_t)kv_obj_bytes(o));
        kv_obj_free(o);
        st = VS_OVERFLOW;
        goto out;
    }
    /* The merged value replaces the key, and its expiry with it, as a
     * module's RedisModule_ModuleTypeSetValue does. */
    if (dst)
        ks_remove(&dref); /* frees the old value and uncounts it */
    if (ks_add(&dref, o) == NULL) {
        ks_mem_add(-(int64_t)kv_obj_bytes(o));
        kv_obj_free(o);
        st = VS_OOM;
        goto out;
    }
    *used_compression = compression;
    *used_override = !keep_old;
out:
    if (srcs != small)
        free(srcs);
    return st;
}

static value_status replay_merge(const wal_op *op, const char *const *keys, const size_t *lens,
                                 size_t n, bool *created)
{
    *created = false;
    uint64_t compression;
    bool override;
    return tdigest_merge_keys(keys, lens, n, op->compression, op->override, &compression,
                              &override);
}

static const char *replay(const wal_op *op)
{
    if (op->type == WAL_TD_MERGE)
        return type_replay_merge(op, replay_merge);
    if (op->type == WAL_TD_CREATE) {
        value_status st;
        kv_obj *o = tdigest_value_new(op->compression, 0, &st);
        if (o == NULL)
            return value_status_text(st);
        return ks_replace(op->key, op->klen, o, 0) ? NULL : "out of memory";
    }
    ks_ref ref;
    const char *why = NULL;
    kv_entry *e = type_open_record_key(&ref, op, &tdigest_type, false, &why);
    if (e != NULL) {
        if (op->type == WAL_TD_RESET) {
            tdigest_reset(e->obj->v);
        } else {
            double small[64];
            double *v = op->n <= 64 ? small : malloc(op->n * sizeof(*v));
            if (v == NULL) {
                why = "out of memory";
            } else {
                for (uint32_t i = 0; i < op->n; i++) {
                    uint64_t bits = le_load(op->items + 8 * (size_t)i, 8);
                    memcpy(&v[i], &bits, 8);
                }
                if (tdigest_add(e->obj->v, v, op->n) != BLOOMERY_OK)
                    why = "the t-digest refused the values";
                if (v != small)
                    free(v);
            }
        }
    }
    ks_close(&ref);
    return why;
}

static const uint8_t records[] = {WAL_TD_ADD, WAL_TD_CREATE, WAL_TD_RESET, WAL_TD_MERGE, 0};

const value_type tdigest_type = {
    .name = "t-digest",
    .type_reply = "TDIS-TYPE",
    .module_type = "bloomerTD",
    .snap_kind = SNAP_KIND_TDIGEST,
    .image = BLOOMERY_TYPE_TDIGEST,
    .locked = true,
    .free_value = free_value,
    .adopt = adopt,
    .records = records,
    .replay = replay,
};

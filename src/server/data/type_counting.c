/* The counting Bloom filter value (cntbf_t), BF.RESERVE ... COUNTING, with
 * BF.DEL (bf_del.c).
 *
 * Writers serialize on the object so the log holds their changes in the
 * order they were applied (saturated counters make adds and deletes
 * order-sensitive); a snapshot keeps it as at its capture (copy-on-write
 * through the library's write barrier), so each record after the capture
 * applies exactly once. Log: WAL_CREATE with the counting
 * kind (replayed here for type_bloom.c), WAL_CNT_ADD and WAL_CNT_DEL with
 * the items' hashes.
 */
#include "keyspace.h"
#include "le.h"
#include "types.h"

static void free_value(void *v) { cntbf_free(v); }

static uint64_t adopt(kv_obj *o) { return cntbf_bytes(o->v); }

static const char *replay_create(const wal_op *op)
{
    const wal_create *p = &op->create;
    cntbf_t *f;
    int rc = cntbf_create(&f, p->capacity, p->error, NULL);
    if (rc != BLOOMERY_OK)
        return bloomery_strerror(rc);
    kv_obj *o = kv_obj_new(&counting_type, f);
    if (o == NULL) {
        cntbf_free(f);
        return "out of memory";
    }
    uint64_t bytes = cntbf_bytes(f);
    atomic_store(&o->value_bytes, bytes);
    ks_mem_add((int64_t)bytes);
    return ks_replace(op->key, op->klen, o, p->expire_ms) ? NULL : "out of memory";
}

static const char *replay(const wal_op *op)
{
    if (op->type == WAL_CREATE)
        return replay_create(op);
    ks_ref ref;
    const char *missing;
    kv_entry *e = type_open_record_key(&ref, op, &counting_type, false, &missing);
    if (e == NULL)
        return missing;
    for (uint32_t i = 0; i < op->n; i++) {
        bloomery_hash h = {le_load(op->items + 16 * (size_t)i, 8),
                           le_load(op->items + 16 * (size_t)i + 8, 8)};
        if (op->type == WAL_CNT_ADD)
            cntbf_add_hashed(e->obj->v, h);
        else
            cntbf_delete_hashed(e->obj->v, h);
    }
    ks_close(&ref);
    return NULL;
}

static void set_write_hook(void *v, value_write_hook hook, void *ctx)
{
    cntbf_set_write_hook(v, hook, ctx);
}

static const uint8_t records[] = {WAL_CNT_ADD, WAL_CNT_DEL, 0};

static void stats(const kv_obj *o, value_stats *s)
{
    s->layout = "counting";
    s->capacity = cntbf_capacity(o->v);
    s->items = cntbf_count(o->v);
    s->bytes = cntbf_bytes(o->v);
    s->parts = 1;
    s->fpr = -1;
    s->error_rate = cntbf_error_rate(o->v);
}

static double fpr(const kv_obj *o) { return cntbf_fpr_estimate(o->v); }

const value_type counting_type = {
    .name = "counting filter",
    .type_reply = "MBbloom--",
    .module_type = "bloomerBF",
    .snap_kind = SNAP_KIND_COUNTING,
    .image = BLOOMERY_TYPE_COUNTING,
    .set_write_hook = set_write_hook,
    .filter = true,
    .free_value = free_value,
    .adopt = adopt,
    .records = records,
    .replay = replay,
    .stats = stats,
    .fpr = fpr,
};

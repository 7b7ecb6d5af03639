/* The top-k value (topk_t) behind TOPK.* (t_topk.c). Adds decay buckets,
 * reorder the heap and draw from the value's generator: every access holds
 * the object's lock. A snapshot keeps the value as at its capture: the
 * generator's state is in the image header, the heap's image is built at
 * the capture (adds do not change it), and the buckets, which may be large,
 * are kept by copy-on-write through the library's write barrier. Log: WAL_TOPK_CREATE with
 * the parameters and the generator's seed, WAL_TOPK_ADD with the items and
 * increments in the order they were applied under the lock, so replay
 * repeats the same draws from the same state and ends in the same buckets
 * and heap.
 */
#include "keyspace.h"
#include "types.h"

static void free_value(void *v) { topk_free(v); }

static uint64_t adopt(kv_obj *o) { return topk_bytes(o->v); }

void topk_value_sync(kv_obj *o)
{
    uint64_t now = topk_bytes(o->v);
    uint64_t old = atomic_exchange(&o->value_bytes, now);
    if (now != old)
        ks_mem_add((int64_t)now - (int64_t)old);
}

static const char *replay_create(const wal_op *op)
{
    const wal_topk *p = &op->topk;
    topk_t *t;
    int rc = topk_create(&t, p->k, p->width, p->depth, p->decay, p->seed);
    if (rc != BLOOMERY_OK)
        return bloomery_strerror(rc);
    kv_obj *o = kv_obj_new(&topk_type, t);
    if (o == NULL) {
        topk_free(t);
        return "out of memory";
    }
    atomic_store(&o->value_bytes, topk_bytes(t));
    ks_mem_add((int64_t)topk_bytes(t));
    return ks_replace(op->key, op->klen, o, 0) ? NULL : "out of memory";
}

static const char *replay(const wal_op *op)
{
    if (op->type == WAL_TOPK_CREATE)
        return replay_create(op);
    ks_ref ref;
    const char *missing;
    kv_entry *e = type_open_record_key(&ref, op, &topk_type, false, &missing);
    if (e == NULL)
        return missing;
    const char *why = NULL;
    size_t cur = 0;
    const uint8_t *item;
    size_t len;
    uint64_t incr;
    pthread_mutex_lock(&e->obj->lock);
    while (wal_op_next_item(op, &cur, &item, &len, &incr))
        if (incr > UINT32_MAX || topk_add(e->obj->v, item, len, (uint32_t)incr, NULL) < 0)
            why = "the top-k refused an item";
    topk_value_sync(e->obj);
    pthread_mutex_unlock(&e->obj->lock);
    ks_close(&ref);
    return why;
}

static void set_write_hook(void *v, value_write_hook hook, void *ctx)
{
    topk_set_write_hook(v, hook, ctx);
}

static const uint8_t records[] = {WAL_TOPK_CREATE, WAL_TOPK_ADD, 0};

const value_type topk_type = {
    .name = "top-k",
    .type_reply = "TopK-TYPE",
    .module_type = "bloomerTK",
    .snap_kind = SNAP_KIND_TOPK,
    .image = BLOOMERY_TYPE_TOPK,
    .set_write_hook = set_write_hook,
    .locked = true,
    .free_value = free_value,
    .adopt = adopt,
    .records = records,
    .replay = replay,
};

/* The count-min sketch value (cms_t) behind CMS.* (t_cms.c). Counters are
 * plain integers changed in place and increments do not commute with a
 * copy made while they run: every access holds the object's lock, and a
 * snapshot keeps the value as at its capture by copy-on-write through the
 * library's write barrier (a sketch may be gigabytes: no copy under the
 * capture's locks), so each record after the capture applies once. Log: WAL_CMS_CREATE with the
 * dimensions, WAL_CMS_INCRBY with the items and increments that were
 * applied (a replay of the same increments on the same state is refused
 * nowhere the original was not), WAL_CMS_MERGE with the keys and weights,
 * replayed through cms_merge_keys, the core CMS.MERGE runs.
 */
#include <stdlib.h>

#include "keyspace.h"
#include "types.h"

static void free_value(void *v) { cms_free(v); }

static uint64_t adopt(kv_obj *o) { return cms_bytes(o->v); }

value_status cms_merge_keys(const char *const *keys, const size_t *lens, size_t n,
                            const int64_t *weights)
{
    if (n < 2)
        return VS_NOT_FOUND;
    ks_ref ref;
    kv_entry *dst = ks_find_locked(keys[0], lens[0], &ref, true);
    if (dst == NULL)
        return VS_NOT_FOUND;
    if (dst->obj->type != &cms_type)
        return VS_WRONGTYPE;
    const cms_t *small[16];
    const cms_t **srcs = n - 1 <= 16 ? small : malloc((n - 1) * sizeof(*srcs));
    if (srcs == NULL)
        return VS_NOMEM;
    value_status st = VS_OK;
    for (size_t i = 1; i < n && st == VS_OK; i++) {
        kv_entry *e = ks_find_locked(keys[i], lens[i], &ref, false);
        if (e == NULL)
            st = VS_NOT_FOUND;
        else if (e->obj->type != &cms_type)
            st = VS_WRONGTYPE;
        else if (cms_width(e->obj->v) != cms_width(dst->obj->v) ||
                 cms_depth(e->obj->v) != cms_depth(dst->obj->v))
            st = VS_MISMATCH;
        else
            srcs[i - 1] = e->obj->v;
    }
    /* Every stripe involved is locked exclusively: no other command can
     * reach these objects, so their own locks are not needed. */
    if (st == VS_OK) {
        int rc = cms_merge(dst->obj->v, srcs, weights, n - 1);
        st = rc == BLOOMERY_OK ? VS_OK : rc == BLOOMERY_EFULL ? VS_OVERFLOW : VS_MISMATCH;
    }
    if (srcs != small)
        free(srcs);
    return st;
}

static const char *replay_create(const wal_op *op)
{
    cms_t *c;
    int rc = cms_create(&c, op->cms.width, op->cms.depth);
    if (rc != BLOOMERY_OK)
        return bloomery_strerror(rc);
    kv_obj *o = kv_obj_new(&cms_type, c);
    if (o == NULL) {
        cms_free(c);
        return "out of memory";
    }
    atomic_store(&o->value_bytes, cms_bytes(c));
    ks_mem_add((int64_t)cms_bytes(c));
    return ks_replace(op->key, op->klen, o, 0) ? NULL : "out of memory";
}

static value_status replay_merge(const wal_op *op, const char *const *keys, const size_t *lens,
                                 size_t n, bool *created)
{
    *created = false;
    int64_t small[16] = {0};
    int64_t *weights = n <= 16 ? small : malloc(n * sizeof(*weights));
    if (weights == NULL)
        return VS_NOMEM;
    for (size_t i = 0; i + 1 < n; i++)
        weights[i] = wal_op_weight(op, (uint32_t)i);
    value_status st = cms_merge_keys(keys, lens, n, weights);
    if (weights != small)
        free(weights);
    return st;
}

static const char *replay(const wal_op *op)
{
    if (op->type == WAL_CMS_CREATE)
        return replay_create(op);
    if (op->type == WAL_CMS_MERGE)
        return type_replay_merge(op, replay_merge);
    ks_ref ref;
    const char *missing;
    kv_entry *e = type_open_record_key(&ref, op, &cms_type, false, &missing);
    if (e == NULL)
        return missing;
    const char *why = NULL;
    size_t cur = 0;
    const uint8_t *item;
    size_t len;
    uint64_t incr;
    pthread_mutex_lock(&e->obj->lock);
    while (wal_op_next_item(op, &cur, &item, &len, &incr))
        if (cms_incrby(e->obj->v, item, len, incr, NULL) != BLOOMERY_OK)
            why = "an increment overflowed";
    pthread_mutex_unlock(&e->obj->lock);
    ks_close(&ref);
    return why;
}

static void set_write_hook(void *v, value_write_hook hook, void *ctx)
{
    cms_set_write_hook(v, hook, ctx);
}

static const uint8_t records[] = {WAL_CMS_CREATE, WAL_CMS_INCRBY, WAL_CMS_MERGE, 0};

const value_type cms_type = {
    .name = "count-min sketch",
    .type_reply = "CMSk-TYPE",
    .module_type = "bloomerCM",
    .snap_kind = SNAP_KIND_CMS,
    .image = BLOOMERY_TYPE_CMS,
    .set_write_hook = set_write_hook,
    .locked = true,
    .free_value = free_value,
    .adopt = adopt,
    .records = records,
    .replay = replay,
};

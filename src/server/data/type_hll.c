/* The HyperLogLog value (hll_t), Redis's string encoding, behind PF*
 * (t_hll.c). Not safe for concurrent readers: every access holds the
 * object's lock. Log: WAL_PF_ADD with the elements' 64-bit hashes (and
 * whether the command created the key); a snapshot copies the value at its
 * capture, so each record after it applies once. WAL_PF_MERGE replays
 * through hll_merge_keys, the core PFMERGE runs.
 */
#include <stdlib.h>

#include "config.h"
#include "keyspace.h"
#include "le.h"
#include "types.h"

static void free_value(void *v) { hll_free(v); }

size_t hll_sparse_max(void)
{
    long long v = atomic_load_explicit(&cfg.hll_sparse_max_bytes, memory_order_relaxed);
    return v > 0 ? (size_t)v : 1;
}

void hll_value_sync(kv_obj *o)
{
    size_t len;
    hll_bytes(o->v, &len);
    uint64_t old = atomic_exchange(&o->value_bytes, (uint64_t)len);
    ks_mem_add((int64_t)len - (int64_t)old);
}

static uint64_t adopt(kv_obj *o)
{
    size_t len;
    hll_bytes(o->v, &len);
    return len;
}

kv_obj *hll_value_new(void)
{
    hll_t *h;
    if (hll_create(&h, hll_sparse_max()) != BLOOMERY_OK)
        return NULL;
    kv_obj *o = kv_obj_new(&hll_type, h);
    if (o == NULL) {
        hll_free(h);
        return NULL;
    }
    hll_value_sync(o);
    return o;
}

value_status hll_merge_keys(const char *const *keys, const size_t *lens, size_t n, bool *created,
                            const char **used, size_t *used_lens, size_t *nused)
{
    *created = false;
    hll_t **srcs = calloc(n ? n : 1, sizeof(*srcs));
    if (srcs == NULL)
        return VS_OOM;
    size_t nsrc = 0, k = 1;
    value_status st = VS_OK;
    ks_ref dref;
    kv_entry *dst = ks_find_locked(keys[0], lens[0], &dref, true);
    if (dst && dst->obj->type != &hll_type) {
        st = VS_WRONGTYPE;
        goto out;
    }
    for (size_t i = 1; i < n; i++) {
        ks_ref r;
        kv_entry *e = ks_find_locked(keys[i], lens[i], &r, false);
        if (e == NULL)
            continue;
        if (e->obj->type != &hll_type) {
            st = VS_WRONGTYPE;
            goto out;
        }
        if (dst && e->obj == dst->obj)
            continue;
        srcs[nsrc++] = e->obj->v;
        /* Replay must not merge a key that was missing (expired) here but
         * is still present there. */
        if (used) {
            used[k] = keys[i];
            used_lens[k++] = lens[i];
        }
    }
    if (dst == NULL) {
        kv_obj *o = hll_value_new();
        if (o == NULL || (dst = ks_add(&dref, o)) == NULL) {
            if (o)
                ks_mem_add(-(int64_t)kv_obj_bytes(o));
            kv_obj_free(o);
            st = VS_OOM;
            goto out;
        }
        *created = true;
    }
    /* Exclusive stripes: nobody else can touch these HLLs meanwhile. */
    hll_set_sparse_max(dst->obj->v, hll_sparse_max());
    int rc = hll_merge(dst->obj->v, srcs, nsrc);
    hll_value_sync(dst->obj);
    if (rc < 0)
        st = VS_CORRUPT;
    if (used) {
        used[0] = keys[0];
        used_lens[0] = lens[0];
        *nused = k;
    }
out:
    free(srcs);
    return st;
}

static value_status merge(const wal_op *op, const char *const *keys, const size_t *lens, size_t n,
                          bool *created)
{
    (void)op;
    return hll_merge_keys(keys, lens, n, created, NULL, NULL, NULL);
}

static const char *replay(const wal_op *op)
{
    if (op->type == WAL_PF_MERGE)
        return type_replay_merge(op, merge);
    if (op->created) {
        kv_obj *o = hll_value_new();
        if (o == NULL || !ks_replace(op->key, op->klen, o, 0))
            return "out of memory";
    }
    ks_ref ref;
    const char *missing;
    kv_entry *e = type_open_record_key(&ref, op, &hll_type, false, &missing);
    if (e == NULL)
        return missing;
    const char *why = NULL;
    hll_set_sparse_max(e->obj->v, hll_sparse_max());
    for (uint32_t i = 0; i < op->n; i++)
        if (hll_add_hashed(e->obj->v, le_load(op->items + 8 * (size_t)i, 8)) < 0) {
            why = "the HLL refused an element";
            break;
        }
    hll_value_sync(e->obj);
    ks_close(&ref);
    return why;
}

static const uint8_t records[] = {WAL_PF_ADD, WAL_PF_MERGE, 0};

const value_type hll_type = {
    .name = "HyperLogLog",
    .type_reply = "string",
    .snap_kind = SNAP_KIND_HLL,
    .image = BLOOMERY_TYPE_HLL,
    .locked = true,
    .free_value = free_value,
    .adopt = adopt,
    .records = records,
    .replay = replay,
};

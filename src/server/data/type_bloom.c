/* The Bloom filter value: libbloomery's scalable chain (sbf_t), blocked or
 * classic links, behind BF.* (t_bloom.c).
 *
 * Log: WAL_CREATE (also for counting filters, by kind) and WAL_BF_ADD, the
 * items' chain hashes with the bit saying whether the add reported each
 * new. Adds are idempotent ORs, so a record whose bits a snapshot already
 * copied changes nothing but the item count, which the "new" bit corrects:
 * counts, and so the growth of scaling chains, follow the original server.
 */
#include <stdlib.h>

#include "keyspace.h"
#include "le.h"
#include "types.h"

static void free_value(void *v) { sbf_free(v); }

static uint64_t adopt(kv_obj *o) {
    sbf_set_may_allocate(o->v, kv_obj_may_grow, o);
    return sbf_bytes(o->v);
}

static void adjust_count(sbf_t *f, int delta) {
    size_t n = sbf_nlinks(f);
    if (sbf_layout(f) == BLOOMERY_LAYOUT_CLASSIC) {
        cbf_t *l = sbf_link_classic(f, n - 1);
        uint64_t v = cbf_count(l);
        if (delta > 0 || v > 0) cbf_set_count(l, v + (uint64_t)(int64_t)delta);
    } else {
        bf_t *l = sbf_link_blocked(f, n - 1);
        uint64_t v = bf_count(l);
        if (delta > 0 || v > 0) bf_set_count(l, v + (uint64_t)(int64_t)delta);
    }
}

static const char *replay_add(const wal_op *op) {
    ks_ref ref;
    kv_entry *e = ks_open(&ref, (const char *)op->key, op->klen, false);
    if (e == NULL || e->obj->type != &bloom_type) {
        ks_close(&ref);
        return e ? "key is not a Bloom filter" : "key is missing";
    }
    sbf_t *f = e->obj->v;
    const char *why = NULL;
    for (uint32_t i = 0; i < op->n; i++) {
        sbf_hash h = {le_load(op->items + 16 * (size_t)i, 8),
                      le_load(op->items + 16 * (size_t)i + 8, 8)};
        bool was_new = op->flags[i / 8] >> (i % 8) & 1;
        int r = sbf_add_hashed(f, h);
        if (r < 0) {
            why = "the filter refused an item";
            continue;
        }
        if (was_new != (r == 1)) adjust_count(f, was_new ? 1 : -1);
    }
    ks_close(&ref);
    return why;
}

static const char *replay_create(const wal_op *op) {
    const wal_create *p = &op->create;
    if (p->kind == WAL_KIND_COUNTING) return counting_type.replay(op);
    kv_obj *o = kv_obj_new(&bloom_type, NULL);
    if (o == NULL) return "out of memory";
    sbf_options opts = {
        .layout = (bloomery_layout)p->layout,
        .expansion = p->expansion,
        .seed = 0,
        .policy = BLOOMERY_POLICY_LATENCY,
        .may_allocate = kv_obj_may_grow,
        .may_allocate_ctx = o,
    };
    sbf_t *f;
    int rc = sbf_create(&f, p->capacity, p->error, &opts);
    if (rc != BLOOMERY_OK) {
        ks_mem_add(-(int64_t)kv_obj_bytes(o));
        kv_obj_free(o);
        return bloomery_strerror(rc);
    }
    o->v = f;
    return ks_replace(op->key, op->klen, o, p->expire_ms) ? NULL : "out of memory";
}

static const char *replay(const wal_op *op) {
    return op->type == WAL_CREATE ? replay_create(op) : replay_add(op);
}

static const uint8_t records[] = {WAL_CREATE, WAL_BF_ADD, 0};

const value_type bloom_type = {
    .name = "Bloom filter",
    .type_reply = "MBbloom--",
    .snap_kind = SNAP_KIND_BLOOM,
    .image = BLOOMERY_TYPE_SCALABLE,
    .monotone = true,
    .filter = true,
    .free_value = free_value,
    .adopt = adopt,
    .records = records,
    .replay = replay,
};

/* The Bloom filter value: libbloomery's scalable chain (sbf_t), blocked,
 * classic or prefix links, behind BF.* (bf.h lists its files).
 *
 * Snapshots read blocked and classic chains live (their bits only go from 0
 * to 1); a prefix chain's bins shift and give fingerprints up, so its bins
 * are saved copy-on-write (sbf_set_write_hook).
 *
 * Log: WAL_CREATE (also for counting filters, by kind) and WAL_BF_ADD, the
 * items' chain hashes with the bit saying whether the add reported each
 * new. Adds are idempotent ORs, so a record whose bits a snapshot already
 * copied changes nothing but the item count, which the "new" bit corrects:
 * counts, and so the growth of scaling chains, follow the original server.
 * WAL_BF_MERGE (Bloom and counting filters) replays through bloom_merge,
 * the core BF.MERGE runs, on the replayed state.
 */
#include <stdlib.h>

#include "config.h"
#include "keyspace.h"
#include "le.h"
#include "types.h"

static void free_value(void *v) { sbf_free(v); }

/* Growth is reserved through kv_obj_may_grow; a growing filter's old
 * table, given back, through kv_obj_released. */
static void count_memory(kv_obj *o)
{
    sbf_set_may_allocate(o->v, kv_obj_may_grow, o);
    sbf_set_released(o->v, kv_obj_released, o);
}

static uint64_t adopt(kv_obj *o)
{
    count_memory(o);
    return sbf_bytes(o->v);
}

static void adjust_count(sbf_t *f, int delta)
{
    size_t n = sbf_nlinks(f);
    if (sbf_layout(f) == BLOOMERY_LAYOUT_PREFIX) {
        pf_t *l = sbf_link_prefix(f, n - 1);
        uint64_t v = pf_count(l);
        if (delta > 0 || v > 0)
            pf_set_count(l, v + (uint64_t)(int64_t)delta);
    } else if (sbf_layout(f) == BLOOMERY_LAYOUT_GROWING) {
        gf_t *l = sbf_link_growing(f, 0);
        uint64_t v = gf_count(l);
        if (delta > 0 || v > 0)
            gf_set_count(l, v + (uint64_t)(int64_t)delta);
    } else if (sbf_layout(f) == BLOOMERY_LAYOUT_CLASSIC) {
        cbf_t *l = sbf_link_classic(f, n - 1);
        uint64_t v = cbf_count(l);
        if (delta > 0 || v > 0)
            cbf_set_count(l, v + (uint64_t)(int64_t)delta);
    } else {
        bf_t *l = sbf_link_blocked(f, n - 1);
        uint64_t v = bf_count(l);
        if (delta > 0 || v > 0)
            bf_set_count(l, v + (uint64_t)(int64_t)delta);
    }
}

static const char *replay_add(const wal_op *op)
{
    ks_ref ref;
    const char *missing;
    kv_entry *e = type_open_record_key(&ref, op, &bloom_type, false, &missing);
    if (e == NULL)
        return missing;
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
        if (was_new != (r == 1))
            adjust_count(f, was_new ? 1 : -1);
    }
    ks_close(&ref);
    return why;
}

static const char *replay_create(const wal_op *op)
{
    const wal_create *p = &op->create;
    if (p->kind == WAL_KIND_COUNTING)
        return counting_type.replay(op);
    kv_obj *o = kv_obj_new(&bloom_type, NULL);
    if (o == NULL)
        return "out of memory";
    sbf_options opts = {
        .layout = (bloomery_layout)p->layout,
        .expansion = p->expansion,
        .seed = 0,
        .policy = BLOOMERY_POLICY_LATENCY,
        .may_allocate = kv_obj_may_grow,
        .may_allocate_ctx = o,
        .schedule = p->kind == WAL_KIND_SCALABLE ? SBF_SCHEDULE_HALVES : SBF_SCHEDULE_FIRST_SHARE,
    };
    sbf_t *f;
    int rc = sbf_create(&f, p->capacity, p->error, &opts);
    if (rc != BLOOMERY_OK) {
        ks_mem_add(-(int64_t)kv_obj_bytes(o));
        kv_obj_free(o);
        return bloomery_strerror(rc);
    }
    o->v = f;
    sbf_set_released(f, kv_obj_released, o);
    return ks_replace(op->key, op->klen, o, p->expire_ms) ? NULL : "out of memory";
}

/* ---- BF.MERGE ---- */

static bool is_filter(const kv_obj *o)
{
    return o->type == &bloom_type || o->type == &counting_type;
}

/* Whether the library would merge b into a. */
static bool same_shape(const kv_obj *a, const kv_obj *b)
{
    if (a->type != b->type)
        return false;
    if (a->type == &counting_type)
        return cntbf_nblocks(a->v) == cntbf_nblocks(b->v) &&
               cntbf_blocks_per_key(a->v) == cntbf_blocks_per_key(b->v) &&
               cntbf_seed(a->v) == cntbf_seed(b->v);
    const sbf_t *x = a->v, *y = b->v;
    size_t n = sbf_nlinks(x);
    /* Growing filters' tables do not merge (sbf_merge). */
    if (sbf_layout(x) != sbf_layout(y) || sbf_expansion(x) != sbf_expansion(y) ||
        sbf_seed(x) != sbf_seed(y) || n != sbf_nlinks(y) ||
        sbf_layout(x) == BLOOMERY_LAYOUT_GROWING)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (sbf_layout(x) == BLOOMERY_LAYOUT_PREFIX) {
            if (!pf_same_shape(sbf_link_prefix(x, i), sbf_link_prefix(y, i)))
                return false;
        } else if (sbf_layout(x) == BLOOMERY_LAYOUT_CLASSIC) {
            cbf_shape sa, sb;
            cbf_shape_of(sbf_link_classic(x, i), &sa);
            cbf_shape_of(sbf_link_classic(y, i), &sb);
            if (sa.bits != sb.bits || sa.hashes != sb.hashes)
                return false;
        } else {
            const bf_t *la = sbf_link_blocked(x, i), *lb = sbf_link_blocked(y, i);
            if (bf_nblocks(la) != bf_nblocks(lb) || bf_blocks_per_key(la) != bf_blocks_per_key(lb))
                return false;
        }
    }
    return true;
}

/* A copy of src for a missing destination, its bytes counted; NULL with
 * *st set. */
static kv_obj *copy_filter(const kv_obj *src, value_status *st)
{
    /* What the copy holds: a growing filter's count also has the small
     * tables it keeps until freed, which the copy has not. */
    uint64_t bytes = src->type == &bloom_type ? sbf_bytes(src->v) : kv_obj_bytes(src);
    uint64_t maxmem = (uint64_t)atomic_load_explicit(&cfg.maxmemory, memory_order_relaxed);
    if (!ks_mem_try_reserve(bytes, maxmem)) {
        *st = maxmem ? VS_OOM : VS_NOMEM;
        return NULL;
    }
    bloomery_object from = {.type = BLOOMERY_TYPE_SCALABLE, .u.any = src->v};
    if (src->type == &counting_type)
        from = (bloomery_object){.type = BLOOMERY_TYPE_COUNTING, .u.any = src->v};
    uint8_t *blob = NULL;
    size_t blen = 0;
    bloomery_object copy = {0};
    int rc = bloomery_serialize(from, 0, &blob, &blen);
    if (rc == BLOOMERY_OK)
        rc = bloomery_deserialize(blob, blen, 0, &copy, NULL);
    free(blob);
    kv_obj *o = rc == BLOOMERY_OK ? kv_obj_new(src->type, copy.u.any) : NULL;
    if (o == NULL) {
        if (rc == BLOOMERY_OK)
            bloomery_object_free(&copy);
        ks_mem_add(-(int64_t)bytes);
        *st = VS_FAILED;
        return NULL;
    }
    /* The copy grows under maxmemory like any filter. */
    if (o->type == &bloom_type)
        count_memory(o);
    atomic_store(&o->value_bytes, bytes);
    return o;
}

/* The type of a source or destination: a filter, or why not. */
static value_status filter_status(const kv_obj *o)
{
    if (o->type == &bf_loading_type)
        return VS_LOADING;
    return is_filter(o) ? VS_OK : VS_WRONGTYPE;
}

value_status bloom_merge(const char *const *keys, const size_t *lens, size_t n, bool *created)
{
    *created = false;
    if (n < 2)
        return VS_NOT_FOUND;
    ks_ref dref;
    kv_entry *dst = ks_find_locked(keys[0], lens[0], &dref, true);
    kv_obj *first = NULL;
    value_status st;
    /* Every source, and their shapes, before changing anything. */
    for (size_t i = 1; i < n; i++) {
        ks_ref r;
        kv_entry *e = ks_find_locked(keys[i], lens[i], &r, false);
        if (e == NULL)
            return VS_NOT_FOUND;
        if ((st = filter_status(e->obj)) != VS_OK)
            return st;
        if (first == NULL)
            first = e->obj;
        else if (!same_shape(first, e->obj))
            return VS_MISMATCH;
    }
    if (dst && (st = filter_status(dst->obj)) != VS_OK)
        return st;
    if (dst && !same_shape(dst->obj, first))
        return VS_MISMATCH;
    size_t from = 1;
    if (dst == NULL) {
        /* A missing destination starts as a copy of the first source. */
        kv_obj *o = copy_filter(first, &st);
        if (o == NULL)
            return st;
        dst = ks_add(&dref, o);
        if (dst == NULL) {
            ks_mem_add(-(int64_t)kv_obj_bytes(o));
            kv_obj_free(o);
            return VS_OOM;
        }
        *created = true;
        from = 2; /* the first source is in already */
    }
    for (size_t i = from; i < n; i++) {
        ks_ref r;
        kv_entry *e = ks_find_locked(keys[i], lens[i], &r, false);
        /* ORing a filter into itself changes nothing; a counting filter
         * must not count itself twice. */
        if (e->obj == dst->obj)
            continue;
        int rc = dst->obj->type == &counting_type ? cntbf_merge(dst->obj->v, e->obj->v)
                                                  : sbf_merge(dst->obj->v, e->obj->v);
        if (rc != BLOOMERY_OK)
            return VS_MISMATCH;
    }
    return VS_OK;
}

static value_status replay_merge(const wal_op *op, const char *const *keys, const size_t *lens,
                                 size_t n, bool *created)
{
    (void)op;
    return bloom_merge(keys, lens, n, created);
}

static const char *replay(const wal_op *op)
{
    switch (op->type) {
    case WAL_CREATE: return replay_create(op);
    case WAL_BF_MERGE: return type_replay_merge(op, replay_merge);
    default: return replay_add(op);
    }
}

static const uint8_t records[] = {WAL_CREATE, WAL_BF_ADD, WAL_BF_MERGE, 0};

static void stats(const kv_obj *o, value_stats *s)
{
    const sbf_t *f = o->v;
    s->layout = cfg_layout_names[sbf_layout(f)];
    s->capacity = sbf_capacity(f);
    s->items = sbf_count(f);
    s->bytes = sbf_bytes(f);
    s->parts = sbf_nlinks(f);
    s->fpr = -1;
    s->error_rate = sbf_error_rate(f);
}

static double fpr(const kv_obj *o) { return sbf_fpr_estimate(o->v); }

/* Prefix bins and growing buckets are rewritten, not only set. */
static bool monotone(const void *v)
{
    return sbf_layout(v) != BLOOMERY_LAYOUT_PREFIX && sbf_layout(v) != BLOOMERY_LAYOUT_GROWING;
}

static void set_write_hook(void *v, value_write_hook hook, void *ctx)
{
    sbf_set_write_hook(v, hook, ctx);
}

const value_type bloom_type = {
    .name = "Bloom filter",
    .type_reply = "MBbloom--",
    .module_type = "bloomerBF",
    .snap_kind = SNAP_KIND_BLOOM,
    .image = BLOOMERY_TYPE_SCALABLE,
    .monotone = monotone,
    .set_write_hook = set_write_hook,
    .filter = true,
    .free_value = free_value,
    .adopt = adopt,
    .records = records,
    .replay = replay,
    .stats = stats,
    .fpr = fpr,
};

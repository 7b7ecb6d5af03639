/* The cuckoo filter value (cf_t) behind CF.* (t_cuckoo.c). Inserts kick
 * fingerprints between buckets and deletes compact: every access holds the
 * object's lock, and a snapshot keeps the value as at its capture by
 * copy-on-write through the library's write barrier. Log:
 * WAL_CF_CREATE with the parameters, WAL_CF_OP with the items' cf_hash
 * values and the sub-filter limit the command applied.
 */
#include <math.h>

#include "config.h"
#include "keyspace.h"
#include "le.h"
#include "types.h"

static void free_value(void *v) { cf_free(v); }

static uint64_t adopt(kv_obj *o)
{
    cf_set_may_allocate(o->v, kv_obj_may_grow, o);
    return cf_bytes(o->v);
}

void cf_value_sync(kv_obj *o)
{
    uint64_t now = cf_bytes(o->v);
    uint64_t old = atomic_exchange(&o->value_bytes, now);
    if (now != old)
        ks_mem_add((int64_t)now - (int64_t)old);
}

static unsigned max_filters(void)
{
    return (unsigned)atomic_load_explicit(&cfg.cf_max_expansions, memory_order_relaxed);
}

static const char *replay(const wal_op *op)
{
    if (op->type == WAL_CF_CREATE) {
        const wal_cuckoo *p = &op->cf;
        kv_obj *o = kv_obj_new(&cuckoo_type, NULL);
        if (o == NULL)
            return "out of memory";
        cf_options opts;
        cf_options_init(&opts);
        opts.bucket_size = p->bucket_size;
        opts.max_iterations = p->max_iterations;
        opts.expansion = p->expansion;
        opts.fingerprint_bits = p->fingerprint_bits;
        opts.max_filters = max_filters();
        opts.may_allocate = kv_obj_may_grow;
        opts.may_allocate_ctx = o;
        cf_t *f;
        if (cf_create(&f, p->capacity, &opts) != BLOOMERY_OK) {
            ks_mem_add(-(int64_t)kv_obj_bytes(o));
            kv_obj_free(o);
            return "could not create";
        }
        o->v = f;
        return ks_replace(op->key, op->klen, o, 0) ? NULL : "out of memory";
    }
    ks_ref ref;
    const char *missing;
    kv_entry *e = type_open_record_key(&ref, op, &cuckoo_type, false, &missing);
    if (e == NULL)
        return missing;
    kv_obj *o = e->obj;
    const char *why = NULL;
    unsigned limit = cf_max_filters(o->v);
    cf_set_max_filters(o->v, op->max_filters);
    for (uint32_t i = 0; i < op->n; i++) {
        uint64_t h = le_load(op->items + 8 * (size_t)i, 8);
        if (op->cf_op == WAL_CF_DEL) {
            if (!cf_delete_hashed(o->v, h))
                why = "a deleted item was not found";
        } else if (cf_add_hashed(o->v, h) < 0) {
            why = "the filter refused an item";
        }
    }
    cf_set_max_filters(o->v, limit);
    cf_value_sync(o);
    ks_close(&ref);
    return why;
}

static void set_write_hook(void *v, value_write_hook hook, void *ctx)
{
    cf_set_write_hook(v, hook, ctx);
}

static const uint8_t records[] = {WAL_CF_CREATE, WAL_CF_OP, 0};

static void stats(const kv_obj *o, value_stats *s)
{
    const cf_t *c = o->v;
    s->layout = "cuckoo";
    s->parts = cf_nfilters(c);
    s->capacity = cf_nbuckets(c) * cf_bucket_size(c);
    s->items = cf_items(c);
    s->bytes = cf_bytes(c);
    s->fpr = -1;
    s->error_rate = -1; /* sized by fingerprint bits, not by a rate asked for */
}

static double fpr(const kv_obj *o)
{
    const cf_t *c = o->v;
    uint64_t capacity = cf_nbuckets(c) * cf_bucket_size(c);
    if (capacity == 0)
        return -1;
    /* A lookup compares 2 buckets of each sub-filter against a
     * fingerprint of f bits; occupied slots are items / capacity of them. */
    double load = (double)cf_items(c) / (double)capacity;
    double slots = 2.0 * cf_bucket_size(c) * (double)cf_nfilters(c) * (load < 1 ? load : 1);
    return 1 - pow(1 - ldexp(1, -(int)cf_fingerprint_bits(c)), slots);
}

const value_type cuckoo_type = {
    .name = "cuckoo filter",
    .type_reply = "MBbloomCF",
    .module_type = "bloomerCF",
    .snap_kind = SNAP_KIND_CUCKOO,
    .image = BLOOMERY_TYPE_CUCKOO,
    .set_write_hook = set_write_hook,
    .locked = true,
    .filter = true,
    .free_value = free_value,
    .adopt = adopt,
    .records = records,
    .replay = replay,
    .stats = stats,
    .fpr = fpr,
};

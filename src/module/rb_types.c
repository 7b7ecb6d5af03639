/* RedisBloom's module type names, MBbloom-- (Bloom) and MBbloomCF (cuckoo),
 * so a dump.rdb written by RedisBloom loads: their rdb_load reads
 * RedisBloom's encodings (rb_rdb.c) into our classic-layout chain and our
 * cuckoo filter, bit for bit, and once Redis has loaded the file every such
 * key is moved to our own types (bloomerBF, bloomerCF), keeping its expiry,
 * so it is saved in our format from then on.
 *
 * A value can still sit under RedisBloom's names where no load ends: a
 * RESTORE of RedisBloom's DUMP payload (MIGRATE). Commands use it as any
 * other, and its rdb_save writes RedisBloom's latest encoding, which both
 * RedisBloom and this module read.
 */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "host.h"
#include "rb_rdb.h"

static RedisModuleType *rb_bloom_mt, *rb_cuckoo_mt;

bool mh_is_redisbloom(const RedisModuleType *mt)
{
    return mt && (mt == rb_bloom_mt || mt == rb_cuckoo_mt);
}

/* ---- Redis's RDB calls as rb_rdb.h's reader and writer ---- */

typedef struct io_reader {
    RedisModuleIO *io;
    char *last; /* the string handed out last, freed at the next call */
} io_reader;

static void drop_last(io_reader *r)
{
    if (r->last)
        rm.Free(r->last);
    r->last = NULL;
}

static bool io_unsigned(void *ctx, uint64_t *v)
{
    io_reader *r = ctx;
    drop_last(r);
    *v = rm.LoadUnsigned(r->io);
    return !rm.IsIOError(r->io);
}

static bool io_double(void *ctx, double *v)
{
    io_reader *r = ctx;
    drop_last(r);
    *v = rm.LoadDouble(r->io);
    return !rm.IsIOError(r->io);
}

static bool io_string(void *ctx, const uint8_t **p, size_t *len)
{
    io_reader *r = ctx;
    drop_last(r);
    r->last = rm.LoadStringBuffer(r->io, len);
    *p = (const uint8_t *)r->last;
    return r->last != NULL && !rm.IsIOError(r->io);
}

static void io_put_unsigned(void *ctx, uint64_t v) { rm.SaveUnsigned(ctx, v); }
static void io_put_double(void *ctx, double v) { rm.SaveDouble(ctx, v); }
static void io_put_string(void *ctx, const uint8_t *p, size_t len)
{
    rm.SaveStringBuffer(ctx, (const char *)p, len);
}

/* ---- the two types ---- */

static void *load(RedisModuleIO *io, int encver, bool cuckoo)
{
    io_reader ior = {.io = io};
    rb_reader r = {&ior, io_unsigned, io_double, io_string};
    uint64_t limit = ks_mem_limit(0);
    const char *why;
    void *v = NULL;
    int rc = cuckoo
                 ? rb_read_cuckoo(&r, encver, limit, (unsigned)atomic_load(&cfg.cf_max_expansions),
                                  (cf_t **)&v, &why)
                 : rb_read_bloom(&r, encver, limit, (sbf_t **)&v, &why);
    drop_last(&ior);
    if (rc != BLOOMERY_OK) {
        rm.LogIOError(io, "warning", "bloomery: a RedisBloom %s (encoding %d) is refused: %s",
                      cuckoo ? "cuckoo filter" : "Bloom filter", encver,
                      why ? why : bloomery_strerror(rc));
        return NULL;
    }
    const value_type *t = cuckoo ? &cuckoo_type : &bloom_type;
    kv_obj *o = mh_value_loaded(t, v);
    if (o == NULL) {
        t->free_value(v);
        rm.LogIOError(io, "warning", "bloomery: no memory to load a %s", t->name);
    }
    return o;
}

static void *load_bloom(RedisModuleIO *io, int encver) { return load(io, encver, false); }
static void *load_cuckoo(RedisModuleIO *io, int encver) { return load(io, encver, true); }

static void save(RedisModuleIO *io, void *value)
{
    kv_obj *o = value;
    rb_writer w = {io, io_put_unsigned, io_put_double, io_put_string};
    bool ok = o->type == &bloom_type    ? rb_write_bloom(&w, o->v)
              : o->type == &cuckoo_type ? rb_write_cuckoo(&w, o->v)
                                        : false;
    /* Only values loaded under these names reach here, and those are
     * always writable; anything else is a bug, said loudly. */
    if (!ok)
        rm.LogIOError(io, "warning", "bloomery: a %s cannot be saved in RedisBloom's format",
                      o->type->name);
}

/* ---- moving loaded keys to our types ---- */

typedef struct found {
    RedisModuleString **names;
    size_t n, cap;
} found;

static void collect(RedisModuleCtx *ctx, RedisModuleString *name, RedisModuleKey *k, void *arg)
{
    found *f = arg;
    if (k == NULL || rm.KeyType(k) != RM_KEYTYPE_MODULE ||
        !mh_is_redisbloom(rm.ModuleTypeGetType(k)))
        return;
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 64;
        RedisModuleString **p = realloc(f->names, cap * sizeof(*p));
        if (p == NULL)
            return; /* the key stays under RedisBloom's name, still usable */
        f->names = p;
        f->cap = cap;
    }
    size_t len;
    const char *s = rm.StringPtrLen(name, &len);
    f->names[f->n++] = rm.CreateString(ctx, s, len);
}

/* The key's value under our type of its family: the library object moves
 * to a new kv_obj (its hooks reinstalled on it), the old one is left empty
 * for Redis to free. */
static void move_key(RedisModuleCtx *ctx, RedisModuleString *name)
{
    RedisModuleKey *k = rm.OpenKey(ctx, name, RM_READ | RM_WRITE);
    if (k == NULL)
        return;
    kv_obj *old = rm.KeyType(k) == RM_KEYTYPE_MODULE && mh_is_redisbloom(rm.ModuleTypeGetType(k))
                      ? rm.ModuleTypeGetValue(k)
                      : NULL;
    kv_obj *o = old ? kv_obj_new(old->type, old->v) : NULL;
    if (o) {
        long long ttl = rm.GetExpire(k);
        uint64_t bytes = kv_obj_bytes(old);
        /* Counted once: the new object takes the old one's bytes (and its
         * hooks), the old one's free uncounts only its entry overhead. */
        atomic_store(&o->value_bytes, o->type->adopt(o));
        atomic_store(&old->value_bytes, 0);
        old->v = NULL;
        ks_mem_add((int64_t)ks_entry_overhead(0));
        if (rm.ModuleTypeSetValue(k, mh_module_type(o->type), o) == RM_OK) {
            if (ttl != RM_NO_EXPIRE)
                rm.SetExpire(k, ttl > 0 ? ttl : 1);
        } else {
            /* The key keeps RedisBloom's name and its value, still usable. */
            old->v = o->v;
            atomic_store(&old->value_bytes, bytes);
            old->type->adopt(old);
            o->v = NULL;
            atomic_store(&o->value_bytes, 0);
            ks_mem_add(-(int64_t)ks_entry_overhead(0));
            kv_obj_free(o);
            rm.Log(ctx, "warning", "bloomery: a RedisBloom key could not be moved to our type");
        }
    }
    rm.CloseKey(k);
}

static void on_loading(RedisModuleCtx *ctx, rm_event event, uint64_t subevent, void *data)
{
    (void)event;
    (void)data;
    if (subevent != RM_SUBEVENT_LOADING_ENDED)
        return;
    int was = rm.GetSelectedDb(ctx);
    size_t moved = 0;
    for (int db = 0; rm.SelectDb(ctx, db) == RM_OK; db++) {
        found f = {0};
        RedisModuleScanCursor *c = rm.ScanCursorCreate();
        while (c && rm.Scan(ctx, c, collect, &f))
            ;
        if (c)
            rm.ScanCursorDestroy(c);
        for (size_t i = 0; i < f.n; i++) {
            if (f.names[i]) {
                move_key(ctx, f.names[i]);
                rm.FreeString(ctx, f.names[i]);
                moved++;
            }
        }
        free(f.names);
    }
    rm.SelectDb(ctx, was);
    if (moved)
        rm.Log(ctx, "notice", "bloomery: %zu RedisBloom filters loaded, now bloomery's", moved);
}

bool mh_redisbloom_register(RedisModuleCtx *ctx)
{
    rm_type_methods m;
    mh_value_methods(&m);
    m.rdb_save = save;
    m.rdb_load = load_bloom;
    rb_bloom_mt = rm.CreateDataType(ctx, "MBbloom--", RB_BLOOM_ENCVER, &m);
    m.rdb_load = load_cuckoo;
    rb_cuckoo_mt = rm.CreateDataType(ctx, "MBbloomCF", RB_CUCKOO_ENCVER, &m);
    if (rb_bloom_mt == NULL || rb_cuckoo_mt == NULL)
        return false;
    if (rm.SubscribeToServerEvent(ctx, (rm_event){RM_EVENT_LOADING, 1}, on_loading) != RM_OK)
        rm.Log(ctx, "warning", "bloomery: RedisBloom keys will keep RedisBloom's type names");
    return true;
}

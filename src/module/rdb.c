/* The module types: how Redis saves, loads, sizes, digests and frees our
 * values. One module type per family: the distinct module_type names of
 * the value type descriptors (types.h), registered by walking the
 * registry, so a new type needs no code here.
 *
 * A value is saved as its serial.h image: the snapshot kind of its type,
 * the header as one RDB string, the number of chunks, then each chunk as
 * its own RDB string followed by its checksum. Chunks are at most
 * BLOOMERY_CHUNK_DEFAULT bytes, so no RDB string is large whatever the
 * filter's size, and loading verifies every field and checksum before the
 * value is used. A dump still being restored (LOADCHUNK) has no image yet:
 * it is saved as kind 0 and loads as lost_restore_type (docs/MODULE.md).
 * COPY goes through the same image, as one blob.
 *
 * A read-only value (BF.CONFIG key READONLY yes) saves its kind with
 * RDB_KIND_READONLY added. Only those do, so values that are not
 * read-only are saved exactly as before; a module without the flag
 * refuses such a value as an unknown kind rather than making it writable.
 */
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "snapshot_index.h"

#define ENCODING_VERSION 1
/* Added to the saved kind of a read-only value (kinds are below 256). */
#define RDB_KIND_READONLY 0x100

/* The families, in registry order of their first type. */
#define MAX_FAMILIES 8
typedef struct family {
    const char *name;
    RedisModuleType *mt;
} family;
static family families[MAX_FAMILIES];
static size_t nfamilies;

static family *family_named(const char *name)
{
    for (size_t i = 0; name && i < nfamilies; i++)
        if (strcmp(families[i].name, name) == 0)
            return &families[i];
    return NULL;
}

RedisModuleType *mh_module_type(const value_type *t)
{
    family *f = family_named(t->module_type);
    return f ? f->mt : NULL;
}

bool mh_is_ours(const RedisModuleType *mt)
{
    for (size_t i = 0; mt && i < nfamilies; i++)
        if (families[i].mt == mt)
            return true;
    return mh_is_redisbloom(mt);
}

kv_obj *mh_value_loaded(const value_type *t, void *v)
{
    kv_obj *o = kv_obj_new(t, v);
    if (o == NULL)
        return NULL;
    uint64_t bytes = t->adopt(o);
    atomic_store(&o->value_bytes, bytes);
    ks_mem_add((int64_t)(bytes + ks_entry_overhead(0)));
    return o;
}

static void save(RedisModuleIO *io, void *value)
{
    kv_obj *o = value;
    bloomery_image *img = NULL;
    if (o->type->image == 0 || bloomery_image_create(&img, type_object(o), 0) != BLOOMERY_OK) {
        if (o->type->image != 0)
            rm.LogIOError(io, "warning", "bloomery: no memory to save a %s", o->type->name);
        rm.SaveUnsigned(io, 0);
        return;
    }
    rm.SaveUnsigned(io, o->type->snap_kind | (o->readonly ? RDB_KIND_READONLY : 0));
    size_t len;
    const uint8_t *h = bloomery_image_header(img, &len);
    rm.SaveStringBuffer(io, (const char *)h, len);
    uint64_t n = bloomery_image_nchunks(img);
    rm.SaveUnsigned(io, n);
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *c = bloomery_image_chunk(img, i, &len);
        rm.SaveStringBuffer(io, (const char *)c, len);
        rm.SaveUnsigned(io, bloomery_image_chunk_checksum(img, i, c, len));
    }
    bloomery_image_free(img);
}

/* The value of a saved image of one of family's types, or NULL. */
static void *load(RedisModuleIO *io, int encver, const family *fam)
{
    if (encver != ENCODING_VERSION) {
        rm.LogIOError(io, "warning", "bloomery: unknown encoding version %d", encver);
        return NULL;
    }
    uint64_t kind = rm.LoadUnsigned(io);
    if (rm.IsIOError(io))
        return NULL;
    bool readonly = kind & RDB_KIND_READONLY;
    kind &= ~(uint64_t)RDB_KIND_READONLY;
    if (kind == 0 && !readonly) {
        kv_obj *o = kv_obj_new(&lost_restore_type, NULL);
        if (o)
            ks_mem_add((int64_t)ks_entry_overhead(0));
        return o;
    }
    const value_type *t = kind <= UINT8_MAX ? type_by_snap_kind((uint8_t)kind) : NULL;
    if (t == NULL || t->image == 0 || mh_module_type(t) != fam->mt) {
        rm.LogIOError(io, "warning", "bloomery: unknown value kind %llu",
                      (unsigned long long)kind | (readonly ? RDB_KIND_READONLY : 0));
        return NULL;
    }
    bloomery_loader *l = NULL;
    bloomery_object obj = {0};
    kv_obj *o = NULL;
    size_t len, used;
    char *buf = rm.LoadStringBuffer(io, &len);
    if (buf == NULL)
        goto fail;
    int rc = bloomery_loader_open(&l, (const uint8_t *)buf, len, ks_mem_limit(0), &used);
    rm.Free(buf);
    if (rc != BLOOMERY_OK || used != len || bloomery_loader_type(l) != t->image)
        goto fail;
    uint64_t n = rm.LoadUnsigned(io);
    if (rm.IsIOError(io) || n != bloomery_loader_nchunks(l))
        goto fail;
    for (uint64_t i = 0; i < n; i++) {
        buf = rm.LoadStringBuffer(io, &len);
        if (buf == NULL)
            goto fail;
        uint64_t sum = rm.LoadUnsigned(io);
        rc = rm.IsIOError(io) ? BLOOMERY_EINVAL
                              : bloomery_loader_chunk(l, i, (const uint8_t *)buf, len, sum);
        rm.Free(buf);
        if (rc != BLOOMERY_OK)
            goto fail;
    }
    if (bloomery_loader_finish(l, &obj) != BLOOMERY_OK)
        goto fail;
    bloomery_loader_free(l);
    l = NULL;
    o = mh_value_loaded(t, obj.u.any);
    if (o == NULL) {
        bloomery_object_free(&obj);
        rm.LogIOError(io, "warning", "bloomery: no memory to load a %s", t->name);
    } else {
        o->readonly = readonly;
    }
    return o;
fail:
    rm.LogIOError(io, "warning", "bloomery: a %s in the RDB file is damaged: %s", t->name,
                  l ? bloomery_loader_error(l) : "truncated");
    bloomery_loader_free(l);
    return NULL;
}

/* Redis does not tell rdb_load which type it loads for: one entry point
 * per family slot. */
#define LOAD_SLOT(i)                                                                               \
    static void *load_##i(RedisModuleIO *io, int encver) { return load(io, encver, &families[i]); }
LOAD_SLOT(0)
LOAD_SLOT(1)
LOAD_SLOT(2)
LOAD_SLOT(3)
LOAD_SLOT(4)
LOAD_SLOT(5)
LOAD_SLOT(6)
LOAD_SLOT(7)
static void *(*const load_slot[MAX_FAMILIES])(RedisModuleIO *, int) = {
    load_0, load_1, load_2, load_3, load_4, load_5, load_6, load_7};

static size_t mem_usage(const void *value)
{
    return (size_t)(kv_obj_bytes(value) + ks_entry_overhead(0));
}

/* DEBUG DIGEST-VALUE and DEBUG DIGEST: the image's bytes. */
static void digest(RedisModuleDigest *md, void *value)
{
    kv_obj *o = value;
    bloomery_image *img = NULL;
    if (o->type->image == 0 || bloomery_image_create(&img, type_object(o), 0) != BLOOMERY_OK)
        return;
    size_t len;
    const uint8_t *h = bloomery_image_header(img, &len);
    rm.DigestAddStringBuffer(md, (const char *)h, len);
    for (uint64_t i = 0; i < bloomery_image_nchunks(img); i++) {
        const uint8_t *c = bloomery_image_chunk(img, i, &len);
        rm.DigestAddStringBuffer(md, (const char *)c, len);
    }
    rm.DigestEndSequence(md);
    bloomery_image_free(img);
}

/* COPY: the value through its serial.h blob, so the copy shares nothing. */
static void *copy_value(RedisModuleString *from, RedisModuleString *to, const void *value)
{
    (void)from;
    (void)to;
    const kv_obj *src = value;
    if (src->type->image == 0)
        return NULL; /* a dump being restored: nothing to copy yet */
    uint8_t *blob;
    size_t len;
    if (bloomery_serialize(type_object(src), 0, &blob, &len) != BLOOMERY_OK)
        return NULL;
    bloomery_object obj = {0};
    int rc = bloomery_deserialize(blob, len, 0, &obj, NULL);
    free(blob);
    kv_obj *o = rc == BLOOMERY_OK ? kv_obj_new(src->type, obj.u.any) : NULL;
    if (o == NULL) {
        if (rc == BLOOMERY_OK)
            bloomery_object_free(&obj);
        return NULL;
    }
    uint64_t bytes = src->type->adopt(o);
    atomic_store(&o->value_bytes, bytes);
    ks_mem_add((int64_t)(bytes + ks_entry_overhead(0)));
    o->readonly = src->readonly; /* a copy is the same filter */
    return o;
}

static void free_value(void *value)
{
    kv_obj *o = value;
    ks_mem_add(-(int64_t)(kv_obj_bytes(o) + ks_entry_overhead(0)));
    kv_obj_free(o);
}

void mh_value_methods(rm_type_methods *m)
{
    *m = (rm_type_methods){
        .version = RM_TYPE_METHOD_VERSION,
        .rdb_save = save,
        .aof_rewrite = mh_aof_rewrite,
        .mem_usage = mem_usage,
        .digest = digest,
        .free = free_value,
        .copy = copy_value,
    };
}

bool mh_rdb_register(RedisModuleCtx *ctx)
{
    rm_type_methods methods;
    mh_value_methods(&methods);
    /* Type names are exactly nine characters; ours, not RedisBloom's
     * (docs/MODULE.md). */
    for (size_t i = 0; i < types_count(); i++) {
        const char *name = type_at(i)->module_type;
        if (name == NULL || family_named(name))
            continue;
        if (nfamilies == MAX_FAMILIES)
            return false;
        family *f = &families[nfamilies];
        methods.rdb_load = load_slot[nfamilies];
        f->name = name;
        f->mt = rm.CreateDataType(ctx, name, ENCODING_VERSION, &methods);
        if (f->mt == NULL)
            return false;
        nfamilies++;
    }
    return true;
}

/* The module types: how Redis saves, loads, sizes, digests and frees our
 * values.
 *
 * A value is saved as its serial.h image: the snapshot kind of its type,
 * the header as one RDB string, the number of chunks, then each chunk as
 * its own RDB string followed by its checksum. Chunks are at most
 * BLOOMERY_CHUNK_DEFAULT bytes, so no RDB string is large whatever the
 * filter's size, and loading verifies every field and checksum before the
 * value is used. A dump still being restored (LOADCHUNK) has no image yet:
 * it is saved as kind 0 and loads as lost_restore_type (docs/MODULE.md).
 * COPY goes through the same image, as one blob.
 */
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "snapshot_index.h"

#define ENCODING_VERSION 1

RedisModuleType *mh_bloom_mt, *mh_cuckoo_mt;

RedisModuleType *mh_module_type(const value_type *t)
{
    if (t == &cuckoo_type || t == &cf_loading_type)
        return mh_cuckoo_mt;
    if (t == &bloom_type || t == &counting_type || t == &window_type || t == &bf_loading_type ||
        t == &lost_restore_type)
        return mh_bloom_mt;
    return NULL;
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
    rm.SaveUnsigned(io, o->type->snap_kind);
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
static void *load(RedisModuleIO *io, int encver, RedisModuleType *family)
{
    if (encver != ENCODING_VERSION) {
        rm.LogIOError(io, "warning", "bloomery: unknown encoding version %d", encver);
        return NULL;
    }
    uint64_t kind = rm.LoadUnsigned(io);
    if (rm.IsIOError(io))
        return NULL;
    if (kind == 0) {
        kv_obj *o = kv_obj_new(&lost_restore_type, NULL);
        if (o)
            ks_mem_add((int64_t)ks_entry_overhead(0));
        return o;
    }
    const value_type *t = kind <= UINT8_MAX ? type_by_snap_kind((uint8_t)kind) : NULL;
    if (t == NULL || t->image == 0 || mh_module_type(t) != family) {
        rm.LogIOError(io, "warning", "bloomery: unknown value kind %llu", (unsigned long long)kind);
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
    o = kv_obj_new(t, obj.u.any);
    if (o == NULL) {
        bloomery_object_free(&obj);
        rm.LogIOError(io, "warning", "bloomery: no memory to load a %s", t->name);
        return NULL;
    }
    uint64_t bytes = t->adopt(o);
    atomic_store(&o->value_bytes, bytes);
    ks_mem_add((int64_t)(bytes + ks_entry_overhead(0)));
    return o;
fail:
    rm.LogIOError(io, "warning", "bloomery: a %s in the RDB file is damaged: %s", t->name,
                  l ? bloomery_loader_error(l) : "truncated");
    bloomery_loader_free(l);
    return NULL;
}

static void *load_bloom(RedisModuleIO *io, int encver) { return load(io, encver, mh_bloom_mt); }
static void *load_cuckoo(RedisModuleIO *io, int encver) { return load(io, encver, mh_cuckoo_mt); }

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
    return o;
}

static void free_value(void *value)
{
    kv_obj *o = value;
    ks_mem_add(-(int64_t)(kv_obj_bytes(o) + ks_entry_overhead(0)));
    kv_obj_free(o);
}

bool mh_rdb_register(RedisModuleCtx *ctx)
{
    rm_type_methods bloom = {
        .version = RM_TYPE_METHOD_VERSION,
        .rdb_load = load_bloom,
        .rdb_save = save,
        .aof_rewrite = mh_aof_rewrite,
        .mem_usage = mem_usage,
        .digest = digest,
        .free = free_value,
        .copy = copy_value,
    };
    rm_type_methods cuckoo = bloom;
    cuckoo.rdb_load = load_cuckoo;
    /* Type names are exactly nine characters; ours until RedisBloom's
     * encodings can be read (docs/MODULE.md). */
    mh_bloom_mt = rm.CreateDataType(ctx, "bloomerBF", ENCODING_VERSION, &bloom);
    mh_cuckoo_mt = rm.CreateDataType(ctx, "bloomerCF", ENCODING_VERSION, &cuckoo);
    return mh_bloom_mt && mh_cuckoo_mt;
}

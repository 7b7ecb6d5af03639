/* BLOOMERY.LOADCHUNK key iterator data: a value of any of our types
 * rebuilt from its serial.h image in bounded pieces, in bloomery's dump
 * format (dump.h): the image header as iterator 1 onto a missing key, then
 * chunk i with its 8-byte checksum as iterator i + 2, in any order. The
 * last chunk turns the key into the value, bit for bit.
 *
 * Our extension, for the types RedisBloom has no exact restore command for
 * (count-min sketches, top-k, t-digests, windowed filters): the AOF
 * rewrite writes them so (aof.c). A module command, not a row of
 * value_commands.h, because the key changes module type with its header
 * (bloomeryd restores through its own log and snapshots).
 */
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "host.h"
#include "util.h"

static void free_loader(void *v) { bloomery_loader_free(v); }

/* A dump being restored: the key already has its final family's module
 * type (from the header), so TYPE and every other family's command see the
 * family; its own commands answer WRONGTYPE until the last chunk. */
static const value_type image_loading_type = {
    .name = "dump being restored",
    .free_value = free_loader,
};

/* The registry type whose values an image of type img becomes. */
static const value_type *type_for_image(bloomery_type img)
{
    for (size_t i = 0; i < types_count(); i++) {
        const value_type *t = type_at(i);
        if (t->image == img && t->module_type && t->snap_kind != SNAP_KIND_RESTORE)
            return t;
    }
    return NULL;
}

static int header(RedisModuleCtx *ctx, RedisModuleKey *k, const uint8_t *data, size_t len)
{
    if (rm.KeyType(k) != RM_KEYTYPE_EMPTY)
        return rm.ReplyWithError(ctx, "ERR the key exists: a header loads only onto a new key");
    bloomery_type images[BLOOMERY_TYPE_TDIGEST + 1];
    size_t n = 0;
    for (size_t i = 0; i < types_count(); i++)
        if (type_at(i)->module_type && type_at(i)->image && n < sizeof(images) / sizeof(images[0]))
            images[n++] = type_at(i)->image;
    int rc;
    kv_obj *o = dump_open(data, len, &image_loading_type, images, n, &rc);
    if (o == NULL)
        return rm.ReplyWithError(ctx, rc == BLOOMERY_ENOMEM || rc == BLOOMERY_ETOOBIG
                                          ? "OOM not enough memory to restore the dump"
                                          : "ERR invalid header");
    const value_type *t = type_for_image(bloomery_loader_type(o->v));
    if (t == NULL || rm.ModuleTypeSetValue(k, mh_module_type(t), o) != RM_OK) {
        ks_mem_add(-(int64_t)kv_obj_bytes(o));
        kv_obj_free(o);
        return rm.ReplyWithError(ctx, "ERR invalid header");
    }
    ks_mem_add((int64_t)ks_entry_overhead(0));
    rm.ReplicateVerbatim(ctx);
    return rm.ReplyWithSimpleString(ctx, "OK");
}

static int chunk(RedisModuleCtx *ctx, RedisModuleKey *k, long long iter, const uint8_t *data,
                 size_t len)
{
    if (rm.KeyType(k) == RM_KEYTYPE_EMPTY)
        return rm.ReplyWithError(ctx, "ERR no such key: send the header (iterator 1) first");
    kv_obj *o = rm.KeyType(k) == RM_KEYTYPE_MODULE && mh_is_ours(rm.ModuleTypeGetType(k))
                    ? rm.ModuleTypeGetValue(k)
                    : NULL;
    if (o == NULL || o->type != &image_loading_type)
        return rm.ReplyWithError(ctx, "WRONGTYPE the key holds no dump being restored");
    bloomery_object obj;
    if (dump_load_chunk(o, (uint64_t)iter - 2, data, len, &obj) != BLOOMERY_OK)
        return rm.ReplyWithError(ctx, "ERR invalid chunk");
    if (obj.u.any != NULL) {
        /* The header's type was checked by dump_open. */
        const value_type *t = type_for_image(obj.type);
        o->type = t;
        o->v = obj.u.any;
        uint64_t bytes = t->adopt(o);
        uint64_t old = atomic_exchange(&o->value_bytes, bytes);
        ks_mem_add((int64_t)bytes - (int64_t)old);
    }
    rm.ReplicateVerbatim(ctx);
    return rm.ReplyWithSimpleString(ctx, "OK");
}

static int loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 4)
        return rm.ReplyWithError(ctx,
                                 "ERR wrong number of arguments for 'bloomery.loadchunk' command");
    size_t ilen, len;
    const char *is = rm.StringPtrLen(argv[2], &ilen);
    const uint8_t *data = (const uint8_t *)rm.StringPtrLen(argv[3], &len);
    long long iter;
    if (!str_to_ll(is, ilen, &iter) || iter < 1)
        return rm.ReplyWithError(ctx, "ERR invalid iterator");
    RedisModuleKey *k = rm.OpenKey(ctx, argv[1], RM_READ | RM_WRITE);
    if (k == NULL)
        return rm.ReplyWithError(ctx, "ERR out of memory");
    int r = iter == 1 ? header(ctx, k, data, len) : chunk(ctx, k, iter, data, len);
    rm.CloseKey(k);
    return r;
}

bool mh_loadchunk_register(RedisModuleCtx *ctx)
{
    return mh_create_command(ctx, "bloomery.loadchunk", loadchunk);
}

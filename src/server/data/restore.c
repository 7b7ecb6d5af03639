/* Restoring a dump into a key; see restore.h. */
#include "restore.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dump.h"
#include "rb_rdb.h"

/* A RedisBloom header: build the classic chain at once (zeroed links). */
static kv_obj *load_rb_header(const uint8_t *buf, size_t len)
{
    uint64_t lim = dump_load_limit();
    cbf_rb_header h;
    if (cbf_rb_header_decode(buf, len, lim ? lim : UINT64_MAX, &h) != BLOOMERY_OK)
        return NULL;
    void *small[8];
    void **links = h.nfilters <= 8 ? small : calloc(h.nfilters, sizeof(void *));
    kv_obj *o = NULL;
    uint32_t made = 0;
    uint64_t bytes = 0;
    if (links == NULL)
        goto done;
    for (; made < h.nfilters; made++) {
        cbf_t *l;
        if (cbf_create_shape(&l, &h.links[made].shape) != BLOOMERY_OK)
            goto done;
        cbf_set_count(l, h.links[made].items);
        links[made] = l;
        bytes += cbf_bytes(l);
    }
    sbf_t *f;
    if (rb_chain_assemble(&h, links, made, &f) != BLOOMERY_OK)
        goto done;
    made = 0; /* the chain owns the links now */
    o = kv_obj_new(&bloom_type, f);
    if (o == NULL) {
        sbf_free(f);
        goto done;
    }
    sbf_set_may_allocate(f, kv_obj_may_grow, o);
    atomic_store(&o->value_bytes, bytes);
    ks_mem_add((int64_t)bytes);
done:
    for (uint32_t i = 0; i < made; i++)
        cbf_free(links[i]);
    if (links && links != small)
        free(links);
    cbf_rb_header_release(&h);
    return o;
}

/* Insert a value built from a header under the missing key. */
static value_status add_header(ks_ref *ref, kv_obj *o)
{
    if (ks_add(ref, o) != NULL)
        return VS_OK;
    ks_mem_add(-(int64_t)kv_obj_bytes(o));
    kv_obj_free(o);
    return VS_OOM;
}

/* An image chunk into a loading object; the last one turns it into its
 * final type (t, or the counting filter for a counting image). */
static value_status load_image_chunk(kv_obj *o, uint64_t i, const uint8_t *data, size_t len,
                                     const char **detail)
{
    bloomery_object obj;
    if (dump_load_chunk(o, i, data, len, &obj) != BLOOMERY_OK) {
        if (detail)
            *detail = bloomery_loader_error(o->v);
        return VS_BAD_CHUNK;
    }
    if (obj.u.any != NULL) {
        /* The header's type was checked by dump_open. */
        o->type = obj.type == BLOOMERY_TYPE_CUCKOO     ? &cuckoo_type
                  : obj.type == BLOOMERY_TYPE_COUNTING ? &counting_type
                                                       : &bloom_type;
        o->v = obj.u.any;
        /* Count the filter's own bytes from now on, not the image's. */
        uint64_t bytes = o->type->adopt(o);
        uint64_t old = atomic_exchange(&o->value_bytes, bytes);
        ks_mem_add((int64_t)bytes - (int64_t)old);
    }
    return VS_OK;
}

static value_status load_classic_chunk(sbf_t *f, long long iter, const uint8_t *data, size_t len)
{
    /* RedisBloom's checks, in its order: an iterator equal to the length
     * points before the first byte, which no link holds. */
    if (iter < 1 || (uint64_t)iter < len)
        return VS_BAD_CHUNK;
    uint64_t start = 0;
    size_t li = sbf_nlinks(f);
    uint64_t off = 0;
    if ((uint64_t)iter > len) {
        off = (uint64_t)iter - len - 1;
        li = dump_classic_link_at(f, off, &start);
    }
    if (li == sbf_nlinks(f))
        return VS_BAD_OFFSET;
    cbf_t *l = sbf_link_classic(f, li);
    if (off - start + len > cbf_bytes(l))
        return VS_TOO_BIG;
    /* The stripe is write-locked: no reader sees a half-copied chunk. */
    memcpy(cbf_data_mut(l) + (off - start), data, len);
    return VS_OK;
}

value_status restore_bf_chunk(ks_ref *ref, kv_entry *e, long long iter, const uint8_t *data,
                              size_t len, const char **detail)
{
    *detail = NULL;
    if (e == NULL) {
        if (iter != 1)
            return VS_NOT_FOUND;
        /* The image format starts with its own magic; else RedisBloom's.
         * Only filters load here: blocked chains and counting filters. */
        static const bloomery_type types[] = {BLOOMERY_TYPE_SCALABLE, BLOOMERY_TYPE_COUNTING};
        int rc;
        kv_obj *o = dump_open(data, len, &bf_loading_type, types, 2, &rc);
        if (o == NULL)
            o = load_rb_header(data, len);
        if (o == NULL)
            return VS_BAD_HEADER;
        return add_header(ref, o);
    }
    kv_obj *o = e->obj;
    if (o->type == &bf_loading_type)
        return iter < 2 ? VS_BAD_CHUNK : load_image_chunk(o, (uint64_t)iter - 2, data, len, detail);
    if (o->type == &bloom_type && sbf_layout(o->v) == BLOOMERY_LAYOUT_CLASSIC)
        return load_classic_chunk(o->v, iter, data, len);
    /* A complete image-format filter takes no more chunks. */
    if (o->type == &bloom_type || o->type == &counting_type)
        return VS_BAD_CHUNK;
    return VS_WRONGTYPE;
}

/* RedisBloom's cuckoo header: the filter at once, every slot empty. */
static value_status load_rb_cf_header(ks_ref *ref, const uint8_t *buf, size_t len)
{
    uint64_t lim = dump_load_limit();
    unsigned max_filters =
        (unsigned)atomic_load_explicit(&cfg.cf_max_expansions, memory_order_relaxed);
    cf_t *f;
    const char *why;
    int rc = rb_cuckoo_dump_header(buf, len, lim ? lim : UINT64_MAX, max_filters, &f, &why);
    if (rc != BLOOMERY_OK)
        return rc == BLOOMERY_ENOMEM || rc == BLOOMERY_ETOOBIG ? VS_NOMEM : VS_BAD_HEADER;
    kv_obj *o = kv_obj_new(&cuckoo_type, f);
    if (o == NULL) {
        cf_free(f);
        return VS_NOMEM;
    }
    uint64_t bytes = cuckoo_type.adopt(o);
    atomic_store(&o->value_bytes, bytes);
    ks_mem_add((int64_t)bytes);
    return add_header(ref, o);
}

value_status restore_cf_chunk(ks_ref *ref, kv_entry *e, long long iter, const uint8_t *data,
                              size_t len)
{
    if (e == NULL) {
        if (iter != 1)
            return VS_NOT_FOUND;
        /* RedisBloom's header has its own length; ours starts with the
         * image's magic and is longer. */
        if (len == RB_CF_DUMP_HEADER_LEN)
            return load_rb_cf_header(ref, data, len);
        static const bloomery_type types[] = {BLOOMERY_TYPE_CUCKOO};
        int rc;
        kv_obj *o = dump_open(data, len, &cf_loading_type, types, 1, &rc);
        if (o == NULL)
            return rc == BLOOMERY_ENOMEM || rc == BLOOMERY_ETOOBIG ? VS_NOMEM : VS_BAD_HEADER;
        return add_header(ref, o);
    }
    kv_obj *o = e->obj;
    if (o->type == &cf_loading_type)
        return iter < 2 ? VS_BAD_CHUNK : load_image_chunk(o, (uint64_t)iter - 2, data, len, NULL);
    if (o->type != &cuckoo_type)
        return VS_WRONGTYPE;
    /* A complete filter of 8-bit fingerprints takes RedisBloom's chunks,
     * at any time, as RedisBloom does; ours are complete with their last. */
    return rb_cuckoo_dump_chunk(o->v, iter, data, len) == BLOOMERY_OK ? VS_OK : VS_BAD_CHUNK;
}

const char *restore_replay(const wal_op *op)
{
    ks_ref ref;
    kv_entry *e = ks_open(&ref, (const char *)op->key, op->klen, true);
    if (e && op->iter == 1) {
        ks_remove(&ref);
        e = NULL;
    }
    const char *detail;
    value_status st = op->type == WAL_CF_LOADCHUNK
                          ? restore_cf_chunk(&ref, e, op->iter, op->data, op->dlen)
                          : restore_bf_chunk(&ref, e, op->iter, op->data, op->dlen, &detail);
    ks_close(&ref);
    return st == VS_OK ? NULL : value_status_text(st);
}

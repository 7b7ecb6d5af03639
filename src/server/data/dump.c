#include "dump.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"

void dump_reply_chunk(reply *r, const bloomery_image *img, uint64_t i)
{
    size_t len;
    const uint8_t *data = bloomery_image_chunk(img, i, &len);
    uint8_t *dst = reply_bulk_begin(r, len + 8);
    if (dst == NULL)
        return;
    memcpy(dst, data, len);
    uint64_t sum = bloomery_image_chunk_checksum(img, i, dst, len);
    for (int k = 0; k < 8; k++)
        dst[len + (size_t)k] = (uint8_t)(sum >> (8 * k));
    reply_bulk_end(r, len + 8);
}

size_t dump_classic_link_at(const sbf_t *f, uint64_t off, uint64_t *link_start)
{
    size_t n = sbf_nlinks(f);
    uint64_t start = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t b = cbf_bytes(sbf_link_classic(f, i));
        if (off < start + b) {
            *link_start = start;
            return i;
        }
        start += b;
    }
    return n;
}

uint64_t dump_load_limit(void)
{
    uint64_t max =
                 ks_mem_limit((uint64_t)atomic_load_explicit(&cfg.maxmemory, memory_order_relaxed)),
             used = ks_used_memory();
    if (max == 0)
        return 0;
    return max > used ? max - used : 1;
}

kv_obj *dump_open(const uint8_t *buf, size_t len, const value_type *loading,
                  const bloomery_type *types, size_t ntypes, int *rc)
{
    bloomery_loader *l = NULL;
    size_t used;
    *rc = bloomery_loader_open(&l, buf, len, dump_load_limit(), &used);
    bool type_ok = false;
    for (size_t i = 0; *rc == BLOOMERY_OK && i < ntypes; i++)
        type_ok |= bloomery_loader_type(l) == types[i];
    /* An image of another type is refused at its header, not after its
     * last chunk. */
    if (*rc == BLOOMERY_OK && (used != len || !type_ok))
        *rc = BLOOMERY_ETYPE;
    if (*rc != BLOOMERY_OK) {
        bloomery_loader_free(l); /* handed out even on failure */
        return NULL;
    }
    uint64_t n = bloomery_loader_nchunks(l), bytes = 0;
    for (uint64_t i = 0; i < n; i++)
        bytes += bloomery_loader_chunk_len(l, i);
    kv_obj *o = kv_obj_new(loading, l);
    if (o == NULL) {
        bloomery_loader_free(l);
        *rc = BLOOMERY_ENOMEM;
        return NULL;
    }
    o->chunk_seen = calloc(n ? n : 1, 1);
    if (o->chunk_seen == NULL) {
        kv_obj_free(o);
        *rc = BLOOMERY_ENOMEM;
        return NULL;
    }
    atomic_store(&o->value_bytes, bytes);
    ks_mem_add((int64_t)bytes);
    return o;
}

int dump_load_chunk(kv_obj *o, uint64_t i, const uint8_t *data, size_t len, bloomery_object *done)
{
    bloomery_loader *l = o->v;
    done->u.any = NULL;
    if (i >= bloomery_loader_nchunks(l) || len < 8)
        return BLOOMERY_ECORRUPT;
    uint64_t sum = 0;
    for (int k = 0; k < 8; k++)
        sum |= (uint64_t)data[len - 8 + (size_t)k] << (8 * k);
    int rc = bloomery_loader_chunk(l, i, data, len - 8, sum);
    if (rc != BLOOMERY_OK)
        return rc;
    if (!o->chunk_seen[i]) {
        o->chunk_seen[i] = 1;
        o->chunks_loaded++;
    }
    if (o->chunks_loaded < bloomery_loader_nchunks(l))
        return BLOOMERY_OK;
    rc = bloomery_loader_finish(l, done);
    if (rc != BLOOMERY_OK)
        return rc;
    bloomery_loader_free(l);
    free(o->chunk_seen);
    o->chunk_seen = NULL;
    o->v = NULL;
    return BLOOMERY_OK;
}

/* Bloom filter dumps: BF.SCANDUMP and BF.LOADCHUNK, in two formats
 * (dump.h):
 *   classic layout  RedisBloom's own: a packed header with iterator 1, then
 *                   the links' bit arrays in chunks of at most 16 MiB, the
 *                   iterator being 1 + the byte offset of the chunk's end.
 *                   A dump taken from RedisBloom loads here and answers the
 *                   same.
 *   blocked layout  serial.h's image (also counting filters): iterator 1
 *                   carries the image header, iterator k >= 2 carries chunk
 *                   k-2 followed by its 8-byte checksum. The key answers
 *                   only once every chunk arrived.
 * A header on a missing key is recognised by trying the image format first
 * (it starts with its own magic), then RedisBloom's. Loading is
 * restore_bf_chunk (restore.c), which the log's replay runs too.
 */
#include <stdlib.h>

#include "bf.h"
#include "dump.h"
#include "persist.h"
#include "restore.h"
#include "cmd.h"
#include "config.h"
#include "log.h"
#include "util.h"

#define RB_CHUNK_MAX (16u * 1024 * 1024)

/* ---- BF.SCANDUMP ---- */

static bool scandump_classic(cmd_ctx *c, const sbf_t *f, long long iter)
{
    reply *r = &c->out;
    size_t n = sbf_nlinks(f);
    if (iter == 0) {
        cbf_rb_link links_small[8];
        cbf_rb_link *links = n <= 8 ? links_small : malloc(n * sizeof(*links));
        uint8_t *buf = malloc(cbf_rb_header_size((uint32_t)n));
        if (links == NULL || buf == NULL) {
            if (links != links_small)
                free(links);
            free(buf);
            reply_oom(c);
            return false;
        }
        cbf_rb_header h = {
            .total_items = sbf_count(f),
            .nfilters = (uint32_t)n,
            .options = CBF_RB_OPT_NOROUND | CBF_RB_OPT_FORCE64 |
                       (sbf_expansion(f) ? 0 : CBF_RB_OPT_NO_SCALING),
            /* RedisBloom keeps its default growth on non-scaling chains. */
            .growth = sbf_expansion(f) ? sbf_expansion(f) : SBF_DEFAULT_EXPANSION,
            .links = links,
        };
        for (size_t i = 0; i < n; i++) {
            const cbf_t *l = sbf_link_classic(f, i);
            cbf_shape_of(l, &links[i].shape);
            links[i].items = cbf_count(l);
        }
        cbf_rb_header_encode(&h, buf);
        reply_array(r, 2);
        reply_int(r, 1);
        reply_bulk(r, buf, cbf_rb_header_size((uint32_t)n));
        if (links != links_small)
            free(links);
        free(buf);
        return true;
    }
    uint64_t start = 0;
    size_t li = iter > 0 ? dump_classic_link_at(f, (uint64_t)iter - 1, &start) : n;
    reply_array(r, 2);
    if (li == n) {
        reply_int(r, 0);
        reply_bulk(r, "", 0);
        return true;
    }
    const cbf_t *l = sbf_link_classic(f, li);
    uint64_t off = (uint64_t)iter - 1 - start;
    uint64_t len = cbf_bytes(l) - off;
    if (len > RB_CHUNK_MAX)
        len = RB_CHUNK_MAX;
    reply_int(r, iter + (long long)len);
    reply_bulk(r, cbf_data(l) + off, len);
    return true;
}

static bool scandump_image(cmd_ctx *c, kv_obj *o, long long iter)
{
    reply *r = &c->out;
    bloomery_object obj;
    if (o->type == &counting_type) {
        obj.type = BLOOMERY_TYPE_COUNTING;
        obj.u.cnt = o->v;
    } else {
        obj.type = BLOOMERY_TYPE_SCALABLE;
        obj.u.sbf = o->v;
    }
    bloomery_image *img;
    if (bloomery_image_create(&img, obj, 0) != BLOOMERY_OK) {
        reply_error(r, "ERR could not encode the filter");
        return false;
    }
    reply_array(r, 2);
    if (iter == 0) {
        size_t hl;
        const uint8_t *h = bloomery_image_header(img, &hl);
        reply_int(r, 1);
        reply_bulk(r, h, hl);
    } else if (iter < 1 || (uint64_t)iter - 1 >= bloomery_image_nchunks(img)) {
        reply_int(r, 0);
        reply_bulk(r, "", 0);
    } else {
        reply_int(r, iter + 1);
        dump_reply_chunk(r, img, (uint64_t)iter - 1);
    }
    bloomery_image_free(img);
    return true;
}

bool bfScandumpCommand(cmd_ctx *c)
{
    if (c->argc != 3) {
        reply_wrong_arity(&c->out, "bf.scandump");
        return false;
    }
    /* Exclusively: prefix bins and growing tables change in place (a
     * growth gives a table back), so a chunk is copied with no add on the
     * key running. */
    ks_ref ref;
    kv_entry *e;
    if (!ck_open(c, &ref, c->argv[1], c->argvlen[1], &bfc_kind, CK_MUST_EXIST | CK_EXCLUSIVE, &e)) {
        ks_close(&ref);
        return false;
    }
    long long iter;
    bool ok = false;
    if (!str_to_ll(c->argv[2], c->argvlen[2], &iter))
        reply_error(&c->out, "Second argument must be numeric");
    else if (e->obj->type == &bloom_type && sbf_layout(e->obj->v) == BLOOMERY_LAYOUT_CLASSIC)
        ok = scandump_classic(c, e->obj->v, iter);
    else
        ok = scandump_image(c, e->obj, iter);
    ks_close(&ref);
    return ok;
}

/* ---- BF.LOADCHUNK ---- */

bool bfLoadchunkCommand(cmd_ctx *c)
{
    if (c->argc != 4) {
        reply_wrong_arity(&c->out, "bf.loadchunk");
        return false;
    }
    long long iter;
    if (!str_to_ll(c->argv[2], c->argvlen[2], &iter)) {
        reply_error(&c->out, "ERR Second argument must be numeric");
        return false;
    }
    const uint8_t *data = (const uint8_t *)c->argv[3];
    size_t len = c->argvlen[3];
    ks_ref ref;
    kv_entry *e = ks_open(&ref, c->argv[1], c->argvlen[1], true);
    /* A chunk changes the filter it lands in. */
    if (e && ck_is(&bfc_kind, e->obj) && ck_refuse_readonly(c, e->obj)) {
        ks_close(&ref);
        return false;
    }
    const char *detail;
    value_status st = restore_bf_chunk(&ref, e, iter, data, len, &detail);
    switch (st) {
    case VS_OK:
        /* Replay restores the chunk again on the replayed state. */
        kv_obj_note_restore(ref.e->obj,
                            wal_log_loadchunk(c->argv[1], c->argvlen[1], iter, data, len));
        reply_ok(&c->out);
        break;
    case VS_NOT_FOUND:
    case VS_WRONGTYPE:
    case VS_OOM: ck_reply_status(c, &bfc_kind, st); break;
    case VS_BAD_OFFSET: reply_error(&c->out, "ERR invalid offset - no link found"); break;
    case VS_TOO_BIG: reply_error(&c->out, "ERR invalid chunk - Too big for current filter"); break;
    default:
        if (detail)
            reply_errorf(&c->out, "ERR received bad data: %s", detail);
        else
            reply_error(&c->out, "ERR received bad data");
        break;
    }
    ks_close(&ref);
    return st == VS_OK;
}

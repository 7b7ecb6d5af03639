/* What a Bloom filter holds: BF.INFO, BF.CARD and BF.DEBUG (windows answer
 * from t_window.c). BF.INFO reports Size as RedisBloom counts it: 32 bytes
 * for the chain, 64 per link, plus the bit arrays; its ALL adds ours
 * (layout, bytes, estimated false positive rate, TTL). */
#include <stdio.h>

#include "bf.h"
#include "cmd.h"
#include "config.h"
#include "log.h"
#include "util.h"

#define RB_CHAIN_OVERHEAD 32
#define RB_LINK_OVERHEAD 64

typedef struct bf_stats {
    uint64_t capacity, size, filters, items, bytes;
    long long expansion; /* -1: nil */
    const char *layout;
    double fpr;
} bf_stats;

static void stats_of(const kv_obj *o, bf_stats *s, bool with_fpr)
{
    if (o->type == &counting_type) {
        s->capacity = cntbf_capacity(o->v);
        s->bytes = cntbf_bytes(o->v);
        s->filters = 1;
        s->items = cntbf_count(o->v);
        s->expansion = -1;
        s->layout = "counting";
        s->fpr = with_fpr ? cntbf_fpr_estimate(o->v) : 0;
    } else {
        const sbf_t *f = o->v;
        s->capacity = sbf_capacity(f);
        s->bytes = sbf_bytes(f);
        s->filters = sbf_nlinks(f);
        s->items = sbf_count(f);
        s->expansion = sbf_expansion(f) ? (long long)sbf_expansion(f) : -1;
        s->layout = cfg_layout_names[sbf_layout(f)];
        s->fpr = with_fpr ? sbf_fpr_estimate(f) : 0;
    }
    s->size = RB_CHAIN_OVERHEAD + RB_LINK_OVERHEAD * s->filters + s->bytes;
}

bool bfc_info_common(cmd_ctx *c, const long long vals[5], long long npairs, bool *done)
{
    static const char *names[] = {"Capacity", "Size", "Number of filters",
                                  "Number of items inserted", "Expansion rate"};
    reply *r = &c->out;
    bool all = c->argc == 3 && arg_eq(c, 2, "all");
    *done = c->argc == 3 && !all;
    if (*done) {
        static const char *fields[] = {"capacity", "size", "filters", "items", "expansion"};
        int f = -1;
        for (int i = 0; i < 5; i++)
            if (arg_eq(c, 2, fields[i]))
                f = i;
        if (f < 0) {
            reply_error(r, "Invalid information value");
            return false;
        }
        if (r->proto == 3) {
            reply_map(r, 1);
            reply_simple(r, names[f]);
        } else {
            reply_array(r, 1);
        }
        if (vals[f] < 0)
            reply_null(r);
        else
            reply_int(r, vals[f]);
        return true;
    }
    reply_map(r, npairs);
    for (int i = 0; i < 5; i++) {
        reply_simple(r, names[i]);
        if (vals[i] < 0)
            reply_null(r);
        else
            reply_int(r, vals[i]);
    }
    return true;
}

bool bfInfoCommand(cmd_ctx *c)
{
    if (c->argc < 2 || c->argc > 3) {
        reply_wrong_arity(&c->out, "bf.info");
        return false;
    }
    ks_ref ref;
    kv_entry *e;
    if (!ck_open(c, &ref, c->argv[1], c->argvlen[1], &bfc_any_kind, CK_MUST_EXIST, &e)) {
        ks_close(&ref);
        return false;
    }
    if (e->obj->type == &window_type) {
        bool ok = window_info(c, e, false);
        ks_close(&ref);
        return ok;
    }
    bool all = c->argc == 3 && arg_eq(c, 2, "all");
    bf_stats s;
    stats_of(e->obj, &s, all);
    long long ttl = -1;
    if (e->expire_ms) {
        long long left = e->expire_ms - now_ms();
        ttl = left > 0 ? (left + 500) / 1000 : 0;
    }
    ks_close(&ref);
    reply *r = &c->out;
    long long vals[] = {(long long)s.capacity, (long long)s.size, (long long)s.filters,
                        (long long)s.items, s.expansion};
    bool done;
    if (!bfc_info_common(c, vals, all ? 9 : 5, &done))
        return false;
    if (done)
        return true;
    if (all) {
        reply_simple(r, "Layout");
        reply_simple(r, s.layout);
        reply_simple(r, "Bytes");
        reply_int(r, (long long)s.bytes);
        reply_simple(r, "Estimated FPR");
        reply_double(r, s.fpr);
        reply_simple(r, "TTL");
        reply_int(r, ttl);
    }
    return true;
}

bool bfCardCommand(cmd_ctx *c)
{
    if (c->argc != 2) {
        reply_wrong_arity(&c->out, "bf.card");
        return false;
    }
    ks_ref ref;
    kv_entry *e = ks_open(&ref, c->argv[1], c->argvlen[1], false);
    bool ok = true;
    if (e == NULL || e->obj->type == &bf_loading_type) {
        reply_int(&c->out, 0);
    } else if (e->obj->type == &window_type) {
        ok = window_info(c, e, true);
    } else if (!ck_is(&bfc_kind, e->obj)) {
        reply_wrongtype(c);
        ok = false;
    } else {
        bf_stats s;
        stats_of(e->obj, &s, false);
        reply_int(&c->out, (long long)s.items);
    }
    ks_close(&ref);
    return ok;
}

bool bfDebugCommand(cmd_ctx *c)
{
    if (c->argc != 2) {
        reply_wrong_arity(&c->out, "bf.debug");
        return false;
    }
    ks_ref ref;
    kv_entry *e = bfc_open_filter(c, &ref);
    if (e == NULL) {
        ks_close(&ref);
        return false;
    }
    kv_obj *o = e->obj;
    char line[256];
    reply *r = &c->out;
    if (o->type == &counting_type) {
        reply_array(r, 2);
        snprintf(line, sizeof(line), "size:%llu", (unsigned long long)cntbf_count(o->v));
        reply_bulk_str(r, line);
        snprintf(line, sizeof(line),
                 "bytes:%llu blocks:%llu blocks_per_key:%u capacity:%llu ratio:%g",
                 (unsigned long long)cntbf_bytes(o->v), (unsigned long long)cntbf_nblocks(o->v),
                 cntbf_blocks_per_key(o->v), (unsigned long long)cntbf_capacity(o->v),
                 cntbf_error_rate(o->v));
        reply_bulk_str(r, line);
        ks_close(&ref);
        return true;
    }
    size_t n = sbf_nlinks(o->v);
    reply_array(r, (long long)n + 1);
    snprintf(line, sizeof(line), "size:%llu", (unsigned long long)sbf_count(o->v));
    reply_bulk_str(r, line);
    for (size_t i = 0; i < n; i++) {
        const cbf_t *cl = sbf_link_classic(o->v, i);
        const bf_t *bl = sbf_link_blocked(o->v, i);
        const pf_t *pl = sbf_link_prefix(o->v, i);
        const gf_t *gl = sbf_link_growing(o->v, i);
        if (gl) {
            /* buckets_next: the table its buckets move into, 0 when none;
             * grows_at: the count that starts the next growth. */
            gf_state st;
            gf_get_state(gl, &st);
            snprintf(line, sizeof(line),
                     "bytes:%llu buckets:%llu buckets_next:%llu fingerprint_bits:%u capacity:%llu "
                     "grows_at:%llu size:%llu ratio:%g",
                     (unsigned long long)gf_bytes(gl), (unsigned long long)st.buckets[0],
                     (unsigned long long)st.buckets[1], gf_fingerprint_bits(gl),
                     (unsigned long long)gf_capacity(gl), (unsigned long long)gf_grows_at(gl),
                     (unsigned long long)st.count, gf_error_rate(gl));
        } else if (pl) {
            pf_shape sh = pf_get_shape(pl);
            snprintf(line, sizeof(line),
                     "bytes:%llu bins:%llu remainder_bits:%u slots:%u quotients:%u "
                     "spare_bytes:%llu spared:%llu capacity:%llu size:%llu ratio:%g",
                     (unsigned long long)pf_bytes(pl), (unsigned long long)pf_nbins(pl),
                     sh.remainder_bits, sh.slots, sh.quotients,
                     (unsigned long long)bf_bytes(pf_spare(pl)),
                     (unsigned long long)pf_spare_count(pl), (unsigned long long)pf_capacity(pl),
                     (unsigned long long)pf_count(pl), pf_error_rate(pl));
        } else if (cl)
            snprintf(line, sizeof(line),
                     "bytes:%llu bits:%llu hashes:%u hashwidth:64 capacity:%llu size:%llu ratio:%g",
                     (unsigned long long)cbf_bytes(cl), (unsigned long long)cbf_bits(cl),
                     cbf_hashes(cl), (unsigned long long)cbf_capacity(cl),
                     (unsigned long long)cbf_count(cl), cbf_error_rate(cl));
        else
            snprintf(line, sizeof(line),
                     "bytes:%llu blocks:%llu blocks_per_key:%u capacity:%llu size:%llu ratio:%g",
                     (unsigned long long)bf_bytes(bl), (unsigned long long)bf_nblocks(bl),
                     bf_blocks_per_key(bl), (unsigned long long)bf_capacity(bl),
                     (unsigned long long)bf_count(bl), bf_error_rate(bl));
        reply_bulk_str(r, line);
    }
    ks_close(&ref);
    return true;
}

/* Adding to Bloom filters: BF.ADD, BF.MADD (and BF.INSERT's items, from
 * bf_create.c), and pipelined BF.ADD on one key as one batch. A missing
 * key is created with this server's defaults; windows add in t_window.c.
 *
 * RedisBloom's replies: an array ends at the first error (a non-scaling
 * filter full, a growth refused), and so does a batch of pipelined adds.
 */
#include <stdlib.h>

#include "bf.h"
#include "persist.h"
#include "cmd.h"
#include "config.h"
#include "log.h"

static const char *err_full = "ERR non scaling filter is full";

/* Reply to n add results: booleans, of which only the last may be an error
 * (the batch calls stop at the first). False when it is one. */
static bool reply_add_results(cmd_ctx *c, const int *res, size_t n)
{
    if (n == 0)
        return true;
    int last = res[n - 1];
    reply_bools(&c->out, res, last >= 0 ? n : n - 1);
    if (last >= 0)
        return true;
    if (last == BLOOMERY_EFULL)
        reply_error(&c->out, err_full);
    else
        ck_reply_nomem(c, last, "ERR problem inserting into filter");
    return false;
}

bool bfc_add_items(cmd_ctx *c, const char *key, size_t klen, kv_obj *o, int64_t now,
                   const char **items, const size_t *lens, size_t n, bool multi)
{
    if (o->type == &window_type)
        return window_add_items(c, key, klen, o, now, items, lens, n, multi);
    int small[256];
    int *res = n <= 256 ? small : malloc(n * sizeof(int));
    if (res == NULL) {
        reply_oom(c);
        return false;
    }
    size_t done;
    if (o->type == &bloom_type) {
        done = sbf_add_many(o->v, (const void *const *)items, lens, n, res);
        wal_log_bf_add(key, klen, o->v, items, lens, done, res);
    } else {
        /* Counting filters do not scale: like a NONSCALING chain they refuse
         * new items once they hold their capacity. Their writers serialize
         * on the object so the log holds their changes in applied order
         * (saturated counters make adds and deletes order-sensitive). */
        cntbf_t *cf = o->v;
        pthread_mutex_lock(&o->lock);
        uint64_t cap = cntbf_capacity(cf);
        for (done = 0; done < n;) {
            if (cntbf_count(cf) >= cap && !cntbf_check(cf, items[done], lens[done])) {
                res[done++] = BLOOMERY_EFULL;
                break;
            }
            res[done] = cntbf_add(cf, items[done], lens[done]) ? 1 : 0;
            done++;
        }
        wal_log_counting(WAL_CNT_ADD, key, klen, cf, items, lens, done, res);
        pthread_mutex_unlock(&o->lock);
    }
    if (multi)
        reply_array(&c->out, (long long)done);
    bool ok = reply_add_results(c, res, done);
    if (res != small)
        free(res);
    return ok;
}

kv_entry *bfc_open_for_add(cmd_ctx *c, ks_ref *ref, const bfc_params *p, bool create, int64_t *now)
{
    kv_entry *e = ck_open_or_create(c, ref, c->argv[1], c->argvlen[1], &bfc_any_kind,
                                    create ? bfc_create : NULL, p);
    if (e && e->obj->type == &window_type)
        e = window_open_for_add(c, ref, e, now);
    return e;
}

/* BF.ADD (one item, multi false) and BF.MADD: the items from argv[2]. */
static bool add_command(cmd_ctx *c, bool multi)
{
    if (multi ? c->argc < 3 : c->argc != 3) {
        reply_wrong_arity(&c->out, multi ? "bf.madd" : "bf.add");
        return false;
    }
    bfc_params p;
    bfc_default_params(&p);
    ks_ref ref;
    int64_t now = 0;
    kv_entry *e = bfc_open_for_add(c, &ref, &p, true, &now);
    bool ok = e && bfc_add_items(c, c->argv[1], c->argvlen[1], e->obj, now, c->argv + 2,
                                 c->argvlen + 2, (size_t)c->argc - 2, multi);
    ks_close(&ref);
    return ok;
}

bool bfAddCommand(cmd_ctx *c) { return add_command(c, false); }
bool bfMaddCommand(cmd_ctx *c) { return add_command(c, true); }

size_t bfAddBatch(cmd_ctx *c, const char *key, size_t klen, const char **items, const size_t *lens,
                  size_t n)
{
    ks_ref ref;
    bfc_params p;
    bfc_default_params(&p);
    size_t failed = 0;
    /* Each request opens the key in turn, as separate commands would: an
     * error (wrong type, creation refused) is repeated for each of them. */
    for (size_t i = 0; i < n;) {
        kv_entry *e = ck_open_or_create(c, &ref, key, klen, &bfc_any_kind, bfc_create, &p);
        if (e == NULL) {
            ks_close(&ref);
            failed++;
            i++;
            continue;
        }
        if (e->obj->type == &window_type) {
            /* Up to 256 requests per rotation check, as one BF.MADD. */
            int64_t now;
            size_t g = n - i < 256 ? n - i : 256;
            if ((e = window_open_for_add(c, &ref, e, &now)) == NULL) {
                failed++;
                g = 1;
            } else {
                window_add_items(c, key, klen, e->obj, now, items + i, lens + i, g, false);
            }
            ks_close(&ref);
            i += g;
            continue;
        }
        kv_obj *o = e->obj;
        if (o->type != &bloom_type) {
            failed += !bfc_add_items(c, key, klen, o, 0, items + i, lens + i, 1, false);
            ks_close(&ref);
            i++;
            continue;
        }
        int res[256];
        size_t g = n - i < 256 ? n - i : 256;
        size_t done = sbf_add_many(o->v, (const void *const *)(items + i), lens + i, g, res);
        wal_log_bf_add(key, klen, o->v, items + i, lens + i, done, res);
        failed += !reply_add_results(c, res, done);
        ks_close(&ref);
        i += done;
    }
    return failed;
}

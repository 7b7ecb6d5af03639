/* TOPK.* over libbloomery's HeavyKeeper top-k (topk.h), with RedisBloom's
 * arguments, replies and errors (docs/COMMANDS.md), checked in its order.
 *
 * Locking: an add decays buckets, draws from the value's generator and
 * reorders the heap, and TOPK.QUERY and TOPK.LIST read the heap, so every
 * call holds the object's mutex on top of the stripe's shared lock. Adds
 * are logged under it, so the log has a key's adds in the order they drew.
 *
 * Items are answered as RedisBloom answers them, simple strings, but for
 * one holding a NUL, CR or LF: a bulk string, so every item comes back
 * whole (RedisBloom cuts it at a NUL). TOPK.INCRBY adds the pairs before a
 * bad increment and answers that one with an error as the array's last
 * element, as RedisBloom; its array announces every pair and then stops
 * short, which leaves the connection out of step: ours counts what it
 * sends.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bloomery/murmur.h"
#include "cmd.h"
#include "cmdkit.h"
#include "persist.h"
#include "util.h"

static const ck_kind topk_kind = {
    .types = {&topk_type},
    .not_found = "TopK: key does not exist",
    .nomem = "ERR Insufficient memory to create topk data structure",
    .failed = "ERR Insufficient memory to create topk data structure",
    .create_nomem = "ERR Insufficient memory to create topk data structure",
};

static const char *err_increment = "TopK: increment must be an integer greater or equal to 0"
                                   "                            "
                                   "and smaller or equal to 100,000";

/* ---- TOPK.RESERVE ---- */

static int build_topk(kv_obj *o, const void *arg)
{
    const wal_topk *p = arg;
    topk_t *t;
    int rc = topk_create(&t, p->k, p->width, p->depth, p->decay, p->seed);
    if (rc == BLOOMERY_OK)
        o->v = t;
    return rc;
}

static void log_topk(const ks_ref *ref, const kv_entry *e, const void *arg)
{
    (void)e;
    wal_log_topk_create(ref->key, ref->klen, arg);
}

/* A u32 of at least 1 at argv[i], else err; false after replying. */
static bool parse_u32(cmd_ctx *c, int i, const char *err, uint32_t *out)
{
    long long v;
    if (!str_to_ll(c->argv[i], c->argvlen[i], &v) || v < 1 || v > UINT32_MAX) {
        reply_error(&c->out, err);
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

static bool parse_reserve(cmd_ctx *c, wal_topk *p)
{
    p->width = TOPK_DEFAULT_WIDTH;
    p->depth = TOPK_DEFAULT_DEPTH;
    p->decay = TOPK_DEFAULT_DECAY;
    if (!parse_u32(c, 2, "TopK: invalid k", &p->k))
        return false;
    if (c->argc == 3)
        return true;
    if (!parse_u32(c, 3, "TopK: invalid width", &p->width) ||
        !parse_u32(c, 4, "TopK: invalid depth", &p->depth))
        return false;
    if (!str_to_double(c->argv[5], c->argvlen[5], &p->decay) || p->decay <= 0 || p->decay > 1) {
        reply_error(&c->out, "TopK: invalid decay value. must be '<= 1' & '> 0'");
        return false;
    }
    return true;
}

bool topkReserveCommand(cmd_ctx *c)
{
    if (c->argc != 3 && c->argc != 6) {
        reply_wrong_arity(&c->out, "topk.reserve");
        return false;
    }
    ks_ref ref;
    bool ok = false;
    wal_topk p;
    if (ks_open(&ref, c->argv[1], c->argvlen[1], true)) {
        reply_error(&c->out, "TopK: key already exists");
    } else if (parse_reserve(c, &p)) {
        /* Each key draws its own sequence, the same on every server fed the
         * same commands; the log carries the seed. */
        p.seed = bloomery_murmur64a(c->argv[1], c->argvlen[1], 0);
        ck_value v = {
            .kind = &topk_kind,
            .type = &topk_type,
            .bytes = topk_bytes_for(p.k, p.width, p.depth),
            .build = build_topk,
            .log = log_topk,
            .params = &p,
        };
        if (ck_create(c, &ref, &v)) {
            reply_ok(&c->out);
            ok = true;
        }
    }
    ks_close(&ref);
    return ok;
}

/* An item in a reply: a simple string, as RedisBloom answers items; one
 * that a simple string cannot carry (a NUL, CR or LF in it, where
 * RedisBloom cuts or breaks the reply) as a bulk string. */
static void reply_item(reply *r, const void *item, size_t n)
{
    const char *p = item;
    if (memchr(p, '\0', n) || memchr(p, '\r', n) || memchr(p, '\n', n)) {
        reply_bulk(r, p, n);
        return;
    }
    reply_simple_len(r, p, n);
}

/* ---- TOPK.ADD, TOPK.INCRBY ---- */

/* Adds items[i] by incrs[i] and answers each with the item it expelled or
 * nil; then, when tail is not NULL, the error tail as a last element (the
 * pair where RedisBloom stopped). Logs what was added. The key is open, its
 * object locked. */
static bool add_items(cmd_ctx *c, kv_obj *o, const char **items, size_t *lens, uint64_t *incrs,
                      size_t n, const char *tail)
{
    reply_array(&c->out, (long long)n + (tail != NULL));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        topk_item ex;
        int rc = topk_add(o->v, items[i], lens[i], (uint32_t)incrs[i], &ex);
        if (rc < 0) {
            ck_reply_nomem(c, BLOOMERY_ENOMEM, topk_kind.nomem);
            continue;
        }
        if (rc == 1)
            reply_item(&c->out, ex.item, ex.len);
        else
            reply_null(&c->out);
        items[k] = items[i];
        lens[k] = lens[i];
        incrs[k++] = incrs[i];
    }
    if (tail)
        reply_error(&c->out, tail);
    wal_log_items(WAL_TOPK_ADD, c->argv[1], c->argvlen[1], items, lens, incrs, k);
    topk_value_sync(o);
    return k == n && tail == NULL;
}

/* TOPK.ADD (step 1: every argument an item, increment 1) or TOPK.INCRBY
 * (step 2: item, increment pairs). As RedisBloom, TOPK.INCRBY adds the
 * pairs before the first bad increment and answers that one with an error
 * in its place, the last of the array (RedisBloom announces every pair,
 * then stops: we count only what is sent). */
static bool add(cmd_ctx *c, int step)
{
    ks_ref ref;
    kv_entry *e;
    if (!ck_open(c, &ref, c->argv[1], c->argvlen[1], &topk_kind, CK_MUST_EXIST, &e)) {
        ks_close(&ref);
        return false;
    }
    size_t n = (size_t)(c->argc - 2) / (size_t)step;
    const char **items = malloc(n * sizeof(*items));
    size_t *lens = malloc(n * sizeof(*lens));
    uint64_t *incrs = malloc(n * sizeof(*incrs));
    bool ok = items && lens && incrs;
    const char *tail = NULL;
    if (!ok)
        reply_oom(c);
    size_t good = 0;
    for (; ok && good < n; good++) {
        int at = 2 + step * (int)good;
        items[good] = c->argv[at];
        lens[good] = c->argvlen[at];
        long long v = 1;
        if (step == 2 && (!str_to_ll(c->argv[at + 1], c->argvlen[at + 1], &v) || v < 0 ||
                          v > TOPK_MAX_INCREMENT)) {
            tail = err_increment;
            break;
        }
        incrs[good] = (uint64_t)v;
    }
    if (ok) {
        pthread_mutex_lock(&e->obj->lock);
        ok = add_items(c, e->obj, items, lens, incrs, good, tail);
        pthread_mutex_unlock(&e->obj->lock);
    }
    ks_close(&ref);
    free(items);
    free(lens);
    free(incrs);
    return ok;
}

bool topkAddCommand(cmd_ctx *c)
{
    if (c->argc < 3) {
        reply_wrong_arity(&c->out, "topk.add");
        return false;
    }
    return add(c, 1);
}

bool topkIncrbyCommand(cmd_ctx *c)
{
    if (c->argc < 4 || c->argc % 2 == 1) {
        reply_wrong_arity(&c->out, "topk.incrby");
        return false;
    }
    return add(c, 2);
}

/* Pipelined "TOPK.ADD key item" requests as one call: the key opened and
 * locked once and one log record, each request answered with its own
 * one-element array, as separate commands would be. */
size_t topkAddBatch(cmd_ctx *c, const char *key, size_t klen, const char **items,
                    const size_t *lens, size_t n)
{
    ks_ref ref;
    kv_entry *e;
    const char **done = malloc(n * sizeof(*done));
    size_t *done_lens = malloc(n * sizeof(*done_lens));
    uint64_t *ones = malloc(n * sizeof(*ones));
    size_t failed = 0, todo = n;
    if (!done || !done_lens || !ones) {
        for (size_t i = 0; i < n; i++)
            reply_oom(c);
        failed = n;
        todo = 0;
    }
    for (size_t i = 0; i < todo; i++) {
        if (!ck_open(c, &ref, key, klen, &topk_kind, CK_MUST_EXIST, &e)) {
            /* Each request gets the error a separate command would. */
            ks_close(&ref);
            failed++;
            continue;
        }
        kv_obj *o = e->obj;
        pthread_mutex_lock(&o->lock);
        size_t k = 0;
        for (; i < todo; i++) {
            reply_array(&c->out, 1);
            topk_item ex;
            int rc = topk_add(o->v, items[i], lens[i], 1, &ex);
            if (rc < 0) {
                ck_reply_nomem(c, BLOOMERY_ENOMEM, topk_kind.nomem);
                failed++;
            } else if (rc == 1) {
                reply_item(&c->out, ex.item, ex.len);
            } else {
                reply_null(&c->out);
            }
            if (rc >= 0) {
                done[k] = items[i];
                done_lens[k] = lens[i];
                ones[k++] = 1;
            }
        }
        wal_log_items(WAL_TOPK_ADD, key, klen, done, done_lens, ones, k);
        topk_value_sync(o);
        pthread_mutex_unlock(&o->lock);
        ks_close(&ref);
    }
    free(done);
    free(done_lens);
    free(ones);
    return failed;
}

/* ---- TOPK.QUERY, TOPK.COUNT ---- */

static bool lookup(cmd_ctx *c, const char *name, bool count)
{
    if (c->argc < 3) {
        reply_wrong_arity(&c->out, name);
        return false;
    }
    ks_ref ref;
    kv_entry *e;
    bool ok =
        ck_open(c, &ref, c->argv[1], c->argvlen[1], &topk_kind, CK_MUST_EXIST | CK_COUNT_HIT, &e);
    if (ok) {
        size_t n = (size_t)c->argc - 2;
        reply_array(&c->out, (long long)n);
        pthread_mutex_lock(&e->obj->lock);
        for (size_t i = 0; i < n; i++) {
            const char *item = c->argv[2 + i];
            size_t len = c->argvlen[2 + i];
            if (count)
                reply_int(&c->out, topk_count(e->obj->v, item, len));
            else
                reply_bool(&c->out, topk_query(e->obj->v, item, len));
        }
        pthread_mutex_unlock(&e->obj->lock);
    }
    ks_close(&ref);
    return ok;
}

bool topkQueryCommand(cmd_ctx *c) { return lookup(c, "topk.query", false); }
bool topkCountCommand(cmd_ctx *c) { return lookup(c, "topk.count", true); }

/* ---- TOPK.LIST, TOPK.INFO ---- */

bool topkListCommand(cmd_ctx *c)
{
    if (c->argc != 2 && c->argc != 3) {
        reply_wrong_arity(&c->out, "topk.list");
        return false;
    }
    /* RedisBloom compares only the argument's length of "WITHCOUNT". */
    bool with_count = c->argc == 3;
    if (with_count && (c->argvlen[2] > 9 || strncasecmp(c->argv[2], "WITHCOUNT", c->argvlen[2]))) {
        reply_error(&c->out, "WITHCOUNT keyword expected");
        return false;
    }
    ks_ref ref;
    kv_entry *e;
    bool ok =
        ck_open(c, &ref, c->argv[1], c->argvlen[1], &topk_kind, CK_MUST_EXIST | CK_COUNT_HIT, &e);
    if (ok) {
        pthread_mutex_lock(&e->obj->lock);
        topk_item *list = malloc(topk_k(e->obj->v) * sizeof(*list));
        if (list == NULL) {
            reply_oom(c);
            ok = false;
        } else {
            size_t n = topk_list(e->obj->v, list);
            reply_array(&c->out, (long long)(with_count ? 2 * n : n));
            for (size_t i = 0; i < n; i++) {
                reply_item(&c->out, list[i].item, list[i].len);
                if (with_count)
                    reply_int(&c->out, list[i].count);
            }
        }
        pthread_mutex_unlock(&e->obj->lock);
        free(list);
    }
    ks_close(&ref);
    return ok;
}

bool topkInfoCommand(cmd_ctx *c)
{
    if (c->argc != 2) {
        reply_wrong_arity(&c->out, "topk.info");
        return false;
    }
    ks_ref ref;
    kv_entry *e;
    bool ok =
        ck_open(c, &ref, c->argv[1], c->argvlen[1], &topk_kind, CK_MUST_EXIST | CK_COUNT_HIT, &e);
    if (ok) {
        const topk_t *t = e->obj->v;
        pthread_mutex_lock(&e->obj->lock);
        long long k = topk_k(t), w = topk_width(t), d = topk_depth(t);
        double decay = topk_decay(t);
        pthread_mutex_unlock(&e->obj->lock);
        reply_map(&c->out, 4);
        reply_simple(&c->out, "k");
        reply_int(&c->out, k);
        reply_simple(&c->out, "width");
        reply_int(&c->out, w);
        reply_simple(&c->out, "depth");
        reply_int(&c->out, d);
        reply_simple(&c->out, "decay");
        reply_double(&c->out, decay);
    }
    ks_close(&ref);
    return ok;
}

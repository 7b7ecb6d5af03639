/* PFADD, PFCOUNT, PFMERGE over libbloomery's HyperLogLog, which keeps the
 * value in Redis's HLL string format byte for byte.
 *
 * hll_t is not thread-safe and PFCOUNT writes (it refreshes the cached
 * cardinality in the header, as Redis does), so every access holds the
 * object's mutex on top of the stripe lock. Multi-key forms take their
 * stripes in order (ks_lock_many) and then the objects' mutexes in address
 * order.
 */
#include <stdlib.h>
#include <string.h>

#include "cmdkit.h"
#include "persist.h"
#include "cmd.h"
#include "config.h"
#include "log.h"
#include "util.h"

static const char *err_invalid = "INVALIDOBJ Corrupted HLL object detected";

static const ck_kind hll_kind = {.types = {&hll_type}};

/* ck_create_fn: an empty HLL; *arg (a bool) says it was created. */
static kv_entry *create_hll(cmd_ctx *c, ks_ref *ref, const void *arg)
{
    kv_obj *o = hll_value_new();
    kv_entry *e = o ? ks_add(ref, o) : NULL;
    if (e == NULL) {
        if (o)
            ks_mem_add(-(int64_t)kv_obj_bytes(o));
        kv_obj_free(o);
        reply_oom(c);
        return NULL;
    }
    *(bool *)arg = true;
    return e;
}

bool pfaddCommand(cmd_ctx *c)
{
    ks_ref ref;
    bool created = false;
    kv_entry *e =
        ck_open_or_create(c, &ref, c->argv[1], c->argvlen[1], &hll_kind, create_hll, &created);
    if (e == NULL) {
        ks_close(&ref);
        return false;
    }
    kv_obj *o = e->obj;
    pthread_mutex_lock(&o->lock);
    hll_set_sparse_max(o->v, hll_sparse_max());
    bool updated = created;
    int rc = 0;
    for (int i = 2; i < c->argc && rc >= 0; i++) {
        rc = hll_add(o->v, c->argv[i], c->argvlen[i]);
        if (rc == 1)
            updated = true;
    }
    if (updated)
        wal_log_pf_add(c->argv[1], c->argvlen[1], created, c->argv + 2, c->argvlen + 2,
                       (size_t)c->argc - 2);
    hll_value_sync(o);
    pthread_mutex_unlock(&o->lock);
    ks_close(&ref);
    if (rc < 0) {
        reply_error(&c->out, err_invalid);
        return false;
    }
    reply_int(&c->out, updated ? 1 : 0);
    return true;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (kv_obj *const *)a, y = (uintptr_t) * (kv_obj *const *)b;
    return x < y ? -1 : x > y;
}

bool pfcountCommand(cmd_ctx *c)
{
    if (c->argc == 2) {
        ks_ref ref;
        kv_entry *e;
        bool ok = ck_open(c, &ref, c->argv[1], c->argvlen[1], &hll_kind, 0, &e);
        if (!ok || e == NULL) {
            ks_close(&ref);
            if (ok)
                reply_int(&c->out, 0); /* a missing key counts none */
            return ok;
        }
        kv_obj *o = e->obj;
        uint64_t card = 0;
        pthread_mutex_lock(&o->lock);
        int rc = hll_count(o->v, &card);
        pthread_mutex_unlock(&o->lock);
        ks_close(&ref);
        if (rc < 0) {
            reply_error(&c->out, err_invalid);
            return false;
        }
        reply_int(&c->out, (long long)card);
        return true;
    }
    size_t n = (size_t)c->argc - 1;
    ks_multi m;
    ks_lock_many(&m, c->argv + 1, c->argvlen + 1, n, false);
    kv_obj **objs = calloc(n, sizeof(*objs));
    hll_t **hs = calloc(n, sizeof(*hs));
    kv_obj **locked = calloc(n, sizeof(*locked));
    size_t nlocked = 0;
    bool ok = false;
    if (objs == NULL || hs == NULL || locked == NULL) {
        reply_oom(c);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        ks_ref r;
        kv_entry *e = ks_find_locked(c->argv[1 + i], c->argvlen[1 + i], &r, false);
        if (e == NULL)
            continue;
        if (e->obj->type != &hll_type) {
            reply_wrongtype(c);
            goto out;
        }
        objs[i] = e->obj;
        hs[i] = e->obj->v;
    }
    /* Lock each distinct object once, in address order. */
    for (size_t i = 0; i < n; i++)
        if (objs[i])
            locked[nlocked++] = objs[i];
    qsort(locked, nlocked, sizeof(*locked), cmp_ptr);
    size_t k = 0;
    for (size_t i = 0; i < nlocked; i++)
        if (k == 0 || locked[k - 1] != locked[i])
            locked[k++] = locked[i];
    nlocked = k;
    for (size_t i = 0; i < nlocked; i++)
        pthread_mutex_lock(&locked[i]->lock);
    uint64_t card = 0;
    int rc = hll_count_union(hs, n, &card);
    for (size_t i = nlocked; i-- > 0;)
        pthread_mutex_unlock(&locked[i]->lock);
    ok = rc >= 0;
    if (ok)
        reply_int(&c->out, (long long)card);
    else
        reply_error(&c->out, err_invalid);
out:
    ks_unlock_many(&m);
    free(objs);
    free(hs);
    free(locked);
    return ok;
}

bool pfmergeCommand(cmd_ctx *c)
{
    size_t n = (size_t)c->argc - 1;
    /* The log names the sources that existed. */
    const char **used = calloc(n, sizeof(*used));
    size_t *used_lens = calloc(n, sizeof(*used_lens));
    value_status st = VS_OOM;
    if (used && used_lens) {
        ks_multi m;
        ks_lock_many(&m, c->argv + 1, c->argvlen + 1, n, true);
        bool created;
        size_t nused;
        st = hll_merge_keys(c->argv + 1, c->argvlen + 1, n, &created, used, used_lens, &nused);
        if (st == VS_OK)
            wal_log_merge(WAL_PF_MERGE, created, used, used_lens, nused);
        ks_unlock_many(&m);
    }
    free(used);
    free(used_lens);
    if (st == VS_OK)
        reply_ok(&c->out);
    else if (st == VS_CORRUPT)
        reply_error(&c->out, err_invalid);
    else
        ck_reply_status(c, &hll_kind, st);
    return st == VS_OK;
}

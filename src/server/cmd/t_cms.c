/* CMS.* over libbloomery's count-min sketch (cms.h), with RedisBloom's
 * arguments, replies and errors (docs/COMMANDS.md), checked in its order.
 *
 * Locking: a sketch's counters are plain integers, so every call holds the
 * object's mutex on top of the stripe's shared lock, and logs under it.
 * CMS.MERGE locks the stripes of every key exclusively, as other merges.
 *
 * CMS.INCRBY refuses an increment that would take one of the item's
 * counters past 2^32 - 1 (or the total past 2^63 - 1) with an error in its
 * place in the reply array; that item changes nothing, the others apply.
 * An estimate that reaches 2^32 - 1 is answered with the same error, as
 * RedisBloom 2.4 answers its saturated counters.
 */
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "cmdkit.h"
#include "persist.h"
#include "util.h"

static const ck_kind cms_kind = {
    .types = {&cms_type},
    .not_found = "CMS: key does not exist",
    .nomem = "CMS: Insufficient memory to create the key",
    .failed = "CMS: invalid init arguments",
    .create_nomem = "CMS: Insufficient memory to create the key",
};

/* ---- CMS.INITBYDIM, CMS.INITBYPROB ---- */

static int build_cms(kv_obj *o, const void *arg)
{
    const wal_cms *p = arg;
    cms_t *s;
    int rc = cms_create(&s, p->width, p->depth);
    if (rc == BLOOMERY_OK)
        o->v = s;
    return rc;
}

static void log_cms(const ks_ref *ref, const kv_entry *e, const void *arg)
{
    (void)e;
    wal_log_cms_create(ref->key, ref->klen, arg);
}

/* The dimensions from argv[2..3]; false after replying. */
static bool parse_dims(cmd_ctx *c, bool by_prob, wal_cms *p)
{
    if (!by_prob) {
        long long w, d;
        if (!str_to_ll(c->argv[2], c->argvlen[2], &w) || w < 1) {
            reply_error(&c->out, "CMS: invalid width");
            return false;
        }
        if (!str_to_ll(c->argv[3], c->argvlen[3], &d) || d < 1) {
            reply_error(&c->out, "CMS: invalid depth");
            return false;
        }
        p->width = (uint64_t)w;
        p->depth = (uint64_t)d;
    } else {
        double error, prob;
        if (!str_to_double(c->argv[2], c->argvlen[2], &error) || error <= 0 || error >= 1) {
            reply_error(&c->out, "CMS: invalid overestimation value");
            return false;
        }
        if (!str_to_double(c->argv[3], c->argvlen[3], &prob) || prob <= 0 || prob >= 1) {
            reply_error(&c->out, "CMS: invalid prob value");
            return false;
        }
        if (cms_dims_for(error, prob, &p->width, &p->depth) != BLOOMERY_OK) {
            reply_error(&c->out, cms_kind.failed);
            return false;
        }
    }
    if (p->width > (uint64_t)INT64_MAX / p->depth) {
        reply_error(&c->out, cms_kind.failed);
        return false;
    }
    return true;
}

static bool init(cmd_ctx *c, bool by_prob)
{
    if (c->argc != 4) {
        reply_wrong_arity(&c->out, by_prob ? "cms.initbyprob" : "cms.initbydim");
        return false;
    }
    ks_ref ref;
    bool ok = false;
    wal_cms p;
    if (ks_open(&ref, c->argv[1], c->argvlen[1], true)) {
        reply_error(&c->out, "CMS: key already exists");
    } else if (parse_dims(c, by_prob, &p)) {
        ck_value v = {
            .kind = &cms_kind,
            .type = &cms_type,
            .bytes = cms_bytes_for(p.width, p.depth),
            .build = build_cms,
            .log = log_cms,
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

bool cmsInitbydimCommand(cmd_ctx *c) { return init(c, false); }
bool cmsInitbyprobCommand(cmd_ctx *c) { return init(c, true); }

/* ---- CMS.INCRBY ---- */

bool cmsIncrbyCommand(cmd_ctx *c)
{
    if (c->argc < 4 || c->argc % 2 == 1) {
        reply_wrong_arity(&c->out, "cms.incrby");
        return false;
    }
    ks_ref ref;
    kv_entry *e;
    if (!ck_open(c, &ref, c->argv[1], c->argvlen[1], &cms_kind, CK_MUST_EXIST, &e)) {
        ks_close(&ref);
        return false;
    }
    size_t n = (size_t)(c->argc - 2) / 2;
    const char **items = malloc(n * sizeof(*items));
    size_t *lens = malloc(n * sizeof(*lens));
    uint64_t *incrs = malloc(n * sizeof(*incrs));
    int64_t *res = malloc(n * sizeof(*res));
    bool ok = items && lens && incrs && res;
    if (!ok)
        reply_oom(c);
    for (size_t i = 0; ok && i < n; i++) {
        long long v;
        items[i] = c->argv[2 + 2 * i];
        lens[i] = c->argvlen[2 + 2 * i];
        if (!str_to_ll(c->argv[3 + 2 * i], c->argvlen[3 + 2 * i], &v)) {
            reply_error(&c->out, "CMS: Cannot parse number");
            ok = false;
        } else if (v < 0) {
            reply_error(&c->out, "CMS: Number cannot be negative");
            ok = false;
        }
        incrs[i] = (uint64_t)v;
    }
    if (ok) {
        kv_obj *o = e->obj;
        pthread_mutex_lock(&o->lock);
        cms_incrby_batch(o->v, (const void *const *)items, lens, incrs, n, res);
        reply_array(&c->out, (long long)n);
        size_t k = 0, full = 0;
        for (size_t i = 0; i < n; i++) {
            /* RedisBloom answers an estimate that reached 2^32 - 1 (its
             * counters saturate there) with the overflow error too. */
            if (res[i] < 0 || res[i] == UINT32_MAX) {
                reply_error(&c->out, "CMS: INCRBY overflow");
                full++;
            } else {
                reply_int(&c->out, res[i]);
            }
            if (res[i] < 0)
                continue;
            /* The log keeps only what was applied. */
            items[k] = items[i];
            lens[k] = lens[i];
            incrs[k++] = incrs[i];
        }
        wal_log_items(WAL_CMS_INCRBY, c->argv[1], c->argvlen[1], items, lens, incrs, k);
        pthread_mutex_unlock(&o->lock);
        ok = full == 0;
    }
    ks_close(&ref);
    free(items);
    free(lens);
    free(incrs);
    free(res);
    return ok;
}

/* ---- CMS.QUERY, CMS.INFO ---- */

bool cmsQueryCommand(cmd_ctx *c)
{
    if (c->argc < 3) {
        reply_wrong_arity(&c->out, "cms.query");
        return false;
    }
    ks_ref ref;
    kv_entry *e;
    bool ok =
        ck_open(c, &ref, c->argv[1], c->argvlen[1], &cms_kind, CK_MUST_EXIST | CK_COUNT_HIT, &e);
    if (ok) {
        size_t n = (size_t)c->argc - 2;
        reply_array(&c->out, (long long)n);
        pthread_mutex_lock(&e->obj->lock);
        for (size_t i = 0; i < n; i++)
            reply_int(&c->out, cms_query(e->obj->v, c->argv[2 + i], c->argvlen[2 + i]));
        pthread_mutex_unlock(&e->obj->lock);
    }
    ks_close(&ref);
    return ok;
}

bool cmsInfoCommand(cmd_ctx *c)
{
    if (c->argc != 2) {
        reply_wrong_arity(&c->out, "cms.info");
        return false;
    }
    ks_ref ref;
    kv_entry *e;
    bool ok =
        ck_open(c, &ref, c->argv[1], c->argvlen[1], &cms_kind, CK_MUST_EXIST | CK_COUNT_HIT, &e);
    if (ok) {
        pthread_mutex_lock(&e->obj->lock);
        long long v[] = {(long long)cms_width(e->obj->v), (long long)cms_depth(e->obj->v),
                         (long long)cms_count(e->obj->v)};
        pthread_mutex_unlock(&e->obj->lock);
        static const char *names[] = {"width", "depth", "count"};
        reply_map(&c->out, 3);
        for (int i = 0; i < 3; i++) {
            reply_simple(&c->out, names[i]);
            reply_int(&c->out, v[i]);
        }
    }
    ks_close(&ref);
    return ok;
}

/* ---- CMS.MERGE ---- */

/* RedisBloom's checks, in its order: the destination, numkeys, the shape of
 * the argument list, then per source its weight, its key and its
 * dimensions. keys[0] is the destination. False after replying. */
static bool check_merge(cmd_ctx *c, const char **keys, size_t *lens, int64_t *weights,
                        long long *numkeys)
{
    ks_ref ref;
    kv_entry *dst = ks_find_locked(c->argv[1], c->argvlen[1], &ref, true);
    if (dst == NULL || dst->obj->type != &cms_type) {
        ck_reply_status(c, &cms_kind, dst ? VS_WRONGTYPE : VS_NOT_FOUND);
        return false;
    }
    if (!str_to_ll(c->argv[2], c->argvlen[2], numkeys)) {
        reply_error(&c->out, "CMS: invalid numkeys");
        return false;
    }
    if (*numkeys <= 0) {
        reply_error(&c->out, "CMS: Number of keys must be positive");
        return false;
    }
    long long rest = c->argc - 3;
    int pos = ck_arg_index(c, 3, "WEIGHTS");
    if (pos < 0 && *numkeys != rest) {
        reply_error(&c->out, "CMS: wrong number of keys");
        return false;
    }
    if (pos >= 0 && (pos - 3 != *numkeys || rest != 1 + *numkeys * 2)) {
        reply_error(&c->out, "CMS: wrong number of keys/weights");
        return false;
    }
    keys[0] = c->argv[1];
    lens[0] = c->argvlen[1];
    for (long long i = 0; i < *numkeys; i++) {
        long long w = 1;
        if (pos >= 0 && !str_to_ll(c->argv[pos + 1 + i], c->argvlen[pos + 1 + i], &w)) {
            reply_error(&c->out, "CMS: invalid weight value");
            return false;
        }
        weights[i] = w;
        keys[1 + i] = c->argv[3 + i];
        lens[1 + i] = c->argvlen[3 + i];
        kv_entry *e = ks_find_locked(keys[1 + i], lens[1 + i], &ref, false);
        if (e == NULL || e->obj->type != &cms_type) {
            ck_reply_status(c, &cms_kind, e ? VS_WRONGTYPE : VS_NOT_FOUND);
            return false;
        }
        if (cms_width(e->obj->v) != cms_width(dst->obj->v) ||
            cms_depth(e->obj->v) != cms_depth(dst->obj->v)) {
            reply_error(&c->out, "CMS: width/depth is not equal");
            return false;
        }
    }
    return true;
}

bool cmsMergeCommand(cmd_ctx *c)
{
    if (c->argc < 4) {
        reply_wrong_arity(&c->out, "cms.merge");
        return false;
    }
    /* At most argc - 2 keys: the destination and every argument after
     * numkeys; the check below tells how many are keys. */
    size_t cap = (size_t)c->argc;
    const char **keys = malloc(cap * sizeof(*keys));
    size_t *lens = malloc(cap * sizeof(*lens));
    int64_t *weights = malloc(cap * sizeof(*weights));
    if (!keys || !lens || !weights) {
        free(keys);
        free(lens);
        free(weights);
        reply_oom(c);
        return false;
    }
    /* Lock the destination and every later argument that could be a key
     * (weights too: harmless, and known only after parsing). */
    keys[0] = c->argv[1];
    lens[0] = c->argvlen[1];
    for (int i = 3; i < c->argc; i++) {
        keys[i - 2] = c->argv[i];
        lens[i - 2] = c->argvlen[i];
    }
    ks_multi m;
    ks_lock_many(&m, keys, lens, (size_t)c->argc - 2, true);
    long long numkeys = 0;
    bool ok = check_merge(c, keys, lens, weights, &numkeys);
    if (ok) {
        size_t n = (size_t)numkeys + 1;
        value_status st = cms_merge_keys(keys, lens, n, weights);
        ok = st == VS_OK;
        if (ok) {
            wal_log_cms_merge(keys, lens, n, weights);
            reply_ok(&c->out);
        } else if (st == VS_OVERFLOW) {
            reply_error(&c->out, "CMS: MERGE overflow");
        } else {
            ck_reply_status(c, &cms_kind, st);
        }
    }
    ks_unlock_many(&m);
    free(keys);
    free(lens);
    free(weights);
    return ok;
}

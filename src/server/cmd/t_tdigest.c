/* TDIGEST.* over libbloomery's t-digest (tdigest.h), with RedisBloom 2.6's
 * syntax, replies and errors (docs/COMMANDS.md): every check in RedisBloom's
 * order, so a command with several faults gets its answer.
 *
 * Locking: adds reorder the digest's buffer, so every call holds the
 * object's mutex under the stripe's shared lock, as for cuckoo filters;
 * each change is logged under it. TDIGEST.MERGE locks its keys' stripes
 * exclusively and runs tdigest_merge_keys, which replay runs too.
 *
 * Queries never change the digest (they merge a copy of its buffer), unlike
 * RedisBloom's, which compress in place: INFO's merged and unmerged counts
 * therefore move only with writes, and a restart answers as before.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "cmdkit.h"
#include "persist.h"
#include "util.h"

#define ERR_PREFIX "ERR T-Digest: "

static const ck_kind td_kind = {
    .types = {&tdigest_type},
    .not_found = ERR_PREFIX "key does not exist",
    .nomem = ERR_PREFIX "allocation failed",
    .failed = ERR_PREFIX "allocation failed",
};

/* argv[1] as a t-digest that must exist, under the stripe's shared lock:
 * its entry, or NULL after replying (ref open either way). */
static kv_entry *open_digest(cmd_ctx *c, ks_ref *ref, bool count_hit)
{
    kv_entry *e;
    unsigned flags = CK_MUST_EXIST | (count_hit ? CK_COUNT_HIT : 0);
    if (!ck_open(c, ref, c->argv[1], c->argvlen[1], &td_kind, flags, &e))
        return NULL;
    return e;
}

/* RedisModule_StringToLongLong / StringToDouble. */
static bool parse_ll(cmd_ctx *c, int i, long long *v)
{
    return str_to_ll(c->argv[i], c->argvlen[i], v);
}

static bool parse_double(cmd_ctx *c, int i, double *v)
{
    return str_to_double(c->argv[i], c->argvlen[i], v);
}

/* A COMPRESSION value: 1 .. TDIGEST_MAX_COMPRESSION, or false after
 * replying; too_big is the command's words for a digest it cannot make. */
static bool parse_compression(cmd_ctx *c, int i, uint64_t *out, const char *too_big)
{
    long long v;
    if (!parse_ll(c, i, &v)) {
        reply_error(&c->out, ERR_PREFIX "error parsing compression parameter");
        return false;
    }
    if (v <= 0) {
        reply_error(&c->out, ERR_PREFIX "compression parameter needs to be a positive integer");
        return false;
    }
    if ((unsigned long long)v > TDIGEST_MAX_COMPRESSION) {
        reply_error(&c->out, too_big);
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

/* ---- TDIGEST.CREATE key [COMPRESSION c] ---- */

static int build_td(kv_obj *o, const void *arg)
{
    tdigest_t *t;
    int rc = tdigest_create(&t, *(const uint64_t *)arg);
    if (rc == BLOOMERY_OK)
        o->v = t;
    return rc;
}

static void log_td(const ks_ref *ref, const kv_entry *e, const void *arg)
{
    (void)e;
    wal_log_td_create(ref->key, ref->klen, *(const uint64_t *)arg);
}

bool tdigestCreateCommand(cmd_ctx *c)
{
    if (c->argc != 2 && c->argc != 4) {
        reply_wrong_arity(&c->out, "tdigest.create");
        return false;
    }
    ks_ref ref;
    kv_entry *e = ks_open(&ref, c->argv[1], c->argvlen[1], true);
    bool ok = false;
    uint64_t compression = TDIGEST_DEFAULT_COMPRESSION;
    /* RedisBloom looks at the key before the options. */
    if (e) {
        if (ck_is(&td_kind, e->obj))
            reply_error(&c->out, ERR_PREFIX "key already exists");
        else
            reply_wrongtype(c);
    } else if (c->argc == 4 && ck_arg_index(c, 2, "compression") < 0) {
        reply_error(&c->out, ERR_PREFIX "wrong keyword");
    } else if (c->argc == 4 &&
               !parse_compression(c, 3, &compression, ERR_PREFIX "allocation failed")) {
        /* answered */
    } else if (!server_maxmemory() &&
               ks_used_memory() + tdigest_bytes_for(compression) > ks_mem_limit(0)) {
        /* More than the machine has: RedisBloom's words for a failed
         * allocation, not the shared "to create filter" ones. */
        reply_error(&c->out, ERR_PREFIX "allocation failed");
    } else {
        ck_value v = {
            .kind = &td_kind,
            .type = &tdigest_type,
            .bytes = tdigest_bytes_for(compression),
            .build = build_td,
            .log = log_td,
            .params = &compression,
        };
        if (ck_create(c, &ref, &v)) {
            reply_ok(&c->out);
            ok = true;
        }
    }
    ks_close(&ref);
    return ok;
}

/* ---- TDIGEST.ADD key value [value ...] ---- */

/* The doubles argv[from..argc), NaN refused; NULL after replying. */
static double *parse_values(cmd_ctx *c, int from, const char *bad)
{
    size_t n = (size_t)(c->argc - from);
    double *v = malloc(n * sizeof(*v));
    if (v == NULL) {
        reply_oom(c);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!parse_double(c, from + (int)i, &v[i])) {
            reply_error(&c->out, bad);
            free(v);
            return NULL;
        }
    }
    return v;
}

bool tdigestAddCommand(cmd_ctx *c)
{
    ks_ref ref;
    kv_entry *e = open_digest(c, &ref, false);
    double *v = e ? parse_values(c, 2, ERR_PREFIX "error parsing val parameter") : NULL;
    size_t n = (size_t)(c->argc - 2);
    bool ok = false;
    if (v) {
        size_t i = 0;
        while (i < n && isfinite(v[i]))
            i++;
        if (i < n) {
            reply_error(&c->out, ERR_PREFIX "val parameter needs to be a finite number");
        } else {
            kv_obj *o = e->obj;
            pthread_mutex_lock(&o->lock);
            ok = tdigest_add(o->v, v, n) == BLOOMERY_OK;
            if (ok)
                wal_log_td_add(c->argv[1], c->argvlen[1], v, n);
            pthread_mutex_unlock(&o->lock);
            if (ok)
                reply_ok(&c->out);
            else
                reply_error(&c->out, ERR_PREFIX "overflow detected");
        }
    }
    ks_close(&ref);
    free(v);
    return ok;
}

/* ---- TDIGEST.RESET key ---- */

bool tdigestResetCommand(cmd_ctx *c)
{
    ks_ref ref;
    kv_entry *e = open_digest(c, &ref, false);
    if (e) {
        pthread_mutex_lock(&e->obj->lock);
        tdigest_reset(e->obj->v);
        wal_log_td_reset(c->argv[1], c->argvlen[1]);
        pthread_mutex_unlock(&e->obj->lock);
        reply_ok(&c->out);
    }
    ks_close(&ref);
    return e != NULL;
}

/* ---- TDIGEST.MERGE dest numkeys src [src ...] [COMPRESSION c] [OVERRIDE] ---- */

bool tdigestMergeCommand(cmd_ctx *c)
{
    /* RedisBloom checks the destination's type before anything else. */
    ks_ref ref;
    kv_entry *e = ks_open(&ref, c->argv[1], c->argvlen[1], false);
    bool wrong = e && !ck_is(&td_kind, e->obj);
    ks_close(&ref);
    if (wrong) {
        reply_wrongtype(c);
        return false;
    }
    long long numkeys;
    if (!parse_ll(c, 2, &numkeys)) {
        reply_error(&c->out, ERR_PREFIX "error parsing numkeys");
        return false;
    }
    if (numkeys <= 0) {
        reply_error(&c->out, ERR_PREFIX "numkeys needs to be a positive integer");
        return false;
    }
    if (numkeys > c->argc - 3) {
        reply_wrong_arity(&c->out, "tdigest.merge");
        return false;
    }
    int from = 3 + (int)numkeys;
    uint64_t compression = 0;
    bool override = false;
    if (from < c->argc) {
        int ci = ck_arg_index(c, from, "compression");
        int oi = ck_arg_index(c, from, "override");
        if (ci >= 0 && ci + 1 >= c->argc) {
            reply_wrong_arity(&c->out, "tdigest.merge");
            return false;
        }
        if (ci >= 0 && !parse_compression(c, ci + 1, &compression,
                                          ERR_PREFIX "allocation of destination digest failed"))
            return false;
        if (ci < 0 && oi < 0) {
            reply_error(&c->out, ERR_PREFIX "wrong keyword");
            return false;
        }
        override = oi >= 0;
    }
    /* The keys: the destination, then the sources. */
    size_t n = (size_t)numkeys + 1;
    const char **keys = malloc(n * sizeof(*keys));
    size_t *lens = malloc(n * sizeof(*lens));
    value_status st = VS_NOMEM;
    if (keys && lens) {
        keys[0] = c->argv[1];
        lens[0] = c->argvlen[1];
        for (size_t i = 1; i < n; i++) {
            keys[i] = c->argv[2 + i];
            lens[i] = c->argvlen[2 + i];
        }
        ks_multi m;
        ks_lock_many(&m, keys, lens, n, true);
        uint64_t used_c;
        bool used_o;
        st = tdigest_merge_keys(keys, lens, n, compression, override, &used_c, &used_o);
        if (st == VS_OK)
            wal_log_td_merge(used_c, used_o, keys, lens, n);
        ks_unlock_many(&m);
    }
    free(keys);
    free(lens);
    switch (st) {
    case VS_OK: reply_ok(&c->out); break;
    case VS_OVERFLOW: reply_error(&c->out, ERR_PREFIX "overflow detected"); break;
    case VS_NOMEM:
    case VS_FAILED:
        reply_error(&c->out, ERR_PREFIX "allocation of destination digest failed");
        break;
    default: ck_reply_status(c, &td_kind, st); break;
    }
    return st == VS_OK;
}

/* ---- TDIGEST.MIN / MAX key ---- */

static bool min_max(cmd_ctx *c, bool max)
{
    ks_ref ref;
    kv_entry *e = open_digest(c, &ref, true);
    if (e) {
        pthread_mutex_lock(&e->obj->lock);
        double d = max ? tdigest_max(e->obj->v) : tdigest_min(e->obj->v);
        pthread_mutex_unlock(&e->obj->lock);
        reply_double(&c->out, d);
    }
    ks_close(&ref);
    return e != NULL;
}

bool tdigestMinCommand(cmd_ctx *c) { return min_max(c, false); }
bool tdigestMaxCommand(cmd_ctx *c) { return min_max(c, true); }

/* ---- TDIGEST.QUANTILE / CDF / RANK / REVRANK / BYRANK / BYREVRANK ---- */

typedef enum query { Q_QUANTILE, Q_CDF, Q_RANK, Q_REVRANK, Q_BYRANK, Q_BYREVRANK } query;

/* BYRANK's ranks argv[2..argc), as RedisBloom checks them: NULL after
 * replying. */
static uint64_t *parse_ranks(cmd_ctx *c)
{
    size_t n = (size_t)(c->argc - 2);
    uint64_t *r = malloc(n * sizeof(*r));
    if (r == NULL) {
        reply_oom(c);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        long long v;
        const char *why = NULL;
        if (!parse_ll(c, 2 + (int)i, &v))
            why = ERR_PREFIX "error parsing rank";
        else if (v < 0)
            why = ERR_PREFIX "rank needs to be non negative";
        if (why) {
            reply_error(&c->out, why);
            free(r);
            return NULL;
        }
        r[i] = (uint64_t)v;
    }
    return r;
}

/* The other queries' numbers, as RedisBloom checks them: NULL after
 * replying. */
static double *parse_numbers(cmd_ctx *c, query q)
{
    const char *bad = q == Q_QUANTILE ? ERR_PREFIX "error parsing quantile"
                      : q == Q_CDF    ? ERR_PREFIX "error parsing cdf"
                                      : ERR_PREFIX "error parsing value";
    double *v = parse_values(c, 2, bad);
    for (int i = 2; v && q == Q_QUANTILE && i < c->argc; i++) {
        if (v[i - 2] < 0 || v[i - 2] > 1) {
            reply_error(&c->out, ERR_PREFIX "quantile should be in [0,1]");
            free(v);
            return NULL;
        }
    }
    return v;
}

static bool run_query(cmd_ctx *c, query q)
{
    ks_ref ref;
    kv_entry *e = open_digest(c, &ref, true);
    bool by_rank = q == Q_BYRANK || q == Q_BYREVRANK;
    uint64_t *ranks = e && by_rank ? parse_ranks(c) : NULL;
    double *in = e && !by_rank ? parse_numbers(c, q) : NULL;
    bool parsed = ranks || in;
    size_t n = (size_t)(c->argc - 2);
    double *out = parsed ? malloc(n * sizeof(*out)) : NULL;
    int64_t *iout = parsed ? malloc(n * sizeof(*iout)) : NULL;
    bool ok = false;
    if (parsed && (out == NULL || iout == NULL)) {
        reply_oom(c);
    } else if (parsed) {
        const tdigest_t *t = e->obj->v;
        pthread_mutex_lock(&e->obj->lock);
        int rc;
        switch (q) {
        case Q_QUANTILE: rc = tdigest_quantiles(t, in, out, n); break;
        case Q_CDF: rc = tdigest_cdfs(t, in, out, n); break;
        case Q_RANK:
        case Q_REVRANK: rc = tdigest_ranks(t, in, iout, n, q == Q_REVRANK); break;
        default: rc = tdigest_by_ranks(t, ranks, out, n, q == Q_BYREVRANK); break;
        }
        pthread_mutex_unlock(&e->obj->lock);
        if (rc != BLOOMERY_OK) {
            reply_oom(c);
        } else {
            reply_array(&c->out, (long long)n);
            for (size_t i = 0; i < n; i++) {
                if (q == Q_RANK || q == Q_REVRANK)
                    reply_int(&c->out, iout[i]);
                else
                    reply_double(&c->out, out[i]);
            }
            ok = true;
        }
    }
    ks_close(&ref);
    free(in);
    free(ranks);
    free(out);
    free(iout);
    return ok;
}

bool tdigestQuantileCommand(cmd_ctx *c) { return run_query(c, Q_QUANTILE); }
bool tdigestCdfCommand(cmd_ctx *c) { return run_query(c, Q_CDF); }
bool tdigestRankCommand(cmd_ctx *c) { return run_query(c, Q_RANK); }
bool tdigestRevrankCommand(cmd_ctx *c) { return run_query(c, Q_REVRANK); }
bool tdigestByrankCommand(cmd_ctx *c) { return run_query(c, Q_BYRANK); }
bool tdigestByrevrankCommand(cmd_ctx *c) { return run_query(c, Q_BYREVRANK); }

/* ---- TDIGEST.TRIMMED_MEAN key low high ---- */

/* The two cuts, as RedisBloom checks them: NULL when they are fine, else
 * the reply. */
static const char *bad_cuts(cmd_ctx *c, double *lo, double *hi)
{
    if (!parse_double(c, 2, lo))
        return ERR_PREFIX "error parsing low_cut_percentile";
    if (!parse_double(c, 3, hi))
        return ERR_PREFIX "error parsing high_cut_percentile";
    if (*lo < 0 || *lo > 1 || *hi < 0 || *hi > 1)
        return ERR_PREFIX "low_cut_percentile and high_cut_percentile should be in [0,1]";
    if (*lo >= *hi)
        return ERR_PREFIX "low_cut_percentile should be lower than high_cut_percentile";
    return NULL;
}

bool tdigestTrimmedMeanCommand(cmd_ctx *c)
{
    ks_ref ref;
    kv_entry *e = open_digest(c, &ref, true);
    double lo, hi, mean;
    const char *why = e ? bad_cuts(c, &lo, &hi) : NULL;
    bool ok = false;
    if (why) {
        reply_error(&c->out, why);
    } else if (e) {
        pthread_mutex_lock(&e->obj->lock);
        int rc = tdigest_trimmed_mean(e->obj->v, lo, hi, &mean);
        pthread_mutex_unlock(&e->obj->lock);
        ok = rc == BLOOMERY_OK;
        if (ok)
            reply_double(&c->out, mean);
        else
            reply_oom(c);
    }
    ks_close(&ref);
    return ok;
}

/* ---- TDIGEST.INFO key ---- */

bool tdigestInfoCommand(cmd_ctx *c)
{
    ks_ref ref;
    kv_entry *e = open_digest(c, &ref, true);
    if (e == NULL) {
        ks_close(&ref);
        return false;
    }
    tdigest_state st;
    pthread_mutex_lock(&e->obj->lock);
    tdigest_state_of(e->obj->v, &st);
    uint64_t cap = tdigest_capacity(e->obj->v), bytes = tdigest_bytes(e->obj->v);
    pthread_mutex_unlock(&e->obj->lock);
    ks_close(&ref);
    static const char *names[] = {"Compression",    "Capacity",           "Merged nodes",
                                  "Unmerged nodes", "Merged weight",      "Unmerged weight",
                                  "Observations",   "Total compressions", "Memory usage"};
    long long v[] = {(long long)st.compression,
                     (long long)cap,
                     (long long)st.merged_nodes,
                     (long long)st.unmerged_nodes,
                     (long long)st.merged_weight,
                     (long long)st.unmerged_weight,
                     (long long)(st.merged_weight + st.unmerged_weight),
                     (long long)st.total_compressions,
                     (long long)bytes};
    reply_map(&c->out, 9);
    for (int i = 0; i < 9; i++) {
        reply_simple(&c->out, names[i]);
        reply_int(&c->out, v[i]);
    }
    return true;
}

/* BF.* commands: thin adapters from RedisBloom's command surface to
 * libbloomery's scalable (sbf_t) and counting (cntbf_t) filters.
 *
 * Replies and errors are RedisBloom's, quirks included (see
 * ../shared/reference/redisbloom-compat.md and docs/COMMANDS.md): BF.EXISTS
 * answers 0 for a missing or wrong-type key, some errors have no ERR prefix,
 * BF.MADD/BF.INSERT end their array at the first "full" error, BF.INFO
 * reports Size as RedisBloom counts it (32-byte chain + 64 bytes per link +
 * the bit arrays).
 *
 * Dumps (BF.SCANDUMP / BF.LOADCHUNK) come in two formats:
 *   classic layout  RedisBloom's own: a packed header with iterator 1, then
 *                   the links' bit arrays in chunks of at most 16 MiB, the
 *                   iterator being 1 + the byte offset of the chunk's end.
 *                   A dump taken from RedisBloom loads here and answers the
 *                   same.
 *   blocked layout  serial.h's image: iterator 1 carries the image header,
 *                   iterator k >= 2 carries chunk k-2 followed by its 8-byte
 *                   checksum. The key answers only once every chunk arrived.
 * A header on a missing key is recognised by trying the image format first
 * (it starts with its own magic), then RedisBloom's.
 *
 * Memory: every link a filter allocates is first approved by maxmemory
 * through the library's may_allocate hook, which also counts the bytes, so
 * a growth past the limit fails with Redis's OOM error and changes nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf.h"
#include "dump.h"
#include "persist.h"
#include "restore.h"
#include "server.h"
#include "util.h"

#define RB_CHUNK_MAX (16u * 1024 * 1024)
#define RB_CHAIN_OVERHEAD 32
#define RB_LINK_OVERHEAD 64

static const char *err_full = "ERR non scaling filter is full";

#define BF_WORDS                                                                        \
    .loading = &bf_loading_type, .not_found = "ERR not found",                           \
    .loading_err = "ERR filter is still being loaded with BF.LOADCHUNK",                 \
    .nomem = "ERR Insufficient memory to create filter", .failed = "ERR could not create filter"

const ck_kind bf_kind = {.types = {&bloom_type, &counting_type}, BF_WORDS};
const ck_kind bf_any_kind = {.types = {&bloom_type, &counting_type, &window_type}, BF_WORDS};

/* ---- creation ---- */

typedef struct bf_params {
    double error;
    long long capacity;
    long long expansion;   /* 0: non-scaling */
    bloomery_layout layout;
    bool counting;
    long long ttl_s;       /* 0: none */
} bf_params;

static void default_params(bf_params *p) {
    p->error = atomic_load_explicit(&cfg.bf_error_rate, memory_order_relaxed);
    p->capacity = atomic_load_explicit(&cfg.bf_initial_size, memory_order_relaxed);
    p->expansion = atomic_load_explicit(&cfg.bf_expansion, memory_order_relaxed);
    p->layout = (bloomery_layout)atomic_load_explicit(&cfg.bf_layout, memory_order_relaxed);
    p->counting = false;
    p->ttl_s = 0;
}

/* A chain's options; its links are reserved through o (NULL: sizing). */
static sbf_options chain_options(const bf_params *p, kv_obj *o) {
    return (sbf_options){
        .layout = p->layout,
        .expansion = (uint32_t)p->expansion,
        .seed = 0,
        .policy = BLOOMERY_POLICY_LATENCY,
        .may_allocate = o ? kv_obj_may_grow : NULL,
        .may_allocate_ctx = o,
    };
}

static int build_filter(kv_obj *o, const void *arg) {
    const bf_params *p = arg;
    int rc;
    if (p->counting) {
        cntbf_t *f;
        rc = cntbf_create(&f, (uint64_t)p->capacity, p->error, NULL);
        if (rc == BLOOMERY_OK) o->v = f;
    } else {
        sbf_options opts = chain_options(p, o);
        sbf_t *f;
        rc = sbf_create(&f, (uint64_t)p->capacity, p->error, &opts);
        if (rc == BLOOMERY_OK) o->v = f;
    }
    return rc;
}

/* The full parameters: a filter created with this server's defaults
 * replays with them whatever the defaults are then. */
static void log_filter(const ks_ref *ref, const kv_entry *e, const void *arg) {
    const bf_params *p = arg;
    wal_create wc = {p->counting ? WAL_KIND_COUNTING : WAL_KIND_SCALABLE,
                     p->counting ? 0 : (uint8_t)p->layout, (uint32_t)p->expansion,
                     (uint64_t)p->capacity, p->error, e->expire_ms};
    wal_log_create(ref->key, ref->klen, &wc);
}

/* A chain grows link by link, each approved by maxmemory through the
 * library's may_allocate hook; a counting filter is allocated once. */
static ck_value filter_value(const bf_params *p) {
    sbf_options opts = chain_options(p, NULL);
    return (ck_value){
        .kind = &bf_kind,
        .type = p->counting ? &counting_type : &bloom_type,
        .bytes = p->counting ? cntbf_bytes_for((uint64_t)p->capacity, p->error, NULL)
                             : sbf_bytes_for((uint64_t)p->capacity, p->error, &opts),
        .grows = !p->counting,
        .build = build_filter,
        .log = log_filter,
        .params = p,
        .ttl_s = p->ttl_s,
    };
}

/* ck_create_fn: the filter for the bf_params arg. */
static kv_entry *create_filter(cmd_ctx *c, ks_ref *ref, const void *arg) {
    ck_value v = filter_value(arg);
    return ck_create(c, ref, &v);
}

/* ---- adding ---- */

/* Reply to n add results: booleans, of which only the last may be an error
 * (the batch calls stop at the first). False when it is one. */
static bool reply_add_results(cmd_ctx *c, const int *res, size_t n) {
    if (n == 0) return true;
    int last = res[n - 1];
    reply_bools(&c->out, res, last >= 0 ? n : n - 1);
    if (last >= 0) return true;
    if (last == BLOOMERY_EFULL) reply_error(&c->out, err_full);
    else ck_reply_nomem(c, last, "ERR problem inserting into filter");
    return false;
}

/* Add items[0..n) to o and reply: an integer/boolean for a single add
 * (multi == false) or an array that ends at the first error. False after
 * an error. */
static bool add_items(cmd_ctx *c, const char *key, size_t klen, kv_obj *o, int64_t now,
                      const char **items, const size_t *lens, size_t n, bool multi) {
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
    if (multi) reply_array(&c->out, (long long)done);
    bool ok = reply_add_results(c, res, done);
    if (res != small) free(res);
    return ok;
}

/* Open key for adding, creating it with p when missing and create is set.
 * Returns the entry with ref locked, or NULL after replying. *now: for a
 * window, the clock its due rotations were checked at, which the add that
 * follows uses. */
static kv_entry *open_for_add(cmd_ctx *c, ks_ref *ref, const bf_params *p, bool create,
                              int64_t *now) {
    kv_entry *e = ck_open_or_create(c, ref, c->argv[1], c->argvlen[1], &bf_any_kind,
                                    create ? create_filter : NULL, p);
    if (e && e->obj->type == &window_type) e = window_open_for_add(c, ref, e, now);
    return e;
}

/* BF.ADD (one item, multi false) and BF.MADD: the items from argv[2]. */
static bool add_command(cmd_ctx *c, bool multi) {
    if (multi ? c->argc < 3 : c->argc != 3) {
        reply_wrong_arity(&c->out, multi ? "bf.madd" : "bf.add");
        return false;
    }
    bf_params p;
    default_params(&p);
    ks_ref ref;
    int64_t now = 0;
    kv_entry *e = open_for_add(c, &ref, &p, true, &now);
    bool ok = e && add_items(c, c->argv[1], c->argvlen[1], e->obj, now, c->argv + 2,
                             c->argvlen + 2, (size_t)c->argc - 2, multi);
    ks_close(&ref);
    return ok;
}

bool bfAddCommand(cmd_ctx *c) { return add_command(c, false); }
bool bfMaddCommand(cmd_ctx *c) { return add_command(c, true); }

size_t bfExistsBatch(cmd_ctx *c, const char *key, size_t klen, const char **items,
                     const size_t *lens, size_t n) {
    ks_ref ref;
    {
        kv_entry *e = ks_open(&ref, key, klen, false);
        kv_obj *o = e ? e->obj : NULL;
        server_count_hits(c, e != NULL, n);
        if (o && o->type == &bloom_type) {
            int res[256];
            for (size_t base = 0; base < n; base += 256) {
                size_t g = n - base < 256 ? n - base : 256;
                sbf_check_many(o->v, (const void *const *)(items + base), lens + base, g, res);
                reply_bools(&c->out, res, g);
            }
        } else if (o && o->type == &window_type) {
            window_check_items(c, o, items, lens, n);
        } else {
            for (size_t i = 0; i < n; i++)
                reply_bool(&c->out, o && o->type == &counting_type && cntbf_check(o->v, items[i], lens[i]));
        }
        ks_close(&ref);
    }
    return 0;
}

size_t bfAddBatch(cmd_ctx *c, const char *key, size_t klen, const char **items,
                  const size_t *lens, size_t n) {
    ks_ref ref;
    bf_params p;
    default_params(&p);
    size_t failed = 0;
    /* Each request opens the key in turn, as separate commands would: an
     * error (wrong type, creation refused) is repeated for each of them. */
    for (size_t i = 0; i < n;) {
        kv_entry *e = ck_open_or_create(c, &ref, key, klen, &bf_any_kind, create_filter, &p);
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
            failed += !add_items(c, key, klen, o, 0, items + i, lens + i, 1, false);
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

/* ---- checking ---- */

static void check_items(cmd_ctx *c, bool multi) {
    size_t n = (size_t)c->argc - 2;
    ks_ref ref;
    kv_entry *e = ks_open(&ref, c->argv[1], c->argvlen[1], false);
    kv_obj *o = e ? e->obj : NULL;
    server_count_hit(c, e != NULL);
    if (multi) reply_array(&c->out, (long long)n);
    if (o && o->type == &bloom_type) {
        int small[256];
        int *res = n <= 256 ? small : malloc(n * sizeof(int));
        if (res) {
            sbf_check_many(o->v, (const void *const *)(c->argv + 2), c->argvlen + 2, n, res);
            reply_bools(&c->out, res, n);
            if (res != small) free(res);
        } else {
            for (size_t i = 0; i < n; i++)
                reply_bool(&c->out, sbf_check(o->v, c->argv[2 + i], c->argvlen[2 + i]) == 1);
        }
    } else if (o && o->type == &counting_type) {
        for (size_t i = 0; i < n; i++)
            reply_bool(&c->out, cntbf_check(o->v, c->argv[2 + i], c->argvlen[2 + i]));
    } else if (o && o->type == &window_type) {
        window_check_items(c, o, c->argv + 2, c->argvlen + 2, n);
    } else {
        /* Missing key, wrong type or still loading: every item is absent. */
        for (size_t i = 0; i < n; i++) reply_bool(&c->out, false);
    }
    ks_close(&ref);
}

bool bfExistsCommand(cmd_ctx *c) {
    if (c->argc != 3) {
        reply_wrong_arity(&c->out, "bf.exists");
        return false;
    }
    check_items(c, false);
    return true;
}

bool bfMexistsCommand(cmd_ctx *c) {
    if (c->argc < 3) {
        reply_wrong_arity(&c->out, "bf.mexists");
        return false;
    }
    check_items(c, true);
    return true;
}

/* ---- BF.RESERVE ---- */

enum { R_ERROR, R_CAPACITY, R_NONSCALING, R_EXPANSION, R_LAYOUT, R_COUNTING, R_TTL, R_N };

static const char *const layouts[] = {"blocked", "classic", NULL};   /* bloomery_layout */
static const char *err_cannot_expand = "Nonscaling filters cannot expand";

/* ctx: the defaults. An expansion of 0 makes the filter non-scaling; any
 * other conflicts with NONSCALING, or with a default of 0. */
static const char *check_expansion(const opt_val *v, const void *ctx) {
    const bf_params *p = ctx;
    bool nonscaling = p->expansion == 0 || v[R_NONSCALING].at;
    return v[R_EXPANSION].n != 0 && nonscaling ? err_cannot_expand : NULL;
}

static const char *check_counting(const opt_val *v, const void *ctx) {
    (void)ctx;
    if (v[R_LAYOUT].at && v[R_LAYOUT].n == BLOOMERY_LAYOUT_CLASSIC)
        return "ERR COUNTING filters use the blocked layout";
    return v[R_EXPANSION].at && v[R_EXPANSION].n != 0 ? err_cannot_expand : NULL;
}

/* RedisBloom finds each option from the key on, checks them in this order
 * and ignores what it does not know. */
static const opt_spec reserve_specs[R_N] = {
    [R_ERROR] = BF_RATE_SPEC,
    [R_CAPACITY] = BF_CAPACITY_SPEC,
    [R_NONSCALING] = {.name = "NONSCALING", .kind = OPT_FLAG},
    [R_EXPANSION] = {.name = "EXPANSION", .kind = OPT_INT, .lo = 0, .hi = SBF_MAX_EXPANSION,
                     .bad = "ERR bad expansion", .missing = "ERR no expansion",
                     .range = "ERR expansion must be in the range [0, 32768]",
                     .check = check_expansion},
    [R_LAYOUT] = {.name = "LAYOUT", .kind = OPT_CHOICE, .choices = layouts,
                  .bad = "ERR LAYOUT must be BLOCKED or CLASSIC",
                  .missing = "ERR LAYOUT must be BLOCKED or CLASSIC"},
    [R_COUNTING] = {.name = "COUNTING", .kind = OPT_FLAG, .check = check_counting},
    [R_TTL] = BF_TTL_SPEC(0, BF_TTL_TEXT),
};
static const opt_table reserve_table = {OPT_SEARCH, 1, reserve_specs, R_N, NULL, NULL, false};

bool bfReserveCommand(cmd_ctx *c) {
    if (c->argc >= 4 && window_requested(c)) return window_reserve(c);   /* t_window.c */
    /* Our options (LAYOUT x, TTL s, COUNTING) do not count against
     * RedisBloom's limit of 7 arguments. */
    int ext = 0;
    for (int i = 4; i < c->argc; i++) {
        if (arg_eq(c, i, "layout") || arg_eq(c, i, "ttl")) ext += 2, i++;
        else if (arg_eq(c, i, "counting")) ext += 1;
    }
    if (c->argc < 4 || c->argc - ext > 7) {
        reply_wrong_arity(&c->out, "bf.reserve");
        return false;
    }
    bf_params p;
    default_params(&p);
    opt_val v[R_N];
    if (!ck_scan(c, "bf.reserve", &reserve_table, v, &p)) return false;
    p.error = v[R_ERROR].d;
    p.capacity = v[R_CAPACITY].n;
    if (v[R_EXPANSION].at) p.expansion = v[R_EXPANSION].n;
    if (v[R_NONSCALING].at) p.expansion = 0;
    if (v[R_LAYOUT].at) p.layout = (bloomery_layout)v[R_LAYOUT].n;
    if (v[R_COUNTING].at) {
        p.counting = true;
        p.expansion = 0;
    }
    if (v[R_TTL].at) p.ttl_s = v[R_TTL].n;
    ck_value fv = filter_value(&p);
    return ck_reserve(c, c->argv[1], c->argvlen[1], &bf_kind, &fv);
}

/* ---- BF.INSERT ---- */

enum { I_ITEMS, I_ERROR, I_EXPANSION, I_CAPACITY, I_NOCREATE, I_NONSCALING, I_LAYOUT, I_TTL, I_N };

/* RedisBloom recognises BF.INSERT's options by their first letters only:
 * ITEMS by I, ERROR by ER, EXPANSION by any other E, CAPACITY by C,
 * NOCREATE by N?C, NONSCALING by any other N; ours by L and T. */
static const opt_spec insert_specs[I_N] = {
    [I_ITEMS] = {.name = "ITEMS", .kind = OPT_ITEMS, .letters = 1},
    [I_ERROR] = {.name = "ERROR", .kind = OPT_RATE, .bad = "Bad error rate", .letters = 3},
    [I_EXPANSION] = {.name = "EXPANSION", .kind = OPT_INT, .lo = 0, .hi = SBF_MAX_EXPANSION,
                     .bad = "Bad expansion", .letters = 1},
    [I_CAPACITY] = {.name = "CAPACITY", .kind = OPT_INT, .lo = 1, .hi = BF_MAX_CAPACITY,
                    .bad = "Bad capacity", .letters = 1},
    [I_NOCREATE] = {.name = "NOCREATE", .kind = OPT_FLAG, .letters = 5},
    [I_NONSCALING] = {.name = "NONSCALING", .kind = OPT_FLAG, .letters = 1},
    [I_LAYOUT] = {.name = "LAYOUT", .kind = OPT_CHOICE, .choices = layouts,
                  .bad = "ERR LAYOUT must be BLOCKED or CLASSIC", .letters = 1},
    [I_TTL] = BF_TTL_SPEC(1, NULL),
};
static const opt_table insert_table = {OPT_SEQUENCE, 2, insert_specs, I_N,
                                       "Unknown argument received", NULL, false};

bool bfInsertCommand(cmd_ctx *c) {
    if (c->argc < 4) {
        reply_wrong_arity(&c->out, "bf.insert");
        return false;
    }
    opt_val v[I_N];
    if (!ck_scan(c, "bf.insert", &insert_table, v, NULL)) return false;
    if (!v[I_ITEMS].at) {
        reply_wrong_arity(&c->out, "bf.insert");
        return false;
    }
    bf_params p;
    default_params(&p);
    if (v[I_ERROR].at) p.error = v[I_ERROR].d;
    if (v[I_EXPANSION].at) p.expansion = v[I_EXPANSION].n;
    if (v[I_CAPACITY].at) p.capacity = v[I_CAPACITY].n;
    if (v[I_NONSCALING].at) p.expansion = 0;
    if (v[I_LAYOUT].at) p.layout = (bloomery_layout)v[I_LAYOUT].n;
    if (v[I_TTL].at) p.ttl_s = v[I_TTL].n;
    int items = v[I_ITEMS].at + 1;
    ks_ref ref;
    int64_t now = 0;
    kv_entry *e = open_for_add(c, &ref, &p, !v[I_NOCREATE].at, &now);
    bool ok = e && add_items(c, c->argv[1], c->argvlen[1], e->obj, now, c->argv + items,
                             c->argvlen + items, (size_t)(c->argc - items), true);
    ks_close(&ref);
    return ok;
}

/* ---- BF.INFO, BF.CARD, BF.DEBUG ---- */

typedef struct bf_stats {
    uint64_t capacity, size, filters, items, bytes;
    long long expansion;   /* -1: nil */
    const char *layout;
    double fpr;
} bf_stats;

static void stats_of(const kv_obj *o, bf_stats *s, bool with_fpr) {
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
        s->layout = sbf_layout(f) == BLOOMERY_LAYOUT_CLASSIC ? "classic" : "blocked";
        s->fpr = with_fpr ? sbf_fpr_estimate(f) : 0;
    }
    s->size = RB_CHAIN_OVERHEAD + RB_LINK_OVERHEAD * s->filters + s->bytes;
}

/* Open a Bloom key for reading; replies "not found" / WRONGTYPE / loading
 * and returns NULL when it is not a usable filter. */
static kv_entry *open_filter(cmd_ctx *c, ks_ref *ref) {
    kv_entry *e;
    return ck_open(c, ref, c->argv[1], c->argvlen[1], &bf_kind, CK_MUST_EXIST, &e) ? e : NULL;
}

bool bfInfoCommand(cmd_ctx *c) {
    if (c->argc < 2 || c->argc > 3) {
        reply_wrong_arity(&c->out, "bf.info");
        return false;
    }
    ks_ref ref;
    kv_entry *e;
    if (!ck_open(c, &ref, c->argv[1], c->argvlen[1], &bf_any_kind, CK_MUST_EXIST, &e)) {
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
    static const char *names[] = {"Capacity", "Size", "Number of filters",
                                  "Number of items inserted", "Expansion rate"};
    long long vals[] = {(long long)s.capacity, (long long)s.size, (long long)s.filters,
                        (long long)s.items, s.expansion};
    if (c->argc == 3 && !all) {
        static const char *fields[] = {"capacity", "size", "filters", "items", "expansion"};
        int f = -1;
        for (int i = 0; i < 5; i++)
            if (arg_eq(c, 2, fields[i])) f = i;
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
        if (vals[f] < 0) reply_null(r);
        else reply_int(r, vals[f]);
        return true;
    }
    reply_map(r, all ? 9 : 5);
    for (int i = 0; i < 5; i++) {
        reply_simple(r, names[i]);
        if (vals[i] < 0) reply_null(r);
        else reply_int(r, vals[i]);
    }
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

bool bfCardCommand(cmd_ctx *c) {
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
    } else if (!ck_is(&bf_kind, e->obj)) {
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

bool bfDebugCommand(cmd_ctx *c) {
    if (c->argc != 2) {
        reply_wrong_arity(&c->out, "bf.debug");
        return false;
    }
    ks_ref ref;
    kv_entry *e = open_filter(c, &ref);
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
        reply_simple(r, line);
        snprintf(line, sizeof(line), "bytes:%llu blocks:%llu blocks_per_key:%u capacity:%llu ratio:%g",
                 (unsigned long long)cntbf_bytes(o->v), (unsigned long long)cntbf_nblocks(o->v),
                 cntbf_blocks_per_key(o->v), (unsigned long long)cntbf_capacity(o->v),
                 cntbf_error_rate(o->v));
        reply_simple(r, line);
        ks_close(&ref);
        return true;
    }
    size_t n = sbf_nlinks(o->v);
    reply_array(r, (long long)n + 1);
    snprintf(line, sizeof(line), "size:%llu", (unsigned long long)sbf_count(o->v));
    reply_simple(r, line);
    for (size_t i = 0; i < n; i++) {
        const cbf_t *cl = sbf_link_classic(o->v, i);
        const bf_t *bl = sbf_link_blocked(o->v, i);
        if (cl)
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
        reply_simple(r, line);
    }
    ks_close(&ref);
    return true;
}

/* ---- BF.DEL (counting filters) ---- */

bool bfDelCommand(cmd_ctx *c) {
    ks_ref ref;
    kv_entry *e = open_filter(c, &ref);
    bool ok = e && e->obj->type == &counting_type;
    if (e) {
        if (!ok)
            reply_error(&c->out, "ERR BF.DEL needs a counting filter (BF.RESERVE ... COUNTING)");
        else {
            kv_obj *o = e->obj;
            pthread_mutex_lock(&o->lock);
            bool deleted = cntbf_delete(o->v, c->argv[2], c->argvlen[2]);
            if (deleted)
                wal_log_counting(WAL_CNT_DEL, c->argv[1], c->argvlen[1], o->v, c->argv + 2,
                                 c->argvlen + 2, 1, NULL);
            pthread_mutex_unlock(&o->lock);
            reply_bool(&c->out, deleted);
        }
    }
    ks_close(&ref);
    return ok;
}

/* ---- BF.MERGE ---- */

static const char *err_merge_shape =
    "ERR filters must have the same layout, capacity, error rate, expansion and number of filters";

bool bfMergeCommand(cmd_ctx *c) {
    size_t n = (size_t)c->argc - 1;
    ks_multi m;
    ks_lock_many(&m, c->argv + 1, c->argvlen + 1, n, true);
    bool created;
    value_status st = bloom_merge(c->argv + 1, c->argvlen + 1, n, &created);
    switch (st) {
    case VS_OK:
        wal_log_merge(WAL_BF_MERGE, created, c->argv + 1, c->argvlen + 1, n);
        reply_ok(&c->out);
        break;
    case VS_MISMATCH: reply_error(&c->out, err_merge_shape); break;
    case VS_NOMEM: reply_error(&c->out, bf_kind.nomem); break;
    default: ck_reply_status(c, &bf_kind, st); break;
    }
    ks_unlock_many(&m);
    return st == VS_OK;
}

/* ---- BF.SCANDUMP ---- */

static bool scandump_classic(cmd_ctx *c, const sbf_t *f, long long iter) {
    reply *r = &c->out;
    size_t n = sbf_nlinks(f);
    if (iter == 0) {
        cbf_rb_link links_small[8];
        cbf_rb_link *links = n <= 8 ? links_small : malloc(n * sizeof(*links));
        uint8_t *buf = malloc(cbf_rb_header_size((uint32_t)n));
        if (links == NULL || buf == NULL) {
            if (links != links_small) free(links);
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
        if (links != links_small) free(links);
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
    if (len > RB_CHUNK_MAX) len = RB_CHUNK_MAX;
    reply_int(r, iter + (long long)len);
    reply_bulk(r, cbf_data(l) + off, len);
    return true;
}

static bool scandump_image(cmd_ctx *c, kv_obj *o, long long iter) {
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

bool bfScandumpCommand(cmd_ctx *c) {
    if (c->argc != 3) {
        reply_wrong_arity(&c->out, "bf.scandump");
        return false;
    }
    ks_ref ref;
    kv_entry *e = open_filter(c, &ref);
    if (e == NULL) {
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

bool bfLoadchunkCommand(cmd_ctx *c) {
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
    const char *detail;
    value_status st = restore_bf_chunk(&ref, e, iter, data, len, &detail);
    switch (st) {
    case VS_OK:
        /* Replay restores the chunk again on the replayed state. */
        wal_log_loadchunk(c->argv[1], c->argvlen[1], iter, data, len);
        reply_ok(&c->out);
        break;
    case VS_NOT_FOUND:
    case VS_WRONGTYPE:
    case VS_OOM: ck_reply_status(c, &bf_kind, st); break;
    case VS_BAD_OFFSET: reply_error(&c->out, "ERR invalid offset - no link found"); break;
    case VS_TOO_BIG:
        reply_error(&c->out, "ERR invalid chunk - Too big for current filter");
        break;
    default:
        if (detail) reply_errorf(&c->out, "ERR received bad data: %s", detail);
        else reply_error(&c->out, "ERR received bad data");
        break;
    }
    ks_close(&ref);
    return st == VS_OK;
}

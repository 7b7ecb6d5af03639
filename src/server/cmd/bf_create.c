/* Creating Bloom filters: the parameters (this server's bf-* defaults,
 * or a command's options), BF.RESERVE and BF.INSERT with RedisBloom's
 * option tables, and the one creation path they and the adds' automatic
 * creation take (cmdkit.h's ck_create).
 *
 * Memory: a capacity has no cap but memory. A new filter's size is checked
 * against maxmemory (else the machine's memory) before anything is
 * allocated; a counting filter is reserved whole at its creation; a chain's
 * every link, the first included, is approved through the library's
 * may_allocate hook, which also counts its bytes, so a growth past the
 * limit fails with Redis's OOM error and changes nothing.
 */
#include "bf.h"
#include "persist.h"
#include "cmd.h"
#include "config.h"
#include "log.h"

#define BF_WORDS                                                                                   \
    .loading = &bf_loading_type, .not_found = "ERR not found",                                     \
    .loading_err = "ERR filter is still being loaded with BF.LOADCHUNK",                           \
    .nomem = "ERR Insufficient memory to create filter", .failed = "ERR could not create filter"

const ck_kind bfc_kind = {.types = {&bloom_type, &counting_type}, BF_WORDS};
const ck_kind bfc_any_kind = {.types = {&bloom_type, &counting_type, &window_type}, BF_WORDS};

/* ---- parameters and creation ---- */

void bfc_default_params(bfc_params *p)
{
    p->error = atomic_load_explicit(&cfg.bf_error_rate, memory_order_relaxed);
    p->capacity = atomic_load_explicit(&cfg.bf_initial_size, memory_order_relaxed);
    p->expansion = atomic_load_explicit(&cfg.bf_expansion, memory_order_relaxed);
    p->layout = (bloomery_layout)cfg_default_layout(false);
    p->named_layout = (bloomery_layout)cfg_default_layout(true);
    p->layout_named = false;
    p->counting = false;
    p->ttl_s = 0;
    p->schedule = SBF_SCHEDULE_HALVES;
}

void bfc_capacity_named(bfc_params *p)
{
    p->schedule = SBF_SCHEDULE_FIRST_SHARE;
    p->layout = p->named_layout;
}

/* The growing layout's fingerprints reach rates down to about 8e-6: below,
 * a filter that did not name it takes the blocked layout. */
static bloomery_layout layout_of(const bfc_params *p)
{
    if (p->layout == BLOOMERY_LAYOUT_GROWING && !p->layout_named && gf_bytes_for(1, p->error) == 0)
        return BLOOMERY_LAYOUT_BLOCKED;
    return p->layout;
}

/* A chain's options; its links are reserved through o (NULL: sizing). */
static sbf_options chain_options(const bfc_params *p, kv_obj *o)
{
    return (sbf_options){
        .layout = layout_of(p),
        .expansion = (uint32_t)p->expansion,
        .seed = 0,
        .policy = BLOOMERY_POLICY_LATENCY,
        .may_allocate = o ? kv_obj_may_grow : NULL,
        .may_allocate_ctx = o,
        .schedule = p->schedule,
    };
}

static int build_filter(kv_obj *o, const void *arg)
{
    const bfc_params *p = arg;
    int rc;
    if (p->counting) {
        cntbf_t *f;
        rc = cntbf_create(&f, (uint64_t)p->capacity, p->error, NULL);
        if (rc == BLOOMERY_OK)
            o->v = f;
    } else {
        sbf_options opts = chain_options(p, o);
        sbf_t *f;
        rc = sbf_create(&f, (uint64_t)p->capacity, p->error, &opts);
        if (rc == BLOOMERY_OK) {
            sbf_set_released(f, kv_obj_released, o);
            o->v = f;
        }
    }
    return rc;
}

/* The full parameters: a filter created with this server's defaults
 * replays with them whatever the defaults are then. */
static void log_filter(const ks_ref *ref, const kv_entry *e, const void *arg)
{
    const bfc_params *p = arg;
    wal_create wc = {p->counting                          ? WAL_KIND_COUNTING
                     : p->schedule == SBF_SCHEDULE_HALVES ? WAL_KIND_SCALABLE
                                                          : WAL_KIND_SCALABLE_SHARE,
                     p->counting ? 0 : (uint8_t)layout_of(p),
                     (uint32_t)p->expansion,
                     (uint64_t)p->capacity,
                     p->error,
                     e->expire_ms};
    wal_log_create(ref->key, ref->klen, &wc);
}

/* The parameters are valid (the options' checks, or the defaults): a size
 * of 0 is one beyond 64 bits, refused as memory. */
static ck_value filter_value(const bfc_params *p)
{
    sbf_options opts = chain_options(p, NULL);
    uint64_t bytes = p->counting ? cntbf_bytes_for((uint64_t)p->capacity, p->error, NULL)
                                 : sbf_bytes_for((uint64_t)p->capacity, p->error, &opts);
    return (ck_value){
        .kind = &bfc_kind,
        .type = p->counting ? &counting_type : &bloom_type,
        .bytes = bytes ? bytes : CK_BYTES_TOO_BIG,
        .grows = !p->counting,
        .build = build_filter,
        .log = log_filter,
        .params = p,
        .ttl_s = p->ttl_s,
        .refused = layout_of(p) == BLOOMERY_LAYOUT_GROWING && gf_bytes_for(1, p->error) == 0
                       ? "ERR error rate too small for LAYOUT GROWING"
                       : NULL,
    };
}

kv_entry *bfc_create(cmd_ctx *c, ks_ref *ref, const void *arg)
{
    ck_value v = filter_value(arg);
    return ck_create(c, ref, &v);
}

/* ---- BF.RESERVE ---- */

enum { R_ERROR, R_CAPACITY, R_NONSCALING, R_EXPANSION, R_LAYOUT, R_COUNTING, R_TTL, R_N };

#define LAYOUT_TEXT "ERR LAYOUT must be BLOCKED, CLASSIC, PREFIX or GROWING"

static const char *err_cannot_expand = "Nonscaling filters cannot expand";

/* ctx: the defaults. An expansion of 0 makes the filter non-scaling; any
 * other conflicts with NONSCALING, or with a default of 0. */
static const char *check_expansion(const opt_val *v, const void *ctx)
{
    const bfc_params *p = ctx;
    bool nonscaling = p->expansion == 0 || v[R_NONSCALING].at;
    return v[R_EXPANSION].n != 0 && nonscaling ? err_cannot_expand : NULL;
}

static const char *check_counting(const opt_val *v, const void *ctx)
{
    (void)ctx;
    if (v[R_LAYOUT].at && v[R_LAYOUT].n != BLOOMERY_LAYOUT_BLOCKED)
        return "ERR COUNTING filters use the blocked layout";
    return v[R_EXPANSION].at && v[R_EXPANSION].n != 0 ? err_cannot_expand : NULL;
}

/* RedisBloom finds each option from the key on, checks them in this order
 * and ignores what it does not know. */
static const opt_spec reserve_specs[R_N] = {
    [R_ERROR] = BF_RATE_SPEC,
    [R_CAPACITY] = BF_CAPACITY_SPEC,
    [R_NONSCALING] = {.name = "NONSCALING", .kind = OPT_FLAG},
    [R_EXPANSION] = {.name = "EXPANSION",
                     .kind = OPT_INT,
                     .lo = 0,
                     .hi = SBF_MAX_EXPANSION,
                     .bad = "ERR bad expansion",
                     .missing = "ERR no expansion",
                     .range = "ERR expansion must be in the range [0, 32768]",
                     .check = check_expansion},
    [R_LAYOUT] = {.name = "LAYOUT",
                  .kind = OPT_CHOICE,
                  .choices = cfg_layout_names,
                  .bad = LAYOUT_TEXT,
                  .missing = LAYOUT_TEXT},
    [R_COUNTING] = {.name = "COUNTING", .kind = OPT_FLAG, .check = check_counting},
    [R_TTL] = BF_TTL_SPEC(0, BF_TTL_TEXT),
};
static const opt_table reserve_table = {OPT_SEARCH, 1, reserve_specs, R_N, NULL, NULL, false, NULL};

bool bfReserveCommand(cmd_ctx *c)
{
    if (c->argc >= 4 && window_requested(c))
        return window_reserve(c); /* t_window.c */
    /* Our options (LAYOUT x, TTL s, COUNTING) do not count against
     * RedisBloom's limit of 7 arguments. */
    int ext = 0;
    for (int i = 4; i < c->argc; i++) {
        if (arg_eq(c, i, "layout") || arg_eq(c, i, "ttl"))
            ext += 2, i++;
        else if (arg_eq(c, i, "counting"))
            ext += 1;
    }
    if (c->argc < 4 || c->argc - ext > 7) {
        reply_wrong_arity(&c->out, "bf.reserve");
        return false;
    }
    bfc_params p;
    bfc_default_params(&p);
    opt_val v[R_N];
    if (!ck_scan(c, "bf.reserve", &reserve_table, v, &p))
        return false;
    p.error = v[R_ERROR].d;
    p.capacity = v[R_CAPACITY].n;
    bfc_capacity_named(&p);
    if (v[R_EXPANSION].at)
        p.expansion = v[R_EXPANSION].n;
    if (v[R_NONSCALING].at)
        p.expansion = 0;
    if (v[R_LAYOUT].at) {
        p.layout = (bloomery_layout)v[R_LAYOUT].n;
        p.layout_named = true;
    }
    if (v[R_COUNTING].at) {
        p.counting = true;
        p.expansion = 0;
    }
    if (v[R_TTL].at)
        p.ttl_s = v[R_TTL].n;
    ck_value fv = filter_value(&p);
    return ck_reserve(c, c->argv[1], c->argvlen[1], &bfc_kind, &fv);
}

/* ---- BF.INSERT: creation options, then an add ---- */

enum {
    I_ITEMS,
    I_ERROR,
    I_EXPANSION,
    I_CAPACITY,
    I_NOCREATE,
    I_NONSCALING,
    I_LAYOUT,
    I_TTL,
    I_AT,
    I_N
};

/* RedisBloom recognises BF.INSERT's options by their first letters only:
 * ITEMS by I, ERROR by ER, EXPANSION by any other E, CAPACITY by C,
 * NOCREATE by N?C, NONSCALING by any other N; ours by L and T. */
static const opt_spec insert_specs[I_N] = {
    [I_ITEMS] = {.name = "ITEMS", .kind = OPT_ITEMS, .letters = 1},
    [I_ERROR] =
        {.name = "ERROR", .kind = OPT_RATE, .bad = "Bad error rate", .letters = 3, .late = true},
    [I_EXPANSION] = {.name = "EXPANSION",
                     .kind = OPT_INT,
                     .lo = 1,
                     .hi = SBF_MAX_EXPANSION,
                     .bad = "Bad expansion",
                     .letters = 1,
                     .late = true},
    [I_CAPACITY] = {.name = "CAPACITY",
                    .kind = OPT_INT,
                    .lo = 1,
                    .hi = BF_MAX_CAPACITY,
                    .bad = "Bad capacity",
                    .letters = 1,
                    .late = true},
    [I_NOCREATE] = {.name = "NOCREATE", .kind = OPT_FLAG, .letters = 5},
    [I_NONSCALING] = {.name = "NONSCALING", .kind = OPT_FLAG, .letters = 1},
    [I_LAYOUT] = {.name = "LAYOUT",
                  .kind = OPT_CHOICE,
                  .choices = cfg_layout_names,
                  .bad = LAYOUT_TEXT,
                  .letters = 1},
    [I_TTL] = BF_TTL_SPEC(1, NULL),
    /* Exact filters: the items' time (Unix ms), bf_exact.c. */
    [I_AT] = {.name = "AT",
              .kind = OPT_INT,
              .lo = 0,
              .hi = LLONG_MAX,
              .bad = "ERR AT must be a time in Unix milliseconds"},
};
/* RedisBloom 2.4 parses every option before it checks their ranges, and
 * answers any out of range (a capacity below 1, an error rate outside
 * (0, 1), an expansion below 1) the same way, whether or not the key
 * exists. */
static const opt_table insert_table = {.mode = OPT_SEQUENCE,
                                       .from = 2,
                                       .specs = insert_specs,
                                       .n = I_N,
                                       .unknown = "Unknown argument received",
                                       .late_range = "Bad argument received"};

bool bfInsertCommand(cmd_ctx *c)
{
    if (c->argc < 4) {
        reply_wrong_arity(&c->out, "bf.insert");
        return false;
    }
    opt_val v[I_N];
    if (!ck_scan(c, "bf.insert", &insert_table, v, NULL))
        return false;
    if (!v[I_ITEMS].at) {
        reply_wrong_arity(&c->out, "bf.insert");
        return false;
    }
    bfc_params p;
    bfc_default_params(&p);
    if (v[I_ERROR].at)
        p.error = v[I_ERROR].d;
    if (v[I_EXPANSION].at)
        p.expansion = v[I_EXPANSION].n;
    if (v[I_CAPACITY].at) {
        p.capacity = v[I_CAPACITY].n;
        bfc_capacity_named(&p);
    }
    if (v[I_NONSCALING].at)
        p.expansion = 0;
    if (v[I_LAYOUT].at) {
        p.layout = (bloomery_layout)v[I_LAYOUT].n;
        p.layout_named = true;
    }
    if (v[I_TTL].at)
        p.ttl_s = v[I_TTL].n;
    int items = v[I_ITEMS].at + 1;
    ks_ref ref;
    int64_t now = 0;
    /* AT never creates: only BF.RESERVE makes an exact filter. */
    if (v[I_AT].at) {
        kv_entry *x = ks_open(&ref, c->argv[1], c->argvlen[1], false);
        bool missing = x == NULL;
        ks_close(&ref);
        if (missing) {
            reply_error(&c->out, "ERR AT applies to EXACT filters only");
            return false;
        }
    }
    kv_entry *e = bfc_open_for_add(c, &ref, &p, !v[I_NOCREATE].at && !v[I_AT].at, &now);
    bool ok;
    if (e && v[I_AT].at && !e->obj->exact) {
        reply_error(&c->out, "ERR AT applies to EXACT filters only");
        ok = false;
    } else if (e && v[I_AT].at) {
        ok = bfc_exact_add(c, c->argv[1], c->argvlen[1], e->obj, true, v[I_AT].n, c->argv + items,
                           c->argvlen + items, (size_t)(c->argc - items), true);
    } else {
        ok = e && bfc_add_items(c, c->argv[1], c->argvlen[1], e->obj, now, c->argv + items,
                                c->argvlen + items, (size_t)(c->argc - items), true);
    }
    ks_close(&ref);
    return ok;
}

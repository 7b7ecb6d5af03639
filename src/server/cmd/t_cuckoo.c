/* CF.* commands over libbloomery's cuckoo filter (cuckoo.h), with
 * RedisBloom's syntax, defaults, replies and errors (docs/COMMANDS.md),
 * plus our FINGERPRINT option on CF.RESERVE.
 *
 * Locking: inserts kick fingerprints between buckets and deletes compact,
 * so every call, reads included, holds the object's mutex (the stripe is
 * only read-locked, as for HLLs). Each change is logged under that mutex,
 * so the log has a key's changes in the order they were applied.
 *
 * cf-max-expansions is server configuration, applied to the filter before
 * every add. As in RedisBloom the limit is checked once per command: a
 * multi-item CF.INSERT at the limit fails as a whole, one below it may grow
 * past it while adding its items.
 *
 * Dumps (CF.SCANDUMP) are serial.h images, not RedisBloom's bytes:
 * iterator 1 carries the image header, iterator k >= 2 chunk k-2 followed
 * by its 8-byte checksum, as for blocked Bloom filters. CF.LOADCHUNK takes
 * those and RedisBloom's (its 38-byte header, then raw bytes at an offset:
 * restore.c, rb_rdb.h).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "cmd.h"
#include "cmdkit.h"
#include "config.h"
#include "log.h"
#include "persist.h"
#include "restore.h"
#include "util.h"

static const ck_kind cf_kind = {
    .types = {&cuckoo_type},
    .loading = &cf_loading_type,
    .not_found = "ERR not found",
    .loading_err = "ERR filter is still being loaded with CF.LOADCHUNK",
    .nomem = "ERR Insufficient memory",
    .failed = "Couldn't create Cuckoo Filter",
};

static unsigned max_filters(void)
{
    return (unsigned)atomic_load_explicit(&cfg.cf_max_expansions, memory_order_relaxed);
}

/* ---- creation ---- */

typedef struct cf_params {
    uint64_t capacity;
    cf_options opts;
} cf_params;

static int build_cf(kv_obj *o, const void *arg)
{
    const cf_params *p = arg;
    cf_options opts = p->opts;
    opts.may_allocate = kv_obj_may_grow;
    opts.may_allocate_ctx = o;
    cf_t *f;
    int rc = cf_create(&f, p->capacity, &opts);
    if (rc == BLOOMERY_OK)
        o->v = f;
    return rc;
}

static void log_cf(const ks_ref *ref, const kv_entry *e, const void *arg)
{
    (void)e;
    const cf_params *p = arg;
    wal_cuckoo wc = {p->capacity, p->opts.bucket_size, p->opts.max_iterations, p->opts.expansion,
                     p->opts.fingerprint_bits};
    wal_log_cf_create(ref->key, ref->klen, &wc);
}

/* A cuckoo filter grows sub-filter by sub-filter, each approved by
 * maxmemory through the library's may_allocate hook. A capacity has no cap
 * but memory: one past the library's CF_MAX_CAPACITY (a table far beyond
 * any machine's memory) is refused as memory. */
static ck_value cf_value(const cf_params *p)
{
    return (ck_value){
        .kind = &cf_kind,
        .type = &cuckoo_type,
        .bytes =
            p->capacity > CF_MAX_CAPACITY ? CK_BYTES_TOO_BIG : cf_bytes_for(p->capacity, &p->opts),
        .grows = true,
        .build = build_cf,
        .log = log_cf,
        .params = p,
    };
}

/* ck_create_fn: a filter of the capacity *arg with the defaults. */
static kv_entry *create_default(cmd_ctx *c, ks_ref *ref, const void *arg)
{
    cf_params p = {*(const uint64_t *)arg, {0}};
    cf_options_init(&p.opts);
    p.opts.max_filters = max_filters();
    ck_value v = cf_value(&p);
    return ck_create(c, ref, &v);
}

/* Open key for a change, creating it with capacity when missing and
 * create is set; returns the entry (ref locked) or NULL after replying. */
static kv_entry *open_for_add(cmd_ctx *c, ks_ref *ref, bool create, uint64_t capacity)
{
    return ck_open_or_create(c, ref, c->argv[1], c->argvlen[1], &cf_kind,
                             create ? create_default : NULL, &capacity);
}

/* Open key for reading: true with *e the entry or NULL when missing;
 * false after replying (WRONGTYPE, loading, or not found when must). */
static bool open_read(cmd_ctx *c, ks_ref *ref, bool must, kv_entry **e)
{
    return ck_open(c, ref, c->argv[1], c->argvlen[1], &cf_kind,
                   CK_COUNT_HIT | (must ? CK_MUST_EXIST : 0), e);
}

static void reply_add_error(cmd_ctx *c, int rc)
{
    if (rc == BLOOMERY_ETOOBIG)
        reply_error(&c->out, "Maximum expansions reached");
    else if (rc == BLOOMERY_EFULL)
        reply_error(&c->out, "Filter is full");
    else
        ck_reply_nomem(c, rc, cf_kind.nomem);
}

/* ---- CF.RESERVE ---- */

enum { C_CAPACITY, C_MAXITERATIONS, C_BUCKETSIZE, C_EXPANSION, C_FINGERPRINT, C_N };

#define CF_OPT(name_, lo_, hi_)                                                                    \
    {                                                                                              \
        .name = name_, .kind = OPT_INT, .lo = lo_, .hi = hi_, .bad = "Couldn't parse %s",          \
        .missing = "Couldn't parse %s", .range = "%s: value must be in the range [%lld, %lld]"     \
    }

static const char *check_capacity(const opt_val *v, const void *ctx)
{
    (void)ctx;
    long long bucket = v[C_BUCKETSIZE].at ? v[C_BUCKETSIZE].n : CF_DEFAULT_BUCKET_SIZE;
    /* RedisBloom's words, though the only upper bound is memory. */
    if (v[C_CAPACITY].n < 2 * bucket)
        return "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]";
    return NULL;
}

/* RedisBloom's order of checks, then ours (FINGERPRINT), then the
 * capacity against the bucket size; every argument must be an option. */
static const opt_spec reserve_specs[C_N] = {
    [C_CAPACITY] = {.name = "capacity",
                    .kind = OPT_INT,
                    .pos = 2,
                    .lo = LLONG_MIN,
                    .hi = LLONG_MAX,
                    .bad = "Bad capacity"},
    [C_MAXITERATIONS] = CF_OPT("MAXITERATIONS", 1, CF_MAX_MAX_ITERATIONS),
    [C_BUCKETSIZE] = CF_OPT("BUCKETSIZE", 1, CF_MAX_BUCKET_SIZE),
    [C_EXPANSION] = CF_OPT("EXPANSION", 0, CF_MAX_EXPANSION),
    [C_FINGERPRINT] = CF_OPT("FINGERPRINT", CF_MIN_FINGERPRINT_BITS, CF_MAX_FINGERPRINT_BITS),
};
static const opt_table reserve_table = {OPT_SEARCH,     3,    reserve_specs, C_N, NULL,
                                        check_capacity, true, NULL};

bool cfReserveCommand(cmd_ctx *c)
{
    if (c->argc < 3 || c->argc % 2 == 0) {
        reply_wrong_arity(&c->out, "cf.reserve");
        return false;
    }
    opt_val v[C_N];
    if (!ck_scan(c, "cf.reserve", &reserve_table, v, NULL))
        return false;
    cf_params p = {(uint64_t)v[C_CAPACITY].n, {0}};
    cf_options_init(&p.opts);
    if (v[C_MAXITERATIONS].at)
        p.opts.max_iterations = (unsigned)v[C_MAXITERATIONS].n;
    if (v[C_BUCKETSIZE].at)
        p.opts.bucket_size = (unsigned)v[C_BUCKETSIZE].n;
    if (v[C_EXPANSION].at)
        p.opts.expansion = (unsigned)v[C_EXPANSION].n;
    if (v[C_FINGERPRINT].at)
        p.opts.fingerprint_bits = (unsigned)v[C_FINGERPRINT].n;
    p.opts.max_filters = max_filters();
    ck_value cv = cf_value(&p);
    return ck_reserve(c, c->argv[1], c->argvlen[1], NULL, &cv);
}

/* ---- CF.ADD, CF.ADDNX ---- */

static bool add_one(cmd_ctx *c, bool nx)
{
    if (c->argc != 3) {
        reply_wrong_arity(&c->out, nx ? "cf.addnx" : "cf.add");
        return false;
    }
    ks_ref ref;
    kv_entry *e = open_for_add(c, &ref, true, CF_DEFAULT_CAPACITY);
    bool ok = e != NULL;
    if (e) {
        kv_obj *o = e->obj;
        pthread_mutex_lock(&o->lock);
        unsigned limit = max_filters();
        cf_set_max_filters(o->v, limit);
        uint64_t h = cf_hash(c->argv[2], c->argvlen[2]);
        int rc = nx ? cf_add_nx_hashed(o->v, h) : cf_add_hashed(o->v, h);
        if (rc == 1) {
            wal_log_cf_op(c->argv[1], c->argvlen[1], WAL_CF_ADD, limit, &h, 1);
            cf_value_sync(o);
        }
        pthread_mutex_unlock(&o->lock);
        if (rc < 0)
            reply_add_error(c, rc);
        else
            reply_bool(&c->out, rc == 1);
        ok = rc >= 0;
    }
    ks_close(&ref);
    return ok;
}

bool cfAddCommand(cmd_ctx *c) { return add_one(c, false); }
bool cfAddnxCommand(cmd_ctx *c) { return add_one(c, true); }

/* ---- CF.INSERT, CF.INSERTNX ---- */

enum { N_CAPACITY, N_NOCREATE, N_ITEMS, N_N };

static const opt_spec insert_specs[N_N] = {
    [N_CAPACITY] = {.name = "CAPACITY",
                    .kind = OPT_INT,
                    .lo = 2 * CF_DEFAULT_BUCKET_SIZE,
                    .hi = LLONG_MAX,
                    .bad = "Bad capacity",
                    .range = "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]"},
    [N_NOCREATE] = {.name = "NOCREATE", .kind = OPT_FLAG},
    [N_ITEMS] = {.name = "ITEMS", .kind = OPT_ITEMS},
};
static const opt_table insert_table = {
    OPT_SEQUENCE, 2, insert_specs, N_N, "Unknown argument received", NULL, false, NULL};

static bool insert(cmd_ctx *c, bool nx)
{
    const char *name = nx ? "cf.insertnx" : "cf.insert";
    if (c->argc < 4) {
        reply_wrong_arity(&c->out, name);
        return false;
    }
    opt_val v[N_N];
    if (!ck_scan(c, name, &insert_table, v, NULL))
        return false;
    if (!v[N_ITEMS].at) {
        reply_wrong_arity(&c->out, name);
        return false;
    }
    long long capacity = v[N_CAPACITY].at ? v[N_CAPACITY].n : CF_DEFAULT_CAPACITY;
    bool create = !v[N_NOCREATE].at;
    int items = v[N_ITEMS].at + 1;
    ks_ref ref;
    kv_entry *e = open_for_add(c, &ref, create, (uint64_t)capacity);
    if (e == NULL) {
        ks_close(&ref);
        return false;
    }
    kv_obj *o = e->obj;
    size_t n = (size_t)(c->argc - items);
    uint64_t small[64];
    uint64_t *added = n <= 64 ? small : malloc(n * sizeof(uint64_t));
    if (added == NULL) {
        ks_close(&ref);
        reply_oom(c);
        return false;
    }
    pthread_mutex_lock(&o->lock);
    unsigned limit = max_filters();
    if (cf_nfilters(o->v) >= limit) {
        pthread_mutex_unlock(&o->lock);
        ks_close(&ref);
        if (added != small)
            free(added);
        reply_error(&c->out, "Maximum expansions reached");
        return false;
    }
    /* Checked once for the command: its items may grow the filter past it. */
    cf_set_max_filters(o->v, CF_MAX_MAX_FILTERS);
    reply *r = &c->out;
    reply_array(r, (long long)n);
    size_t k = 0;
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        uint64_t h = cf_hash(c->argv[items + (int)i], c->argvlen[items + (int)i]);
        int rc = nx ? cf_add_nx_hashed(o->v, h) : cf_add_hashed(o->v, h);
        if (rc == 1)
            added[k++] = h;
        if (rc == BLOOMERY_ENOMEM || rc == BLOOMERY_EREFUSED) {
            ck_reply_nomem(c, rc, cf_kind.nomem);
            ok = false;
        } else if (nx)
            reply_int(r, rc < 0 ? -1 : rc);
        else if (r->proto == 3)
            reply_bool(r, rc == 1);
        else
            reply_int(r, rc < 0 ? -1 : 1);
    }
    cf_set_max_filters(o->v, limit);
    wal_log_cf_op(c->argv[1], c->argvlen[1], WAL_CF_ADD, CF_MAX_MAX_FILTERS, added, k);
    cf_value_sync(o);
    pthread_mutex_unlock(&o->lock);
    ks_close(&ref);
    if (added != small)
        free(added);
    return ok;
}

bool cfInsertCommand(cmd_ctx *c) { return insert(c, false); }
bool cfInsertnxCommand(cmd_ctx *c) { return insert(c, true); }

/* ---- CF.EXISTS, CF.MEXISTS, CF.COUNT ---- */

static bool check(cmd_ctx *c, bool multi)
{
    size_t n = (size_t)c->argc - 2;
    ks_ref ref;
    kv_entry *e;
    bool ok = open_read(c, &ref, false, &e);
    if (ok) {
        if (multi)
            reply_array(&c->out, (long long)n);
        if (e)
            pthread_mutex_lock(&e->obj->lock);
        for (size_t i = 0; i < n; i++)
            reply_bool(&c->out, e && cf_exists(e->obj->v, c->argv[2 + i], c->argvlen[2 + i]));
        if (e)
            pthread_mutex_unlock(&e->obj->lock);
    }
    ks_close(&ref);
    return ok;
}

bool cfExistsCommand(cmd_ctx *c)
{
    if (c->argc != 3) {
        reply_wrong_arity(&c->out, "cf.exists");
        return false;
    }
    return check(c, false);
}

bool cfMexistsCommand(cmd_ctx *c)
{
    if (c->argc < 3) {
        reply_wrong_arity(&c->out, "cf.mexists");
        return false;
    }
    return check(c, true);
}

bool cfCountCommand(cmd_ctx *c)
{
    if (c->argc != 3) {
        reply_wrong_arity(&c->out, "cf.count");
        return false;
    }
    ks_ref ref;
    kv_entry *e;
    bool ok = open_read(c, &ref, false, &e);
    if (ok) {
        uint64_t n = 0;
        if (e) {
            pthread_mutex_lock(&e->obj->lock);
            n = cf_count(e->obj->v, c->argv[2], c->argvlen[2]);
            pthread_mutex_unlock(&e->obj->lock);
        }
        reply_int(&c->out, (long long)n);
    }
    ks_close(&ref);
    return ok;
}

/* ---- CF.DEL ---- */

bool cfDelCommand(cmd_ctx *c)
{
    if (c->argc != 3) {
        reply_wrong_arity(&c->out, "cf.del");
        return false;
    }
    ks_ref ref;
    kv_entry *e;
    bool ok = ck_open(c, &ref, c->argv[1], c->argvlen[1], &cf_kind, CK_COUNT_HIT | CK_CHANGE, &e);
    if (ok && e == NULL) {
        reply_error(&c->out, "Not found"); /* RedisBloom's, no ERR */
        ok = false;
    }
    if (e) {
        kv_obj *o = e->obj;
        pthread_mutex_lock(&o->lock);
        uint64_t h = cf_hash(c->argv[2], c->argvlen[2]);
        bool deleted = cf_delete_hashed(o->v, h);
        if (deleted) {
            wal_log_cf_op(c->argv[1], c->argvlen[1], WAL_CF_DEL, cf_max_filters(o->v), &h, 1);
            cf_value_sync(o);
        }
        pthread_mutex_unlock(&o->lock);
        reply_bool(&c->out, deleted);
    }
    ks_close(&ref);
    return ok;
}

/* ---- CF.INFO ---- */

bool cfInfoCommand(cmd_ctx *c)
{
    if (c->argc != 2 && !(c->argc == 3 && arg_eq(c, 2, "all"))) {
        reply_wrong_arity(&c->out, "cf.info");
        return false;
    }
    ks_ref ref;
    kv_entry *e;
    if (!open_read(c, &ref, true, &e)) {
        ks_close(&ref);
        return false;
    }
    const cf_t *f = e->obj->v;
    pthread_mutex_lock(&e->obj->lock);
    long long v[] = {(long long)cf_info_size(f),        (long long)cf_nbuckets(f),
                     (long long)cf_nfilters(f),         (long long)cf_items(f),
                     (long long)cf_deletes(f),          (long long)cf_bucket_size(f),
                     (long long)cf_expansion(f),        (long long)cf_max_iterations(f),
                     (long long)cf_fingerprint_bits(f), (long long)cf_bytes(f)};
    pthread_mutex_unlock(&e->obj->lock);
    ks_close(&ref);
    static const char *names[] = {"Size",
                                  "Number of buckets",
                                  "Number of filters",
                                  "Number of items inserted",
                                  "Number of items deleted",
                                  "Bucket size",
                                  "Expansion rate",
                                  "Max iterations",
                                  "Fingerprint bits",
                                  "Bytes"};
    int n = c->argc == 3 ? 10 : 8;
    reply_map(&c->out, n);
    for (int i = 0; i < n; i++) {
        reply_simple(&c->out, names[i]);
        reply_int(&c->out, v[i]);
    }
    return true;
}

/* ---- CF.DEBUG ---- */

/* RedisBloom's one line: bucket size, sub-filter 0's buckets, items,
 * deletes, sub-filters, kicks, expansion (a filter of wider fingerprints
 * says so in CF.INFO ALL, not here). */
bool cfDebugCommand(cmd_ctx *c)
{
    if (c->argc != 2) {
        reply_wrong_arity(&c->out, "cf.debug");
        return false;
    }
    ks_ref ref;
    kv_entry *e;
    if (!open_read(c, &ref, true, &e)) {
        ks_close(&ref);
        return false;
    }
    const cf_t *f = e->obj->v;
    char line[256];
    pthread_mutex_lock(&e->obj->lock);
    snprintf(line, sizeof(line),
             "bktsize:%u buckets:%llu items:%llu deletes:%llu filters:%u max_iterations:%u "
             "expansion:%u",
             cf_bucket_size(f), (unsigned long long)cf_nbuckets(f), (unsigned long long)cf_items(f),
             (unsigned long long)cf_deletes(f), cf_nfilters(f), cf_max_iterations(f),
             cf_expansion(f));
    pthread_mutex_unlock(&e->obj->lock);
    ks_close(&ref);
    reply_bulk_str(&c->out, line);
    return true;
}

/* ---- CF.SCANDUMP ---- */

bool cfScandumpCommand(cmd_ctx *c)
{
    if (c->argc != 3) {
        reply_wrong_arity(&c->out, "cf.scandump");
        return false;
    }
    long long iter;
    if (!str_to_ll(c->argv[2], c->argvlen[2], &iter) || iter < 0) {
        reply_error(&c->out, "Invalid position");
        return false;
    }
    ks_ref ref;
    kv_entry *e;
    if (!open_read(c, &ref, true, &e)) {
        ks_close(&ref);
        return false;
    }
    kv_obj *o = e->obj;
    reply *r = &c->out;
    pthread_mutex_lock(&o->lock);
    bloomery_object obj = {.type = BLOOMERY_TYPE_CUCKOO, .u.cf = o->v};
    bloomery_image *img = NULL;
    bool ok = bloomery_image_create(&img, obj, 0) == BLOOMERY_OK;
    if (!ok) {
        reply_error(r, "ERR could not encode the filter");
    } else if (iter == 0 && cf_items(o->v) > 0) {
        size_t hl;
        const uint8_t *h = bloomery_image_header(img, &hl);
        reply_array(r, 2);
        reply_int(r, 1);
        reply_bulk(r, h, hl);
    } else if (iter == 0 || (uint64_t)iter - 1 >= bloomery_image_nchunks(img)) {
        /* The end, and RedisBloom's answer for an empty filter. */
        reply_array(r, 2);
        reply_int(r, 0);
        reply_null(r);
    } else {
        reply_array(r, 2);
        reply_int(r, iter + 1);
        dump_reply_chunk(r, img, (uint64_t)iter - 1);
    }
    bloomery_image_free(img);
    pthread_mutex_unlock(&o->lock);
    ks_close(&ref);
    return ok;
}

/* ---- CF.LOADCHUNK ---- */

bool cfLoadchunkCommand(cmd_ctx *c)
{
    if (c->argc != 4) {
        reply_wrong_arity(&c->out, "cf.loadchunk");
        return false;
    }
    /* RedisBloom refuses position 0 only: a negative one is a chunk. */
    long long iter;
    if (!str_to_ll(c->argv[2], c->argvlen[2], &iter) || iter == 0) {
        reply_error(&c->out, "Invalid position");
        return false;
    }
    const uint8_t *data = (const uint8_t *)c->argv[3];
    size_t len = c->argvlen[3];
    ks_ref ref;
    kv_entry *e = ks_open(&ref, c->argv[1], c->argvlen[1], true);
    if (iter == 1 && e && (e->obj->type == &cuckoo_type || e->obj->type == &cf_loading_type)) {
        ks_close(&ref);
        reply_error(&c->out, "ERR item exists");
        return false;
    }
    /* A chunk changes the filter it lands in. */
    if (e && e->obj->type == &cuckoo_type && ck_refuse_readonly(c, e->obj)) {
        ks_close(&ref);
        return false;
    }
    value_status st = restore_cf_chunk(&ref, e, iter, data, len);
    switch (st) {
    case VS_OK:
        kv_obj_note_restore(ref.e->obj,
                            wal_log_cf_loadchunk(c->argv[1], c->argvlen[1], iter, data, len));
        reply_ok(&c->out);
        break;
    case VS_NOT_FOUND:
    case VS_WRONGTYPE:
    case VS_OOM: ck_reply_status(c, &cf_kind, st); break;
    case VS_NOMEM: reply_error(&c->out, "Couldn't create filter!"); break;
    case VS_BAD_HEADER: reply_error(&c->out, "Invalid header"); break;
    default: reply_error(&c->out, "Couldn't load chunk!"); break;
    }
    ks_close(&ref);
    return st == VS_OK;
}

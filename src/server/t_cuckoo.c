/* CF.* commands over libbloomery's cuckoo filter (cuckoo.h), with
 * RedisBloom's syntax, defaults, replies and errors
 * (../shared/reference/redisbloom-compat.md, section 3; docs/COMMANDS.md),
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
 * Dumps (CF.SCANDUMP / CF.LOADCHUNK) are serial.h images, not RedisBloom's
 * bytes: iterator 1 carries the image header, iterator k >= 2 chunk k-2
 * followed by its 8-byte checksum, as for blocked Bloom filters.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "persist.h"
#include "restore.h"
#include "server.h"
#include "util.h"

#define RB_CF_MAX_CAPACITY (1LL << 30)

static const char *err_loading = "ERR filter is still being loaded with CF.LOADCHUNK";

static unsigned max_filters(void) {
    return (unsigned)atomic_load_explicit(&cfg.cf_max_expansions, memory_order_relaxed);
}

static int arg_index(cmd_ctx *c, int from, const char *lit) {
    for (int i = from; i < c->argc; i++)
        if (arg_eq(c, i, lit)) return i;
    return -1;
}

/* Create the filter under ref (write-locked, key missing); replies and
 * returns NULL on failure. */
static kv_entry *create_cf(cmd_ctx *c, ks_ref *ref, uint64_t capacity, const cf_options *opts_in) {
    cf_options opts = *opts_in;
    kv_obj *o = kv_obj_new(&cuckoo_type, NULL);
    if (o == NULL) {
        reply_error(&c->out, "ERR Insufficient memory");
        return NULL;
    }
    uint64_t maxmem = server_maxmemory();
    uint64_t bytes = cf_bytes_for(capacity, &opts);
    if (maxmem && ks_used_memory() + bytes + ks_entry_overhead(ref->klen) > maxmem) {
        kv_obj_free(o);
        reply_oom(c);
        return NULL;
    }
    opts.may_allocate = kv_obj_may_grow;
    opts.may_allocate_ctx = o;
    cf_t *f;
    int rc = cf_create(&f, capacity, &opts);
    o->v = rc == BLOOMERY_OK ? f : NULL;
    if (rc != BLOOMERY_OK) {
        ks_mem_add(-(int64_t)kv_obj_bytes(o));
        atomic_store(&o->value_bytes, 0);
        kv_obj_free(o);
        if (rc == BLOOMERY_EREFUSED && server_maxmemory()) reply_oom(c);
        else reply_error(&c->out, rc == BLOOMERY_ENOMEM || rc == BLOOMERY_EREFUSED
                                      ? "ERR Insufficient memory to create filter"
                                      : "Couldn't create Cuckoo Filter");
        return NULL;
    }
    kv_entry *e = ks_add(ref, o);
    if (e == NULL) {
        ks_mem_add(-(int64_t)kv_obj_bytes(o));
        kv_obj_free(o);
        reply_error(&c->out, "ERR Insufficient memory");
        return NULL;
    }
    wal_cuckoo wc = {capacity, opts.bucket_size, opts.max_iterations, opts.expansion,
                     opts.fingerprint_bits};
    wal_log_cf_create(ref->key, ref->klen, &wc);
    return e;
}

/* Open key for a change, creating it with capacity when missing and
 * create is set; returns the entry (ref locked) or NULL after replying. */
static kv_entry *open_for_add(cmd_ctx *c, ks_ref *ref, bool create, uint64_t capacity) {
    kv_entry *e = ks_open(ref, c->argv[1], c->argvlen[1], false);
    if (e == NULL) {
        ks_close(ref);
        e = ks_open(ref, c->argv[1], c->argvlen[1], true);
        if (e == NULL) {
            if (!create) {
                reply_error(&c->out, "ERR not found");
                return NULL;
            }
            cf_options opts;
            cf_options_init(&opts);
            opts.max_filters = max_filters();
            return create_cf(c, ref, capacity, &opts);
        }
    }
    if (e->obj->type == &cf_loading_type) {
        reply_error(&c->out, err_loading);
        return NULL;
    }
    if (e->obj->type != &cuckoo_type) {
        reply_wrongtype(c);
        return NULL;
    }
    return e;
}

/* Open key for reading: NULL (nothing replied) when missing; *bad set after
 * replying WRONGTYPE / loading. */
static kv_entry *open_read(cmd_ctx *c, ks_ref *ref, bool *bad) {
    *bad = false;
    kv_entry *e = ks_open(ref, c->argv[1], c->argvlen[1], false);
    server_count_hit(c, e != NULL);
    if (e == NULL) return NULL;
    if (e->obj->type == &cuckoo_type) return e;
    *bad = true;
    if (e->obj->type == &cf_loading_type) reply_error(&c->out, err_loading);
    else reply_wrongtype(c);
    return NULL;
}

static void reply_add_error(cmd_ctx *c, int rc) {
    if (rc == BLOOMERY_ETOOBIG) reply_error(&c->out, "Maximum expansions reached");
    else if (rc == BLOOMERY_EFULL) reply_error(&c->out, "Filter is full");
    else if (rc == BLOOMERY_EREFUSED && server_maxmemory()) reply_oom(c);
    else reply_error(&c->out, "ERR Insufficient memory");
}

/* ---- CF.RESERVE ---- */

/* Option name's value at argv[i + 1]: false after replying. */
static bool opt_ll(cmd_ctx *c, const char *name, long long lo, long long hi, long long *v) {
    int i = arg_index(c, 3, name);
    if (i < 0) return true;
    if (i + 1 >= c->argc || !str_to_ll(c->argv[i + 1], c->argvlen[i + 1], v)) {
        reply_errorf(&c->out, "Couldn't parse %s", name);
        return false;
    }
    if (*v < lo || *v > hi) {
        reply_errorf(&c->out, "%s: value must be in the range [%lld, %lld]", name, lo, hi);
        return false;
    }
    return true;
}

void cfReserveCommand(cmd_ctx *c) {
    if (c->argc < 3 || c->argc % 2 == 0) {
        reply_wrong_arity(&c->out, "cf.reserve");
        return;
    }
    long long capacity;
    if (!str_to_ll(c->argv[2], c->argvlen[2], &capacity)) {
        reply_error(&c->out, "Bad capacity");
        return;
    }
    long long iters = CF_DEFAULT_MAX_ITERATIONS, bucket = CF_DEFAULT_BUCKET_SIZE;
    long long expansion = CF_DEFAULT_EXPANSION, bits = CF_DEFAULT_FINGERPRINT_BITS;
    /* RedisBloom's order of checks, then ours. */
    if (!opt_ll(c, "MAXITERATIONS", 1, CF_MAX_MAX_ITERATIONS, &iters) ||
        !opt_ll(c, "BUCKETSIZE", 1, CF_MAX_BUCKET_SIZE, &bucket) ||
        !opt_ll(c, "EXPANSION", 0, CF_MAX_EXPANSION, &expansion) ||
        !opt_ll(c, "FINGERPRINT", CF_MIN_FINGERPRINT_BITS, CF_MAX_FINGERPRINT_BITS, &bits))
        return;
    if (capacity < 2 * bucket || capacity > RB_CF_MAX_CAPACITY) {
        reply_error(&c->out, "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]");
        return;
    }
    for (int i = 3; i < c->argc; i += 2) {
        if (!arg_eq(c, i, "maxiterations") && !arg_eq(c, i, "bucketsize") &&
            !arg_eq(c, i, "expansion") && !arg_eq(c, i, "fingerprint")) {
            reply_syntax_error(c);
            return;
        }
    }
    cf_options opts;
    cf_options_init(&opts);
    opts.bucket_size = (unsigned)bucket;
    opts.max_iterations = (unsigned)iters;
    opts.expansion = (unsigned)expansion;
    opts.fingerprint_bits = (unsigned)bits;
    opts.max_filters = max_filters();
    ks_ref ref;
    kv_entry *e = ks_open(&ref, c->argv[1], c->argvlen[1], true);
    if (e) reply_error(&c->out, "ERR item exists");
    else if (create_cf(c, &ref, (uint64_t)capacity, &opts)) reply_ok(&c->out);
    ks_close(&ref);
}

/* ---- CF.ADD, CF.ADDNX ---- */

static void add_one(cmd_ctx *c, bool nx) {
    if (c->argc != 3) {
        reply_wrong_arity(&c->out, nx ? "cf.addnx" : "cf.add");
        return;
    }
    ks_ref ref;
    kv_entry *e = open_for_add(c, &ref, true, CF_DEFAULT_CAPACITY);
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
        if (rc < 0) reply_add_error(c, rc);
        else reply_bool(&c->out, rc == 1);
    }
    ks_close(&ref);
}

void cfAddCommand(cmd_ctx *c) { add_one(c, false); }
void cfAddnxCommand(cmd_ctx *c) { add_one(c, true); }

/* ---- CF.INSERT, CF.INSERTNX ---- */

static void insert(cmd_ctx *c, bool nx) {
    const char *name = nx ? "cf.insertnx" : "cf.insert";
    if (c->argc < 4) {
        reply_wrong_arity(&c->out, name);
        return;
    }
    long long capacity = CF_DEFAULT_CAPACITY;
    bool create = true;
    int items = -1;
    for (int i = 2; i < c->argc && items < 0; i++) {
        if (arg_eq(c, i, "capacity")) {
            if (++i == c->argc) {
                reply_wrong_arity(&c->out, name);
                return;
            }
            if (!str_to_ll(c->argv[i], c->argvlen[i], &capacity)) {
                reply_error(&c->out, "Bad capacity");
                return;
            }
            if (capacity < 2 * CF_DEFAULT_BUCKET_SIZE || capacity > RB_CF_MAX_CAPACITY) {
                reply_error(&c->out, "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]");
                return;
            }
        } else if (arg_eq(c, i, "nocreate")) {
            create = false;
        } else if (arg_eq(c, i, "items")) {
            items = i + 1;
        } else {
            reply_error(&c->out, "Unknown argument received");
            return;
        }
    }
    if (items < 0 || items >= c->argc) {
        reply_wrong_arity(&c->out, name);
        return;
    }
    ks_ref ref;
    kv_entry *e = open_for_add(c, &ref, create, (uint64_t)capacity);
    if (e == NULL) {
        ks_close(&ref);
        return;
    }
    kv_obj *o = e->obj;
    size_t n = (size_t)(c->argc - items);
    uint64_t small[64];
    uint64_t *added = n <= 64 ? small : malloc(n * sizeof(uint64_t));
    if (added == NULL) {
        ks_close(&ref);
        reply_oom(c);
        return;
    }
    pthread_mutex_lock(&o->lock);
    unsigned limit = max_filters();
    if (cf_nfilters(o->v) >= limit) {
        pthread_mutex_unlock(&o->lock);
        ks_close(&ref);
        if (added != small) free(added);
        reply_error(&c->out, "Maximum expansions reached");
        return;
    }
    /* Checked once for the command: its items may grow the filter past it. */
    cf_set_max_filters(o->v, CF_MAX_MAX_FILTERS);
    reply *r = &c->out;
    reply_array(r, (long long)n);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t h = cf_hash(c->argv[items + (int)i], c->argvlen[items + (int)i]);
        int rc = nx ? cf_add_nx_hashed(o->v, h) : cf_add_hashed(o->v, h);
        if (rc == 1) added[k++] = h;
        if (rc == BLOOMERY_EREFUSED && server_maxmemory()) reply_oom(c);
        else if (rc == BLOOMERY_ENOMEM || rc == BLOOMERY_EREFUSED) reply_error(r, "ERR Insufficient memory");
        else if (nx) reply_int(r, rc < 0 ? -1 : rc);
        else if (r->proto == 3) reply_bool(r, rc == 1);
        else reply_int(r, rc < 0 ? -1 : 1);
    }
    cf_set_max_filters(o->v, limit);
    wal_log_cf_op(c->argv[1], c->argvlen[1], WAL_CF_ADD, CF_MAX_MAX_FILTERS, added, k);
    cf_value_sync(o);
    pthread_mutex_unlock(&o->lock);
    ks_close(&ref);
    if (added != small) free(added);
}

void cfInsertCommand(cmd_ctx *c) { insert(c, false); }
void cfInsertnxCommand(cmd_ctx *c) { insert(c, true); }

/* ---- CF.EXISTS, CF.MEXISTS, CF.COUNT ---- */

static void check(cmd_ctx *c, bool multi) {
    size_t n = (size_t)c->argc - 2;
    ks_ref ref;
    bool bad;
    kv_entry *e = open_read(c, &ref, &bad);
    if (!bad) {
        if (multi) reply_array(&c->out, (long long)n);
        if (e) pthread_mutex_lock(&e->obj->lock);
        for (size_t i = 0; i < n; i++)
            reply_bool(&c->out, e && cf_exists(e->obj->v, c->argv[2 + i], c->argvlen[2 + i]));
        if (e) pthread_mutex_unlock(&e->obj->lock);
    }
    ks_close(&ref);
}

void cfExistsCommand(cmd_ctx *c) {
    if (c->argc != 3) {
        reply_wrong_arity(&c->out, "cf.exists");
        return;
    }
    check(c, false);
}

void cfMexistsCommand(cmd_ctx *c) {
    if (c->argc < 3) {
        reply_wrong_arity(&c->out, "cf.mexists");
        return;
    }
    check(c, true);
}

void cfCountCommand(cmd_ctx *c) {
    if (c->argc != 3) {
        reply_wrong_arity(&c->out, "cf.count");
        return;
    }
    ks_ref ref;
    bool bad;
    kv_entry *e = open_read(c, &ref, &bad);
    if (!bad) {
        uint64_t n = 0;
        if (e) {
            pthread_mutex_lock(&e->obj->lock);
            n = cf_count(e->obj->v, c->argv[2], c->argvlen[2]);
            pthread_mutex_unlock(&e->obj->lock);
        }
        reply_int(&c->out, (long long)n);
    }
    ks_close(&ref);
}

/* ---- CF.DEL ---- */

void cfDelCommand(cmd_ctx *c) {
    if (c->argc != 3) {
        reply_wrong_arity(&c->out, "cf.del");
        return;
    }
    ks_ref ref;
    bool bad;
    kv_entry *e = open_read(c, &ref, &bad);
    if (!bad && e == NULL) reply_error(&c->out, "Not found");
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
}

/* ---- CF.INFO ---- */

void cfInfoCommand(cmd_ctx *c) {
    if (c->argc != 2 && !(c->argc == 3 && arg_eq(c, 2, "all"))) {
        reply_wrong_arity(&c->out, "cf.info");
        return;
    }
    ks_ref ref;
    bool bad;
    kv_entry *e = open_read(c, &ref, &bad);
    if (!bad && e == NULL) reply_error(&c->out, "ERR not found");
    if (e == NULL) {
        ks_close(&ref);
        return;
    }
    const cf_t *f = e->obj->v;
    pthread_mutex_lock(&e->obj->lock);
    long long v[] = {(long long)cf_info_size(f), (long long)cf_nbuckets(f), (long long)cf_nfilters(f),
                     (long long)cf_items(f), (long long)cf_deletes(f), (long long)cf_bucket_size(f),
                     (long long)cf_expansion(f), (long long)cf_max_iterations(f),
                     (long long)cf_fingerprint_bits(f), (long long)cf_bytes(f)};
    pthread_mutex_unlock(&e->obj->lock);
    ks_close(&ref);
    static const char *names[] = {"Size", "Number of buckets", "Number of filters",
                                  "Number of items inserted", "Number of items deleted",
                                  "Bucket size", "Expansion rate", "Max iterations",
                                  "Fingerprint bits", "Bytes"};
    int n = c->argc == 3 ? 10 : 8;
    reply_map(&c->out, n);
    for (int i = 0; i < n; i++) {
        reply_simple(&c->out, names[i]);
        reply_int(&c->out, v[i]);
    }
}

/* ---- CF.SCANDUMP ---- */

void cfScandumpCommand(cmd_ctx *c) {
    if (c->argc != 3) {
        reply_wrong_arity(&c->out, "cf.scandump");
        return;
    }
    long long iter;
    if (!str_to_ll(c->argv[2], c->argvlen[2], &iter) || iter < 0) {
        reply_error(&c->out, "Invalid position");
        return;
    }
    ks_ref ref;
    bool bad;
    kv_entry *e = open_read(c, &ref, &bad);
    if (!bad && e == NULL) reply_error(&c->out, "ERR not found");
    if (e == NULL) {
        ks_close(&ref);
        return;
    }
    kv_obj *o = e->obj;
    reply *r = &c->out;
    pthread_mutex_lock(&o->lock);
    bloomery_object obj = {.type = BLOOMERY_TYPE_CUCKOO, .u.cf = o->v};
    bloomery_image *img = NULL;
    if (bloomery_image_create(&img, obj, 0) != BLOOMERY_OK) {
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
}

/* ---- CF.LOADCHUNK ---- */

void cfLoadchunkCommand(cmd_ctx *c) {
    if (c->argc != 4) {
        reply_wrong_arity(&c->out, "cf.loadchunk");
        return;
    }
    long long iter;
    if (!str_to_ll(c->argv[2], c->argvlen[2], &iter) || iter < 1) {
        reply_error(&c->out, "Invalid position");
        return;
    }
    const uint8_t *data = (const uint8_t *)c->argv[3];
    size_t len = c->argvlen[3];
    ks_ref ref;
    kv_entry *e = ks_open(&ref, c->argv[1], c->argvlen[1], true);
    switch (restore_cf_chunk(&ref, e, iter, data, len)) {
    case VS_OK:
        wal_log_cf_loadchunk(c->argv[1], c->argvlen[1], iter, data, len);
        reply_ok(&c->out);
        break;
    case VS_NOT_FOUND: reply_error(&c->out, "ERR not found"); break;
    case VS_WRONGTYPE: reply_wrongtype(c); break;
    case VS_OOM: reply_oom(c); break;
    case VS_NOMEM: reply_error(&c->out, "Couldn't create filter!"); break;
    case VS_BAD_HEADER: reply_error(&c->out, "Invalid header"); break;
    default: reply_error(&c->out, "Couldn't load chunk!"); break;
    }
    ks_close(&ref);
}

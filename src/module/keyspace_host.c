/* keyspace.h over Redis keys: what the handlers call to reach values when
 * they run inside Redis.
 *
 * A key whose value is one of our module types holds a kv_obj. Every open
 * gives the handler a kv_entry made for this command (the key's name, its
 * expiry as an absolute time, the object), because Redis owns the key and
 * renames or expires it without telling us; the host frees those entries
 * and closes the Redis keys when the command ends (mh_end), so the
 * handlers' ks_close has nothing left to do. No locks: Redis runs one
 * command at a time, so ks_lock_many only has to leave the keys reachable.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "host.h"
#include "util.h"

/* ---- the command's context and what it opened ---- */

static RedisModuleCtx *cur;
static RedisModuleKey **keys;
static size_t nkeys, keys_cap;
static RedisModuleString **names;
static size_t nnames, names_cap;
static kv_entry **entries;
static size_t nentries, entries_cap;

static bool keep(void ***arr, size_t *n, size_t *cap, void *p)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        void **a = realloc(*arr, c * sizeof(*a));
        if (a == NULL)
            return false;
        *arr = a;
        *cap = c;
    }
    (*arr)[(*n)++] = p;
    return true;
}

static bool cur_write; /* the command is a write: open keys for writing */
static RedisModuleString **cur_argv;
static const char **cur_av;
static const size_t *cur_lens;
static int cur_argc;

/* The first entry of a command (most open one key) lives here, so the
 * common command allocates none. */
#define FIRST_KEY_MAX 256
static union {
    kv_entry e;
    char room[sizeof(kv_entry) + FIRST_KEY_MAX + 1];
} first_entry;

void mh_begin(RedisModuleCtx *ctx, bool write)
{
    cur = ctx;
    cur_write = write;
    mh_changed = false;
}

void mh_args(RedisModuleString **argv, const char **av, const size_t *lens, int argc)
{
    cur_lens = lens;
    cur_argv = argv;
    cur_av = av;
    cur_argc = argc;
}

void mh_end(void)
{
    for (size_t i = nkeys; i > 0; i--)
        rm.CloseKey(keys[i - 1]);
    for (size_t i = 0; i < nnames; i++)
        rm.FreeString(cur, names[i]);
    for (size_t i = 0; i < nentries; i++)
        if (entries[i] != &first_entry.e)
            free(entries[i]);
    nkeys = nnames = nentries = 0;
    cur = NULL;
    cur_argv = NULL;
    cur_av = NULL;
    cur_lens = NULL;
    cur_argc = 0;
}

RedisModuleCtx *mh_ctx(void) { return cur; }

/* The Redis key named key, opened for reading or for a change; NULL when
 * out of memory. */
static RedisModuleKey *open_key(const char *key, size_t klen, bool write)
{
    RedisModuleString *name = NULL;
    for (int i = 1; i < cur_argc && name == NULL; i++)
        if (cur_av[i] == key && cur_lens[i] == klen)
            name = cur_argv[i];
    if (name == NULL) {
        name = rm.CreateString(cur, key, klen);
        if (name == NULL)
            return NULL;
        if (!keep((void ***)&names, &nnames, &names_cap, name)) {
            rm.FreeString(cur, name);
            return NULL;
        }
    }
    RedisModuleKey *k = rm.OpenKey(cur, name, RM_READ | (write || cur_write ? RM_WRITE : 0));
    if (k && !keep((void ***)&keys, &nkeys, &keys_cap, k)) {
        rm.CloseKey(k);
        return NULL;
    }
    return k;
}

static kv_entry *make_entry(const char *key, size_t klen, kv_obj *o, int64_t expire_ms)
{
    bool first = nentries == 0 && klen <= FIRST_KEY_MAX;
    kv_entry *e = first ? &first_entry.e : malloc(sizeof(*e) + klen + 1);
    if (e == NULL)
        return NULL;
    if (!keep((void ***)&entries, &nentries, &entries_cap, e)) {
        if (!first)
            free(e);
        return NULL;
    }
    e->next = NULL;
    e->hash = 0;
    e->expire_ms = expire_ms;
    e->obj = o;
    e->klen = klen;
    memcpy(e->key, key, klen);
    e->key[klen] = '\0';
    return e;
}

/* ---- types ---- */

/* TYPE is Redis's answer (the module type's name), so neither needs one. */
const value_type foreign_type = {.name = "value of another type"};
const value_type lost_restore_type = {.name = "dump whose restore was lost",
                                      .module_type = "bloomerBF"};

static kv_obj foreign_obj = {.type = &foreign_type, .lock = PTHREAD_MUTEX_INITIALIZER};

/* The value under an open Redis key, as the handlers see it. */
static kv_obj *value_of(RedisModuleKey *k)
{
    if (rm.KeyType(k) != RM_KEYTYPE_MODULE)
        return &foreign_obj;
    RedisModuleType *t = rm.ModuleTypeGetType(k);
    if (!mh_is_ours(t))
        return &foreign_obj;
    return rm.ModuleTypeGetValue(k);
}

/* ---- keys ---- */

static kv_entry *lookup(ks_ref *ref, const char *key, size_t klen, bool write)
{
    ref->st = NULL;
    ref->write = write;
    ref->hash = 0;
    ref->key = key;
    ref->klen = klen;
    ref->e = NULL;
    RedisModuleKey *k = open_key(key, klen, write);
    if (k == NULL || rm.KeyType(k) == RM_KEYTYPE_EMPTY)
        return NULL;
    long long ttl = rm.GetExpire(k);
    int64_t expire = ttl == RM_NO_EXPIRE ? 0 : now_ms() + ttl;
    ref->e = make_entry(key, klen, value_of(k), expire);
    return ref->e;
}

kv_entry *ks_open(ks_ref *ref, const char *key, size_t klen, bool write)
{
    return lookup(ref, key, klen, write);
}

kv_entry *ks_open_exclusive(ks_ref *ref, const char *key, size_t klen)
{
    return lookup(ref, key, klen, false);
}

void ks_close(ks_ref *ref) { ref->e = NULL; }

kv_entry *ks_find_locked(const char *key, size_t klen, ks_ref *ref, bool write)
{
    return lookup(ref, key, klen, write);
}

void ks_lock_many(ks_multi *m, const char *const *keys_, const size_t *lens, size_t n, bool write)
{
    (void)keys_;
    (void)lens;
    (void)n;
    m->nstripes = 0;
    m->write = write;
    m->stripes = NULL;
}

void ks_unlock_many(ks_multi *m) { m->nstripes = 0; }

uint64_t ks_entry_overhead(size_t klen)
{
    /* Redis counts the key itself; the module counts its own object, the
     * same whatever the key, so freeing a value (which Redis does without
     * naming the key) uncounts exactly what adding it counted. */
    (void)klen;
    return sizeof(kv_obj);
}

kv_entry *ks_add(ks_ref *ref, kv_obj *obj)
{
    /* The entry first: once Redis holds the value, the caller must not see
     * a failure (it would free what the key now owns). */
    RedisModuleType *mt = mh_module_type(obj->type);
    kv_entry *e = mt ? make_entry(ref->key, ref->klen, obj, 0) : NULL;
    RedisModuleKey *k = e ? open_key(ref->key, ref->klen, true) : NULL;
    if (k == NULL || rm.ModuleTypeSetValue(k, mt, obj) != RM_OK)
        return NULL;
    ks_mem_add((int64_t)ks_entry_overhead(ref->klen));
    ref->e = e;
    return e;
}

void ks_remove(ks_ref *ref)
{
    RedisModuleKey *k = open_key(ref->key, ref->klen, true);
    if (k)
        rm.DeleteKey(k); /* Redis calls the type's free: rdb.c */
    ref->e = NULL;
}

void ks_set_expire(ks_ref *ref, int64_t when_ms)
{
    RedisModuleKey *k = open_key(ref->key, ref->klen, true);
    if (k) {
        long long left = when_ms - now_ms();
        rm.SetExpire(k, when_ms ? (left > 0 ? left : 1) : RM_NO_EXPIRE);
    }
    if (ref->e)
        ref->e->expire_ms = when_ms;
}

bool ks_replace(const void *key, size_t klen, kv_obj *o, int64_t expire_ms)
{
    ks_ref ref;
    if (ks_open(&ref, key, klen, true))
        ks_remove(&ref);
    kv_entry *e = ks_add(&ref, o);
    if (e && expire_ms)
        ks_set_expire(&ref, expire_ms);
    if (e == NULL) {
        ks_mem_add(-(int64_t)kv_obj_bytes(o));
        kv_obj_free(o);
    }
    return e != NULL;
}

/* ks_scan over Redis's SCAN: cursor 0 starts a new pass, the answer is 0
 * once it is complete. Only our values are visited. */
typedef struct scan_arg {
    ks_visit_fn fn;
    void *ctx;
} scan_arg;

static void scan_one(RedisModuleCtx *ctx, RedisModuleString *name, RedisModuleKey *k, void *arg)
{
    (void)ctx;
    scan_arg *a = arg;
    if (k == NULL || rm.KeyType(k) != RM_KEYTYPE_MODULE)
        return;
    kv_obj *o = value_of(k);
    if (o == &foreign_obj)
        return;
    size_t klen;
    const char *key = rm.StringPtrLen(name, &klen);
    long long ttl = rm.GetExpire(k);
    kv_entry *e = malloc(sizeof(*e) + klen + 1);
    if (e == NULL)
        return;
    *e = (kv_entry){.expire_ms = ttl == RM_NO_EXPIRE ? 0 : now_ms() + ttl, .obj = o, .klen = klen};
    memcpy(e->key, key, klen);
    e->key[klen] = '\0';
    a->fn(a->ctx, e);
    free(e);
}

uint64_t ks_scan(uint64_t cursor, uint64_t count, ks_visit_fn fn, void *ctx)
{
    static RedisModuleScanCursor *sc;
    (void)count;
    if (cur == NULL)
        return 0;
    if (cursor == 0 || sc == NULL) {
        if (sc)
            rm.ScanCursorDestroy(sc);
        sc = rm.ScanCursorCreate();
        if (sc == NULL)
            return 0;
    }
    scan_arg a = {fn, ctx};
    if (rm.Scan(cur, sc, scan_one, &a))
        return 1;
    rm.ScanCursorDestroy(sc);
    sc = NULL;
    return 0;
}

/* ---- objects ---- */

kv_obj *kv_obj_new(const value_type *type, void *value)
{
    kv_obj *o = calloc(1, sizeof(*o));
    if (o == NULL)
        return NULL;
    o->type = type;
    o->v = value;
    pthread_mutex_init(&o->lock, NULL);
    atomic_store(&o->refs, 1);
    return o;
}

void kv_obj_retain(kv_obj *o) { atomic_fetch_add(&o->refs, 1); }

void kv_obj_free(kv_obj *o)
{
    if (o == NULL || o == &foreign_obj || atomic_fetch_sub(&o->refs, 1) != 1)
        return;
    if (o->v && o->type->free_value)
        o->type->free_value(o->v);
    free(o->chunk_seen);
    free(o->restore_lsns);
    pthread_mutex_destroy(&o->lock);
    free(o);
}

uint64_t kv_obj_bytes(const kv_obj *o)
{
    return atomic_load_explicit(&o->value_bytes, memory_order_relaxed);
}

void kv_obj_note_restore(kv_obj *o, uint64_t lsn)
{
    /* Redis's RDB and replication carry the restore, not a log: nothing to
     * keep. */
    (void)o;
    (void)lsn;
}

bool kv_obj_may_grow(void *ctx, uint64_t bytes)
{
    kv_obj *o = ctx;
    if (!ks_mem_try_reserve(bytes,
                            (uint64_t)atomic_load_explicit(&cfg.maxmemory, memory_order_relaxed)))
        return false;
    atomic_fetch_add_explicit(&o->value_bytes, bytes, memory_order_relaxed);
    return true;
}

void kv_obj_released(void *ctx, uint64_t bytes)
{
    kv_obj *o = ctx;
    atomic_fetch_sub_explicit(&o->value_bytes, bytes, memory_order_relaxed);
    ks_mem_add(-(int64_t)bytes);
}

/* ---- memory: the bytes of our values, held to maxmemory or the machine ---- */

/* Atomic: Redis frees values on a background thread after FLUSHALL ASYNC
 * (the type's free runs there), while commands count on the main one. */
static _Atomic uint64_t used;

uint64_t ks_used_memory(void) { return atomic_load_explicit(&used, memory_order_relaxed); }

void ks_mem_add(int64_t delta)
{
    atomic_fetch_add_explicit(&used, (uint64_t)delta, memory_order_relaxed);
}

uint64_t ks_mem_limit(uint64_t maxmemory)
{
    if (maxmemory)
        return maxmemory;
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : UINT64_MAX;
}

bool ks_mem_try_reserve(uint64_t bytes, uint64_t maxmemory)
{
    uint64_t limit = ks_mem_limit(maxmemory);
    uint64_t cur = atomic_load_explicit(&used, memory_order_relaxed);
    do {
        if (bytes > limit || cur > limit - bytes)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&used, &cur, cur + bytes, memory_order_relaxed,
                                                    memory_order_relaxed));
    return true;
}

/* The striped keyspace; see keyspace.h for the locking rules.
 *
 * A key's keyed 64-bit hash (keyhash.h) picks its stripe with the low KS_STRIPE_BITS bits
 * and its bucket with the bits above them, so the two choices are
 * independent. Each stripe is a chained table that doubles when it holds
 * more entries than buckets; the doubling happens under the stripe's write
 * lock, all at once, which keeps SCAN's cursor arithmetic simple (one table
 * per stripe, never two).
 */
#include "keyspace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "exact.h"
#include "keyhash.h"
#include "persist.h"
#include "util.h"

static ks_stripe stripes[KS_STRIPES];
static _Atomic uint64_t used_memory;
_Atomic uint64_t ks_stat_expired;
static _Atomic unsigned expire_next_stripe;
static bool expiry_paused;
/* A replica's keys expire only by its master's deletions: expired keys are
 * invisible to its readers but stay until the record that deletes them. */
static _Atomic bool expiry_deletes = true;
/* The thread applying a master's records sees keys as the master did. */
static __thread bool applying;
static void (*_Atomic expired_hook)(const char *key, size_t klen);

#define INITIAL_BUCKETS 4

void ks_init(void)
{
    keyhash_init();
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    /* Writers (creation, DEL, EXPIRE) must not starve behind a constant
     * stream of BF.EXISTS readers on a hot stripe. */
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    for (unsigned i = 0; i < KS_STRIPES; i++) {
        ks_stripe *st = &stripes[i];
        pthread_rwlock_init(&st->lock, &attr);
        st->buckets = calloc(INITIAL_BUCKETS, sizeof(kv_entry *));
        if (st->buckets == NULL)
            abort();
        st->mask = INITIAL_BUCKETS - 1;
        st->count = st->expires = st->expire_cursor = 0;
    }
    pthread_rwlockattr_destroy(&attr);
}

static void free_entry(kv_entry *e)
{
    /* Zeroed: a snapshot may hold the object and release memory later. */
    uint64_t bytes = atomic_exchange_explicit(&e->obj->value_bytes, 0, memory_order_relaxed);
    ks_mem_add(-(int64_t)(ks_entry_overhead(e->klen) + bytes));
    kv_obj_free(e->obj);
    free(e);
}

void ks_shutdown(void)
{
    ks_flush();
    for (unsigned i = 0; i < KS_STRIPES; i++) {
        free(stripes[i].buckets);
        stripes[i].buckets = NULL;
        pthread_rwlock_destroy(&stripes[i].lock);
    }
}

uint64_t ks_hash(const char *key, size_t klen) { return keyhash(key, klen); }

uint64_t ks_entry_overhead(size_t klen) { return sizeof(kv_entry) + klen + sizeof(kv_obj); }

bool ks_entry_expired(const kv_entry *e, int64_t now)
{
    return e->expire_ms != 0 && e->expire_ms <= now && !expiry_paused && !applying;
}

void ks_pause_expiry(bool paused) { expiry_paused = paused; }
void ks_set_applier(bool on) { applying = on; }
void ks_set_expiry_deletes(bool on) { atomic_store(&expiry_deletes, on); }
void ks_set_expired_hook(void (*fn)(const char *key, size_t klen))
{
    atomic_store(&expired_hook, fn);
}

static void unlink_slot(ks_stripe *st, kv_entry **pp);

/* Remove an expired entry, telling the hook first (the log's deletion
 * record, under the stripe's lock like any change). */
static void expire_slot(ks_stripe *st, kv_entry **pp)
{
    void (*fn)(const char *, size_t) = atomic_load(&expired_hook);
    if (fn)
        fn((*pp)->key, (*pp)->klen);
    unlink_slot(st, pp);
    atomic_fetch_add_explicit(&ks_stat_expired, 1, memory_order_relaxed);
}

static kv_entry **find_slot(ks_stripe *st, uint64_t hash, const char *key, size_t klen)
{
    kv_entry **pp = &st->buckets[(hash >> KS_STRIPE_BITS) & st->mask];
    for (; *pp; pp = &(*pp)->next) {
        kv_entry *e = *pp;
        if (e->hash == hash && e->klen == klen && memcmp(e->key, key, klen) == 0)
            return pp;
    }
    return pp;
}

static void unlink_slot(ks_stripe *st, kv_entry **pp)
{
    kv_entry *e = *pp;
    *pp = e->next;
    st->count--;
    if (e->expire_ms)
        __atomic_fetch_sub(&st->expires, 1, __ATOMIC_RELAXED);
    free_entry(e);
}

kv_entry *ks_open(ks_ref *ref, const char *key, size_t klen, bool write)
{
    ref->hash = ks_hash(key, klen);
    ref->st = &stripes[ref->hash & (KS_STRIPES - 1)];
    ref->write = write;
    ref->key = key;
    ref->klen = klen;
    if (write)
        pthread_rwlock_wrlock(&ref->st->lock);
    else
        pthread_rwlock_rdlock(&ref->st->lock);
    kv_entry **pp = find_slot(ref->st, ref->hash, key, klen);
    kv_entry *e = *pp;
    if (e && e->expire_ms && ks_entry_expired(e, now_ms())) {
        if (write && atomic_load_explicit(&expiry_deletes, memory_order_relaxed))
            expire_slot(ref->st, pp);
        e = NULL;
    }
    ref->e = e;
    return e;
}

kv_entry *ks_open_exclusive(ks_ref *ref, const char *key, size_t klen)
{
    return ks_open(ref, key, klen, true);
}

void ks_close(ks_ref *ref)
{
    if (ref->st)
        pthread_rwlock_unlock(&ref->st->lock);
    ref->st = NULL;
}

static void grow(ks_stripe *st)
{
    uint64_t nb = (st->mask + 1) * 2;
    kv_entry **b = calloc(nb, sizeof(*b));
    if (b == NULL)
        return; /* keep the old table: longer chains, still correct */
    for (uint64_t i = 0; i <= st->mask; i++) {
        kv_entry *e = st->buckets[i];
        while (e) {
            kv_entry *next = e->next;
            uint64_t j = (e->hash >> KS_STRIPE_BITS) & (nb - 1);
            e->next = b[j];
            b[j] = e;
            e = next;
        }
    }
    free(st->buckets);
    st->buckets = b;
    st->mask = nb - 1;
}

kv_entry *ks_add(ks_ref *ref, kv_obj *obj)
{
    kv_entry *e = malloc(sizeof(*e) + ref->klen + 1);
    if (e == NULL)
        return NULL;
    e->hash = ref->hash;
    e->expire_ms = 0;
    e->obj = obj;
    e->klen = ref->klen;
    memcpy(e->key, ref->key, ref->klen);
    e->key[ref->klen] = '\0';
    ks_stripe *st = ref->st;
    if (st->count >= st->mask + 1)
        grow(st);
    kv_entry **pp = &st->buckets[(e->hash >> KS_STRIPE_BITS) & st->mask];
    e->next = *pp;
    *pp = e;
    st->count++;
    /* Only the entry: a value's bytes are counted by whoever allocates them
     * (see kv_obj.value_bytes), so moving an object between keys is free. */
    ks_mem_add((int64_t)ks_entry_overhead(e->klen));
    ref->e = e;
    return e;
}

void ks_remove(ks_ref *ref)
{
    kv_entry **pp = find_slot(ref->st, ref->hash, ref->key, ref->klen);
    if (*pp)
        unlink_slot(ref->st, pp);
    ref->e = NULL;
}

void ks_set_expire(ks_ref *ref, int64_t when_ms)
{
    kv_entry *e = ref->e;
    /* Written under the stripe's write lock; the active-expiry cron peeks
     * at it without the lock (a relaxed atomic load). */
    if (e->expire_ms && !when_ms)
        __atomic_fetch_sub(&ref->st->expires, 1, __ATOMIC_RELAXED);
    if (!e->expire_ms && when_ms)
        __atomic_fetch_add(&ref->st->expires, 1, __ATOMIC_RELAXED);
    e->expire_ms = when_ms;
}

/* ---- several keys ---- */

static int cmp_unsigned(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? -1 : x > y;
}

void ks_lock_many(ks_multi *m, const char *const *keys, const size_t *lens, size_t n, bool write)
{
    m->write = write;
    m->stripes = n <= 8 ? m->small : malloc(n * sizeof(unsigned));
    if (m->stripes == NULL)
        abort();
    for (size_t i = 0; i < n; i++)
        m->stripes[i] = ks_hash(keys[i], lens[i]) & (KS_STRIPES - 1);
    qsort(m->stripes, n, sizeof(unsigned), cmp_unsigned);
    unsigned k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || m->stripes[k - 1] != m->stripes[i])
            m->stripes[k++] = m->stripes[i];
    m->nstripes = k;
    for (unsigned i = 0; i < k; i++) {
        if (write)
            pthread_rwlock_wrlock(&stripes[m->stripes[i]].lock);
        else
            pthread_rwlock_rdlock(&stripes[m->stripes[i]].lock);
    }
}

void ks_unlock_many(ks_multi *m)
{
    for (unsigned i = m->nstripes; i-- > 0;)
        pthread_rwlock_unlock(&stripes[m->stripes[i]].lock);
    if (m->stripes != m->small)
        free(m->stripes);
    m->stripes = NULL;
    m->nstripes = 0;
}

kv_entry *ks_find_locked(const char *key, size_t klen, ks_ref *ref, bool write)
{
    ref->hash = ks_hash(key, klen);
    ref->st = &stripes[ref->hash & (KS_STRIPES - 1)];
    ref->write = write;
    ref->key = key;
    ref->klen = klen;
    kv_entry **pp = find_slot(ref->st, ref->hash, key, klen);
    kv_entry *e = *pp;
    if (e && e->expire_ms && ks_entry_expired(e, now_ms())) {
        if (write && atomic_load_explicit(&expiry_deletes, memory_order_relaxed))
            expire_slot(ref->st, pp);
        e = NULL;
    }
    ref->e = e;
    return e;
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
    if (o == NULL || atomic_fetch_sub(&o->refs, 1) != 1)
        return;
    if (o->v)
        o->type->free_value(o->v);
    exact_detach(o->exact);
    free(o->chunk_seen);
    free(o->restore_lsns);
    pthread_mutex_destroy(&o->lock);
    free(o);
}

bool ks_replace(const void *key, size_t klen, kv_obj *o, int64_t expire_ms)
{
    ks_ref ref;
    if (ks_open(&ref, key, klen, true))
        ks_remove(&ref);
    kv_entry *e = ks_add(&ref, o);
    if (e && expire_ms)
        ks_set_expire(&ref, expire_ms);
    ks_close(&ref);
    if (e == NULL) {
        ks_mem_add(-(int64_t)kv_obj_bytes(o));
        kv_obj_free(o);
    }
    return e != NULL;
}

void kv_obj_note_restore(kv_obj *o, uint64_t lsn)
{
    if (o->type->snap_kind != SNAP_KIND_RESTORE) {
        free(o->restore_lsns);
        o->restore_lsns = NULL;
        o->nrestore = o->restore_cap = 0;
        return;
    }
    if (lsn == 0 || o->restore_lost)
        return; /* no log: nothing to replay */
    if (o->nrestore == o->restore_cap) {
        size_t cap = o->restore_cap ? o->restore_cap * 2 : 16;
        uint64_t *p = realloc(o->restore_lsns, cap * sizeof(*p));
        if (p == NULL) {
            /* A snapshot must not list this restore incompletely: it fails
             * instead (snapshot.c). */
            o->restore_lost = true;
            return;
        }
        o->restore_lsns = p;
        o->restore_cap = cap;
    }
    o->restore_lsns[o->nrestore++] = lsn;
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
    uint64_t had = atomic_load_explicit(&o->value_bytes, memory_order_relaxed), take;
    do
        take = bytes < had ? bytes : had;
    while (!atomic_compare_exchange_weak_explicit(&o->value_bytes, &had, had - take,
                                                  memory_order_relaxed, memory_order_relaxed));
    ks_mem_add(-(int64_t)take);
}

uint64_t kv_obj_bytes(const kv_obj *o)
{
    return atomic_load_explicit(&o->value_bytes, memory_order_relaxed);
}

/* ---- memory ---- */

uint64_t ks_used_memory(void) { return atomic_load_explicit(&used_memory, memory_order_relaxed); }

void ks_mem_add(int64_t delta)
{
    atomic_fetch_add_explicit(&used_memory, (uint64_t)delta, memory_order_relaxed);
}

/* A cgroup limit file's value; UINT64_MAX for "max", a missing file or
 * anything else. */
static uint64_t read_limit(const char *path)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return UINT64_MAX;
    char buf[64];
    uint64_t v = UINT64_MAX;
    if (fgets(buf, sizeof(buf), f) && buf[0] >= '0' && buf[0] <= '9') {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(buf, &end, 10);
        if (errno == 0 && (*end == '\n' || *end == '\0'))
            v = x;
    }
    fclose(f);
    return v;
}

/* The lowest limit from the group at rel (a path in the hierarchy mounted at
 * mount) up to the mount's root: an ancestor's limit binds its descendants.
 * Levels missing in this mount namespace are skipped (a container without a
 * cgroup namespace sees its host's path but has its own group mounted as the
 * root, which is read last). */
static uint64_t cgroup_limit(const char *mount, const char *rel, const char *file)
{
    char dir[2048], path[4096];
    snprintf(dir, sizeof(dir), "%s", rel[0] == '/' ? rel : "/");
    uint64_t lim = UINT64_MAX;
    for (;;) {
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
            dir[--n] = '\0';
        snprintf(path, sizeof(path), "%s%s/%s", mount, n > 1 ? dir : "", file);
        uint64_t v = read_limit(path);
        if (v < lim)
            lim = v;
        if (n <= 1)
            return lim;
        char *slash = strrchr(dir, '/');
        slash[slash == dir ? 1 : 0] = '\0';
    }
}

static uint64_t machine_memory;
static pthread_once_t machine_memory_once = PTHREAD_ONCE_INIT;

static void find_machine_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    uint64_t lim = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : UINT64_MAX;
    /* "0::/path" is the process's cgroup v2 group; "N:a,memory,b:/path" its
     * group in the v1 memory hierarchy. Without the file, the v2 root's
     * memory.max (a container's own group) is still read. */
    char line[2048];
    bool v2 = false;
    FILE *f = fopen("/proc/self/cgroup", "re");
    while (f && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL)
            continue;
        *c1 = *c2 = '\0';
        const char *ctrls = c1 + 1, *rel = c2 + 1;
        uint64_t v = UINT64_MAX;
        if (strcmp(line, "0") == 0 && ctrls[0] == '\0') {
            v2 = true;
            v = cgroup_limit("/sys/fs/cgroup", rel, "memory.max");
        } else {
            char list[256];
            snprintf(list, sizeof(list), ",%s,", ctrls);
            if (strstr(list, ",memory,"))
                v = cgroup_limit("/sys/fs/cgroup/memory", rel, "memory.limit_in_bytes");
        }
        if (v < lim)
            lim = v;
    }
    if (f)
        fclose(f);
    if (!v2) {
        uint64_t v = read_limit("/sys/fs/cgroup/memory.max");
        if (v < lim)
            lim = v;
    }
    machine_memory = lim;
}

uint64_t ks_machine_memory(void)
{
    pthread_once(&machine_memory_once, find_machine_memory);
    return machine_memory;
}

uint64_t ks_mem_limit(uint64_t maxmemory)
{
    if (maxmemory)
        return maxmemory;
    if (persist_replaying)
        return 0;
    return ks_machine_memory();
}

bool ks_mem_try_reserve(uint64_t bytes, uint64_t maxmemory)
{
    uint64_t limit = ks_mem_limit(maxmemory);
    uint64_t cur = atomic_load_explicit(&used_memory, memory_order_relaxed);
    for (;;) {
        if (limit && (cur + bytes > limit || cur + bytes < cur))
            return false;
        if (atomic_compare_exchange_weak_explicit(&used_memory, &cur, cur + bytes,
                                                  memory_order_relaxed, memory_order_relaxed))
            return true;
    }
}

/* ---- counters and iteration ---- */

uint64_t ks_dbsize(void)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < KS_STRIPES; i++) {
        pthread_rwlock_rdlock(&stripes[i].lock);
        n += stripes[i].count;
        pthread_rwlock_unlock(&stripes[i].lock);
    }
    return n;
}

uint64_t ks_expires_count(void)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < KS_STRIPES; i++) {
        pthread_rwlock_rdlock(&stripes[i].lock);
        n += stripes[i].expires;
        pthread_rwlock_unlock(&stripes[i].lock);
    }
    return n;
}

static uint64_t rev64(uint64_t v)
{
    v = ((v >> 1) & 0x5555555555555555ULL) | ((v & 0x5555555555555555ULL) << 1);
    v = ((v >> 2) & 0x3333333333333333ULL) | ((v & 0x3333333333333333ULL) << 2);
    v = ((v >> 4) & 0x0F0F0F0F0F0F0F0FULL) | ((v & 0x0F0F0F0F0F0F0F0FULL) << 4);
    return __builtin_bswap64(v);
}

static void visit_bucket(ks_stripe *st, uint64_t b, int64_t now, ks_visit_fn fn, void *ctx,
                         uint64_t *emitted)
{
    for (kv_entry *e = st->buckets[b]; e; e = e->next) {
        (*emitted)++;
        if (!ks_entry_expired(e, now))
            fn(ctx, e);
    }
}

uint64_t ks_scan(uint64_t cursor, uint64_t count, ks_visit_fn fn, void *ctx)
{
    unsigned s = (unsigned)(cursor & (KS_STRIPES - 1));
    uint64_t v = cursor >> KS_STRIPE_BITS;
    uint64_t emitted = 0, visited = 0;
    int64_t now = now_ms();
    if (count == 0)
        count = 1;
    for (;;) {
        ks_stripe *st = &stripes[s];
        pthread_rwlock_rdlock(&st->lock);
        uint64_t mask = st->mask;
        v &= mask;
        do {
            visit_bucket(st, v, now, fn, ctx, &emitted);
            visited++;
            v |= ~mask;
            v = rev64(v);
            v++;
            v = rev64(v);
        } while (v != 0 && emitted < count && visited < count * 10 + 1000);
        pthread_rwlock_unlock(&st->lock);
        if (v == 0) {
            if (++s == KS_STRIPES)
                return 0;
        }
        if (emitted >= count || visited >= count * 10 + 1000)
            return (v << KS_STRIPE_BITS) | s;
    }
}

void ks_foreach(ks_visit_fn fn, void *ctx)
{
    int64_t now = now_ms();
    for (unsigned s = 0; s < KS_STRIPES; s++) {
        ks_stripe *st = &stripes[s];
        pthread_rwlock_rdlock(&st->lock);
        uint64_t dummy = 0;
        for (uint64_t b = 0; b <= st->mask; b++)
            visit_bucket(st, b, now, fn, ctx, &dummy);
        pthread_rwlock_unlock(&st->lock);
    }
}

static uint64_t flush_stripe(ks_stripe *st)
{
    uint64_t n = 0;
    for (uint64_t b = 0; b <= st->mask; b++) {
        kv_entry *e = st->buckets[b];
        while (e) {
            kv_entry *next = e->next;
            free_entry(e);
            n++;
            e = next;
        }
        st->buckets[b] = NULL;
    }
    st->count = 0;
    __atomic_store_n(&st->expires, 0, __ATOMIC_RELAXED);
    return n;
}

uint64_t ks_flush(void)
{
    uint64_t n = 0;
    for (unsigned s = 0; s < KS_STRIPES; s++) {
        ks_stripe *st = &stripes[s];
        pthread_rwlock_wrlock(&st->lock);
        n += flush_stripe(st);
        pthread_rwlock_unlock(&st->lock);
    }
    return n;
}

void ks_lock_all(void)
{
    for (unsigned s = 0; s < KS_STRIPES; s++)
        pthread_rwlock_wrlock(&stripes[s].lock);
}

void ks_unlock_all(void)
{
    for (unsigned s = KS_STRIPES; s-- > 0;)
        pthread_rwlock_unlock(&stripes[s].lock);
}

uint64_t ks_flush_locked(void)
{
    uint64_t n = 0;
    for (unsigned s = 0; s < KS_STRIPES; s++)
        n += flush_stripe(&stripes[s]);
    return n;
}

void ks_foreach_locked(ks_visit_fn fn, void *ctx)
{
    for (unsigned s = 0; s < KS_STRIPES; s++) {
        ks_stripe *st = &stripes[s];
        for (uint64_t b = 0; b <= st->mask; b++)
            for (kv_entry *e = st->buckets[b]; e; e = e->next)
                fn(ctx, e);
    }
}

uint64_t ks_drop_expired(void)
{
    int64_t now = now_ms();
    uint64_t removed = 0;
    for (unsigned s = 0; s < KS_STRIPES; s++) {
        ks_stripe *st = &stripes[s];
        pthread_rwlock_wrlock(&st->lock);
        for (uint64_t b = 0; st->expires && b <= st->mask; b++) {
            kv_entry **pp = &st->buckets[b];
            while (*pp) {
                if (ks_entry_expired(*pp, now)) {
                    unlink_slot(st, pp);
                    removed++;
                } else {
                    pp = &(*pp)->next;
                }
            }
        }
        pthread_rwlock_unlock(&st->lock);
    }
    return removed;
}

uint64_t ks_active_expire(int64_t budget_us, size_t log_room)
{
    if (!atomic_load(&expiry_deletes))
        return 0;
    int64_t start = mono_us();
    uint64_t removed = 0;
    for (unsigned i = 0; i < KS_STRIPES; i++) {
        unsigned s = atomic_fetch_add_explicit(&expire_next_stripe, 1, memory_order_relaxed) &
                     (KS_STRIPES - 1);
        ks_stripe *st = &stripes[s];
        /* Racy peek: a stripe without expiring keys is not worth a lock. */
        if (__atomic_load_n(&st->expires, __ATOMIC_RELAXED) == 0)
            continue;
        pthread_rwlock_wrlock(&st->lock);
        int64_t now = now_ms();
        uint64_t nb = st->mask + 1, steps = nb < 64 ? nb : 64;
        bool full = false;
        for (uint64_t k = 0; k < steps && st->expires && !full; k++) {
            uint64_t b = st->expire_cursor & st->mask;
            kv_entry **pp = &st->buckets[b];
            while (*pp) {
                if (ks_entry_expired(*pp, now)) {
                    /* Each deletion is logged in room the caller reserved;
                     * what does not fit waits for the next round. */
                    size_t rec = wal_record_size(8 + (*pp)->klen);
                    if (rec > log_room) {
                        full = true;
                        break;
                    }
                    log_room -= rec;
                    expire_slot(st, pp);
                    removed++;
                } else {
                    pp = &(*pp)->next;
                }
            }
            if (!full)
                st->expire_cursor++;
        }
        pthread_rwlock_unlock(&st->lock);
        if (full || mono_us() - start > budget_us)
            break;
    }
    return removed;
}

/* Exact filters' state below the commands (exact.h): periods, the ids
 * alive in the keyspace, the snapshot suffix, replay of the store's
 * records, and the store's part in persistence.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exact.h"
#include "exact_store.h"
#include "keyspace.h"
#include "le.h"
#include "log.h"
#include "persist.h"
#include "snapshot_index.h"
#include "util.h"

uint64_t exact_period_ms(const win_t *w)
{
    uint64_t p = win_window_ms(w) / win_slices(w);
    return p ? p : 1;
}

uint64_t exact_span_ms(const win_t *w) { return exact_period_ms(w) * (win_slices(w) + 1); }

int64_t exact_period_of(const win_t *w, int64_t t)
{
    int64_t p = (int64_t)exact_period_ms(w), origin = win_slice_start(w, 0);
    int64_t d = t - origin;
    int64_t k = d >= 0 ? d / p : -((-d + p - 1) / p);
    return origin + k * p;
}

size_t exact_live_periods(const win_t *w, int64_t now, int64_t *out)
{
    size_t n = 0;
    int64_t span = (int64_t)exact_span_ms(w);
    for (unsigned i = 0; i <= win_slices(w); i++) {
        int64_t s = win_slice_start(w, i);
        if (now < s + span)
            out[n++] = s;
    }
    return n;
}

/* ---- ids alive in the keyspace ---- */

typedef struct live_id {
    uint64_t id;
    unsigned refs;
} live_id;

static struct {
    pthread_mutex_t lock;
    live_id *ids;
    size_t n, cap;
    bool dead; /* some id reached zero since the last exact_gc */
    bool stopped;
} live = {.lock = PTHREAD_MUTEX_INITIALIZER};

static live_id *live_find(uint64_t id)
{
    for (size_t i = 0; i < live.n; i++)
        if (live.ids[i].id == id)
            return &live.ids[i];
    return NULL;
}

static bool id_live(uint64_t id)
{
    /* Called by xs_gc with live.lock held. */
    return live_find(id) != NULL;
}

exact_meta *exact_meta_new(uint64_t id, uint64_t retain_ms)
{
    exact_meta *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    while (id == 0)
        if (getrandom(&id, sizeof(id), 0) != sizeof(id))
            id = 0;
    m->id = id;
    m->retain_ms = retain_ms;
    return m;
}

void exact_attach(kv_obj *o, exact_meta *m)
{
    o->exact = m;
    pthread_mutex_lock(&live.lock);
    live_id *l = live_find(m->id);
    if (l) {
        l->refs++;
    } else {
        if (live.n == live.cap) {
            size_t cap = live.cap ? 2 * live.cap : 16;
            live_id *p = realloc(live.ids, cap * sizeof(*p));
            if (p) {
                live.ids = p;
                live.cap = cap;
            }
        }
        /* Without the memory the id is not counted: exact_gc then leaves
         * every period alone (see there), never drops a live one. */
        if (live.n < live.cap)
            live.ids[live.n++] = (live_id){m->id, 1};
        else
            live.stopped = true;
    }
    pthread_mutex_unlock(&live.lock);
}

void exact_detach(exact_meta *m)
{
    if (m == NULL)
        return;
    pthread_mutex_lock(&live.lock);
    live_id *l = live_find(m->id);
    if (l && --l->refs == 0) {
        *l = live.ids[--live.n];
        live.dead = true;
    }
    pthread_mutex_unlock(&live.lock);
    free(m);
}

void exact_gc(void)
{
    pthread_mutex_lock(&live.lock);
    if (live.dead && !live.stopped) {
        live.dead = false;
        xs_gc(id_live);
    }
    pthread_mutex_unlock(&live.lock);
}

/* ---- snapshot suffix ---- */

void exact_meta_encode(const exact_meta *m, uint8_t out[EXACT_META_LEN])
{
    le_store(out, SNAP_EXACT_MAGIC, 4);
    le_store(out + 4, SNAP_EXACT_VERSION, 4);
    le_store(out + 8, m->id, 8);
    le_store(out + 16, m->retain_ms, 8);
}

exact_meta *exact_meta_decode(const uint8_t *p, size_t len)
{
    if (len != EXACT_META_LEN || le_load(p, 4) != SNAP_EXACT_MAGIC ||
        le_load(p + 4, 4) != SNAP_EXACT_VERSION || le_load(p + 8, 8) == 0)
        return NULL;
    return exact_meta_new(le_load(p + 8, 8), le_load(p + 16, 8));
}

/* ---- a store short of what the log holds ---- */

static struct {
    pthread_mutex_t lock;
    _Atomic bool set;
    char why[600];
} incomplete = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void mark_incomplete(const char *err)
{
    pthread_mutex_lock(&incomplete.lock);
    if (!atomic_load(&incomplete.set)) {
        snprintf(incomplete.why, sizeof(incomplete.why),
                 "a write replayed at start failed (%.400s): restart once the store can be written",
                 err);
        atomic_store(&incomplete.set, true);
        server_log(LOG_WARNING, "exact store: %s", incomplete.why);
    }
    pthread_mutex_unlock(&incomplete.lock);
}

bool exact_store_usable(void) { return xs_ok() && !atomic_load(&incomplete.set); }

const char *exact_store_error(void)
{
    return atomic_load(&incomplete.set) ? incomplete.why : xs_error();
}

/* ---- replay ---- */

const char *exact_replay(const wal_op *op, bool below_start)
{
    char err[512];
    if (op->type == WAL_EXACT_CREATE) {
        if (below_start)
            return NULL;
        ks_ref ref;
        kv_entry *e = ks_open(&ref, (const char *)op->key, op->klen, true);
        const char *why = NULL;
        exact_meta *m = NULL;
        if (e == NULL || e->obj->type != &window_type)
            why = e ? "key holds another type" : "key is missing";
        else if (e->obj->exact == NULL && (m = exact_meta_new(op->store_id, op->retain_ms)) == NULL)
            why = "out of memory";
        if (m)
            exact_attach(e->obj, m);
        ks_close(&ref);
        /* A new id's periods start empty (nothing can be left of it). */
        if (why == NULL && exact_store_ready())
            xs_drop(op->store_id, INT64_MIN, err, sizeof(err));
        return why;
    }
    /* Without the store the window's part is still applied: its items
     * then answer an error rather than "absent", and a snapshot keeps
     * them. The log stays for the store's part (exact_log_needed). */
    const char *store_why = exact_store_ready() ? NULL : "the exact store is unavailable";
    if (op->type == WAL_EXACT_DROP) {
        if (store_why)
            return store_why;
        if (xs_drop(op->store_id, op->period, err, sizeof(err)))
            return NULL;
        mark_incomplete(err);
        return "store drop failed";
    }
    /* WAL_EXACT_PUT: the store's part by the id the record names (the key
     * may have been renamed or deleted since), then the window's. A failed
     * write leaves the store short of what the window will say: it is
     * marked incomplete (exact commands answer an error, the log is kept
     * for a restart) and the window still takes the items. */
    if (!store_why && !xs_put(op->store_id, op->period, op->items, op->n, err, sizeof(err))) {
        mark_incomplete(err);
        store_why = "store write failed";
    }
    if (below_start || !op->in_filter)
        return store_why;
    ks_ref ref;
    const char *why;
    kv_entry *e = type_open_record_key(&ref, op, &window_type, false, &why);
    if (e == NULL)
        return why;
    for (uint32_t i = 0; i < op->n; i++) {
        bloomery_hash h = {le_load(op->items + 16 * (size_t)i, 8),
                           le_load(op->items + 16 * (size_t)i + 8, 8)};
        win_add_hashed(e->obj->v, h);
    }
    ks_close(&ref);
    return store_why;
}

/* ---- persistence ---- */

/* The store opens when first needed (a server without exact filters never
 * starts RocksDB), once: a failure stays until a restart. */
static struct {
    pthread_mutex_t lock;
    char dir[4096];
    bool known, tried;
} store = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void open_locked(void)
{
    char err[1024];
    store.tried = true;
    if (!xs_open(store.dir, err, sizeof(err)))
        server_log(LOG_WARNING,
                   "The exact store cannot be used (%s): exact filters answer errors, "
                   "every other key is served",
                   err);
}

bool exact_store_ready(void)
{
    if (xs_ok())
        return true;
    pthread_mutex_lock(&store.lock);
    if (store.known && !store.tried) {
        open_locked();
        /* A store made now holds nothing from before this LSN: its mark,
         * before anything is written to it (a replay's store gets its mark
         * once recovery is done, exact_recovered). */
        char err[512];
        if (xs_ok() && !persist_replaying && xs_applied() == 0 &&
            !xs_sync(wal_next_lsn(), err, sizeof(err))) {
            server_log(LOG_WARNING, "The exact store cannot be used: %s", err);
            xs_close_failed(err);
        }
    }
    pthread_mutex_unlock(&store.lock);
    return xs_ok();
}

void exact_start(const char *dir)
{
    char path[4200];
    struct stat st;
    pthread_mutex_lock(&store.lock);
    snprintf(store.dir, sizeof(store.dir), "%s", dir);
    store.known = true;
    store.tried = false;
    snprintf(path, sizeof(path), "%s/exact", dir);
    if (lstat(path, &st) == 0)
        open_locked();
    pthread_mutex_unlock(&store.lock);
}

void exact_recovering(uint64_t from_lsn)
{
    /* A store opened empty for this start (no mark): complete below where
     * the replay starts, which then writes into it everything above. */
    char err[512];
    if (xs_ok() && xs_applied() == 0 && !xs_sync(from_lsn, err, sizeof(err)))
        server_log(LOG_WARNING, "exact store: %s", err);
}

void exact_recovered(uint64_t next_lsn)
{
    /* Periods of filters deleted before a crash: swept once. */
    pthread_mutex_lock(&live.lock);
    live.dead = true;
    pthread_mutex_unlock(&live.lock);
    /* A new store holds everything from here on. */
    char err[512];
    if (xs_ok() && xs_applied() == 0 && !xs_sync(next_lsn, err, sizeof(err)))
        server_log(LOG_WARNING, "exact store: %s", err);
}

void exact_stop(void)
{
    pthread_mutex_lock(&live.lock);
    live.stopped = true;
    pthread_mutex_unlock(&live.lock);
    xs_close();
}

uint64_t exact_log_needed(void)
{
    pthread_mutex_lock(&live.lock);
    bool any = live.n > 0 || live.stopped;
    pthread_mutex_unlock(&live.lock);
    if (!any)
        return UINT64_MAX;
    /* Unavailable with exact filters loaded: keep every record from here
     * on until the store is back (a restart replays them into it). A store
     * gets its mark before anything is written to it (exact_store_ready,
     * exact_recovered): 0 means one whose first mark could not be written,
     * which keeps every record too. */
    return xs_ok() ? xs_applied() : 0;
}

void exact_sync(uint64_t l0)
{
    char err[512];
    /* A store short of the log keeps its mark: the log stays from there. */
    if (atomic_load(&incomplete.set))
        return;
    if (xs_ok() && !xs_sync(l0, err, sizeof(err)))
        server_log(LOG_WARNING, "exact store: %s (the log is kept from LSN %" PRIu64 ")", err,
                   xs_applied());
}

void exact_info(char *out, size_t outlen)
{
    xs_stats s;
    xs_get_stats(&s);
    pthread_mutex_lock(&live.lock);
    size_t filters = live.n;
    pthread_mutex_unlock(&live.lock);
    snprintf(out, outlen,
             "exact_store_status:%s\r\n"
             "exact_store_error:%s\r\n"
             "exact_filters:%zu\r\n"
             "exact_store_periods:%" PRIu64 "\r\n"
             "exact_store_keys:%" PRIu64 "\r\n"
             "exact_store_bytes:%" PRIu64 "\r\n"
             "exact_store_memtable_bytes:%" PRIu64 "\r\n"
             "exact_store_index_filter_bytes:%" PRIu64 "\r\n"
             "exact_lookups:%" PRIu64 "\r\n"
             "exact_puts:%" PRIu64 "\r\n"
             "exact_store_applied_lsn:%" PRIu64 "\r\n"
             "exact_store_writing:%s\r\n",
             exact_store_usable() ? "ok" : "unavailable",
             exact_store_usable() ? "" : exact_store_error(), filters, s.periods, s.keys,
             s.sst_bytes, s.memtable_bytes, s.reader_bytes, s.gets, s.puts, xs_applied(),
             xs_write_failing() ? "failing" : "ok");
}

bool exact_summarize(exact_summary *out)
{
    pthread_mutex_lock(&live.lock);
    uint64_t filters = live.n;
    pthread_mutex_unlock(&live.lock);
    pthread_mutex_lock(&store.lock);
    bool tried = store.tried;
    pthread_mutex_unlock(&store.lock);
    if (!tried && filters == 0)
        return false;
    xs_stats st;
    xs_get_stats(&st);
    *out = (exact_summary){.store_ok = exact_store_usable(),
                           .filters = filters,
                           .periods = st.periods,
                           .keys = st.keys,
                           .disk_bytes = st.sst_bytes,
                           .buffer_bytes = st.memtable_bytes,
                           .lookups = st.gets,
                           .puts = st.puts,
                           .applied_lsn = xs_applied()};
    return true;
}

void exact_heal(void) { xs_heal(); }

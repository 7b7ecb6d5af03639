/* Start-up: the newest snapshot, then the log from the snapshot's start.
 *
 *   1. DIR/snapshots/<seq>.index with the highest sequence is the snapshot
 *      (an index appears only by rename once everything it names is on
 *      disk, so any index there is complete). Its chunks load on several
 *      threads (load-threads): each chunk is read (inline in the index or
 *      DIR/chunks/<hash>.zst, whose reads are started ahead of the
 *      threads), decompressed with its size as the cap into its key's
 *      object (a frame that is mostly zeros through a scratch buffer, only
 *      its pages that hold something copied), and checked against its
 *      content hash and serial.h's image checksum.
 *   2. DIR/log/<first LSN>.wal files in LSN order: records below the
 *      snapshot's start are checked and passed over, the rest replayed
 *      (replay.c). LSNs must follow each other without a gap from the
 *      snapshot's start (or from 1 without a snapshot) to the end, and the
 *      newest file DIR/log/LAST names must be there.
 *   3. Keys whose absolute expiry has passed are dropped.
 *
 * Reading and checking the files is src/persist/datadir.c, shared with
 * `bloomery check-data`, so both accept and refuse the same directories.
 * A record cut by a crash at the very end of the newest log file is kept
 * aside in <file>.torn-<offset> and cut off, with a warning. Any other
 * damage (a checksum, a length, a missing chunk or log file, an LSN gap)
 * stops the start with a message naming the file, the offset and the
 * reason, and whatever was loaded is freed: nothing is served half loaded.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datadir.h"
#include "datadir_fs.h"
#include "persist.h"
#include "replay.h"
#include "config.h"
#include "exact.h"
#include "log.h"
#include "snapshot.h"
#include "util.h"

/* ---- snapshot ---- */

/* Loading runs in three steps: open every key's loader (which checks its
 * image header and allocates the object), then fill chunks on several
 * threads, then finish and insert the keys. A thread takes the next chunk,
 * reads, decompresses and checks it in its own region of its key's object
 * (so the first touch of fresh memory, the kernel's zeroing of it, spreads
 * over the threads too; a mostly empty filter stays mostly unallocated,
 * datadir.c); no two chunks share a byte, and the
 * loader counts them with atomics, so nothing is locked. Parallel over
 * chunks rather than keys: one 8 GB filter loads as fast as many small.
 * The first failure stops every thread and is the error reported; no key
 * is inserted unless every chunk passed. */
typedef struct load_key {
    bloomery_loader *l;
} load_key;

typedef struct load_job {
    const char *dir;
    const char *index_path;
    const snap_index *ix;
    load_key *keys;
    uint64_t *work; /* entry of each chunk, in index order */
    _Atomic uint64_t next;
    _Atomic uint64_t advised; /* chunks before this one have been prefetched */
    _Atomic bool failed;
    pthread_mutex_t lock;
    char err[1024];
} load_job;

static void job_fail(load_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void job_fail(load_job *j, const char *fmt, ...)
{
    pthread_mutex_lock(&j->lock);
    if (!atomic_load(&j->failed)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->err, sizeof(j->err), fmt, ap);
        va_end(ap);
        atomic_store(&j->failed, true);
    }
    pthread_mutex_unlock(&j->lock);
}

#define KEYFMT "key '%.*s'"
#define KEYARG(e) (int)((e)->klen < 200 ? (e)->klen : 200), (const char *)(e)->key

/* Restores (BF.LOADCHUNK, CF.LOADCHUNK) still in progress at the snapshot:
 * the LSNs of their records below its start, each with the key it loads
 * now (a restore's key may have been renamed since), sorted by LSN. */
typedef struct restore_rec {
    uint64_t lsn;
    size_t key;
} restore_rec;

static struct {
    restore_rec *recs;
    size_t n;
    char **keys;
    size_t *klens, nkeys;
} restores;

static void restores_free(void)
{
    for (size_t i = 0; i < restores.nkeys; i++)
        free(restores.keys[i]);
    free(restores.keys);
    free(restores.klens);
    free(restores.recs);
    memset(&restores, 0, sizeof(restores));
}

static int cmp_rec(const void *a, const void *b)
{
    uint64_t x = ((const restore_rec *)a)->lsn, y = ((const restore_rec *)b)->lsn;
    return x < y ? -1 : x > y;
}

static bool note_restores(const snap_index *ix)
{
    size_t nrec = 0, nkeys = 0;
    for (uint64_t k = 0; k < ix->nkeys; k++)
        if (ix->entries[k].kind == SNAP_KIND_RESTORE) {
            nkeys++;
            nrec += snap_restore_count(&ix->entries[k]);
        }
    if (nkeys == 0)
        return true;
    restores.recs = malloc(nrec * sizeof(restore_rec));
    restores.keys = calloc(nkeys, sizeof(char *));
    restores.klens = calloc(nkeys, sizeof(size_t));
    if (!restores.recs || !restores.keys || !restores.klens)
        return false;
    for (uint64_t k = 0; k < ix->nkeys; k++) {
        const snap_entry *e = &ix->entries[k];
        if (e->kind != SNAP_KIND_RESTORE)
            continue;
        size_t id = restores.nkeys;
        if ((restores.keys[id] = malloc(e->klen ? e->klen : 1)) == NULL)
            return false;
        memcpy(restores.keys[id], e->key, e->klen);
        restores.klens[id] = e->klen;
        restores.nkeys++;
        for (uint64_t i = 0; i < snap_restore_count(e); i++)
            restores.recs[restores.n++] = (restore_rec){snap_restore_lsn(e, i), id};
    }
    qsort(restores.recs, restores.n, sizeof(restore_rec), cmp_rec);
    return true;
}

/* A record below the snapshot's start: replayed when it loads a restore
 * that was still in progress, onto the key that restore loads now. */
static void replay_restore_record(void *ctx, const wal_record *rec, const wal_op *op)
{
    (void)ctx;
    if (op->type == WAL_EXACT_PUT || op->type == WAL_EXACT_DROP) {
        /* The exact store's part of records it may not hold yet. */
        const char *why = exact_replay(op, true);
        if (why)
            server_log(LOG_WARNING, "LSN %" PRIu64 ": %s: %s", rec->lsn, wal_type_name(op->type),
                       why);
        return;
    }
    restore_rec want = {rec->lsn, 0};
    restore_rec *r = bsearch(&want, restores.recs, restores.n, sizeof(restore_rec), cmp_rec);
    if (r == NULL)
        return;
    wal_op moved = *op;
    moved.key = (const uint8_t *)restores.keys[r->key];
    moved.klen = restores.klens[r->key];
    replay_apply(rec, &moved);
}

static bool open_entry(load_job *j, uint64_t k)
{
    if (j->ix->entries[k].kind == SNAP_KIND_RESTORE)
        return true; /* no image: see above */
    char err[1024];
    j->keys[k].l = datadir_open_entry(j->index_path, &j->ix->entries[k], err, sizeof(err));
    if (j->keys[k].l == NULL)
        job_fail(j, "%s", err);
    return j->keys[k].l != NULL;
}

/* Chunk files read ahead of the loading threads. Each thread would
 * otherwise have one read in flight, waiting for it with the disk idle
 * between; WILLNEED starts the reads of the next chunks in the background,
 * so on a cold page cache they are in memory by the time a thread gets
 * there. */
#define PREFETCH_AHEAD 64

static void prefetch_to(load_job *j, uint64_t w)
{
    uint64_t want = w + PREFETCH_AHEAD < j->ix->nchunks ? w + PREFETCH_AHEAD : j->ix->nchunks;
    uint64_t p = atomic_load(&j->advised);
    while (p < want)
        if (atomic_compare_exchange_weak(&j->advised, &p, p + 1)) {
            uint64_t k = j->work[p];
            const snap_entry *e = &j->ix->entries[k];
            datadir_prefetch_chunk(j->dir, e, (uint64_t)(&j->ix->chunks[p] - e->chunks));
            p++;
        }
}

static void *load_thread(void *arg)
{
    load_job *j = arg;
    char err[1024];
    datadir_chunk_buf buf = {0};
    for (;;) {
        uint64_t w = atomic_fetch_add(&j->next, 1);
        if (w >= j->ix->nchunks || atomic_load(&j->failed))
            break;
        prefetch_to(j, w);
        uint64_t k = j->work[w];
        const snap_entry *e = &j->ix->entries[k];
        uint64_t i = (uint64_t)(&j->ix->chunks[w] - e->chunks);
        if (!datadir_load_chunk(j->dir, j->index_path, e, i, j->keys[k].l, &buf, err,
                                sizeof(err))) {
            job_fail(j, "%s", err);
            break;
        }
    }
    datadir_chunk_buf_free(&buf);
    return NULL;
}

/* Finish key k's object and insert it. */
static bool install_entry(load_job *j, uint64_t k)
{
    const snap_entry *e = &j->ix->entries[k];
    bloomery_loader *l = j->keys[k].l;
    bloomery_object obj = {0};
    char err[1024];
    if (!datadir_finish_entry(j->index_path, e, l, &obj, err, sizeof(err))) {
        job_fail(j, "%s", err);
        return false;
    }
    const value_type *t = type_by_snap_kind(e->kind);
    kv_obj *o = t ? kv_obj_new(t, obj.u.any) : NULL;
    uint64_t bytes = o ? t->adopt(o) : 0;
    if (o == NULL) {
        bloomery_object_free(&obj);
        job_fail(j, "out of memory loading " KEYFMT, KEYARG(e));
        return false;
    }
    atomic_store(&o->value_bytes, bytes);
    o->readonly = e->readonly;
    if (e->exact) {
        exact_meta *m = exact_meta_decode(e->exact, SNAP_EXACT_META_LEN);
        if (m == NULL) {
            kv_obj_free(o);
            job_fail(j, "%s: offset %zu: " KEYFMT ": bad exact filter meta", j->index_path, e->off,
                     KEYARG(e));
            return false;
        }
        exact_attach(o, m);
    }
    ks_mem_add((int64_t)bytes);
    ks_ref ref;
    bool dup = ks_open(&ref, (const char *)e->key, e->klen, true) != NULL;
    kv_entry *ne = dup ? NULL : ks_add(&ref, o);
    if (ne && e->expire_ms)
        ks_set_expire(&ref, e->expire_ms);
    ks_close(&ref);
    if (ne == NULL) {
        ks_mem_add(-(int64_t)bytes);
        kv_obj_free(o);
        job_fail(j, "%s: offset %zu: " KEYFMT ": %s", j->index_path, e->off, KEYARG(e),
                 dup ? "key appears twice" : "out of memory");
        return false;
    }
    return true;
}

#define LOAD_THREADS_MAX 16

/* load-threads, or 0 for one per CPU; never more than chunks. */
static int load_threads(uint64_t nchunks)
{
    long n = (long)atomic_load(&cfg.load_threads);
    if (n <= 0)
        n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > LOAD_THREADS_MAX)
        n = LOAD_THREADS_MAX;
    if ((uint64_t)n > nchunks)
        n = nchunks ? (long)nchunks : 1;
    return (int)n;
}

static bool load_snapshot(const char *dir, uint64_t *start_lsn, uint64_t *from_lsn, bool *found,
                          char *err, size_t errlen)
{
    datadir_snapshot snap;
    int rc = datadir_snapshot_open(dir, &snap, err, errlen);
    *found = rc > 0;
    if (rc <= 0)
        return rc == 0;
    const snap_index *ix = &snap.ix;
    const char *path = snap.path;
    int64_t t0 = mono_us();
    load_job j = {.dir = dir, .index_path = path, .ix = ix};
    pthread_mutex_init(&j.lock, NULL);
    j.keys = calloc(ix->nkeys ? ix->nkeys : 1, sizeof(load_key));
    j.work = malloc((ix->nchunks ? ix->nchunks : 1) * sizeof(uint64_t));
    if (j.keys == NULL || j.work == NULL)
        job_fail(&j, "out of memory loading %s", path);
    for (uint64_t k = 0, w = 0; k < ix->nkeys && !atomic_load(&j.failed); k++) {
        for (uint64_t i = 0; i < ix->entries[k].nchunks; i++)
            j.work[w++] = k;
        open_entry(&j, k);
    }
    int nthreads = load_threads(ix->nchunks);
    if (!atomic_load(&j.failed)) {
        pthread_t th[LOAD_THREADS_MAX];
        int started = 0;
        for (int i = 0; i < nthreads; i++)
            if (pthread_create(&th[i], NULL, load_thread, &j) == 0)
                started++;
        if (started == 0)
            load_thread(&j);
        for (int i = 0; i < started; i++)
            pthread_join(th[i], NULL);
    }
    for (uint64_t k = 0; k < ix->nkeys && j.keys; k++) {
        if (j.keys[k].l == NULL)
            continue;
        if (!atomic_load(&j.failed))
            install_entry(&j, k);
        bloomery_loader_free(j.keys[k].l);
    }
    free(j.keys);
    free(j.work);
    pthread_mutex_destroy(&j.lock);
    bool ok = !atomic_load(&j.failed);
    if (ok && !note_restores(ix)) {
        snprintf(j.err, sizeof(j.err), "out of memory loading the snapshot's restores");
        ok = false;
    }
    if (ok) {
        *start_lsn = ix->start_lsn;
        *from_lsn = snap_index_log_from(ix);
        /* The exact store may lag the snapshot: its records from where it
         * is complete are read again (exact.h). */
        uint64_t need = exact_log_needed();
        if (need != 0 && need != UINT64_MAX && need < *from_lsn)
            *from_lsn = need;
        server_log(LOG_NOTICE,
                   "Loaded snapshot %s: %" PRIu64 " keys, %" PRIu64
                   " chunks in %.3f s (%d thread%s)",
                   path, ix->nkeys, ix->nchunks, (double)(mono_us() - t0) / 1e6, nthreads,
                   nthreads == 1 ? "" : "s");
        snapshot_adopt(ix->seq, ix);
    } else {
        snprintf(err, errlen, "%s", j.err);
    }
    datadir_snapshot_close(&snap);
    return ok;
}

/* ---- log ---- */

/* What INFO persistence reports: the torn tail this start kept aside. */
static uint64_t torn_tails;
static char torn_last[DATADIR_PATH_MAX + 32];

void recovery_torn_tails(uint64_t *n, const char **last)
{
    *n = torn_tails;
    *last = torn_last;
}

static void replay_record(void *ctx, const wal_record *rec, const wal_op *op)
{
    (void)ctx;
    replay_apply(rec, op);
}

static bool replay_log(const char *dir, uint64_t start, uint64_t from, bool have_snapshot,
                       uint64_t *next_lsn, char *err, size_t errlen)
{
    datadir_log lg = {.start = start,
                      .from = from,
                      .have_snapshot = have_snapshot,
                      .keep_torn = true,
                      .fn = replay_record,
                      .below = replay_restore_record};
    int64_t t0 = mono_us();
    bool ok = datadir_scan_log(dir, &lg, err, errlen);
    if (lg.torn && (ok || lg.torn_kept[0])) {
        if (lg.torn_kept[0])
            server_log(LOG_WARNING,
                       "%s: offset %zu: %s; torn tail of %zu bytes kept aside in %s "
                       "and cut off the log",
                       lg.torn_file, lg.torn_off, lg.torn_why, lg.torn_len, lg.torn_kept);
        else
            server_log(LOG_WARNING,
                       "%s: offset %zu: %s; torn tail of 0 bytes: the empty file "
                       "was removed",
                       lg.torn_file, lg.torn_off, lg.torn_why);
        torn_tails++;
        snprintf(torn_last, sizeof(torn_last), "%s", lg.torn_kept);
    }
    if (!ok)
        return false;
    if (!lg.have_last && lg.files)
        server_log(LOG_NOTICE,
                   "%s/log/LAST does not exist (a data directory from an older "
                   "version); the next log file creates it",
                   dir);
    *next_lsn = lg.next_lsn;
    if (lg.applied || lg.passed)
        server_log(LOG_NOTICE,
                   "Replayed %" PRIu64 " log records (LSN %" PRIu64 "..%" PRIu64 ") in %.3f s%s",
                   lg.applied, start, *next_lsn - 1, (double)(mono_us() - t0) / 1e6,
                   replay_skipped() ? ", some skipped" : "");
    return true;
}

static bool make_dir(const char *dir, const char *sub)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, sub);
    return datadir_mkdir(path);
}

bool recovery_run(const char *dir, uint64_t *next_lsn, bool drop_expired, char *err, size_t errlen)
{
    if (!make_dir(dir, "log") || !make_dir(dir, "snapshots") || !make_dir(dir, "chunks")) {
        snprintf(err, errlen, "%s: can't create the data directories: %s", dir,
                 datadir_strerror(errno));
        return false;
    }
    /* Replay reproduces what the server did: no memory limit refuses it,
     * and keys live as they did then. */
    long long maxmem = atomic_exchange(&cfg.maxmemory, 0);
    persist_replaying = true;
    ks_pause_expiry(true);
    uint64_t start = 1, from = 0;
    bool found = false;
    bool ok = load_snapshot(dir, &start, &from, &found, err, errlen) &&
              replay_log(dir, start, from, found, next_lsn, err, errlen);
    restores_free();
    ks_pause_expiry(false);
    persist_replaying = false;
    atomic_store(&cfg.maxmemory, maxmem);
    if (!ok) {
        ks_flush();
        return false;
    }
    uint64_t dropped = drop_expired ? ks_drop_expired() : 0;
    if (dropped)
        server_log(LOG_NOTICE, "%" PRIu64 " keys expired while the server was down", dropped);
    return true;
}

/* The exact store over RocksDB (exact_store.h).
 *
 * Tuned for what exact filters ask of it: many small writes of random
 * 16-byte keys without values, few point reads (only the in-memory
 * filter's positives), and whole periods dropped at once. So: no RocksDB
 * log (ours is the truth), no RocksDB Bloom filters (ours answers the
 * negatives before the store is asked), a bounded block cache and write
 * buffer so memory does not grow with the items held, and compression only
 * on the last level, where sequence numbers are zeroed and compress.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "config.h"
#include "datadir_fs.h"
#include "exact_buffer.h"
#include "exact_manifest.h"
#include "exact_store.h"
#include "le.h"
#include "log.h"

#define XS_CACHE_BYTES (64u << 20)
#define XS_WRITE_BUFFER (64u << 20)
#define XS_ALL_BUFFERS (256u << 20)
#define APPLIED_KEY "applied"

/* A period's fingerprints not yet in a table file, under its own lock
 * (flushes by a snapshot run beside the commands' puts and gets). */
typedef struct xs_pending {
    pthread_mutex_t mu;
    pthread_cond_t idle; /* frozen written out */
    xs_buffer buf;       /* taking adds */
    xs_buffer frozen;    /* full, being written out by the flusher; still read */
    bool busy;           /* frozen is in the flusher's hands */
    /* Memory kept from a buffer written out, for the next one, and where
     * keys are sorted: fresh memory costs a page fault per page. */
    xs_buffer spare;
    uint8_t *sorted;
    size_t sorted_cap;
} xs_pending;

typedef struct xs_cf {
    uint64_t id;
    int64_t period;
    rocksdb_column_family_handle_t *h;
    xs_pending *pend;
} xs_cf;

static struct {
    rocksdb_t *db;
    rocksdb_options_t *opts, *sst_opts;
    rocksdb_block_based_table_options_t *table;
    rocksdb_cache_t *cache;
    rocksdb_writeoptions_t *wo;
    rocksdb_readoptions_t *ro;
    rocksdb_flushoptions_t *fo;
    rocksdb_envoptions_t *eo;
    rocksdb_ingestexternalfileoptions_t *io;
    char dir[4096], tmpdir[4200];
    /* A write into the store failed (write_error says why): no other one
     * is tried until xs_heal has opened the store again, and buffers stop
     * growing past XS_FAILED_FACTOR times their size. wmu makes each write
     * and its outcome one step, so none starts after another failed. */
    _Atomic bool write_failing;
    pthread_mutex_t wmu;
    char write_error[600];
    uint64_t bg_errors; /* RocksDB's count at open */
    rocksdb_column_family_handle_t *def;
    /* The periods, sorted by (id, period). Readers and writers of the
     * store hold it shared; creating or dropping a period holds it
     * exclusively, so no handle is dropped while in use. */
    pthread_rwlock_t lock;
    xs_cf *cfs;
    size_t n, cap;
    char error[8192];
    _Atomic bool ok;
    _Atomic uint64_t applied, gets, puts;
    _Atomic uint64_t epoch; /* xs_epoch */
} xs = {.lock = PTHREAD_RWLOCK_INITIALIZER,
        .wmu = PTHREAD_MUTEX_INITIALIZER,
        .error = "the exact store is not open"};

#define XS_FAILED_FACTOR 4

static bool flusher_start(void);
static void flusher_stop(void);

static void set_err(char *err, size_t errlen, const char *what, char *rerr)
{
    snprintf(err, errlen, "%s: %s", what, rerr ? rerr : "unknown error");
    free(rerr);
}

/* Before a write into RocksDB: false (with why) while the store is
 * failing. After one write failed, RocksDB (7.8, as Debian ships it) keeps
 * the database stopped and recovers it in a thread of its own; an ingest
 * meanwhile aborted the process on an assertion (a table file numbered 0).
 * So the store is written again only once xs_heal has opened it anew.
 * A failure of RocksDB's own compactions counts too. On true wmu is held
 * until write_done. */
static bool refused_locked(char *err, size_t errlen)
{
    uint64_t bg = 0;
    if (!atomic_load(&xs.write_failing) && xs.db &&
        rocksdb_property_int(xs.db, "rocksdb.background-errors", &bg) == 0 && bg > xs.bg_errors) {
        snprintf(xs.write_error, sizeof(xs.write_error),
                 "RocksDB reported an error in a background job");
        atomic_store(&xs.write_failing, true);
    }
    if (!atomic_load(&xs.write_failing))
        return false;
    snprintf(err, errlen, "the exact store takes no writes until it is opened again (%s)",
             xs.write_error);
    return true;
}

static bool write_begin(char *err, size_t errlen)
{
    pthread_mutex_lock(&xs.wmu);
    if (!refused_locked(err, errlen))
        return true;
    pthread_mutex_unlock(&xs.wmu);
    return false;
}

/* write_begin's answer without a write to follow. */
static bool write_refused(char *err, size_t errlen)
{
    pthread_mutex_lock(&xs.wmu);
    bool refused = refused_locked(err, errlen);
    pthread_mutex_unlock(&xs.wmu);
    return refused;
}

/* After write_begin: a write that failed (rerr set) stops every other. */
static bool write_done(const char *what, char *rerr, char *err, size_t errlen)
{
    bool ok = rerr == NULL;
    if (!ok) {
        set_err(err, errlen, what, rerr);
        snprintf(xs.write_error, sizeof(xs.write_error), "%s", err);
        atomic_store(&xs.write_failing, true);
    }
    pthread_mutex_unlock(&xs.wmu);
    return ok;
}

static int cmp_cf(uint64_t id, int64_t period, const xs_cf *c)
{
    if (id != c->id)
        return id < c->id ? -1 : 1;
    if (period != c->period)
        return period < c->period ? -1 : 1;
    return 0;
}

/* The index of (id, period), or where it would go (*found false). */
static size_t find_cf(uint64_t id, int64_t period, bool *found)
{
    size_t lo = 0, hi = xs.n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = cmp_cf(id, period, &xs.cfs[mid]);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    *found = false;
    return lo;
}

static bool insert_cf(size_t at, uint64_t id, int64_t period, rocksdb_column_family_handle_t *h)
{
    xs_pending *pend = calloc(1, sizeof(*pend));
    if (pend == NULL)
        return false;
    pthread_mutex_init(&pend->mu, NULL);
    pthread_cond_init(&pend->idle, NULL);
    if (xs.n == xs.cap) {
        size_t cap = xs.cap ? 2 * xs.cap : 64;
        xs_cf *p = realloc(xs.cfs, cap * sizeof(*p));
        if (p == NULL) {
            pthread_mutex_destroy(&pend->mu);
            pthread_cond_destroy(&pend->idle);
            free(pend);
            return false;
        }
        xs.cfs = p;
        xs.cap = cap;
    }
    memmove(xs.cfs + at + 1, xs.cfs + at, (xs.n - at) * sizeof(xs_cf));
    xs.cfs[at] = (xs_cf){id, period, h, pend};
    xs.n++;
    return true;
}

static void free_pending(xs_pending *p)
{
    xb_clear(&p->buf);
    xb_clear(&p->frozen);
    xb_clear(&p->spare);
    free(p->sorted);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->idle);
    free(p);
}

static void make_options(void)
{
    xs.opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(xs.opts, 1);
    rocksdb_options_set_create_missing_column_families(xs.opts, 1);
    rocksdb_options_set_max_background_jobs(xs.opts, 2);
    rocksdb_options_set_write_buffer_size(xs.opts, XS_WRITE_BUFFER);
    rocksdb_options_set_db_write_buffer_size(xs.opts, XS_ALL_BUFFERS);
    rocksdb_options_set_max_write_buffer_number(xs.opts, 3);
    /* A compaction reads its inputs 2 MiB at a time: without readahead it
     * read them one 4 KiB block per pread (RocksDB opens table files for
     * random reads), 8,000 system calls a second in bench/server/exact,
     * and took a third more CPU per byte it wrote. */
    rocksdb_options_compaction_readahead_size(xs.opts, 2u << 20);
    /* Nothing is written through RocksDB's write buffer but the applied
     * mark: periods arrive as sorted table files (flush_pending), which
     * overlap (the keys are random). Universal compaction merges runs of
     * like size, at least four at once, when eight have gathered, so a key
     * is rewritten about log4(runs) times. Leveled compaction rewrote the
     * whole base level at each merge from L0 and each key about ten times
     * on its way to the last level: over ten minutes of bench/server/exact
     * (375 million items) 3.39 us of server CPU an item instead of 2.47. */
    rocksdb_options_set_compaction_style(xs.opts, rocksdb_universal_compaction);
    rocksdb_universal_compaction_options_t *u = rocksdb_universal_compaction_options_create();
    rocksdb_universal_compaction_options_set_size_ratio(u, 1);
    rocksdb_universal_compaction_options_set_min_merge_width(u, 4);
    rocksdb_options_set_universal_compaction_options(xs.opts, u);
    rocksdb_universal_compaction_options_destroy(u);
    rocksdb_options_set_level0_file_num_compaction_trigger(xs.opts, 8);
    rocksdb_options_set_level0_slowdown_writes_trigger(xs.opts, 1 << 20);
    rocksdb_options_set_level0_stop_writes_trigger(xs.opts, 1 << 20);
    rocksdb_options_set_compression(xs.opts, rocksdb_no_compression);
    rocksdb_options_set_bottommost_compression(xs.opts, rocksdb_zstd_compression);
    /* zstd's fast level -1 instead of its default 3: on blocks of random
     * 16-byte keys it compresses 2.5 times as fast to 3.6% more bytes (the
     * keys themselves do not compress; what is saved is the internal key's
     * zeroed sequence number and the block's framing). */
    rocksdb_options_set_bottommost_compression_options(xs.opts, -14, -1, 0, 0, 1);
    /* RocksDB's own LOG only gets its header at open: a LOG write that
     * failed (a full disk) makes every later one abort in Debian's build,
     * which keeps RocksDB's assertions. Errors reach our log through the
     * statuses RocksDB returns. */
    rocksdb_options_set_info_log_level(xs.opts, 5 /* header only */);
    rocksdb_options_set_keep_log_file_num(xs.opts, 2);
    rocksdb_options_set_bytes_per_sync(xs.opts, 1u << 20);
    xs.cache = rocksdb_cache_create_lru(XS_CACHE_BYTES);
    xs.table = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_cache(xs.table, xs.cache);
    /* A lookup that misses the cache reads and, on the last level,
     * decompresses one data block: with 4 KiB blocks instead of 16 a
     * 90-second bench/server/exact took 2.15 us an item instead of 2.46,
     * at about the same disk per item. */
    rocksdb_block_based_options_set_block_size(xs.table, 4u << 10);
    /* Bloom filters (10 bits a key) on every run but the last: a lookup of
     * an absent key (one of our filter's false positives) read a block of
     * each run, eight or more reads where the last run needs one. The
     * last, the largest, has none (optimize_filters_for_hits). Filters and
     * indexes stay with their table readers, outside the block cache,
     * where one file's 5 MB filter evicted the data blocks. */
    rocksdb_block_based_options_set_filter_policy(xs.table,
                                                  rocksdb_filterpolicy_create_bloom_full(10));
    rocksdb_options_set_optimize_filters_for_hits(xs.opts, 1);
    rocksdb_block_based_options_set_cache_index_and_filter_blocks(xs.table, 0);
    rocksdb_options_set_block_based_table_factory(xs.opts, xs.table);
    /* Table files of our own go in uncompressed: they are merged again
     * soon, and lookups in them need no decompression. Compactions that
     * make the last run compress it. */
    xs.sst_opts = rocksdb_options_create_copy(xs.opts);
    rocksdb_options_set_bottommost_compression(xs.sst_opts, rocksdb_no_compression);
    xs.wo = rocksdb_writeoptions_create();
    rocksdb_writeoptions_disable_WAL(xs.wo, 1);
    xs.ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_verify_checksums(xs.ro, 1);
    /* Lookups are of random keys: a data block read for one is seldom read
     * again before the 64 MiB block cache evicts it, and putting each in
     * and evicting another cost more than the reads it saved. */
    rocksdb_readoptions_set_fill_cache(xs.ro, 0);
    xs.fo = rocksdb_flushoptions_create();
    rocksdb_flushoptions_set_wait(xs.fo, 1);
    xs.eo = rocksdb_envoptions_create();
    xs.io = rocksdb_ingestexternalfileoptions_create();
    rocksdb_ingestexternalfileoptions_set_move_files(xs.io, 1);
}

static void free_options(void)
{
    if (xs.opts)
        rocksdb_options_destroy(xs.opts);
    if (xs.sst_opts)
        rocksdb_options_destroy(xs.sst_opts);
    if (xs.table)
        rocksdb_block_based_options_destroy(xs.table);
    if (xs.cache)
        rocksdb_cache_destroy(xs.cache);
    if (xs.wo)
        rocksdb_writeoptions_destroy(xs.wo);
    if (xs.ro)
        rocksdb_readoptions_destroy(xs.ro);
    if (xs.fo)
        rocksdb_flushoptions_destroy(xs.fo);
    if (xs.eo)
        rocksdb_envoptions_destroy(xs.eo);
    if (xs.io)
        rocksdb_ingestexternalfileoptions_destroy(xs.io);
    xs.eo = NULL;
    xs.io = NULL;
    xs.opts = NULL;
    xs.sst_opts = NULL;
    xs.table = NULL;
    xs.cache = NULL;
    xs.wo = NULL;
    xs.ro = NULL;
    xs.fo = NULL;
}

static void fail_open(const char *msg, char *err, size_t errlen)
{
    snprintf(xs.error, sizeof(xs.error), "%s", msg);
    snprintf(err, errlen, "%s", msg);
    free_options();
}

/* Open DIR/exact and its flusher; xs.ok is left to the caller. */
static bool open_store(const char *dir, char *err, size_t errlen)
{
    char path[4200], msg[8192];
    snprintf(path, sizeof(path), "%s/exact", dir);
    /* RocksDB opens its files by name: the directory itself must be a real
     * directory, not a link to somewhere else (docs/SECURITY.md). */
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISDIR(st.st_mode)) {
        snprintf(msg, sizeof(msg), "%s is not a directory", path);
        fail_open(msg, err, errlen);
        return false;
    }
    if (!datadir_mkdir(path)) {
        snprintf(msg, sizeof(msg), "can't create %s: %s", path, datadir_strerror(errno));
        fail_open(msg, err, errlen);
        return false;
    }
    snprintf(xs.dir, sizeof(xs.dir), "%s", dir);
    /* Table files are written here, then moved into the store. */
    snprintf(xs.tmpdir, sizeof(xs.tmpdir), "%s/exact-tmp", dir);
    if (!datadir_mkdir(xs.tmpdir)) {
        snprintf(msg, sizeof(msg), "can't create %s: %s", xs.tmpdir, datadir_strerror(errno));
        fail_open(msg, err, errlen);
        return false;
    }
    make_options();
    char *rerr = NULL;
    size_t nnames = 0;
    char **names = rocksdb_list_column_families(xs.opts, path, &nnames, &rerr);
    if (rerr) {
        /* A new store has no column family list yet. The call still
         * allocated the (empty) list. */
        free(rerr);
        rerr = NULL;
        rocksdb_list_column_families_destroy(names, nnames);
        names = NULL;
        nnames = 0;
    }
    size_t ncf = nnames ? nnames : 1;
    const char **cfn = calloc(ncf, sizeof(char *));
    const rocksdb_options_t **cfo = calloc(ncf, sizeof(*cfo));
    rocksdb_column_family_handle_t **hs = calloc(ncf, sizeof(*hs));
    if (!cfn || !cfo || !hs) {
        free(cfn);
        free(cfo);
        free(hs);
        if (names)
            rocksdb_list_column_families_destroy(names, nnames);
        fail_open("out of memory opening the exact store", err, errlen);
        return false;
    }
    for (size_t i = 0; i < ncf; i++) {
        cfn[i] = nnames ? names[i] : "default";
        cfo[i] = xs.opts;
    }
    xs.db = rocksdb_open_column_families(xs.opts, path, (int)ncf, cfn, cfo, hs, &rerr);
    bool ok = rerr == NULL;
    if (!ok) {
        snprintf(msg, sizeof(msg), "can't open %s: %s", path, rerr);
        free(rerr);
    }
    pthread_rwlock_wrlock(&xs.lock);
    for (size_t i = 0; ok && i < ncf; i++) {
        uint64_t id;
        int64_t period;
        bool found;
        if (strcmp(cfn[i], "default") == 0) {
            xs.def = hs[i];
        } else if (exact_period_parse(cfn[i], &id, &period)) {
            size_t at = find_cf(id, period, &found);
            if (!insert_cf(at, id, period, hs[i])) {
                snprintf(msg, sizeof(msg), "out of memory opening %s", path);
                ok = false;
            }
        } else {
            rocksdb_column_family_handle_destroy(hs[i]);
        }
    }
    pthread_rwlock_unlock(&xs.lock);
    xs.bg_errors = 0;
    if (ok)
        rocksdb_property_int(xs.db, "rocksdb.background-errors", &xs.bg_errors);
    if (ok) {
        size_t vlen = 0;
        char *v =
            rocksdb_get_cf(xs.db, xs.ro, xs.def, APPLIED_KEY, strlen(APPLIED_KEY), &vlen, &rerr);
        if (rerr) {
            snprintf(msg, sizeof(msg), "can't read %s: %s", path, rerr);
            free(rerr);
            ok = false;
        } else if (v && vlen == 8) {
            atomic_store(&xs.applied, le_load((const uint8_t *)v, 8));
        }
        free(v);
    }
    free(cfn);
    free(cfo);
    free(hs);
    if (names)
        rocksdb_list_column_families_destroy(names, nnames);
    if (!ok) {
        xs_close();
        fail_open(msg, err, errlen);
        return false;
    }
    if (!flusher_start()) {
        xs_close();
        fail_open("can't start the exact store's flusher thread", err, errlen);
        return false;
    }
    return true;
}

bool xs_open(const char *dir, char *err, size_t errlen)
{
    if (!open_store(dir, err, errlen))
        return false;
    atomic_store(&xs.ok, true);
    return true;
}

bool xs_write_failing(void) { return atomic_load(&xs.write_failing); }

bool xs_reopen(const char *dir, char *err, size_t errlen)
{
    /* The buffers stay: what they hold is acknowledged and not yet in a
     * table file. */
    atomic_store(&xs.ok, false);
    flusher_stop();
    pthread_rwlock_wrlock(&xs.lock);
    xs_cf *kept = xs.cfs;
    size_t nkept = xs.n;
    xs.cfs = NULL;
    xs.n = xs.cap = 0;
    for (size_t i = 0; i < nkept; i++)
        rocksdb_column_family_handle_destroy(kept[i].h);
    if (xs.def)
        rocksdb_column_family_handle_destroy(xs.def);
    xs.def = NULL;
    if (xs.db)
        rocksdb_close(xs.db);
    xs.db = NULL;
    pthread_rwlock_unlock(&xs.lock);
    free_options();
    bool ok = open_store(dir, err, errlen);
    pthread_rwlock_wrlock(&xs.lock);
    for (size_t i = 0; ok && i < nkept; i++) {
        bool have;
        size_t at = find_cf(kept[i].id, kept[i].period, &have);
        if (!have) {
            char name[64], *rerr = NULL;
            exact_period_name(name, sizeof(name), kept[i].id, kept[i].period);
            rocksdb_column_family_handle_t *h =
                rocksdb_create_column_family(xs.db, xs.opts, name, &rerr);
            if (rerr) {
                set_err(err, errlen, "can't create a period", rerr);
                ok = false;
                break;
            }
            if (!insert_cf(at, kept[i].id, kept[i].period, h)) {
                rocksdb_column_family_handle_destroy(h);
                snprintf(err, errlen, "out of memory reopening the exact store");
                ok = false;
                break;
            }
        }
        free_pending(xs.cfs[at].pend);
        xs.cfs[at].pend = kept[i].pend;
        kept[i].pend = NULL;
    }
    pthread_rwlock_unlock(&xs.lock);
    for (size_t i = 0; i < nkept; i++)
        if (kept[i].pend)
            free_pending(kept[i].pend);
    free(kept);
    if (!ok) {
        xs_close_failed(err);
        return false;
    }
    atomic_store(&xs.write_failing, false);
    atomic_store(&xs.ok, true);
    return true;
}

void xs_close(void)
{
    atomic_store(&xs.ok, false);
    atomic_fetch_add(&xs.epoch, 1);
    flusher_stop();
    pthread_rwlock_wrlock(&xs.lock);
    for (size_t i = 0; i < xs.n; i++) {
        rocksdb_column_family_handle_destroy(xs.cfs[i].h);
        free_pending(xs.cfs[i].pend);
    }
    free(xs.cfs);
    xs.cfs = NULL;
    xs.n = xs.cap = 0;
    if (xs.def)
        rocksdb_column_family_handle_destroy(xs.def);
    xs.def = NULL;
    if (xs.db)
        rocksdb_close(xs.db);
    xs.db = NULL;
    pthread_rwlock_unlock(&xs.lock);
    free_options();
    snprintf(xs.error, sizeof(xs.error), "the exact store is closed");
}

void xs_close_failed(const char *why)
{
    xs_close();
    snprintf(xs.error, sizeof(xs.error), "%s", why);
}

bool xs_ok(void) { return atomic_load(&xs.ok); }

const char *xs_error(void) { return xs.error; }

static bool unavailable(char *err, size_t errlen)
{
    snprintf(err, errlen, "%s", xs.error);
    return false;
}

bool xs_get(uint64_t id, const int64_t *periods, size_t np, const uint8_t *fps, size_t n,
            uint8_t *found, char *err, size_t errlen)
{
    memset(found, 0, n);
    if (n == 0)
        return true;
    if (!xs_ok())
        return unavailable(err, errlen);
    const char **keys = malloc(n * sizeof(char *));
    size_t *lens = malloc(n * sizeof(size_t));
    size_t *idx = malloc(n * sizeof(size_t));
    rocksdb_pinnableslice_t **vals = calloc(n, sizeof(*vals));
    char **errs = calloc(n, sizeof(char *));
    bool ok = keys && lens && idx && vals && errs;
    if (!ok)
        snprintf(err, errlen, "out of memory reading the exact store");
    pthread_rwlock_rdlock(&xs.lock);
    if (ok && xs.db == NULL) {
        snprintf(err, errlen, "%s", xs.error);
        ok = false;
    }
    for (size_t p = 0; ok && p < np; p++) {
        bool have;
        size_t at = find_cf(id, periods[p], &have);
        if (!have)
            continue;
        size_t m = 0;
        /* The period's buffer first; what it lacks is either in a table
         * file already or nowhere (adds to a filter are serialized with its
         * reads, so nothing enters the buffer meanwhile). */
        xs_pending *pend = xs.cfs[at].pend;
        pthread_mutex_lock(&pend->mu);
        for (size_t i = 0; i < n; i++)
            if (!found[i] && (xb_has(&pend->buf, fps + XS_FP_LEN * i) ||
                              xb_has(&pend->frozen, fps + XS_FP_LEN * i)))
                found[i] = 1;
        pthread_mutex_unlock(&pend->mu);
        for (size_t i = 0; i < n; i++) {
            if (found[i])
                continue;
            keys[m] = (const char *)fps + XS_FP_LEN * i;
            lens[m] = XS_FP_LEN;
            idx[m++] = i;
        }
        if (m == 0)
            break;
        rocksdb_batched_multi_get_cf(xs.db, xs.ro, xs.cfs[at].h, m, keys, lens, vals, errs, false);
        for (size_t j = 0; j < m; j++) {
            if (errs[j]) {
                if (ok)
                    set_err(err, errlen, "exact store read", errs[j]);
                else
                    free(errs[j]);
                errs[j] = NULL;
                ok = false;
            }
            if (vals[j]) {
                found[idx[j]] = 1;
                rocksdb_pinnableslice_destroy(vals[j]);
                vals[j] = NULL;
            }
        }
    }
    pthread_rwlock_unlock(&xs.lock);
    atomic_fetch_add_explicit(&xs.gets, n, memory_order_relaxed);
    free(keys);
    free(lens);
    free(idx);
    free(vals);
    free(errs);
    return ok;
}

uint64_t xs_epoch(void) { return atomic_load(&xs.epoch); }

/* The handle of (id, period), created when missing; the lock is held
 * shared on return (true), released on failure. */
static rocksdb_column_family_handle_t *open_period(uint64_t id, int64_t period, char *err,
                                                   size_t errlen)
{
    bool have;
    pthread_rwlock_rdlock(&xs.lock);
    size_t at = find_cf(id, period, &have);
    if (have)
        return xs.cfs[at].h;
    pthread_rwlock_unlock(&xs.lock);
    pthread_rwlock_wrlock(&xs.lock);
    if (xs.db == NULL) {
        pthread_rwlock_unlock(&xs.lock);
        unavailable(err, errlen);
        return NULL;
    }
    at = find_cf(id, period, &have);
    if (!have) {
        char name[64], *rerr = NULL;
        exact_period_name(name, sizeof(name), id, period);
        if (!write_begin(err, errlen)) {
            pthread_rwlock_unlock(&xs.lock);
            return NULL;
        }
        rocksdb_column_family_handle_t *h =
            rocksdb_create_column_family(xs.db, xs.opts, name, &rerr);
        if (!write_done("can't create a period", rerr, err, errlen)) {
            pthread_rwlock_unlock(&xs.lock);
            return NULL;
        }
        if (!insert_cf(at, id, period, h)) {
            rocksdb_drop_column_family(xs.db, h, &rerr);
            free(rerr);
            rocksdb_column_family_handle_destroy(h);
            pthread_rwlock_unlock(&xs.lock);
            snprintf(err, errlen, "out of memory creating an exact store period");
            return NULL;
        }
    }
    /* Downgrade: readers may run meanwhile, nobody drops it before we
     * take the lock again because drops look it up again. */
    pthread_rwlock_unlock(&xs.lock);
    pthread_rwlock_rdlock(&xs.lock);
    at = find_cf(id, period, &have);
    if (!have) {
        pthread_rwlock_unlock(&xs.lock);
        snprintf(err, errlen, "exact store period dropped while written");
        return NULL;
    }
    return xs.cfs[at].h;
}

/* RocksDB's table-file writer drops what it wrote from the page cache
 * (fadvise DONTNEED). Read back ahead of its ingest, the file is then read
 * from the disk in large requests, where otherwise each lookup of the
 * filter's positives in it and the compaction that merges it read 4 KiB
 * at a time: over ten minutes of bench/server/exact each worker read 3.1
 * GB from the disk that way and the compaction 2.4 GB (0.36 and 0.27 GB
 * with the read-back). WILLNEED reads at most the device's read-ahead
 * window a call (128 KiB by default), hence the steps; the reads go on in
 * the background. Only a hint: a file that cannot be opened here is read
 * from the disk later as before. */
static void cache_table(const char *path)
{
    enum { STEP = 128 << 10 };
    int fd = datadir_open_read(path);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0)
        for (off_t off = 0; off < st.st_size; off += STEP)
            if (posix_fadvise(fd, off, STEP, POSIX_FADV_WILLNEED) != 0)
                break;
    close(fd);
}

/* Write keys as one table file and move it into the period's column
 * family. */
static bool write_table(const xs_cf *cf, const xs_buffer *b, char *err, size_t errlen)
{
    if (b->n == 0)
        return true;
    /* One writer per period at a time (busy, or pend->mu held). */
    xs_pending *pend = cf->pend;
    if (pend->sorted_cap < b->n) {
        free(pend->sorted);
        pend->sorted = malloc(b->n * XB_KEY);
        pend->sorted_cap = pend->sorted ? b->n : 0;
        if (pend->sorted == NULL) {
            snprintf(err, errlen, "out of memory writing the exact store");
            return false;
        }
    }
    /* Refused at once while failing (written again once healed). */
    if (atomic_load(&xs.write_failing) && write_refused(err, errlen))
        return false;
    uint8_t *keys = pend->sorted;
    xb_sorted_into(b, keys);
    static _Atomic uint64_t seq;
    char path[4400], *rerr = NULL;
    snprintf(path, sizeof(path), "%s/%016" PRIx64 ".%" PRId64 ".%" PRIu64 ".sst", xs.tmpdir, cf->id,
             cf->period, atomic_fetch_add(&seq, 1));
    rocksdb_sstfilewriter_t *w = rocksdb_sstfilewriter_create(xs.eo, xs.sst_opts);
    rocksdb_sstfilewriter_open(w, path, &rerr);
    for (size_t i = 0; rerr == NULL && i < b->n; i++)
        rocksdb_sstfilewriter_put(w, (const char *)keys + XB_KEY * i, XB_KEY, "", 0, &rerr);
    if (rerr == NULL)
        rocksdb_sstfilewriter_finish(w, &rerr);
    rocksdb_sstfilewriter_destroy(w);
    if (rerr == NULL)
        cache_table(path);
    bool ok = false;
    if (write_begin(err, errlen)) {
        if (rerr == NULL) {
            const char *files[1] = {path};
            rocksdb_ingest_external_file_cf(xs.db, cf->h, files, 1, xs.io, &rerr);
        }
        ok = write_done("writing a table file", rerr, err, errlen);
    } else {
        free(rerr);
    }
    unlink(path);
    return ok;
}

/* ---- the flusher: full buffers written out beside the commands ---- */

typedef struct fl_job {
    uint64_t id;
    int64_t period;
} fl_job;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    fl_job *q;
    size_t n, cap;
    bool running, stop;
} fl = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* A frozen buffer written out; if that fails its keys go back to the
 * buffer taking adds (kept for the next try, still read). xs.lock held
 * shared, pend->busy set. */
static bool flush_frozen(const xs_cf *cf, char *err, size_t errlen)
{
    xs_pending *pend = cf->pend;
    /* Nobody changes frozen while busy: written without pend->mu. */
    bool ok = write_table(cf, &pend->frozen, err, errlen);
    pthread_mutex_lock(&pend->mu);
    if (!ok) {
        server_log(LOG_WARNING, "exact store: %s (the keys stay in memory for the next try)", err);
        for (size_t i = 0; i < pend->frozen.n; i++)
            if (!xb_add(&pend->buf, pend->frozen.keys + XB_KEY * i))
                break;
    }
    if (pend->spare.cap == 0) {
        xb_recycle(&pend->frozen);
        pend->spare = pend->frozen;
        memset(&pend->frozen, 0, sizeof(pend->frozen));
    } else {
        xb_clear(&pend->frozen);
    }
    pend->busy = false;
    pthread_cond_broadcast(&pend->idle);
    pthread_mutex_unlock(&pend->mu);
    return ok;
}

static void *flusher(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&fl.mu);
    for (;;) {
        while (fl.n == 0 && !fl.stop)
            pthread_cond_wait(&fl.cv, &fl.mu);
        if (fl.n == 0)
            break; /* stopping, every job done */
        fl_job j = fl.q[0];
        memmove(fl.q, fl.q + 1, (--fl.n) * sizeof(fl_job));
        pthread_mutex_unlock(&fl.mu);
        pthread_rwlock_rdlock(&xs.lock);
        bool have;
        size_t at = find_cf(j.id, j.period, &have);
        /* Dropped meanwhile (and its buffers with it), or already done. */
        char err[512];
        if (have && xs.cfs[at].pend->busy)
            flush_frozen(&xs.cfs[at], err, sizeof(err));
        pthread_rwlock_unlock(&xs.lock);
        pthread_mutex_lock(&fl.mu);
    }
    pthread_mutex_unlock(&fl.mu);
    return NULL;
}

static bool flusher_start(void)
{
    pthread_mutex_lock(&fl.mu);
    fl.stop = false;
    fl.running = pthread_create(&fl.th, NULL, flusher, NULL) == 0;
    pthread_mutex_unlock(&fl.mu);
    return fl.running;
}

/* After the jobs queued: a store closed leaves only the buffers taking adds
 * unwritten (their keys are in the log from the applied mark). */
static void flusher_stop(void)
{
    pthread_mutex_lock(&fl.mu);
    bool running = fl.running;
    fl.stop = true;
    fl.running = false;
    pthread_cond_signal(&fl.cv);
    pthread_mutex_unlock(&fl.mu);
    if (running)
        pthread_join(fl.th, NULL);
}

/* Hand the full buffer to the flusher (after the one before it is out);
 * pend->mu and xs.lock (shared) held. */
static bool freeze(const xs_cf *cf, char *err, size_t errlen)
{
    xs_pending *pend = cf->pend;
    while (pend->busy)
        pthread_cond_wait(&pend->idle, &pend->mu);
    pthread_mutex_lock(&fl.mu);
    if (fl.n == fl.cap) {
        size_t cap = fl.cap ? 2 * fl.cap : 16;
        fl_job *q = realloc(fl.q, cap * sizeof(*q));
        if (q == NULL) {
            pthread_mutex_unlock(&fl.mu);
            /* Written here instead. */
            if (!write_table(cf, &pend->buf, err, errlen))
                return false;
            xb_clear(&pend->buf);
            return true;
        }
        fl.q = q;
        fl.cap = cap;
    }
    fl.q[fl.n++] = (fl_job){cf->id, cf->period};
    pend->frozen = pend->buf;
    pend->buf = pend->spare;
    memset(&pend->spare, 0, sizeof(pend->spare));
    pend->busy = true;
    pthread_cond_signal(&fl.cv);
    pthread_mutex_unlock(&fl.mu);
    return true;
}

/* Everything a period holds in memory written out, now; pend->mu and
 * xs.lock (shared) held. */
static bool flush_pending(const xs_cf *cf, char *err, size_t errlen)
{
    xs_pending *pend = cf->pend;
    while (pend->busy)
        pthread_cond_wait(&pend->idle, &pend->mu);
    if (!write_table(cf, &pend->buf, err, errlen))
        return false;
    xb_clear(&pend->buf);
    return true;
}

bool xs_put(uint64_t id, int64_t period, const uint8_t *fps, size_t n, char *err, size_t errlen)
{
    if (n == 0)
        return true;
    if (!xs_ok())
        return unavailable(err, errlen);
    if (open_period(id, period, err, errlen) == NULL)
        return false;
    bool have;
    const xs_cf *cf = &xs.cfs[find_cf(id, period, &have)];
    pthread_mutex_lock(&cf->pend->mu);
    size_t limit = (size_t)atomic_load(&cfg.exact_buffer_keys);
    xs_buffer *b = &cf->pend->buf;
    bool ok = true;
    /* Table files failing: the buffer keeps what they would hold, up to a
     * bound; past it each put tries a write itself and is refused while
     * that fails. */
    if (atomic_load(&xs.write_failing) && b->n + n > XS_FAILED_FACTOR * limit)
        ok = flush_pending(cf, err, errlen);
    /* Handed out before it would have to grow: a rehash costs more than a
     * smaller table file. */
    else if (b->n && b->n + n > b->cap)
        ok = freeze(cf, err, errlen);
    if (ok && !(xb_reserve(b, limit) && xb_add_many(b, fps, n))) {
        snprintf(err, errlen, "out of memory writing the exact store");
        ok = false;
    }
    if (ok && b->n >= limit)
        ok = freeze(cf, err, errlen);
    pthread_mutex_unlock(&cf->pend->mu);
    pthread_rwlock_unlock(&xs.lock);
    if (ok)
        atomic_fetch_add_explicit(&xs.puts, n, memory_order_relaxed);
    return ok;
}

static bool drop_at(size_t at, char *err, size_t errlen)
{
    char *rerr = NULL;
    atomic_fetch_add(&xs.epoch, 1);
    if (!write_begin(err, errlen))
        return false;
    rocksdb_drop_column_family(xs.db, xs.cfs[at].h, &rerr);
    if (!write_done("can't drop a period", rerr, err, errlen))
        return false;
    rocksdb_column_family_handle_destroy(xs.cfs[at].h);
    free_pending(xs.cfs[at].pend);
    memmove(xs.cfs + at, xs.cfs + at + 1, (xs.n - at - 1) * sizeof(xs_cf));
    xs.n--;
    return true;
}

bool xs_drop(uint64_t id, int64_t period, char *err, size_t errlen)
{
    if (!xs_ok())
        return unavailable(err, errlen);
    bool ok = true, have;
    pthread_rwlock_wrlock(&xs.lock);
    if (xs.db == NULL)
        ok = unavailable(err, errlen);
    else if (period != INT64_MIN) {
        size_t at = find_cf(id, period, &have);
        if (have)
            ok = drop_at(at, err, errlen);
    } else {
        size_t at = find_cf(id, INT64_MIN, &have);
        while (ok && at < xs.n && xs.cfs[at].id == id)
            ok = drop_at(at, err, errlen);
    }
    pthread_rwlock_unlock(&xs.lock);
    return ok;
}

size_t xs_periods(uint64_t id, int64_t *out, size_t max)
{
    bool have;
    size_t k = 0;
    pthread_rwlock_rdlock(&xs.lock);
    for (size_t at = find_cf(id, INT64_MIN, &have); at < xs.n && xs.cfs[at].id == id; at++, k++)
        if (k < max)
            out[k] = xs.cfs[at].period;
    pthread_rwlock_unlock(&xs.lock);
    return k;
}

bool xs_sync(uint64_t upto, char *err, size_t errlen)
{
    if (!xs_ok())
        return unavailable(err, errlen);
    char *rerr = NULL;
    pthread_rwlock_rdlock(&xs.lock);
    if (xs.db == NULL) {
        pthread_rwlock_unlock(&xs.lock);
        return unavailable(err, errlen);
    }
    /* Each period's buffer is frozen and written while adds go on into a
     * new one: what was added before the call is in the frozen one. */
    bool ok = true;
    for (size_t i = 0; i < xs.n && ok; i++) {
        xs_pending *pend = xs.cfs[i].pend;
        pthread_mutex_lock(&pend->mu);
        while (pend->busy)
            pthread_cond_wait(&pend->idle, &pend->mu);
        bool some = pend->buf.n > 0;
        if (some) {
            pend->frozen = pend->buf;
            pend->buf = pend->spare;
            memset(&pend->spare, 0, sizeof(pend->spare));
            pend->busy = true;
        }
        pthread_mutex_unlock(&pend->mu);
        if (some)
            ok = flush_frozen(&xs.cfs[i], err, errlen);
    }
    if (!ok) {
        pthread_rwlock_unlock(&xs.lock);
        return false;
    }
    /* Only once every period is on disk: the mark, flushed too. */
    uint8_t v[8];
    le_store(v, upto, 8);
    ok = write_begin(err, errlen);
    if (ok) {
        rocksdb_put_cf(xs.db, xs.wo, xs.def, APPLIED_KEY, strlen(APPLIED_KEY), (const char *)v, 8,
                       &rerr);
        if (rerr == NULL)
            rocksdb_flush_cf(xs.db, xs.fo, xs.def, &rerr);
        ok = write_done("exact store flush", rerr, err, errlen);
    }
    pthread_rwlock_unlock(&xs.lock);
    if (ok)
        atomic_store(&xs.applied, upto);
    return ok;
}

uint64_t xs_applied(void) { return atomic_load(&xs.applied); }

void xs_gc(bool (*live)(uint64_t id))
{
    if (!xs_ok())
        return;
    char err[256];
    pthread_rwlock_wrlock(&xs.lock);
    for (size_t at = 0; xs.db && at < xs.n;)
        if (live(xs.cfs[at].id) || !drop_at(at, err, sizeof(err)))
            at++;
    pthread_rwlock_unlock(&xs.lock);
}

bool xs_checkpoint(const char *path, char *err, size_t errlen)
{
    if (!xs_ok())
        return unavailable(err, errlen);
    char *rerr = NULL;
    pthread_rwlock_rdlock(&xs.lock);
    if (xs.db == NULL) {
        pthread_rwlock_unlock(&xs.lock);
        return unavailable(err, errlen);
    }
    /* A checkpoint flushes RocksDB's write buffer: a write like the rest. */
    if (!write_begin(err, errlen)) {
        pthread_rwlock_unlock(&xs.lock);
        return false;
    }
    rocksdb_checkpoint_t *cp = rocksdb_checkpoint_object_create(xs.db, &rerr);
    if (cp) {
        rocksdb_checkpoint_create(cp, path, 0, &rerr);
        rocksdb_checkpoint_object_destroy(cp);
    }
    bool ok = write_done("exact store checkpoint", rerr, err, errlen);
    pthread_rwlock_unlock(&xs.lock);
    return ok;
}

void xs_compact(void)
{
    if (!xs_ok())
        return;
    /* Not under wmu (it may take long): a compaction that fails shows in
     * RocksDB's count of background errors, seen by the next write. */
    char err[256];
    pthread_rwlock_rdlock(&xs.lock);
    for (size_t i = 0; xs.db && i < xs.n && !write_refused(err, sizeof(err)); i++)
        rocksdb_compact_range_cf(xs.db, xs.cfs[i].h, NULL, 0, NULL, 0);
    pthread_rwlock_unlock(&xs.lock);
}

static uint64_t prop(rocksdb_column_family_handle_t *h, const char *name)
{
    uint64_t v = 0;
    return rocksdb_property_int_cf(xs.db, h, name, &v) == 0 ? v : 0;
}

void xs_get_stats(xs_stats *s)
{
    memset(s, 0, sizeof(*s));
    s->gets = atomic_load(&xs.gets);
    s->puts = atomic_load(&xs.puts);
    if (!xs_ok())
        return;
    pthread_rwlock_rdlock(&xs.lock);
    s->periods = xs.n;
    for (size_t i = 0; i < xs.n; i++) {
        if (i == 0 || xs.cfs[i].id != xs.cfs[i - 1].id)
            s->filters++;
        s->sst_bytes += prop(xs.cfs[i].h, "rocksdb.total-sst-files-size");
        s->reader_bytes += prop(xs.cfs[i].h, "rocksdb.estimate-table-readers-mem");
        pthread_mutex_lock(&xs.cfs[i].pend->mu);
        const xs_pending *p = xs.cfs[i].pend;
        s->memtable_bytes += xb_bytes(&p->buf) + xb_bytes(&p->frozen);
        s->keys += prop(xs.cfs[i].h, "rocksdb.estimate-num-keys") + p->buf.n + p->frozen.n;
        pthread_mutex_unlock(&xs.cfs[i].pend->mu);
    }
    pthread_rwlock_unlock(&xs.lock);
}

uint64_t xs_count(uint64_t id)
{
    uint64_t k = 0;
    bool have;
    if (!xs_ok())
        return 0;
    pthread_rwlock_rdlock(&xs.lock);
    for (size_t at = find_cf(id, INT64_MIN, &have); at < xs.n && xs.cfs[at].id == id; at++)
        k += prop(xs.cfs[at].h, "rocksdb.estimate-num-keys") + xs.cfs[at].pend->buf.n +
             xs.cfs[at].pend->frozen.n;
    pthread_rwlock_unlock(&xs.lock);
    return k;
}

void xs_heal(void)
{
    static int64_t last_ms;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    if (!xs_ok() || !xs_write_failing() || now - last_ms < 1000)
        return;
    last_ms = now;
    /* A file written and synced where table files go: the disk takes
     * writes again. Only then is the store opened again (RocksDB refuses
     * every write after one failed, until then). */
    char path[4300];
    static const uint8_t block[4096];
    snprintf(path, sizeof(path), "%s/probe", xs.tmpdir);
    int fd = datadir_create(path);
    bool writable =
        fd >= 0 && write(fd, block, sizeof(block)) == (ssize_t)sizeof(block) && fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    datadir_unlink(path);
    if (!writable)
        return;
    char dir[4096], err[1024];
    snprintf(dir, sizeof(dir), "%s", xs.dir);
    if (xs_reopen(dir, err, sizeof(err)))
        server_log(LOG_NOTICE,
                   "The exact store takes writes again: opened again after write errors");
    else
        server_log(LOG_WARNING,
                   "The exact store could not be opened again (%s): exact filters answer errors "
                   "until a restart, which replays the log into it",
                   err);
}

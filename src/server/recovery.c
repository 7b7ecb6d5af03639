/* Start-up: the newest snapshot, then the log from the snapshot's start.
 *
 *   1. DIR/snapshots/<seq>.index with the highest sequence is the snapshot
 *      (an index appears only by rename once everything it names is on
 *      disk, so any index there is complete). Its keys load on two threads:
 *      each chunk is read (inline in the index or DIR/chunks/<hash>.zst),
 *      decompressed with its size as the cap, checked against its content
 *      hash and handed to serial.h's loader with its image checksum.
 *   2. DIR/log/<first LSN>.wal files in LSN order: records below the
 *      snapshot's start are checked and passed over, the rest replayed
 *      (replay.c). LSNs must follow each other without a gap from the
 *      snapshot's start (or from 1 without a snapshot) to the end.
 *   3. Keys whose absolute expiry has passed are dropped.
 *
 * A record cut by a crash at the very end of the newest log file is
 * dropped with a warning and the file truncated there. Any other damage
 * (a checksum, a length, a missing chunk file, an LSN gap) stops the start
 * with a message naming the file, the offset and the reason, and whatever
 * was loaded is freed: nothing is served half loaded.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "persist.h"
#include "replay.h"
#include "server.h"
#include "snapshot.h"
#include "snapshot_index.h"
#include "util.h"

/* ---- files ---- */

bool persist_read_file(const char *path, uint8_t **out, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return false;
    }
    uint8_t *buf = malloc(st.st_size ? (size_t)st.st_size : 1);
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    if (buf == NULL || got != (size_t)st.st_size) {
        free(buf);
        return false;
    }
    *out = buf;
    *len = got;
    return true;
}

/* Names "<16 hex digits><suffix>" in dir, sorted by their number. */
size_t persist_list(const char *dir, const char *suffix, uint64_t **out) {
    DIR *d = opendir(dir);
    *out = NULL;
    if (d == NULL) return 0;
    size_t n = 0, cap = 0;
    struct dirent *de;
    size_t sl = strlen(suffix);
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l != 16 + sl || strcmp(de->d_name + 16, suffix) != 0) continue;
        uint64_t v = 0;
        bool ok = true;
        for (int i = 0; i < 16 && ok; i++) {
            char c = de->d_name[i];
            int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            ok = x >= 0;
            v = v << 4 | (uint64_t)(x < 0 ? 0 : x);
        }
        if (!ok) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            uint64_t *p = realloc(*out, cap * sizeof(uint64_t));
            if (p == NULL) break;
            *out = p;
        }
        (*out)[n++] = v;
    }
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && (*out)[j - 1] > (*out)[j]; j--) {
            uint64_t t = (*out)[j];
            (*out)[j] = (*out)[j - 1];
            (*out)[j - 1] = t;
        }
    return n;
}

/* ---- snapshot ---- */

/* Loading runs in three steps: open every key's loader (which checks its
 * image header and allocates the object), then fill chunks on two threads
 * (reading, decompressing and hashing a chunk in parallel, each loader's
 * copy under its own mutex), then finish and insert the keys. Parallel over
 * chunks rather than keys: one 8 GB filter loads as fast as many small. */
typedef struct load_key {
    bloomery_loader *l;
    pthread_mutex_t lock;
} load_key;

typedef struct load_job {
    const char *dir;
    const char *index_path;
    const snap_index *ix;
    load_key *keys;
    uint64_t *work;          /* entry of each chunk, in index order */
    _Atomic uint64_t next;
    _Atomic bool failed;
    pthread_mutex_t lock;
    char err[1024];
} load_job;

static void job_fail(load_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void job_fail(load_job *j, const char *fmt, ...) {
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

static const bloomery_type kind_type[] = {0, BLOOMERY_TYPE_SCALABLE, BLOOMERY_TYPE_COUNTING,
                                          BLOOMERY_TYPE_HLL, BLOOMERY_TYPE_WINDOW,
                                          BLOOMERY_TYPE_CUCKOO};

#define KEYFMT "key '%.*s'"
#define KEYARG(e) (int)((e)->klen < 200 ? (e)->klen : 200), (const char *)(e)->key

/* The raw bytes of chunk c (malloc'd), verified against its hash. */
static uint8_t *read_chunk(load_job *j, const snap_entry *e, const snap_chunk *c) {
    char why[256];
    if (c->where == SNAP_CHUNK_INLINE) {
        uint8_t *raw = malloc(c->raw_len);
        if (raw && chunk_frame_decode(c->frame, c->flen, c->raw_len, c->hash, raw, why, sizeof(why)))
            return raw;
        free(raw);
        job_fail(j, "%s: offset %zu: inline chunk of " KEYFMT ": %s", j->index_path, c->off,
                 KEYARG(e), raw ? why : "out of memory");
        return NULL;
    }
    char hex[33], path[4200];
    chunk_hash_hex(c->hash, hex);
    snprintf(path, sizeof(path), "%s/chunks/%s.zst", j->dir, hex);
    uint8_t *buf, *raw;
    size_t len, off;
    uint32_t rl;
    if (!persist_read_file(path, &buf, &len)) {
        job_fail(j, "%s: offset 0: can't read chunk file (%s), named by %s at offset %zu", path,
                 strerror(errno), j->index_path, c->off);
        return NULL;
    }
    bool ok = chunk_file_decode(buf, len, &c->hash, &raw, &rl, why, sizeof(why), &off);
    free(buf);
    if (!ok) {
        job_fail(j, "%s: offset %zu: %s", path, off, why);
        return NULL;
    }
    if (rl != c->raw_len) {
        free(raw);
        job_fail(j, "%s: offset 12: %u bytes, the index says %u", path, rl, c->raw_len);
        return NULL;
    }
    return raw;
}

static bool open_entry(load_job *j, uint64_t k) {
    const snap_entry *e = &j->ix->entries[k];
    bloomery_loader *l = NULL;
    size_t used;
    int rc = bloomery_loader_open(&l, e->header, e->hlen, 0, &used);
    if (rc != BLOOMERY_OK || used != e->hlen || bloomery_loader_type(l) != kind_type[e->kind] ||
        bloomery_loader_nchunks(l) != e->nchunks) {
        job_fail(j, "%s: offset %zu: " KEYFMT ": %s", j->index_path, e->off, KEYARG(e),
                 rc != BLOOMERY_OK ? bloomery_loader_error(l)
                                   : "image header does not match the entry");
        bloomery_loader_free(l);
        return false;
    }
    for (uint64_t i = 0; i < e->nchunks; i++)
        if (e->chunks[i].raw_len != bloomery_loader_chunk_len(l, i)) {
            job_fail(j, "%s: offset %zu: " KEYFMT ": chunk %" PRIu64 " has the wrong length",
                     j->index_path, e->chunks[i].off, KEYARG(e), i);
            bloomery_loader_free(l);
            return false;
        }
    j->keys[k].l = l;
    return true;
}

static void *load_thread(void *arg) {
    load_job *j = arg;
    for (;;) {
        uint64_t w = atomic_fetch_add(&j->next, 1);
        if (w >= j->ix->nchunks || atomic_load(&j->failed)) break;
        uint64_t k = j->work[w];
        const snap_entry *e = &j->ix->entries[k];
        uint64_t i = (uint64_t)(&j->ix->chunks[w] - e->chunks);
        const snap_chunk *c = &j->ix->chunks[w];
        uint8_t *raw = read_chunk(j, e, c);
        if (raw == NULL) break;
        load_key *lk = &j->keys[k];
        pthread_mutex_lock(&lk->lock);
        int rc = bloomery_loader_chunk(lk->l, i, raw, c->raw_len, c->checksum);
        if (rc != BLOOMERY_OK)
            job_fail(j, "%s: offset %zu: " KEYFMT ": chunk %" PRIu64 ": %s", j->index_path, c->off,
                     KEYARG(e), i, bloomery_loader_error(lk->l));
        pthread_mutex_unlock(&lk->lock);
        free(raw);
        if (rc != BLOOMERY_OK) break;
    }
    return NULL;
}

/* Finish key k's object and insert it. */
static bool install_entry(load_job *j, uint64_t k) {
    const snap_entry *e = &j->ix->entries[k];
    bloomery_loader *l = j->keys[k].l;
    bloomery_object obj = {0};
    if (bloomery_loader_finish(l, &obj) != BLOOMERY_OK) {
        job_fail(j, "%s: offset %zu: " KEYFMT ": %s", j->index_path, e->off, KEYARG(e),
                 bloomery_loader_error(l));
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
    ks_mem_add((int64_t)bytes);
    ks_ref ref;
    bool dup = ks_open(&ref, (const char *)e->key, e->klen, true) != NULL;
    kv_entry *ne = dup ? NULL : ks_add(&ref, o);
    if (ne && e->expire_ms) ks_set_expire(&ref, e->expire_ms);
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

#define LOAD_THREADS 2

static bool load_snapshot(const char *dir, uint64_t *start_lsn, bool *found, char *err,
                          size_t errlen) {
    char sdir[4200], path[4300];
    snprintf(sdir, sizeof(sdir), "%s/snapshots", dir);
    uint64_t *seqs;
    size_t n = persist_list(sdir, ".index", &seqs);
    *found = n > 0;
    if (n == 0) {
        free(seqs);
        return true;
    }
    uint64_t seq = seqs[n - 1];
    free(seqs);
    snprintf(path, sizeof(path), "%s/%016" PRIx64 ".index", sdir, seq);
    uint8_t *buf;
    size_t len, off;
    if (!persist_read_file(path, &buf, &len)) {
        snprintf(err, errlen, "%s: offset 0: can't read: %s", path, strerror(errno));
        return false;
    }
    snap_index ix;
    char why[256];
    if (!snap_index_parse(buf, len, &ix, why, sizeof(why), &off)) {
        snprintf(err, errlen, "%s: offset %zu: %s", path, off, why);
        free(buf);
        return false;
    }
    if (ix.seq != seq) {
        snprintf(err, errlen, "%s: offset 16: holds sequence %" PRIu64, path, ix.seq);
        snap_index_free(&ix);
        free(buf);
        return false;
    }
    int64_t t0 = mono_us();
    load_job j = {.dir = dir, .index_path = path, .ix = &ix};
    pthread_mutex_init(&j.lock, NULL);
    j.keys = calloc(ix.nkeys ? ix.nkeys : 1, sizeof(load_key));
    j.work = malloc((ix.nchunks ? ix.nchunks : 1) * sizeof(uint64_t));
    if (j.keys == NULL || j.work == NULL) job_fail(&j, "out of memory loading %s", path);
    for (uint64_t k = 0, w = 0; k < ix.nkeys && !atomic_load(&j.failed); k++) {
        pthread_mutex_init(&j.keys[k].lock, NULL);
        for (uint64_t i = 0; i < ix.entries[k].nchunks; i++) j.work[w++] = k;
        open_entry(&j, k);
    }
    if (!atomic_load(&j.failed)) {
        pthread_t th[LOAD_THREADS];
        int started = 0;
        for (int i = 0; i < LOAD_THREADS; i++)
            if (pthread_create(&th[i], NULL, load_thread, &j) == 0) started++;
        if (started == 0) load_thread(&j);
        for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    }
    for (uint64_t k = 0; k < ix.nkeys && j.keys; k++) {
        if (j.keys[k].l == NULL) continue;
        if (!atomic_load(&j.failed)) install_entry(&j, k);
        bloomery_loader_free(j.keys[k].l);
        pthread_mutex_destroy(&j.keys[k].lock);
    }
    free(j.keys);
    free(j.work);
    pthread_mutex_destroy(&j.lock);
    bool ok = !atomic_load(&j.failed);
    if (ok) {
        *start_lsn = ix.start_lsn;
        server_log(LOG_NOTICE, "Loaded snapshot %s: %" PRIu64 " keys, %" PRIu64 " chunks in %.3f s",
                   path, ix.nkeys, ix.nchunks, (double)(mono_us() - t0) / 1e6);
        snapshot_adopt(seq, &ix);
    } else {
        snprintf(err, errlen, "%s", j.err);
    }
    snap_index_free(&ix);
    free(buf);
    return ok;
}

/* ---- log ---- */

typedef struct replay_state {
    uint64_t start;       /* first LSN to apply */
    uint64_t expect;      /* next LSN expected; 0 before the first record */
    uint64_t applied, passed;
} replay_state;

static bool replay_file(const char *path, uint64_t name_lsn, bool last, replay_state *rs,
                        char *err, size_t errlen) {
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: offset 0: can't open: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return false;
    }
    size_t len = (size_t)st.st_size;
    const uint8_t *buf = NULL;
    if (len > 0) {
        void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            snprintf(err, errlen, "%s: offset 0: can't map: %s", path, strerror(errno));
            close(fd);
            return false;
        }
        buf = m;
    }
    char why[256];
    bool ok = true;
    uint64_t first;
    size_t off = WAL_HEADER_SIZE;
    if (!wal_header_decode(buf, len, &first, why, sizeof(why))) {
        /* Created but never completed: a crash right at a rotation. */
        bool blank = true;
        for (size_t i = 0; i < len && blank; i++) blank = buf[i] == 0;
        if (last && (len < WAL_HEADER_SIZE || blank)) {
            server_log(LOG_WARNING, "%s: offset 0: no complete header (a crash while it was "
                                    "created); dropping this torn tail", path);
            if (buf) munmap((void *)buf, len);
            close(fd);
            unlink(path);
            return true;
        }
        snprintf(err, errlen, "%s: offset 0: %s", path, why);
        ok = false;
        goto out;
    }
    if (first != name_lsn) {
        snprintf(err, errlen, "%s: offset 16: first LSN %" PRIu64 " does not match the file name",
                 path, first);
        ok = false;
        goto out;
    }
    if (rs->expect && first != rs->expect) {
        snprintf(err, errlen, "%s: offset 16: starts at LSN %" PRIu64 " but LSN %" PRIu64
                 " was expected (a log file is missing)", path, first, rs->expect);
        ok = false;
        goto out;
    }
    if (rs->expect == 0 && first > rs->start) {
        snprintf(err, errlen, "%s: offset 16: the log starts at LSN %" PRIu64 " but the %s needs "
                 "records from LSN %" PRIu64 " (a log file is missing)", path, first,
                 rs->start > 1 ? "snapshot" : "empty data set", rs->start);
        ok = false;
        goto out;
    }
    rs->expect = first;
    for (;;) {
        wal_record rec;
        wal_status stt = wal_record_next(buf, len, off, &rec, why, sizeof(why));
        if (stt == WAL_REC_END) break;
        if (stt == WAL_REC_TORN && last) {
            server_log(LOG_WARNING, "%s: offset %zu: %s; dropping the torn tail (%zu bytes)",
                       path, off, why, len - off);
            if (ftruncate(fd, (off_t)off) != 0 || fdatasync(fd) != 0) {
                snprintf(err, errlen, "%s: offset %zu: can't truncate the torn tail: %s", path,
                         off, strerror(errno));
                ok = false;
            }
            break;
        }
        if (stt != WAL_REC_OK) {
            snprintf(err, errlen, "%s: offset %zu: %s", path, off, why);
            ok = false;
            break;
        }
        if (rec.lsn != rs->expect) {
            snprintf(err, errlen, "%s: offset %zu: record LSN %" PRIu64 " where %" PRIu64
                     " was expected", path, off, rec.lsn, rs->expect);
            ok = false;
            break;
        }
        wal_op op;
        if (!wal_op_parse(rec.type, rec.payload, rec.len, &op, why, sizeof(why))) {
            snprintf(err, errlen, "%s: offset %zu: %s", path, off, why);
            ok = false;
            break;
        }
        if (rec.lsn >= rs->start) {
            replay_apply(&rec, &op);
            rs->applied++;
        } else {
            rs->passed++;
        }
        rs->expect++;
        off += rec.size;
    }
out:
    if (buf) munmap((void *)buf, len);
    close(fd);
    return ok;
}

static bool replay_log(const char *dir, uint64_t start, uint64_t *next_lsn, char *err,
                       size_t errlen) {
    char ldir[4200], path[4300];
    snprintf(ldir, sizeof(ldir), "%s/log", dir);
    uint64_t *files;
    size_t n = persist_list(ldir, ".wal", &files);
    replay_state rs = {start, 0, 0, 0};
    bool ok = true;
    int64_t t0 = mono_us();
    for (size_t i = 0; i < n && ok; i++) {
        /* Wholly before the snapshot: the next file starts at or below it. */
        if (i + 1 < n && files[i + 1] <= start) continue;
        snprintf(path, sizeof(path), "%s/%016" PRIx64 ".wal", ldir, files[i]);
        ok = replay_file(path, files[i], i + 1 == n, &rs, err, errlen);
    }
    free(files);
    if (!ok) return false;
    *next_lsn = rs.expect > start ? rs.expect : start;
    if (rs.applied || rs.passed)
        server_log(LOG_NOTICE, "Replayed %" PRIu64 " log records (LSN %" PRIu64 "..%" PRIu64
                   ") in %.3f s%s", rs.applied, start, *next_lsn - 1,
                   (double)(mono_us() - t0) / 1e6, replay_skipped() ? ", some skipped" : "");
    return true;
}

static bool make_dir(const char *dir, const char *sub) {
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, sub);
    return mkdir(path, 0755) == 0 || errno == EEXIST;
}

bool recovery_run(const char *dir, uint64_t *next_lsn, char *err, size_t errlen) {
    if (!make_dir(dir, "log") || !make_dir(dir, "snapshots") || !make_dir(dir, "chunks")) {
        snprintf(err, errlen, "%s: can't create the data directories: %s", dir, strerror(errno));
        return false;
    }
    /* Replay reproduces what the server did: no memory limit refuses it,
     * and keys live as they did then. */
    long long maxmem = atomic_exchange(&cfg.maxmemory, 0);
    persist_replaying = true;
    ks_pause_expiry(true);
    uint64_t start = 1;
    bool found = false;
    bool ok = load_snapshot(dir, &start, &found, err, errlen) &&
              replay_log(dir, start, next_lsn, err, errlen);
    ks_pause_expiry(false);
    persist_replaying = false;
    atomic_store(&cfg.maxmemory, maxmem);
    if (!ok) {
        ks_flush();
        return false;
    }
    uint64_t dropped = ks_drop_expired();
    if (dropped) server_log(LOG_NOTICE, "%" PRIu64 " keys expired while the server was down", dropped);
    return true;
}

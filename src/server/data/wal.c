/* The log writer.
 *
 * Workers append framed records to one in-memory buffer under a mutex,
 * which also assigns LSNs, so the order of LSNs is the order of bytes in
 * the file. One thread swaps the buffer for an empty one, writes it with
 * one write(2) and, for appendfsync always, fdatasyncs before publishing
 * the durable LSN. While it writes and syncs, the next batch collects in
 * the other buffer: that is the group commit, one fsync for every record
 * that arrived during the previous one, whichever worker appended it.
 * Under everysec and no a worker wakes the thread once for a read's worth
 * of commands (wal_defer_wakes), not for each record: a wake costs a
 * context switch on both sides, and the thread then writes them at once.
 * everysec syncs at most once a second from the same thread (a timed
 * wait); no never syncs. Appending never waits: commands wait for room
 * (wal_reserve) before they take any key lock.
 *
 * Memory. A record is encoded straight into the append buffer, and the
 * change it describes is applied before it is logged, so running out of
 * memory while logging would leave an applied, unlogged change. A command
 * therefore reserves, before it runs, room for the most it can log
 * (wal_reserve, refused when the memory is not there: the command fails
 * having changed nothing). The append buffer keeps capacity for every open
 * reservation, and the thread swaps in its spare buffer only when that
 * holds them too; when the spare cannot grow, it waits for the commands
 * holding reservations to finish (new ones are refused meanwhile) instead
 * of swapping.
 *
 * Errors. A failed write or fsync leaves the file's unsynced bytes in
 * doubt (Linux may drop dirty pages after a failed fsync, and a retried
 * fsync then succeeds without them). Under always a reply waits for the
 * fsync, so, as Redis does, the server exits: nothing unsynced was
 * acknowledged. Under everysec and no the thread keeps every byte written
 * since the last good fsync, refuses writes meanwhile (wal_write_ok) and
 * once a second truncates the file back to what was synced, writes those
 * bytes again and syncs; when that works, writes are accepted again.
 *
 * Rotation (a snapshot's capture) marks a byte offset in the pending
 * buffer: the thread writes what precedes it to the old file, fsyncs and
 * closes it, opens DIR/log/<first LSN>.wal and writes the rest there.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "datadir.h"
#include "datadir_fs.h"
#include "persist.h"
#include "config.h"
#include "log.h"
#include "util.h"
#include "wal_last.h"

#define MAX_PENDING (64u << 20)
/* Under everysec, sync early once this much is unsynced: it bounds the
 * bytes kept for a rewrite after an error. */
#define MAX_UNSYNCED (64u << 20)
/* A buffer larger than this is freed after a batch that used little of it,
 * so a burst does not keep its memory. */
#define KEEP_BUFFER (1u << 20)
/* A deferred wake (wal_defer_wakes) is not deferred past this much
 * pending: the thread starts writing a long run of commands before it
 * ends. */
#define WAKE_BYTES (256u << 10)

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work;     /* the thread waits for records */
    pthread_cond_t space;    /* throttled commands wait for room */
    pthread_cond_t done;     /* rotation waiters */
    pthread_cond_t released; /* the thread waits for reservations to end */
    pbuf cur;
    size_t reserved;  /* room in cur promised to running commands */
    bool draining;    /* the spare cannot hold them: refuse new ones */
    size_t rec_start; /* offset in cur of the record being encoded */
    uint64_t next_lsn;
    uint64_t cur_last; /* LSN of the last record in cur */
    bool rotate;
    size_t rotate_at;
    uint64_t rotate_lsn;
    uint64_t rotated_lsn; /* first LSN of the file being written */
    bool stop;
    bool open;
    pthread_t thread;
    /* Thread-owned: the file, its size and the part covered by an fsync,
     * and (everysec, no) the bytes written since that fsync. */
    int fd;
    uint64_t file_size;
    uint64_t good_size; /* a repair truncates to this: the last fsync
                         * (everysec) or the last whole batch (no) */
    pbuf unsynced;      /* everysec: the bytes after good_size */
    char logdir[4096];
    _Atomic uint64_t assigned_lsn, written_lsn, durable_lsn, bytes, fsyncs;
    _Atomic int64_t last_fsync_ms;
    _Atomic bool write_ok;
    _Atomic int last_errno;
    _Atomic uint64_t errors; /* failed writes, fsyncs and file creations */
    void (*_Atomic on_durable)(void);
    void (*_Atomic on_written)(void);
} W = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .work = PTHREAD_COND_INITIALIZER,
       .space = PTHREAD_COND_INITIALIZER,
       .done = PTHREAD_COND_INITIALIZER,
       .released = PTHREAD_COND_INITIALIZER,
       .fd = -1};

/* Capacity for need bytes without the exit-on-failure of a pbuf: doubling
 * when it can, exactly what is needed when doubling is refused. */
static bool grow_to(pbuf *b, size_t need)
{
    if (b->cap >= need)
        return true;
    size_t want = b->cap * 2 > need ? b->cap * 2 : need;
    uint8_t *p = realloc(b->p, want);
    if (p == NULL && want > need)
        p = realloc(b->p, want = need);
    if (p == NULL)
        return false;
    b->p = p;
    b->cap = want;
    return true;
}

bool wal_enabled(void) { return W.open; }

static long long policy_now(void)
{
    return atomic_load_explicit(&cfg.appendfsync, memory_order_relaxed);
}

/* Create DIR/log/<lsn>.wal with its header, durable before any record. */
static int create_file(uint64_t first_lsn, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%016" PRIx64 ".wal", W.logdir, first_lsn);
    /* Re-created at the same LSN (a file that held only its header), it is
     * truncated in place: LAST may name it, so the name never goes away. */
    int fd = datadir_open_write(path, O_CREAT | O_TRUNC | O_APPEND);
    if (fd < 0) {
        snprintf(err, errlen, "can't create log file %s: %s", path, datadir_strerror(errno));
        return -1;
    }
    uint8_t h[WAL_HEADER_SIZE];
    wal_header_encode(h, first_lsn);
    if (write(fd, h, sizeof(h)) != (ssize_t)sizeof(h) || fdatasync(fd) != 0 ||
        !datadir_sync_dir(W.logdir)) {
        snprintf(err, errlen, "can't write log file %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    /* LAST names the newest file before it holds a record (wal_last.h). */
    if (!wal_last_write(W.logdir, first_lsn, err, errlen)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The thread's sleep between repair attempts: a second, or until stop. */
static bool pause_unless_stopping(void)
{
    pthread_mutex_lock(&W.lock);
    if (!W.stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&W.work, &W.lock, &ts);
    }
    bool stop = W.stop;
    pthread_mutex_unlock(&W.lock);
    return !stop;
}

/* Append all of p to the file; false with errno set on an error. */
static bool write_out(const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(W.fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        if (w == 0) {
            errno = EIO;
            return false;
        }
        p += w;
        n -= (size_t)w;
        W.file_size += (uint64_t)w;
        atomic_fetch_add(&W.bytes, (uint64_t)w);
    }
    return true;
}

static bool sync_out(void)
{
    while (fdatasync(W.fd) != 0)
        if (errno != EINTR)
            return false;
    atomic_fetch_add(&W.fsyncs, 1);
    atomic_store(&W.last_fsync_ms, now_ms());
    W.good_size = W.file_size;
    W.unsynced.len = 0;
    if (W.unsynced.cap > KEEP_BUFFER) {
        free(W.unsynced.p);
        W.unsynced = (pbuf){0};
    }
    return true;
}

/* Every failed attempt is counted: a fault repaired between two scrapes
 * still shows in /metrics. */
static void note_error(int e)
{
    atomic_store(&W.last_errno, e);
    atomic_fetch_add(&W.errors, 1);
}

/* A write or fsync failed (errno). Under always: exit before any reply
 * that waits for this data leaves. Otherwise refuse writes, then once a
 * second put the file back to good_size, write everything since again
 * (the kept bytes, then rest) and sync, until that works or the server
 * stops. */
static void failed(const char *what, const uint8_t *rest, size_t n)
{
    int e = errno;
    note_error(e);
    if (policy_now() == FSYNC_ALWAYS) {
        server_log(LOG_WARNING,
                   "Can't persist the log (%s error: %s) under appendfsync always. "
                   "Exiting...",
                   what, strerror(e));
        fflush(NULL);
        _exit(1);
    }
    if (atomic_exchange(&W.write_ok, false))
        server_log(LOG_WARNING, "Error %s the log: %s; refusing writes until it works again", what,
                   strerror(e));
    /* A snapshot waiting for a rotation gives up rather than wait. */
    pthread_mutex_lock(&W.lock);
    pthread_cond_broadcast(&W.done);
    pthread_mutex_unlock(&W.lock);
    while (pause_unless_stopping()) {
        bool ok = ftruncate(W.fd, (off_t)W.good_size) == 0;
        if (ok) {
            W.file_size = W.good_size;
            ok = write_out(W.unsynced.p, W.unsynced.len) && write_out(rest, n) && sync_out();
        }
        if (ok) {
            server_log(LOG_NOTICE, "Log write error looks solved; accepting writes again.");
            atomic_store(&W.write_ok, true);
            return;
        }
        note_error(errno);
    }
    server_log(LOG_WARNING,
               "Stopping with the log not written: records after LSN %" PRIu64 " are lost",
               atomic_load(&W.durable_lsn));
}

/* Write a batch; under everysec keep a copy until it is synced. */
static void write_batch(const uint8_t *p, size_t n)
{
    /* After an error that was not repaired (shutting down) nothing more is
     * written. */
    if (n == 0 || !atomic_load(&W.write_ok))
        return;
    bool keep = policy_now() == FSYNC_EVERYSEC;
    if (keep) {
        pbuf_put(&W.unsynced, p, n);
        if (W.unsynced.failed) {
            server_log(LOG_WARNING, "Out of memory keeping unsynced log bytes. Exiting...");
            fflush(NULL);
            _exit(1);
        }
    }
    if (write_out(p, n)) {
        if (!keep)
            W.good_size = W.file_size;
        return;
    }
    failed("writing", keep ? NULL : p, keep ? 0 : n);
}

static void sync_file(void)
{
    if (!atomic_load(&W.write_ok))
        return;
    if (!sync_out())
        failed("syncing", NULL, 0);
}

static void *wal_thread(void *arg)
{
    (void)arg;
    pbuf spare = {0};
    int64_t last_sync_us = mono_us();
    pthread_mutex_lock(&W.lock);
    for (;;) {
        long long policy = policy_now();
        bool unsynced = atomic_load(&W.durable_lsn) < atomic_load(&W.written_lsn);
        while (W.cur.len == 0 && !W.rotate && !W.stop) {
            if (policy == FSYNC_EVERYSEC && unsynced) {
                int64_t left = last_sync_us + 1000000 - mono_us();
                if (left <= 0)
                    break;
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += (long)(left % 1000000) * 1000;
                ts.tv_sec += left / 1000000 + ts.tv_nsec / 1000000000;
                ts.tv_nsec %= 1000000000;
                pthread_cond_timedwait(&W.work, &W.lock, &ts);
            } else {
                /* Wake now and then to notice a CONFIG SET of appendfsync. */
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += 1;
                pthread_cond_timedwait(&W.work, &W.lock, &ts);
                policy = policy_now();
                unsynced = atomic_load(&W.durable_lsn) < atomic_load(&W.written_lsn);
            }
        }
        /* The buffer swapped in must keep the room promised to running
         * commands. Without the memory for that, wait for them to end
         * (they never wait for this thread) and refuse new ones. */
        while (spare.cap < W.reserved && !grow_to(&spare, W.reserved)) {
            if (!W.draining)
                server_log(LOG_WARNING,
                           "Out of memory for the log's next buffer (%zu bytes); "
                           "refusing writes until running ones finish",
                           W.reserved);
            W.draining = true;
            pthread_cond_wait(&W.released, &W.lock);
        }
        W.draining = false;
        bool stopping = W.stop && W.cur.len == 0 && !W.rotate;
        pbuf batch = W.cur;
        W.cur = spare;
        W.cur.len = 0;
        uint64_t last = W.cur_last;
        bool rotate = W.rotate;
        size_t rotate_at = W.rotate_at;
        uint64_t rotate_lsn = W.rotate_lsn;
        W.rotate = false;
        pthread_cond_broadcast(&W.space);
        pthread_mutex_unlock(&W.lock);

        if (rotate) {
            write_batch(batch.p, rotate_at);
            sync_file();
            close(W.fd);
            char err[4400];
            int fd;
            while ((fd = create_file(rotate_lsn, err, sizeof(err))) < 0) {
                note_error(errno);
                if (policy_now() == FSYNC_ALWAYS) {
                    server_log(LOG_WARNING,
                               "Can't persist the log (%s) under appendfsync always. "
                               "Exiting...",
                               err);
                    fflush(NULL);
                    _exit(1);
                }
                if (atomic_exchange(&W.write_ok, false))
                    server_log(LOG_WARNING, "%s; retrying", err);
                if (!pause_unless_stopping())
                    break;
            }
            W.fd = fd;
            if (fd >= 0) {
                W.file_size = W.good_size = WAL_HEADER_SIZE;
                W.unsynced.len = 0;
                if (!atomic_exchange(&W.write_ok, true))
                    server_log(LOG_NOTICE, "Log write error looks solved; accepting writes again.");
                /* Everything before the new file is on disk now. */
                if (rotate_lsn > 1 && atomic_load(&W.durable_lsn) < rotate_lsn - 1)
                    atomic_store(&W.durable_lsn, rotate_lsn - 1);
                if (atomic_load(&W.written_lsn) < rotate_lsn - 1)
                    atomic_store(&W.written_lsn, rotate_lsn - 1);
                write_batch(batch.p + rotate_at, batch.len - rotate_at);
            }
        } else {
            write_batch(batch.p, batch.len);
        }
        if (batch.len && atomic_load(&W.write_ok)) {
            atomic_store(&W.written_lsn, last);
            void (*hook)(void) = atomic_load(&W.on_written);
            if (hook)
                hook();
        }
        policy = policy_now();
        bool sync = stopping || (batch.len && policy == FSYNC_ALWAYS) ||
                    (policy == FSYNC_EVERYSEC && W.file_size - W.good_size >= MAX_UNSYNCED) ||
                    (policy == FSYNC_EVERYSEC && mono_us() - last_sync_us >= 1000000 &&
                     atomic_load(&W.durable_lsn) < atomic_load(&W.written_lsn));
        if (sync && W.fd >= 0) {
            uint64_t upto = atomic_load(&W.written_lsn);
            sync_file();
            last_sync_us = mono_us();
            if (atomic_load(&W.write_ok)) {
                atomic_store(&W.durable_lsn, upto);
                void (*hook)(void) = atomic_load(&W.on_durable);
                if (hook)
                    hook();
            }
        }
        /* Keep the buffer for the next batch unless a burst left it large
         * and mostly unused. */
        spare = batch;
        if (spare.cap > KEEP_BUFFER && spare.len < spare.cap / 4) {
            free(spare.p);
            spare = (pbuf){0};
        }
        pthread_mutex_lock(&W.lock);
        if (rotate) {
            W.rotated_lsn = rotate_lsn;
            pthread_cond_broadcast(&W.done);
        }
        if (stopping || (W.stop && !atomic_load(&W.write_ok)))
            break;
    }
    pthread_mutex_unlock(&W.lock);
    free(spare.p);
    return NULL;
}

bool wal_open(const char *dir, uint64_t next_lsn, char *err, size_t errlen)
{
    snprintf(W.logdir, sizeof(W.logdir), "%s/log", dir);
    W.fd = create_file(next_lsn, err, errlen);
    if (W.fd < 0)
        return false;
    W.file_size = W.good_size = WAL_HEADER_SIZE;
    W.next_lsn = next_lsn;
    W.rotated_lsn = next_lsn;
    atomic_store(&W.assigned_lsn, next_lsn - 1);
    atomic_store(&W.written_lsn, next_lsn - 1);
    atomic_store(&W.durable_lsn, next_lsn - 1);
    atomic_store(&W.write_ok, true);
    W.stop = false;
    if (pthread_create(&W.thread, NULL, wal_thread, NULL) != 0) {
        snprintf(err, errlen, "can't start the log thread");
        close(W.fd);
        W.fd = -1;
        return false;
    }
    W.open = true;
    return true;
}

void wal_set_next_lsn(const char *dir, uint64_t next_lsn)
{
    pthread_mutex_lock(&W.lock);
    snprintf(W.logdir, sizeof(W.logdir), "%s/log", dir);
    W.next_lsn = next_lsn;
    atomic_store(&W.assigned_lsn, next_lsn - 1);
    pthread_mutex_unlock(&W.lock);
}

void wal_close(void)
{
    if (!W.open)
        return;
    pthread_mutex_lock(&W.lock);
    W.stop = true;
    pthread_cond_broadcast(&W.work);
    pthread_cond_broadcast(&W.space);
    pthread_cond_broadcast(&W.done);
    pthread_mutex_unlock(&W.lock);
    pthread_join(W.thread, NULL);
    if (W.fd >= 0)
        close(W.fd);
    W.fd = -1;
    W.open = false;
    free(W.cur.p);
    W.cur = (pbuf){0};
    free(W.unsynced.p);
    W.unsynced = (pbuf){0};
    /* Wake rotation waiters of a snapshot still running. */
    pthread_mutex_lock(&W.lock);
    pthread_cond_broadcast(&W.done);
    pthread_mutex_unlock(&W.lock);
}

void wal_set_durable_hook(void (*fn)(void)) { atomic_store(&W.on_durable, fn); }
void wal_set_written_hook(void (*fn)(void)) { atomic_store(&W.on_written, fn); }
uint64_t wal_written_lsn(void) { return atomic_load(&W.written_lsn); }

bool wal_append_raw(const uint8_t *rec, size_t len, uint64_t lsn)
{
    pthread_mutex_lock(&W.lock);
    bool ok = lsn == W.next_lsn;
    if (ok && W.open) {
        while (W.cur.len > MAX_PENDING && !W.stop)
            pthread_cond_wait(&W.space, &W.lock);
        ok = grow_to(&W.cur, W.cur.len + W.reserved + len);
        if (ok) {
            memcpy(W.cur.p + W.cur.len, rec, len);
            W.cur.len += len;
            W.cur_last = lsn;
            pthread_cond_signal(&W.work);
        }
    }
    if (ok) {
        W.next_lsn++;
        atomic_store(&W.assigned_lsn, lsn);
    }
    pthread_mutex_unlock(&W.lock);
    return ok;
}

bool wal_write_ok(void) { return !W.open || atomic_load(&W.write_ok); }
int wal_last_errno(void) { return atomic_load(&W.last_errno); }

bool wal_reserve(size_t bytes, size_t *held)
{
    *held = 0;
    if (!W.open)
        return true;
    pthread_mutex_lock(&W.lock);
    while (W.cur.len > MAX_PENDING && !W.stop)
        pthread_cond_wait(&W.space, &W.lock);
    bool ok = !W.draining && W.reserved + bytes >= bytes &&
              grow_to(&W.cur, W.cur.len + W.reserved + bytes);
    if (ok) {
        W.reserved += bytes;
        *held = bytes;
    }
    pthread_mutex_unlock(&W.lock);
    return ok;
}

void wal_release(size_t held)
{
    if (held == 0)
        return;
    pthread_mutex_lock(&W.lock);
    W.reserved -= held;
    if (W.draining)
        pthread_cond_signal(&W.released);
    pthread_mutex_unlock(&W.lock);
}

pbuf *wal_record_open(void)
{
    pthread_mutex_lock(&W.lock);
    W.rec_start = W.cur.len;
    if (pbuf_reserve(&W.cur, WAL_PREFIX))
        W.cur.len += WAL_PREFIX;
    return &W.cur;
}

/* Nesting depth of wal_defer_wakes on this thread, and whether a record
 * closed meanwhile has not woken the log thread yet. */
static _Thread_local unsigned defer_depth;
static _Thread_local bool defer_pending;

void wal_defer_wakes(void) { defer_depth++; }

void wal_wake_deferred(void)
{
    if (--defer_depth > 0 || !defer_pending)
        return;
    defer_pending = false;
    /* The records were appended under the lock, which the thread holds
     * while it looks for them before it waits: no lock needed to signal. */
    pthread_cond_signal(&W.work);
}

/* Wake the log thread for a record just appended (W.lock held). Under
 * always a reply waits for its fsync: wake at once. */
static void wake_for_record(void)
{
    if (defer_depth > 0 && W.cur.len < WAKE_BYTES && policy_now() != FSYNC_ALWAYS) {
        defer_pending = true;
        return;
    }
    pthread_cond_signal(&W.work);
}

uint64_t wal_record_close(uint8_t type)
{
    if (!pbuf_reserve(&W.cur, WAL_TRAILER)) {
        /* Only a record larger than its command reserved gets here (or one
         * logged outside a command): the change is applied already and a
         * crash would lose it. Redis exits when an allocation fails. */
        pthread_mutex_unlock(&W.lock);
        server_log(LOG_WARNING, "Out of memory appending a %s log record. Exiting...",
                   wal_type_name(type));
        fflush(NULL);
        _exit(1);
    }
    size_t len = W.cur.len - W.rec_start - WAL_PREFIX;
    uint64_t lsn = W.next_lsn++;
    wal_record_seal(W.cur.p + W.rec_start, type, lsn, len);
    W.cur.len += WAL_TRAILER;
    W.cur_last = lsn;
    atomic_store(&W.assigned_lsn, lsn);
    wake_for_record();
    pthread_mutex_unlock(&W.lock);
    return lsn;
}

uint64_t wal_assigned_lsn(void) { return atomic_load(&W.assigned_lsn); }
uint64_t wal_next_lsn(void)
{
    pthread_mutex_lock(&W.lock);
    uint64_t n = W.next_lsn;
    pthread_mutex_unlock(&W.lock);
    return n;
}

uint64_t wal_rotate(void)
{
    pthread_mutex_lock(&W.lock);
    uint64_t lsn = W.next_lsn;
    if (W.open) {
        /* One snapshot at a time, and each waits for its rotation: at most
         * one rotation is pending. */
        W.rotate = true;
        W.rotate_at = W.cur.len;
        W.rotate_lsn = lsn;
        pthread_cond_signal(&W.work);
    }
    pthread_mutex_unlock(&W.lock);
    return lsn;
}

bool wal_wait_rotated(uint64_t first_lsn)
{
    pthread_mutex_lock(&W.lock);
    /* A log that cannot be written (or is closing) may never rotate: the
     * caller then keeps the older log files. */
    while (W.open && W.rotated_lsn < first_lsn && !W.stop && atomic_load(&W.write_ok))
        pthread_cond_wait(&W.done, &W.lock);
    bool done = !W.open || W.rotated_lsn >= first_lsn;
    pthread_mutex_unlock(&W.lock);
    return done;
}
void wal_delete_below(uint64_t lsn)
{
    char logdir[4096];
    snprintf(logdir, sizeof(logdir), "%s", W.logdir);
    uint64_t *files;
    size_t n = datadir_list(logdir, ".wal", &files);
    bool removed = false;
    /* Files are named by their first LSN: a file ends below lsn when the
     * next one starts at or below it (lsn may fall inside a file when a
     * restore in progress needs older records). The newest file stays. */
    for (size_t i = 0; i + 1 < n && files[i + 1] <= lsn; i++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/%016" PRIx64 ".wal", logdir, files[i]);
        if (datadir_unlink(path))
            removed = true;
    }
    free(files);
    if (removed)
        datadir_sync_dir(logdir);
}

uint64_t wal_durable_lsn(void) { return atomic_load(&W.durable_lsn); }

void wal_get_stats(wal_stats *s)
{
    s->appended_lsn = atomic_load(&W.assigned_lsn);
    s->written_lsn = atomic_load(&W.written_lsn);
    s->durable_lsn = atomic_load(&W.durable_lsn);
    s->bytes = atomic_load(&W.bytes);
    s->fsyncs = atomic_load(&W.fsyncs);
    s->errors = atomic_load(&W.errors);
    s->last_fsync_ms = atomic_load(&W.last_fsync_ms);
    s->write_ok = !W.open || atomic_load(&W.write_ok);
    pthread_mutex_lock(&W.lock);
    s->pending_bytes = W.cur.len;
    pthread_mutex_unlock(&W.lock);
}

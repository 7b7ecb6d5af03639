/* The log writer.
 *
 * Workers append framed records to one in-memory buffer under a mutex,
 * which also assigns LSNs, so the order of LSNs is the order of bytes in
 * the file. One thread swaps the buffer for an empty one, writes it with
 * one write(2) and, for appendfsync always, fdatasyncs before publishing
 * the durable LSN. While it writes and syncs, the next batch collects in
 * the other buffer: that is the group commit, one fsync for every record
 * that arrived during the previous one, whichever worker appended it.
 * everysec syncs at most once a second from the same thread (a timed
 * wait); no never syncs. Pending bytes are capped: appenders wait when the
 * disk falls that far behind, rather than growing without bound.
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

#include "persist.h"
#include "server.h"
#include "util.h"
#include "wal_last.h"

#define MAX_PENDING (64u << 20)

_Thread_local uint64_t wal_thread_lsn;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work;    /* the thread waits for records */
    pthread_cond_t space;   /* appenders wait for room */
    pthread_cond_t done;    /* rotation waiters */
    pbuf cur;
    uint64_t next_lsn;
    uint64_t cur_last;      /* LSN of the last record in cur */
    bool rotate;
    size_t rotate_at;
    uint64_t rotate_lsn;
    uint64_t rotated_lsn;   /* first LSN of the file being written */
    bool stop;
    bool open;
    pthread_t thread;
    int fd;
    char logdir[4096];
    _Atomic uint64_t written_lsn, durable_lsn, bytes, fsyncs;
    _Atomic int64_t last_fsync_ms;
    _Atomic bool write_ok;
} W = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .work = PTHREAD_COND_INITIALIZER,
       .space = PTHREAD_COND_INITIALIZER,
       .done = PTHREAD_COND_INITIALIZER,
       .fd = -1};

bool wal_enabled(void) { return W.open; }

static int fsync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Create DIR/log/<lsn>.wal with its header, durable before any record. */
static int create_file(uint64_t first_lsn, char *err, size_t errlen) {
    char path[4200];
    snprintf(path, sizeof(path), "%s/%016" PRIx64 ".wal", W.logdir, first_lsn);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "can't create log file %s: %s", path, strerror(errno));
        return -1;
    }
    uint8_t h[WAL_HEADER_SIZE];
    wal_header_encode(h, first_lsn);
    if (write(fd, h, sizeof(h)) != (ssize_t)sizeof(h) || fdatasync(fd) != 0 ||
        fsync_dir(W.logdir) != 0) {
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

/* Write all of buf, retrying after errors: a record handed to the log is
 * never dropped, and nothing after it is acknowledged meanwhile. */
static void write_all(const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(W.fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (atomic_exchange(&W.write_ok, false))
                server_log(LOG_WARNING, "Error writing to the log: %s; retrying", strerror(errno));
            sleep(1);
            continue;
        }
        if (!atomic_load(&W.write_ok)) server_log(LOG_NOTICE, "Writing to the log again.");
        atomic_store(&W.write_ok, true);
        p += w;
        n -= (size_t)w;
        atomic_fetch_add(&W.bytes, (uint64_t)w);
    }
}

static void sync_file(void) {
    while (fdatasync(W.fd) != 0) {
        if (errno == EINTR) continue;
        if (atomic_exchange(&W.write_ok, false))
            server_log(LOG_WARNING, "Error syncing the log: %s; retrying", strerror(errno));
        sleep(1);
    }
    atomic_fetch_add(&W.fsyncs, 1);
    atomic_store(&W.last_fsync_ms, now_ms());
}

static void *wal_thread(void *arg) {
    (void)arg;
    pbuf spare = {0};
    int64_t last_sync_us = mono_us();
    pthread_mutex_lock(&W.lock);
    for (;;) {
        long long policy = atomic_load_explicit(&cfg.appendfsync, memory_order_relaxed);
        bool unsynced = atomic_load(&W.durable_lsn) < atomic_load(&W.written_lsn);
        while (W.cur.len == 0 && !W.rotate && !W.stop) {
            if (policy == FSYNC_EVERYSEC && unsynced) {
                int64_t left = last_sync_us + 1000000 - mono_us();
                if (left <= 0) break;
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
                policy = atomic_load_explicit(&cfg.appendfsync, memory_order_relaxed);
                unsynced = atomic_load(&W.durable_lsn) < atomic_load(&W.written_lsn);
            }
        }
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
            write_all(batch.p, rotate_at);
            sync_file();
            close(W.fd);
            char err[512];
            int fd;
            while ((fd = create_file(rotate_lsn, err, sizeof(err))) < 0) {
                if (atomic_exchange(&W.write_ok, false)) server_log(LOG_WARNING, "%s; retrying", err);
                sleep(1);
            }
            W.fd = fd;
            atomic_store(&W.write_ok, true);
            /* Everything before the new file is on disk now. */
            if (rotate_lsn > 1 && atomic_load(&W.durable_lsn) < rotate_lsn - 1)
                atomic_store(&W.durable_lsn, rotate_lsn - 1);
            if (atomic_load(&W.written_lsn) < rotate_lsn - 1)
                atomic_store(&W.written_lsn, rotate_lsn - 1);
            write_all(batch.p + rotate_at, batch.len - rotate_at);
        } else {
            write_all(batch.p, batch.len);
        }
        if (batch.len) atomic_store(&W.written_lsn, last);
        policy = atomic_load_explicit(&cfg.appendfsync, memory_order_relaxed);
        bool sync = stopping || (batch.len && policy == FSYNC_ALWAYS) ||
                    (policy == FSYNC_EVERYSEC && mono_us() - last_sync_us >= 1000000 &&
                     atomic_load(&W.durable_lsn) < atomic_load(&W.written_lsn));
        if (sync) {
            uint64_t upto = atomic_load(&W.written_lsn);
            sync_file();
            last_sync_us = mono_us();
            atomic_store(&W.durable_lsn, upto);
            commit_notify();
        }
        spare = batch;
        pthread_mutex_lock(&W.lock);
        if (rotate) {
            W.rotated_lsn = rotate_lsn;
            pthread_cond_broadcast(&W.done);
        }
        if (stopping) break;
    }
    pthread_mutex_unlock(&W.lock);
    free(spare.p);
    return NULL;
}

bool wal_open(const char *dir, uint64_t next_lsn, char *err, size_t errlen) {
    snprintf(W.logdir, sizeof(W.logdir), "%s/log", dir);
    W.fd = create_file(next_lsn, err, errlen);
    if (W.fd < 0) return false;
    W.next_lsn = next_lsn;
    W.rotated_lsn = next_lsn;
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

void wal_set_next_lsn(const char *dir, uint64_t next_lsn) {
    pthread_mutex_lock(&W.lock);
    snprintf(W.logdir, sizeof(W.logdir), "%s/log", dir);
    W.next_lsn = next_lsn;
    pthread_mutex_unlock(&W.lock);
}

void wal_close(void) {
    if (!W.open) return;
    pthread_mutex_lock(&W.lock);
    W.stop = true;
    pthread_cond_signal(&W.work);
    pthread_mutex_unlock(&W.lock);
    pthread_join(W.thread, NULL);
    close(W.fd);
    W.fd = -1;
    W.open = false;
    free(W.cur.p);
    W.cur = (pbuf){0};
}

uint64_t wal_append(uint8_t type, const void *payload, size_t len) {
    pthread_mutex_lock(&W.lock);
    while (W.cur.len > MAX_PENDING && !W.stop) pthread_cond_wait(&W.space, &W.lock);
    size_t size = wal_record_size(len);
    while (!pbuf_reserve(&W.cur, size)) {
        /* Out of memory: wait for the thread to drain the buffer. */
        W.cur.failed = false;
        pthread_cond_signal(&W.work);
        pthread_cond_wait(&W.space, &W.lock);
    }
    uint8_t *rec = W.cur.p + W.cur.len;
    if (len) memcpy(rec + WAL_PREFIX, payload, len);
    uint64_t lsn = W.next_lsn++;
    wal_record_seal(rec, type, lsn, len);
    W.cur.len += size;
    W.cur_last = lsn;
    pthread_cond_signal(&W.work);
    pthread_mutex_unlock(&W.lock);
    wal_thread_lsn = lsn;
    return lsn;
}

uint64_t wal_next_lsn(void) {
    pthread_mutex_lock(&W.lock);
    uint64_t n = W.next_lsn;
    pthread_mutex_unlock(&W.lock);
    return n;
}

uint64_t wal_rotate(void) {
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

void wal_wait_rotated(uint64_t first_lsn) {
    pthread_mutex_lock(&W.lock);
    while (W.open && W.rotated_lsn < first_lsn) pthread_cond_wait(&W.done, &W.lock);
    pthread_mutex_unlock(&W.lock);
}

void wal_delete_below(uint64_t lsn) {
    char logdir[4096];
    snprintf(logdir, sizeof(logdir), "%s", W.logdir);
    DIR *d = opendir(logdir);
    if (d == NULL) return;
    struct dirent *de;
    bool removed = false;
    while ((de = readdir(d)) != NULL) {
        uint64_t first;
        char tail[8];
        if (sscanf(de->d_name, "%16" SCNx64 "%7s", &first, tail) != 2 || strcmp(tail, ".wal") != 0)
            continue;
        /* Files are named by their first LSN and a new one starts at every
         * rotation, so a file below lsn ends below it. */
        if (first < lsn) {
            char path[8400];
            snprintf(path, sizeof(path), "%s/%s", logdir, de->d_name);
            if (unlink(path) == 0) removed = true;
        }
    }
    closedir(d);
    if (removed) fsync_dir(logdir);
}

uint64_t wal_durable_lsn(void) { return atomic_load(&W.durable_lsn); }

void wal_get_stats(wal_stats *s) {
    s->written_lsn = atomic_load(&W.written_lsn);
    s->durable_lsn = atomic_load(&W.durable_lsn);
    s->bytes = atomic_load(&W.bytes);
    s->fsyncs = atomic_load(&W.fsyncs);
    s->last_fsync_ms = atomic_load(&W.last_fsync_ms);
    s->write_ok = !W.open || atomic_load(&W.write_ok);
    pthread_mutex_lock(&W.lock);
    s->pending_bytes = W.cur.len;
    pthread_mutex_unlock(&W.lock);
}

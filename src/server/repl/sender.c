/* The master's side of replication: one thread per replica.
 *
 * PSYNC <replid> <next LSN>: when the id names this history (the current
 * id, or the previous one up to the offset where this server was promoted)
 * and the log kept still holds that LSN, the answer is "+CONTINUE <id>"
 * and the log follows from there: a replica that was away briefly moves no
 * chunk. Otherwise a full resync:
 *
 *   +FULLRESYNC <id> <snapshot start - 1>
 *   $<n> the snapshot index (a snapshot taken for this sync)
 *          <- $<16 k> the content hashes of the chunks the replica lacks
 *   $<n> each of those chunk files, in the order asked, read from disk
 *        and sent piece by piece: no copy of the data set in memory
 *   when the snapshot holds exact filters, their store likewise:
 *   $<n> the list of a store checkpoint's files (data/exact_ship.c)
 *          <- $<4 k> the indexes of the files the replica lacks
 *   $<n> each of those files
 *
 * then the log from the snapshot's start (from earlier when a restore in
 * progress needs older records). The log goes as bulk strings holding
 * whole records, exactly as they are in the master's files, checksums
 * included; "+PING" once a second when there is nothing to send. The
 * replica answers "REPLCONF ACK <last LSN applied>".
 *
 * While a full resync sends a snapshot, snapshots delete no file
 * (snapshot_hold_files), so the chunks and log it names stay; the reader
 * keeps the log file it reads open. A replica slower than the log kept
 * (its next record's file deleted by a later snapshot) is disconnected and
 * comes back for a full resync.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "datadir.h"
#include "datadir_fs.h"
#include "exact.h"
#include "log.h"
#include "persist.h"
#include "repl_conn.h"
#include "repl_int.h"
#include "resp.h"
#include "snapshot.h"
#include "util.h"

#define SEND_STEP (1u << 20)

enum { S_WAIT_BGSAVE, S_SEND_BULK, S_ONLINE };
static const char *const state_names[] = {"wait_bgsave", "send_bulk", "online"};

typedef struct sender {
    struct sender *next;
    pthread_t thread;
    repl_conn conn;
    repl_peer_info peer;
    char want_id[REPL_ID_LEN + 1];
    uint64_t want_lsn;
    _Atomic uint64_t ack;
    _Atomic int64_t last_ack_ms;
    _Atomic int state;
    int wake_fd;
} sender;

static pthread_mutex_t slock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sgone = PTHREAD_COND_INITIALIZER;
static sender *senders;
static _Atomic bool stop_all;
static void (*_Atomic ack_hook)(void);

void repl_set_ack_hook(void (*fn)(void)) { atomic_store(&ack_hook, fn); }

void senders_wake(void)
{
    uint64_t one = 1;
    pthread_mutex_lock(&slock);
    for (sender *s = senders; s; s = s->next)
        if (write(s->wake_fd, &one, sizeof(one)) < 0) { /* already signalled */
        }
    pthread_mutex_unlock(&slock);
}

static void sendf_line(sender *s, const char *fmt, const char *a, uint64_t b)
{
    char line[128];
    int n = snprintf(line, sizeof(line), fmt, a, b);
    rc_send(&s->conn, line, (size_t)n);
}

static bool send_bulk_header(sender *s, uint64_t n)
{
    char h[32];
    int l = snprintf(h, sizeof(h), "$%" PRIu64 "\r\n", n);
    return rc_send(&s->conn, h, (size_t)l);
}

/* One file as a bulk string, piece by piece: no copy in memory. */
static bool send_file(sender *s, const char *path)
{
    int fd = datadir_open_read(path);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        server_log(LOG_WARNING, "Full resync: can't read %s: %s", path, datadir_strerror(errno));
        if (fd >= 0)
            close(fd);
        return false;
    }
    bool ok = send_bulk_header(s, (uint64_t)st.st_size);
    uint8_t *buf = malloc(SEND_STEP);
    for (off_t left = st.st_size; ok && left > 0;) {
        ssize_t n = buf ? read(fd, buf, SEND_STEP < (size_t)left ? SEND_STEP : (size_t)left) : -1;
        if (n <= 0) {
            ok = false;
            break;
        }
        ok = rc_send(&s->conn, buf, (size_t)n);
        left -= n;
    }
    free(buf);
    close(fd);
    return ok && rc_send(&s->conn, "\r\n", 2);
}

/* One chunk file, as stored (compressed). */
static bool send_chunk_file(sender *s, chunk_hash h)
{
    char hex[33], path[4400];
    chunk_hash_hex(h, hex);
    snprintf(path, sizeof(path), "%s/chunks/%s.zst", repl_dir(), hex);
    return send_file(s, path);
}

static bool index_has_exact(const snap_index *ix)
{
    for (uint64_t i = 0; i < ix->nkeys; i++)
        if (ix->entries[i].exact)
            return true;
    return false;
}

/* Exact filters' store, when the snapshot holds any: the list of a
 * checkpoint's files, <- the indexes (u32 each) of those the replica
 * lacks, and those files. */
static bool send_store(sender *s, const snap_index *ix)
{
    exact_file *xf;
    size_t nx, nwant = 0;
    char err[512];
    if (!exact_ship_prepare(repl_dir(), ix->start_lsn, &xf, &nx, err, sizeof(err))) {
        server_log(LOG_WARNING, "Full resync of %s:%d: %s", s->peer.ip, s->peer.port, err);
        return false;
    }
    pbuf b = {0};
    exact_manifest_encode(&b, xf, nx);
    bool ok = !b.failed && send_bulk_header(s, b.len) && rc_send(&s->conn, b.p, b.len) &&
              rc_send(&s->conn, "\r\n", 2);
    free(b.p);
    uint8_t *want = NULL;
    size_t wlen = 0;
    ok = ok && rc_read_bulk(&s->conn, &want, &wlen, 4 * (nx + 1)) && wlen % 4 == 0;
    for (size_t i = 0; ok && i < wlen / 4; i++, nwant++) {
        uint32_t k = (uint32_t)le_load(want + 4 * i, 4);
        char path[4400];
        ok = k < nx;
        if (ok)
            exact_ship_path(repl_dir(), &xf[k], path, sizeof(path));
        ok = ok && send_file(s, path);
    }
    if (ok)
        server_log(LOG_NOTICE, "Full resync of replica %s:%d: %zu of %zu exact store files sent",
                   s->peer.ip, s->peer.port, nwant, nx);
    free(want);
    free(xf);
    return ok;
}

/* A snapshot for this sync, its index and the chunks the replica lacks;
 * returns the reader positioned where the log must follow. */
static wal_reader *full_sync(sender *s, const char *id)
{
    atomic_store(&s->state, S_WAIT_BGSAVE);
    snapshot_hold_files(true);
    wal_reader *rd = NULL;
    datadir_snapshot ds = {0};
    bool opened = false;
    chunk_hash *files = NULL;
    char err[512];
    /* Another snapshot running (the schedule's, another replica's): wait
     * for it, then take ours. */
    while (!snapshot_run(true, err, sizeof(err))) {
        if (atomic_load(&stop_all) || !snapshot_in_progress()) {
            server_log(LOG_WARNING, "Full resync of %s:%d: snapshot failed: %s", s->peer.ip,
                       s->peer.port, err);
            goto out;
        }
        snapshot_shutdown();
    }
    if (datadir_snapshot_open(repl_dir(), &ds, err, sizeof(err)) != 1) {
        server_log(LOG_WARNING, "Full resync: can't read the snapshot: %s", err);
        goto out;
    }
    opened = true;
    const snap_index *ix = &ds.ix;
    rd = wal_reader_open(repl_dir(), snap_index_log_from(ix), err, sizeof(err));
    if (rd == NULL) {
        server_log(LOG_WARNING, "Full resync: %s", err);
        goto out;
    }
    atomic_store(&s->state, S_SEND_BULK);
    sendf_line(s, "+FULLRESYNC %s %" PRIu64 "\r\n", id, ix->start_lsn - 1);
    if (!send_bulk_header(s, ds.len) || !rc_send(&s->conn, ds.buf, ds.len) ||
        !rc_send(&s->conn, "\r\n", 2))
        goto fail;
    size_t nfiles = 0;
    files = malloc((ix->nchunks ? ix->nchunks : 1) * sizeof(*files));
    if (files == NULL)
        goto fail;
    for (uint64_t i = 0; i < ix->nchunks; i++)
        if (ix->chunks[i].where == SNAP_CHUNK_FILE)
            files[nfiles++] = ix->chunks[i].hash;
    qsort(files, nfiles, sizeof(*files), chunk_hash_cmp);
    uint8_t *want;
    size_t wlen;
    if (!rc_read_bulk(&s->conn, &want, &wlen, 16 * (nfiles + 1)))
        goto fail;
    bool ok = wlen % 16 == 0;
    for (size_t i = 0; ok && i < wlen / 16; i++) {
        chunk_hash h = {le_load(want + 16 * i, 8), le_load(want + 16 * i + 8, 8)};
        ok = bsearch(&h, files, nfiles, sizeof(*files), chunk_hash_cmp) != NULL &&
             send_chunk_file(s, h);
    }
    free(want);
    if (ok && index_has_exact(ix))
        ok = send_store(s, ix);
    if (!ok)
        goto fail;
    server_log(LOG_NOTICE,
               "Full resync of replica %s:%d: index of %zu bytes, %zu of %zu chunk files sent",
               s->peer.ip, s->peer.port, ds.len, wlen / 16, nfiles);
    goto out;
fail:
    server_log(LOG_WARNING, "Full resync of replica %s:%d failed: %s", s->peer.ip, s->peer.port,
               s->conn.err[0] ? s->conn.err : "bad request");
    wal_reader_close(rd);
    rd = NULL;
out:
    free(files);
    if (opened)
        datadir_snapshot_close(&ds);
    snapshot_hold_files(false);
    return rd;
}

/* Acknowledgements waiting in the input. */
static bool read_acks(sender *s)
{
    if (!rc_read_some(&s->conn))
        return false;
    resp_parser p;
    resp_parser_init(&p);
    resp_limits lim = {.max_bulk = 1024, .max_args = 8, .authenticated = true};
    bool ok = true;
    while (s->conn.pos < s->conn.in.len) {
        char *start = (char *)s->conn.in.p + s->conn.pos;
        resp_status st = resp_parse(&p, start, s->conn.in.len - s->conn.pos, &lim);
        if (st == RESP_AGAIN)
            break;
        if (st == RESP_ERROR) {
            snprintf(s->conn.err, sizeof(s->conn.err), "protocol error: %s", p.error);
            ok = false;
            break;
        }
        long long v;
        if (p.argc == 3 && str_eq_ci(start + p.argv[0].off, p.argv[0].len, "replconf") &&
            str_eq_ci(start + p.argv[1].off, p.argv[1].len, "ack") &&
            str_to_ll(start + p.argv[2].off, p.argv[2].len, &v) && v >= 0) {
            atomic_store(&s->ack, (uint64_t)v);
            atomic_store(&s->last_ack_ms, now_ms());
            void (*fn)(void) = atomic_load(&ack_hook);
            if (fn)
                fn();
        }
        s->conn.pos += p.pos;
        resp_parser_reset(&p);
    }
    resp_parser_free(&p);
    return ok;
}

/* The log as it is written, until the replica goes or falls behind. */
static void stream(sender *s, wal_reader *rd)
{
    atomic_store(&s->state, S_ONLINE);
    atomic_store(&s->last_ack_ms, now_ms());
    pbuf out = {0};
    int64_t last_send = mono_us();
    char err[512];
    while (!atomic_load(&stop_all)) {
        out.len = 0;
        int n = wal_reader_read(rd, &out, SEND_STEP, wal_written_lsn(), err, sizeof(err));
        if (n < 0) {
            server_log(LOG_WARNING, "Replica %s:%d dropped: %s", s->peer.ip, s->peer.port, err);
            break;
        }
        if (n > 0) {
            if (!send_bulk_header(s, (uint64_t)n) || !rc_send(&s->conn, out.p, out.len) ||
                !rc_send(&s->conn, "\r\n", 2))
                break;
            last_send = mono_us();
            if (!read_acks(s))
                break;
            continue;
        }
        int64_t idle_ms = (mono_us() - last_send) / 1000;
        if (idle_ms >= 1000) {
            if (!rc_send(&s->conn, "+PING\r\n", 7))
                break;
            last_send = mono_us();
            idle_ms = 0;
        }
        long long timeout_s = atomic_load(&cfg.repl_timeout);
        if (now_ms() - atomic_load(&s->last_ack_ms) > timeout_s * 1000) {
            server_log(LOG_WARNING, "Replica %s:%d timed out (no acknowledgement in %lld s)",
                       s->peer.ip, s->peer.port, timeout_s);
            break;
        }
        if (rc_poll_in(&s->conn, (int)(1000 - idle_ms), s->wake_fd)) {
            if (!read_acks(s))
                break;
        } else if (s->conn.err[0]) {
            break;
        }
    }
    free(out.p);
    if (s->conn.err[0] && !atomic_load(&stop_all))
        server_log(LOG_NOTICE, "Connection with replica %s:%d lost: %s", s->peer.ip, s->peer.port,
                   s->conn.err);
}

static void *sender_main(void *arg)
{
    sender *s = arg;
    char id[REPL_ID_LEN + 1], id2[REPL_ID_LEN + 1];
    uint64_t second;
    repl_ids(id, id2, &second);
    wal_reader *rd = NULL;
    uint64_t want = s->want_lsn;
    bool ours = strcmp(s->want_id, id) == 0 || (strcmp(s->want_id, id2) == 0 && want <= second);
    if (ours && want >= 1 && want - 1 <= wal_assigned_lsn()) {
        /* Records up to want - 1 may still be on their way to the file. */
        for (int i = 0; i < 500 && wal_written_lsn() + 1 < want && wal_write_ok(); i++)
            usleep(2000);
        char err[256];
        rd = wal_reader_open(repl_dir(), want, err, sizeof(err));
        if (rd == NULL)
            server_log(LOG_NOTICE, "Partial resync of %s:%d refused: %s", s->peer.ip, s->peer.port,
                       err);
    }
    if (rd) {
        repl_count(&repl_stat_partial_ok, 1);
        server_log(LOG_NOTICE, "Partial resync of replica %s:%d from LSN %" PRIu64, s->peer.ip,
                   s->peer.port, want);
        atomic_store(&s->ack, want - 1);
        char line[80];
        int l = snprintf(line, sizeof(line), "+CONTINUE %s\r\n", id);
        rc_send(&s->conn, line, (size_t)l);
    } else {
        if (strcmp(s->want_id, "?") != 0)
            repl_count(&repl_stat_partial_err, 1);
        repl_count(&repl_stat_full, 1);
        rd = full_sync(s, id);
    }
    if (rd)
        stream(s, rd);
    wal_reader_close(rd);
    rc_close(&s->conn);
    pthread_mutex_lock(&slock);
    for (sender **pp = &senders; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    close(s->wake_fd);
    pthread_cond_broadcast(&sgone);
    pthread_mutex_unlock(&slock);
    pthread_detach(pthread_self());
    free(s);
    return NULL;
}

bool repl_sender_start(int fd, struct ssl_st *ssl, const repl_peer_info *peer, const char *replid,
                       uint64_t next_lsn, char *err, size_t errlen)
{
    sender *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        repl_conn lost;
        rc_init(&lost, fd, 0, NULL);
        lost.ssl = ssl;
        rc_close(&lost);
        return false;
    }
    s->peer = *peer;
    snprintf(s->want_id, sizeof(s->want_id), "%s", replid);
    s->want_lsn = next_lsn;
    s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    rc_init(&s->conn, fd, 60000, &stop_all);
    s->conn.ssl = ssl;
    atomic_store(&s->last_ack_ms, now_ms());
    pthread_mutex_lock(&slock);
    s->next = senders;
    senders = s;
    bool ok = s->wake_fd >= 0 && pthread_create(&s->thread, NULL, sender_main, s) == 0;
    if (!ok) {
        senders = s->next;
        pthread_mutex_unlock(&slock);
        snprintf(err, errlen, "can't start a replication thread");
        if (s->wake_fd >= 0)
            close(s->wake_fd);
        rc_close(&s->conn);
        free(s);
        return false;
    }
    pthread_mutex_unlock(&slock);
    return true;
}

unsigned repl_replicas_acked(uint64_t lsn)
{
    unsigned n = 0;
    pthread_mutex_lock(&slock);
    for (sender *s = senders; s; s = s->next)
        n += atomic_load(&s->state) == S_ONLINE && atomic_load(&s->ack) >= lsn;
    pthread_mutex_unlock(&slock);
    return n;
}

unsigned senders_good(int64_t max_lag_ms)
{
    unsigned n = 0;
    int64_t now = now_ms();
    pthread_mutex_lock(&slock);
    for (sender *s = senders; s; s = s->next)
        n += atomic_load(&s->state) == S_ONLINE && now - atomic_load(&s->last_ack_ms) <= max_lag_ms;
    pthread_mutex_unlock(&slock);
    return n;
}

void senders_status(repl_status *st)
{
    pthread_mutex_lock(&slock);
    size_t n = 0;
    for (sender *s = senders; s; s = s->next)
        n++;
    st->replicas = calloc(n ? n : 1, sizeof(*st->replicas));
    st->nreplicas = 0;
    int64_t now = now_ms();
    for (sender *s = senders; s && st->replicas; s = s->next) {
        repl_replica_status *r = &st->replicas[st->nreplicas++];
        snprintf(r->ip, sizeof(r->ip), "%s", s->peer.ip);
        r->port = s->peer.port;
        r->state = state_names[atomic_load(&s->state)];
        r->ack = atomic_load(&s->ack);
        r->lag_s = (now - atomic_load(&s->last_ack_ms)) / 1000;
    }
    pthread_mutex_unlock(&slock);
}

/* Disconnect every replica (a promotion to replica, shutdown) and wait for
 * their threads to end. */
void senders_stop_all(void)
{
    atomic_store(&stop_all, true);
    senders_wake();
    pthread_mutex_lock(&slock);
    while (senders)
        pthread_cond_wait(&sgone, &slock);
    pthread_mutex_unlock(&slock);
    atomic_store(&stop_all, false);
}

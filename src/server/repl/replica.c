/* The replica's side of replication: one thread holds the link to the
 * master (sender.c describes the protocol).
 *
 * Handshake as a Redis replica does it: AUTH with masterauth/masteruser,
 * REPLCONF listening-port and ip-address (replica-announce-*), REPLCONF
 * capa bloomery, then PSYNC <id of the history it follows> <next LSN>.
 *
 * Full resync: the index names every chunk by its content hash; chunk
 * files already in DIR/chunks (from this replica's own snapshots or an
 * earlier sync) are not fetched. The others arrive, are verified (frame,
 * content hash) and stored. Until then the replica serves its old data;
 * then, answering LOADING meanwhile, its data directory becomes the
 * master's snapshot and is loaded exactly as a start-up loads it
 * (persist_resync_*): no second loader.
 *
 * Records: each is checked (framing, checksums, LSN order), appended to
 * this replica's log under the master's LSN and applied through replay.c,
 * the code recovery runs, both under snapshot_apply_lock so a snapshot
 * of the replica never splits them. Windows rotate and keys expire only
 * by the master's records (ks_set_applier: this thread sees keys as the
 * master did). "REPLCONF ACK <LSN>" goes back after every batch applied
 * and once a second.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "datadir.h"
#include "datadir_fs.h"
#include "exact.h"
#include "log.h"
#include "persist.h"
#include "repl_conn.h"
#include "repl_int.h"
#include "replay.h"
#include "snapshot.h"
#include "stream.h"
#include "tls.h"
#include "util.h"

#define MAX_INDEX (1u << 30)

static struct {
    pthread_mutex_t lock; /* host, port, link times */
    bool running;
    pthread_t thread;
    _Atomic bool stop;
    char host[256];
    int port;
    _Atomic int link;
    int64_t down_since_ms;
    _Atomic int64_t last_io_ms;
    _Atomic bool syncing;
    _Atomic bool drop; /* CLIENT KILL TYPE master */
    /* The last record applied (a record is logged, then applied): what
     * INFO and ROLE report, so an offset shown means its change shows. */
    _Atomic uint64_t applied;
} L = {.lock = PTHREAD_MUTEX_INITIALIZER, .down_since_ms = 0};

static void set_link(int state)
{
    int old = atomic_exchange(&L.link, state);
    pthread_mutex_lock(&L.lock);
    if (old == REPL_LINK_CONNECTED && state != REPL_LINK_CONNECTED)
        L.down_since_ms = now_ms();
    pthread_mutex_unlock(&L.lock);
    repl_update_checks();
}

/* A reply line that must be +OK (or any + line when any). */
static bool expect_ok(repl_conn *c, const char *what)
{
    char line[512];
    if (!rc_read_line(c, line, sizeof(line)))
        return false;
    if (line[0] != '+') {
        snprintf(c->err, sizeof(c->err), "%.200s: %.200s", what, line);
        return false;
    }
    return true;
}

static bool handshake(repl_conn *c, char *reply, size_t rlen)
{
    char *pass = config_get_str("masterauth"), *user = config_get_str("masteruser");
    bool ok = true;
    if (pass && pass[0]) {
        const char *a[3] = {"AUTH", user && user[0] ? user : pass, pass};
        ok = rc_send_cmd(c, user && user[0] ? 3 : 2, a) && expect_ok(c, "AUTH");
    }
    free(pass);
    free(user);
    char port[16];
    /* The port the master's INFO shows for us: ours for the kind of link
     * it serves us on, as Redis. */
    long long ap = atomic_load(&cfg.replica_announce_port);
    long long tp = atomic_load(&cfg.tls_replication) ? atomic_load(&cfg.tls_port) : 0;
    snprintf(port, sizeof(port), "%lld", ap ? ap : tp ? tp : atomic_load(&cfg.port));
    const char *lp[3] = {"REPLCONF", "listening-port", port};
    ok = ok && rc_send_cmd(c, 3, lp) && expect_ok(c, "REPLCONF listening-port");
    char *ip = config_get_str("replica-announce-ip");
    if (ok && ip && ip[0]) {
        const char *a[3] = {"REPLCONF", "ip-address", ip};
        ok = rc_send_cmd(c, 3, a) && expect_ok(c, "REPLCONF ip-address");
    }
    free(ip);
    const char *capa[3] = {"REPLCONF", "capa", "bloomery"};
    ok = ok && rc_send_cmd(c, 3, capa) && expect_ok(c, "REPLCONF capa");
    if (!ok)
        return false;
    char id[REPL_ID_LEN + 1], next[24];
    replica_master_id(id);
    snprintf(next, sizeof(next), "%" PRIu64, wal_assigned_lsn() + 1);
    const char *psync[3] = {"PSYNC", id, next};
    if (!rc_send_cmd(c, 3, psync) || !rc_read_line(c, reply, rlen))
        return false;
    if (reply[0] != '+') {
        snprintf(c->err, sizeof(c->err), "PSYNC: %.200s", reply);
        return false;
    }
    return true;
}

static bool send_ack(repl_conn *c)
{
    char v[24];
    snprintf(v, sizeof(v), "%" PRIu64, wal_assigned_lsn());
    const char *a[3] = {"REPLCONF", "ACK", v};
    return rc_send_cmd(c, 3, a);
}

/* Receive one chunk file, verify it and store it under its name. */
static bool store_chunk(repl_conn *c, chunk_hash h)
{
    uint8_t *buf, *raw = NULL;
    size_t len, off;
    uint32_t rl;
    char why[256];
    if (!rc_read_bulk(c, &buf, &len, (size_t)CHUNK_MAX_RAW + 65536))
        return false;
    if (!chunk_file_decode(buf, len, &h, &raw, &rl, why, sizeof(why), &off)) {
        snprintf(c->err, sizeof(c->err), "chunk from the master refused: %.200s", why);
        free(buf);
        return false;
    }
    free(raw);
    char hex[33], path[4400];
    chunk_hash_hex(h, hex);
    snprintf(path, sizeof(path), "%s/chunks/%s.zst", repl_dir(), hex);
    /* Synced one by one: persist_resync_install syncs the directory. */
    bool ok = datadir_write_file(path, buf, len);
    if (!ok)
        snprintf(c->err, sizeof(c->err), "writing %.200s: %s", path, strerror(errno));
    free(buf);
    return ok;
}

/* Exact filters' store (sender.c): the master's list (*files, *nfiles),
 * the files not here yet asked for and kept; the caller builds DIR/exact
 * from the list once the resync has begun. */
static bool receive_store(repl_conn *c, exact_file **files_out, size_t *nfiles)
{
    uint8_t *list = NULL, *wire = NULL;
    size_t llen, n = 0, k = 0;
    exact_file *files = NULL;
    char err[512];
    bool ok = rc_read_bulk(c, &list, &llen, MAX_INDEX);
    if (ok && !exact_manifest_decode(list, llen, &files, &n)) {
        snprintf(c->err, sizeof(c->err), "exact store list from the master refused");
        ok = false;
    }
    free(list);
    if (ok && (wire = malloc(4 * (n ? n : 1))) == NULL) {
        snprintf(c->err, sizeof(c->err), "out of memory");
        ok = false;
    }
    for (size_t i = 0; ok && i < n; i++)
        if (!exact_recv_have(repl_dir(), &files[i]))
            le_store(wire + 4 * k++, i, 4);
    char h[32];
    int hl = snprintf(h, sizeof(h), "$%zu\r\n", 4 * k);
    ok = ok && rc_send(c, h, (size_t)hl) && rc_send(c, wire, 4 * k) && rc_send(c, "\r\n", 2);
    for (size_t j = 0; ok && j < k; j++) {
        const exact_file *f = &files[le_load(wire + 4 * j, 4)];
        uint8_t *data;
        size_t len;
        ok = rc_read_bulk(c, &data, &len, (size_t)f->size + 1);
        if (ok) {
            if (!exact_recv_store(repl_dir(), f, data, len, err, sizeof(err))) {
                snprintf(c->err, sizeof(c->err), "%.400s", err);
                ok = false;
            }
            free(data);
        }
    }
    if (ok)
        server_log(LOG_NOTICE, "Full resync: %zu exact store files fetched, %zu already here", k,
                   n - k);
    free(wire);
    if (ok) {
        *files_out = files;
        *nfiles = n;
    } else {
        free(files);
    }
    return ok;
}

/* The index and the chunks it names that are not here yet. On success the
 * replica is ready to install (persist_resync_install). */
static bool receive_snapshot(repl_conn *c, uint64_t offset, uint8_t **index, size_t *ilen,
                             snap_index *ix, exact_file **xfiles, size_t *nx)
{
    if (!rc_read_bulk(c, index, ilen, MAX_INDEX))
        return false;
    char err[256] = "";
    size_t err_off;
    if (!snap_index_parse(*index, *ilen, ix, err, sizeof(err), &err_off) ||
        ix->start_lsn != offset + 1) {
        snprintf(c->err, sizeof(c->err), "snapshot index from the master refused: %.200s",
                 err[0] ? err : "start LSN");
        return false;
    }
    chunk_hash *want = malloc((ix->nchunks ? ix->nchunks : 1) * sizeof(*want));
    if (want == NULL) {
        snprintf(c->err, sizeof(c->err), "out of memory");
        return false;
    }
    size_t n = 0;
    for (uint64_t i = 0; i < ix->nchunks; i++)
        if (ix->chunks[i].where == SNAP_CHUNK_FILE)
            want[n++] = ix->chunks[i].hash;
    qsort(want, n, sizeof(*want), chunk_hash_cmp);
    size_t k = 0, present = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && chunk_hash_cmp(&want[k - 1], &want[i]) == 0)
            continue;
        char hex[33], path[4400];
        chunk_hash_hex(want[i], hex);
        snprintf(path, sizeof(path), "%s/chunks/%s.zst", repl_dir(), hex);
        if (datadir_is_file(path)) {
            present++;
            continue;
        }
        want[k++] = want[i];
    }
    uint8_t *wire = malloc(16 * (k ? k : 1));
    bool ok = wire != NULL;
    for (size_t i = 0; ok && i < k; i++) {
        le_store(wire + 16 * i, want[i].lo, 8);
        le_store(wire + 16 * i + 8, want[i].hi, 8);
    }
    char h[32];
    int hl = snprintf(h, sizeof(h), "$%zu\r\n", 16 * k);
    ok = ok && rc_send(c, h, (size_t)hl) && rc_send(c, wire, 16 * k) && rc_send(c, "\r\n", 2);
    free(wire);
    for (size_t i = 0; ok && i < k; i++)
        ok = store_chunk(c, want[i]);
    free(want);
    bool exact = false;
    for (uint64_t i = 0; i < ix->nkeys; i++)
        exact = exact || ix->entries[i].exact != NULL;
    if (ok && exact)
        ok = receive_store(c, xfiles, nx);
    if (ok) {
        repl_count(&repl_stat_chunks_fetched, k);
        repl_count(&repl_stat_chunks_present, present);
        server_log(LOG_NOTICE,
                   "Full resync: %zu chunk files fetched, %zu already here; loading the "
                   "master's snapshot",
                   k, present);
    }
    return ok;
}

/* Append one record of the stream to the log and apply it. */
static bool apply_record(repl_conn *c, const uint8_t *p, const wal_record *rec, const wal_op *op)
{
    pthread_mutex_lock(&snapshot_apply_lock);
    bool ok = wal_append_raw(p, rec->size, rec->lsn);
    if (ok) {
        replay_apply(rec, op);
        atomic_fetch_add_explicit(&persist_dirty, 1, memory_order_relaxed);
        atomic_store(&L.applied, rec->lsn);
    }
    pthread_mutex_unlock(&snapshot_apply_lock);
    if (!ok)
        snprintf(c->err, sizeof(c->err), "can't log record LSN %" PRIu64, rec->lsn);
    return ok;
}

/* Load what a full resync installed; -1 failed, else the next LSN. */
static bool finish_load(repl_conn *c)
{
    uint64_t next;
    char err[512];
    bool ok = persist_resync_finish(repl_dir(), &next, err, sizeof(err));
    repl_set_loading(false);
    persist_resync_end();
    atomic_store(&L.syncing, false);
    if (!ok) {
        snprintf(c->err, sizeof(c->err), "loading the master's snapshot: %.200s", err);
    } else {
        atomic_store(&L.applied, next - 1);
        server_log(LOG_NOTICE, "MASTER <-> REPLICA sync: finished with success at LSN %" PRIu64,
                   next - 1);
    }
    return ok;
}

/* The stream of records until the link fails. pending_start: a full
 * resync's records below the snapshot's start are only logged until the
 * load (0: loaded). */
static void follow(repl_conn *c, uint64_t pending_start)
{
    uint8_t *batch = NULL;
    int64_t last_ack = mono_us();
    if (pending_start == 0)
        atomic_store(&L.applied, wal_assigned_lsn());
    long long timeout_ms = atomic_load(&cfg.repl_timeout) * 1000;
    if (pending_start && wal_assigned_lsn() + 1 >= pending_start) {
        bool ok = finish_load(c);
        pending_start = 0;
        if (!ok)
            return;
    }
    if (pending_start == 0) {
        set_link(REPL_LINK_CONNECTED);
        send_ack(c);
    }
    while (!atomic_load(&L.stop)) {
        if (atomic_exchange(&L.drop, false)) {
            snprintf(c->err, sizeof(c->err), "link dropped by CLIENT KILL");
            goto out;
        }
        if (c->in.len == c->pos && !rc_poll_in(c, 100, -1)) {
            if (c->err[0])
                goto out;
            if (now_ms() - atomic_load(&L.last_io_ms) > timeout_ms) {
                snprintf(c->err, sizeof(c->err), "timeout: nothing from the master in %lld s",
                         timeout_ms / 1000);
                goto out;
            }
            if (mono_us() - last_ack >= 1000000) {
                if (!send_ack(c))
                    goto out;
                last_ack = mono_us();
            }
            continue;
        }
        free(batch);
        size_t n;
        int kind = repl_read_message(c, &batch, &n);
        if (kind < 0)
            goto out;
        atomic_store(&L.last_io_ms, now_ms());
        if (kind == 0)
            continue;
        for (size_t off = 0; off < n;) {
            size_t at = off;
            wal_record rec;
            wal_op op;
            if (!repl_batch_next(batch, n, &off, wal_assigned_lsn() + 1, &rec, &op, c->err,
                                 sizeof(c->err)))
                goto out;
            if (pending_start && rec.lsn < pending_start) {
                if (!wal_append_raw(batch + at, rec.size, rec.lsn)) {
                    snprintf(c->err, sizeof(c->err), "can't log record LSN %" PRIu64, rec.lsn);
                    goto out;
                }
                continue;
            }
            if (pending_start) {
                bool ok = finish_load(c);
                pending_start = 0;
                if (!ok)
                    goto out;
                set_link(REPL_LINK_CONNECTED);
            }
            if (!apply_record(c, batch + at, &rec, &op))
                goto out;
        }
        if (pending_start && wal_assigned_lsn() + 1 >= pending_start) {
            bool ok = finish_load(c);
            pending_start = 0;
            if (!ok)
                goto out;
            set_link(REPL_LINK_CONNECTED);
        }
        if (pending_start == 0 && !send_ack(c))
            break;
    }
out:
    free(batch);
    if (pending_start) {
        /* The load never happened: what is installed is loaded now, so the
         * server keeps a consistent state until the next attempt. */
        finish_load(c);
    }
}

/* tls-replication yes: the link is TLS, the master verified against
 * tls-ca-cert-file/dir. */
static bool start_tls(repl_conn *c)
{
    if (!atomic_load(&cfg.tls_replication))
        return true;
    SSL *ssl = tls_connect_ssl();
    if (ssl == NULL) {
        snprintf(c->err, sizeof(c->err), "TLS is not configured");
        return false;
    }
    return rc_start_tls(c, ssl);
}

static void run_once(void)
{
    char host[256];
    pthread_mutex_lock(&L.lock);
    snprintf(host, sizeof(host), "%s", L.host);
    int port = L.port;
    pthread_mutex_unlock(&L.lock);
    repl_conn c;
    rc_init(&c, -1, (int)(atomic_load(&cfg.repl_timeout) * 1000), &L.stop);
    set_link(REPL_LINK_CONNECTING);
    char reply[512];
    if (!rc_connect(&c, host, port) || !start_tls(&c) || !handshake(&c, reply, sizeof(reply))) {
        if (!atomic_load(&L.stop))
            server_log(LOG_NOTICE, "Replication with %s:%d: %s", host, port, c.err);
        rc_close(&c);
        return;
    }
    atomic_store(&L.last_io_ms, now_ms());
    char id[REPL_ID_LEN + 1] = "";
    uint64_t off = 0;
    char kind = repl_psync_reply(reply, id, &off);
    if (kind == 'c') {
        server_log(LOG_NOTICE, "MASTER <-> REPLICA sync: partial resync from LSN %" PRIu64,
                   wal_assigned_lsn() + 1);
        repl_follow_id(id);
        follow(&c, 0);
    } else if (kind == 'f') {
        server_log(LOG_NOTICE, "MASTER <-> REPLICA sync: full resync from %s:%d at LSN %" PRIu64,
                   host, port, off);
        set_link(REPL_LINK_SYNC);
        atomic_store(&L.syncing, true);
        uint8_t *index = NULL;
        size_t ilen = 0;
        snap_index ix = {0};
        char err[512];
        uint64_t in0 = c.bytes_in;
        exact_file *xfiles = NULL;
        size_t nx = 0;
        bool ok = receive_snapshot(&c, off, &index, &ilen, &ix, &xfiles, &nx);
        repl_count(&repl_stat_sync_bytes, c.bytes_in - in0);
        if (ok) {
            uint64_t log_from = snap_index_log_from(&ix);
            repl_forget_id();
            persist_resync_begin();
            repl_set_loading(true);
            /* The master's exact store replaces ours (persist_resync_finish
             * opens it again). */
            ok = xfiles == NULL || exact_recv_install(repl_dir(), xfiles, nx, err, sizeof(err));
            ok = ok && persist_resync_install(repl_dir(), index, ilen, ix.seq, log_from, err,
                                              sizeof(err));
            if (!ok) {
                snprintf(c.err, sizeof(c.err), "installing the master's snapshot: %.200s", err);
                finish_load(&c);
            } else {
                repl_adopt_id(id);
                follow(&c, ix.start_lsn);
            }
        }
        snap_index_free(&ix);
        free(index);
        free(xfiles);
        atomic_store(&L.syncing, false);
    } else {
        snprintf(c.err, sizeof(c.err), "PSYNC: unexpected reply '%.100s'", reply);
    }
    if (c.err[0] && !atomic_load(&L.stop))
        server_log(LOG_WARNING, "Replication with %s:%d: %s", host, port, c.err);
    rc_close(&c);
}

static void *link_main(void *arg)
{
    (void)arg;
    ks_set_applier(true);
    while (!atomic_load(&L.stop)) {
        run_once();
        set_link(REPL_LINK_CONNECT);
        for (int i = 0; i < 10 && !atomic_load(&L.stop); i++)
            usleep(100000);
    }
    return NULL;
}

void replica_link_start(const char *host, int port)
{
    replica_link_stop();
    pthread_mutex_lock(&L.lock);
    snprintf(L.host, sizeof(L.host), "%s", host);
    L.port = port;
    L.down_since_ms = now_ms();
    pthread_mutex_unlock(&L.lock);
    atomic_store(&L.stop, false);
    atomic_store(&L.link, REPL_LINK_CONNECT);
    if (pthread_create(&L.thread, NULL, link_main, NULL) == 0)
        L.running = true;
    else
        server_log(LOG_WARNING, "Can't start the replication thread");
}

void replica_link_stop(void)
{
    if (!L.running)
        return;
    atomic_store(&L.stop, true);
    pthread_join(L.thread, NULL);
    L.running = false;
    atomic_store(&L.link, REPL_LINK_NONE);
    repl_update_checks();
}

void replica_link_status(repl_status *s)
{
    pthread_mutex_lock(&L.lock);
    snprintf(s->master_host, sizeof(s->master_host), "%s", L.host);
    s->master_port = L.port;
    s->link_down_since_ms = L.down_since_ms;
    pthread_mutex_unlock(&L.lock);
    s->link = atomic_load(&L.link);
    s->last_io_ms = atomic_load(&L.last_io_ms);
    s->sync_in_progress = atomic_load(&L.syncing);
}

bool replica_link_up(void) { return atomic_load(&L.link) == REPL_LINK_CONNECTED; }

bool repl_drop_master_link(void)
{
    if (!L.running || atomic_load(&L.link) != REPL_LINK_CONNECTED)
        return false;
    atomic_store(&L.drop, true);
    return true;
}

uint64_t replica_applied_lsn(void)
{
    return L.running ? atomic_load(&L.applied) : wal_assigned_lsn();
}

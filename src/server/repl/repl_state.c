/* Replication state: the role, the replication ids, and what INFO and ROLE
 * show. A master's id names its history; after a promotion the previous
 * id stays valid up to the promotion's offset, so replicas of the old
 * master continue with a partial resync (as Redis's replid2).
 *
 * A replica keeps the id of the history its log follows in DIR/replid, so
 * a restart resumes with a partial resync when its master still holds the
 * records that follow (Redis keeps it in the RDB). The file is written
 * before the first record of a new history is logged and removed before a
 * full resync replaces the data, on a promotion, and when the server
 * starts as a master: whenever it exists, the log is a prefix of the
 * history it names. A master always starts a new history: its log may
 * have lost a tail its replicas received. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "datadir.h"
#include "keyspace.h"
#include "log.h"
#include "persist.h"
#include "repl_int.h"
#include "util.h"

static struct {
    pthread_mutex_t lock;
    char dir[4096];
    char replid[REPL_ID_LEN + 1], replid2[REPL_ID_LEN + 1];
    uint64_t second; /* replid2 is valid for LSNs below this */
    _Atomic bool replica, loading, checks;
} R = {.lock = PTHREAD_MUTEX_INITIALIZER};

uint64_t repl_stat_full, repl_stat_partial_ok, repl_stat_partial_err;
uint64_t repl_stat_chunks_fetched, repl_stat_chunks_present, repl_stat_sync_bytes;

void repl_count(uint64_t *counter, uint64_t n) { __atomic_fetch_add(counter, n, __ATOMIC_RELAXED); }

void repl_new_id(char out[REPL_ID_LEN + 1])
{
    uint8_t b[REPL_ID_LEN / 2];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, b, sizeof(b)) != (ssize_t)sizeof(b)) {
        uint64_t x = (uint64_t)now_ms() ^ ((uint64_t)getpid() << 32);
        for (size_t i = 0; i < sizeof(b); i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            b[i] = (uint8_t)(x >> 56);
        }
    }
    if (fd >= 0)
        close(fd);
    for (size_t i = 0; i < sizeof(b); i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* DIR/replid: the history this replica's log follows. */
static void id_path(char *out, size_t n) { snprintf(out, n, "%s/replid", R.dir); }

static void sync_data_dir(void)
{
    int fd = open(R.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        if (fsync(fd) != 0)
            server_log(LOG_WARNING, "Syncing %s: %s", R.dir, strerror(errno));
        close(fd);
    }
}

void repl_forget_id(void)
{
    char path[4200];
    id_path(path, sizeof(path));
    if (unlink(path) == 0)
        sync_data_dir();
    else if (errno != ENOENT)
        server_log(LOG_WARNING, "Removing %s: %s", path, strerror(errno));
}

static void save_id(const char *id)
{
    char path[4200], line[REPL_ID_LEN + 2];
    id_path(path, sizeof(path));
    snprintf(line, sizeof(line), "%s\n", id);
    if (datadir_write_file(path, line, strlen(line))) {
        sync_data_dir();
        return;
    }
    /* Without it the next start makes a full resync; a stale one would
     * name a history the log no longer follows. */
    server_log(LOG_WARNING, "Writing %s: %s", path, strerror(errno));
    repl_forget_id();
}

/* The id DIR/replid holds, when it holds one. */
static bool load_id(char out[REPL_ID_LEN + 1])
{
    char path[4200];
    id_path(path, sizeof(path));
    uint8_t *buf;
    size_t len;
    if (!datadir_read_file(path, &buf, &len))
        return false;
    bool ok = len == REPL_ID_LEN + 1 && buf[REPL_ID_LEN] == '\n';
    for (size_t i = 0; ok && i < REPL_ID_LEN; i++)
        ok = (buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'f');
    if (ok) {
        memcpy(out, buf, REPL_ID_LEN);
        out[REPL_ID_LEN] = '\0';
    }
    free(buf);
    return ok;
}

bool repl_init(const char *dir, char *err, size_t errlen)
{
    snprintf(R.dir, sizeof(R.dir), "%s", dir);
    repl_new_id(R.replid);
    memset(R.replid2, '0', REPL_ID_LEN);
    R.replid2[REPL_ID_LEN] = '\0';
    wal_set_written_hook(senders_wake);
    /* A server configured as a replica must not come up as a master: it
     * would take writes that its first resync erases. So a replicaof it
     * can't follow stops the start (Redis refuses such a line too). */
    char *of = config_get_str("replicaof");
    char host[256], rest[2], why[256];
    long long port = -1;
    bool ok = true, already;
    if (of && of[0] && strcasecmp(of, "no one") != 0) {
        if (sscanf(of, "%255s %lld %1s", host, &port, rest) != 2 || port < 0 || port > 65535) {
            snprintf(err, errlen, "replicaof '%s': Invalid master port", of);
            ok = false;
        } else {
            /* The history its log follows: a partial resync if the master
             * still has what comes next. */
            load_id(R.replid);
            ok = repl_replicaof(host, (int)port, &already, why, sizeof(why), NULL, NULL);
            if (!ok)
                snprintf(err, errlen, "replicaof '%s': %s", of, why);
        }
    }
    free(of);
    /* A master's writes would make the file false. */
    if (ok && !repl_is_replica())
        repl_forget_id();
    return ok;
}

void repl_shutdown(void)
{
    replica_link_stop();
    senders_stop_all();
}

const char *repl_dir(void) { return R.dir; }

void repl_ids(char replid[REPL_ID_LEN + 1], char replid2[REPL_ID_LEN + 1], uint64_t *second)
{
    pthread_mutex_lock(&R.lock);
    memcpy(replid, R.replid, REPL_ID_LEN + 1);
    memcpy(replid2, R.replid2, REPL_ID_LEN + 1);
    *second = R.second;
    pthread_mutex_unlock(&R.lock);
}

void replica_master_id(char out[REPL_ID_LEN + 1])
{
    pthread_mutex_lock(&R.lock);
    memcpy(out, R.replid, REPL_ID_LEN + 1);
    pthread_mutex_unlock(&R.lock);
}

void repl_adopt_id(const char *id)
{
    save_id(id);
    pthread_mutex_lock(&R.lock);
    snprintf(R.replid, sizeof(R.replid), "%s", id);
    memset(R.replid2, '0', REPL_ID_LEN);
    R.second = 0;
    pthread_mutex_unlock(&R.lock);
}

void repl_follow_id(const char *id)
{
    pthread_mutex_lock(&R.lock);
    bool changed = strcmp(R.replid, id) != 0;
    if (changed) {
        memcpy(R.replid2, R.replid, sizeof(R.replid2));
        R.second = wal_assigned_lsn() + 1;
        snprintf(R.replid, sizeof(R.replid), "%s", id);
    }
    pthread_mutex_unlock(&R.lock);
    /* Before the new history's first record is logged. */
    if (changed)
        save_id(id);
}

bool repl_is_replica(void) { return atomic_load_explicit(&R.replica, memory_order_relaxed); }
bool repl_loading(void) { return atomic_load_explicit(&R.loading, memory_order_relaxed); }
bool repl_link_down(void) { return repl_is_replica() && !replica_link_up(); }
bool repl_checks_data(void)
{
    return atomic_load_explicit(&R.checks, memory_order_relaxed) ||
           atomic_load_explicit(&cfg.min_replicas_to_write, memory_order_relaxed) > 0;
}

void repl_set_loading(bool on)
{
    atomic_store(&R.loading, on);
    repl_update_checks();
}

void repl_update_checks(void)
{
    atomic_store(&R.checks, atomic_load(&R.replica) || atomic_load(&R.loading));
}

bool repl_too_few_replicas(void)
{
    long long need = atomic_load_explicit(&cfg.min_replicas_to_write, memory_order_relaxed);
    if (need <= 0 || repl_is_replica())
        return false;
    long long lag = atomic_load_explicit(&cfg.min_replicas_max_lag, memory_order_relaxed);
    return senders_good(lag * 1000) < (unsigned long long)need;
}

bool repl_replicaof(const char *host, int port, bool *already, char *err, size_t errlen,
                    void (*gate)(void *arg, bool enter), void *arg)
{
    *already = false;
    if (!wal_enabled()) {
        snprintf(err, errlen, "replication needs appendonly yes");
        return false;
    }
    if (repl_is_replica()) {
        repl_status s = {0};
        replica_link_status(&s);
        if (strcmp(s.master_host, host) == 0 && s.master_port == port) {
            *already = true;
            return true;
        }
    }
    if (gate)
        gate(arg, true);
    atomic_store(&R.replica, true);
    repl_update_checks();
    ks_set_expiry_deletes(false);
    if (gate)
        gate(arg, false);
    /* A master's replicas go: they reconnect to whichever master the
     * failover names (Redis disconnects them too). */
    senders_stop_all();
    char v[300];
    snprintf(v, sizeof(v), "%s %d", host, port);
    config_set_str("replicaof", v);
    server_log(LOG_NOTICE, "Connecting to MASTER %s:%d", host, port);
    replica_link_start(host, port);
    return true;
}

void repl_promote(void)
{
    if (!repl_is_replica())
        return;
    replica_link_stop();
    pthread_mutex_lock(&R.lock);
    memcpy(R.replid2, R.replid, sizeof(R.replid2));
    R.second = wal_assigned_lsn() + 1;
    repl_new_id(R.replid);
    pthread_mutex_unlock(&R.lock);
    repl_forget_id();
    atomic_store(&R.replica, false);
    repl_update_checks();
    ks_set_expiry_deletes(true);
    config_set_str("replicaof", "");
    server_log(LOG_NOTICE, "MASTER MODE enabled (LSN %" PRIu64 ")", wal_assigned_lsn());
}

void repl_get_status(repl_status *s)
{
    memset(s, 0, sizeof(*s));
    s->replica = repl_is_replica();
    repl_ids(s->replid, s->replid2, &s->second_offset);
    s->offset = s->replica ? replica_applied_lsn() : wal_assigned_lsn();
    if (s->replica)
        replica_link_status(s);
    senders_status(s);
    s->full_syncs = __atomic_load_n(&repl_stat_full, __ATOMIC_RELAXED);
    s->partial_syncs_ok = __atomic_load_n(&repl_stat_partial_ok, __ATOMIC_RELAXED);
    s->partial_syncs_err = __atomic_load_n(&repl_stat_partial_err, __ATOMIC_RELAXED);
    s->sync_chunks_fetched = __atomic_load_n(&repl_stat_chunks_fetched, __ATOMIC_RELAXED);
    s->sync_chunks_present = __atomic_load_n(&repl_stat_chunks_present, __ATOMIC_RELAXED);
    s->sync_bytes = __atomic_load_n(&repl_stat_sync_bytes, __ATOMIC_RELAXED);
}

void repl_status_free(repl_status *s)
{
    free(s->replicas);
    s->replicas = NULL;
}

static void add(pbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(pbuf *b, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n > 0)
        pbuf_put(b, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

char *repl_info(void)
{
    repl_status s;
    repl_get_status(&s);
    pbuf b = {0};
    add(&b, "role:%s\r\n", s.replica ? "slave" : "master");
    if (s.replica) {
        bool up = s.link == REPL_LINK_CONNECTED;
        int64_t now = now_ms();
        add(&b,
            "master_host:%s\r\nmaster_port:%d\r\nmaster_link_status:%s\r\n"
            "master_last_io_seconds_ago:%lld\r\nmaster_sync_in_progress:%d\r\n"
            "slave_read_repl_offset:%" PRIu64 "\r\nslave_repl_offset:%" PRIu64 "\r\n",
            s.master_host, s.master_port, up ? "up" : "down",
            s.last_io_ms ? (long long)(now - s.last_io_ms) / 1000 : -1LL, s.sync_in_progress,
            s.offset, s.offset);
        if (!up)
            add(&b, "master_link_down_since_seconds:%lld\r\n",
                s.link_down_since_ms ? (long long)(now - s.link_down_since_ms) / 1000 : -1LL);
        add(&b, "slave_priority:%lld\r\nslave_read_only:1\r\nreplica_announced:%lld\r\n",
            atomic_load(&cfg.replica_priority), atomic_load(&cfg.replica_announced));
    }
    add(&b, "connected_slaves:%zu\r\n", s.nreplicas);
    long long minrep = atomic_load(&cfg.min_replicas_to_write);
    if (minrep > 0 && !s.replica)
        add(&b, "min_slaves_good_slaves:%u\r\n",
            senders_good(atomic_load(&cfg.min_replicas_max_lag) * 1000));
    for (size_t i = 0; i < s.nreplicas; i++) {
        repl_replica_status *r = &s.replicas[i];
        add(&b, "slave%zu:ip=%s,port=%d,state=%s,offset=%" PRIu64 ",lag=%lld\r\n", i, r->ip,
            r->port, r->state, r->ack, (long long)r->lag_s);
    }
    add(&b,
        "master_failover_state:no-failover\r\nmaster_replid:%s\r\nmaster_replid2:%s\r\n"
        "master_repl_offset:%" PRIu64 "\r\nsecond_repl_offset:%lld\r\n"
        "repl_backlog_active:1\r\nrepl_backlog_size:0\r\nrepl_backlog_first_byte_offset:1\r\n"
        "repl_backlog_histlen:%" PRIu64 "\r\n"
        "bloomery_sync_full:%" PRIu64 "\r\nbloomery_sync_partial_ok:%" PRIu64 "\r\n"
        "bloomery_sync_partial_err:%" PRIu64 "\r\nbloomery_sync_chunks_fetched:%" PRIu64 "\r\n"
        "bloomery_sync_chunks_present:%" PRIu64 "\r\n"
        "bloomery_sync_snapshot_bytes_received:%" PRIu64 "\r\n",
        s.replid, s.replid2, s.offset, s.second_offset ? (long long)s.second_offset : -1LL,
        s.offset, s.full_syncs, s.partial_syncs_ok, s.partial_syncs_err, s.sync_chunks_fetched,
        s.sync_chunks_present, s.sync_bytes);
    repl_status_free(&s);
    pbuf_put(&b, "", 1);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    return (char *)b.p;
}

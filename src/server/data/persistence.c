/* Persistence as a whole: start-up (recovery, then the log opened), the
 * `save <seconds> <changes>` schedule, the final snapshot at shutdown, and
 * INFO's Persistence section. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "datadir.h"
#include "datadir_fs.h"
#include "exact.h"
#include "exact_store.h"
#include "log.h"
#include "persist.h"
#include "snapshot.h"
#include "util.h"

_Atomic int persist_shutdown_save;

#define RETRY_AFTER_FAILURE_MS 5000

bool persist_start(const char *dir, char *err, size_t errlen)
{
    uint64_t next = 1;
    snapshot_init(dir);
    ks_set_expired_hook(wal_log_expired);
    exact_start(dir);
    if (!recovery_run(dir, &next, true, err, errlen))
        return false;
    exact_recovered(next);
    if (atomic_load(&cfg.appendonly))
        return wal_open(dir, next, err, errlen);
    wal_set_next_lsn(dir, next);
    return true;
}

/* The configured schedule: pairs "<seconds> <changes>". */
static size_t save_points(long long *secs, long long *changes, size_t max)
{
    char *s = config_get_str("save");
    size_t n = 0;
    char *save = NULL;
    for (char *a = strtok_r(s, " ", &save); a && n < max; a = strtok_r(NULL, " ", &save)) {
        char *b = strtok_r(NULL, " ", &save);
        long long x, y;
        if (b == NULL || !str_to_ll(a, strlen(a), &x) || !str_to_ll(b, strlen(b), &y) || x < 0 ||
            y < 0)
            break;
        secs[n] = x;
        changes[n++] = y;
    }
    free(s);
    return n;
}

void persist_stop(void)
{
    snapshot_shutdown();
    long long secs[16], changes[16];
    int mode = atomic_load(&persist_shutdown_save);
    if (mode > 0 || (mode == 0 && save_points(secs, changes, 16) > 0)) {
        char err[256];
        server_log(LOG_NOTICE, "Saving the final snapshot before exiting.");
        if (!snapshot_run(true, err, sizeof(err)))
            server_log(LOG_WARNING, "Error saving the final snapshot: %s", err);
    }
    wal_close();
    exact_stop();
}

static _Atomic bool schedule_paused;

void persist_cron(void)
{
    if (atomic_load(&schedule_paused))
        return;
    exact_gc();
    exact_heal();
    snapshot_stats st;
    snapshot_get_stats(&st);
    if (st.in_progress)
        return;
    int64_t now = now_ms();
    if (!st.last_ok && now - st.last_attempt_ms < RETRY_AFTER_FAILURE_MS)
        return;
    long long secs[16], changes[16];
    size_t n = save_points(secs, changes, 16);
    uint64_t dirty = atomic_load(&persist_dirty);
    for (size_t i = 0; i < n; i++) {
        if (dirty >= (uint64_t)changes[i] && dirty > 0 && now / 1000 - st.last_save_s >= secs[i]) {
            server_log(LOG_NOTICE, "%lld changes in %lld seconds. Saving...", changes[i], secs[i]);
            char err[256];
            if (!snapshot_run(false, err, sizeof(err)))
                server_log(LOG_WARNING, "Background snapshot: %s", err);
            return;
        }
    }
}

void persist_info(char *out, size_t outlen, bool loading)
{
    snapshot_stats st;
    wal_stats ws;
    snapshot_get_stats(&st);
    wal_get_stats(&ws);
    static const char *policies[] = {"always", "everysec", "no"};
    long long policy = atomic_load(&cfg.appendfsync);
    int64_t now = now_ms();
    snprintf(out, outlen,
             "loading:%d\r\nasync_loading:0\r\nrdb_changes_since_last_save:%" PRIu64 "\r\n"
             "rdb_bgsave_in_progress:%d\r\nrdb_last_save_time:%lld\r\n"
             "rdb_last_bgsave_status:%s\r\nrdb_last_bgsave_time_sec:%lld\r\n"
             "rdb_current_bgsave_time_sec:%lld\r\naof_enabled:%d\r\n"
             "aof_rewrite_in_progress:%d\r\naof_rewrite_scheduled:0\r\n"
             "aof_last_rewrite_time_sec:-1\r\naof_current_rewrite_time_sec:-1\r\n"
             "aof_last_bgrewrite_status:%s\r\naof_last_write_status:%s\r\n"
             "bloomery_persistence:snapshot+log\r\nbloomery_appendfsync:%s\r\n"
             "bloomery_snapshot_seq:%" PRIu64 "\r\nbloomery_snapshot_start_lsn:%" PRIu64 "\r\n"
             "bloomery_snapshot_keys:%" PRIu64 "\r\nbloomery_snapshot_chunks:%" PRIu64 "\r\n"
             "bloomery_snapshot_last_duration_ms:%lld\r\n"
             "bloomery_snapshot_bytes_written:%" PRIu64 "\r\n"
             "bloomery_snapshot_chunks_written:%" PRIu64 "\r\n"
             "bloomery_snapshot_chunks_reused:%" PRIu64 "\r\n"
             "bloomery_snapshot_chunks_inline:%" PRIu64 "\r\n"
             "bloomery_wal_bytes_written:%" PRIu64 "\r\nbloomery_wal_appended_lsn:%" PRIu64 "\r\n"
             "bloomery_wal_written_lsn:%" PRIu64 "\r\n"
             "bloomery_wal_durable_lsn:%" PRIu64 "\r\nbloomery_wal_pending_bytes:%" PRIu64 "\r\n"
             "bloomery_wal_fsyncs:%" PRIu64 "\r\n",
             loading ? 1 : 0, atomic_load(&persist_dirty), st.in_progress,
             (long long)st.last_save_s, st.last_ok ? "ok" : "err",
             (long long)(st.last_duration_ms + 500) / 1000,
             st.in_progress ? (long long)(now - st.current_start_ms) / 1000 : -1LL,
             wal_enabled() ? 1 : 0, st.in_progress, st.last_ok ? "ok" : "err",
             ws.write_ok ? "ok" : "err", policies[policy < 0 || policy > 2 ? 1 : policy], st.seq,
             st.start_lsn, st.keys, st.chunks, (long long)st.last_duration_ms, st.bytes_written,
             st.chunks_written, st.chunks_reused, st.chunks_inline, ws.bytes, ws.appended_lsn,
             ws.written_lsn, ws.durable_lsn, ws.pending_bytes, ws.fsyncs);
    uint64_t torn;
    const char *torn_last;
    recovery_torn_tails(&torn, &torn_last);
    size_t used = strlen(out);
    snprintf(out + used, outlen - used, "log_torn_tails:%" PRIu64 "\r\nlog_torn_tail_last:%s\r\n",
             torn, torn_last);
}

/* ---- a replica's full resync ---- */

void persist_resync_begin(void)
{
    atomic_store(&schedule_paused, true);
    snapshot_shutdown();
    wal_close();
}

void persist_resync_end(void) { atomic_store(&schedule_paused, false); }

static void remove_files(const char *dir, const char *sub, const char *suffix)
{
    char path[4300];
    snprintf(path, sizeof(path), "%s/%s", dir, sub);
    uint64_t *nums;
    size_t n = datadir_list(path, suffix, &nums);
    for (size_t i = 0; i < n; i++) {
        char f[4400];
        snprintf(f, sizeof(f), "%s/%016" PRIx64 "%s", path, nums[i], suffix);
        datadir_unlink(f);
    }
    free(nums);
}

bool persist_resync_install(const char *dir, const uint8_t *index, size_t len, uint64_t seq,
                            uint64_t log_from, char *err, size_t errlen)
{
    char sdir[4200], ldir[4200], path[4300];
    snprintf(sdir, sizeof(sdir), "%s/snapshots", dir);
    snprintf(ldir, sizeof(ldir), "%s/log", dir);
    /* The chunk files just received first, then nothing of the old state
     * may remain that a start could combine with the new index. */
    char cdir[4200];
    snprintf(cdir, sizeof(cdir), "%s/chunks", dir);
    int cfd = datadir_open_dir(cdir);
    bool synced = cfd >= 0 && syncfs(cfd) == 0;
    if (cfd >= 0)
        close(cfd);
    if (!synced) {
        snprintf(err, errlen, "syncing %s: %s", cdir, datadir_strerror(errno));
        return false;
    }
    remove_files(dir, "snapshots", ".index");
    remove_files(dir, "log", ".wal");
    snprintf(path, sizeof(path), "%s/LAST", ldir);
    datadir_unlink(path);
    if (!datadir_sync_dir(sdir) || !datadir_sync_dir(ldir)) {
        snprintf(err, errlen, "syncing %s: %s", dir, strerror(errno));
        return false;
    }
    snprintf(path, sizeof(path), "%s/%016" PRIx64 ".index", sdir, seq);
    if (!datadir_write_file(path, index, len) || !datadir_sync_dir(sdir)) {
        snprintf(err, errlen, "writing %s: %s", path, datadir_strerror(errno));
        return false;
    }
    return wal_open(dir, log_from, err, errlen);
}

bool persist_resync_finish(const char *dir, uint64_t *next_lsn, char *err, size_t errlen)
{
    wal_close();
    ks_flush();
    snapshot_init(dir);
    /* A resync that shipped a store closed the old one to put it in place. */
    if (!xs_ok())
        exact_start(dir);
    if (!recovery_run(dir, next_lsn, false, err, errlen))
        return false;
    exact_recovered(*next_lsn);
    return wal_open(dir, *next_lsn, err, errlen);
}

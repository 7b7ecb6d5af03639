/* Durability: the write-ahead log, snapshots and recovery.
 *
 * Files, one concept each:
 *   wal.c       the log writer: one thread appends the records workers hand
 *               it to DIR/log/<first LSN>.wal, fsyncs per appendfsync and
 *               publishes the durable LSN
 *   wal_log.c   what a command logs: records built from library hashes
 *   snapshot.c  capture, background write and publication of a snapshot
 *   recovery.c  start-up: newest snapshot, then replay of the log
 *   replay.c    replay of the keyspace's own records; a value's records go
 *               to its type (types.h)
 *   persistence.c  start-up, the save schedule, the final snapshot, INFO
 * Replies wait for the log in net/commit.c; byte formats live in
 * src/persist (shared with `bloomery check-data`).
 * docs/PERSISTENCE.md describes the formats and the recovery rules.
 *
 * Ordering rule: a command logs while it still holds the stripe lock(s) of
 * the key(s) it changed, after applying the change, so the log's order of
 * records on one key is the order in which they were applied; a snapshot's
 * capture holds every stripe lock, so the log position it records (L0)
 * splits the history exactly.
 */
#ifndef BLOOMERYD_PERSIST_H
#define BLOOMERYD_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomery/bloomery.h"
#include "keyspace.h"
#include "wal_format.h"

enum { FSYNC_ALWAYS = 0, FSYNC_EVERYSEC = 1, FSYNC_NO = 2 };

/* ---- wal.c ---- */

/* Open the log for appending: a new file starting at next_lsn. */
bool wal_open(const char *dir, uint64_t next_lsn, char *err, size_t errlen);
/* Without a log (appendonly no): LSNs still number snapshots' positions. */
void wal_set_next_lsn(const char *dir, uint64_t next_lsn);
/* Write what is pending, fsync, stop the thread, close. */
void wal_close(void);
bool wal_enabled(void);
/* Before a command that may log takes any key lock: wait while the disk is
 * far behind (pending bytes over a cap), then reserve room for `bytes` of
 * records (wal_bound). False when the memory is not there: the command
 * must fail without changing anything. *held is what wal_release gives
 * back once the command has logged. */
bool wal_reserve(size_t bytes, size_t *held);
void wal_release(size_t held);
/* Encode one record straight into the append buffer: wal_record_open
 * returns the buffer positioned at the record's payload, with the log's
 * lock held until wal_record_close seals the record and returns its LSN.
 * Nothing in between may wait or take another lock. */
pbuf *wal_record_open(void);
uint64_t wal_record_close(uint8_t type);
/* Between these two (nestable) a thread's records wake the log thread once,
 * at wal_wake_deferred, instead of once each: a worker wraps a read's worth
 * of commands in them. Under always each record still wakes it at once. */
void wal_defer_wakes(void);
void wal_wake_deferred(void);
/* The LSN of the last record appended. */
uint64_t wal_assigned_lsn(void);
/* False after a write or fsync error not yet repaired (everysec, no):
 * write commands are refused with MISCONF meanwhile. */
bool wal_write_ok(void);
int wal_last_errno(void);
/* The LSN the next record will get (with every stripe locked: exact). */
uint64_t wal_next_lsn(void);
/* Start a new log file at the next LSN; returns that LSN. Called by a
 * snapshot's capture with every stripe locked. */
uint64_t wal_rotate(void);
/* Wait until the rotation to first_lsn is on disk; false when it will not
 * happen (log write error, closing). */
bool wal_wait_rotated(uint64_t first_lsn);
/* Delete log files that hold only records below lsn. */
void wal_delete_below(uint64_t lsn);
uint64_t wal_durable_lsn(void);
/* Called by the log thread after the durable LSN advanced (commit.c wakes
 * the workers whose replies wait). */
void wal_set_durable_hook(void (*fn)(void));
/* Called by the log thread after records reached the file (replication
 * senders read them from there). */
void wal_set_written_hook(void (*fn)(void));
uint64_t wal_written_lsn(void);
/* A replica's log is its master's, byte for byte: append a record framed
 * and sealed by the master under its own LSN, which must be the next one
 * (false otherwise, or without the memory). Without a log only the LSN
 * advances. */
bool wal_append_raw(const uint8_t *rec, size_t len, uint64_t lsn);

typedef struct wal_stats {
    /* appended: the last record taken into the log's buffer */
    uint64_t appended_lsn, written_lsn, durable_lsn, bytes, fsyncs, pending_bytes;
    uint64_t errors; /* failed writes, fsyncs and file creations since the start */
    int64_t last_fsync_ms;
    bool write_ok;
} wal_stats;
void wal_get_stats(wal_stats *s);

/* ---- wal_reader.c: the log files followed from an LSN (replication) ---- */

typedef struct wal_reader wal_reader;
/* A reader positioned at lsn; NULL with err when the log kept does not
 * reach back to lsn or has not reached it yet. */
wal_reader *wal_reader_open(const char *dir, uint64_t lsn, char *err, size_t errlen);
/* Append whole records (LSN up to `upto`, which must be written: see
 * wal_written_lsn) to out, about max bytes at most; returns the bytes
 * appended (0: nothing new), -1 with err when the log no longer holds the
 * next record or is damaged. */
int wal_reader_read(wal_reader *r, pbuf *out, size_t max, uint64_t upto, char *err, size_t errlen);
uint64_t wal_reader_next_lsn(const wal_reader *r);
void wal_reader_close(wal_reader *r);

/* ---- wal_log.c: called by command handlers ---- */

/* The most log bytes a command writes (what it reserves), from its
 * argument count, their total size and the length of its first key. */
size_t wal_bound(size_t argc, size_t argbytes, size_t keylen);

/* Changes since the last successful snapshot (INFO, the save schedule). */
extern _Atomic uint64_t persist_dirty;
/* During recovery nothing is logged or counted: per thread, as a
 * replica's applier replays while its readers run. */
extern __thread bool persist_replaying;

void wal_log_bf_add(const char *key, size_t klen, const sbf_t *f, const char *const *items,
                    const size_t *lens, size_t n, const int *results);
/* type WAL_CNT_ADD or WAL_CNT_DEL; logs the items whose done[i] >= 0 (NULL:
 * all). */
void wal_log_counting(uint8_t type, const char *key, size_t klen, const cntbf_t *cf,
                      const char *const *items, const size_t *lens, size_t n, const int *done);
void wal_log_pf_add(const char *key, size_t klen, bool created, const char *const *items,
                    const size_t *lens, size_t n);
void wal_log_create(const char *key, size_t klen, const wal_create *c);
void wal_log_del(const char *const *keys, const size_t *lens, size_t n);
void wal_log_expire(const char *key, size_t klen, int64_t when_ms);
/* A key removed because it expired: logged as its deletion, so a replica
 * (which never expires keys by its own clock) removes it too. */
void wal_log_expired(const char *key, size_t klen);
void wal_log_rename(const char *src, size_t slen, const char *dst, size_t dlen);
/* BF.CONFIG: the value's flags (WAL_FLAG_*) as they are now. */
void wal_log_value_flags(const char *key, size_t klen, uint8_t flags);
void wal_log_flush(void);
/* WAL_BF_MERGE or WAL_PF_MERGE: keys[0] is the destination. */
void wal_log_merge(uint8_t type, bool created, const char *const *keys, const size_t *lens,
                   size_t n);
/* The restore records return their LSN (0: not logged) for
 * kv_obj_note_restore. */
uint64_t wal_log_loadchunk(const char *key, size_t klen, long long iter, const void *data,
                           size_t len);

/* Windows (t_window.c) and cuckoo filters (t_cuckoo.c). A window add logs
 * the bloomery_hash of each new item with the clock it ran at; a cuckoo op
 * logs cf_hash values and the sub-filter limit it applied. */
void wal_log_win_create(const char *key, size_t klen, const wal_window *w);
void wal_log_win_add(const char *key, size_t klen, const win_t *w, int64_t now_ms,
                     const char *const *items, const size_t *lens, size_t n, const uint8_t *isnew);
void wal_log_win_rotate(const char *key, size_t klen, int64_t start_ms, bool early);
/* The clock windows run on, in ms: the wall clock plus
 * debug-clock-offset-ms. The host owns it because a replica inside Redis
 * must run a window command at the time its master ran it. */
int64_t wal_window_clock_ms(void);
/* Exact windows (cmd/bf_exact.c): the store's name given to a window, the
 * fingerprints written to a period (in_filter: the window's current slice
 * took them too) and a period dropped. */
void wal_log_exact_create(const char *key, size_t klen, uint64_t id, uint64_t retain_ms);
void wal_log_exact_put(const char *key, size_t klen, uint64_t id, int64_t period, bool in_filter,
                       const uint8_t *fps, size_t n);
void wal_log_exact_drop(const char *key, size_t klen, uint64_t id, int64_t period);
void wal_log_cf_create(const char *key, size_t klen, const wal_cuckoo *c);
void wal_log_cf_op(const char *key, size_t klen, uint8_t op, uint32_t max_filters,
                   const uint64_t *hashes, size_t n);
uint64_t wal_log_cf_loadchunk(const char *key, size_t klen, long long iter, const void *data,
                              size_t len);

/* Count-min sketches (t_cms.c) and top-k values (t_topk.c). Their data
 * records carry the items themselves with their increments (type
 * WAL_CMS_INCRBY or WAL_TOPK_ADD), only those the command applied. */
void wal_log_items(uint8_t type, const char *key, size_t klen, const char *const *items,
                   const size_t *lens, const uint64_t *incrs, size_t n);
void wal_log_cms_create(const char *key, size_t klen, const wal_cms *c);
/* keys[0] is the destination, weights[i] goes with keys[i + 1]. */
void wal_log_cms_merge(const char *const *keys, const size_t *lens, size_t n,
                       const int64_t *weights);
void wal_log_topk_create(const char *key, size_t klen, const wal_topk *t);

/* t-digests (t_tdigest.c): the values an add applied, as doubles; a merge
 * names its keys with the compression it resolved and whether the
 * destination's old value was left out. */
void wal_log_td_create(const char *key, size_t klen, uint64_t compression);
void wal_log_td_add(const char *key, size_t klen, const double *values, size_t n);
void wal_log_td_reset(const char *key, size_t klen);
void wal_log_td_merge(uint64_t compression, bool override, const char *const *keys,
                      const size_t *lens, size_t n);

/* ---- persistence.c ---- */

/* Recovery, then the log opened (appendonly yes): before any client. */
bool persist_start(const char *dir, char *err, size_t errlen);
/* At shutdown, workers stopped: the final snapshot (save points set and
 * not SHUTDOWN NOSAVE, or SHUTDOWN SAVE), then the log closed. */
void persist_stop(void);
/* SHUTDOWN's choice: -1 NOSAVE, 0 as configured, 1 SAVE. */
extern _Atomic int persist_shutdown_save;
/* From the server cron: the save schedule. */
void persist_cron(void);
/* INFO's Persistence section body; loading: a replica loads its master's
 * snapshot (loading:1, as Redis reports it). */
void persist_info(char *out, size_t outlen, bool loading);

/* A replica's full resync makes its data directory its master's snapshot
 * (repl/replica.c): begin waits for a running snapshot, pauses the save
 * schedule and closes the log; install removes the old indexes and log
 * files (chunk files stay: the ones still current are not fetched again),
 * writes the master's index and opens the log at log_from (the records
 * from there to the snapshot's start are appended next, wal_append_raw);
 * finish loads it all as a start-up does, into an emptied keyspace, and
 * opens the log where it ends. end resumes the schedule (also after a
 * failure). */
void persist_resync_begin(void);
bool persist_resync_install(const char *dir, const uint8_t *index, size_t len, uint64_t seq,
                            uint64_t log_from, char *err, size_t errlen);
bool persist_resync_finish(const char *dir, uint64_t *next_lsn, char *err, size_t errlen);
void persist_resync_end(void);

/* ---- recovery.c ---- */

/* Torn log tails this start kept aside (INFO persistence), and the file
 * the last one went to ("" when none). */
void recovery_torn_tails(uint64_t *n, const char **last);

/* Load the newest snapshot and replay the log; on success *next_lsn is the
 * LSN to continue from. Keys whose expiry passed are then dropped, unless
 * drop_expired is false (a replica: its master's records remove them). On
 * damage err names the file, offset and reason and nothing stays loaded. */
bool recovery_run(const char *dir, uint64_t *next_lsn, bool drop_expired, char *err, size_t errlen);

#endif

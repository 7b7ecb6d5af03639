/* The exact store: what exact filters (exact.h) confirm their positives
 * against, on local disk in DIR/exact (RocksDB).
 *
 * One column family per filter and period, named x<id>.<period start ms>,
 * holding the 16-byte fingerprints of the items added in that period (no
 * values). A period expires by dropping its column family: never item by
 * item. Writes skip RocksDB's own log: the server's log is the truth, and
 * xs_sync (each snapshot) flushes every period to disk and records the LSN
 * below which the store is complete; recovery writes again what the log
 * holds from there (puts of a fingerprint are idempotent).
 *
 * bloomery.so has no store: src/module/exact_host.c answers every call
 * with "unavailable".
 */
#ifndef BLOOMERYD_EXACT_STORE_H
#define BLOOMERYD_EXACT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XS_FP_LEN 16

/* Open (creating) DIR/exact. False with err when it cannot be used: the
 * server still runs and exact filters answer xs_error(). */
bool xs_open(const char *dir, char *err, size_t errlen);
void xs_close(void);
/* Whether the last table file could not be written (a full disk, an I/O
 * error): RocksDB then refuses further writes until it is opened again. */
bool xs_write_failing(void);
/* Close and open it again, keeping what its buffers hold (a failed open
 * closes it for good: xs_error says why). */
bool xs_reopen(const char *dir, char *err, size_t errlen);
/* After table files could not be written: once a file can be written and
 * synced beside them again, reopen (the cron's, at most once a second). */
void xs_heal(void);
/* Close it for good with the reason xs_error() then gives. */
void xs_close_failed(const char *why);
/* Whether the store is open, and why not. */
bool xs_ok(void);
const char *xs_error(void);

/* found[i] = 1 when fps[i] is in any of the periods (missing periods hold
 * nothing). False with err on a read error. */
bool xs_get(uint64_t id, const int64_t *periods, size_t np, const uint8_t *fps, size_t n,
            uint8_t *found, char *err, size_t errlen);
/* Changes whenever something may leave the store (a period dropped, the
 * store closed): an xs_get answer of "present" holds while it stays the
 * same. */
uint64_t xs_epoch(void);
/* Add n fingerprints to a period (created when missing). */
/* After a table file could not be written, a period's buffer grows up to
 * XS_FAILED_FACTOR times its size (kept for the next try), then puts are
 * refused with that error until a write succeeds. */
bool xs_put(uint64_t id, int64_t period, const uint8_t *fps, size_t n, char *err, size_t errlen);
/* Drop one period, or every period of a filter (period INT64_MIN). */
bool xs_drop(uint64_t id, int64_t period, char *err, size_t errlen);
/* The periods the store holds for a filter, ascending, up to max; returns
 * how many there are. */
size_t xs_periods(uint64_t id, int64_t *out, size_t max);

/* Flush every period to disk, then record `upto`: every put made before
 * the call is durable. False (nothing recorded) on an error. */
bool xs_sync(uint64_t upto, char *err, size_t errlen);
/* The LSN recorded by the last xs_sync that completed (0: none). */
uint64_t xs_applied(void);

/* Drop the periods of filters for which live(id) is false. */
void xs_gc(bool (*live)(uint64_t id));

/* A consistent copy of the store in path (which must not exist): hard
 * links to its table files plus its own manifest (full resync). */
bool xs_checkpoint(const char *path, char *err, size_t errlen);

/* Compact every period down to its last level (tests, benchmarks, check). */
void xs_compact(void);

typedef struct xs_stats {
    uint64_t periods, filters, gets, puts, sst_bytes, memtable_bytes, keys;
    uint64_t reader_bytes; /* table readers: indexes and filters */
} xs_stats;
void xs_get_stats(xs_stats *s);
/* The approximate number of fingerprints a filter's periods hold. */
uint64_t xs_count(uint64_t id);

#endif

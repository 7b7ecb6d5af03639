/* Exact filters: a window (win_t) whose positives are confirmed against the
 * exact store (exact_store.h), so that no item is ever called present that
 * was not added. BF.RESERVE ... EXACT makes one (cmd/bf_exact.c); the
 * value stays a window value (window_type), with this attached to its
 * kv_obj: snapshots, rotations and the window's records are the window's,
 * and the store's records (WAL_EXACT_*) replay here. docs/EXACT.md.
 *
 * Periods: the store keeps each slice's items in a period of its own,
 * named by the slice's start. An item added now is present while its
 * slice is live in the window (the window's rule, now < start + (S+1)P);
 * a period is dropped once it is RETAIN old (default: the window's span).
 */
#ifndef BLOOMERYD_EXACT_H
#define BLOOMERYD_EXACT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomery/window.h"
#include "exact_manifest.h"
#include "wal_format.h"

struct kv_obj;

typedef struct exact_meta {
    uint64_t id;        /* names the filter's periods in the store */
    uint64_t retain_ms; /* a period's life; 0: never dropped */
    _Atomic uint64_t lookups, confirmed;
} exact_meta;

/* The window span an exact window remembers: (S + 1) periods. */
uint64_t exact_span_ms(const win_t *w);
uint64_t exact_period_ms(const win_t *w);
/* The start of the period holding time t (periods are aligned on the
 * window's slices). */
int64_t exact_period_of(const win_t *w, int64_t t);
/* The starts of the slices live at now (at most WIN_MAX_SLICES + 1). */
size_t exact_live_periods(const win_t *w, int64_t now, int64_t *out);

/* A new meta with a fresh random id (id 0: draw one). */
exact_meta *exact_meta_new(uint64_t id, uint64_t retain_ms);
/* Attach m to o (o->exact) and count its id live; kv_obj_free calls
 * exact_detach. */
void exact_attach(struct kv_obj *o, exact_meta *m);
void exact_detach(exact_meta *m);

/* The snapshot's suffix of an exact window's image header. */
#define EXACT_META_LEN 24 /* SNAP_EXACT_META_LEN: the format is snapshot_index.h's */
void exact_meta_encode(const exact_meta *m, uint8_t out[EXACT_META_LEN]);
/* NULL when the bytes are not a meta (or no memory). */
exact_meta *exact_meta_decode(const uint8_t *p, size_t len);

/* Replay of WAL_EXACT_*: below_start for records older than the snapshot
 * (the store's part only). NULL when applied, else why not. */
const char *exact_replay(const wal_op *op, bool below_start);

/* Persistence: the store's directory, before recovery (the store opens
 * then when DIR/exact exists, else when first needed); after recovery,
 * record where a new store starts; each snapshot syncs it. */
void exact_start(const char *dir);
/* Whether the store can be used, opening it the first time. */
bool exact_store_ready(void);
/* Whether it is open and holds everything the log says (false after a
 * write replayed at start failed), and why not. */
bool exact_store_usable(void);
const char *exact_store_error(void);
void exact_recovered(uint64_t next_lsn);
void exact_stop(void);
/* The first LSN the store still needs from the log (UINT64_MAX: none). */
uint64_t exact_log_needed(void);
/* A snapshot's capture at L0: flush the store so the log below L0 can go. */
void exact_sync(uint64_t l0);
/* Drop the periods of filters deleted since the last call. */
void exact_gc(void);
/* After table files could not be written: once the disk takes writes
 * again, open the store again (from the cron, at most once a second). */
void exact_heal(void);
/* INFO's exact section. */
void exact_info(char *out, size_t outlen);

/* The figures /metrics exports; false while no exact filter was ever used
 * here (the store never opened, none loaded). */
typedef struct exact_summary {
    bool store_ok;
    uint64_t filters, periods, keys, disk_bytes, buffer_bytes, lookups, puts, applied_lsn;
} exact_summary;
bool exact_summarize(exact_summary *out);

/* ---- exact_ship.c: the store in a full resync ---- */

/* Master: a checkpoint of the store (in DIR/exact-ship, replacing the last
 * one) that holds everything below start_lsn, and its files. */
bool exact_ship_prepare(const char *dir, uint64_t start_lsn, exact_file **files, size_t *n,
                        char *err, size_t errlen);
void exact_ship_path(const char *dir, const exact_file *f, char *out, size_t len);
/* Replica: whether a file is here already (by content); keep one received
 * (checked against its hash); then build DIR/exact from the list, the store
 * closed, and drop received files the list does not name. */
bool exact_recv_have(const char *dir, const exact_file *f);
bool exact_recv_store(const char *dir, const exact_file *f, const uint8_t *data, size_t len,
                      char *err, size_t errlen);
bool exact_recv_install(const char *dir, const exact_file *files, size_t n, char *err,
                        size_t errlen);

#endif

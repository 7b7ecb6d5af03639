/* Snapshots (snapshot.c); see persist.h for the overview. */
#ifndef BLOOMERYD_SNAPSHOT_H
#define BLOOMERYD_SNAPSHOT_H

#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>

#include "snapshot_index.h"

void snapshot_init(const char *dir);
/* The snapshot recovery loaded: its sequence continues. */
void snapshot_adopt(uint64_t seq, const snap_index *ix);
/* Take a snapshot: capture now (every stripe locked briefly), then write
 * on background threads (cuckoo and counting filters by copy-on-write,
 * snapshot.c). With wait, return when it is published (SAVE).
 * false with err when one is already running or it failed. */
bool snapshot_run(bool wait, char *err, size_t errlen);
bool snapshot_in_progress(void);
/* Wait for a running snapshot and free what the module holds. */
void snapshot_shutdown(void);

typedef struct snapshot_stats {
    bool in_progress;
    bool last_ok;
    int64_t last_save_s; /* time of the last successful snapshot */
    int64_t last_duration_ms;
    int64_t current_start_ms;
    int64_t last_attempt_ms;
    uint64_t seq, start_lsn;
    uint64_t keys, chunks, bytes_written, chunks_written, chunks_reused, chunks_inline;
    /* Copy-on-write of the last snapshot: pages saved, most bytes held. */
    uint64_t cow_pages, cow_peak_bytes;
} snapshot_stats;
void snapshot_get_stats(snapshot_stats *s);

/* While held (a full resync sending a snapshot's chunks and log), a
 * snapshot deletes no index, chunk or log file; the next one after the
 * release does. */
void snapshot_hold_files(bool hold);
/* A replica's applier holds this around each record it logs and applies,
 * and a capture takes it, so L0 never splits a record from its change. */
extern pthread_mutex_t snapshot_apply_lock;

#endif

/* Reading and validating a bloomeryd data directory:
 *
 *   DIR/snapshots/<seq>.index   DIR/chunks/<hash>.zst   DIR/log/<first LSN>.wal
 *   DIR/log/LAST (wal_last.h)   DIR/log/<name>.wal.torn-<offset> (torn tails kept aside)
 *
 * The one implementation of the recovery rules (docs/PERSISTENCE.md,
 * "Recovery"), used by bloomeryd's start-up (src/server/data/recovery.c) and by
 * `bloomery check-data` (src/cli/check_data.c), so the two accept and refuse
 * the same directories with the same messages. Every error names the file,
 * the offset and the reason: "file: offset N: reason". Its files are
 * opened through datadir_fs.h: no symbolic link followed.
 */
#ifndef BLOOMERY_DATADIR_H
#define BLOOMERY_DATADIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomery/bloomery.h"
#include "snapshot_index.h"
#include "wal_format.h"

#define DATADIR_PATH_MAX 4400

/* ---- files ---- */

/* The number in a name "<16 lowercase hex digits><suffix>". */
bool datadir_parse_name(const char *name, const char *suffix, uint64_t *num);
/* Numbers of the files "<16 hex digits><suffix>" in dir, ascending; the
 * caller frees *out. 0 when dir can't be read. */
size_t datadir_list(const char *dir, const char *suffix, uint64_t **out);
/* Write p to path through "<path>.tmp": written, fdatasynced, renamed
 * (the caller syncs the directory); no link followed (datadir_fs.h).
 * false with errno set. */
bool datadir_write_file(const char *path, const void *p, size_t len);
/* Whole file into a malloc'd buffer; false (errno set) on failure, ELOOP
 * for a link. */
bool datadir_read_file(const char *path, uint8_t **out, size_t *len);

/* ---- snapshot ---- */

/* The image type (serial.h) a snapshot entry of this kind must hold;
 * 0 for a kind no snapshot writes. */
bloomery_type datadir_kind_type(uint8_t kind);

typedef struct datadir_snapshot {
    char path[DATADIR_PATH_MAX]; /* the index file */
    uint8_t *buf;
    size_t len;
    snap_index ix; /* points into buf */
} datadir_snapshot;

/* The newest DIR/snapshots/<seq>.index, read and verified: checksum,
 * structure, the sequence its name says, no key twice. 1 when found, 0 when
 * there is none, -1 on damage (err). Close it after 1. */
int datadir_snapshot_open(const char *dir, datadir_snapshot *s, char *err, size_t errlen);
void datadir_snapshot_close(datadir_snapshot *s);

/* A loader for entry e of the index at index_path: its image header
 * accepted by serial.h, of the type its kind says, with the chunks and
 * chunk lengths the index lists. NULL with err on damage. */
bloomery_loader *datadir_open_entry(const char *index_path, const snap_entry *e, char *err,
                                    size_t errlen);
/* Buffers one loading thread keeps from chunk to chunk (zeroed to start;
 * datadir_chunk_buf_free when done). */
typedef struct datadir_chunk_buf {
    uint8_t *file, *raw;
    size_t file_cap, raw_cap;
} datadir_chunk_buf;
void datadir_chunk_buf_free(datadir_chunk_buf *b);

/* Read chunk i of entry e, decompress and verify it (content hash, then
 * its serial.h checksum) and put it into its loader's object: straight
 * into place, or, for a frame that is mostly zeros, through b's scratch
 * with its all-zero pages skipped. b may be NULL (buffers for this call
 * only). Several threads may load distinct chunks of one loader at once,
 * each with its own b. */
bool datadir_load_chunk(const char *dir, const char *index_path, const snap_entry *e, uint64_t i,
                        bloomery_loader *l, datadir_chunk_buf *b, char *err, size_t errlen);
/* Ask the kernel to start reading chunk i's file into the page cache
 * (posix_fadvise WILLNEED) and return at once; nothing for an inline
 * chunk, nothing reported on failure (the load reports it). */
void datadir_prefetch_chunk(const char *dir, const snap_entry *e, uint64_t i);
/* The loaded value of entry e once all its chunks are in. */
bool datadir_finish_entry(const char *index_path, const snap_entry *e, bloomery_loader *l,
                          bloomery_object *out, char *err, size_t errlen);

/* ---- log ---- */

/* Called for each record at or above the scan's start, in LSN order. */
typedef void (*datadir_record_fn)(void *ctx, const wal_record *rec, const wal_op *op);

typedef struct datadir_log {
    /* in */
    uint64_t start;          /* first LSN needed: the snapshot's start, 1 without a
                              * snapshot, 0 when unknown (a damaged index) */
    bool have_snapshot;      /* for messages */
    bool keep_torn;          /* keep a torn tail aside and cut it off; else only report */
    uint64_t from;           /* read from this LSN when below start (0: start): the
                              * records of a restore in progress (snap_index_log_from) */
    datadir_record_fn fn;    /* records at or above start; may be NULL */
    datadir_record_fn below; /* records in [from, start); may be NULL */
    void *ctx;
    /* out */
    uint64_t expect;   /* LSN after the last record read (0: no log file used) */
    uint64_t next_lsn; /* where the log continues: expect, at least start */
    uint64_t applied;  /* records handed to fn */
    uint64_t passed;   /* records below start, checked and passed over */
    unsigned files;    /* log files read */
    bool have_last;    /* DIR/log/LAST exists ... */
    uint64_t last;     /* ... and names this log file */
    bool torn;         /* a torn tail ends the newest file: */
    char torn_file[DATADIR_PATH_MAX];
    size_t torn_off, torn_len;
    char torn_why[256];
    char torn_kept[DATADIR_PATH_MAX + 32]; /* keep_torn: where its bytes went ("" if none) */
} datadir_log;

typedef enum datadir_log_status {
    DATADIR_LOG_OK,
    DATADIR_LOG_TORN, /* a torn tail at *torn_off; err says why */
    DATADIR_LOG_BAD,  /* damage; err is "path: offset N: reason" */
} datadir_log_status;

/* Walk DIR/log/<first LSN>.wal in LSN order with the recovery rules: LAST
 * names a file that exists (unless the snapshot covers it), files wholly
 * below the start are skipped, the first file used starts at or below the
 * start, each file's header matches its name, LSNs follow each other
 * without a gap, a torn tail only at the end of the newest file (kept aside
 * and cut off when lg->keep_torn, else reported in lg->torn). Records at or
 * above lg->start go to lg->fn. false with err on damage. */
bool datadir_scan_log(const char *dir, datadir_log *lg, char *err, size_t errlen);

/* One log file's bytes (pure: the scan above calls it for each file; the
 * fuzz target and tests call it directly). name_lsn: the number in its
 * name; newest: the newest file present, where a torn tail may end it.
 * lg's in-fields and expect/last carry over from file to file. */
datadir_log_status datadir_log_file(datadir_log *lg, const char *path, uint64_t name_lsn,
                                    const uint8_t *buf, size_t len, bool newest, size_t *torn_off,
                                    char *err, size_t errlen);

/* Keep a torn tail aside: copy bytes [off, len) of the log file at path to
 * "<path>.torn-<off>" (fsynced), then cut the file at off (removed when off
 * is 0). kept receives the new file's name ("" when there were no bytes). */
bool datadir_keep_torn(const char *path, const uint8_t *buf, size_t len, size_t off, char *kept,
                       size_t keptlen, char *err, size_t errlen);

/* Names of the torn tails kept aside in DIR/log ("<16 hex>.wal.torn-<n>"),
 * sorted; the caller frees each and the array. */
size_t datadir_torn_files(const char *dir, char ***out);

#endif

/* The snapshot index: every key of a snapshot, with its filter's image
 * header and the list of its chunks. docs/PERSISTENCE.md draws it byte by
 * byte; in short (little-endian):
 *
 *   header (48 bytes)
 *     "BLMRYSNP" | u16 version | u16 0 | u32 header size (48) |
 *     u64 sequence | u64 start LSN | i64 creation time (ms) | u64 keys
 *   per key
 *     u32 key length, key | u8 kind (bit 7: read-only) |
 *     i64 absolute expiry (ms, 0: none) |
 *     u32 image header length, serial.h image header | u64 chunks |
 *     per chunk: u8 where (0 file, 1 inline) | u32 raw length |
 *                u64 image checksum (serial.h, for the loader) |
 *                u64 hash low | u64 hash high |
 *                inline only: u32 frame length, zstd frame
 *   trailer
 *     u64 XXH3-64 of every byte before it
 *
 * The image header carries the filter's parameters, item counts and chunk
 * size (serial.h); the index adds what the keyspace knows: name, expiry.
 */
#ifndef BLOOMERY_SNAPSHOT_INDEX_H
#define BLOOMERY_SNAPSHOT_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chunk_format.h"
#include "le.h"

#define SNAP_MAGIC "BLMRYSNP"
#define SNAP_VERSION 1
#define SNAP_HEADER_SIZE 48

#define SNAP_KIND_BLOOM 1    /* scalable chain */
#define SNAP_KIND_COUNTING 2 /* counting filter */
#define SNAP_KIND_HLL 3      /* HyperLogLog */
#define SNAP_KIND_WINDOW 4   /* time-windowed filter */
#define SNAP_KIND_CUCKOO 5   /* cuckoo filter */
/* A BF.LOADCHUNK / CF.LOADCHUNK restore still in progress at the snapshot:
 * no image and no chunks; its "image header" is the LSNs (u64 each,
 * ascending, below the start LSN) of the log records that loaded it so far,
 * which recovery replays onto the key before the records from the start. */
#define SNAP_KIND_RESTORE 6
#define SNAP_KIND_CMS 7     /* count-min sketch */
#define SNAP_KIND_TOPK 8    /* top-k */
#define SNAP_KIND_TDIGEST 9 /* t-digest */
#define SNAP_KIND_MAX 9
/* Or'ed into an entry's kind byte: the value is read-only (BF.CONFIG key
 * READONLY yes). Only such values set it, so a snapshot of values that are
 * not read-only is byte for byte what it was before the flag existed. */
#define SNAP_KIND_READONLY 0x80
/* Or'ed into a window's kind byte: an exact window (BF.RESERVE ... EXACT).
 * Its image header is followed by SNAP_EXACT_META_LEN bytes naming its
 * exact store (id, retention), which the parse splits off into
 * snap_entry.exact. */
#define SNAP_KIND_EXACT 0x40
/* The meta: u32 magic "EXCT", u32 version 1, u64 store id (not 0), u64
 * retention in ms (0: none). */
#define SNAP_EXACT_META_LEN 24
#define SNAP_EXACT_MAGIC 0x54434558u
#define SNAP_EXACT_VERSION 1

#define SNAP_CHUNK_FILE 0
#define SNAP_CHUNK_INLINE 1

typedef struct snap_chunk {
    uint8_t where;
    uint32_t raw_len;
    uint64_t checksum;    /* serial.h chunk checksum of the raw bytes */
    chunk_hash hash;      /* XXH3-128 of the raw bytes; names the file */
    const uint8_t *frame; /* inline: the zstd frame */
    size_t flen;
    size_t off; /* offset of this chunk's record in the index */
} snap_chunk;

typedef struct snap_entry {
    const uint8_t *key;
    size_t klen;
    uint8_t kind;         /* SNAP_KIND_*, the flag bit cleared */
    bool readonly;        /* the kind byte had SNAP_KIND_READONLY */
    const uint8_t *exact; /* SNAP_KIND_EXACT: the store's meta (SNAP_EXACT_META_LEN), else NULL */
    int64_t expire_ms;
    const uint8_t *header; /* serial.h image header */
    size_t hlen;
    uint64_t nchunks;
    snap_chunk *chunks; /* into snap_index.chunks */
    size_t off;         /* offset of the entry in the index */
} snap_entry;

typedef struct snap_index {
    uint64_t seq, start_lsn;
    int64_t created_ms;
    uint64_t nkeys;
    snap_entry *entries;
    snap_chunk *chunks;
    uint64_t nchunks;
} snap_index;

/* Verify and describe an index (pointers into buf). On failure err says
 * what is wrong and *err_off where. */
bool snap_index_parse(const uint8_t *buf, size_t len, snap_index *out, char *err, size_t errlen,
                      size_t *err_off);
void snap_index_free(snap_index *ix);

/* An exact entry's store id and retention. */
static inline uint64_t snap_exact_id(const snap_entry *e) { return le_load(e->exact + 8, 8); }
static inline uint64_t snap_exact_retain_ms(const snap_entry *e)
{
    return le_load(e->exact + 16, 8);
}
/* A restore entry's record LSNs (SNAP_KIND_RESTORE). */
static inline uint64_t snap_restore_count(const snap_entry *e) { return e->hlen / 8; }
static inline uint64_t snap_restore_lsn(const snap_entry *e, uint64_t i)
{
    return le_load(e->header + 8 * i, 8);
}
/* The first LSN recovery needs: the start, or the oldest record of a
 * restore in progress. */
uint64_t snap_index_log_from(const snap_index *ix);

void snap_index_begin(pbuf *b, uint64_t seq, uint64_t start_lsn, int64_t created_ms,
                      uint64_t nkeys);
void snap_index_entry(pbuf *b, const void *key, size_t klen, uint8_t kind, int64_t expire_ms,
                      const uint8_t *header, size_t hlen, uint64_t nchunks);
void snap_index_chunk(pbuf *b, const snap_chunk *c);
void snap_index_finish(pbuf *b);

#endif

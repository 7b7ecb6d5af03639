/* The write-ahead log's byte format: file header, records, payloads.
 * Pure functions over buffers, shared by bloomeryd (writer, replay), the
 * `bloomery check-data` tool and the fuzz targets. docs/PERSISTENCE.md draws
 * the layout byte by byte; in short (all integers little-endian):
 *
 *   file header (32 bytes)
 *     "BLMRYWAL" | u16 version | u16 0 | u32 header size (32) |
 *     u64 first LSN | u64 XXH3-64 of bytes 0..23
 *   record
 *     u32 payload length | u8 type | u64 LSN | u32 low half of XXH3-64 of
 *     the 13 bytes before it | payload | u64 XXH3-64 of everything before
 *
 * The short prefix check tells a torn tail (a crash cut the last append)
 * from damage: a record whose prefix is intact but whose bytes run past the
 * end of the file was cut; a prefix that fails its check while non-zero
 * bytes follow it is damage. A complete record whose checksum fails is
 * damage too, unless the file ends in zeros starting within its checksum
 * or at a sector boundary inside it (written data that never arrived).
 */
#ifndef BLOOMERY_WAL_FORMAT_H
#define BLOOMERY_WAL_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "le.h"

#define WAL_MAGIC "BLMRYWAL"
#define WAL_VERSION 1
#define WAL_HEADER_SIZE 32
#define WAL_PREFIX 17
#define WAL_TRAILER 8
#define WAL_MAX_PAYLOAD (1u << 30)
#define WAL_SECTOR 512 /* a disk writes whole sectors: where unwritten zeros can start */

enum wal_type {
    /* data: the hashes of items, applied to the filter the key holds */
    WAL_BF_ADD = 1,     /* key, n, n x 16-byte sbf_hash, n "new" bits */
    WAL_CNT_ADD = 2,    /* key, n, n x 16-byte bloomery_hash */
    WAL_CNT_DEL = 3,    /* key, n, n x 16-byte bloomery_hash */
    WAL_PF_ADD = 4,     /* key, created, n, n x u64 element hash */
    WAL_WIN_ADD = 5,    /* key, ms, n, n x 16-byte bloomery_hash */
    WAL_CF_OP = 6,      /* key, op, filter limit, n, n x u64 cf_hash */
    WAL_CMS_INCRBY = 7, /* key, n, n x (item, u64 increment) */
    WAL_TOPK_ADD = 8,   /* key, n, n x (item, u64 increment) */
    WAL_TD_ADD = 9,     /* key, n, n x f64 value */
    /* barriers: structural changes */
    WAL_CREATE = 16,       /* key, kind, layout, expansion, capacity, error, expiry */
    WAL_DEL = 17,          /* n keys */
    WAL_EXPIRE = 18,       /* key, absolute ms (0: persist) */
    WAL_RENAME = 19,       /* source key, destination key */
    WAL_FLUSH = 20,        /* nothing */
    WAL_BF_MERGE = 21,     /* created, n keys: destination, sources */
    WAL_PF_MERGE = 22,     /* created, n keys: destination, sources present */
    WAL_LOADCHUNK = 23,    /* key, iterator, data */
    WAL_WIN_CREATE = 24,   /* key, capacity, error, window ms, slices, start, expiry */
    WAL_WIN_ROTATE = 25,   /* key, start, early */
    WAL_CF_CREATE = 26,    /* key, capacity, bucket size, iterations, expansion, bits */
    WAL_CF_LOADCHUNK = 27, /* key, iterator, data (as WAL_LOADCHUNK) */
    WAL_CMS_CREATE = 28,   /* key, width, depth */
    WAL_CMS_MERGE = 29,    /* n keys: destination, sources; n - 1 weights */
    WAL_TOPK_CREATE = 30,  /* key, k, width, depth, decay, generator seed */
    WAL_TD_CREATE = 32,    /* key, compression */
    WAL_TD_RESET = 33,     /* key */
    WAL_TD_MERGE = 34,     /* compression, override, n keys: destination, sources */
    WAL_VALUE_FLAGS = 36,  /* key, u8 flags (WAL_FLAG_*): BF.CONFIG */
    WAL_EXACT_CREATE = 37, /* key, u64 store id, u64 retain ms: makes the key's window exact */
    WAL_EXACT_PUT = 38,    /* key, id, i64 period, u8 in filter, n, n x 16-byte fingerprint */
    WAL_EXACT_DROP = 39,   /* key, id, i64 period: the store's period expired */
};

/* WAL_VALUE_FLAGS bits: the value's flags as they are after the command. */
#define WAL_FLAG_READONLY 0x01
#define WAL_FLAGS_KNOWN WAL_FLAG_READONLY

/* WAL_CF_OP operations. */
#define WAL_CF_ADD 0
#define WAL_CF_ADDNX 1
#define WAL_CF_DEL 2

/* WAL_CREATE kinds. */
#define WAL_KIND_SCALABLE 0 /* blocked first link at p/2: records of earlier versions */
#define WAL_KIND_COUNTING 1
#define WAL_KIND_SCALABLE_SHARE 2 /* blocked first link per SBF_SCHEDULE_FIRST_SHARE */

const char *wal_type_name(unsigned type);

void wal_header_encode(uint8_t out[WAL_HEADER_SIZE], uint64_t first_lsn);
/* false with a reason in err when buf does not start with a valid header. */
bool wal_header_decode(const uint8_t *buf, size_t len, uint64_t *first_lsn, char *err,
                       size_t errlen);

static inline size_t wal_record_size(size_t payload_len)
{
    return WAL_PREFIX + payload_len + WAL_TRAILER;
}
/* Frame the payload at rec + WAL_PREFIX (len bytes, already in place):
 * writes the prefix and the trailing checksum. */
void wal_record_seal(uint8_t *rec, uint8_t type, uint64_t lsn, size_t len);

typedef enum wal_status {
    WAL_REC_OK = 0,
    WAL_REC_END,  /* clean end of the buffer */
    WAL_REC_TORN, /* looks like an append cut by a crash: allowed at the end of the last file */
    WAL_REC_BAD,  /* damage */
} wal_status;

typedef struct wal_record {
    uint8_t type;
    uint64_t lsn;
    const uint8_t *payload;
    size_t len;  /* payload bytes */
    size_t size; /* whole record */
} wal_record;

/* The record starting at buf[off] (buf holds len bytes of the file). On
 * TORN or BAD, err says why. The payload is not parsed here. */
wal_status wal_record_next(const uint8_t *buf, size_t len, size_t off, wal_record *rec, char *err,
                           size_t errlen);

/* ---- payloads ---- */

typedef struct wal_create {
    uint8_t kind;       /* WAL_KIND_* */
    uint8_t layout;     /* bloomery_layout */
    uint32_t expansion; /* 0: non-scaling */
    uint64_t capacity;
    double error;
    int64_t expire_ms; /* absolute, 0: none */
} wal_create;

typedef struct wal_window {
    uint64_t capacity;
    double error;
    uint64_t window_ms;
    uint32_t slices;
    int64_t start_ms;
    int64_t expire_ms; /* absolute, 0: none */
} wal_window;

typedef struct wal_cuckoo {
    uint64_t capacity;
    uint32_t bucket_size, max_iterations, expansion, fingerprint_bits;
} wal_cuckoo;

typedef struct wal_cms {
    uint64_t width, depth;
} wal_cms;

typedef struct wal_topk {
    uint32_t k, width, depth;
    double decay;
    uint64_t seed;
} wal_topk;

typedef struct wal_op {
    uint8_t type;
    const uint8_t *key; /* the key; destination of merges; source of a rename */
    size_t klen;
    const uint8_t *key2; /* rename: destination */
    size_t klen2;
    uint32_t n;           /* hashes, or keys of DEL and merges */
    const uint8_t *items; /* hashes (16 or 8 bytes each) or the encoded key list */
    size_t items_len;
    const uint8_t *flags; /* WAL_BF_ADD: bit i set when item i was new */
    bool created;         /* PF_ADD, merges: the command created the destination */
    wal_create create;
    int64_t when_ms;        /* WAL_EXPIRE; WAL_WIN_ADD: the clock; WAL_WIN_ROTATE: start */
    bool early;             /* WAL_WIN_ROTATE: the slice filled before its time */
    uint8_t value_flags;    /* WAL_VALUE_FLAGS: WAL_FLAG_* */
    uint64_t store_id;      /* WAL_EXACT_*: the filter's store id */
    uint64_t retain_ms;     /* WAL_EXACT_CREATE */
    int64_t period;         /* WAL_EXACT_PUT, WAL_EXACT_DROP: the period's start */
    bool in_filter;         /* WAL_EXACT_PUT: the items went to the window too */
    uint8_t cf_op;          /* WAL_CF_OP: WAL_CF_* */
    uint32_t max_filters;   /* WAL_CF_OP: the sub-filter limit the command applied */
    wal_window win;         /* WAL_WIN_CREATE */
    wal_cuckoo cf;          /* WAL_CF_CREATE */
    wal_cms cms;            /* WAL_CMS_CREATE */
    wal_topk topk;          /* WAL_TOPK_CREATE */
    const uint8_t *weights; /* WAL_CMS_MERGE: n - 1 i64, one per source */
    uint64_t compression;   /* WAL_TD_CREATE, WAL_TD_MERGE */
    bool override;          /* WAL_TD_MERGE: the destination's old value left out */
    int64_t iter;           /* WAL_LOADCHUNK */
    const uint8_t *data;
    size_t dlen;
} wal_op;

/* Check a payload's structure completely (every length, every count, no
 * trailing bytes) and describe it. */
bool wal_op_parse(uint8_t type, const uint8_t *p, size_t len, wal_op *op, char *err, size_t errlen);
/* Walk an op's key list (DEL, merges): true with the next key, false at the
 * end. The list was checked by wal_op_parse. */
bool wal_op_next_key(const wal_op *op, size_t *cursor, const uint8_t **key, size_t *klen);
/* Walk the items of WAL_CMS_INCRBY and WAL_TOPK_ADD: true with the next
 * item and its increment, false at the end. */
bool wal_op_next_item(const wal_op *op, size_t *cursor, const uint8_t **item, size_t *len,
                      uint64_t *incr);
/* WAL_CMS_MERGE: source i's weight (i < n - 1). */
int64_t wal_op_weight(const wal_op *op, uint32_t i);

/* Encoders (payload only). hashes: n pairs (first, second) of u64. */
/* The encoders of item records also come as _slots: they write the
 * record's fields and return where its n hashes go (16 bytes each, two
 * little-endian u64; pf_add: 8), for a caller that computes them in place
 * (NULL when the buffer could not grow). A hashes record's "new" bits
 * follow its hashes, cleared: wal_slot_set_new sets item i's. */
uint8_t *wal_enc_hashes_slots(pbuf *b, const void *key, size_t klen, uint32_t n, bool with_new);
static inline void wal_slot_set_new(uint8_t *slots, uint32_t n, uint32_t i)
{
    slots[(size_t)n * 16 + i / 8] |= (uint8_t)(1u << (i % 8));
}
uint8_t *wal_enc_pf_add_slots(pbuf *b, const void *key, size_t klen, bool created, uint32_t n);
uint8_t *wal_enc_win_add_slots(pbuf *b, const void *key, size_t klen, int64_t now_ms, uint32_t n);
void wal_enc_hashes(pbuf *b, const void *key, size_t klen, const uint64_t *hashes, uint32_t n,
                    const uint8_t *isnew); /* isnew: n bytes 0/1, WAL_BF_ADD only */
void wal_enc_pf_add(pbuf *b, const void *key, size_t klen, bool created, const uint64_t *h,
                    uint32_t n);
void wal_enc_create(pbuf *b, const void *key, size_t klen, const wal_create *c);
/* DEL: created < 0 (no flag); merges: created 0 or 1. */
void wal_enc_keys(pbuf *b, int created, const char *const *keys, const size_t *lens, uint32_t n);
void wal_enc_expire(pbuf *b, const void *key, size_t klen, int64_t when_ms);
void wal_enc_rename(pbuf *b, const void *src, size_t slen, const void *dst, size_t dlen);
void wal_enc_value_flags(pbuf *b, const void *key, size_t klen, uint8_t flags);
void wal_enc_loadchunk(pbuf *b, const void *key, size_t klen, int64_t iter, const void *data,
                       size_t dlen);

/* Windows and cuckoo filters. h: n bloomery_hash pairs (lo, hi). */
void wal_enc_win_create(pbuf *b, const void *key, size_t klen, const wal_window *w);
void wal_enc_win_add(pbuf *b, const void *key, size_t klen, int64_t now_ms, const uint64_t *h,
                     uint32_t n);
void wal_enc_win_rotate(pbuf *b, const void *key, size_t klen, int64_t start_ms, bool early);
void wal_enc_cf_create(pbuf *b, const void *key, size_t klen, const wal_cuckoo *c);
/* Exact filters: their store's records. put returns where its n
 * fingerprints go (16 bytes each). */
void wal_enc_exact_create(pbuf *b, const void *key, size_t klen, uint64_t id, uint64_t retain_ms);
uint8_t *wal_enc_exact_put_slots(pbuf *b, const void *key, size_t klen, uint64_t id, int64_t period,
                                 bool in_filter, uint32_t n);
void wal_enc_exact_drop(pbuf *b, const void *key, size_t klen, uint64_t id, int64_t period);
void wal_enc_cf_op(pbuf *b, const void *key, size_t klen, uint8_t op, uint32_t max_filters,
                   const uint64_t *h, uint32_t n);

/* Count-min sketches and top-k values. Their records carry the items, not
 * hashes: a top-k heap keeps the items themselves, and a sketch's depth
 * hashes per item would outweigh them. incrs[i] goes with items[i]. */
void wal_enc_items(pbuf *b, const void *key, size_t klen, const char *const *items,
                   const size_t *lens, const uint64_t *incrs, uint32_t n);
void wal_enc_cms_create(pbuf *b, const void *key, size_t klen, const wal_cms *c);
void wal_enc_cms_merge(pbuf *b, const char *const *keys, const size_t *lens, uint32_t n,
                       const int64_t *weights);
void wal_enc_topk_create(pbuf *b, const void *key, size_t klen, const wal_topk *t);
/* t-digests: the values as added, the compression a merge resolved. */
void wal_enc_td_create(pbuf *b, const void *key, size_t klen, uint64_t compression);
void wal_enc_td_add(pbuf *b, const void *key, size_t klen, const double *v, uint32_t n);
void wal_enc_td_merge(pbuf *b, uint64_t compression, bool override, const char *const *keys,
                      const size_t *lens, uint32_t n);

#endif

/* Value types: one descriptor per type, the only place that knows what a
 * type is outside its own commands.
 *
 * The keyspace (freeing, TYPE, memory), snapshots (capture), recovery
 * (adopting a loaded value), replay (log records), check-data (through
 * the snapshot kind) and INFO reach a value only through its descriptor.
 * Adding a type is one new file, type_<name>.c, defining its descriptor,
 * plus its name in VALUE_TYPES below (docs/ARCHITECTURE.md).
 */
#ifndef BLOOMERYD_TYPES_H
#define BLOOMERYD_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomery/bloomery.h"
#include "snapshot_index.h"
#include "wal_format.h"

struct kv_obj;
struct kv_entry;
struct ks_ref;

/* A library write barrier (cf_set_write_hook, cntbf_set_write_hook): called
 * before a writer changes bytes [offset, offset + len) of serial.h region
 * `region` of the value. */
typedef void (*value_write_hook)(void *ctx, uint32_t region, uint64_t offset, uint64_t len);

/* What the metrics and the console show of a filter (value_type.stats). */
typedef struct value_stats {
    const char *layout; /* blocked, classic, counting, window, cuckoo */
    uint64_t capacity, items, bytes;
    uint64_t parts;    /* links of a chain, slices of a window, sub-filters of a cuckoo filter */
    double fpr;        /* estimated false-positive rate now (value_type.fpr); < 0: none */
    double error_rate; /* the rate asked for at creation; < 0: none (cuckoo) */
} value_stats;

typedef struct value_type {
    const char *name;       /* in messages: "cuckoo filter" */
    const char *type_reply; /* what TYPE answers */
    /* Snapshots: the index kind and serial.h image type (0: never in a
     * snapshot, as a dump still being loaded). A monotone value's chunks
     * (monotone NULL: none; else asked per value) are read live while
     * writers run and the log replayed from the snapshot's start fixes any
     * mix of old and new. Any other value must be saved as it was at the
     * start: with set_write_hook, copy-on-write (the snapshot installs the
     * library's write barrier, hook NULL removes it, and keeps the original
     * bytes of what writers change before it read them); without, copied
     * at the capture (small values). */
    uint8_t snap_kind;
    bloomery_type image;
    bool (*monotone)(const void *v);
    void (*set_write_hook)(void *v, value_write_hook hook, void *ctx);
    /* Readers and writers serialize on kv_obj.lock (values that are not
     * safe for concurrent readers). */
    bool locked;
    /* Counted as a filter in INFO modules. */
    bool filter;
    /* The Redis module type (nine characters) whose keys hold values of
     * this type in bloomery.so; types sharing a name share the module type
     * (a family answering one TYPE). NULL: not kept in module keys. */
    const char *module_type;
    void (*free_value)(void *v);
    /* A value built outside its commands (loaded from a snapshot): install
     * its hooks on o and return the bytes to count in used memory. */
    uint64_t (*adopt)(struct kv_obj *o);
    /* The log records this type's commands write (0-terminated) and their
     * replay: NULL when applied, else why the record was skipped. */
    const uint8_t *records;
    const char *(*replay)(const wal_op *op);
    /* A filter's size and fill (fpr left at -1), read with the stripe
     * locked (and o->lock held for a locked type): cheap. NULL: not
     * reported per key. */
    void (*stats)(const struct kv_obj *o, value_stats *s);
    /* Its estimated false-positive rate now, which reads the whole value:
     * may run on a retained value without the stripe lock (o->lock held for
     * a locked type), as it reads only what concurrent adders change.
     * NULL: no estimate. */
    double (*fpr)(const struct kv_obj *o);
} value_type;

/* The registry: one line per type, X(name) for the descriptor name_type
 * defined in type_<name>.c. */
#define VALUE_TYPES(X)                                                                             \
    X(bloom)                                                                                       \
    X(counting) X(hll) X(window) X(cuckoo) X(bf_loading) X(cf_loading) X(cms) X(topk) X(tdigest)

#define VALUE_TYPE_DECLARE(name) extern const value_type name##_type;
VALUE_TYPES(VALUE_TYPE_DECLARE)
#undef VALUE_TYPE_DECLARE

/* Lookups over the registry; NULL when no type matches. */
const value_type *type_by_snap_kind(uint8_t kind);
const value_type *type_by_record(uint8_t wal_type);
size_t types_count(void);
const value_type *type_at(size_t i);

/* The value of o as serial.h sees it (snapshot capture). */
bloomery_object type_object(const struct kv_obj *o);

/* What an operation below the command layer (a merge, a restored dump
 * chunk) reports. The commands answer it in their family's words; replay
 * logs value_status_text when a record does not apply. */
typedef enum value_status {
    VS_OK = 0,
    VS_NOT_FOUND,  /* a key that must exist is missing */
    VS_WRONGTYPE,  /* a key holds another type */
    VS_LOADING,    /* a key holds a dump still being loaded */
    VS_MISMATCH,   /* filters of different shapes */
    VS_OOM,        /* refused by maxmemory, or the key could not be added */
    VS_NOMEM,      /* refused by the machine's memory (no maxmemory) */
    VS_FAILED,     /* the library could not build the value */
    VS_BAD_HEADER, /* a dump header refused */
    VS_BAD_CHUNK,  /* a dump chunk refused */
    VS_BAD_OFFSET, /* a RedisBloom chunk that no link holds */
    VS_TOO_BIG,    /* a RedisBloom chunk past the end of its link */
    VS_CORRUPT,    /* an HLL's bytes are damaged */
    VS_OVERFLOW,   /* a count or total past its range (count-min merge, t-digest weight) */
} value_status;

const char *value_status_text(value_status st);

/* The cores of multi-key commands, shared with replay. Called with the
 * stripes of keys[0..n) locked exclusively (ks_lock_many); keys[0] is the
 * destination, *created whether the call created it.
 *
 * BF.MERGE: ORs the filters keys[1..n) into keys[0], a copy of keys[1]
 * when missing. Every source and every shape is checked first: on an error
 * nothing changed. */
value_status bloom_merge(const char *const *keys, const size_t *lens, size_t n, bool *created);
/* PFMERGE: merges the HLLs among keys[1..n) (missing keys are empty) into
 * keys[0]. When used is not NULL, used[0..*nused) / used_lens receive the
 * destination and the sources that existed: what the log names. */
value_status hll_merge_keys(const char *const *keys, const size_t *lens, size_t n, bool *created,
                            const char **used, size_t *used_lens, size_t *nused);

/* CMS.MERGE: keys[0] = sum of weights[i - 1] * keys[i], i in [1, n); every
 * key must hold a count-min sketch of keys[0]'s dimensions (VS_NOT_FOUND,
 * VS_WRONGTYPE, VS_MISMATCH) and no counter may overflow (VS_OVERFLOW).
 * Nothing changes on an error. */
value_status cms_merge_keys(const char *const *keys, const size_t *lens, size_t n,
                            const int64_t *weights);
/* TDIGEST.MERGE: a new digest of keys[1..n) (all must exist), after the
 * old value of keys[0] unless override, replaces keys[0] (its expiry
 * dropped). compression 0: keys[0]'s when kept, else the largest of the
 * sources'. *used_compression and *used_override receive what was applied
 * (a missing destination counts as overridden): what the log records. */
value_status tdigest_merge_keys(const char *const *keys, const size_t *lens, size_t n,
                                uint64_t compression, bool override, uint64_t *used_compression,
                                bool *used_override);

/* The value a replayed record applies to: op's key, opened (write: for
 * writing), holding a value of type t. NULL, the key closed and *why set
 * when it is missing or of another type. */
struct kv_entry *type_open_record_key(struct ks_ref *ref, const wal_op *op, const value_type *t,
                                      bool write, const char **why);

/* Replay of a merge record: its keys as logged, locked, the destination
 * dropped first when the merge created it, then merge (which also sees the
 * record, for a merge's own fields: weights, compression). */
typedef value_status (*type_merge_fn)(const wal_op *op, const char *const *keys, const size_t *lens,
                                      size_t n, bool *created);
const char *type_replay_merge(const wal_op *op, type_merge_fn merge);

/* Helpers a type's commands share with its descriptor. */
size_t hll_sparse_max(void);            /* hll-sparse-max-bytes */
struct kv_obj *hll_value_new(void);     /* empty, bytes counted */
void hll_value_sync(struct kv_obj *o);  /* recount after a change */
void cf_value_sync(struct kv_obj *o);   /* recount after growth or compaction */
void topk_value_sync(struct kv_obj *o); /* recount after items entered the heap */
/* An empty t-digest, its bytes (and with klen > 0 a new entry's) reserved
 * against maxmemory (else the machine's): NULL with *st why not. */
struct kv_obj *tdigest_value_new(uint64_t compression, size_t klen, value_status *st);

#endif

/* The keyspace: every key of the one database, shared by all workers.
 *
 * Keys are spread over KS_STRIPES independent hash tables, each behind its
 * own reader/writer lock, so commands on different keys never contend and
 * commands on one key take only a shared lock: BF.ADD and BF.EXISTS read-lock
 * the stripe, find the entry and call the library, whose filters take
 * concurrent writers by themselves (atomic OR of lanes). Creating, deleting,
 * renaming or changing the expiry of a key write-locks its stripe. A
 * multi-key command locks its stripes in ascending order, so two such
 * commands cannot deadlock.
 *
 * Expiry is lazy (an expired key is invisible to every lookup and removed by
 * the next writer of its stripe) and active (ks_active_expire walks stripes
 * from a timer). Every value is a library object, so a snapshot can later
 * walk the stripes and serialize values with serial.h.
 */
#ifndef BLOOMERYD_KEYSPACE_H
#define BLOOMERYD_KEYSPACE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomery/bloomery.h"
#include "types.h"

#define KS_STRIPE_BITS 10
#define KS_STRIPES (1u << KS_STRIPE_BITS)

typedef struct kv_obj {
    const value_type *type; /* types.h: everything type-specific */
    void *v;                /* the library object (sbf_t, cf_t, ...) */
    /* Values whose type is not safe for concurrent readers (type->locked):
     * readers hold the stripe's shared lock, so they serialize on this. */
    pthread_mutex_t lock;
    /* Bytes of the value counted in used memory. Added by whoever allocates
     * them (filter growth adds from the library's may_allocate callback),
     * subtracted when the entry is freed. */
    _Atomic uint64_t value_bytes;
    uint64_t chunks_loaded; /* loading: chunks received so far */
    uint8_t *chunk_seen;    /* loading: one flag per chunk */
    /* Loading: the LSNs of the log records of the restore so far, which a
     * snapshot taken meanwhile lists so that recovery replays them. */
    uint64_t *restore_lsns;
    size_t nrestore, restore_cap;
    bool restore_lost; /* a LSN could not be kept (out of memory) */
    /* BF.CONFIG key READONLY yes: commands that would change the value's
     * content are refused (cmdkit.h's ck_refuse_readonly). A property of
     * the value, not of the key: it moves with RENAME and survives expiry
     * changes. Set under the key's exclusive lock, read under its shared
     * one, so no write runs across a change of it. */
    bool readonly;
    /* An exact window (exact.h): its store's name; NULL for any other
     * value. Moves with the value (RENAME), freed with it. */
    struct exact_meta *exact;
    /* Owners: the entry, plus a snapshot being written (kv_obj_retain);
     * kv_obj_free drops one and frees at zero. */
    _Atomic unsigned refs;
} kv_obj;

typedef struct kv_entry {
    struct kv_entry *next;
    uint64_t hash;
    int64_t expire_ms; /* 0: no expiry; changed only under the write lock */
    kv_obj *obj;
    size_t klen;
    char key[];
} kv_entry;

typedef struct ks_stripe {
    pthread_rwlock_t lock;
    kv_entry **buckets;
    uint64_t mask; /* buckets - 1 */
    uint64_t count;
    uint64_t expires;       /* entries with an expiry */
    uint64_t expire_cursor; /* active expiry resumes here */
    char pad[64];
} ks_stripe;

/* A key opened by ks_open: its stripe stays locked until ks_close. */
typedef struct ks_ref {
    ks_stripe *st;
    bool write;
    uint64_t hash;
    const char *key;
    size_t klen;
    kv_entry *e;
} ks_ref;

void ks_init(void);
void ks_shutdown(void); /* frees everything */

uint64_t ks_hash(const char *key, size_t klen);

/* Lock key's stripe (shared or exclusive) and find the live entry. An
 * expired entry is deleted when the lock is exclusive and is reported as
 * missing either way. */
kv_entry *ks_open(ks_ref *ref, const char *key, size_t klen, bool write);
/* For a read that no change to the key may overlap (a dump's chunk):
 * bloomeryd locks the stripe exclusively; Redis, which runs one command
 * at a time, opens the key for reading. */
kv_entry *ks_open_exclusive(ks_ref *ref, const char *key, size_t klen);
void ks_close(ks_ref *ref);

/* With an exclusive ref to a missing key: insert obj (ownership passes).
 * Accounts the entry's overhead; the value's bytes are already counted. */
kv_entry *ks_add(ks_ref *ref, kv_obj *obj);
/* With an exclusive ref to a present key: delete it. */
void ks_remove(ks_ref *ref);
/* Put o (its bytes counted) under key, replacing what is there, with an
 * expiry (0: none), as replay re-creates a value. On failure o is freed and
 * its bytes uncounted. */
bool ks_replace(const void *key, size_t klen, kv_obj *o, int64_t expire_ms);
/* Set or clear (0) an entry's expiry; exclusive lock held. */
void ks_set_expire(ks_ref *ref, int64_t when_ms);

/* Several keys at once: their distinct stripes are locked in ascending order
 * (all exclusive when write). */
typedef struct ks_multi {
    unsigned nstripes;
    bool write;
    unsigned *stripes;
    unsigned small[8];
} ks_multi;
void ks_lock_many(ks_multi *m, const char *const *keys, const size_t *lens, size_t n, bool write);
void ks_unlock_many(ks_multi *m);
/* Lookups and changes under ks_lock_many. ks_find_locked never deletes; an
 * expired key is reported missing. */
kv_entry *ks_find_locked(const char *key, size_t klen, ks_ref *ref, bool write);

/* Objects. */
kv_obj *kv_obj_new(const value_type *type, void *value);
void kv_obj_free(kv_obj *o);
void kv_obj_retain(kv_obj *o);
uint64_t kv_obj_bytes(const kv_obj *o); /* value bytes counted in used memory */
/* The libraries' may_allocate hook for growing values (ctx: the kv_obj):
 * reserves bytes within the memory limit and counts them on the object. */
bool kv_obj_may_grow(void *ctx, uint64_t bytes);
/* Its counterpart when a value gives memory back (sbf_set_released): no
 * more than the object still counts (a key deleted while a snapshot held
 * its value counted it out already). */
void kv_obj_released(void *ctx, uint64_t bytes);
/* After a restore's record was logged (lsn 0: not logged) on o, under the
 * key's exclusive lock: keep its LSN while o is still loading, forget the
 * list once the restore completed. */
void kv_obj_note_restore(kv_obj *o, uint64_t lsn);

/* Memory accounting: exact bytes of every value plus key and entry overhead. */
uint64_t ks_used_memory(void);
void ks_mem_add(int64_t delta);
/* The limit every reservation is held to: maxmemory when it is set, else the
 * memory the process can have (ks_machine_memory). Filters are allocated
 * lazily, so without this a reservation far beyond the machine succeeds and
 * the server is killed later, when the pages are touched. 0 (no limit) only
 * while recovery replays the log: what was accepted once is replayed. */
uint64_t ks_mem_limit(uint64_t maxmemory);
/* Reserve bytes if used + bytes stays within ks_mem_limit(maxmemory). */
bool ks_mem_try_reserve(uint64_t bytes, uint64_t maxmemory);
/* Physical memory (_SC_PHYS_PAGES pages), or less when a cgroup memory
 * limit (v2 memory.max, v1 memory.limit_in_bytes) of this process or of one
 * of its ancestors is lower. Read once, at the first call. */
uint64_t ks_machine_memory(void);
uint64_t ks_entry_overhead(size_t klen);

/* Counters. */
uint64_t ks_dbsize(void);
uint64_t ks_expires_count(void);
extern _Atomic uint64_t ks_stat_expired;

/* Iteration. ks_scan visits whole buckets, Redis-style reverse-binary
 * cursor inside each stripe, so every key present for the whole scan is
 * returned at least once even across table growth. fn is called with the
 * stripe read-locked and must not call back into the keyspace. */
typedef void (*ks_visit_fn)(void *ctx, const kv_entry *e);
uint64_t ks_scan(uint64_t cursor, uint64_t count, ks_visit_fn fn, void *ctx);
void ks_foreach(ks_visit_fn fn, void *ctx);

/* Remove every key; returns the number removed. */
uint64_t ks_flush(void);

/* Every stripe at once, exclusively, in ascending order (FLUSHALL as one
 * step; a snapshot's capture). ks_flush_locked flushes under it. */
void ks_lock_all(void);
void ks_unlock_all(void);
uint64_t ks_flush_locked(void);
/* Visit every entry, expired or not, with every stripe locked. */
void ks_foreach_locked(ks_visit_fn fn, void *ctx);
/* Recovery replays the log as the keyspace was then: while paused no key
 * counts as expired. ks_drop_expired then removes what expired meanwhile. */
void ks_pause_expiry(bool paused);
uint64_t ks_drop_expired(void);
/* One active-expiry step: visits stripes holding expiring keys until
 * budget_us has passed or the deletions' log records would need more than
 * log_room bytes (what the caller reserved). Returns keys removed. */
uint64_t ks_active_expire(int64_t budget_us, size_t log_room);
/* Replication. Keys removed because they expired are passed to the hook
 * (the log's deletion record, which a replica applies). On a replica
 * (deletes off) expired keys are invisible but removed only by its
 * master's records; the thread applying them (applier on) sees keys as
 * the master did, expired or not. */
void ks_set_expired_hook(void (*fn)(const char *key, size_t klen));
void ks_set_expiry_deletes(bool on);
void ks_set_applier(bool on);

bool ks_entry_expired(const kv_entry *e, int64_t now);

#endif

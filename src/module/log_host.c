/* persist.h's log calls inside Redis: Redis's own RDB, AOF and replication
 * keep the data, so a change is not logged here but marks the command for
 * replication. The host then replicates the command as the client sent it
 * (RedisModule_ReplicateVerbatim), which also feeds the AOF and counts the
 * change for the save points.
 *
 * Verbatim is exact for every command whose effect depends only on the
 * key's value and the arguments. A window's also depends on the clock:
 * its rotations are noted here and replicated as explicit effects ahead
 * of the command, with the instant it ran at (window_repl.c).
 */
#include "host.h"
#include "persist.h"

bool mh_changed;
_Atomic uint64_t persist_dirty;
__thread bool persist_replaying;

static void changed(void) { mh_changed = true; }

size_t wal_bound(size_t argc, size_t argbytes, size_t keylen)
{
    (void)argc;
    (void)argbytes;
    (void)keylen;
    return 0; /* nothing is written here */
}

bool wal_reserve(size_t bytes, size_t *held)
{
    (void)bytes;
    *held = 0;
    return true;
}

void wal_release(size_t held) { (void)held; }

void wal_log_bf_add(const char *key, size_t klen, const sbf_t *f, const char *const *items,
                    const size_t *lens, size_t n, const int *results)
{
    (void)key, (void)klen, (void)f, (void)items, (void)lens, (void)results;
    if (n)
        changed();
}

void wal_log_counting(uint8_t type, const char *key, size_t klen, const cntbf_t *cf,
                      const char *const *items, const size_t *lens, size_t n, const int *done)
{
    (void)type, (void)key, (void)klen, (void)cf, (void)items, (void)lens, (void)done;
    if (n)
        changed();
}

void wal_log_create(const char *key, size_t klen, const wal_create *c)
{
    (void)key, (void)klen, (void)c;
    changed();
}

void wal_log_merge(uint8_t type, bool created, const char *const *keys, const size_t *lens,
                   size_t n)
{
    (void)type, (void)created, (void)keys, (void)lens, (void)n;
    changed();
}

uint64_t wal_log_loadchunk(const char *key, size_t klen, long long iter, const void *data,
                           size_t len)
{
    (void)key, (void)klen, (void)iter, (void)data, (void)len;
    changed();
    return 0;
}

void wal_log_value_flags(const char *key, size_t klen, uint8_t flags)
{
    (void)key, (void)klen, (void)flags;
    changed();
}

void wal_log_win_create(const char *key, size_t klen, const wal_window *w)
{
    (void)key, (void)klen, (void)w;
    changed();
}

void wal_log_win_add(const char *key, size_t klen, const win_t *w, int64_t now_ms,
                     const char *const *items, const size_t *lens, size_t n, const uint8_t *isnew)
{
    (void)key, (void)klen, (void)w, (void)now_ms, (void)items, (void)lens, (void)isnew;
    if (n)
        changed();
}

void wal_log_win_rotate(const char *key, size_t klen, int64_t start_ms, bool early)
{
    mh_win_note_rotation(key, klen, start_ms, early);
    changed();
}

/* Never called: bloomery.so refuses EXACT (exact_host.c). */
void wal_log_exact_create(const char *key, size_t klen, uint64_t id, uint64_t retain_ms)
{
    (void)key, (void)klen, (void)id, (void)retain_ms;
}

void wal_log_exact_put(const char *key, size_t klen, uint64_t id, int64_t period, bool in_filter,
                       const uint8_t *fps, size_t n)
{
    (void)key, (void)klen, (void)id, (void)period, (void)in_filter, (void)fps, (void)n;
}

void wal_log_exact_drop(const char *key, size_t klen, uint64_t id, int64_t period)
{
    (void)key, (void)klen, (void)id, (void)period;
}

void wal_log_cf_create(const char *key, size_t klen, const wal_cuckoo *c)
{
    (void)key, (void)klen, (void)c;
    changed();
}

void wal_log_cf_op(const char *key, size_t klen, uint8_t op, uint32_t max_filters,
                   const uint64_t *hashes, size_t n)
{
    (void)key, (void)klen, (void)op, (void)max_filters, (void)hashes;
    if (n)
        changed();
}

uint64_t wal_log_cf_loadchunk(const char *key, size_t klen, long long iter, const void *data,
                              size_t len)
{
    (void)key, (void)klen, (void)iter, (void)data, (void)len;
    changed();
    return 0;
}

void wal_log_items(uint8_t type, const char *key, size_t klen, const char *const *items,
                   const size_t *lens, const uint64_t *incrs, size_t n)
{
    (void)type, (void)key, (void)klen, (void)items, (void)lens, (void)incrs;
    if (n)
        changed();
}

void wal_log_cms_create(const char *key, size_t klen, const wal_cms *c)
{
    (void)key, (void)klen, (void)c;
    changed();
}

void wal_log_cms_merge(const char *const *keys, const size_t *lens, size_t n,
                       const int64_t *weights)
{
    (void)keys, (void)lens, (void)n, (void)weights;
    changed();
}

/* The seed is in the command's effect on every host: TOPK.RESERVE derives
 * it from the key's name, so the replica's copy of the command draws the
 * same sequence. */
void wal_log_topk_create(const char *key, size_t klen, const wal_topk *t)
{
    (void)key, (void)klen, (void)t;
    changed();
}

void wal_log_td_create(const char *key, size_t klen, uint64_t compression)
{
    (void)key, (void)klen, (void)compression;
    changed();
}

void wal_log_td_add(const char *key, size_t klen, const double *values, size_t n)
{
    (void)key, (void)klen, (void)values;
    if (n)
        changed();
}

void wal_log_td_reset(const char *key, size_t klen)
{
    (void)key, (void)klen;
    changed();
}

void wal_log_td_merge(uint64_t compression, bool override, const char *const *keys,
                      const size_t *lens, size_t n)
{
    (void)compression, (void) override, (void)keys, (void)lens, (void)n;
    changed();
}

/* exact.c's mark for a new store: never reached, bloomery.so opens none. */
uint64_t wal_next_lsn(void) { return 0; }

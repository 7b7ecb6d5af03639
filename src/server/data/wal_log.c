/* What commands write to the log: each function encodes one record from
 * what the command applied, under the locks the command still holds.
 *
 * Bloom adds log the item's hash as the chain uses it (sbf_hash_item), not
 * the item: 16 bytes whatever the item's size, and replay needs no access
 * to the items. Each hash carries whether the add reported the item new,
 * since the replayed filter may already hold bits copied by a snapshot
 * after its start; replay corrects the item count by that bit, which keeps
 * counts, and so the growth of scaling chains, as the original server had
 * them. Counting filters log bloomery_hash values, HLLs the 64-bit element
 * hash.
 *
 * Records are encoded straight into the log's append buffer (hashes are
 * computed in place), in room the command reserved before it ran
 * (wal_bound, wal_reserve): logging allocates nothing, so it cannot run
 * out of memory after the change was applied.
 *
 * Every function also counts the change for the save schedule, with or
 * without the log.
 */
#include <string.h>

#include "persist.h"
#include "config.h"
#include "util.h"

_Atomic uint64_t persist_dirty;
__thread bool persist_replaying;

static bool begin(uint64_t changes)
{
    if (persist_replaying)
        return false;
    atomic_fetch_add_explicit(&persist_dirty, changes, memory_order_relaxed);
    return wal_enabled();
}

/* Slot k of a hashes record: item's bloomery_hash under seed. */
static void put_item_hash(uint8_t *slots, size_t k, const char *item, size_t len, uint64_t seed)
{
    bloomery_hash bh = bloomery_hash_item(item, len, seed);
    le_store(slots + 16 * k, bh.lo, 8);
    le_store(slots + 16 * k + 8, bh.hi, 8);
}

size_t wal_bound(size_t argc, size_t argbytes, size_t keylen)
{
    /* An argument costs at most itself plus a length (keys, chunks) or a
     * 16-byte hash and a "new" bit (items, even empty ones); a command
     * writes a few records, and a window's add logs up to S+2 rotations
     * of its key first (win_advance). */
    /* Any argument may also name a key found expired, whose deletion is
     * logged (keyspace.c, expire_slot). */
    return 2 * argbytes + argc * (24 + WAL_PREFIX + WAL_TRAILER + 8) +
           (WIN_MAX_SLICES + 2) * (keylen + 48) + 4096;
}

void wal_log_bf_add(const char *key, size_t klen, const sbf_t *f, const char *const *items,
                    const size_t *lens, size_t n, const int *results)
{
    size_t ok = 0;
    for (size_t i = 0; i < n; i++)
        ok += results[i] >= 0;
    if (ok == 0 || !begin(ok))
        return;
    pbuf *b = wal_record_open();
    uint8_t *s = wal_enc_hashes_slots(b, key, klen, (uint32_t)ok, true);
    for (size_t i = 0, k = 0; s && i < n; i++) {
        if (results[i] < 0)
            continue;
        sbf_hash sh = sbf_hash_item(f, items[i], lens[i]);
        le_store(s + 16 * k, sh.h1, 8);
        le_store(s + 16 * k + 8, sh.h2, 8);
        if (results[i] == 1)
            wal_slot_set_new(s, (uint32_t)ok, (uint32_t)k);
        k++;
    }
    wal_record_close(WAL_BF_ADD);
}

void wal_log_counting(uint8_t type, const char *key, size_t klen, const cntbf_t *cf,
                      const char *const *items, const size_t *lens, size_t n, const int *done)
{
    size_t ok = 0;
    for (size_t i = 0; i < n; i++)
        ok += done == NULL || done[i] >= 0;
    if (ok == 0 || !begin(ok))
        return;
    pbuf *b = wal_record_open();
    uint8_t *s = wal_enc_hashes_slots(b, key, klen, (uint32_t)ok, false);
    for (size_t i = 0, k = 0; s && i < n; i++)
        if (done == NULL || done[i] >= 0)
            put_item_hash(s, k++, items[i], lens[i], cntbf_seed(cf));
    wal_record_close(type);
}

void wal_log_pf_add(const char *key, size_t klen, bool created, const char *const *items,
                    const size_t *lens, size_t n)
{
    if (!begin(n ? n : 1))
        return;
    pbuf *b = wal_record_open();
    uint8_t *s = wal_enc_pf_add_slots(b, key, klen, created, (uint32_t)n);
    for (size_t i = 0; s && i < n; i++)
        le_store(s + 8 * i, hll_hash_elem(items[i], lens[i]), 8);
    wal_record_close(WAL_PF_ADD);
}

void wal_log_create(const char *key, size_t klen, const wal_create *c)
{
    if (!begin(1))
        return;
    pbuf *b = wal_record_open();
    wal_enc_create(b, key, klen, c);
    wal_record_close(WAL_CREATE);
}

void wal_log_del(const char *const *keys, const size_t *lens, size_t n)
{
    if (n == 0 || !begin(n))
        return;
    pbuf *b = wal_record_open();
    wal_enc_keys(b, -1, keys, lens, (uint32_t)n);
    wal_record_close(WAL_DEL);
}

void wal_log_expired(const char *key, size_t klen) { wal_log_del(&key, &klen, 1); }

void wal_log_expire(const char *key, size_t klen, int64_t when_ms)
{
    if (!begin(1))
        return;
    pbuf *b = wal_record_open();
    wal_enc_expire(b, key, klen, when_ms);
    wal_record_close(WAL_EXPIRE);
}

void wal_log_value_flags(const char *key, size_t klen, uint8_t flags)
{
    if (!begin(1))
        return;
    pbuf *b = wal_record_open();
    wal_enc_value_flags(b, key, klen, flags);
    wal_record_close(WAL_VALUE_FLAGS);
}

void wal_log_rename(const char *src, size_t slen, const char *dst, size_t dlen)
{
    if (!begin(1))
        return;
    pbuf *b = wal_record_open();
    wal_enc_rename(b, src, slen, dst, dlen);
    wal_record_close(WAL_RENAME);
}

void wal_log_flush(void)
{
    if (!begin(1))
        return;
    wal_record_open();
    wal_record_close(WAL_FLUSH);
}

void wal_log_merge(uint8_t type, bool created, const char *const *keys, const size_t *lens,
                   size_t n)
{
    if (!begin(1))
        return;
    pbuf *b = wal_record_open();
    wal_enc_keys(b, created ? 1 : 0, keys, lens, (uint32_t)n);
    wal_record_close(type);
}

uint64_t wal_log_loadchunk(const char *key, size_t klen, long long iter, const void *data,
                           size_t len)
{
    if (!begin(1))
        return 0;
    pbuf *b = wal_record_open();
    wal_enc_loadchunk(b, key, klen, iter, data, len);
    return wal_record_close(WAL_LOADCHUNK);
}

/* ---- windows and cuckoo filters ---- */

void wal_log_win_create(const char *key, size_t klen, const wal_window *w)
{
    if (!begin(1))
        return;
    pbuf *b = wal_record_open();
    wal_enc_win_create(b, key, klen, w);
    wal_record_close(WAL_WIN_CREATE);
}

void wal_log_win_add(const char *key, size_t klen, const win_t *w, int64_t now_ms,
                     const char *const *items, const size_t *lens, size_t n, const uint8_t *isnew)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += isnew[i];
    /* A duplicate changes nothing: only new items are logged. */
    if (k == 0 || !begin(k))
        return;
    pbuf *b = wal_record_open();
    uint8_t *s = wal_enc_win_add_slots(b, key, klen, now_ms, (uint32_t)k);
    for (size_t i = 0, j = 0; s && i < n; i++)
        if (isnew[i])
            put_item_hash(s, j++, items[i], lens[i], win_seed(w));
    wal_record_close(WAL_WIN_ADD);
}

void wal_log_win_rotate(const char *key, size_t klen, int64_t start_ms, bool early)
{
    if (!begin(1))
        return;
    pbuf *b = wal_record_open();
    wal_enc_win_rotate(b, key, klen, start_ms, early);
    wal_record_close(WAL_WIN_ROTATE);
}

/* bloomeryd's replicas and replay apply the logged rotations and adds,
 * never a window command, so the server's own clock is always the one. */
int64_t wal_window_clock_ms(void)
{
    return now_ms() + atomic_load_explicit(&cfg.debug_clock_offset_ms, memory_order_relaxed);
}

void wal_log_exact_create(const char *key, size_t klen, uint64_t id, uint64_t retain_ms)
{
    if (!begin(1))
        return;
    pbuf *b = wal_record_open();
    wal_enc_exact_create(b, key, klen, id, retain_ms);
    wal_record_close(WAL_EXACT_CREATE);
}

void wal_log_exact_put(const char *key, size_t klen, uint64_t id, int64_t period, bool in_filter,
                       const uint8_t *fps, size_t n)
{
    if (n == 0 || !begin(n))
        return;
    pbuf *b = wal_record_open();
    uint8_t *s = wal_enc_exact_put_slots(b, key, klen, id, period, in_filter, (uint32_t)n);
    if (s)
        memcpy(s, fps, 16 * n);
    wal_record_close(WAL_EXACT_PUT);
}

void wal_log_exact_drop(const char *key, size_t klen, uint64_t id, int64_t period)
{
    if (!begin(1))
        return;
    pbuf *b = wal_record_open();
    wal_enc_exact_drop(b, key, klen, id, period);
    wal_record_close(WAL_EXACT_DROP);
}

void wal_log_cf_create(const char *key, size_t klen, const wal_cuckoo *c)
{
    if (!begin(1))
        return;
    pbuf *b = wal_record_open();
    wal_enc_cf_create(b, key, klen, c);
    wal_record_close(WAL_CF_CREATE);
}

void wal_log_cf_op(const char *key, size_t klen, uint8_t op, uint32_t max_filters,
                   const uint64_t *hashes, size_t n)
{
    if (n == 0 || !begin(n))
        return;
    pbuf *b = wal_record_open();
    wal_enc_cf_op(b, key, klen, op, max_filters, hashes, (uint32_t)n);
    wal_record_close(WAL_CF_OP);
}

uint64_t wal_log_cf_loadchunk(const char *key, size_t klen, long long iter, const void *data,
                              size_t len)
{
    if (!begin(1))
        return 0;
    pbuf *b = wal_record_open();
    wal_enc_loadchunk(b, key, klen, iter, data, len);
    return wal_record_close(WAL_CF_LOADCHUNK);
}

/* ---- count-min sketches and top-k values ---- */

void wal_log_items(uint8_t type, const char *key, size_t klen, const char *const *items,
                   const size_t *lens, const uint64_t *incrs, size_t n)
{
    if (n == 0 || !begin(n))
        return;
    pbuf *b = wal_record_open();
    wal_enc_items(b, key, klen, items, lens, incrs, (uint32_t)n);
    wal_record_close(type);
}

void wal_log_cms_create(const char *key, size_t klen, const wal_cms *c)
{
    if (!begin(1))
        return;
    pbuf *b = wal_record_open();
    wal_enc_cms_create(b, key, klen, c);
    wal_record_close(WAL_CMS_CREATE);
}

void wal_log_cms_merge(const char *const *keys, const size_t *lens, size_t n,
                       const int64_t *weights)
{
    if (!begin(1))
        return;
    pbuf *b = wal_record_open();
    wal_enc_cms_merge(b, keys, lens, (uint32_t)n, weights);
    wal_record_close(WAL_CMS_MERGE);
}

void wal_log_topk_create(const char *key, size_t klen, const wal_topk *t)
{
    if (!begin(1))
        return;
    pbuf *b = wal_record_open();
    wal_enc_topk_create(b, key, klen, t);
    wal_record_close(WAL_TOPK_CREATE);
}

/* ---- t-digests ---- */

void wal_log_td_create(const char *key, size_t klen, uint64_t compression)
{
    if (!begin(1))
        return;
    pbuf *b = wal_record_open();
    wal_enc_td_create(b, key, klen, compression);
    wal_record_close(WAL_TD_CREATE);
}

void wal_log_td_add(const char *key, size_t klen, const double *values, size_t n)
{
    if (n == 0 || !begin(n))
        return;
    pbuf *b = wal_record_open();
    wal_enc_td_add(b, key, klen, values, (uint32_t)n);
    wal_record_close(WAL_TD_ADD);
}

void wal_log_td_reset(const char *key, size_t klen)
{
    if (!begin(1))
        return;
    pbuf_str(wal_record_open(), key, klen);
    wal_record_close(WAL_TD_RESET);
}

void wal_log_td_merge(uint64_t compression, bool override, const char *const *keys,
                      const size_t *lens, size_t n)
{
    if (!begin(1))
        return;
    pbuf *b = wal_record_open();
    wal_enc_td_merge(b, compression, override, keys, lens, (uint32_t)n);
    wal_record_close(WAL_TD_MERGE);
}

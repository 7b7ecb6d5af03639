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
 * Every function also counts the change for the save schedule, with or
 * without the log.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "persist.h"
#include "config.h"
#include "log.h"

_Atomic uint64_t persist_dirty;
bool persist_replaying;

static bool begin(uint64_t changes)
{
    if (persist_replaying)
        return false;
    atomic_fetch_add_explicit(&persist_dirty, changes, memory_order_relaxed);
    return wal_enabled();
}

static uint64_t emit(uint8_t type, pbuf *b)
{
    if (b->failed) {
        /* The change is applied and its record cannot be encoded: going on
         * would acknowledge what a crash loses. Redis exits when an
         * allocation fails; so does the log (wal_append does the same). */
        server_log(LOG_WARNING, "Out of memory encoding a %s log record. Exiting...",
                   wal_type_name(type));
        fflush(NULL);
        _exit(1);
    }
    uint64_t lsn = wal_append(type, b->p, b->len);
    free(b->p);
    return lsn;
}

void wal_log_bf_add(const char *key, size_t klen, const sbf_t *f, const char *const *items,
                    const size_t *lens, size_t n, const int *results)
{
    size_t ok = 0;
    for (size_t i = 0; i < n; i++)
        ok += results[i] >= 0;
    if (ok == 0 || !begin(ok))
        return;
    uint64_t small[2 * 64];
    uint8_t small_new[64];
    uint64_t *h = ok <= 64 ? small : malloc(ok * 2 * sizeof(uint64_t));
    uint8_t *isnew = ok <= 64 ? small_new : malloc(ok);
    pbuf b = {0};
    if (h == NULL || isnew == NULL) {
        b.failed = true;
    } else {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (results[i] < 0)
                continue;
            sbf_hash sh = sbf_hash_item(f, items[i], lens[i]);
            h[2 * k] = sh.h1;
            h[2 * k + 1] = sh.h2;
            isnew[k++] = results[i] == 1;
        }
        wal_enc_hashes(&b, key, klen, h, (uint32_t)ok, isnew);
    }
    if (h != small)
        free(h);
    if (isnew != small_new)
        free(isnew);
    emit(WAL_BF_ADD, &b);
}

void wal_log_counting(uint8_t type, const char *key, size_t klen, const cntbf_t *cf,
                      const char *const *items, const size_t *lens, size_t n, const int *done)
{
    size_t ok = 0;
    for (size_t i = 0; i < n; i++)
        ok += done == NULL || done[i] >= 0;
    if (ok == 0 || !begin(ok))
        return;
    uint64_t small[2 * 16];
    uint64_t *h = ok <= 16 ? small : malloc(ok * 2 * sizeof(uint64_t));
    pbuf b = {0};
    if (h == NULL) {
        b.failed = true;
    } else {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (done && done[i] < 0)
                continue;
            bloomery_hash bh = bloomery_hash_item(items[i], lens[i], cntbf_seed(cf));
            h[2 * k] = bh.lo;
            h[2 * k + 1] = bh.hi;
            k++;
        }
        wal_enc_hashes(&b, key, klen, h, (uint32_t)ok, NULL);
        if (h != small)
            free(h);
    }
    emit(type, &b);
}

void wal_log_pf_add(const char *key, size_t klen, bool created, const char *const *items,
                    const size_t *lens, size_t n)
{
    if (!begin(n ? n : 1))
        return;
    uint64_t small[64];
    uint64_t *h = n <= 64 ? small : malloc(n * sizeof(uint64_t));
    pbuf b = {0};
    if (h == NULL) {
        b.failed = true;
    } else {
        for (size_t i = 0; i < n; i++)
            h[i] = hll_hash_elem(items[i], lens[i]);
        wal_enc_pf_add(&b, key, klen, created, h, (uint32_t)n);
        if (h != small)
            free(h);
    }
    emit(WAL_PF_ADD, &b);
}

void wal_log_create(const char *key, size_t klen, const wal_create *c)
{
    if (!begin(1))
        return;
    pbuf b = {0};
    wal_enc_create(&b, key, klen, c);
    emit(WAL_CREATE, &b);
}

void wal_log_del(const char *const *keys, const size_t *lens, size_t n)
{
    if (n == 0 || !begin(n))
        return;
    pbuf b = {0};
    wal_enc_keys(&b, -1, keys, lens, (uint32_t)n);
    emit(WAL_DEL, &b);
}

void wal_log_expire(const char *key, size_t klen, int64_t when_ms)
{
    if (!begin(1))
        return;
    pbuf b = {0};
    wal_enc_expire(&b, key, klen, when_ms);
    emit(WAL_EXPIRE, &b);
}

void wal_log_rename(const char *src, size_t slen, const char *dst, size_t dlen)
{
    if (!begin(1))
        return;
    pbuf b = {0};
    wal_enc_rename(&b, src, slen, dst, dlen);
    emit(WAL_RENAME, &b);
}

void wal_log_flush(void)
{
    if (!begin(1))
        return;
    wal_append(WAL_FLUSH, NULL, 0);
}

void wal_log_merge(uint8_t type, bool created, const char *const *keys, const size_t *lens,
                   size_t n)
{
    if (!begin(1))
        return;
    pbuf b = {0};
    wal_enc_keys(&b, created ? 1 : 0, keys, lens, (uint32_t)n);
    emit(type, &b);
}

uint64_t wal_log_loadchunk(const char *key, size_t klen, long long iter, const void *data,
                           size_t len)
{
    if (!begin(1))
        return 0;
    pbuf b = {0};
    wal_enc_loadchunk(&b, key, klen, iter, data, len);
    return emit(WAL_LOADCHUNK, &b);
}

/* ---- windows and cuckoo filters ---- */

void wal_log_win_create(const char *key, size_t klen, const wal_window *w)
{
    if (!begin(1))
        return;
    pbuf b = {0};
    wal_enc_win_create(&b, key, klen, w);
    emit(WAL_WIN_CREATE, &b);
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
    uint64_t small[2 * 64];
    uint64_t *h = k <= 64 ? small : malloc(k * 2 * sizeof(uint64_t));
    pbuf b = {0};
    if (h == NULL) {
        b.failed = true;
    } else {
        size_t j = 0;
        for (size_t i = 0; i < n; i++) {
            if (!isnew[i])
                continue;
            bloomery_hash bh = bloomery_hash_item(items[i], lens[i], win_seed(w));
            h[2 * j] = bh.lo;
            h[2 * j + 1] = bh.hi;
            j++;
        }
        wal_enc_win_add(&b, key, klen, now_ms, h, (uint32_t)k);
        if (h != small)
            free(h);
    }
    emit(WAL_WIN_ADD, &b);
}

void wal_log_win_rotate(const char *key, size_t klen, int64_t start_ms, bool early)
{
    if (!begin(1))
        return;
    pbuf b = {0};
    wal_enc_win_rotate(&b, key, klen, start_ms, early);
    emit(WAL_WIN_ROTATE, &b);
}

void wal_log_cf_create(const char *key, size_t klen, const wal_cuckoo *c)
{
    if (!begin(1))
        return;
    pbuf b = {0};
    wal_enc_cf_create(&b, key, klen, c);
    emit(WAL_CF_CREATE, &b);
}

void wal_log_cf_op(const char *key, size_t klen, uint8_t op, uint32_t max_filters,
                   const uint64_t *hashes, size_t n)
{
    if (n == 0 || !begin(n))
        return;
    pbuf b = {0};
    wal_enc_cf_op(&b, key, klen, op, max_filters, hashes, (uint32_t)n);
    emit(WAL_CF_OP, &b);
}

uint64_t wal_log_cf_loadchunk(const char *key, size_t klen, long long iter, const void *data,
                              size_t len)
{
    if (!begin(1))
        return 0;
    pbuf b = {0};
    wal_enc_loadchunk(&b, key, klen, iter, data, len);
    return emit(WAL_CF_LOADCHUNK, &b);
}

/* ---- t-digests ---- */

void wal_log_td_create(const char *key, size_t klen, uint64_t compression)
{
    if (!begin(1))
        return;
    pbuf b = {0};
    wal_enc_td_create(&b, key, klen, compression);
    emit(WAL_TD_CREATE, &b);
}

void wal_log_td_add(const char *key, size_t klen, const double *values, size_t n)
{
    if (n == 0 || !begin(n))
        return;
    pbuf b = {0};
    wal_enc_td_add(&b, key, klen, values, (uint32_t)n);
    emit(WAL_TD_ADD, &b);
}

void wal_log_td_reset(const char *key, size_t klen)
{
    if (!begin(1))
        return;
    pbuf b = {0};
    pbuf_str(&b, key, klen);
    emit(WAL_TD_RESET, &b);
}

void wal_log_td_merge(uint64_t compression, bool override, const char *const *keys,
                      const size_t *lens, size_t n)
{
    if (!begin(1))
        return;
    pbuf b = {0};
    wal_enc_td_merge(&b, compression, override, keys, lens, (uint32_t)n);
    emit(WAL_TD_MERGE, &b);
}

/* Exact windows (BF.RESERVE ... EXACT): adds and checks answered exactly,
 * the window in memory answering every negative and the exact store
 * (exact_store.h) confirming its positives, batched per command.
 *
 * A command holds the value's lock from its first look to its last write
 * (rotations, expired periods, filter, store, log), so a check-and-add is
 * linearizable: of two clients adding the same item, one gets 1. Store
 * writes come before the log record and the filter's bits after the store
 * took them: a failed write answers an error with nothing changed.
 * docs/EXACT.md.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf.h"
#include "cmd.h"
#include "exact.h"
#include "exact_store.h"
#include "le.h"
#include "log.h"
#include "persist.h"
#include "test_gate.h"

#define STORE_ERR "ERR EXACT store unavailable: "

static void reply_store_error(cmd_ctx *c, const char *why)
{
    char msg[700];
    snprintf(msg, sizeof(msg), STORE_ERR "%s", why);
    /* One line: an error reply may not hold CR or LF. */
    for (char *p = msg; *p; p++)
        if (*p == '\r' || *p == '\n')
            *p = ' ';
    reply_error(&c->out, msg);
}

/* Rotations that are due by time (an exact window never rotates early: its
 * store keeps the items, the filter may run past its capacity), logged as
 * the window's, and periods past their retention dropped. */
static bool advance(const char *key, size_t klen, kv_obj *o, int64_t now, char *err, size_t errlen)
{
    win_t *w = o->v;
    exact_meta *m = o->exact;
    int64_t start;
    unsigned turns = 0;
    while (win_rotation_due(w, now, &start) == WIN_DUE_TIME) {
        /* A long gap: only the last S + 1 rotations leave anything. */
        int64_t p = (int64_t)exact_period_ms(w), last = exact_period_of(w, now);
        int64_t skip = last - (int64_t)(win_slices(w) + 1) * p;
        if (turns == 0 && skip > start)
            start = skip;
        win_rotate(w, start, false);
        wal_log_win_rotate(key, klen, start, false);
        turns++;
    }
    if (m->retain_ms == 0)
        return true;
    /* Periods are ascending: look until the first one still kept. A few
     * per call, within the log room a command reserves; the rest go with
     * the next (nothing reads a period past its retention meanwhile). */
    for (int dropped = 0; dropped < 32; dropped++) {
        int64_t oldest;
        if (xs_periods(m->id, &oldest, 1) == 0 || oldest + (int64_t)m->retain_ms > now)
            return true;
        if (!xs_drop(m->id, oldest, err, errlen))
            return false;
        wal_log_exact_drop(key, klen, m->id, oldest);
    }
    return true;
}

void bfc_exact_cron(const char *key, size_t klen, kv_obj *o)
{
    char err[512];
    if (!xs_ok())
        return;
    pthread_mutex_lock(&o->lock);
    if (!advance(key, klen, o, wal_window_clock_ms(), err, sizeof(err)))
        server_log(LOG_WARNING, "exact store: %s", err);
    pthread_mutex_unlock(&o->lock);
}

/* In-command duplicates: the fingerprints already answered new. */
typedef struct seen_set {
    uint32_t *slot; /* index + 1, 0: empty */
    size_t mask;
    const uint8_t *fps;
} seen_set;

static bool seen_init(seen_set *s, size_t n, const uint8_t *fps)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    s->slot = calloc(cap, sizeof(uint32_t));
    s->mask = cap - 1;
    s->fps = fps;
    return s->slot != NULL;
}

/* True when fps[i] is in the set; else adds it. */
static bool seen_test_add(seen_set *s, size_t i)
{
    const uint8_t *fp = s->fps + XS_FP_LEN * i;
    for (size_t h = le_load(fp, 8) & s->mask;; h = (h + 1) & s->mask) {
        uint32_t v = s->slot[h];
        if (v == 0) {
            s->slot[h] = (uint32_t)i + 1;
            return false;
        }
        if (memcmp(s->fps + XS_FP_LEN * (v - 1), fp, XS_FP_LEN) == 0)
            return true;
    }
}

typedef struct work {
    uint8_t *fps;   /* n x 16 */
    uint8_t *maybe; /* the filter's answer (or 1: ask the store) */
    uint8_t *found; /* the store's */
    int *res;
    uint8_t *newfps;
    /* The store's answers read before the lock (early), for these periods
     * in this epoch of the store (xs_epoch). */
    uint8_t *early;
    bool have_early;
    uint64_t early_epoch;
    size_t early_np;
    int64_t early_periods[WIN_MAX_SLICES + 1];
} work;

static void work_free(work *k)
{
    free(k->fps);
    free(k->maybe);
    free(k->found);
    free(k->res);
    free(k->newfps);
    free(k->early);
}

static bool work_init(work *k, size_t n)
{
    size_t m = n ? n : 1;
    k->fps = malloc(XS_FP_LEN * m);
    k->maybe = malloc(m);
    k->found = malloc(m);
    k->res = malloc(m * sizeof(int));
    k->newfps = malloc(XS_FP_LEN * m);
    k->early = malloc(m);
    k->have_early = false;
    if (k->fps && k->maybe && k->found && k->res && k->newfps && k->early)
        return true;
    work_free(k);
    return false;
}

static void fingerprints(const win_t *w, const char **items, const size_t *lens, size_t n,
                         uint8_t *fps)
{
    uint64_t seed = win_seed(w);
    for (size_t i = 0; i < n; i++) {
        bloomery_hash h = bloomery_hash_item(items[i], lens[i], seed);
        le_store(fps + XS_FP_LEN * i, h.lo, 8);
        le_store(fps + XS_FP_LEN * i + 8, h.hi, 8);
    }
}

static bloomery_hash hash_at(const uint8_t *fps, size_t i)
{
    return (bloomery_hash){le_load(fps + XS_FP_LEN * i, 8), le_load(fps + XS_FP_LEN * i + 8, 8)};
}

/* The window's answers for the n fingerprints (maybe[i]), their blocks
 * prefetched a group at a time: a big window misses the cache on each. */
static void window_answers(const win_t *w, const uint8_t *fps, size_t n, int64_t now, bool for_add,
                           uint8_t *maybe)
{
    enum { G = 64 };
    bloomery_hash h[G];
    for (size_t base = 0; base < n; base += G) {
        size_t g = n - base < G ? n - base : G;
        for (size_t i = 0; i < g; i++)
            h[i] = hash_at(fps, base + i);
        win_check_many_hashed(w, h, g, now, for_add, maybe + base);
    }
}

/* Whether item i needs the store under the lock: a positive of the filter
 * that the lookup before the lock did not find (usable: that lookup's
 * answers still hold). */
static bool ask(const work *k, size_t i, bool usable)
{
    return k->maybe[i] && !(usable && k->early[i]);
}

/* The fingerprints ask() picks, gathered into newfps; their count. */
static size_t gather(work *k, size_t n, bool usable)
{
    size_t q = 0;
    for (size_t i = 0; i < n; i++)
        if (ask(k, i, usable))
            memcpy(k->newfps + XS_FP_LEN * q++, k->fps + XS_FP_LEN * i, XS_FP_LEN);
    return q;
}

/* The store's answer for the items whose maybe[i] is set, in periods: from
 * the lookup before the lock where it found the item (nothing left the
 * store since: same periods, same epoch), else asked now. */
static bool confirm(exact_meta *m, const int64_t *periods, size_t np, work *k, size_t n, char *err,
                    size_t errlen)
{
    bool usable = k->have_early && k->early_epoch == xs_epoch() && k->early_np == np &&
                  memcmp(k->early_periods, periods, np * sizeof(*periods)) == 0;
    size_t q = gather(k, n, usable), positives = 0;
    uint8_t small[256];
    uint8_t *got = q <= sizeof(small) ? small : malloc(q);
    if (got == NULL) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    bool ok = xs_get(m->id, periods, np, k->newfps, q, got, err, errlen);
    for (size_t i = 0, j = 0; ok && i < n; i++) {
        positives += k->maybe[i];
        k->found[i] = ask(k, i, usable) ? got[j++] : k->maybe[i];
        if (k->found[i])
            atomic_fetch_add_explicit(&m->confirmed, 1, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&m->lookups, positives, memory_order_relaxed);
    if (got != small)
        free(got);
    return ok;
}

/* Tests only: with BLOOMERYD_TEST_EXACT_GATE naming a FIFO, the first
 * command whose early lookup found an item waits there (test_gate.h)
 * before its lock, so a test can drop a period meanwhile. Later commands
 * pass. */
static void early_gate(void)
{
    static _Atomic bool passed;
    if (atomic_load_explicit(&passed, memory_order_relaxed) || atomic_exchange(&passed, true))
        return;
    test_gate("BLOOMERYD_TEST_EXACT_GATE");
}

/* The filter's positives looked up in the store before the filter's lock
 * is taken for the command: a lookup that misses RocksDB's caches waits on
 * the disk, and under the lock every other command into the filter would
 * wait with it. What it found stays found while no period left the store
 * (confirm checks), so under the lock only the positives it did not find
 * are asked again: the false positives, and items other commands added
 * meanwhile. Only where other workers can run meanwhile. */
static void look_early(kv_obj *o, work *k, size_t n)
{
    if (atomic_load(&cfg.threads) < 2)
        return;
    win_t *w = o->v;
    pthread_mutex_lock(&o->lock);
    int64_t now = wal_window_clock_ms();
    k->early_np = exact_live_periods(w, now, k->early_periods);
    pthread_mutex_unlock(&o->lock);
    /* Read before the lookup: a drop after it changes it. */
    k->early_epoch = xs_epoch();
    window_answers(w, k->fps, n, now, false, k->maybe);
    size_t q = gather(k, n, false);
    char err[8];
    if (!xs_get(o->exact->id, k->early_periods, k->early_np, k->newfps, q, k->found, err,
                sizeof(err)))
        return;
    bool any = false;
    for (size_t i = 0, j = 0; i < n; i++) {
        k->early[i] = k->maybe[i] ? k->found[j++] : 0;
        any = any || k->early[i];
    }
    k->have_early = true;
    if (any)
        early_gate();
}

bool bfc_exact_add(cmd_ctx *c, const char *key, size_t klen, kv_obj *o, bool has_at, int64_t at,
                   const char **items, const size_t *lens, size_t n, bool multi)
{
    if (!exact_store_usable()) {
        reply_store_error(c, exact_store_error());
        return false;
    }
    work k = {0};
    seen_set seen = {0};
    if (!work_init(&k, n) || !seen_init(&seen, n, k.fps)) {
        work_free(&k);
        free(seen.slot);
        reply_oom(c);
        return false;
    }
    char err[512];
    bool ok = true;
    win_t *w = o->v;
    exact_meta *m = o->exact;
    fingerprints(w, items, lens, n, k.fps);
    if (!has_at)
        look_early(o, &k, n);
    pthread_mutex_lock(&o->lock);
    int64_t now = wal_window_clock_ms();
    if (!advance(key, klen, o, now, err, sizeof(err))) {
        reply_store_error(c, err);
        ok = false;
        goto out;
    }
    int64_t periods[WIN_MAX_SLICES + 1];
    size_t np = exact_live_periods(w, now, periods);
    /* An item of an older time than the window holds goes to its own
     * period in the store only. */
    int64_t period = win_slice_start(w, 0);
    bool archive = false;
    if (has_at && at < now) {
        int64_t p = exact_period_of(w, at);
        archive = true;
        for (size_t i = 0; i < np; i++)
            archive = archive && periods[i] != p;
        if (archive) {
            if (m->retain_ms && p + (int64_t)m->retain_ms <= now) {
                reply_error(&c->out, "ERR AT is older than the filter's retention");
                ok = false;
                goto out;
            }
            period = p;
            periods[0] = p;
            np = 1;
        }
    }
    if (archive)
        memset(k.maybe, 1, n);
    else
        window_answers(w, k.fps, n, now, true, k.maybe);
    if (!confirm(m, periods, np, &k, n, err, sizeof(err))) {
        reply_store_error(c, err);
        ok = false;
        goto out;
    }
    size_t fresh = 0;
    for (size_t i = 0; i < n; i++) {
        k.res[i] = !k.found[i] && !seen_test_add(&seen, i);
        if (k.res[i])
            memcpy(k.newfps + XS_FP_LEN * fresh++, k.fps + XS_FP_LEN * i, XS_FP_LEN);
    }
    if (!xs_put(m->id, period, k.newfps, fresh, err, sizeof(err))) {
        reply_store_error(c, err);
        ok = false;
        goto out;
    }
    if (!archive)
        for (size_t i = 0; i < fresh; i++)
            win_add_hashed(w, hash_at(k.newfps, i));
    wal_log_exact_put(key, klen, m->id, period, !archive, k.newfps, fresh);
out:
    pthread_mutex_unlock(&o->lock);
    if (ok) {
        if (multi)
            reply_array(&c->out, (long long)n);
        reply_bools(&c->out, k.res, n);
    }
    work_free(&k);
    free(seen.slot);
    return ok;
}

void bfc_exact_check(cmd_ctx *c, kv_obj *o, const char **items, const size_t *lens, size_t n)
{
    work k = {0};
    if (!work_init(&k, n)) {
        for (size_t i = 0; i < n; i++)
            reply_error(&c->out, "ERR out of memory");
        return;
    }
    char err[512] = "";
    win_t *w = o->v;
    fingerprints(w, items, lens, n, k.fps);
    look_early(o, &k, n);
    pthread_mutex_lock(&o->lock);
    int64_t now = wal_window_clock_ms();
    window_answers(w, k.fps, n, now, false, k.maybe);
    int64_t periods[WIN_MAX_SLICES + 1];
    size_t np = exact_live_periods(w, now, periods);
    bool ok = exact_store_usable();
    if (!ok)
        snprintf(err, sizeof(err), "%s", exact_store_error());
    else
        ok = confirm(o->exact, periods, np, &k, n, err, sizeof(err));
    pthread_mutex_unlock(&o->lock);
    for (size_t i = 0; i < n; i++) {
        if (ok || !k.maybe[i])
            reply_bool(&c->out, k.maybe[i] && k.found[i]);
        else
            reply_store_error(c, err);
    }
    work_free(&k);
}

/* Time-windowed dedup filter (contract in window.h).
 *
 *   ring of S+1 slices, slot `cur` is current:
 *
 *     time  ---->   [ older ... ][ older ][ current ]
 *     slot           cur+1        cur-1     cur       (mod S+1)
 *
 * Every slice has the same shape and seed, so an item's blocks are at the
 * same index in every slice and one hash serves the whole ring; a check
 * prefetches that block in each live slice, then tests them. A slice is live
 * at time t while t < start + (S+1) * T/S: an item added while its slice was
 * current is thus kept at least T and at most T + T/S after its add, even
 * when the rotation that would clear its slice is late.
 *
 * The ring's FPR is at most the sum over slices, (S+1) * p/(S+1) = p, at
 * capacity. With the memory policy a slice at p/(S+1) uses two blocks per
 * key below p = 5e-4, which is what makes S = 4 cost about 23.5 bits per
 * windowed item at p = 1e-3.
 */
#include "bloomery/window.h"
#include "bloomery/bloomery.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "blocked_lock.h"

#define BATCH 16

struct win {
    pthread_rwlock_t lock; /* write: rotation; read: everything else */
    unsigned s;            /* S; the ring has s + 1 slots */
    unsigned cur;
    bf_t *ring[WIN_MAX_SLICES + 1];
    int64_t start[WIN_MAX_SLICES + 1];
    uint64_t window_ms, period_ms;
    uint64_t capacity, slice_capacity;
    double error_rate;
    uint64_t seed;
    uint64_t rotations, early_rotations;
};

static inline unsigned slot_of(const win_t *w, unsigned i)
{
    return (w->cur + (w->s + 1) - i) % (w->s + 1);
}

static inline bool slot_live(const win_t *w, unsigned slot, int64_t now)
{
    return now < w->start[slot] + (int64_t)((w->s + 1) * w->period_ms);
}

static bf_options slice_options(const bf_options *opts)
{
    bf_options o = {.policy = BLOOMERY_POLICY_MEMORY};
    if (opts)
        o = *opts;
    return o;
}

static int check_args(uint64_t capacity, double error_rate, unsigned *slices)
{
    if (*slices == 0)
        *slices = WIN_DEFAULT_SLICES;
    if (capacity == 0 || !(error_rate > 0 && error_rate < 1) || *slices > WIN_MAX_SLICES)
        return BLOOMERY_EINVAL;
    return BLOOMERY_OK;
}

static uint64_t slice_capacity(uint64_t capacity, unsigned s)
{
    return capacity / s + (capacity % s != 0);
}

uint64_t win_bytes_for(uint64_t capacity, double error_rate, unsigned slices,
                       const bf_options *opts)
{
    if (check_args(capacity, error_rate, &slices) != BLOOMERY_OK)
        return 0;
    bf_options o = slice_options(opts);
    uint64_t one = bf_bytes_for(slice_capacity(capacity, slices), error_rate / (slices + 1), &o);
    if (one == 0 || one > UINT64_MAX / (slices + 1))
        return 0;
    return one * (slices + 1);
}

static win_t *win_new(uint64_t capacity, double error_rate, uint64_t window_ms, unsigned s)
{
    win_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    pthread_rwlock_init(&w->lock, NULL);
    w->s = s;
    w->window_ms = window_ms;
    w->period_ms = window_ms / s ? window_ms / s : 1;
    w->capacity = capacity;
    w->slice_capacity = slice_capacity(capacity, s);
    w->error_rate = error_rate;
    return w;
}

int win_create(win_t **out, uint64_t capacity, double error_rate, uint64_t window_ms,
               unsigned slices, int64_t now_ms, const bf_options *opts)
{
    *out = NULL;
    if (check_args(capacity, error_rate, &slices) != BLOOMERY_OK || window_ms == 0)
        return BLOOMERY_EINVAL;
    win_t *w = win_new(capacity, error_rate, window_ms, slices);
    if (!w)
        return BLOOMERY_ENOMEM;
    bf_options o = slice_options(opts);
    w->seed = o.seed;
    for (unsigned i = 0; i <= slices; i++) {
        int rc = bf_create(&w->ring[i], w->slice_capacity, error_rate / (slices + 1), &o);
        if (rc != BLOOMERY_OK) {
            win_free(w);
            return rc;
        }
        /* Slots other than the current one start empty and already dead. */
        w->start[i] = now_ms - (int64_t)((slices + 1) * w->period_ms);
    }
    w->start[0] = now_ms;
    *out = w;
    return BLOOMERY_OK;
}

int win_assemble(win_t **out, uint64_t capacity, double error_rate, uint64_t window_ms,
                 unsigned slices, bf_t **filters, const int64_t *starts, uint64_t rotations,
                 uint64_t early_rotations)
{
    *out = NULL;
    if (check_args(capacity, error_rate, &slices) != BLOOMERY_OK || window_ms == 0)
        return BLOOMERY_EINVAL;
    for (unsigned i = 0; i <= slices; i++) {
        if (!filters[i] || bf_nblocks(filters[i]) != bf_nblocks(filters[0]) ||
            bf_blocks_per_key(filters[i]) != bf_blocks_per_key(filters[0]) ||
            bf_seed(filters[i]) != bf_seed(filters[0]))
            return BLOOMERY_EINVAL;
    }
    win_t *w = win_new(capacity, error_rate, window_ms, slices);
    if (!w)
        return BLOOMERY_ENOMEM;
    w->seed = bf_seed(filters[0]);
    w->cur = 0;
    for (unsigned i = 0; i <= slices; i++) {
        unsigned slot = slot_of(w, i);
        w->ring[slot] = filters[i];
        w->start[slot] = starts[i];
    }
    w->rotations = rotations;
    w->early_rotations = early_rotations;
    *out = w;
    return BLOOMERY_OK;
}

void win_free(win_t *w)
{
    if (!w)
        return;
    for (unsigned i = 0; i <= w->s; i++)
        bf_free(w->ring[i]);
    pthread_rwlock_destroy(&w->lock);
    free(w);
}

/* ---- membership (read lock held) ---- */

static bool seen(const win_t *w, bloomery_hash h, int64_t now)
{
    for (unsigned i = 0; i <= w->s; i++) {
        unsigned slot = slot_of(w, i);
        if (slot_live(w, slot, now) && bf_check_hashed(w->ring[slot], h))
            return true;
    }
    return false;
}

static void prefetch(const win_t *w, bloomery_hash h, int64_t now, bool for_write)
{
    for (unsigned i = 0; i <= w->s; i++) {
        unsigned slot = slot_of(w, i);
        if (slot_live(w, slot, now))
            bf_prefetch(w->ring[slot], h, for_write && slot == w->cur);
    }
}

static int check_and_add_locked(win_t *w, bloomery_hash h, int64_t now)
{
    /* Adds go to the current slice only (rotation excludes them), so the
     * stripes of the item's blocks there serialize all adders of the item. */
    bf_t *cur = w->ring[w->cur];
    if (seen(w, h, now))
        return 0;
    uint64_t held = bf_lock_item(cur, h);
    int fresh = !seen(w, h, now);
    if (fresh)
        bf_count_add(cur, bf_set_locked(cur, h));
    bf_unlock_stripes(cur, held);
    return fresh;
}

int win_check_and_add_hashed(win_t *w, bloomery_hash h, int64_t now_ms)
{
    pthread_rwlock_rdlock(&w->lock);
    int r = check_and_add_locked(w, h, now_ms);
    pthread_rwlock_unlock(&w->lock);
    return r;
}

bool win_check_hashed(const win_t *w, bloomery_hash h, int64_t now_ms)
{
    win_t *m = (win_t *)w;
    pthread_rwlock_rdlock(&m->lock);
    bool r = seen(w, h, now_ms);
    pthread_rwlock_unlock(&m->lock);
    return r;
}

int win_check_and_add(win_t *w, const void *item, size_t len, int64_t now_ms)
{
    return win_check_and_add_hashed(w, bloomery_hash_item(item, len, w->seed), now_ms);
}

bool win_check(const win_t *w, const void *item, size_t len, int64_t now_ms)
{
    return win_check_hashed(w, bloomery_hash_item(item, len, w->seed), now_ms);
}

static void run_many(win_t *w, const void *const *items, const size_t *lens, size_t n, int64_t now,
                     uint8_t *out, bool add)
{
    bloomery_hash h[BATCH];
    pthread_rwlock_rdlock(&w->lock);
    for (size_t base = 0; base < n; base += BATCH) {
        size_t g = n - base < BATCH ? n - base : BATCH;
        for (size_t i = 0; i < g; i++) {
            h[i] = bloomery_hash_item(items[base + i], lens[base + i], w->seed);
            prefetch(w, h[i], now, add);
        }
        for (size_t i = 0; i < g; i++)
            out[base + i] =
                (uint8_t)(add ? check_and_add_locked(w, h[i], now) : seen(w, h[i], now));
    }
    pthread_rwlock_unlock(&w->lock);
}

void win_check_and_add_many(win_t *w, const void *const *items, const size_t *lens, size_t n,
                            int64_t now_ms, uint8_t *out)
{
    run_many(w, items, lens, n, now_ms, out, true);
}

void win_check_many(const win_t *w, const void *const *items, const size_t *lens, size_t n,
                    int64_t now_ms, uint8_t *out)
{
    run_many((win_t *)w, items, lens, n, now_ms, out, false);
}

void win_check_many_hashed(const win_t *w, const bloomery_hash *h, size_t n, int64_t now_ms,
                           bool for_add, uint8_t *out)
{
    win_t *m = (win_t *)w;
    pthread_rwlock_rdlock(&m->lock);
    for (size_t base = 0; base < n; base += BATCH) {
        size_t g = n - base < BATCH ? n - base : BATCH;
        for (size_t i = 0; i < g; i++)
            prefetch(w, h[base + i], now_ms, for_add);
        for (size_t i = 0; i < g; i++)
            out[base + i] = (uint8_t)seen(w, h[base + i], now_ms);
    }
    pthread_rwlock_unlock(&m->lock);
}

void win_add_hashed(win_t *w, bloomery_hash h)
{
    /* Exclusive: the count is corrected without racing adds. */
    pthread_rwlock_wrlock(&w->lock);
    bf_t *cur = w->ring[w->cur];
    if (!bf_add_hashed(cur, h))
        bf_set_count(cur, bf_count(cur) + 1);
    pthread_rwlock_unlock(&w->lock);
}

/* ---- rotation ---- */

static int due_locked(const win_t *w, int64_t now, int64_t *start)
{
    int64_t cur_start = w->start[w->cur];
    if (now >= cur_start + (int64_t)w->period_ms) {
        if (start)
            *start = cur_start + (int64_t)w->period_ms;
        return WIN_DUE_TIME;
    }
    if (bf_count(w->ring[w->cur]) >= w->slice_capacity) {
        if (start)
            *start = now > cur_start ? now : cur_start;
        return WIN_DUE_FULL;
    }
    return WIN_DUE_NONE;
}

int win_rotation_due(const win_t *w, int64_t now_ms, int64_t *start)
{
    win_t *m = (win_t *)w;
    pthread_rwlock_rdlock(&m->lock);
    int r = due_locked(w, now_ms, start);
    pthread_rwlock_unlock(&m->lock);
    return r;
}

static void rotate_locked(win_t *w, int64_t start, bool early)
{
    w->cur = (w->cur + 1) % (w->s + 1);
    bf_clear(w->ring[w->cur]);
    w->start[w->cur] = start;
    w->rotations++;
    if (early)
        w->early_rotations++;
}

void win_rotate(win_t *w, int64_t start_ms, bool early)
{
    pthread_rwlock_wrlock(&w->lock);
    rotate_locked(w, start_ms, early);
    pthread_rwlock_unlock(&w->lock);
}

unsigned win_advance(win_t *w, int64_t now_ms, void (*cb)(void *ctx, int64_t start, bool early),
                     void *ctx)
{
    unsigned n = 0;
    pthread_rwlock_wrlock(&w->lock);
    int64_t period = (int64_t)w->period_ms;
    int64_t behind = now_ms - w->start[w->cur];
    if (behind >= (int64_t)(w->s + 2) * period) {
        /* Down for more than a whole ring: skip to where S+1 rotations
         * before now would have started, clearing every slice once. */
        int64_t steps = behind / period;
        w->start[w->cur] += (steps - (int64_t)(w->s + 1)) * period;
    }
    int64_t start;
    int due;
    while ((due = due_locked(w, now_ms, &start)) != WIN_DUE_NONE) {
        rotate_locked(w, start, due == WIN_DUE_FULL);
        if (cb)
            cb(ctx, start, due == WIN_DUE_FULL);
        n++;
        if (due == WIN_DUE_FULL)
            break; /* a fresh slice is never full */
    }
    pthread_rwlock_unlock(&w->lock);
    return n;
}

/* ---- state ---- */

uint64_t win_capacity(const win_t *w) { return w->capacity; }
double win_error_rate(const win_t *w) { return w->error_rate; }
uint64_t win_window_ms(const win_t *w) { return w->window_ms; }
unsigned win_slices(const win_t *w) { return w->s; }
uint64_t win_slice_capacity(const win_t *w) { return w->slice_capacity; }
uint64_t win_seed(const win_t *w) { return w->seed; }
uint64_t win_rotations(const win_t *w) { return w->rotations; }
uint64_t win_early_rotations(const win_t *w) { return w->early_rotations; }

uint64_t win_bytes(const win_t *w) { return bf_bytes(w->ring[0]) * (w->s + 1); }

int64_t win_slice_start(const win_t *w, unsigned i)
{
    return i <= w->s ? w->start[slot_of(w, i)] : 0;
}

uint64_t win_slice_count(const win_t *w, unsigned i)
{
    return i <= w->s ? bf_count(w->ring[slot_of(w, i)]) : 0;
}

bf_t *win_slice(const win_t *w, unsigned i) { return i <= w->s ? w->ring[slot_of(w, i)] : NULL; }

uint64_t win_count(const win_t *w, int64_t now_ms)
{
    uint64_t n = 0;
    for (unsigned i = 0; i <= w->s; i++) {
        unsigned slot = slot_of(w, i);
        if (slot_live(w, slot, now_ms))
            n += bf_count(w->ring[slot]);
    }
    return n;
}

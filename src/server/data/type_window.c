/* The time-windowed Bloom filter value (win_t), BF.RESERVE ... WINDOW
 * (t_window.c). Log: WAL_WIN_CREATE with the creation parameters,
 * WAL_WIN_ADD with the new items' hashes and the clock they ran at,
 * WAL_WIN_ROTATE barriers; replay applies all three exactly, so a window
 * rotates only as the log says, never by the replaying clock.
 *
 * Snapshots read a window's slices live, as Bloom chains
 * (docs/PERSISTENCE.md): the image header (starts, counts, the ring's
 * order) is taken at the capture, and a slice read later holds its bits at
 * the capture plus some of the adds logged since, or, if a rotation since
 * cleared it, part of what came after that rotation. Replay clears every
 * slice a logged rotation cleared and adds every logged item to the slice
 * it went to, counting it whether or not the copy already had its bits
 * (win_add_hashed), so it ends in exactly the live state.
 */
#include "config.h"
#include "exact.h"
#include "keyspace.h"
#include "le.h"
#include "types.h"
#include "util.h"

static void free_value(void *v) { win_free(v); }

static uint64_t adopt(kv_obj *o) { return win_bytes(o->v); }

static const char *replay(const wal_op *op)
{
    if (op->type == WAL_EXACT_CREATE || op->type == WAL_EXACT_PUT || op->type == WAL_EXACT_DROP)
        return exact_replay(op, false);
    if (op->type == WAL_WIN_CREATE) {
        const wal_window *p = &op->win;
        win_t *w;
        if (win_create(&w, p->capacity, p->error, p->window_ms, p->slices, p->start_ms, NULL) !=
            BLOOMERY_OK)
            return "could not create";
        kv_obj *o = kv_obj_new(&window_type, w);
        if (o == NULL) {
            win_free(w);
            return "out of memory";
        }
        uint64_t bytes = win_bytes(w);
        atomic_store(&o->value_bytes, bytes);
        ks_mem_add((int64_t)bytes);
        return ks_replace(op->key, op->klen, o, p->expire_ms) ? NULL : "out of memory";
    }
    ks_ref ref;
    const char *missing;
    kv_entry *e =
        type_open_record_key(&ref, op, &window_type, op->type == WAL_WIN_ROTATE, &missing);
    if (e == NULL)
        return missing;
    win_t *w = e->obj->v;
    if (op->type == WAL_WIN_ROTATE) {
        win_rotate(w, op->when_ms, op->early);
    } else {
        /* Each item was new when logged, so it went to the current slice
         * and was counted there; two adds that ran concurrently may replay
         * in the other order, which changes nothing. */
        for (uint32_t i = 0; i < op->n; i++) {
            bloomery_hash h = {le_load(op->items + 16 * (size_t)i, 8),
                               le_load(op->items + 16 * (size_t)i + 8, 8)};
            win_add_hashed(w, h);
        }
    }
    ks_close(&ref);
    return NULL;
}

static const uint8_t records[] = {WAL_WIN_CREATE,
                                  WAL_WIN_ADD,
                                  WAL_WIN_ROTATE,
                                  WAL_EXACT_CREATE,
                                  WAL_EXACT_PUT,
                                  WAL_EXACT_DROP,
                                  0};

static void stats(const kv_obj *o, value_stats *s)
{
    /* The windows' clock, as t_window.c reads it (tests shift it). */
    int64_t now = now_ms() + atomic_load_explicit(&cfg.debug_clock_offset_ms, memory_order_relaxed);
    s->layout = "window";
    s->capacity = win_capacity(o->v);
    s->items = win_count(o->v, now);
    s->bytes = win_bytes(o->v);
    s->parts = win_slices(o->v);
    s->fpr = -1; /* the library keeps no estimate for a ring of slices */
    s->error_rate = win_error_rate(o->v);
}

static bool always_monotone(const void *v)
{
    (void)v;
    return true;
}

const value_type window_type = {
    .name = "windowed filter",
    .type_reply = "MBbloom--",
    .module_type = "bloomerBF",
    .snap_kind = SNAP_KIND_WINDOW,
    .image = BLOOMERY_TYPE_WINDOW,
    .monotone = always_monotone,
    .filter = true,
    .free_value = free_value,
    .adopt = adopt,
    .records = records,
    .replay = replay,
    .stats = stats,
};

/* Time-windowed Bloom filters behind BF.*: BF.RESERVE key error capacity
 * WINDOW seconds [SLICES s] creates one (libbloomery's win_t, window.h);
 * BF.ADD, BF.MADD, BF.INSERT, BF.EXISTS, BF.MEXISTS, BF.CARD and BF.INFO
 * dispatch here from t_bloom.c when the key holds a window.
 *
 * Clock: the server's wall clock in ms (plus debug-clock-offset-ms, for
 * tests), read once per command, so a command's due check and its adds use
 * the same instant.
 *
 * Rotation: before adding, a command asks win_rotation_due(); when a slice
 * is due (its time is up, or it holds its share of the capacity) the
 * command re-opens the key exclusively, performs every due rotation with
 * win_advance(), logs each as a WAL_WIN_ROTATE barrier and adds under that
 * lock. Adds otherwise run under the stripe's shared lock, so no add runs
 * during a rotation and the log orders adds and rotations as they were
 * applied. Checks never rotate: the library ignores slices older than the
 * window at the given time. The server cron rotates idle windows
 * (window_cron), a bounded scan of the keyspace per tick.
 *
 * Replay applies creation, adds (with the clock they ran at) and rotations
 * exactly; slices that expired while the server was down are rotated by the
 * first add or cron tick after start, and logged then.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "persist.h"
#include "cmd.h"
#include "config.h"
#include "log.h"
#include "util.h"

#define WIN_MAX_SECONDS (100LL * 365 * 86400)

static int64_t window_now(void) {
    return now_ms() + atomic_load_explicit(&cfg.debug_clock_offset_ms, memory_order_relaxed);
}

typedef struct rot_ctx {
    const char *key;
    size_t klen;
} rot_ctx;

static void log_rotation(void *ctx, int64_t start, bool early) {
    rot_ctx *r = ctx;
    wal_log_win_rotate(r->key, r->klen, start, early);
}

/* ---- BF.RESERVE ... WINDOW ---- */

static int arg_index(cmd_ctx *c, const char *lit) {
    for (int i = 4; i < c->argc; i++)
        if (arg_eq(c, i, lit)) return i;
    return -1;
}

bool window_reserve(cmd_ctx *c) {
    int wi = arg_index(c, "window"), si = arg_index(c, "slices");
    if (wi < 0 && si < 0) return false;
    if (wi < 0) {
        reply_error(&c->out, "ERR SLICES needs WINDOW");
        return true;
    }
    double error;
    long long capacity, seconds, slices = WIN_DEFAULT_SLICES, ttl = 0;
    if (!str_to_double(c->argv[2], c->argvlen[2], &error)) {
        reply_error(&c->out, "ERR bad error rate");
        return true;
    }
    if (!(error > 0 && error < 1)) {
        reply_error(&c->out, "ERR error rate must be in the range (0.000000, 1.000000)");
        return true;
    }
    if (!str_to_ll(c->argv[3], c->argvlen[3], &capacity)) {
        reply_error(&c->out, "ERR bad capacity");
        return true;
    }
    if (capacity < 1 || capacity > (1LL << 30)) {
        reply_error(&c->out, "ERR capacity must be in the range [1, 1073741824]");
        return true;
    }
    if (wi + 1 >= c->argc || !str_to_ll(c->argv[wi + 1], c->argvlen[wi + 1], &seconds) ||
        seconds < 1 || seconds > WIN_MAX_SECONDS) {
        reply_error(&c->out, "ERR WINDOW must be a positive number of seconds");
        return true;
    }
    if (si >= 0 && (si + 1 >= c->argc || !str_to_ll(c->argv[si + 1], c->argvlen[si + 1], &slices) ||
                    slices < 1 || slices > WIN_MAX_SLICES)) {
        reply_error(&c->out, "ERR SLICES must be in the range [1, 64]");
        return true;
    }
    /* Every other option: LAYOUT BLOCKED and TTL apply, the rest not. */
    for (int i = 4; i < c->argc; i++) {
        if (i == wi || i == si) {
            i++;
        } else if (arg_eq(c, i, "layout")) {
            if (i + 1 < c->argc && arg_eq(c, i + 1, "blocked")) {
                i++;
                continue;
            }
            reply_error(&c->out, "ERR WINDOW filters use the blocked layout");
            return true;
        } else if (arg_eq(c, i, "ttl")) {
            if (i + 1 >= c->argc || !str_to_ll(c->argv[i + 1], c->argvlen[i + 1], &ttl) ||
                ttl <= 0 || ttl > WIN_MAX_SECONDS) {
                reply_error(&c->out, "ERR TTL must be a positive number of seconds");
                return true;
            }
            i++;
        } else if (arg_eq(c, i, "expansion") || arg_eq(c, i, "nonscaling")) {
            reply_error(&c->out, "ERR WINDOW filters do not scale: EXPANSION and NONSCALING do not apply");
            return true;
        } else if (arg_eq(c, i, "counting")) {
            reply_error(&c->out, "ERR WINDOW filters cannot be COUNTING");
            return true;
        } else {
            reply_syntax_error(c);
            return true;
        }
    }
    ks_ref ref;
    kv_entry *e = ks_open(&ref, c->argv[1], c->argvlen[1], true);
    if (e) {
        if (e->obj->type == &bloom_type || e->obj->type == &counting_type || e->obj->type == &window_type ||
            e->obj->type == &bf_loading_type)
            reply_error(&c->out, "ERR item exists");
        else reply_wrongtype(c);
        ks_close(&ref);
        return true;
    }
    uint64_t bytes = win_bytes_for((uint64_t)capacity, error, (unsigned)slices, NULL);
    uint64_t total = bytes + ks_entry_overhead(ref.klen);
    kv_obj *o = NULL;
    int64_t now = window_now();
    uint64_t maxmem = server_maxmemory();
    if (bytes == 0) {
        reply_error(&c->out, "ERR could not create filter");
    } else if (!ks_mem_try_reserve(total, maxmem)) {
        if (maxmem) reply_oom(c);
        else reply_error(&c->out, "ERR Insufficient memory to create filter");
    } else {
        ks_mem_add(-(int64_t)ks_entry_overhead(ref.klen));
        win_t *w;
        int rc = win_create(&w, (uint64_t)capacity, error, (uint64_t)seconds * 1000,
                            (unsigned)slices, now, NULL);
        if (rc == BLOOMERY_OK && (o = kv_obj_new(&window_type, w)) == NULL) win_free(w);
        if (o == NULL) {
            ks_mem_add(-(int64_t)bytes);
            reply_error(&c->out, rc == BLOOMERY_OK || rc == BLOOMERY_ENOMEM
                                     ? "ERR Insufficient memory to create filter"
                                     : "ERR could not create filter");
        } else {
            atomic_store(&o->value_bytes, bytes);
            if ((e = ks_add(&ref, o)) == NULL) {
                ks_mem_add(-(int64_t)bytes);
                kv_obj_free(o);
                reply_error(&c->out, "ERR Insufficient memory to create filter");
            } else {
                if (ttl > 0) ks_set_expire(&ref, now_ms() + ttl * 1000);
                wal_window ww = {(uint64_t)capacity, error, (uint64_t)seconds * 1000,
                                 (uint32_t)slices, now, e->expire_ms};
                wal_log_win_create(ref.key, ref.klen, &ww);
                reply_ok(&c->out);
            }
        }
    }
    ks_close(&ref);
    return true;
}

/* ---- adds ---- */

kv_entry *window_open_for_add(cmd_ctx *c, ks_ref *ref, kv_entry *e, int64_t *now) {
    *now = window_now();
    if (win_rotation_due(e->obj->v, *now, NULL) == WIN_DUE_NONE) return e;
    const char *key = ref->key;
    size_t klen = ref->klen;
    ks_close(ref);
    e = ks_open(ref, key, klen, true);
    if (e == NULL || e->obj->type != &window_type) {
        /* Deleted or replaced meanwhile. */
        if (e == NULL) reply_error(&c->out, "ERR not found");
        else reply_wrongtype(c);
        return NULL;
    }
    *now = window_now();
    rot_ctx rc = {key, klen};
    win_advance(e->obj->v, *now, log_rotation, &rc);
    return e;
}

void window_add_items(cmd_ctx *c, const char *key, size_t klen, kv_obj *o, int64_t now,
                      const char **items, const size_t *lens, size_t n, bool multi) {
    uint8_t small[256];
    uint8_t *res = n <= 256 ? small : malloc(n);
    if (res == NULL) {
        reply_oom(c);
        return;
    }
    win_check_and_add_many(o->v, (const void *const *)items, lens, n, now, res);
    wal_log_win_add(key, klen, o->v, now, items, lens, n, res);
    if (multi) reply_array(&c->out, (long long)n);
    for (size_t i = 0; i < n; i++) reply_bool(&c->out, res[i]);
    if (res != small) free(res);
}

void window_check_items(cmd_ctx *c, kv_obj *o, const char **items, const size_t *lens, size_t n) {
    int64_t now = window_now();
    uint8_t res[256];
    for (size_t base = 0; base < n; base += 256) {
        size_t g = n - base < 256 ? n - base : 256;
        win_check_many(o->v, (const void *const *)(items + base), lens + base, g, now, res);
        for (size_t i = 0; i < g; i++) reply_bool(&c->out, res[i]);
    }
}

/* ---- BF.INFO, BF.CARD ---- */

/* Answers BF.INFO / BF.CARD when the key holds a window; false otherwise
 * (nothing replied). */
bool window_info(cmd_ctx *c, bool card) {
    ks_ref ref;
    kv_entry *e = ks_open(&ref, c->argv[1], c->argvlen[1], false);
    if (e == NULL || e->obj->type != &window_type) {
        ks_close(&ref);
        return false;
    }
    const win_t *w = e->obj->v;
    int64_t now = window_now();
    reply *r = &c->out;
    if (card) {
        reply_int(r, (long long)win_count(w, now));
        ks_close(&ref);
        return true;
    }
    unsigned s = win_slices(w);
    long long vals[] = {(long long)win_capacity(w), (long long)win_bytes(w), (long long)s + 1,
                        (long long)win_count(w, now), -1};
    static const char *names[] = {"Capacity", "Size", "Number of filters",
                                  "Number of items inserted", "Expansion rate"};
    bool all = c->argc == 3 && arg_eq(c, 2, "all");
    if (c->argc == 3 && !all) {
        static const char *fields[] = {"capacity", "size", "filters", "items", "expansion"};
        int f = -1;
        for (int i = 0; i < 5; i++)
            if (arg_eq(c, 2, fields[i])) f = i;
        if (f < 0) {
            reply_error(r, "Invalid information value");
        } else {
            if (r->proto == 3) {
                reply_map(r, 1);
                reply_simple(r, names[f]);
            } else {
                reply_array(r, 1);
            }
            if (vals[f] < 0) reply_null(r);
            else reply_int(r, vals[f]);
        }
        ks_close(&ref);
        return true;
    }
    reply_map(r, all ? 16 : 5);
    for (int i = 0; i < 5; i++) {
        reply_simple(r, names[i]);
        if (vals[i] < 0) reply_null(r);
        else reply_int(r, vals[i]);
    }
    if (all) {
        long long ttl = -1;
        if (e->expire_ms) {
            long long left = e->expire_ms - now_ms();
            ttl = left > 0 ? (left + 500) / 1000 : 0;
        }
        reply_simple(r, "Layout");
        reply_simple(r, "blocked");
        reply_simple(r, "Bytes");
        reply_int(r, (long long)win_bytes(w));
        reply_simple(r, "Error rate");
        reply_double(r, win_error_rate(w));
        reply_simple(r, "Window");
        reply_int(r, (long long)(win_window_ms(w) / 1000));
        reply_simple(r, "Slices");
        reply_int(r, (long long)s);
        reply_simple(r, "Slice capacity");
        reply_int(r, (long long)win_slice_capacity(w));
        reply_simple(r, "Current slice start");
        reply_int(r, (long long)win_slice_start(w, 0));
        reply_simple(r, "Slice items");
        reply_array(r, (long long)s + 1);
        for (unsigned i = 0; i <= s; i++) reply_int(r, (long long)win_slice_count(w, i));
        reply_simple(r, "Rotations");
        reply_int(r, (long long)win_rotations(w));
        reply_simple(r, "Early rotations");
        reply_int(r, (long long)win_early_rotations(w));
        reply_simple(r, "TTL");
        reply_int(r, ttl);
    }
    ks_close(&ref);
    return true;
}

/* ---- active rotation ---- */

typedef struct due_keys {
    char **keys;
    size_t *lens;
    size_t n, cap;
    int64_t now;
} due_keys;

static void collect_due(void *ctx, const kv_entry *e) {
    due_keys *d = ctx;
    if (e->obj->type != &window_type || win_rotation_due(e->obj->v, d->now, NULL) == WIN_DUE_NONE)
        return;
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 16;
        char **k = realloc(d->keys, cap * sizeof(*k));
        if (k == NULL) return;
        d->keys = k;
        size_t *l = realloc(d->lens, cap * sizeof(*l));
        if (l == NULL) return;
        d->lens = l;
        d->cap = cap;
    }
    char *copy = malloc(e->klen ? e->klen : 1);
    if (copy == NULL) return;
    memcpy(copy, e->key, e->klen);
    d->keys[d->n] = copy;
    d->lens[d->n++] = e->klen;
}

void window_cron(int64_t budget_us) {
    static uint64_t cursor;
    int64_t t0 = mono_us();
    due_keys d = {0};
    do {
        d.now = window_now();
        cursor = ks_scan(cursor, 256, collect_due, &d);
    } while (cursor != 0 && mono_us() - t0 < budget_us);
    for (size_t i = 0; i < d.n; i++) {
        ks_ref ref;
        kv_entry *e = ks_open(&ref, d.keys[i], d.lens[i], true);
        if (e && e->obj->type == &window_type) {
            rot_ctx rc = {d.keys[i], d.lens[i]};
            win_advance(e->obj->v, window_now(), log_rotation, &rc);
        }
        ks_close(&ref);
        free(d.keys[i]);
    }
    free(d.keys);
    free(d.lens);
}

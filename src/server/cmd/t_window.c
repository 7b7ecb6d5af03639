/* Time-windowed Bloom filters behind BF.*: BF.RESERVE key error capacity
 * WINDOW seconds [SLICES s] creates one (libbloomery's win_t, window.h);
 * BF.ADD, BF.MADD, BF.INSERT, BF.EXISTS, BF.MEXISTS, BF.CARD and BF.INFO
 * dispatch here from bf_*.c when the key holds a window.
 *
 * Clock: the host's (wal_window_clock_ms: the wall clock in ms plus
 * debug-clock-offset-ms, for tests; inside Redis, a replica's is its
 * master's), read once per command, so a command's due check and its adds
 * use the same instant.
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

#include "bf.h"
#include "exact.h"
#include "exact_store.h"
#include "persist.h"
#include "cmd.h"
#include "config.h"
#include "log.h"
#include "util.h"

#define WIN_MAX_SECONDS (100LL * 365 * 86400)

/* A window reopened for its rotations. */
static const ck_kind window_kind = {.types = {&window_type}, .not_found = "ERR not found"};

static int64_t window_now(void) { return wal_window_clock_ms(); }

typedef struct rot_ctx {
    const char *key;
    size_t klen;
} rot_ctx;

static void log_rotation(void *ctx, int64_t start, bool early)
{
    rot_ctx *r = ctx;
    wal_log_win_rotate(r->key, r->klen, start, early);
}

/* ---- BF.RESERVE ... WINDOW ---- */

enum {
    W_ERROR,
    W_CAPACITY,
    W_WINDOW,
    W_SLICES,
    W_LAYOUT,
    W_TTL,
    W_EXPANSION,
    W_NONSCALING,
    W_COUNTING,
    W_EXACT,
    W_RETAIN,
    W_N
};

#define WINDOW_TEXT "ERR WINDOW must be a positive number of seconds"
#define SLICES_TEXT "ERR SLICES must be in the range [1, 64]"
#define NO_SCALING "ERR WINDOW filters do not scale: EXPANSION and NONSCALING do not apply"
#define BLOCKED_ONLY "ERR WINDOW filters use the blocked layout"
#define RETAIN_TEXT "ERR RETAIN must be a positive number of seconds"

static const char *const blocked[] = {"blocked", NULL};

/* The rate and capacity as BF.RESERVE's, then WINDOW and SLICES (their
 * first occurrences), then every option in order: LAYOUT BLOCKED and TTL
 * apply, the rest not. */
static const opt_spec window_specs[W_N] = {
    [W_ERROR] = BF_RATE_SPEC,
    [W_CAPACITY] = BF_CAPACITY_SPEC,
    [W_WINDOW] = {.name = "WINDOW",
                  .kind = OPT_INT,
                  .lo = 1,
                  .hi = WIN_MAX_SECONDS,
                  .bad = WINDOW_TEXT,
                  .missing = WINDOW_TEXT,
                  .once = true},
    [W_SLICES] = {.name = "SLICES",
                  .kind = OPT_INT,
                  .lo = 1,
                  .hi = WIN_MAX_SLICES,
                  .bad = SLICES_TEXT,
                  .missing = SLICES_TEXT,
                  .once = true},
    [W_LAYOUT] = {.name = "LAYOUT",
                  .kind = OPT_CHOICE,
                  .choices = blocked,
                  .bad = BLOCKED_ONLY,
                  .missing = BLOCKED_ONLY},
    [W_TTL] = BF_TTL_SPEC(0, BF_TTL_TEXT),
    [W_EXPANSION] = {.name = "EXPANSION", .kind = OPT_REFUSED, .bad = NO_SCALING},
    [W_NONSCALING] = {.name = "NONSCALING", .kind = OPT_REFUSED, .bad = NO_SCALING},
    [W_COUNTING] = {.name = "COUNTING",
                    .kind = OPT_REFUSED,
                    .bad = "ERR WINDOW filters cannot be COUNTING"},
    [W_EXACT] = {.name = "EXACT", .kind = OPT_FLAG, .once = true},
    [W_RETAIN] = {.name = "RETAIN",
                  .kind = OPT_INT,
                  .lo = 1,
                  .hi = WIN_MAX_SECONDS,
                  .bad = RETAIN_TEXT,
                  .missing = RETAIN_TEXT,
                  .once = true},
};
static const opt_table window_first = {OPT_SEARCH, 4,    window_specs, W_SLICES + 1,
                                       NULL,       NULL, false,        NULL};
static const opt_table window_options = {
    OPT_SEQUENCE, 4, window_specs + W_WINDOW, W_N - W_WINDOW, NULL, NULL, false, NULL};

typedef struct win_params {
    uint64_t capacity;
    double error;
    uint64_t window_ms;
    unsigned slices;
    int64_t start_ms;
    bool exact;
    uint64_t retain_ms; /* exact: 0 for the window's span, UINT64_MAX for never */
} win_params;

static int build_window(kv_obj *o, const void *arg)
{
    const win_params *p = arg;
    win_t *w;
    int rc = win_create(&w, p->capacity, p->error, p->window_ms, p->slices, p->start_ms, NULL);
    if (rc != BLOOMERY_OK)
        return rc;
    if (p->exact) {
        uint64_t retain = p->retain_ms == UINT64_MAX ? 0
                          : p->retain_ms             ? p->retain_ms
                                                     : exact_span_ms(w);
        exact_meta *m = exact_meta_new(0, retain);
        if (m == NULL) {
            win_free(w);
            return BLOOMERY_ENOMEM;
        }
        exact_attach(o, m);
    }
    o->v = w;
    return rc;
}

static void log_window(const ks_ref *ref, const kv_entry *e, const void *arg)
{
    const win_params *p = arg;
    wal_window ww = {p->capacity, p->error, p->window_ms, p->slices, p->start_ms, e->expire_ms};
    wal_log_win_create(ref->key, ref->klen, &ww);
    if (e->obj->exact)
        wal_log_exact_create(ref->key, ref->klen, e->obj->exact->id, e->obj->exact->retain_ms);
}

bool window_requested(cmd_ctx *c)
{
    return ck_arg_index(c, 4, "window") >= 0 || ck_arg_index(c, 4, "slices") >= 0 ||
           ck_arg_index(c, 4, "exact") >= 0 || ck_arg_index(c, 4, "retain") >= 0;
}

bool window_reserve(cmd_ctx *c)
{
    bool has_window = ck_arg_index(c, 4, "window") >= 0;
    bool exact = ck_arg_index(c, 4, "exact") >= 0;
    if (!has_window && !exact) {
        reply_error(&c->out, ck_arg_index(c, 4, "slices") >= 0 ? "ERR SLICES needs WINDOW"
                                                               : "ERR RETAIN needs EXACT");
        return false;
    }
    if (exact && !exact_store_ready()) {
        char msg[600];
        snprintf(msg, sizeof(msg), "ERR EXACT is not available: %s", xs_error());
        reply_error(&c->out, msg);
        return false;
    }
    opt_val v[W_N], rest[W_N - W_WINDOW];
    if (!ck_scan(c, "bf.reserve", &window_first, v, NULL) ||
        !ck_scan(c, "bf.reserve", &window_options, rest, NULL))
        return false;
    opt_val *retain = &rest[W_RETAIN - W_WINDOW];
    if (retain->at && !exact) {
        reply_error(&c->out, "ERR RETAIN needs EXACT");
        return false;
    }
    win_params p = {
        .capacity = (uint64_t)v[W_CAPACITY].n,
        .error = v[W_ERROR].d,
        .window_ms = (uint64_t)v[W_WINDOW].n * 1000,
        .slices = v[W_SLICES].at ? (unsigned)v[W_SLICES].n : WIN_DEFAULT_SLICES,
        .start_ms = window_now(),
        .exact = exact,
        .retain_ms = retain->at ? (uint64_t)retain->n * 1000 : 0,
    };
    if (!has_window) {
        /* EXACT alone: a window as long as RETAIN, or one slice that never
         * ends (the store keeps every item; the filter only screens). */
        if (!v[W_SLICES].at && !retain->at)
            p.slices = 1;
        p.window_ms = retain->at ? p.retain_ms : (uint64_t)WIN_MAX_SECONDS * 1000;
        if (!retain->at)
            p.retain_ms = UINT64_MAX;
    } else if (retain->at && p.retain_ms < p.window_ms + p.window_ms / p.slices) {
        reply_error(&c->out, "ERR RETAIN must be at least the window's span (WINDOW + "
                             "WINDOW/SLICES seconds)");
        return false;
    }
    /* A window allocates its slices at once. The parameters are valid: a
     * size of 0 is one beyond 64 bits. */
    uint64_t bytes = win_bytes_for(p.capacity, p.error, p.slices, NULL);
    ck_value wv = {
        .kind = &bfc_any_kind,
        .type = &window_type,
        .bytes = bytes ? bytes : CK_BYTES_TOO_BIG,
        .build = build_window,
        .log = log_window,
        .params = &p,
        .ttl_s = rest[W_TTL - W_WINDOW].at ? rest[W_TTL - W_WINDOW].n : 0,
    };
    return ck_reserve(c, c->argv[1], c->argvlen[1], &bfc_any_kind, &wv);
}

/* ---- adds ---- */

kv_entry *window_open_for_add(cmd_ctx *c, ks_ref *ref, kv_entry *e, int64_t *now)
{
    *now = window_now();
    if (e->obj->exact)
        return e; /* rotates under its own lock (bf_exact.c) */
    if (win_rotation_due(e->obj->v, *now, NULL) == WIN_DUE_NONE)
        return e;
    const char *key = ref->key;
    size_t klen = ref->klen;
    ks_close(ref);
    /* Deleted or replaced meanwhile: not found, or WRONGTYPE. */
    if (!ck_open(c, ref, key, klen, &window_kind, CK_WRITE | CK_MUST_EXIST | CK_CHANGE, &e))
        return NULL;
    *now = window_now();
    rot_ctx rc = {key, klen};
    win_advance(e->obj->v, *now, log_rotation, &rc);
    return e;
}

bool window_add_items(cmd_ctx *c, const char *key, size_t klen, kv_obj *o, int64_t now,
                      const char **items, const size_t *lens, size_t n, bool multi)
{
    if (o->exact)
        return bfc_exact_add(c, key, klen, o, false, 0, items, lens, n, multi);
    uint8_t small[256];
    uint8_t *res = n <= 256 ? small : malloc(n);
    if (res == NULL) {
        reply_oom(c);
        return false;
    }
    win_check_and_add_many(o->v, (const void *const *)items, lens, n, now, res);
    wal_log_win_add(key, klen, o->v, now, items, lens, n, res);
    if (multi)
        reply_array(&c->out, (long long)n);
    for (size_t i = 0; i < n; i++)
        reply_bool(&c->out, res[i]);
    if (res != small)
        free(res);
    return true;
}

void window_check_items(cmd_ctx *c, kv_obj *o, const char **items, const size_t *lens, size_t n)
{
    if (o->exact) {
        bfc_exact_check(c, o, items, lens, n);
        return;
    }
    int64_t now = window_now();
    uint8_t res[256];
    for (size_t base = 0; base < n; base += 256) {
        size_t g = n - base < 256 ? n - base : 256;
        win_check_many(o->v, (const void *const *)(items + base), lens + base, g, now, res);
        for (size_t i = 0; i < g; i++)
            reply_bool(&c->out, res[i]);
    }
}

/* ---- BF.INFO, BF.CARD ---- */

bool window_info(cmd_ctx *c, const kv_entry *e, bool card)
{
    const win_t *w = e->obj->v;
    int64_t now = window_now();
    reply *r = &c->out;
    if (card) {
        reply_int(r, (long long)win_count(w, now));
        return true;
    }
    unsigned s = win_slices(w);
    long long vals[] = {(long long)win_capacity(w), (long long)win_bytes(w), (long long)s + 1,
                        (long long)win_count(w, now), -1};
    bool all = c->argc == 3 && arg_eq(c, 2, "all");
    bool done;
    const exact_meta *m = e->obj->exact;
    if (!bfc_info_common(c, vals, all ? (m ? 21 : 16) : 5, &done))
        return false;
    if (done)
        return true;
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
        for (unsigned i = 0; i <= s; i++)
            reply_int(r, (long long)win_slice_count(w, i));
        reply_simple(r, "Rotations");
        reply_int(r, (long long)win_rotations(w));
        reply_simple(r, "Early rotations");
        reply_int(r, (long long)win_early_rotations(w));
        reply_simple(r, "TTL");
        reply_int(r, ttl);
        if (m) {
            reply_simple(r, "Exact");
            reply_int(r, 1);
            reply_simple(r, "Retain");
            reply_int(r, (long long)(m->retain_ms / 1000));
            reply_simple(r, "Store periods");
            reply_int(r, (long long)xs_periods(m->id, NULL, 0));
            reply_simple(r, "Store lookups");
            reply_int(r, (long long)atomic_load(&m->lookups));
            reply_simple(r, "Store confirmed");
            reply_int(r, (long long)atomic_load(&m->confirmed));
        }
    }
    return true;
}

/* ---- active rotation ---- */

typedef struct due_keys {
    char **keys;
    size_t *lens;
    size_t n, cap;
    int64_t now;
} due_keys;

static void collect_due(void *ctx, const kv_entry *e)
{
    due_keys *d = ctx;
    if (e->obj->type != &window_type)
        return;
    int due = win_rotation_due(e->obj->v, d->now, NULL);
    /* An exact window rotates on time only; its store expires periods. */
    if (due == WIN_DUE_NONE || (e->obj->exact && due == WIN_DUE_FULL))
        return;
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 16;
        char **k = realloc(d->keys, cap * sizeof(*k));
        if (k == NULL)
            return;
        d->keys = k;
        size_t *l = realloc(d->lens, cap * sizeof(*l));
        if (l == NULL)
            return;
        d->lens = l;
        d->cap = cap;
    }
    char *copy = malloc(e->klen ? e->klen : 1);
    if (copy == NULL)
        return;
    memcpy(copy, e->key, e->klen);
    d->keys[d->n] = copy;
    d->lens[d->n++] = e->klen;
}

void window_cron(int64_t budget_us)
{
    static uint64_t cursor;
    int64_t t0 = mono_us();
    due_keys d = {0};
    do {
        d.now = window_now();
        cursor = ks_scan(cursor, 256, collect_due, &d);
    } while (cursor != 0 && mono_us() - t0 < budget_us);
    for (size_t i = 0; i < d.n; i++) {
        /* Room to log its rotations, reserved before the key is locked;
         * without it the window waits for a later round (checks ignore its
         * expired slices meanwhile). */
        size_t held;
        if (wal_reserve(wal_bound(0, 0, d.lens[i]), &held)) {
            ks_ref ref;
            kv_entry *e = ks_open(&ref, d.keys[i], d.lens[i], true);
            if (e && e->obj->type == &window_type && e->obj->exact) {
                bfc_exact_cron(d.keys[i], d.lens[i], e->obj);
            } else if (e && e->obj->type == &window_type) {
                rot_ctx rc = {d.keys[i], d.lens[i]};
                win_advance(e->obj->v, window_now(), log_rotation, &rc);
            }
            ks_close(&ref);
            wal_release(held);
        }
        free(d.keys[i]);
    }
    free(d.keys);
    free(d.lens);
}

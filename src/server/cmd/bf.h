/* The BF.* commands, over libbloomery's scalable (sbf_t), counting (cntbf_t)
 * and windowed (win_t) filters, one concept per file:
 *
 *   bf_create.c  filter parameters and creation: BF.RESERVE, BF.INSERT, and
 *                the creation an add of a missing key does
 *   bf_add.c     BF.ADD, BF.MADD, pipelined BF.ADD batches
 *   bf_check.c   BF.EXISTS, BF.MEXISTS, pipelined BF.EXISTS batches
 *   bf_info.c    BF.INFO, BF.CARD, BF.DEBUG
 *   bf_del.c     BF.DEL (counting filters)
 *   bf_merge.c   BF.MERGE
 *   bf_dump.c    BF.SCANDUMP, BF.LOADCHUNK
 *   bf_config.c  BF.CONFIG key READONLY: a filter's read-only flag (Bloom
 *                and cuckoo), which cmdkit.h's ck_refuse_readonly enforces
 *   t_window.c   windowed filters, behind all of them
 *
 * Replies and errors are RedisBloom's, quirks included (docs/COMMANDS.md):
 * BF.EXISTS answers 0 for a missing or wrong-type key, some errors have no
 * ERR prefix, BF.MADD/BF.INSERT end their array at the first "full" error.
 * This header holds what those files share; its names start with bfc_
 * (BF commands), as the library's blocked filter owns bf_.
 */
#ifndef BLOOMERYD_BF_H
#define BLOOMERYD_BF_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmdkit.h"

/* No cap on a capacity but memory: creation refuses a filter that does not
 * fit (cmdkit.h's ck_create). */
#define BF_MAX_CAPACITY LLONG_MAX
#define BF_MAX_TTL (100LL * 365 * 86400)

/* Bloom and counting filters (a dump still loading answers so). */
/* BF.INFO's five common fields (vals: capacity, size, filters, items,
 * expansion; < 0 answers null), for chains and windows: the one field
 * asked for (*done), else the map header for npairs and the five. False
 * after replying to an unknown field name. */
bool bfc_info_common(cmd_ctx *c, const long long vals[5], long long npairs, bool *done);

extern const ck_kind bfc_kind;
/* The same, and windows. */
extern const ck_kind bfc_any_kind;

/* Open argv[1] as a Bloom or counting filter, which must exist: the entry,
 * or NULL after replying. ref is open either way. */
static inline kv_entry *bfc_open_filter(cmd_ctx *c, ks_ref *ref)
{
    kv_entry *e;
    return ck_open(c, ref, c->argv[1], c->argvlen[1], &bfc_kind, CK_MUST_EXIST, &e) ? e : NULL;
}

/* ---- bf_exact.c: exact windows (o->exact set) ---- */

/* Add items (has_at: at is the items' time, ms), replying in full (an
 * array when multi); false after an error reply. */
bool bfc_exact_add(cmd_ctx *c, const char *key, size_t klen, kv_obj *o, bool has_at, int64_t at,
                   const char **items, const size_t *lens, size_t n, bool multi);
/* n booleans, or errors for the items the store could not confirm. */
void bfc_exact_check(cmd_ctx *c, kv_obj *o, const char **items, const size_t *lens, size_t n);
/* Rotations and expired periods of an idle exact window (window_cron),
 * with the key locked. */
void bfc_exact_cron(const char *key, size_t klen, kv_obj *o);

/* ---- bf_create.c ---- */

typedef struct bfc_params {
    double error;
    long long capacity;
    long long expansion; /* 0: non-scaling */
    bloomery_layout layout;
    bloomery_layout named_layout; /* the default for a named capacity */
    bool layout_named;            /* by the command's LAYOUT */
    bool counting;
    long long ttl_s;       /* 0: none */
    sbf_schedule schedule; /* a scaling blocked chain's error budget */
} bfc_params;

/* This server's defaults (bf-error-rate, bf-initial-size, bf-expansion,
 * bf-layout). A filter an add creates with them keeps RedisBloom's halves
 * (SBF_SCHEDULE_HALVES): its first link is small and it is expected to
 * grow, so the budget is better spent on the links that will hold most
 * items; a capacity given by BF.RESERVE or BF.INSERT gives the first link
 * most of it (SBF_SCHEDULE_FIRST_SHARE). */
void bfc_default_params(bfc_params *p);
/* For a capacity the command names: the first link's share of the budget,
 * and the default layout for it (under bf-default-layout auto, prefix). A filter sized up
 * front holds most of its items in its first link, where the prefix
 * layout takes the fewest bits; one an add creates grows from a small
 * start, which the growing layout does in one table (see docs/COMMANDS.md). */
void bfc_capacity_named(bfc_params *p);
/* ck_create_fn: the filter for the bfc_params *arg, its creation logged
 * with the full parameters. */
kv_entry *bfc_create(cmd_ctx *c, ks_ref *ref, const void *arg);

/* RESERVE's error rate and capacity, RedisBloom's checks and replies (a
 * capacity below 1 answers RedisBloom's range, whose upper bound we do not
 * have). */
#define BF_RATE_SPEC                                                                               \
    {                                                                                              \
        .name = "error", .kind = OPT_RATE, .pos = 2, .bad = "ERR bad error rate",                  \
        .range = "ERR error rate must be in the range (0.000000, 1.000000)"                        \
    }
#define BF_CAPACITY_SPEC                                                                           \
    {                                                                                              \
        .name = "capacity", .kind = OPT_INT, .pos = 3, .lo = 1, .hi = BF_MAX_CAPACITY,             \
        .bad = "ERR bad capacity", .range = "ERR capacity must be in the range [1, 1073741824]"    \
    }
/* Our TTL option (seconds); missing_: the reply when no value follows. */
#define BF_TTL_TEXT "ERR TTL must be a positive number of seconds"
#define BF_TTL_SPEC(letters_, missing_)                                                            \
    {                                                                                              \
        .name = "TTL", .kind = OPT_INT, .lo = 1, .hi = BF_MAX_TTL, .bad = BF_TTL_TEXT,             \
        .missing = (missing_), .letters = (letters_)                                               \
    }

/* ---- bf_add.c ---- */

/* Open argv[1] for adding, created with p when missing and create is set.
 * Returns the entry with ref locked, or NULL after replying. *now: for a
 * window, the clock its due rotations were checked at, which the add that
 * follows uses. */
kv_entry *bfc_open_for_add(cmd_ctx *c, ks_ref *ref, const bfc_params *p, bool create, int64_t *now);
/* Add items[0..n) to o and reply: an integer/boolean for a single add
 * (multi false) or an array that ends at the first error. False after an
 * error. */
bool bfc_add_items(cmd_ctx *c, const char *key, size_t klen, kv_obj *o, int64_t now,
                   const char **items, const size_t *lens, size_t n, bool multi);

/* ---- t_window.c: windowed filters behind BF.* ---- */

/* Whether BF.RESERVE asks for a window (WINDOW or SLICES). */
bool window_requested(cmd_ctx *c);
/* BF.RESERVE ... WINDOW seconds [SLICES s]: true when created. */
bool window_reserve(cmd_ctx *c);
/* With ref shared-locked on window entry e: perform due rotations (under an
 * exclusive lock taken meanwhile) and return the entry to add to, *now the
 * clock to add at; NULL after replying. ref stays locked either way. */
kv_entry *window_open_for_add(cmd_ctx *c, ks_ref *ref, kv_entry *e, int64_t *now);
/* False after an error. */
bool window_add_items(cmd_ctx *c, const char *key, size_t klen, kv_obj *o, int64_t now,
                      const char **items, const size_t *lens, size_t n, bool multi);
/* n booleans, no array header. */
void window_check_items(cmd_ctx *c, kv_obj *o, const char **items, const size_t *lens, size_t n);
/* BF.INFO (card false) or BF.CARD for the window in e (its key open);
 * false after an error. */
bool window_info(cmd_ctx *c, const kv_entry *e, bool card);

#endif

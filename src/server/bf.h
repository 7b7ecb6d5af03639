/* What the BF.* handlers share among their files: the kinds of key they
 * expect, the filter parameters and their creation, the options common to
 * RESERVE and the windowed RESERVE, and the windows' entry points. */
#ifndef BLOOMERYD_BF_H
#define BLOOMERYD_BF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmdkit.h"

#define BF_MAX_CAPACITY (1LL << 30)
#define BF_MAX_TTL (100LL * 365 * 86400)

/* Bloom and counting filters (a dump still loading answers so). */
extern const ck_kind bf_kind;
/* The same, and windows. */
extern const ck_kind bf_any_kind;

/* RESERVE's error rate and capacity, RedisBloom's checks and replies. */
#define BF_RATE_SPEC                                                                    \
    {.name = "error", .kind = OPT_RATE, .pos = 2, .bad = "ERR bad error rate",          \
     .range = "ERR error rate must be in the range (0.000000, 1.000000)"}
#define BF_CAPACITY_SPEC                                                                \
    {.name = "capacity", .kind = OPT_INT, .pos = 3, .lo = 1, .hi = BF_MAX_CAPACITY,     \
     .bad = "ERR bad capacity", .range = "ERR capacity must be in the range [1, 1073741824]"}
/* Our TTL option (seconds); missing_: the reply when no value follows. */
#define BF_TTL_TEXT "ERR TTL must be a positive number of seconds"
#define BF_TTL_SPEC(letters_, missing_)                                                 \
    {.name = "TTL", .kind = OPT_INT, .lo = 1, .hi = BF_MAX_TTL, .bad = BF_TTL_TEXT,     \
     .missing = (missing_), .letters = (letters_)}

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

/* Time-windowed dedup filter: "have I seen this within the last T?".
 *
 * A ring of S+1 blocked Bloom filters (slices), each covering T/S of time and
 * sized for capacity/S items at error p/(S+1), so the ring's FPR at capacity
 * stays at or below p. Adds go to the current slice; checks look at every
 * live slice in one prefetched pass. Rotation clears the oldest slice and
 * makes it current.
 *
 * Guarantee: an item added within the last T is always found; an item last
 * added more than T + T/S ago is forgotten; in between it may still be found
 * (slack). This holds while slices stay within their capacity: a slice that
 * fills early is rotated early (counted in win_early_rotations), which keeps
 * the FPR but shortens how long its items are remembered.
 *
 * Time is always passed in by the caller (milliseconds on any clock), so the
 * behaviour is deterministic and testable. Rotations happen only through
 * win_rotate / win_advance, never inside an add, so a server can log each
 * rotation and a replay of the log rebuilds the same state.
 *
 * Concurrency: adds and checks from any threads; win_check_and_add is
 * linearizable per item. Rotation takes the window's write lock.
 */
#ifndef BLOOMERY_WINDOW_H
#define BLOOMERY_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomery/blocked.h"
#include "bloomery/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WIN_DEFAULT_SLICES 4
#define WIN_MAX_SLICES 64

typedef struct win win_t;

/* capacity: the most items expected within one window; window_ms > 0;
 * slices in 1..WIN_MAX_SLICES (0: the default 4). The first slice starts at
 * now_ms. opts may be NULL (memory policy for blocks per key, seed 0). */
BLOOMERY_API int win_create(win_t **out, uint64_t capacity, double error_rate, uint64_t window_ms,
                            unsigned slices, int64_t now_ms, const bf_options *opts);
BLOOMERY_API void win_free(win_t *w);
BLOOMERY_API uint64_t win_bytes_for(uint64_t capacity, double error_rate, unsigned slices,
                                    const bf_options *opts);

/* 1: the item was not seen within the window and is now added to the current
 * slice; 0: seen (nothing changes). Slices older than the window at now_ms
 * are ignored even if their rotation is overdue. */
BLOOMERY_API int win_check_and_add(win_t *w, const void *item, size_t len, int64_t now_ms);
BLOOMERY_API bool win_check(const win_t *w, const void *item, size_t len, int64_t now_ms);
BLOOMERY_API int win_check_and_add_hashed(win_t *w, bloomery_hash h, int64_t now_ms);
BLOOMERY_API bool win_check_hashed(const win_t *w, bloomery_hash h, int64_t now_ms);
BLOOMERY_API void win_check_and_add_many(win_t *w, const void *const *items, const size_t *lens,
                                         size_t n, int64_t now_ms, uint8_t *out);
BLOOMERY_API void win_check_many(const win_t *w, const void *const *items, const size_t *lens,
                                 size_t n, int64_t now_ms, uint8_t *out);
/* win_check_hashed for n hashes, their blocks prefetched a group at a
 * time (for writing in the current slice when for_add: the caller adds
 * some of them next), so the misses of a big filter overlap. */
BLOOMERY_API void win_check_many_hashed(const win_t *w, const bloomery_hash *h, size_t n,
                                        int64_t now_ms, bool for_add, uint8_t *out);
/* The replay of an add that reported the item new: set its bits in the
 * current slice and count it there, whatever the slices hold already (a
 * snapshot whose slices were read while writers ran may have its bits). */
BLOOMERY_API void win_add_hashed(win_t *w, bloomery_hash h);

/* Rotation. win_rotation_due: WIN_DUE_NONE, WIN_DUE_TIME (the current slice's
 * time is up) or WIN_DUE_FULL (it reached its capacity); *start receives the
 * start the next slice should get (aligned to the slice period for time,
 * now_ms for full). win_rotate performs one rotation. win_advance performs
 * every due rotation (at most S+1 clear the ring; a long gap skips ahead)
 * and returns how many, reporting each start through cb when not NULL. */
enum { WIN_DUE_NONE = 0, WIN_DUE_TIME = 1, WIN_DUE_FULL = 2 };
BLOOMERY_API int win_rotation_due(const win_t *w, int64_t now_ms, int64_t *start);
BLOOMERY_API void win_rotate(win_t *w, int64_t start_ms, bool early);
BLOOMERY_API unsigned win_advance(win_t *w, int64_t now_ms,
                                  void (*cb)(void *ctx, int64_t start, bool early), void *ctx);

/* Shape and state. Slice 0 is the current one, then older ones. */
BLOOMERY_API uint64_t win_capacity(const win_t *w);
BLOOMERY_API double win_error_rate(const win_t *w);
BLOOMERY_API uint64_t win_window_ms(const win_t *w);
BLOOMERY_API unsigned win_slices(const win_t *w); /* S; the ring holds S+1 */
BLOOMERY_API uint64_t win_slice_capacity(const win_t *w);
BLOOMERY_API uint64_t win_bytes(const win_t *w);
BLOOMERY_API uint64_t win_seed(const win_t *w);
BLOOMERY_API uint64_t win_early_rotations(const win_t *w);
BLOOMERY_API uint64_t win_rotations(const win_t *w);
BLOOMERY_API int64_t win_slice_start(const win_t *w, unsigned i);
BLOOMERY_API uint64_t win_slice_count(const win_t *w, unsigned i);
/* Items in slices still inside the window at now_ms. */
BLOOMERY_API uint64_t win_count(const win_t *w, int64_t now_ms);
/* Slice i's filter, for serialization (i as above). */
BLOOMERY_API bf_t *win_slice(const win_t *w, unsigned i);

/* Rebuild from parts (a loader): slices[0] current, then older; starts as
 * above. Takes ownership of the filters on success. */
BLOOMERY_API int win_assemble(win_t **out, uint64_t capacity, double error_rate, uint64_t window_ms,
                              unsigned slices, bf_t **filters, const int64_t *starts,
                              uint64_t rotations, uint64_t early_rotations);

#ifdef __cplusplus
}
#endif

#endif

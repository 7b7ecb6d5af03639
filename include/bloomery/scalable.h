/* Scalable Bloom filter: a chain of links with RedisBloom's semantics.
 *
 * A scaling chain's links have error rates summing to less than p, so the
 * compound FPR stays below p however far it grows; each new link has the
 * previous link's capacity times `expansion`. Classic chains follow
 * RedisBloom exactly: p/2, p/4, p/8, ..., and prefix chains take the same
 * rates (a prefix link needs fewer bits than a classic one at every rate
 * from 1e-2 down). Blocked chains give the first link
 * p_0 in [p/2, 0.9 p], the most that keeps its memory within RedisBloom's
 * first link where the layout allows, then (p - p_0)/2 and halve from there
 * (the blocked chains of earlier versions have p_0 = p/2 and keep growing
 * exactly as before). A link is added when the newest link's
 * count reaches its capacity. expansion == 0 makes the chain non-scaling: one
 * link at p, and adding a new item to a full chain fails with BLOOMERY_EFULL
 * (items already present still answer 0).
 *
 * Add checks every link newest-first and inserts into the newest only if no
 * link has the item. Links are blocked filters (bf_t), classic RedisBloom
 * filters (cbf_t) or prefix filters (pf_t); a classic chain is
 * bit-identical to RedisBloom's. A growing chain is one growing filter
 * (gf_t), which grows within itself and keeps the whole budget p.
 *
 * Concurrency: any mix of calls from any threads. Adds of one item are
 * linearizable (striped lock on the item hash); growth takes the chain's
 * mutex while lookups go on against the published links.
 */
#ifndef BLOOMERY_SCALABLE_H
#define BLOOMERY_SCALABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomery/blocked.h"
#include "bloomery/classic.h"
#include "bloomery/export.h"
#include "bloomery/growing.h"
#include "bloomery/prefix.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bloomery_layout {
    BLOOMERY_LAYOUT_BLOCKED = 0,
    BLOOMERY_LAYOUT_CLASSIC = 1,
    BLOOMERY_LAYOUT_PREFIX = 2, /* prefix filters (prefix.h): fewer bits */
    /* One growing filter (growing.h) instead of links: it doubles, so a
     * lookup reads one line however far it grows. Expansion rounds up to
     * a power of two; no BF.MERGE. */
    BLOOMERY_LAYOUT_GROWING = 3,
} bloomery_layout;

#define SBF_DEFAULT_EXPANSION 2
#define SBF_MAX_EXPANSION 32768

typedef struct sbf sbf_t;

/* How a scaling blocked chain shares its error budget among links (classic
 * chains always take RedisBloom's halves). */
typedef enum sbf_schedule {
    SBF_SCHEDULE_FIRST_SHARE = 0, /* first link p_0 in [p/2, 0.9 p], then halves of the rest */
    SBF_SCHEDULE_HALVES = 1,      /* p/2, p/4, ...: blocked chains of earlier versions */
} sbf_schedule;

typedef struct sbf_options {
    bloomery_layout layout;
    uint32_t expansion;     /* 0: non-scaling */
    uint64_t seed;          /* blocked links' hash seed */
    bloomery_policy policy; /* blocked links' blocks-per-key policy */
    /* Called before a link is allocated with its size in bytes; returning
     * false refuses the growth (the add fails with BLOOMERY_EREFUSED and nothing
     * changes). May be NULL. */
    bool (*may_allocate)(void *ctx, uint64_t bytes);
    void *may_allocate_ctx;
    /* Blocked chains: the first link's share of the budget. A chain made
     * by an earlier version and recreated from a record of its creation
     * (a log replayed) needs SBF_SCHEDULE_HALVES to get its old shape;
     * chains loaded whole keep theirs, since later links follow from the
     * first link's stored error. */
    sbf_schedule schedule;
} sbf_options;

/* opts may be NULL: blocked layout, expansion 2, seed 0. */
BLOOMERY_API int sbf_create(sbf_t **out, uint64_t capacity, double error_rate,
                            const sbf_options *opts);
BLOOMERY_API void sbf_free(sbf_t *s);

/* Bytes of the first link for these parameters (0 if invalid). */
BLOOMERY_API uint64_t sbf_bytes_for(uint64_t capacity, double error_rate, const sbf_options *opts);

/* 1: added (new), 0: may already exist, < 0: BLOOMERY_EFULL, BLOOMERY_ENOMEM or
 * BLOOMERY_EREFUSED. */
BLOOMERY_API int sbf_add(sbf_t *s, const void *item, size_t len);
/* 1: may exist, 0: certainly absent. */
BLOOMERY_API int sbf_check(const sbf_t *s, const void *item, size_t len);

/* An item's hash as the chain uses it (XXH3-128 with the chain's seed for
 * blocked links, RedisBloom's MurmurHash pair for classic ones). Computing it
 * once lets a caller both log the hash and apply it; replaying a logged add
 * is sbf_add_hashed. */
typedef struct sbf_hash {
    uint64_t h1, h2;
} sbf_hash;
BLOOMERY_API sbf_hash sbf_hash_item(const sbf_t *s, const void *item, size_t len);
BLOOMERY_API int sbf_add_hashed(sbf_t *s, sbf_hash h);
BLOOMERY_API int sbf_check_hashed(const sbf_t *s, sbf_hash h);

/* Batches. results[i] as the single calls. sbf_add_many stops at the first
 * error, stores it in results[i] and returns the number of results written
 * (i + 1); otherwise returns n. */
BLOOMERY_API size_t sbf_add_many(sbf_t *s, const void *const *items, const size_t *lens, size_t n,
                                 int *results);
BLOOMERY_API void sbf_check_many(const sbf_t *s, const void *const *items, const size_t *lens,
                                 size_t n, int *results);

BLOOMERY_API bloomery_layout sbf_layout(const sbf_t *s);
BLOOMERY_API uint32_t sbf_expansion(const sbf_t *s); /* 0 for non-scaling */
BLOOMERY_API double sbf_error_rate(const sbf_t *s);  /* as requested */
BLOOMERY_API uint64_t sbf_initial_capacity(const sbf_t *s);
BLOOMERY_API uint64_t sbf_capacity(const sbf_t *s); /* sum over links */
BLOOMERY_API uint64_t sbf_count(const sbf_t *s);    /* sum over links */
BLOOMERY_API uint64_t sbf_bytes(const sbf_t *s);    /* sum of link bit arrays */
BLOOMERY_API uint64_t sbf_seed(const sbf_t *s);
BLOOMERY_API size_t sbf_nlinks(const sbf_t *s);
BLOOMERY_API double sbf_fpr_estimate(const sbf_t *s); /* 1 - prod(1 - link estimate) */

/* Link i (0 = oldest): exactly one of the four is non-NULL. A growing
 * chain has one link. */
BLOOMERY_API bf_t *sbf_link_blocked(const sbf_t *s, size_t i);
BLOOMERY_API cbf_t *sbf_link_classic(const sbf_t *s, size_t i);
BLOOMERY_API pf_t *sbf_link_prefix(const sbf_t *s, size_t i);
BLOOMERY_API gf_t *sbf_link_growing(const sbf_t *s, size_t i);

/* Build a chain from links made elsewhere (a loader). Takes ownership of the
 * links on success. */
BLOOMERY_API int sbf_assemble(sbf_t **out, bloomery_layout layout, uint64_t capacity,
                              double error_rate, uint32_t expansion, uint64_t seed, void **links,
                              size_t nlinks);

/* Install or replace the growth veto (see sbf_options.may_allocate), for
 * chains built by sbf_assemble. Not synchronized with concurrent growth:
 * call before the chain is shared. */
BLOOMERY_API void sbf_set_may_allocate(sbf_t *s, bool (*may_allocate)(void *ctx, uint64_t bytes),
                                       void *ctx);
/* Called with the bytes a growth gives back (a growing chain's old table;
 * other chains only add links). Set before the chain is shared. */
BLOOMERY_API void sbf_set_released(sbf_t *s, void (*released)(void *ctx, uint64_t bytes),
                                   void *ctx);

/* A write barrier for copy-on-write snapshots of prefix chains: link i's
 * bins report as region 2i (its image's; pf_set_write_hook). Links grown
 * after it was set report nothing. A growing chain's tables report as
 * regions 0 and 1 (gf_set_write_hook). Blocked and classic links only set bits
 * (a copy taken while they change is a valid state) and report nothing. Set
 * or remove (NULL) it only while no other call on the chain runs. */
BLOOMERY_API void sbf_set_write_hook(sbf_t *s, pf_write_hook hook, void *ctx);

/* src's items into dst, link by link (OR, or pf_merge for prefix links):
 * same layout, expansion, link count and link shapes, else
 * BLOOMERY_EINVAL with dst unchanged. Growing chains: BLOOMERY_EINVAL. */
BLOOMERY_API int sbf_merge(sbf_t *dst, const sbf_t *src);

#ifdef __cplusplus
}
#endif

#endif

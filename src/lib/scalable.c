/* Scalable Bloom filter: a growing chain of links (contract in scalable.h).
 *
 * RedisBloom's semantics are kept exactly so classic chains are
 * bit-identical to its filters: first link at p/2 when scaling, each next
 * link at half the previous error and `expansion` times its capacity, a new
 * link when the newest one's count reaches its capacity, adds go to the
 * newest link only when no link has the item.
 *
 * Prefix chains take RedisBloom's rates too (their links need fewer bits at
 * each). Blocked chains give the first link most of the budget (blocked_first_error)
 * and then follow one rule: link 1 takes half of what the first link left,
 * p_1 = (p - p_0) / 2, and every later link half of its predecessor's error,
 * so sum p_i < p however many links grow. The rule needs nothing but the
 * stored errors of the chain and its first link: a chain whose first link
 * has p/2 (every blocked chain made before this schedule) gets p/4, p/8, ...,
 * exactly the links it always got, since p - p/2 and the halvings are exact
 * in binary floating point.
 *
 * Publication: the link array only grows. A grower (under `grow`) copies the
 * array into a larger one when needed, publishes it, stores the new link and
 * then publishes the new count with release order. A reader that acquires the
 * count sees every link up to it, in whichever array it then loads; replaced
 * arrays are retired, not freed, until the chain is freed, since readers may
 * still be walking them.
 *
 * Adds to a blocked chain lock the item's blocks in the newest link
 * (blocked_lock.h), and the links share their stripes. A grower publishes a
 * link only while holding every stripe of them, so an adder that has its
 * stripes and still sees n links keeps seeing n until it lets go: two adds
 * of one item either take the same stripes in the same newest link, or one
 * of them runs wholly before the new link appeared and the other sees its
 * bits. Prefix chains check the older links first, then add under the
 * item's bin lock in the newest link if the link count is still the one
 * they checked (prefix_lock.h). Classic chains keep an item lock (stripe.h)
 * around the add.
 */
#include "bloomery/scalable.h"
#include "bloomery/bloomery.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "blocked_chain.h"
#include "blocked_lock.h"
#include "prefix_lock.h"
#include "stripe.h"
#include "test_point.h"

#define BATCH 16

typedef struct retired {
    struct retired *next;
    void **links;
} retired;

struct sbf {
    bloomery_layout layout;
    uint32_t expansion;
    double error_rate;
    uint64_t capacity0;
    uint64_t seed;
    bloomery_policy policy;
    bool (*may_allocate)(void *ctx, uint64_t bytes);
    void *may_allocate_ctx;

    pthread_mutex_t grow;
    void **links;     /* atomic pointer; bf_t* or cbf_t* per layout */
    size_t nlinks;    /* atomic */
    size_t cap_links; /* under grow */
    retired *retired; /* under grow */
};

/* One hash per item serves every link: blocked links share the chain seed,
 * classic links reuse RedisBloom's (a, b) pair as RedisBloom does. */
typedef union item_hash {
    bloomery_hash blocked;
    cbf_hash classic;
} item_hash;

static inline item_hash hash_of(const sbf_t *s, const void *item, size_t len)
{
    item_hash h;
    if (s->layout == BLOOMERY_LAYOUT_CLASSIC)
        h.classic = cbf_hash_item(item, len);
    else
        h.blocked = bloomery_hash_item(item, len, s->seed);
    return h;
}

static inline uint64_t stripe_key(const sbf_t *s, item_hash h)
{
    return h.classic.a ^ (uint64_t)(uintptr_t)s;
}

static inline size_t load_nlinks(const sbf_t *s)
{
    return __atomic_load_n(&s->nlinks, __ATOMIC_ACQUIRE);
}

static inline void **load_links(const sbf_t *s)
{
    return __atomic_load_n(&s->links, __ATOMIC_ACQUIRE);
}

/* ---- link helpers, by layout ---- */

/* The same call on a link of any layout: cbf_fn, pf_fn or bf_fn. */
#define LINK_CALL(layout, fn, l)                                                                   \
    ((layout) == BLOOMERY_LAYOUT_CLASSIC   ? cbf_##fn(l)                                           \
     : (layout) == BLOOMERY_LAYOUT_PREFIX  ? pf_##fn(l)                                            \
     : (layout) == BLOOMERY_LAYOUT_GROWING ? gf_##fn(l)                                            \
                                           : bf_##fn(l))

static uint64_t link_capacity(const sbf_t *s, const void *l)
{
    return LINK_CALL(s->layout, capacity, l);
}
static double link_error(const sbf_t *s, const void *l)
{
    return LINK_CALL(s->layout, error_rate, l);
}
static uint64_t link_count(const sbf_t *s, const void *l) { return LINK_CALL(s->layout, count, l); }
static uint64_t link_bytes(const sbf_t *s, const void *l) { return LINK_CALL(s->layout, bytes, l); }
static double link_fpr_estimate(const sbf_t *s, const void *l)
{
    return LINK_CALL(s->layout, fpr_estimate, l);
}
static void link_free(bloomery_layout layout, void *l) { LINK_CALL(layout, free, l); }

static bool link_check(const sbf_t *s, const void *l, item_hash h)
{
    switch (s->layout) {
    case BLOOMERY_LAYOUT_CLASSIC: return cbf_check_hashed(l, h.classic);
    case BLOOMERY_LAYOUT_PREFIX: return pf_check_hashed(l, h.blocked);
    case BLOOMERY_LAYOUT_GROWING: return gf_check_hashed(l, h.blocked);
    default: return bf_check_hashed(l, h.blocked);
    }
}

static uint64_t link_bytes_for(const sbf_t *s, uint64_t capacity, double error)
{
    if (s->layout == BLOOMERY_LAYOUT_CLASSIC)
        return cbf_bytes_for(capacity, error);
    if (s->layout == BLOOMERY_LAYOUT_PREFIX)
        return pf_bytes_for(capacity, error);
    if (s->layout == BLOOMERY_LAYOUT_GROWING)
        return gf_bytes_for(capacity, error);
    bf_options o = {.seed = s->seed, .policy = s->policy};
    return bf_bytes_for(capacity, error, &o);
}

static int link_create(const sbf_t *s, uint64_t capacity, double error, void **out)
{
    if (s->layout == BLOOMERY_LAYOUT_CLASSIC)
        return cbf_create((cbf_t **)out, capacity, error);
    if (s->layout == BLOOMERY_LAYOUT_PREFIX)
        return pf_create((pf_t **)out, capacity, error, s->seed);
    if (s->layout == BLOOMERY_LAYOUT_GROWING) {
        int rc =
            gf_create((gf_t **)out, capacity, error, gf_round_expansion(s->expansion), s->seed);
        if (rc == BLOOMERY_OK)
            gf_set_may_allocate(*out, s->may_allocate, s->may_allocate_ctx);
        return rc;
    }
    bf_options o = {.seed = s->seed, .policy = s->policy};
    return bf_create((bf_t **)out, capacity, error, &o);
}

/* ---- growth ---- */

/* Appends a link; caller holds s->grow, or the chain is not yet shared. */
static int append_link(sbf_t *s, void *link)
{
    size_t n = s->nlinks;
    bool blocked = s->layout == BLOOMERY_LAYOUT_BLOCKED;
    if (blocked && n)
        bf_share_stripes(link, s->links[0]);
    if (n == s->cap_links) {
        size_t cap = s->cap_links ? s->cap_links * 2 : 4;
        void **arr = calloc(cap, sizeof *arr);
        retired *r = malloc(sizeof *r);
        if (!arr || !r) {
            free(arr);
            free(r);
            return BLOOMERY_ENOMEM;
        }
        if (n)
            memcpy(arr, s->links, n * sizeof *arr);
        if (s->links) {
            r->links = s->links;
            r->next = s->retired;
            s->retired = r;
        } else {
            free(r);
        }
        __atomic_store_n(&s->links, arr, __ATOMIC_RELEASE);
        s->cap_links = cap;
    }
    s->links[n] = link;
    if (blocked && n)
        bf_lock_span(link);
    /* Sequentially consistent for prefix chains' adds (prefix_lock.h). */
    __atomic_store_n(&s->nlinks, n + 1, __ATOMIC_SEQ_CST);
    if (blocked && n)
        bf_unlock_span(link);
    return BLOOMERY_OK;
}

static int new_link(sbf_t *s, uint64_t capacity, double error)
{
    uint64_t bytes = link_bytes_for(s, capacity, error);
    if (bytes == 0)
        return BLOOMERY_ETOOBIG;
    if (s->may_allocate && !s->may_allocate(s->may_allocate_ctx, bytes))
        return BLOOMERY_EREFUSED;
    void *link;
    int rc = link_create(s, capacity, error, &link);
    if (rc != BLOOMERY_OK)
        return rc;
    rc = append_link(s, link);
    if (rc != BLOOMERY_OK)
        link_free(s->layout, link);
    return rc;
}

/* The error of the link after `last`, the newest of n links (header). */
static double next_error(const sbf_t *s, size_t n, const void *last)
{
    double e = link_error(s, last);
    if (s->layout == BLOOMERY_LAYOUT_BLOCKED && n == 1 && s->error_rate > e)
        return (s->error_rate - e) * 0.5;
    return e * 0.5;
}

/* Makes room for one more item in the newest link. Growth is serialized by
 * s->grow; a blocked chain's adder calls this holding no stripe, since
 * publishing a link takes them all. */
static int ensure_room(sbf_t *s)
{
    size_t n = load_nlinks(s);
    void *last = load_links(s)[n - 1];
    if (link_count(s, last) < link_capacity(s, last))
        return BLOOMERY_OK;
    if (s->expansion == 0)
        return BLOOMERY_EFULL;
    pthread_mutex_lock(&s->grow);
    int rc = BLOOMERY_OK;
    n = s->nlinks;
    last = s->links[n - 1];
    if (link_count(s, last) >= link_capacity(s, last)) {
        uint64_t cap = link_capacity(s, last);
        if (cap > UINT64_MAX / s->expansion)
            rc = BLOOMERY_ETOOBIG;
        else
            rc = new_link(s, cap * s->expansion, next_error(s, n, last));
    }
    pthread_mutex_unlock(&s->grow);
    return rc;
}

/* ---- lifecycle ---- */

static int validate(uint64_t capacity, double error_rate, const sbf_options *o)
{
    if (capacity == 0 || !(error_rate > 0 && error_rate < 1))
        return BLOOMERY_EINVAL;
    if (o && (o->expansion > SBF_MAX_EXPANSION ||
              (o->layout != BLOOMERY_LAYOUT_BLOCKED && o->layout != BLOOMERY_LAYOUT_CLASSIC &&
               o->layout != BLOOMERY_LAYOUT_PREFIX && o->layout != BLOOMERY_LAYOUT_GROWING) ||
              (o->schedule != SBF_SCHEDULE_FIRST_SHARE && o->schedule != SBF_SCHEDULE_HALVES)))
        return BLOOMERY_EINVAL;
    return BLOOMERY_OK;
}

static sbf_t *chain_new(bloomery_layout layout, uint64_t capacity, double error_rate,
                        uint32_t expansion, uint64_t seed)
{
    sbf_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->layout = layout;
    s->expansion = expansion;
    s->error_rate = error_rate;
    s->capacity0 = capacity;
    s->seed = seed;
    pthread_mutex_init(&s->grow, NULL);
    return s;
}

/* The first link of a scaling blocked chain: the smallest error p_0 in
 * [p/2, 0.9 p] whose bits per key stay within 99% of what RedisBloom's first
 * link (classic, at p/2) takes, so a reserve never needs more memory than
 * RedisBloom's where the layout allows it, and the rest of the budget, p -
 * p_0, is as large as it can be for the links that growth adds. Where even
 * 0.9 p needs more bits (near p = 1e-3 and below 2e-5, where one block per
 * key, or two, costs more than a classic filter), p_0 = 0.9 p. One model
 * evaluation and at most two bisections. */
#define FIRST_SHARE_MAX 0.9
#define RESERVE_SLACK 0.99

static double blocked_first_error(double p, bloomery_policy policy)
{
    double lo = p * 0.5, hi = p * FIRST_SHARE_MAX;
    double target = RESERVE_SLACK * bloomery_classic_bpe(lo);
    double e = hi;
    unsigned b = bloomery_blocks_per_key(hi, policy);
    for (int pass = 0; pass < 2; pass++) {
        e = bloomery_model_fpr_split(target, b, 64) / BLOOMERY_SIZING_MARGIN;
        e = e < lo ? lo : e > hi ? hi : e;
        unsigned eb = bloomery_blocks_per_key(e, policy);
        if (eb == b)
            break;
        b = eb;
    }
    /* A policy boundary between the passes can leave e needing more bits;
     * the slack absorbs the bisection's tolerance. */
    double bits = bloomery_bits_per_key_split(e * BLOOMERY_SIZING_MARGIN, b, 64);
    if (b != bloomery_blocks_per_key(e, policy) || !(bits <= bloomery_classic_bpe(lo)))
        e = hi;
    return e;
}

static double first_error(const sbf_options *o, double p)
{
    if (!o->expansion || o->layout == BLOOMERY_LAYOUT_GROWING) /* it keeps its own budget */
        return p;
    if (o->layout != BLOOMERY_LAYOUT_BLOCKED || o->schedule == SBF_SCHEDULE_HALVES)
        return p * 0.5;
    return blocked_first_error(p, o->policy);
}

uint64_t sbf_bytes_for(uint64_t capacity, double error_rate, const sbf_options *opts)
{
    if (validate(capacity, error_rate, opts) != BLOOMERY_OK)
        return 0;
    sbf_options d = {.layout = BLOOMERY_LAYOUT_BLOCKED, .expansion = SBF_DEFAULT_EXPANSION};
    const sbf_options *o = opts ? opts : &d;
    sbf_t tmp = {.layout = o->layout, .seed = o->seed, .policy = o->policy};
    return link_bytes_for(&tmp, capacity, first_error(o, error_rate));
}

int sbf_create(sbf_t **out, uint64_t capacity, double error_rate, const sbf_options *opts)
{
    *out = NULL;
    int rc = validate(capacity, error_rate, opts);
    if (rc != BLOOMERY_OK)
        return rc;
    sbf_options d = {.layout = BLOOMERY_LAYOUT_BLOCKED, .expansion = SBF_DEFAULT_EXPANSION};
    const sbf_options *o = opts ? opts : &d;
    sbf_t *s = chain_new(o->layout, capacity, error_rate, o->expansion, o->seed);
    if (!s)
        return BLOOMERY_ENOMEM;
    s->policy = o->policy;
    s->may_allocate = o->may_allocate;
    s->may_allocate_ctx = o->may_allocate_ctx;
    rc = new_link(s, capacity, first_error(o, error_rate));
    if (rc != BLOOMERY_OK) {
        sbf_free(s);
        return rc;
    }
    *out = s;
    return BLOOMERY_OK;
}

int sbf_assemble(sbf_t **out, bloomery_layout layout, uint64_t capacity, double error_rate,
                 uint32_t expansion, uint64_t seed, void **links, size_t nlinks)
{
    *out = NULL;
    sbf_options o = {.layout = layout, .expansion = expansion, .seed = seed};
    if (nlinks == 0 || validate(capacity, error_rate, &o) != BLOOMERY_OK ||
        (layout == BLOOMERY_LAYOUT_GROWING && nlinks != 1))
        return BLOOMERY_EINVAL;
    sbf_t *s = chain_new(layout, capacity, error_rate, expansion, seed);
    if (!s)
        return BLOOMERY_ENOMEM;
    for (size_t i = 0; i < nlinks; i++) {
        if (append_link(s, links[i]) != BLOOMERY_OK) {
            /* Ownership passes only on success: drop what was appended. */
            s->nlinks = 0;
            sbf_free(s);
            return BLOOMERY_ENOMEM;
        }
    }
    *out = s;
    return BLOOMERY_OK;
}

void sbf_free(sbf_t *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nlinks; i++)
        link_free(s->layout, s->links[i]);
    free(s->links);
    while (s->retired) {
        retired *r = s->retired;
        s->retired = r->next;
        free(r->links);
        free(r);
    }
    pthread_mutex_destroy(&s->grow);
    free(s);
}

/* ---- membership ---- */

static bool chain_has(const sbf_t *s, item_hash h)
{
    size_t n = load_nlinks(s);
    void **links = load_links(s);
    if (s->layout == BLOOMERY_LAYOUT_BLOCKED)
        return bf_check_any_hashed((const bf_t *const *)links, n, h.blocked);
    if (s->layout == BLOOMERY_LAYOUT_GROWING)
        return gf_check_hashed(links[0], h.blocked);
    for (size_t i = n; i-- > 0;)
        if (link_check(s, links[i], h))
            return true;
    return false;
}

/* A batch's adds to the newest link not yet in its count: one atomic add
 * per batch instead of one per item. Only while the link has room for far
 * more than any batch in flight, so concurrent batches cannot overfill it
 * by more than a rounding; near capacity every add counts at once. */
#define COUNT_SLACK 4096

typedef struct pending {
    bloomery_layout layout; /* blocked or prefix */
    void *link;
    uint64_t n;
} pending;

static void flush_count(pending *p)
{
    if (p && p->n) {
        if (p->layout == BLOOMERY_LAYOUT_PREFIX)
            pf_count_add(p->link, p->n);
        else
            bf_count_add(p->link, p->n);
        p->n = 0;
    }
}

/* Counts an add of the newest link: in the batch's pending count while the
 * link has room for far more (COUNT_SLACK), else at once. */
static void count_added(bloomery_layout layout, pending *p, void *last, uint64_t left, int added)
{
    if (added && p && left > COUNT_SLACK) {
        if (p->link != last) {
            flush_count(p);
            p->link = last;
        }
        p->n++;
    } else if (added) {
        pending now = {layout, last, 1};
        flush_count(&now);
    }
}

/* Whether the newest link has room for one more add, counting the batch's
 * pending adds: 1 with *left set, 0 once the chain grew (look again), 2 if
 * it is full and holds h (not yet checked there when `unchecked`: then the
 * item is present and the chain must not grow for it), or an error. */
static int newest_has_room(sbf_t *s, void *last, pending *p, uint64_t *left, bloomery_hash h,
                           bool unchecked)
{
    uint64_t count = link_count(s, last) + (p && p->link == last ? p->n : 0);
    uint64_t cap = link_capacity(s, last);
    if (count < cap) {
        *left = cap - count;
        return 1;
    }
    if (unchecked && link_check(s, last, (item_hash){.blocked = h}))
        return 2;
    flush_count(p);
    int rc = ensure_room(s);
    return rc == BLOOMERY_OK ? 0 : rc;
}

static int add_blocked(sbf_t *s, bloomery_hash h, pending *p)
{
    /* Present needs no lock: every bit is already visible. */
    size_t n0 = load_nlinks(s); /* before the array, which has at least as many */
    if (bf_check_any_hashed((const bf_t *const *)load_links(s), n0, h))
        return 0;
    for (;;) {
        size_t n = load_nlinks(s);
        const bf_t *const *links = (const bf_t *const *)load_links(s);
        bf_t *last = (bf_t *)links[n - 1];
        uint64_t left = 0;
        int room = newest_has_room(s, last, p, &left, h, false);
        if (room <= 0) {
            if (room < 0)
                return room;
            continue;
        }
        test_point(TEST_POINT_CHAIN_ADD_LOCK);
        uint64_t held = bf_lock_item(last, h);
        if (load_nlinks(s) != n) {
            bf_unlock_stripes(last, held);
            continue;
        }
        /* A concurrent add of another item may have set every bit meanwhile;
         * then, as in RedisBloom, the item counts as already present. */
        int rc = !bf_check_any_hashed(links, n, h) && bf_set_locked(last, h);
        bf_unlock_stripes(last, held);
        count_added(BLOOMERY_LAYOUT_BLOCKED, p, last, left, rc);
        return rc;
    }
}

/* A prefix chain's add (prefix_lock.h): the links checked without a lock,
 * then the newest link's bin lock while the chain still has them. */
static int add_prefix(sbf_t *s, bloomery_hash h, pending *p)
{
    for (;;) {
        size_t n = __atomic_load_n(&s->nlinks, __ATOMIC_SEQ_CST);
        void **links = load_links(s);
        /* The newest link is asked under its lock (pf_add_if), once. */
        for (size_t i = n - 1; i-- > 0;)
            if (pf_check_hashed(links[i], h))
                return 0;
        pf_t *last = links[n - 1];
        uint64_t left = 0;
        int room = newest_has_room(s, last, p, &left, h, true);
        if (room == 2)
            return 0;
        if (room <= 0) {
            if (room < 0)
                return room;
            continue;
        }
        test_point(TEST_POINT_CHAIN_ADD_LOCK);
        int rc = pf_add_if(last, h, &s->nlinks, n);
        if (rc < 0)
            continue;
        count_added(BLOOMERY_LAYOUT_PREFIX, p, last, left, rc);
        return rc;
    }
}

static int add_hashed(sbf_t *s, item_hash h)
{
    if (s->layout == BLOOMERY_LAYOUT_BLOCKED)
        return add_blocked(s, h.blocked, NULL);
    if (s->layout == BLOOMERY_LAYOUT_PREFIX)
        return add_prefix(s, h.blocked, NULL);
    if (s->layout == BLOOMERY_LAYOUT_GROWING)
        return gf_add_hashed(load_links(s)[0], h.blocked);
    uint64_t key = stripe_key(s, h);
    bloomery_stripe_lock(key);
    int rc;
    if (chain_has(s, h)) {
        rc = 0;
    } else if ((rc = ensure_room(s)) == BLOOMERY_OK) {
        /* A concurrent add of another item may have set every bit meanwhile;
         * then, as in RedisBloom, the item counts as already present. */
        size_t n = load_nlinks(s);
        rc = cbf_add_hashed(load_links(s)[n - 1], h.classic) ? 1 : 0;
    }
    bloomery_stripe_unlock(key);
    return rc;
}

int sbf_add(sbf_t *s, const void *item, size_t len) { return add_hashed(s, hash_of(s, item, len)); }

int sbf_check(const sbf_t *s, const void *item, size_t len)
{
    return chain_has(s, hash_of(s, item, len));
}

/* The public hash is the union's two words, in the same order for both
 * layouts. */
static inline sbf_hash to_public(const sbf_t *s, item_hash h)
{
    if (s->layout == BLOOMERY_LAYOUT_CLASSIC)
        return (sbf_hash){h.classic.a, h.classic.b};
    return (sbf_hash){h.blocked.lo, h.blocked.hi};
}

static inline item_hash from_public(const sbf_t *s, sbf_hash p)
{
    item_hash h;
    if (s->layout == BLOOMERY_LAYOUT_CLASSIC)
        h.classic = (cbf_hash){p.h1, p.h2};
    else
        h.blocked = (bloomery_hash){p.h1, p.h2};
    return h;
}

sbf_hash sbf_hash_item(const sbf_t *s, const void *item, size_t len)
{
    return to_public(s, hash_of(s, item, len));
}

int sbf_add_hashed(sbf_t *s, sbf_hash h) { return add_hashed(s, from_public(s, h)); }

int sbf_check_hashed(const sbf_t *s, sbf_hash h) { return chain_has(s, from_public(s, h)); }

/* Adds write the newest link only: the others are fetched for reading. */
static void prefetch(const sbf_t *s, item_hash h, bool for_write)
{
    if (s->layout == BLOOMERY_LAYOUT_CLASSIC || s->layout == BLOOMERY_LAYOUT_GROWING)
        return;
    size_t n = load_nlinks(s);
    void **links = load_links(s);
    if (s->layout == BLOOMERY_LAYOUT_PREFIX) {
        for (size_t i = 0; i < n; i++)
            pf_prefetch(links[i], h.blocked, for_write && i == n - 1);
        return;
    }
    bf_prefetch_all((const bf_t *const *)links, n - for_write, h.blocked);
    if (for_write)
        bf_prefetch(links[n - 1], h.blocked, true);
}

static size_t hash_group(const sbf_t *s, const void *const *items, const size_t *lens, size_t n,
                         size_t base, item_hash *h, bool for_write)
{
    size_t g = n - base < BATCH ? n - base : BATCH;
    for (size_t i = 0; i < g; i++) {
        h[i] = hash_of(s, items[base + i], lens[base + i]);
        prefetch(s, h[i], for_write);
    }
    return g;
}

/* A group's adds to a blocked chain under one taking of their stripes in
 * the newest link (blocked.c does the same for one filter): the locked
 * exchange per item was the larger part of an add in cache. Only while the
 * newest link has room for far more than the group (COUNT_SLACK), so the
 * group cannot overfill it and no growth happens under the stripes; near
 * capacity each item goes through add_blocked. Returns how many results
 * it wrote (all of them, or up to and with the first error). */
static size_t add_group_blocked(sbf_t *s, const item_hash *h, size_t m, int *res, pending *p)
{
    bool absent[BATCH];
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        /* Present needs no lock: every bit is already visible. The count
         * before the array, which has at least as many. */
        size_t n = load_nlinks(s);
        absent[i] = !bf_check_any_hashed((const bf_t *const *)load_links(s), n, h[i].blocked);
        k += absent[i];
    }
    for (;;) {
        size_t n = load_nlinks(s);
        const bf_t *const *links = (const bf_t *const *)load_links(s);
        bf_t *last = (bf_t *)links[n - 1];
        uint64_t count = bf_count(last) + (p->link == last ? p->n : 0);
        uint64_t cap = bf_capacity(last);
        if (k > 0 && (count >= cap || cap - count <= COUNT_SLACK + k)) {
            for (size_t i = 0; i < m; i++) {
                res[i] = absent[i] ? add_blocked(s, h[i].blocked, p) : 0;
                if (res[i] < 0)
                    return i + 1;
            }
            return m;
        }
        uint64_t mask = 0;
        for (size_t i = 0; i < m; i++)
            if (absent[i])
                mask |= bf_stripes_of(last, h[i].blocked);
        test_point(TEST_POINT_CHAIN_GROUP_LOCK);
        bf_lock_stripes(last, mask);
        if (load_nlinks(s) != n) {
            bf_unlock_stripes(last, mask);
            continue;
        }
        uint64_t added = 0;
        for (size_t i = 0; i < m; i++) {
            /* As in add_blocked: bits another add set meanwhile, or an
             * earlier copy of the item in this group, make it present. */
            res[i] = absent[i] && !bf_check_any_hashed(links, n, h[i].blocked) &&
                     bf_set_locked(last, h[i].blocked);
            added += (uint64_t)res[i];
        }
        bf_unlock_stripes(last, mask);
        if (added && p->link != last) {
            flush_count(p);
            p->link = last;
        }
        p->n += added;
        return m;
    }
}

/* A group's adds to a prefix chain: each item's older links checked
 * without a lock, then the group added to the newest link in one call,
 * each item under its bin's lock and only while the chain still has the
 * links it checked (prefix_lock.h). Only while that link has room for far
 * more than the group, as in add_group_blocked; near capacity, or for an
 * item whose chain grew meanwhile, each goes through add_prefix. Returns
 * how many results it wrote (all, or up to and with the first error). */
static size_t add_group_prefix(sbf_t *s, const item_hash *h, size_t m, int *res, pending *p)
{
    size_t n = __atomic_load_n(&s->nlinks, __ATOMIC_SEQ_CST);
    void **links = load_links(s);
    pf_t *last = links[n - 1];
    uint64_t count = pf_count(last) + (p->link == last ? p->n : 0), cap = pf_capacity(last);
    bool room = count < cap && cap - count > COUNT_SLACK + m, redo[BATCH];
    bloomery_hash todo[BATCH];
    size_t at[BATCH], k = 0;
    for (size_t i = 0; i < m; i++) {
        res[i] = 0;
        redo[i] = !room;
        bool older = false;
        for (size_t j = n - 1; room && j-- > 0 && !older;)
            older = pf_check_hashed(links[j], h[i].blocked);
        if (room && !older) {
            todo[k] = h[i].blocked;
            at[k++] = i;
        }
    }
    int rc[BATCH];
    if (k)
        test_point(TEST_POINT_CHAIN_GROUP_LOCK);
    pf_add_many_if(last, todo, k, &s->nlinks, n, rc);
    uint64_t added = 0;
    for (size_t j = 0; j < k; j++) {
        /* -1: the chain grew under this item, and under every later one of
         * the group; they are added again below, in order. */
        redo[at[j]] = rc[j] < 0;
        res[at[j]] = rc[j] > 0;
        added += rc[j] > 0;
    }
    if (added && p->link != last) {
        flush_count(p);
        p->link = last;
    }
    p->n += added;
    for (size_t i = 0; i < m; i++) {
        if (!redo[i])
            continue;
        res[i] = add_prefix(s, h[i].blocked, p);
        if (res[i] < 0)
            return i + 1;
    }
    return m;
}

/* A growing chain's batches: hashed a group at a time for its own batch
 * calls, which fetch the group's lines together. */
static size_t hash_growing(const sbf_t *s, const void *const *items, const size_t *lens, size_t n,
                           size_t base, bloomery_hash *h)
{
    size_t g = n - base < BATCH ? n - base : BATCH;
    for (size_t i = 0; i < g; i++)
        h[i] = bloomery_hash_item(items[base + i], lens[base + i], s->seed);
    return g;
}

static size_t add_many_growing(sbf_t *s, const void *const *items, const size_t *lens, size_t n,
                               int *results)
{
    bloomery_hash h[BATCH];
    for (size_t base = 0, g; base < n; base += g) {
        g = hash_growing(s, items, lens, n, base, h);
        size_t done = gf_add_many_hashed(load_links(s)[0], h, g, results + base);
        if (done < g)
            return base + done;
    }
    return n;
}

static void check_many_growing(const sbf_t *s, const void *const *items, const size_t *lens,
                               size_t n, int *results)
{
    bloomery_hash h[BATCH];
    uint8_t out[BATCH];
    for (size_t base = 0, g; base < n; base += g) {
        g = hash_growing(s, items, lens, n, base, h);
        gf_check_many_hashed(load_links(s)[0], h, g, out);
        for (size_t i = 0; i < g; i++)
            results[base + i] = out[i];
    }
}

/* Two groups in flight, as in blocked.c: the next group is hashed and
 * fetched while this one is added, so an add's stores find their lines
 * owned. */
size_t sbf_add_many(sbf_t *s, const void *const *items, const size_t *lens, size_t n, int *results)
{
    if (s->layout == BLOOMERY_LAYOUT_GROWING)
        return add_many_growing(s, items, lens, n, results);
    item_hash h[2][BATCH];
    pending p = {s->layout, NULL, 0};
    bool blocked = s->layout == BLOOMERY_LAYOUT_BLOCKED;
    size_t cur = n ? hash_group(s, items, lens, n, 0, h[0], true) : 0;
    for (size_t base = 0, g = 0; base < n; base += cur, cur = g) {
        size_t next = base + cur;
        g = next < n ? hash_group(s, items, lens, n, next, h[(base / BATCH + 1) & 1], true) : 0;
        const item_hash *hg = h[(base / BATCH) & 1];
        if (blocked) {
            size_t done = add_group_blocked(s, hg, cur, results + base, &p);
            if (done < cur) {
                flush_count(&p);
                return base + done;
            }
            continue;
        }
        if (s->layout == BLOOMERY_LAYOUT_PREFIX) {
            size_t done = add_group_prefix(s, hg, cur, results + base, &p);
            if (done < cur) {
                flush_count(&p);
                return base + done;
            }
            continue;
        }
        for (size_t i = 0; i < cur; i++) {
            int rc = add_hashed(s, hg[i]);
            results[base + i] = rc;
            if (rc < 0) {
                flush_count(&p);
                return base + i + 1;
            }
        }
    }
    flush_count(&p);
    return n;
}

void sbf_check_many(const sbf_t *s, const void *const *items, const size_t *lens, size_t n,
                    int *results)
{
    if (s->layout == BLOOMERY_LAYOUT_GROWING) {
        check_many_growing(s, items, lens, n, results);
        return;
    }
    item_hash h[BATCH];
    for (size_t base = 0; base < n; base += BATCH) {
        size_t g = n - base < BATCH ? n - base : BATCH;
        for (size_t i = 0; i < g; i++) {
            h[i] = hash_of(s, items[base + i], lens[base + i]);
            prefetch(s, h[i], false);
        }
        for (size_t i = 0; i < g; i++)
            results[base + i] = chain_has(s, h[i]);
    }
}

/* ---- state ---- */

bloomery_layout sbf_layout(const sbf_t *s) { return s->layout; }
uint32_t sbf_expansion(const sbf_t *s) { return s->expansion; }
double sbf_error_rate(const sbf_t *s) { return s->error_rate; }
uint64_t sbf_initial_capacity(const sbf_t *s) { return s->capacity0; }
uint64_t sbf_seed(const sbf_t *s) { return s->seed; }
size_t sbf_nlinks(const sbf_t *s) { return load_nlinks(s); }

#define SUM_LINKS(s, fn)                                                                           \
    do {                                                                                           \
        size_t n_ = load_nlinks(s);                                                                \
        void **l_ = load_links(s);                                                                 \
        uint64_t t_ = 0;                                                                           \
        for (size_t i_ = 0; i_ < n_; i_++)                                                         \
            t_ += fn(s, l_[i_]);                                                                   \
        return t_;                                                                                 \
    } while (0)

uint64_t sbf_capacity(const sbf_t *s) { SUM_LINKS(s, link_capacity); }
uint64_t sbf_count(const sbf_t *s) { SUM_LINKS(s, link_count); }
uint64_t sbf_bytes(const sbf_t *s) { SUM_LINKS(s, link_bytes); }

double sbf_fpr_estimate(const sbf_t *s)
{
    size_t n = load_nlinks(s);
    void **links = load_links(s);
    double pass = 1.0;
    for (size_t i = 0; i < n; i++) {
        pass *= 1.0 - link_fpr_estimate(s, links[i]);
    }
    return 1.0 - pass;
}

bf_t *sbf_link_blocked(const sbf_t *s, size_t i)
{
    if (s->layout != BLOOMERY_LAYOUT_BLOCKED || i >= load_nlinks(s))
        return NULL;
    return load_links(s)[i];
}

cbf_t *sbf_link_classic(const sbf_t *s, size_t i)
{
    if (s->layout != BLOOMERY_LAYOUT_CLASSIC || i >= load_nlinks(s))
        return NULL;
    return load_links(s)[i];
}

pf_t *sbf_link_prefix(const sbf_t *s, size_t i)
{
    if (s->layout != BLOOMERY_LAYOUT_PREFIX || i >= load_nlinks(s))
        return NULL;
    return load_links(s)[i];
}

gf_t *sbf_link_growing(const sbf_t *s, size_t i)
{
    if (s->layout != BLOOMERY_LAYOUT_GROWING || i >= load_nlinks(s))
        return NULL;
    return load_links(s)[i];
}

void sbf_set_may_allocate(sbf_t *s, bool (*may_allocate)(void *ctx, uint64_t bytes), void *ctx)
{
    s->may_allocate = may_allocate;
    s->may_allocate_ctx = ctx;
    if (s->layout == BLOOMERY_LAYOUT_GROWING)
        gf_set_may_allocate(s->links[0], may_allocate, ctx);
}

void sbf_set_released(sbf_t *s, void (*released)(void *ctx, uint64_t bytes), void *ctx)
{
    if (s->layout == BLOOMERY_LAYOUT_GROWING)
        gf_set_released(s->links[0], released, ctx);
}

void sbf_set_write_hook(sbf_t *s, pf_write_hook hook, void *ctx)
{
    if (s->layout == BLOOMERY_LAYOUT_GROWING)
        gf_set_write_hook(s->links[0], hook, ctx, 0);
    if (s->layout != BLOOMERY_LAYOUT_PREFIX)
        return;
    for (size_t i = 0; i < s->nlinks; i++)
        pf_set_write_hook(s->links[i], hook, ctx, (uint32_t)(2 * i));
}

int sbf_merge(sbf_t *dst, const sbf_t *src)
{
    size_t n = load_nlinks(dst);
    if (dst->layout != src->layout || dst->expansion != src->expansion || dst->seed != src->seed ||
        n != load_nlinks(src) || dst->layout == BLOOMERY_LAYOUT_GROWING)
        return BLOOMERY_EINVAL;
    void **d = load_links(dst), **s = load_links(src);
    for (size_t i = 0; i < n; i++) {
        /* Check every shape before changing anything. */
        if (dst->layout == BLOOMERY_LAYOUT_CLASSIC) {
            cbf_shape a, b;
            cbf_shape_of(d[i], &a);
            cbf_shape_of(s[i], &b);
            if (a.bits != b.bits || a.hashes != b.hashes)
                return BLOOMERY_EINVAL;
        } else if (dst->layout == BLOOMERY_LAYOUT_PREFIX) {
            if (!pf_same_shape(d[i], s[i]))
                return BLOOMERY_EINVAL;
        } else if (bf_nblocks(d[i]) != bf_nblocks(s[i]) ||
                   bf_blocks_per_key(d[i]) != bf_blocks_per_key(s[i])) {
            return BLOOMERY_EINVAL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        int rc = dst->layout == BLOOMERY_LAYOUT_CLASSIC  ? cbf_merge(d[i], s[i])
                 : dst->layout == BLOOMERY_LAYOUT_PREFIX ? pf_merge(d[i], s[i])
                                                         : bf_merge(d[i], s[i]);
        if (rc != BLOOMERY_OK)
            return rc;
    }
    return BLOOMERY_OK;
}

/* The filters of the keyspace with their statistics, for /metrics and the
 * console. Keys are gathered with the keyspace's scan in small steps, each
 * holding one stripe's read lock briefly, with their cheap statistics
 * (value_type.stats: a window's ring may rotate only while nobody holds
 * the lock). The FPR estimate, which reads a whole filter, is taken after
 * the stripe is unlocked, on a reference that keeps the value alive even if
 * its key is deleted meanwhile; the console's list takes it only for the
 * rows of the page it answers (filters_find without it, then filters_fpr). */
#include <stdlib.h>
#include <string.h>

#include "glob.h"
#include "http.h"
#include "util.h"

#define SCAN_STEP 64

static int by_key(const void *a, const void *b)
{
    const filter_row *x = a, *y = b;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->key, y->key, n);
    return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

static void row_release(filter_row *r)
{
    kv_obj_free(r->obj);
    free(r->key);
}

/* Rows in key order, one per key (the scan may return a key twice, in a
 * table that grew meanwhile), the first limit of them. Run whenever twice
 * the limit has gathered, so the limit is the first filters by name, not
 * the first the scan met, in memory bounded by the limit (and a step). */
static void trim(filter_list *fl)
{
    if (fl->n)
        qsort(fl->rows, fl->n, sizeof(*fl->rows), by_key);
    size_t out = 0;
    for (size_t i = 0; i < fl->n; i++) {
        filter_row *r = &fl->rows[i];
        if (out > 0 && by_key(&fl->rows[out - 1], r) == 0) {
            row_release(r);
        } else if (out == fl->limit) {
            row_release(r);
            fl->truncated = true;
        } else {
            fl->rows[out++] = *r;
        }
    }
    fl->n = out;
    fl->full = out == fl->limit;
}

static void visit(void *ctx, const kv_entry *e)
{
    filter_list *fl = ctx;
    const value_type *t = e->obj->type;
    for (size_t i = 0; i < types_count() && i < FILTERS_MAX_TYPES; i++)
        if (type_at(i) == t)
            fl->by_type[i]++;
    if (t->stats == NULL)
        return;
    if (fl->match && !glob_match(fl->match, fl->mlen, e->key, e->klen, false))
        return;
    if (fl->limit == 0) {
        fl->truncated = true;
        return;
    }
    if (fl->full) {
        const filter_row *last = &fl->rows[fl->limit - 1];
        int c = by_key(&(filter_row){.key = (char *)e->key, .klen = e->klen}, last);
        if (c >= 0) {
            fl->truncated |= c > 0;
            return;
        }
    }
    if (fl->n == fl->cap) {
        size_t cap = fl->cap ? fl->cap * 2 : 64;
        filter_row *v = realloc(fl->rows, cap * sizeof(*v));
        if (v == NULL) {
            fl->failed = true;
            return;
        }
        fl->rows = v;
        fl->cap = cap;
    }
    char *k = malloc(e->klen ? e->klen : 1);
    if (k == NULL) {
        fl->failed = true;
        return;
    }
    memcpy(k, e->key, e->klen);
    kv_obj *o = e->obj;
    filter_row *r = &fl->rows[fl->n++];
    *r = (filter_row){.key = k, .klen = e->klen, .obj = o, .type = t, .expire_ms = e->expire_ms};
    if (t->locked)
        pthread_mutex_lock(&o->lock);
    t->stats(o, &r->stats);
    r->readonly = o->readonly;
    if (t->locked)
        pthread_mutex_unlock(&o->lock);
    kv_obj_retain(o);
}

void filters_fpr(filter_row *r)
{
    kv_obj *o = r->obj;
    if (r->fpr_done || o->type->fpr == NULL)
        return;
    if (o->type->locked)
        pthread_mutex_lock(&o->lock);
    r->stats.fpr = o->type->fpr(o);
    if (o->type->locked)
        pthread_mutex_unlock(&o->lock);
    r->fpr_done = true;
}

void filters_collect(filter_list *fl, size_t limit) { filters_find(fl, limit, NULL, 0, true); }

void filters_find(filter_list *fl, size_t limit, const char *match, size_t mlen, bool fpr)
{
    *fl = (filter_list){.limit = limit, .match = match, .mlen = mlen};
    uint64_t cursor = 0;
    do {
        cursor = ks_scan(cursor, SCAN_STEP, visit, fl);
        if (fl->limit <= SIZE_MAX / 4 && fl->n >= 2 * fl->limit)
            trim(fl); /* outside the stripe's lock: it may free values */
    } while (cursor != 0);
    trim(fl);
    int64_t now = now_ms();
    for (size_t i = 0; i < fl->n; i++) {
        filter_row *r = &fl->rows[i];
        if (fpr)
            filters_fpr(r);
        r->fill = r->stats.capacity ? (double)r->stats.items / (double)r->stats.capacity : 0;
        r->ttl_s = -1;
        if (r->expire_ms)
            r->ttl_s = r->expire_ms > now ? (double)(r->expire_ms - now) / 1000.0 : 0;
    }
}

void filters_free(filter_list *fl)
{
    for (size_t i = 0; i < fl->n; i++)
        row_release(&fl->rows[i]);
    free(fl->rows);
    *fl = (filter_list){0};
}

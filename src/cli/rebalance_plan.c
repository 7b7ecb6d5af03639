/* Rebalancing by memory, the plan alone (rebalance_plan.h). Greedy: the
 * heaviest master gives the slot closest to half its difference with a
 * lighter one, so the two move towards each other and neither passes the
 * other. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rebalance_plan.h"

static int add_move(reb_plan *p, const reb_slot *s, size_t to)
{
    reb_move *m = realloc(p->moves, (p->nmoves + 1) * sizeof *m);
    if (!m)
        return -1;
    p->moves = m;
    m[p->nmoves++] =
        (reb_move){.slot = s->slot, .from = s->owner, .to = to, .keys = s->keys, .bytes = s->bytes};
    return 0;
}

static int add_refused(reb_plan *p, const reb_slot *s, size_t to)
{
    const reb_node *t = &p->nodes[to];
    char line[256];
    snprintf(line, sizeof line,
             "slot %d (%llu keys, %llu bytes) from %s to %s: it would use %llu bytes of its "
             "maxmemory %llu",
             s->slot, s->keys, s->bytes, p->nodes[s->owner].addr, t->addr, t->after + s->bytes,
             t->maxmemory);
    char **r = realloc(p->refused, (p->nrefused + 1) * sizeof *r);
    if (!r)
        return -1;
    p->refused = r;
    if (!(r[p->nrefused] = strdup(line)))
        return -1;
    p->nrefused++;
    return 0;
}

static bool fits(const reb_node *t, unsigned long long bytes)
{
    return t->maxmemory == 0 || t->after + bytes <= t->maxmemory;
}

static unsigned long long dist(unsigned long long a, unsigned long long b)
{
    return a > b ? a - b : b - a;
}

/* Where a move may go: a master above hi gives to any lighter one; one in
 * the band but above the mean, only to a master below lo; one below the
 * mean gives nothing (a move between two masters in the band, or from one
 * that is light already, is churn). */
typedef struct band {
    double hi, lo, mean;
} band;

/* The lightest master that may take a slot of `from`, by after then index;
 * SIZE_MAX when none. */
static size_t lightest(const reb_plan *p, size_t from, const bool *skip, const band *b)
{
    size_t best = SIZE_MAX;
    double f = (double)p->nodes[from].after;
    if (f <= b->mean)
        return SIZE_MAX;
    for (size_t i = 0; i < p->nnodes; i++)
        if (i != from && !skip[i] && p->nodes[i].after < p->nodes[from].after &&
            (f > b->hi || (double)p->nodes[i].after < b->lo) &&
            (best == SIZE_MAX || p->nodes[i].after < p->nodes[best].after))
            best = i;
    return best;
}

/* The move made from the heaviest master: 1 made, 0 none possible, -1 out
 * of memory. */
static int one_move(reb_plan *p, const reb_slot *slots, size_t nslots, bool *moved, bool *refused,
                    bool *skip, size_t heavy, const band *b)
{
    memset(skip, 0, p->nnodes * sizeof *skip);
    size_t to;
    while ((to = lightest(p, heavy, skip, b)) != SIZE_MAX) {
        unsigned long long gap = p->nodes[heavy].after - p->nodes[to].after;
        /* Candidates: slots of heavy smaller than the gap, best first (closest
         * to half of it, then the lower slot); a refused one is passed over. */
        for (;;) {
            size_t best = SIZE_MAX;
            for (size_t i = 0; i < nslots; i++) {
                const reb_slot *s = &slots[i];
                if (moved[i] || s->owner != heavy || s->bytes == 0 || s->bytes >= gap ||
                    (refused[i] && !fits(&p->nodes[to], s->bytes)))
                    continue;
                if (best == SIZE_MAX) {
                    best = i;
                    continue;
                }
                unsigned long long d = dist(2 * s->bytes, gap),
                                   bd = dist(2 * slots[best].bytes, gap);
                if (d < bd || (d == bd && s->slot < slots[best].slot))
                    best = i;
            }
            if (best == SIZE_MAX)
                break;
            if (!fits(&p->nodes[to], slots[best].bytes)) {
                if (!refused[best] && add_refused(p, &slots[best], to) != 0)
                    return -1;
                refused[best] = true;
                continue;
            }
            if (add_move(p, &slots[best], to) != 0)
                return -1;
            moved[best] = true;
            p->nodes[heavy].after -= slots[best].bytes;
            p->nodes[to].after += slots[best].bytes;
            return 1;
        }
        skip[to] = true;
    }
    return 0;
}

int reb_plan_compute(reb_plan *p, const reb_slot *slots, size_t nslots, double tolerance)
{
    if (p->nnodes == 0)
        return 0;
    unsigned long long total = 0;
    for (size_t i = 0; i < p->nnodes; i++) {
        p->nodes[i].after = p->nodes[i].used;
        total += p->nodes[i].used;
    }
    double mean = (double)total / (double)p->nnodes;
    double hi = mean * (1 + tolerance), lo = mean * (1 - tolerance);
    band bd = {hi, lo, mean};
    bool *moved = calloc(nslots + 1, sizeof *moved);
    bool *refused = calloc(nslots + 1, sizeof *refused);
    bool *skip = calloc(p->nnodes, sizeof *skip);
    bool *spent = calloc(p->nnodes, sizeof *spent);
    int rc = 0;
    if (!moved || !refused || !skip || !spent)
        rc = -1;
    while (rc == 0) {
        /* Done when everyone is within the band; else the heaviest master
         * that still has a useful move gives one. */
        size_t heavy = SIZE_MAX, light = 0;
        for (size_t i = 0; i < p->nnodes; i++) {
            if (p->nodes[i].after < p->nodes[light].after)
                light = i;
            if (!spent[i] && (heavy == SIZE_MAX || p->nodes[i].after > p->nodes[heavy].after))
                heavy = i;
        }
        if (heavy == SIZE_MAX)
            break;
        double top = 0;
        for (size_t i = 0; i < p->nnodes; i++)
            if ((double)p->nodes[i].after > top)
                top = (double)p->nodes[i].after;
        if (top <= hi && (double)p->nodes[light].after >= lo)
            break;
        int r = one_move(p, slots, nslots, moved, refused, skip, heavy, &bd);
        if (r < 0)
            rc = -1;
        else if (r == 0)
            spent[heavy] = true;
        else
            memset(spent, 0, p->nnodes * sizeof *spent);
    }
    free(moved);
    free(refused);
    free(skip);
    free(spent);
    return rc;
}

void reb_plan_free(reb_plan *p)
{
    free(p->nodes);
    free(p->moves);
    for (size_t i = 0; i < p->nrefused; i++)
        free(p->refused[i]);
    free(p->refused);
    memset(p, 0, sizeof *p);
}

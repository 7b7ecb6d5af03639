/* The planner of rebalance.h without any I/O: masters' memory and the
 * bytes each slot holds in, moves out. Pure and deterministic, so that it
 * is unit-tested alone (tests/test_rebalance_plan.c). */
#ifndef BLOOMERY_CLI_REBALANCE_PLAN_H
#define BLOOMERY_CLI_REBALANCE_PLAN_H

#include <stddef.h>

#include "rebalance.h"

/* A slot that holds keys, on master `owner` (an index into the plan's
 * nodes). */
typedef struct reb_slot {
    int slot;
    size_t owner;
    unsigned long long keys, bytes;
} reb_slot;

/* Plans on p->nodes (used and maxmemory read; after set here) and the
 * slots: fills p->moves and p->refused (any there before are kept). While
 * a master is above mean * (1 + tolerance) or one below mean * (1 -
 * tolerance), moves from the heaviest master to a lighter one the slot
 * that brings the two closest together, and only one smaller than their
 * difference, so that no move makes the spread wider. A move a target's
 * maxmemory cannot hold is refused (said once per slot) and the next best
 * tried. 0, or -1 when out of memory. */
int reb_plan_compute(reb_plan *p, const reb_slot *slots, size_t nslots, double tolerance);

#endif

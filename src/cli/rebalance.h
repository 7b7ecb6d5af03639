/* Rebalancing a Redis Cluster by memory, not by slot count: where
 * `redis-cli --cluster rebalance` evens out the number of slots, filters
 * differ in size by orders of magnitude, so the plan moves the slots whose
 * bytes even out the masters' memory, and refuses a move the target's
 * maxmemory cannot hold. The moves are made as `redis-cli --cluster
 * reshard` makes them (CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE in
 * batches, CLUSTER SETSLOT NODE). Used by `bloomery rebalance` and the
 * console (docs/CONSOLE.md). */
#ifndef BLOOMERY_CLI_REBALANCE_H
#define BLOOMERY_CLI_REBALANCE_H

#include <stdbool.h>
#include <stddef.h>

#include "rcall.h"

typedef struct reb_node {
    char addr[64]; /* host:port */
    char id[41];   /* the cluster's node id */
    /* The memory the plan evens out: used_memory plus values. bloomery.so
     * allocates its values outside Redis's allocator, so used_memory does
     * not count them (docs/MODULE.md, "Rebalancing by memory"). */
    unsigned long long used;
    unsigned long long used_memory; /* INFO memory's */
    unsigned long long values;      /* MEMORY USAGE of its keys of bloomery.so's types */
    unsigned long long maxmemory;   /* 0: none */
    unsigned long long after;       /* used once the plan is made */
    size_t slots;                   /* slots it serves */
} reb_node;

typedef struct reb_move {
    int slot;
    size_t from, to; /* indexes into reb_plan.nodes */
    unsigned long long keys, bytes;
} reb_move;

typedef struct reb_plan {
    reb_node *nodes; /* the masters */
    size_t nnodes;
    reb_move *moves;
    size_t nmoves;
    char **refused; /* moves the plan wanted but a target could not hold */
    size_t nrefused;
} reb_plan;

/* Reads the cluster through seed (host:port, any node) and plans the moves
 * that bring every master within tolerance (a fraction, e.g. 0.1) of the
 * masters' mean memory. 0, or -1 with the reason in err. */
int reb_plan_make(const char *seed, const rc_opts *o, double tolerance, reb_plan *out, char *err,
                  size_t errlen);

/* Called before each move (done moves made so far) and once at the end
 * (current NULL). */
typedef void (*reb_progress)(void *arg, size_t done, size_t total, const reb_move *current);

/* Makes the plan's moves in order; stops at the first that fails, leaving
 * no slot half-moved where the cluster allows it. 0, or -1 with err. */
int reb_plan_apply(const reb_plan *p, const rc_opts *o, reb_progress cb, void *arg, char *err,
                   size_t errlen);

void reb_plan_free(reb_plan *p);

#endif

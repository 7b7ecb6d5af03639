/* Where a new filter goes across several groups (Sentinel groups, or the
 * masters given with --node): seed 001's rule, the most free memory first
 * (a filter's bytes are what a node runs out of), then the fewest filters
 * (spreading the keys spreads the load), then the order given. Under a
 * Redis Cluster the key's slot decides instead (slot.c). Pure. */
#include "console.h"

static unsigned long long free_of(const pl_group *g)
{
    return g->limit > g->used ? g->limit - g->used : 0;
}

int placement_pick(const pl_group *g, size_t n)
{
    int best = -1;
    for (size_t i = 0; i < n; i++) {
        if (!g[i].up)
            continue;
        if (best < 0) {
            best = (int)i;
            continue;
        }
        const pl_group *b = &g[best];
        unsigned long long fi = free_of(&g[i]), fb = free_of(b);
        if (fi > fb || (fi == fb && g[i].filters < b->filters))
            best = (int)i;
    }
    return best;
}

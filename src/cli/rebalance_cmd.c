/* bloomery rebalance: the plan of rebalance.h shown, and made with
 * --apply. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "rebalance.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: bloomery rebalance --cluster HOST:PORT [options]\n\n"
               "Evens out the memory of a Redis Cluster's masters (bloomery.so filters differ\n"
               "in size by orders of magnitude, so even slot counts are not even memory):\n"
               "reads every master's used_memory and maxmemory and the bytes of every slot\n"
               "that holds keys (MEMORY USAGE), and plans slot moves from the heaviest\n"
               "masters to the lightest, until every master is within the tolerance of\n"
               "the mean. No move makes the spread wider; a move whose target's maxmemory\n"
               "cannot hold the slot is refused and listed. Without --apply the plan is\n"
               "only shown; with it the moves are made as redis-cli --cluster reshard\n"
               "makes them (CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE).\n"
               "\n"
               "      --cluster HOST:PORT  any node of the cluster (required)\n"
               "      --tolerance F     how far from the mean a master may stay, a fraction\n"
               "                        (default 0.1)\n"
               "      --apply           make the moves\n");
    fputs(rc_opts_help, f);
    fprintf(f, "\nExit codes: 0 ok, 1 error (connection, cluster, a move that failed), 2 "
               "usage.\n");
}

static void human(unsigned long long b, char *out, size_t len)
{
    if (b >= 1024ULL * 1024 * 1024)
        snprintf(out, len, "%.2f GiB", (double)b / (1024.0 * 1024 * 1024));
    else if (b >= 1024 * 1024)
        snprintf(out, len, "%.2f MiB", (double)b / (1024.0 * 1024));
    else
        snprintf(out, len, "%.1f KiB", (double)b / 1024.0);
}

static unsigned long long spread(const reb_plan *p, bool after)
{
    unsigned long long lo = ~0ULL, hi = 0;
    for (size_t i = 0; i < p->nnodes; i++) {
        unsigned long long v = after ? p->nodes[i].after : p->nodes[i].used;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    return p->nnodes ? hi - lo : 0;
}

static void print_plan(const reb_plan *p)
{
    char a[32], b[32], m[32], r[32], v[32];
    for (size_t i = 0; i < p->nnodes; i++) {
        const reb_node *n = &p->nodes[i];
        human(n->used, a, sizeof a);
        human(n->after, b, sizeof b);
        human(n->used_memory, r, sizeof r);
        human(n->values, v, sizeof v);
        if (n->maxmemory)
            human(n->maxmemory, m, sizeof m);
        else
            snprintf(m, sizeof m, "none");
        printf("master %s %.8s: %zu slots, %s (used_memory %s + filters %s) -> %s, maxmemory "
               "%s\n",
               n->addr, n->id, n->slots, a, r, v, b, m);
    }
    for (size_t i = 0; i < p->nmoves; i++) {
        const reb_move *mv = &p->moves[i];
        human(mv->bytes, a, sizeof a);
        printf("move slot %d (%llu keys, %s): %s -> %s\n", mv->slot, mv->keys, a,
               p->nodes[mv->from].addr, p->nodes[mv->to].addr);
    }
    for (size_t i = 0; i < p->nrefused; i++)
        printf("refused: %s\n", p->refused[i]);
    human(spread(p, false), a, sizeof a);
    human(spread(p, true), b, sizeof b);
    printf("%zu moves, %zu refused; spread between masters %s -> %s\n", p->nmoves, p->nrefused, a,
           b);
}

static void progress(void *arg, size_t done, size_t total, const reb_move *m)
{
    const reb_plan *p = arg;
    if (m)
        printf("moving slot %d (%zu/%zu): %s -> %s\n", m->slot, done + 1, total,
               p->nodes[m->from].addr, p->nodes[m->to].addr);
    else
        printf("done: %zu slots moved\n", done);
    fflush(stdout);
}

int cmd_rebalance(int argc, char **argv)
{
    const char *seed = NULL;
    double tolerance = 0.1;
    bool apply = false;
    rc_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = rc_opts_arg(&o, argc, argv, &i, "bloomery rebalance");
        if (r < 0)
            return CLI_USAGE;
        if (r > 0)
            continue;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return CLI_OK;
        } else if (strcmp(a, "--apply") == 0) {
            apply = true;
        } else if ((strcmp(a, "--cluster") == 0 || strcmp(a, "--tolerance") == 0) && i + 1 < argc) {
            if (strcmp(a, "--cluster") == 0)
                seed = argv[++i];
            else if (cli_parse_double(argv[++i], &tolerance) != 0 || tolerance < 0 ||
                     tolerance >= 1) {
                fprintf(stderr, "bloomery rebalance: --tolerance must be in [0, 1)\n");
                return CLI_USAGE;
            }
        } else {
            fprintf(stderr, "bloomery rebalance: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return CLI_USAGE;
        }
    }
    const char *bad = rc_opts_finish(&o);
    if (!seed || bad) {
        fprintf(stderr, "bloomery rebalance: %s\n", bad ? bad : "--cluster HOST:PORT is needed");
        return CLI_USAGE;
    }
    reb_plan p;
    char err[1024];
    if (reb_plan_make(seed, &o, tolerance, &p, err, sizeof err) != 0) {
        fprintf(stderr, "bloomery rebalance: %s\n", err);
        return CLI_ERROR;
    }
    print_plan(&p);
    int rc = CLI_OK;
    if (apply && p.nmoves > 0 && reb_plan_apply(&p, &o, progress, &p, err, sizeof err) != 0) {
        fprintf(stderr, "bloomery rebalance: %s\n", err);
        rc = CLI_ERROR;
    }
    reb_plan_free(&p);
    return rc;
}

/* The deployment's topology, rebuilt every second by a thread of its own so
 * that a failover, a reshard or a node added or gone shows within seconds
 * without a restart, and requests only read memory:
 *   Sentinel: per --master-name, the first Sentinel that answers says the
 *     master, the replicas (with their flags), the other Sentinels, the
 *     quorum and whether it can be reached (CKQUORUM);
 *   Cluster: CLUSTER NODES from any node that answers (the seed, then
 *     every node known), each master a group with its slots;
 *   nodes: the addresses given, the replicas their INFO lists and the
 *     master a replica names, each master a group.
 * Then INFO from every node: memory, ops/s, replication offset and link.
 * A group whose master changed between two rounds had a failover (the
 * time kept as last_failover_ms); one with fewer replicas up than it ever
 * had is missing a replica. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "console.h"

#define MONITOR_TIMEOUT_MS 1500
#define REFRESH_MS 1000
#define MAX_NODES 256
#define MAX_GROUPS 256

static cn_topo *current;
static pthread_mutex_t topo_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t wake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static unsigned long long generation, asked;
static pthread_t thread;
static bool running;

/* What a group was last round: its master, failovers, the replicas it had. */
typedef struct past {
    char key[CN_ADDR];
    char master[CN_ADDR];
    long long failover_ms;
    size_t most_replicas;
} past;
static past pasts[MAX_GROUPS];
static size_t npasts;

long long cn_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const cn_topo *fleet_lock(void)
{
    pthread_mutex_lock(&topo_lock);
    return current;
}

void fleet_unlock(void) { pthread_mutex_unlock(&topo_lock); }

const cn_node *fleet_node(const cn_topo *t, const char *addr)
{
    for (size_t i = 0; t && i < t->nnodes; i++)
        if (strcmp(t->nodes[i].addr, addr) == 0)
            return &t->nodes[i];
    return NULL;
}

int fleet_group_of_key(const cn_topo *t, const char *key, size_t len)
{
    if (!t || cn_cfg.mode != CN_MODE_CLUSTER)
        return -1;
    return t->slot_group[slot_of(key, len)];
}

static void topo_free(cn_topo *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->ngroups; i++)
        free(t->groups[i].slots);
    free(t->nodes);
    free(t->groups);
    free(t);
}

static cn_node *add_node(cn_topo *t, const char *addr)
{
    for (size_t i = 0; i < t->nnodes; i++)
        if (strcmp(t->nodes[i].addr, addr) == 0)
            return &t->nodes[i];
    if (t->nnodes == MAX_NODES || !*addr)
        return NULL;
    cn_node *n = &t->nodes[t->nnodes++];
    memset(n, 0, sizeof(*n));
    snprintf(n->addr, sizeof(n->addr), "%s", addr);
    n->group = -1;
    n->lag = -1;
    n->last_failover_ms = -1;
    n->link = CN_LINK_UNREACHABLE;
    return n;
}

static cn_group *add_group(cn_topo *t, const char *name)
{
    for (size_t i = 0; i < t->ngroups; i++)
        if (strcmp(t->groups[i].name, name) == 0)
            return &t->groups[i];
    if (t->ngroups == MAX_GROUPS)
        return NULL;
    cn_group *g = &t->groups[t->ngroups++];
    memset(g, 0, sizeof(*g));
    snprintf(g->name, sizeof(g->name), "%s", name);
    g->quorum = g->sentinels = -1;
    g->last_failover_ms = -1;
    return g;
}

static void add_replica(cn_group *g, const char *addr)
{
    for (size_t i = 0; i < g->nreplicas; i++)
        if (strcmp(g->replicas[i], addr) == 0)
            return;
    if (g->nreplicas < CN_MAX_REPLICAS)
        snprintf(g->replicas[g->nreplicas++], CN_ADDR, "%s", addr);
}

static rc_value *monitor_call(const char *addr, char *err, size_t errlen, size_t argc,
                              const char *const *argv)
{
    rc_conn *c = pool_get(addr, err, errlen);
    if (!c)
        return NULL;
    rc_value *v = rc_call(c, MONITOR_TIMEOUT_MS, err, errlen, argc, argv, NULL);
    pool_put(c, v != NULL);
    return v;
}

/* A field of a flat key/value array (SENTINEL MASTER's, a RESP3 map). */
static const char *kv(const rc_value *v, const char *key)
{
    if (!v || v->type != '*')
        return NULL;
    for (size_t i = 0; i + 1 < v->n; i += 2)
        if (v->elem[i].str && strcmp(v->elem[i].str, key) == 0)
            return v->elem[i + 1].str;
    return NULL;
}

static void join_addr(char *out, const char *ip, const char *port)
{
    /* Truncation leaves an address no node has: it is then unreachable. */
    int n = strchr(ip, ':') ? snprintf(out, CN_ADDR, "[%.40s]:%.8s", ip, port)
                            : snprintf(out, CN_ADDR, "%.48s:%.8s", ip, port);
    (void)n;
}

/* ---- Sentinel ---- */

static void read_sentinel_group(cn_topo *t, const cn_sentinel_group *sg)
{
    cn_group *g = add_group(t, sg->name);
    if (!g)
        return;
    char err[160] = "no Sentinel answered";
    for (size_t s = 0; s < sg->nsentinels; s++) {
        rc_conn *c = pool_get(sg->sentinels[s], err, sizeof(err));
        if (!c)
            continue;
        const char *m[] = {"SENTINEL", "MASTER", sg->name};
        const char *r[] = {"SENTINEL", "REPLICAS", sg->name};
        const char *o[] = {"SENTINEL", "SENTINELS", sg->name};
        const char *q[] = {"SENTINEL", "CKQUORUM", sg->name};
        const char *const *argv[] = {m, r, o, q};
        size_t argc[] = {3, 3, 3, 3};
        rc_value *rep[4];
        bool ok = pool_pipeline(c, 4, argc, argv, NULL, rep, MONITOR_TIMEOUT_MS);
        pool_put(c, ok);
        if (ok && rv_err(rep[0])) {
            snprintf(err, sizeof(err), "%s", rv_err(rep[0]));
            ok = false;
        }
        if (ok) {
            const char *ip = kv(rep[0], "ip"), *port = kv(rep[0], "port");
            const char *flags = kv(rep[0], "flags");
            const char *quorum = kv(rep[0], "quorum");
            if (ip && port)
                join_addr(g->master, ip, port);
            g->quorum = quorum ? atoi(quorum) : -1;
            g->master_down = !flags || strstr(flags, "s_down") || strstr(flags, "o_down");
            g->sentinels = 1 + (rep[2] && rep[2]->type == '*' ? (int)rep[2]->n : 0);
            g->ok = !g->master_down && rep[3] && rep[3]->type == '+';
            if (rep[3] && rep[3]->type == '-')
                snprintf(g->error, sizeof(g->error), "%s", rep[3]->str);
            cn_node *mn = add_node(t, g->master);
            if (mn) {
                mn->group = (int)(g - t->groups);
                mn->master = true;
            }
            for (size_t i = 0; rep[1] && rep[1]->type == '*' && i < rep[1]->n; i++) {
                const rc_value *e = &rep[1]->elem[i];
                const char *rip = kv(e, "ip"), *rport = kv(e, "port"), *rf = kv(e, "flags");
                if (!rip || !rport)
                    continue;
                char a[CN_ADDR];
                join_addr(a, rip, rport);
                add_replica(g, a);
                cn_node *rn = add_node(t, a);
                if (rn) {
                    rn->group = (int)(g - t->groups);
                    snprintf(rn->master_addr, sizeof(rn->master_addr), "%s", g->master);
                }
                if (rf && !strstr(rf, "s_down") && !strstr(rf, "o_down") &&
                    !strstr(rf, "disconnected"))
                    g->replicas_up++;
            }
        }
        for (int i = 0; i < 4; i++)
            rc_value_free(rep[i]);
        if (ok)
            return;
    }
    g->ok = false;
    g->master_down = true;
    snprintf(g->error, sizeof(g->error), "%s", err);
}

/* ---- Cluster ---- */

static void slots_add(cn_group *g, const char *range)
{
    size_t had = g->slots ? strlen(g->slots) : 0;
    char *s = realloc(g->slots, had + strlen(range) + 2);
    if (!s)
        return;
    if (had)
        s[had++] = ' ';
    strcpy(s + had, range);
    g->slots = s;
}

/* One line of CLUSTER NODES: id addr flags master ping pong epoch link slots... */
static void cluster_line(cn_topo *t, char *line, const char *seed_host, char (*ids)[48],
                         char (*masters)[48])
{
    char *f[9], *save = NULL, *p = line;
    int n = 0;
    for (char *w; n < 8 && (w = strtok_r(p, " ", &save)); p = NULL)
        f[n++] = w;
    if (n < 8)
        return;
    char *rest = strtok_r(NULL, "", &save);
    char ip[CN_ADDR], a[CN_ADDR];
    char *at = strchr(f[1], '@'), *comma = strchr(f[1], ',');
    if (at)
        *at = '\0';
    if (comma)
        *comma = '\0';
    char *colon = strrchr(f[1], ':');
    if (!colon || strstr(f[2], "noaddr") || strstr(f[2], "handshake"))
        return;
    *colon = '\0';
    snprintf(ip, sizeof(ip), "%s", *f[1] ? f[1] : seed_host);
    join_addr(a, ip, colon + 1);
    cn_node *node = add_node(t, a);
    if (!node)
        return;
    size_t idx = (size_t)(node - t->nodes);
    snprintf(node->id, sizeof(node->id), "%s", f[0]);
    snprintf(ids[idx], 48, "%s", f[0]);
    snprintf(masters[idx], 48, "%s", f[3]);
    node->master = strstr(f[2], "master") != NULL;
    if (strstr(f[2], "fail"))
        node->link = CN_LINK_UNREACHABLE;
    if (!node->master || strstr(f[2], "fail"))
        return;
    char name[16];
    snprintf(name, sizeof(name), "%.8s", f[0]);
    cn_group *g = add_group(t, name);
    if (!g)
        return;
    node->group = (int)(g - t->groups);
    snprintf(g->master, sizeof(g->master), "%s", a);
    for (char *s2 = NULL, *w = rest ? strtok_r(rest, " ", &s2) : NULL; w;
         w = strtok_r(NULL, " ", &s2)) {
        if (*w == '[')
            continue; /* a slot being migrated or imported */
        int lo, hi;
        char *dash = strchr(w, '-');
        lo = atoi(w);
        hi = dash ? atoi(dash + 1) : lo;
        if (lo < 0 || hi >= CN_SLOTS || lo > hi)
            continue;
        for (int s = lo; s <= hi; s++)
            t->slot_group[s] = (int16_t)node->group;
        slots_add(g, w);
    }
}

static void read_cluster(cn_topo *t, const cn_topo *prev)
{
    /* The seed first, then every node known. */
    const char *try[MAX_NODES + 1];
    size_t ntry = 0;
    for (size_t i = 0; i < cn_cfg.nseeds; i++)
        try[ntry++] = cn_cfg.seeds[i];
    for (size_t i = 0; prev && i < prev->nnodes && ntry < MAX_NODES; i++)
        try[ntry++] = prev->nodes[i].addr;
    for (size_t i = 0; i < ntry; i++) {
        char err[160];
        const char *argv[] = {"CLUSTER", "NODES"};
        rc_value *v = monitor_call(try[i], err, sizeof(err), 2, argv);
        if (!v || v->type != '$') {
            rc_value_free(v);
            continue;
        }
        char host[CN_ADDR], port[16];
        if (!rc_split_addr(try[i], host, sizeof(host), port, sizeof(port)))
            snprintf(host, sizeof(host), "127.0.0.1");
        char(*ids)[48] = calloc(MAX_NODES, 48), (*masters)[48] = calloc(MAX_NODES, 48);
        if (!ids || !masters) {
            free(ids);
            free(masters);
            rc_value_free(v);
            return;
        }
        char *save = NULL;
        for (char *line = strtok_r(v->str, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            size_t l = strlen(line);
            if (l && line[l - 1] == '\r')
                line[l - 1] = '\0';
            /* strtok_r state is per line: copy the line out first */
            char buf[8192];
            snprintf(buf, sizeof(buf), "%s", line);
            cluster_line(t, buf, host, ids, masters);
        }
        /* Replicas into their masters' groups. */
        for (size_t k = 0; k < t->nnodes; k++) {
            if (t->nodes[k].master)
                continue;
            for (size_t m = 0; m < t->nnodes; m++)
                if (strcmp(ids[m], masters[k]) == 0 && t->nodes[m].group >= 0) {
                    cn_group *g = &t->groups[t->nodes[m].group];
                    t->nodes[k].group = t->nodes[m].group;
                    snprintf(t->nodes[k].master_addr, CN_ADDR, "%s", t->nodes[m].addr);
                    add_replica(g, t->nodes[k].addr);
                }
        }
        free(ids);
        free(masters);
        rc_value_free(v);
        return;
    }
}

/* ---- INFO ---- */

static void read_info(cn_topo *t, const cn_topo *prev, cn_node *n, bool nodes_mode)
{
    char err[160];
    const char *argv[] = {"INFO"};
    rc_value *v = monitor_call(n->addr, err, sizeof(err), 1, argv);
    if (!v || v->type != '$') {
        snprintf(n->error, sizeof(n->error), "%s", v && v->type == '-' ? v->str : err);
        n->link = CN_LINK_UNREACHABLE;
        rc_value_free(v);
        /* A node gone keeps the role it had: a master that died is shown as
         * a master down, its filters kept, not as a stranger. */
        const cn_node *was = nodes_mode ? fleet_node(prev, n->addr) : NULL;
        if (was) {
            n->master = was->master;
            if (!n->master_addr[0])
                snprintf(n->master_addr, sizeof(n->master_addr), "%s", was->master_addr);
        }
        return;
    }
    n->used = rc_info_ll(v, "used_memory");
    n->maxmemory = rc_info_ll(v, "maxmemory");
    n->sysmem = rc_info_ll(v, "total_system_memory");
    n->ops = rc_info_ll(v, "instantaneous_ops_per_sec");
    char role[16] = "", mh[CN_ADDR] = "", mp[16] = "", ls[16] = "";
    rc_info_field(v, "role", role, sizeof(role));
    bool master = strcmp(role, "master") == 0;
    if (nodes_mode || cn_cfg.mode == CN_MODE_SENTINEL)
        n->master = master; /* what the node says it is now */
    if (master) {
        n->offset = rc_info_ll(v, "master_repl_offset");
        n->link = CN_LINK_UP;
    } else {
        n->offset = rc_info_ll(v, "slave_repl_offset");
        rc_info_field(v, "master_link_status", ls, sizeof(ls));
        n->link = strcmp(ls, "up") == 0 ? CN_LINK_UP : CN_LINK_DOWN;
        if (rc_info_field(v, "master_host", mh, sizeof(mh)) &&
            rc_info_field(v, "master_port", mp, sizeof(mp)) && !n->master_addr[0])
            join_addr(n->master_addr, mh, mp);
    }
    if (nodes_mode && master) {
        /* Its replicas: "slaveN:ip=...,port=...,state=...,offset=...". */
        for (int i = 0; i < CN_MAX_REPLICAS; i++) {
            char key[24], val[256], ip[CN_ADDR], port[16], a[CN_ADDR];
            snprintf(key, sizeof(key), "slave%d", i);
            if (!rc_info_field(v, key, val, sizeof(val)))
                break;
            char *pi = strstr(val, "ip="), *pp = strstr(val, "port=");
            if (!pi || !pp)
                continue;
            snprintf(ip, sizeof(ip), "%.*s", (int)strcspn(pi + 3, ","), pi + 3);
            snprintf(port, sizeof(port), "%.*s", (int)strcspn(pp + 5, ","), pp + 5);
            join_addr(a, ip, port);
            cn_node *r = add_node(t, a);
            if (r && !r->master_addr[0])
                snprintf(r->master_addr, sizeof(r->master_addr), "%s", n->addr);
            n = &t->nodes[(size_t)(n - t->nodes)]; /* add_node never moves nodes */
        }
    }
    rc_value_free(v);
}

static past *past_of(const char *key)
{
    for (size_t i = 0; i < npasts; i++)
        if (strcmp(pasts[i].key, key) == 0)
            return &pasts[i];
    if (npasts == MAX_GROUPS)
        return NULL;
    past *p = &pasts[npasts++];
    memset(p, 0, sizeof(*p));
    snprintf(p->key, sizeof(p->key), "%s", key);
    p->failover_ms = -1;
    return p;
}

static cn_topo *build(const cn_topo *prev)
{
    cn_topo *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->nodes = calloc(MAX_NODES, sizeof(cn_node));
    t->groups = calloc(MAX_GROUPS, sizeof(cn_group));
    if (!t->nodes || !t->groups) {
        topo_free(t);
        return NULL;
    }
    for (int s = 0; s < CN_SLOTS; s++)
        t->slot_group[s] = -1;
    bool nodes_mode = cn_cfg.mode == CN_MODE_NODES;
    if (cn_cfg.mode == CN_MODE_SENTINEL) {
        for (size_t i = 0; i < cn_cfg.ngroups; i++)
            read_sentinel_group(t, &cn_cfg.groups[i]);
    } else if (cn_cfg.mode == CN_MODE_CLUSTER) {
        read_cluster(t, prev);
    } else {
        for (size_t i = 0; i < cn_cfg.nseeds; i++)
            add_node(t, cn_cfg.seeds[i]);
    }
    /* INFO everywhere; in nodes mode the list grows with the replicas found. */
    for (size_t i = 0; i < t->nnodes; i++)
        read_info(t, prev, &t->nodes[i], nodes_mode);
    if (nodes_mode) {
        /* A replica's master not given: INFO it too (one level). */
        size_t had = t->nnodes;
        for (size_t i = 0; i < had; i++)
            if (!t->nodes[i].master && t->nodes[i].master_addr[0] &&
                !fleet_node(t, t->nodes[i].master_addr)) {
                cn_node *m = add_node(t, t->nodes[i].master_addr);
                if (m)
                    read_info(t, prev, m, true);
            }
        for (size_t i = 0; i < t->nnodes; i++)
            if (t->nodes[i].master) {
                cn_group *g = add_group(t, t->nodes[i].addr);
                if (!g)
                    continue;
                snprintf(g->master, sizeof(g->master), "%s", t->nodes[i].addr);
                t->nodes[i].group = (int)(g - t->groups);
                g->ok = t->nodes[i].link == CN_LINK_UP;
                g->master_down = !g->ok;
            }
        for (size_t i = 0; i < t->nnodes; i++) {
            cn_node *n = &t->nodes[i];
            if (n->master || !n->master_addr[0])
                continue;
            const cn_node *m = fleet_node(t, n->master_addr);
            if (m && m->group >= 0) {
                n->group = m->group;
                add_replica(&t->groups[m->group], n->addr);
            }
        }
    }
    /* The derived fields: lag, replicas up, failovers, a replica missing. */
    long long now = cn_now_ms();
    for (size_t i = 0; i < t->ngroups; i++) {
        cn_group *g = &t->groups[i];
        const cn_node *m = fleet_node(t, g->master);
        if (cn_cfg.mode == CN_MODE_CLUSTER) {
            g->ok = m && m->link == CN_LINK_UP;
            g->master_down = !g->ok;
        }
        if (cn_cfg.mode != CN_MODE_SENTINEL) {
            g->replicas_up = 0;
            for (size_t r = 0; r < g->nreplicas; r++) {
                const cn_node *rn = fleet_node(t, g->replicas[r]);
                if (rn && rn->link == CN_LINK_UP)
                    g->replicas_up++;
            }
        }
        for (size_t r = 0; r < g->nreplicas; r++) {
            cn_node *rn = (cn_node *)fleet_node(t, g->replicas[r]);
            if (rn && m && rn->link != CN_LINK_UNREACHABLE && m->link == CN_LINK_UP)
                rn->lag = m->offset > rn->offset ? m->offset - rn->offset : 0;
        }
        /* Cluster groups are named by their master, which a failover
         * changes: remembered by their first slot instead. */
        char key[CN_ADDR];
        if (cn_cfg.mode == CN_MODE_CLUSTER && g->slots)
            snprintf(key, sizeof(key), "slot %d", atoi(g->slots));
        else
            snprintf(key, sizeof(key), "%s", g->name);
        past *p = past_of(key);
        if (p) {
            if (p->master[0] && g->master[0] && strcmp(p->master, g->master) != 0)
                p->failover_ms = now;
            if (g->master[0])
                snprintf(p->master, sizeof(p->master), "%s", g->master);
            if ((size_t)g->replicas_up > p->most_replicas)
                p->most_replicas = (size_t)g->replicas_up;
            if (g->nreplicas > p->most_replicas && cn_cfg.mode == CN_MODE_SENTINEL)
                p->most_replicas = g->nreplicas;
            g->last_failover_ms = p->failover_ms;
            g->missing_replica = (size_t)g->replicas_up < p->most_replicas;
        }
        for (size_t k = 0; k < t->nnodes; k++)
            if (t->nodes[k].group == (int)i)
                t->nodes[k].last_failover_ms = g->last_failover_ms;
    }
    t->updated_ms = now;
    return t;
}

static void *loop(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&wake_lock);
        unsigned long long want = asked;
        pthread_mutex_unlock(&wake_lock);
        if (cn_stopping)
            break;
        const cn_topo *prev = fleet_lock();
        fleet_unlock(); /* prev is only replaced by this thread */
        cn_topo *t = build(prev);
        if (t) {
            pthread_mutex_lock(&topo_lock);
            cn_topo *old = current;
            current = t;
            pthread_mutex_unlock(&topo_lock);
            topo_free(old);
        }
        pthread_mutex_lock(&wake_lock);
        generation = want + 1 > generation ? want + 1 : generation;
        pthread_cond_broadcast(&wake);
        if (asked == want && !cn_stopping) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += REFRESH_MS * 1000000L;
            ts.tv_sec += ts.tv_nsec / 1000000000L;
            ts.tv_nsec %= 1000000000L;
            pthread_cond_timedwait(&wake, &wake_lock, &ts);
        }
        pthread_mutex_unlock(&wake_lock);
    }
    return NULL;
}

void fleet_refresh_now(void)
{
    pthread_mutex_lock(&wake_lock);
    unsigned long long want = ++asked;
    pthread_cond_broadcast(&wake);
    while (generation < want + 1 && running && !cn_stopping)
        pthread_cond_wait(&wake, &wake_lock);
    pthread_mutex_unlock(&wake_lock);
}

bool fleet_start(char *err, size_t errlen)
{
    cn_topo *t = build(NULL);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    current = t;
    if (pthread_create(&thread, NULL, loop, NULL) != 0) {
        snprintf(err, errlen, "cannot start the topology thread");
        return false;
    }
    running = true;
    return true;
}

void fleet_stop(void)
{
    if (!running)
        return;
    pthread_mutex_lock(&wake_lock);
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&wake_lock);
    pthread_join(thread, NULL);
    running = false;
    pthread_mutex_lock(&wake_lock);
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&wake_lock);
    topo_free(current);
    current = NULL;
}

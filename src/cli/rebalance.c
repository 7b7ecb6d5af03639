/* Rebalancing a Redis Cluster by memory (rebalance.h): the cluster read
 * through rcall.h, the plan made by rebalance_plan.c, the moves made with
 * the steps of `redis-cli --cluster reshard`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rebalance.h"
#include "rebalance_plan.h"

#define NSLOTS 16384
/* Commands that may wait on the other node (MIGRATE) or walk many keys. */
#define CMD_TIMEOUT_MS 120000
/* MIGRATE's own timeout for its I/O with the target, and keys per call. */
#define MIGRATE_TIMEOUT "60000"
#define MIGRATE_BATCH 10
/* Slots whose keys are read at once when sizing them. */
#define KEY_WINDOW 64
#define MIGRATE_BATCH_STR "10"

static int open_node(rc_conn *c, const char *addr, const rc_opts *o, char *err, size_t errlen)
{
    char host[64], port[16];
    if (!rc_split_addr(addr, host, sizeof host, port, sizeof port)) {
        snprintf(err, errlen, "malformed address %s", addr);
        return -1;
    }
    char why[512];
    if (rc_open(c, host, port, o, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s: %s", addr, why);
        return -1;
    }
    return 0;
}

/* A reply read after rc_send: NULL with err on failure or an error reply. */
static rc_value *read_ok(rc_conn *c, const char *addr, char *err, size_t errlen)
{
    char why[512];
    rc_value *v = rc_read(c, CMD_TIMEOUT_MS, why, sizeof why);
    if (!v) {
        snprintf(err, errlen, "%s: %s", addr, why);
        return NULL;
    }
    if (v->type == '-') {
        snprintf(err, errlen, "%s: %s", addr, v->str);
        rc_value_free(v);
        return NULL;
    }
    return v;
}

static rc_value *call_ok(rc_conn *c, const char *addr, char *err, size_t errlen, size_t argc,
                         const char *const *argv)
{
    if (rc_send(c, argc, argv, NULL) != 0) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return read_ok(c, addr, err, errlen);
}

/* ---- reading the cluster ---- */

typedef struct master_slots {
    int *slots;
    size_t n;
} master_slots;

static bool has_flag(const char *flags, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *f = flags; *f;) {
        const char *end = strchr(f, ',');
        size_t len = end ? (size_t)(end - f) : strlen(f);
        if (len == n && memcmp(f, flag, n) == 0)
            return true;
        if (!end)
            break;
        f = end + 1;
    }
    return false;
}

/* The masters of CLUSTER NODES' text into p->nodes and their slots. */
static int parse_nodes(char *text, reb_plan *p, master_slots **ms, char *err, size_t errlen)
{
    *ms = NULL;
    size_t cap = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        /* id addr flags master ping pong epoch link slot... */
        char *f[8], *s2 = NULL, *t = strtok_r(line, " \r", &s2);
        size_t nf = 0;
        for (; t && nf < 8; t = strtok_r(NULL, " \r", &s2))
            f[nf++] = t;
        if (nf < 8)
            continue;
        if (!has_flag(f[2], "master") || has_flag(f[2], "handshake") || has_flag(f[2], "noaddr"))
            continue;
        if (has_flag(f[2], "fail") || has_flag(f[2], "fail?")) {
            snprintf(err, errlen, "master %s is failing: fix the cluster first", f[1]);
            return -1;
        }
        if (p->nnodes == cap) {
            cap = cap ? 2 * cap : 8;
            reb_node *n = realloc(p->nodes, cap * sizeof *n);
            master_slots *m = realloc(*ms, cap * sizeof *m);
            if (n)
                p->nodes = n;
            if (m)
                *ms = m;
            if (!n || !m) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
        }
        reb_node *node = &p->nodes[p->nnodes];
        master_slots *m = &(*ms)[p->nnodes];
        memset(node, 0, sizeof *node);
        memset(m, 0, sizeof *m);
        p->nnodes++;
        snprintf(node->id, sizeof node->id, "%s", f[0]);
        /* ip:port@cport[,hostname] */
        f[1][strcspn(f[1], "@,")] = '\0';
        snprintf(node->addr, sizeof node->addr, "%s", f[1]);
        for (; t; t = strtok_r(NULL, " \r", &s2)) {
            if (t[0] == '[') {
                snprintf(err, errlen,
                         "slot %s of %s is being moved: finish it first (redis-cli --cluster "
                         "fix)",
                         t, node->addr);
                return -1;
            }
            char *dash = strchr(t, '-');
            int lo = atoi(t), hi = dash ? atoi(dash + 1) : lo;
            if (lo < 0 || hi >= NSLOTS || hi < lo)
                continue;
            int *sl = realloc(m->slots, (m->n + (size_t)(hi - lo + 1)) * sizeof *sl);
            if (!sl) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            m->slots = sl;
            for (int x = lo; x <= hi; x++)
                m->slots[m->n++] = x;
        }
        node->slots = m->n;
    }
    if (p->nnodes == 0) {
        snprintf(err, errlen, "no master in CLUSTER NODES");
        return -1;
    }
    return 0;
}

static int grow_slots(reb_slot **s, size_t *cap, size_t n)
{
    if (n < *cap)
        return 0;
    *cap = *cap ? 2 * *cap : 256;
    reb_slot *x = realloc(*s, *cap * sizeof *x);
    if (!x)
        return -1;
    *s = x;
    return 0;
}

/* The types bloomery.so registers (ours and RedisBloom's names, whose
 * values it holds too): their values live outside used_memory. */
static bool is_module_type(const char *t)
{
    return strncmp(t, "bloomer", 7) == 0 || strncmp(t, "MBbloom", 7) == 0;
}

/* used_memory and maxmemory, then the keys and bytes of every slot of one
 * master with keys: COUNTKEYSINSLOT for all its slots, GETKEYSINSLOT for
 * those with keys, MEMORY USAGE and TYPE for every key, each pipelined. */
static int read_master(rc_conn *c, reb_node *node, const master_slots *m, size_t owner,
                       reb_slot **slots, size_t *nslots, size_t *cap, char *err, size_t errlen)
{
    const char *info[] = {"INFO", "memory"};
    rc_value *v = call_ok(c, node->addr, err, errlen, 2, info);
    if (!v)
        return -1;
    node->used_memory = (unsigned long long)rc_info_ll(v, "used_memory");
    node->maxmemory = (unsigned long long)rc_info_ll(v, "maxmemory");
    rc_value_free(v);

    char num[32], cnt[32];
    for (size_t i = 0; i < m->n; i++) {
        snprintf(num, sizeof num, "%d", m->slots[i]);
        const char *a[] = {"CLUSTER", "COUNTKEYSINSLOT", num};
        if (rc_send(c, 3, a, NULL) != 0)
            goto oom;
    }
    size_t first = *nslots;
    for (size_t i = 0; i < m->n; i++) {
        if (!(v = read_ok(c, node->addr, err, errlen)))
            return -1;
        long long keys = v->type == ':' ? v->integer : 0;
        rc_value_free(v);
        if (keys <= 0)
            continue;
        if (grow_slots(slots, cap, *nslots) != 0)
            goto oom;
        (*slots)[(*nslots)++] =
            (reb_slot){.slot = m->slots[i], .owner = owner, .keys = (unsigned long long)keys};
    }
    /* Slots a window at a time: their key lists, then every key's size and
     * type, so that the replies come back in the order they are read. */
    for (size_t w = first; w < *nslots; w += KEY_WINDOW) {
        size_t end = w + KEY_WINDOW < *nslots ? w + KEY_WINDOW : *nslots;
        rc_value *lists[KEY_WINDOW] = {0};
        int rc = 0;
        for (size_t i = w; i < end; i++) {
            snprintf(num, sizeof num, "%d", (*slots)[i].slot);
            snprintf(cnt, sizeof cnt, "%llu", (*slots)[i].keys);
            const char *a[] = {"CLUSTER", "GETKEYSINSLOT", num, cnt};
            if (rc_send(c, 4, a, NULL) != 0)
                goto oom;
        }
        for (size_t i = w; rc == 0 && i < end; i++)
            if (!(lists[i - w] = read_ok(c, node->addr, err, errlen)))
                rc = -1;
        for (size_t i = w; rc == 0 && i < end; i++) {
            const rc_value *keys = lists[i - w];
            for (size_t k = 0; keys->type == '*' && k < keys->n; k++) {
                const rc_value *key = &keys->elem[k];
                const char *a[] = {"MEMORY", "USAGE", key->str};
                const size_t lens[] = {6, 5, key->len};
                const char *t[] = {"TYPE", key->str};
                const size_t tlens[] = {4, key->len};
                if (key->type == '$' &&
                    (rc_send(c, 3, a, lens) != 0 || rc_send(c, 2, t, tlens) != 0)) {
                    snprintf(err, errlen, "out of memory");
                    rc = -1;
                    break;
                }
            }
        }
        for (size_t i = w; rc == 0 && i < end; i++) {
            const rc_value *keys = lists[i - w];
            unsigned long long bytes = 0;
            for (size_t k = 0; rc == 0 && keys->type == '*' && k < keys->n; k++) {
                if (keys->elem[k].type != '$')
                    continue;
                rc_value *mu = read_ok(c, node->addr, err, errlen);
                rc_value *ty = mu ? read_ok(c, node->addr, err, errlen) : NULL;
                if (!ty) {
                    rc = -1;
                } else {
                    unsigned long long b =
                        mu->type == ':' && mu->integer > 0 ? (unsigned long long)mu->integer : 0;
                    if (ty->type == '+' && is_module_type(ty->str))
                        node->values += b;
                    bytes += b;
                }
                rc_value_free(mu);
                rc_value_free(ty);
            }
            (*slots)[i].bytes = bytes;
        }
        for (size_t i = 0; i < KEY_WINDOW; i++)
            rc_value_free(lists[i]);
        if (rc != 0)
            return -1;
    }
    node->used = node->used_memory + node->values;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -1;
}

int reb_plan_make(const char *seed, const rc_opts *o, double tolerance, reb_plan *out, char *err,
                  size_t errlen)
{
    memset(out, 0, sizeof *out);
    rc_conn c;
    if (open_node(&c, seed, o, err, errlen) != 0)
        return -1;
    const char *nodes_cmd[] = {"CLUSTER", "NODES"};
    rc_value *v = call_ok(&c, seed, err, errlen, 2, nodes_cmd);
    rc_close(&c);
    if (!v)
        return -1;
    if (v->type != '$') {
        rc_value_free(v);
        snprintf(err, errlen, "%s: CLUSTER NODES did not answer text", seed);
        return -1;
    }
    master_slots *ms = NULL;
    reb_slot *slots = NULL;
    size_t nslots = 0, cap = 0;
    int rc = parse_nodes(v->str, out, &ms, err, errlen);
    rc_value_free(v);
    for (size_t i = 0; rc == 0 && i < out->nnodes; i++) {
        if (open_node(&c, out->nodes[i].addr, o, err, errlen) != 0) {
            rc = -1;
            break;
        }
        rc = read_master(&c, &out->nodes[i], &ms[i], i, &slots, &nslots, &cap, err, errlen);
        rc_close(&c);
    }
    if (rc == 0 && reb_plan_compute(out, slots, nslots, tolerance) != 0) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    for (size_t i = 0; ms && i < out->nnodes; i++)
        free(ms[i].slots);
    free(ms);
    free(slots);
    if (rc != 0)
        reb_plan_free(out);
    return rc;
}

/* ---- moving slots ---- */

static int setslot(rc_conn *c, const char *addr, int slot, const char *how, const char *id,
                   char *err, size_t errlen)
{
    char num[16];
    snprintf(num, sizeof num, "%d", slot);
    const char *a[] = {"CLUSTER", "SETSLOT", num, how, id};
    rc_value *v = call_ok(c, addr, err, errlen, id ? 5 : 4, a);
    if (!v)
        return -1;
    rc_value_free(v);
    return 0;
}

/* MIGRATE of every key in the slot, MIGRATE_BATCH at a time; *moved counts
 * the keys moved. */
static int migrate_keys(rc_conn *src, const reb_node *from, const reb_node *to, int slot,
                        const rc_opts *o, unsigned long long *moved, char *err, size_t errlen)
{
    char host[64], port[16], num[16];
    if (!rc_split_addr(to->addr, host, sizeof host, port, sizeof port)) {
        snprintf(err, errlen, "malformed address %s", to->addr);
        return -1;
    }
    snprintf(num, sizeof num, "%d", slot);
    for (;;) {
        const char *get[] = {"CLUSTER", "GETKEYSINSLOT", num, MIGRATE_BATCH_STR};
        rc_value *keys = call_ok(src, from->addr, err, errlen, 4, get);
        if (!keys)
            return -1;
        if (keys->type != '*' || keys->n == 0) {
            rc_value_free(keys);
            return 0;
        }
        /* MIGRATE host port "" 0 timeout [AUTH pass | AUTH2 user pass] KEYS k... */
        const char *a[9 + MIGRATE_BATCH];
        size_t lens[9 + MIGRATE_BATCH], n = 0;
        const char *fixed[] = {"MIGRATE", host, port, "", "0", MIGRATE_TIMEOUT};
        for (size_t i = 0; i < 6; i++)
            a[n++] = fixed[i];
        if (o->pass && o->user) {
            a[n++] = "AUTH2";
            a[n++] = o->user;
            a[n++] = o->pass;
        } else if (o->pass) {
            a[n++] = "AUTH";
            a[n++] = o->pass;
        }
        a[n++] = "KEYS";
        for (size_t i = 0; i < n; i++)
            lens[i] = strlen(a[i]);
        size_t nk = 0;
        for (size_t k = 0; k < keys->n && nk < MIGRATE_BATCH; k++) {
            if (keys->elem[k].type != '$')
                continue;
            a[n] = keys->elem[k].str;
            lens[n++] = keys->elem[k].len;
            nk++;
        }
        rc_value *r = NULL;
        if (rc_send(src, n, a, lens) != 0)
            snprintf(err, errlen, "out of memory");
        else
            r = read_ok(src, from->addr, err, errlen);
        rc_value_free(keys);
        if (!r)
            return -1;
        rc_value_free(r);
        *moved += nk;
    }
}

static int move_slot(rc_conn *conns, const reb_plan *p, const reb_move *m, const rc_opts *o,
                     char *err, size_t errlen)
{
    const reb_node *from = &p->nodes[m->from], *to = &p->nodes[m->to];
    rc_conn *src = &conns[m->from], *dst = &conns[m->to];
    /* The order of redis-cli's reshard: the target imports first, so that
     * a client the source sends there with ASK is served. */
    if (setslot(dst, to->addr, m->slot, "IMPORTING", from->id, err, errlen) != 0)
        return -1;
    if (setslot(src, from->addr, m->slot, "MIGRATING", to->id, err, errlen) != 0) {
        char ignore[1024];
        setslot(dst, to->addr, m->slot, "STABLE", NULL, ignore, sizeof ignore);
        return -1;
    }
    unsigned long long moved = 0;
    if (migrate_keys(src, from, to, m->slot, o, &moved, err, errlen) != 0) {
        if (moved == 0) {
            /* Nothing moved yet: the slot goes back to how it was. */
            char ignore[1024];
            setslot(src, from->addr, m->slot, "STABLE", NULL, ignore, sizeof ignore);
            setslot(dst, to->addr, m->slot, "STABLE", NULL, ignore, sizeof ignore);
        } else {
            size_t len = strlen(err);
            snprintf(err + len, errlen - len,
                     " (slot %d is left MIGRATING on %s and IMPORTING on %s with %llu keys "
                     "moved: `redis-cli --cluster fix` finishes it)",
                     m->slot, from->addr, to->addr, moved);
        }
        return -1;
    }
    /* The target owns it first (it then bumps its epoch), then the source,
     * then the other masters, which would learn it from the bus anyway. */
    if (setslot(dst, to->addr, m->slot, "NODE", to->id, err, errlen) != 0 ||
        setslot(src, from->addr, m->slot, "NODE", to->id, err, errlen) != 0)
        return -1;
    for (size_t i = 0; i < p->nnodes; i++) {
        if (i == m->from || i == m->to)
            continue;
        char ignore[1024];
        setslot(&conns[i], p->nodes[i].addr, m->slot, "NODE", to->id, ignore, sizeof ignore);
    }
    return 0;
}

int reb_plan_apply(const reb_plan *p, const rc_opts *o, reb_progress cb, void *arg, char *err,
                   size_t errlen)
{
    rc_conn *conns = calloc(p->nnodes ? p->nnodes : 1, sizeof *conns);
    if (!conns) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    size_t opened = 0;
    for (; opened < p->nnodes; opened++)
        if (open_node(&conns[opened], p->nodes[opened].addr, o, err, errlen) != 0) {
            rc = -1;
            break;
        }
    size_t done = 0;
    for (; rc == 0 && done < p->nmoves; done++) {
        if (cb)
            cb(arg, done, p->nmoves, &p->moves[done]);
        rc = move_slot(conns, p, &p->moves[done], o, err, errlen);
    }
    if (rc == 0 && cb)
        cb(arg, done, p->nmoves, NULL);
    for (size_t i = 0; i < opened; i++)
        rc_close(&conns[i]);
    free(conns);
    return rc;
}

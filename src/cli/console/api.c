/* The JSON answers of the console's GET routes (docs/CONSOLE.md, "The
 * fleet console"). Each reads the topology (fleet.c) and the filter index
 * (catalog.c) from memory; only a page's rows whose summaries are stale,
 * and a filter's own page, go to the nodes. Locks are taken in one order:
 * the topology's, then the index's. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_args.h"
#include "console.h"
#include "glob.h"

#define PER_PAGE 50
#define PER_PAGE_MAX 500
#define PAGE_MAX_AGE_MS 10000 /* a page's summaries are read again when older */

static const char *const link_names[] = {"up", "down", "unreachable"};

int api_error(textbuf *b, int status, const char *text)
{
    tb_puts(b, "{\"error\":");
    tb_json_str(b, text, strlen(text));
    tb_puts(b, "}");
    return status;
}

static void str_or_null(textbuf *b, const char *s)
{
    if (s && *s)
        tb_json_str(b, s, strlen(s));
    else
        tb_puts(b, "null");
}

static void ll_or_null(textbuf *b, long long v, bool present)
{
    if (present)
        tb_printf(b, "%lld", v);
    else
        tb_puts(b, "null");
}

static void dbl_or_null(textbuf *b, double v)
{
    if (v >= 0 && isfinite(v))
        tb_printf(b, "%.6g", v);
    else
        tb_puts(b, "null");
}

void api_value_json(textbuf *b, const rc_value *v)
{
    if (!v || v->type == '_') {
        tb_puts(b, "null");
    } else if (v->type == ':') {
        tb_printf(b, "%lld", v->integer);
    } else if (v->type == '*') {
        tb_puts(b, "[");
        for (size_t i = 0; i < v->n; i++) {
            if (i)
                tb_puts(b, ",");
            api_value_json(b, &v->elem[i]);
        }
        tb_puts(b, "]");
    } else if (v->type == '-') {
        tb_puts(b, "{\"error\":");
        tb_json_str(b, v->str, v->len);
        tb_puts(b, "}");
    } else {
        tb_json_str(b, v->str ? v->str : "", v->len);
    }
}

static int int_arg(const cn_form *q, const char *name, int def, int lo, int hi)
{
    const char *s = form_get(q, name);
    if (!s || !*s)
        return def;
    long v = strtol(s, NULL, 10);
    return v < lo ? lo : v > hi ? hi : (int)v;
}

static const cn_group *group_at(const cn_topo *t, int g)
{
    return t && g >= 0 && (size_t)g < t->ngroups ? &t->groups[g] : NULL;
}

/* The group a filter found on master belongs to now. */
static const cn_group *group_of_row(const cn_topo *t, const cn_filter *f)
{
    if (cn_cfg.mode == CN_MODE_CLUSTER)
        return group_at(t, fleet_group_of_key(t, f->name, f->len));
    const cn_node *n = fleet_node(t, f->master);
    return n ? group_at(t, n->group) : NULL;
}

static void addr_list(textbuf *b, const cn_group *g)
{
    tb_puts(b, "[");
    for (size_t i = 0; g && i < g->nreplicas; i++) {
        if (i)
            tb_puts(b, ",");
        tb_json_str(b, g->replicas[i], strlen(g->replicas[i]));
    }
    tb_puts(b, "]");
}

/* ROW of the API (docs/CONSOLE.md) without its closing brace. */
static void row_json(textbuf *b, const cn_topo *t, const cn_filter *f)
{
    const cn_group *g = group_of_row(t, f);
    const char *node = g && g->master[0] ? g->master : f->master;
    tb_puts(b, "{\"name\":");
    tb_json_str(b, f->name, f->len);
    tb_puts(b, ",\"node\":");
    str_or_null(b, node);
    tb_puts(b, ",\"replicas\":");
    addr_list(b, g);
    tb_puts(b, ",\"group\":");
    str_or_null(b, g ? g->name : NULL);
    tb_puts(b, ",\"slot\":");
    ll_or_null(b, slot_of(f->name, f->len), cn_cfg.mode == CN_MODE_CLUSTER);
    tb_printf(b, ",\"type\":\"%s\",\"layout\":", f->cuckoo ? "cuckoo" : "bloom");
    str_or_null(b, f->have ? f->layout : NULL);
    tb_puts(b, ",\"capacity\":");
    ll_or_null(b, f->capacity, f->have && f->capacity >= 0);
    tb_puts(b, ",\"items\":");
    ll_or_null(b, f->items, f->have && f->items >= 0);
    tb_puts(b, ",\"fill\":");
    dbl_or_null(b, f->have ? f->fill : -1);
    tb_puts(b, ",\"fpr\":");
    dbl_or_null(b, f->have ? f->fpr : -1);
    tb_puts(b, ",\"error_rate\":");
    dbl_or_null(b, f->have ? f->error_rate : -1);
    tb_puts(b, ",\"memory\":");
    ll_or_null(b, f->memory, f->have && f->memory >= 0);
    tb_printf(b, ",\"ttl_ms\":%lld,\"read_only\":%s,\"updated_ms\":%lld", f->have ? f->ttl_ms : -1,
              f->read_only ? "true" : "false", f->updated_ms);
}

/* ---- /api/me ---- */

int api_me(const cn_who *w, textbuf *b)
{
    const char *user = w->given ? w->user : cn_cfg.opts.user ? cn_cfg.opts.user : "default";
    bool may = true;
    char master[CN_ADDR] = "";
    const cn_topo *t = fleet_lock();
    for (size_t i = 0; t && i < t->ngroups && !master[0]; i++)
        if (!t->groups[i].master_down)
            snprintf(master, sizeof(master), "%s", t->groups[i].master);
    fleet_unlock();
    if (master[0]) {
        /* DRYRUN answers OK or why not (a bulk string); an error (a server
         * without it, a user who may not run it) leaves the servers' own
         * NOPERM to speak. */
        char err[160];
        const char *argv[] = {"ACL", "DRYRUN", user, "BF.ADD", "probe", "x"};
        rc_value *v = pool_call(master, err, sizeof(err), 6, argv, NULL);
        if (v && v->type == '$')
            may = false;
        rc_value_free(v);
    }
    tb_puts(b, "{\"user\":");
    tb_json_str(b, user, strlen(user));
    tb_printf(b, ",\"may_write\":%s,\"mode\":\"%s\"}", may ? "true" : "false",
              cn_mode_names[cn_cfg.mode]);
    return 200;
}

/* ---- /api/overview, /api/nodes ---- */

static void group_json(textbuf *b, const cn_group *g)
{
    tb_puts(b, "{\"name\":");
    tb_json_str(b, g->name, strlen(g->name));
    tb_puts(b, ",\"master\":");
    str_or_null(b, g->master);
    tb_puts(b, ",\"replicas\":");
    addr_list(b, g);
    tb_puts(b, ",\"quorum\":");
    ll_or_null(b, g->quorum, g->quorum >= 0);
    tb_puts(b, ",\"sentinels\":");
    ll_or_null(b, g->sentinels, g->sentinels >= 0);
    tb_printf(b,
              ",\"ok\":%s,\"missing_replica\":%s,\"last_failover_ms\":", g->ok ? "true" : "false",
              g->missing_replica ? "true" : "false");
    ll_or_null(b, g->last_failover_ms, g->last_failover_ms >= 0);
    tb_puts(b, ",\"slots\":");
    str_or_null(b, g->slots);
    tb_puts(b, "}");
}

static void alert(textbuf *b, bool *first, const char *severity, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void alert(textbuf *b, bool *first, const char *severity, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    tb_printf(b, "%s{\"severity\":\"%s\",\"text\":", *first ? "" : ",", severity);
    tb_json_str(b, text, strlen(text));
    tb_puts(b, "}");
    *first = false;
}

int api_overview(textbuf *b)
{
    const cn_topo *t = fleet_lock();
    catalog_lock();
    size_t n;
    bool complete;
    cn_filter *rows = catalog_rows(&n, &complete);
    size_t total = 0, full = 0;
    for (size_t i = 0; i < n; i++)
        if (rows[i].master[0]) {
            total++;
            full += rows[i].have && rows[i].fill > 0.9;
        }
    catalog_unlock();
    tb_printf(b,
              "{\"mode\":\"%s\",\"updated_ms\":%lld,\"filters_total\":%zu,"
              "\"catalog_complete\":%s,\"groups\":[",
              cn_mode_names[cn_cfg.mode], t ? t->updated_ms : 0, total,
              complete ? "true" : "false");
    for (size_t i = 0; t && i < t->ngroups; i++) {
        if (i)
            tb_puts(b, ",");
        group_json(b, &t->groups[i]);
    }
    tb_puts(b, "],\"alerts\":[");
    bool first = true;
    for (size_t i = 0; t && i < t->ngroups; i++) {
        const cn_group *g = &t->groups[i];
        if (!g->master[0] || g->master_down)
            alert(b, &first, "critical", "group %s: no master answers%s%s", g->name,
                  g->error[0] ? ": " : "", g->error);
        else if (!g->ok && g->quorum >= 0)
            alert(b, &first, "critical", "group %s: the Sentinels cannot reach a quorum%s%s",
                  g->name, g->error[0] ? ": " : "", g->error);
        if (g->missing_replica)
            alert(b, &first, "critical",
                  "group %s: a replica is missing (%d of %zu up): the master has no copy to fail "
                  "over to",
                  g->name, g->replicas_up, g->nreplicas);
    }
    for (size_t i = 0; t && i < t->nnodes; i++) {
        const cn_node *nd = &t->nodes[i];
        if (nd->link == CN_LINK_UNREACHABLE)
            alert(b, &first, "critical", "node %s is unreachable%s%s", nd->addr,
                  nd->error[0] ? ": " : "", nd->error);
        else if (nd->link == CN_LINK_DOWN)
            alert(b, &first, "critical", "replica %s: its link to the master %s is down", nd->addr,
                  nd->master_addr);
        else if (nd->maxmemory > 0 && nd->used > nd->maxmemory / 10 * 9)
            alert(b, &first, "warning", "node %s: memory near maxmemory (%lld of %lld bytes)",
                  nd->addr, nd->used, nd->maxmemory);
    }
    if (full)
        alert(b, &first, "warning", "%zu filter%s over 90%% full", full, full == 1 ? "" : "s");
    tb_puts(b, "]}");
    fleet_unlock();
    return 200;
}

int api_nodes(textbuf *b)
{
    const cn_topo *t = fleet_lock();
    size_t *counts = calloc(t && t->nnodes ? t->nnodes : 1, sizeof(size_t));
    catalog_lock();
    size_t n;
    cn_filter *rows = catalog_rows(&n, NULL);
    for (size_t i = 0; counts && t && i < n; i++) {
        const cn_group *g = group_of_row(t, &rows[i]);
        if (!rows[i].master[0] || !g)
            continue;
        for (size_t k = 0; k < t->nnodes; k++)
            if (t->nodes[k].group == (int)(g - t->groups))
                counts[k]++;
    }
    catalog_unlock();
    tb_puts(b, "[");
    for (size_t i = 0; t && i < t->nnodes; i++) {
        const cn_node *nd = &t->nodes[i];
        const cn_group *g = group_at(t, nd->group);
        tb_puts(b, i ? ",{\"addr\":" : "{\"addr\":");
        tb_json_str(b, nd->addr, strlen(nd->addr));
        tb_puts(b, ",\"id\":");
        str_or_null(b, nd->id);
        tb_puts(b, ",\"group\":");
        str_or_null(b, g ? g->name : NULL);
        tb_printf(b, ",\"role\":\"%s\",\"master\":", nd->master ? "master" : "replica");
        str_or_null(b, nd->master ? NULL : nd->master_addr);
        tb_printf(b,
                  ",\"link\":\"%s\",\"memory_used\":%lld,\"maxmemory\":%lld,\"filters\":%zu,"
                  "\"ops_per_sec\":%lld,\"repl_offset\":%lld,\"lag_bytes\":",
                  link_names[nd->link], nd->used, nd->maxmemory, counts ? counts[i] : 0, nd->ops,
                  nd->offset);
        ll_or_null(b, nd->lag, !nd->master && nd->lag >= 0);
        tb_puts(b, ",\"last_failover_ms\":");
        ll_or_null(b, nd->last_failover_ms, nd->last_failover_ms >= 0);
        tb_puts(b, ",\"slots\":");
        str_or_null(b, nd->master && g ? g->slots : NULL);
        tb_puts(b, ",\"error\":");
        str_or_null(b, nd->error);
        tb_puts(b, "}");
    }
    tb_puts(b, "]");
    fleet_unlock();
    free(counts);
    return 200;
}

/* ---- /api/filters, /api/routing ---- */

enum { S_NAME, S_NODE, S_TYPE, S_CAPACITY, S_ITEMS, S_FILL, S_MEMORY, S_TTL, S_FPR, S_SLOT };
static const char *const sort_names[] = {"name",   "node", "type", "capacity", "items", "fill",
                                         "memory", "ttl",  "fpr",  "slot",     NULL};

typedef struct sorter {
    const cn_filter *rows;
    size_t sorted; /* rows below this index are in name order */
    int col;
    int dir;
} sorter;

static int cmp_num(double a, double b) { return a < b ? -1 : a > b ? 1 : 0; }

static int cmp_rows(const void *pa, const void *pb, void *arg)
{
    const sorter *s = arg;
    const cn_filter *a = &s->rows[*(const uint32_t *)pa], *b = &s->rows[*(const uint32_t *)pb];
    int c = 0;
    switch (s->col) {
    case S_NODE: c = strcmp(a->master, b->master); break;
    case S_TYPE: c = (int)a->cuckoo - (int)b->cuckoo; break;
    case S_CAPACITY: c = cmp_num((double)a->capacity, (double)b->capacity); break;
    case S_ITEMS: c = cmp_num((double)a->items, (double)b->items); break;
    case S_FILL: c = cmp_num(a->fill, b->fill); break;
    case S_MEMORY: c = cmp_num((double)a->memory, (double)b->memory); break;
    case S_TTL: c = cmp_num((double)a->ttl_ms, (double)b->ttl_ms); break;
    case S_FPR: c = cmp_num(a->fpr, b->fpr); break;
    case S_SLOT: c = cmp_num(slot_of(a->name, a->len), slot_of(b->name, b->len)); break;
    default: break;
    }
    if (c == 0) { /* the name breaks ties, so pages never overlap */
        uint32_t ia = *(const uint32_t *)pa, ib = *(const uint32_t *)pb;
        c = ia < s->sorted && ib < s->sorted ? (ia > ib) - (ia < ib) : catalog_name_cmp(a, b);
    }
    return c * s->dir;
}

/* The matching rows' indexes, sorted; NULL when out of memory. */
static uint32_t *select_rows(const cn_form *q, const cn_filter *rows, size_t n, size_t *count,
                             bool routing)
{
    const char *match = form_get(q, "match");
    const char *type = form_get(q, "type");
    const char *sort = routing ? "name" : form_get(q, "sort");
    const char *order = form_get(q, "order");
    if (match && (!*match || strcmp(match, "*") == 0))
        match = NULL;
    size_t mlen = match ? strlen(match) : 0;
    uint32_t *idx = malloc((n ? n : 1) * sizeof(uint32_t));
    if (!idx)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const cn_filter *f = &rows[i];
        if (!f->master[0])
            continue;
        if (type && *type && strcmp(type, f->cuckoo ? "cuckoo" : "bloom") != 0)
            continue;
        if (match && !glob_match(match, mlen, f->name, f->len, false))
            continue;
        idx[k++] = (uint32_t)i;
    }
    sorter s = {rows, catalog_name_sorted(), S_NAME, order && strcmp(order, "desc") == 0 ? -1 : 1};
    for (int i = 0; sort && sort_names[i]; i++)
        if (strcmp(sort, sort_names[i]) == 0)
            s.col = i;
    if (s.col == S_NAME && s.sorted == n) {
        /* Already in name order: the index order, or its reverse. */
        for (size_t i = 0; s.dir < 0 && i < k / 2; i++) {
            uint32_t t = idx[i];
            idx[i] = idx[k - 1 - i];
            idx[k - 1 - i] = t;
        }
    } else {
        qsort_r(idx, k, sizeof(uint32_t), cmp_rows, &s);
    }
    *count = k;
    return idx;
}

/* The page's names copied out, so their summaries can be fetched without
 * the index held. */
static bool page_names(const cn_filter *rows, const uint32_t *idx, size_t from, size_t to,
                       char ***names, size_t **lens)
{
    size_t m = to > from ? to - from : 0;
    *names = calloc(m ? m : 1, sizeof(char *));
    *lens = calloc(m ? m : 1, sizeof(size_t));
    if (!*names || !*lens)
        return false;
    for (size_t i = 0; i < m; i++) {
        const cn_filter *f = &rows[idx[from + i]];
        (*names)[i] = malloc(f->len ? f->len : 1);
        if (!(*names)[i])
            return false;
        memcpy((*names)[i], f->name, f->len);
        (*lens)[i] = f->len;
    }
    return true;
}

static void free_names(char **names, size_t *lens, size_t m)
{
    for (size_t i = 0; names && i < m; i++)
        free(names[i]);
    free(names);
    free(lens);
}

static int list_page(const cn_form *q, textbuf *b, bool routing)
{
    int page = int_arg(q, "page", 1, 1, 1 << 30);
    int per = int_arg(q, "per_page", PER_PAGE, 1, PER_PAGE_MAX);
    catalog_lock();
    size_t n, total;
    bool complete;
    cn_filter *rows = catalog_rows(&n, &complete);
    uint32_t *idx = select_rows(q, rows, n, &total, routing);
    if (!idx) {
        catalog_unlock();
        return api_error(b, 503, "out of memory");
    }
    size_t from = (size_t)(page - 1) * (size_t)per;
    size_t to = from + (size_t)per < total ? from + (size_t)per : total;
    char **names = NULL;
    size_t *lens = NULL;
    size_t m = to > from ? to - from : 0;
    bool ok = page_names(rows, idx, from, to, &names, &lens);
    free(idx);
    catalog_unlock();
    if (!ok) {
        free_names(names, lens, m);
        return api_error(b, 503, "out of memory");
    }
    if (!routing)
        catalog_fetch(names, lens, m, PAGE_MAX_AGE_MS);
    const cn_topo *t = fleet_lock();
    catalog_lock();
    if (routing)
        tb_printf(b, "{\"total\":%zu,\"page\":%d,\"per_page\":%d,\"rows\":[", total, page, per);
    else
        tb_printf(b, "{\"total\":%zu,\"page\":%d,\"per_page\":%d,\"complete\":%s,\"filters\":[",
                  total, page, per, complete ? "true" : "false");
    bool first = true;
    for (size_t i = 0; i < m; i++) {
        const cn_filter *f = catalog_find(names[i], lens[i]);
        if (!f)
            continue; /* gone meanwhile */
        tb_puts(b, first ? "" : ",");
        first = false;
        if (!routing) {
            row_json(b, t, f);
            tb_puts(b, "}");
            continue;
        }
        const cn_group *g = group_of_row(t, f);
        const cn_node *m_ = g ? fleet_node(t, g->master) : NULL;
        bool up = g && !g->master_down && m_ && m_->link == CN_LINK_UP;
        tb_puts(b, "{\"name\":");
        tb_json_str(b, f->name, f->len);
        tb_puts(b, ",\"slot\":");
        ll_or_null(b, slot_of(f->name, f->len), cn_cfg.mode == CN_MODE_CLUSTER);
        tb_puts(b, ",\"group\":");
        str_or_null(b, g ? g->name : NULL);
        tb_puts(b, ",\"master\":");
        str_or_null(b, g ? g->master : f->master);
        tb_puts(b, ",\"replicas\":");
        addr_list(b, g);
        tb_printf(b, ",\"status\":\"%s\",\"read_only\":%s}",
                  !up                                                        ? "down"
                  : g->missing_replica || g->replicas_up < (int)g->nreplicas ? "degraded"
                                                                             : "ok",
                  f->read_only ? "true" : "false");
    }
    tb_puts(b, "]}");
    catalog_unlock();
    fleet_unlock();
    free_names(names, lens, m);
    return 200;
}

int api_filters(const cn_form *q, textbuf *b) { return list_page(q, b, false); }
int api_routing(const cn_form *q, textbuf *b) { return list_page(q, b, true); }

/* ---- /api/filter ---- */

bool api_key_master(const char *key, size_t len, char *addr, int *group)
{
    addr[0] = '\0';
    *group = -1;
    const cn_topo *t = fleet_lock();
    const cn_group *g = NULL;
    if (cn_cfg.mode == CN_MODE_CLUSTER) {
        g = group_at(t, fleet_group_of_key(t, key, len));
    } else {
        catalog_lock();
        cn_filter *f = catalog_find(key, len);
        if (f && f->master[0])
            g = group_of_row(t, f);
        catalog_unlock();
    }
    if (g) {
        *group = (int)(g - t->groups);
        if (!g->master_down)
            snprintf(addr, CN_ADDR, "%s", g->master);
    }
    fleet_unlock();
    return addr[0] != '\0';
}

int api_filter(const cn_form *q, const cn_who *w, textbuf *b)
{
    (void)w;
    const char *name = form_get(q, "name");
    if (!name || !*name)
        return api_error(b, 400, "name is required");
    size_t len = strlen(name);
    char *names[1] = {(char *)name};
    size_t lens[1] = {len};
    catalog_fetch(names, lens, 1, 0);
    bool cuckoo = false;
    catalog_lock();
    cn_filter *f = catalog_find(name, len);
    if (f)
        cuckoo = f->cuckoo;
    catalog_unlock();
    if (!f)
        return api_error(b, 404, "no such filter");
    char master[CN_ADDR];
    int gi;
    bool up = api_key_master(name, len, master, &gi);
    /* INFO in full, and whether each replica holds the key. */
    rc_value *info = NULL;
    char err[160];
    if (up) {
        const char *argv[] = {cuckoo ? "CF.INFO" : "BF.INFO", name, "ALL"};
        size_t l[] = {7, len, 3};
        info = pool_call(master, err, sizeof(err), cuckoo ? 2 : 3, argv, l);
    }
    char replicas[CN_MAX_REPLICAS][CN_ADDR];
    size_t nrep = 0;
    const cn_topo *t = fleet_lock();
    const cn_group *g = group_at(t, gi);
    for (size_t i = 0; g && i < g->nreplicas; i++)
        snprintf(replicas[nrep++], CN_ADDR, "%s", g->replicas[i]);
    fleet_unlock();
    int present[CN_MAX_REPLICAS];
    for (size_t i = 0; i < nrep; i++) {
        const char *argv[] = {"EXISTS", name};
        size_t l[] = {6, len};
        rc_value *v = pool_call(replicas[i], err, sizeof(err), 2, argv, l);
        present[i] = v && v->type == ':' && v->integer == 1;
        rc_value_free(v);
    }
    t = fleet_lock();
    catalog_lock();
    f = catalog_find(name, len);
    if (!f) {
        catalog_unlock();
        fleet_unlock();
        rc_value_free(info);
        return api_error(b, 404, "no such filter");
    }
    row_json(b, t, f);
    catalog_unlock();
    fleet_unlock();
    tb_puts(b, ",\"info\":{");
    for (size_t i = 0; info && info->type == '*' && i + 1 < info->n; i += 2) {
        if (i)
            tb_puts(b, ",");
        const rc_value *k = &info->elem[i];
        tb_json_str(b, k->str ? k->str : "", k->len);
        tb_puts(b, ":");
        api_value_json(b, &info->elem[i + 1]);
    }
    rc_value_free(info);
    tb_puts(b, "},\"master\":");
    str_or_null(b, master);
    tb_puts(b, ",\"replicas\":[");
    for (size_t i = 0; i < nrep; i++) {
        tb_puts(b, i ? ",{\"addr\":" : "{\"addr\":");
        tb_json_str(b, replicas[i], strlen(replicas[i]));
        tb_printf(b, ",\"present\":%s}", present[i] ? "true" : "false");
    }
    tb_puts(b, "],\"history\":");
    catalog_history(name, len, b);
    tb_printf(b, ",\"may_write\":%s}", up ? "true" : "false");
    return 200;
}

/* ---- /api/placement, /api/calc ---- */

int placement_for(const char *name, size_t len, const char *want_group, char *master, char *group,
                  char *reason, size_t reasonlen, int *slot)
{
    master[0] = group[0] = '\0';
    *slot = -1;
    const cn_topo *t = fleet_lock();
    int pick = -1;
    if (!t || t->ngroups == 0) {
        snprintf(reason, reasonlen, "no group is known");
    } else if (cn_cfg.mode == CN_MODE_CLUSTER) {
        *slot = (int)slot_of(name, len);
        pick = t->slot_group[*slot];
        snprintf(reason, reasonlen, "the key's slot %d is served by this master", *slot);
        if (pick < 0)
            snprintf(reason, reasonlen, "no master serves the key's slot %d", *slot);
    } else if (want_group && *want_group) {
        for (size_t i = 0; i < t->ngroups; i++)
            if (strcmp(t->groups[i].name, want_group) == 0)
                pick = (int)i;
        snprintf(reason, reasonlen, pick < 0 ? "no such group" : "the group asked for");
    } else {
        pl_group *pg = calloc(t->ngroups, sizeof(pl_group));
        size_t *counts = calloc(t->ngroups, sizeof(size_t));
        if (pg && counts) {
            catalog_lock();
            size_t n;
            cn_filter *rows = catalog_rows(&n, NULL);
            for (size_t i = 0; i < n; i++) {
                const cn_group *g = rows[i].master[0] ? group_of_row(t, &rows[i]) : NULL;
                if (g)
                    counts[g - t->groups]++;
            }
            catalog_unlock();
            for (size_t i = 0; i < t->ngroups; i++) {
                const cn_group *g = &t->groups[i];
                const cn_node *m = fleet_node(t, g->master);
                pg[i].name = g->name;
                pg[i].up = m && !g->master_down && m->link == CN_LINK_UP;
                pg[i].used = m ? (unsigned long long)m->used : 0;
                pg[i].limit = m ? (unsigned long long)(m->maxmemory ? m->maxmemory : m->sysmem) : 0;
                pg[i].filters = counts[i];
            }
            pick = placement_pick(pg, t->ngroups);
            if (pick >= 0 && pg[pick].limit == 0)
                snprintf(reason, reasonlen,
                         "no memory limit is known (neither maxmemory nor total_system_memory): "
                         "the fewest filters (%llu)",
                         pg[pick].filters);
            else if (pick >= 0)
                snprintf(reason, reasonlen,
                         "the most free memory (%llu bytes), then the fewest filters (%llu)",
                         pg[pick].limit > pg[pick].used ? pg[pick].limit - pg[pick].used : 0,
                         pg[pick].filters);
            else
                snprintf(reason, reasonlen, "no group's master answers");
        }
        free(pg);
        free(counts);
    }
    if (pick >= 0) {
        snprintf(group, CN_ADDR, "%s", t->groups[pick].name);
        if (!t->groups[pick].master_down)
            snprintf(master, CN_ADDR, "%s", t->groups[pick].master);
    }
    fleet_unlock();
    return pick;
}

int api_placement(const cn_form *q, textbuf *b)
{
    const char *name = form_get(q, "name");
    if (!name)
        name = "";
    char master[CN_ADDR], group[CN_ADDR], reason[256];
    int slot;
    if (placement_for(name, strlen(name), form_get(q, "group"), master, group, reason,
                      sizeof(reason), &slot) < 0)
        return api_error(b, 503, reason);
    tb_puts(b, "{\"group\":");
    str_or_null(b, group);
    tb_puts(b, ",\"node\":");
    str_or_null(b, master);
    tb_puts(b, ",\"slot\":");
    ll_or_null(b, slot, slot >= 0);
    tb_puts(b, ",\"reason\":");
    tb_json_str(b, reason, strlen(reason));
    tb_puts(b, "}");
    return 200;
}

int api_calc_get(const cn_form *q, textbuf *b)
{
    api_size sz;
    char err[128];
    const char *layout = form_get(q, "layout");
    if (!layout || !*layout)
        layout = "blocked";
    if (!api_sizing(form_get(q, "capacity"), form_get(q, "error_rate"), layout,
                    form_get(q, "window"), form_get(q, "slices"), &sz, err, sizeof(err)))
        return api_error(b, 400, err);
    tb_printf(b, "{\"layout\":\"%s\",\"bytes\":%llu,\"bits_per_key\":%.6g,\"expected_fpr\":%.6g}",
              sz.layout, (unsigned long long)sz.bytes, sz.bits_per_key, sz.fpr);
    return 200;
}

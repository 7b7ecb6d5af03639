/* The filter index: every master's filters, found by `SCAN cursor MATCH *
 * TYPE MBbloom--` and `TYPE MBbloomCF` (bloomery.so's: bloomerBF,
 * bloomerCF; COUNT 1000) in passes at a bounded
 * rate, each with a summary (BF.INFO ALL or CF.INFO, MEMORY USAGE, PTTL,
 * BF.CONFIG key READONLY) fetched pipelined in the background within a
 * budget of keys per second, and for a page's rows on demand. Requests
 * read this index only, so their cost does not grow with the nodes'. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "console.h"
#include "hset.h"

#define SCAN_COUNT "1000"
#define SCANS_PER_S 50         /* SCAN calls per second, all masters together */
#define PASS_MIN_MS 5000       /* between the starts of two passes, at least */
#define SUMMARY_BATCH 200      /* keys per tick and master pipeline */
#define SUMMARY_TICK_MS 100    /* SUMMARY_BATCH per tick: 2000 keys/s in all */
#define SUMMARY_MAX_AGE 300000 /* a summary older than this is read again */
#define FETCH_TIMEOUT_MS 3000
#define HIST_FILTERS 256
#define HIST_SAMPLES 240

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cn_filter *rows;
static size_t nrows;
static hset index_; /* name -> row index + 1 (its entry's "seen") */
static bool complete;
static size_t name_sorted; /* rows[0, name_sorted) are in name order */
static pthread_t thread;
static bool running;
static size_t cursor; /* where the background summaries go on from */

/* Filters the console deleted lately: a pass that began before the delete
 * may still have seen them. */
#define DELETED_MAX 256
static struct {
    char *name;
    size_t len;
    long long ms;
} deleted[DELETED_MAX];
static size_t deleted_next;

static bool deleted_since(const char *name, size_t len, long long since)
{
    for (size_t i = 0; i < DELETED_MAX; i++)
        if (deleted[i].name && deleted[i].ms >= since && deleted[i].len == len &&
            memcmp(deleted[i].name, name, len) == 0)
            return true;
    return false;
}

/* Filters whose page was opened keep their fill and FPR over time. */
typedef struct hist {
    char *name;
    size_t len;
    long long t[HIST_SAMPLES];
    double fill[HIST_SAMPLES], fpr[HIST_SAMPLES];
    size_t n, head;
} hist;
static hist hists[HIST_FILTERS];

void catalog_lock(void) { pthread_mutex_lock(&lock); }
void catalog_unlock(void) { pthread_mutex_unlock(&lock); }

cn_filter *catalog_rows(size_t *n, bool *done)
{
    *n = nrows;
    if (done)
        *done = complete;
    return rows;
}

size_t catalog_name_sorted(void) { return name_sorted; }

int catalog_name_cmp(const cn_filter *a, const cn_filter *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->name, b->name, n);
    return c ? c : a->len < b->len ? -1 : a->len > b->len;
}

static int by_name(const void *a, const void *b) { return catalog_name_cmp(a, b); }

static uint64_t hash_of(const char *s, size_t n) { return XXH3_64bits(s, n); }

cn_filter *catalog_find(const char *name, size_t len)
{
    hset_entry *e = hset_find(&index_, name, len, hash_of(name, len));
    return e && e->seen ? &rows[e->seen - 1] : NULL;
}

size_t catalog_count_on(const char *master)
{
    size_t n = 0;
    for (size_t i = 0; i < nrows; i++)
        n += strcmp(rows[i].master, master) == 0;
    return n;
}

/* ---- the summaries ---- */

static double num_of(const rc_value *v)
{
    if (!v)
        return -1;
    if (v->type == ':')
        return (double)v->integer;
    if (v->type == '$' || v->type == '+')
        return atof(v->str);
    return -1;
}

static const rc_value *field(const rc_value *m, const char *name)
{
    if (!m || m->type != '*')
        return NULL;
    for (size_t i = 0; i + 1 < m->n; i += 2)
        if (m->elem[i].str && strcasecmp(m->elem[i].str, name) == 0)
            return &m->elem[i + 1];
    return NULL;
}

static void hist_add(const cn_filter *f)
{
    for (size_t i = 0; i < HIST_FILTERS; i++) {
        hist *h = &hists[i];
        if (!h->name || h->len != f->len || memcmp(h->name, f->name, f->len) != 0)
            continue;
        size_t at = (h->head + h->n) % HIST_SAMPLES;
        if (h->n == HIST_SAMPLES)
            h->head = (h->head + 1) % HIST_SAMPLES;
        else
            h->n++;
        h->t[at] = f->updated_ms;
        h->fill[at] = f->fill;
        h->fpr[at] = f->fpr;
        return;
    }
}

/* The replies of one key's four commands into its row. */
static void summary_into(cn_filter *f, rc_value **r)
{
    const rc_value *info = r[0];
    if (!info || info->type != '*') {
        f->have = false;
        f->updated_ms = cn_now_ms();
        return;
    }
    if (f->cuckoo) {
        double buckets = num_of(field(info, "Number of buckets"));
        double bsize = num_of(field(info, "Bucket size"));
        double ins = num_of(field(info, "Number of items inserted"));
        double del = num_of(field(info, "Number of items deleted"));
        f->capacity = buckets > 0 && bsize > 0 ? (long long)(buckets * bsize) : -1;
        f->items = ins >= 0 ? (long long)(ins - (del > 0 ? del : 0)) : -1;
        snprintf(f->layout, sizeof(f->layout), "cuckoo");
        f->fpr = -1;
    } else {
        f->capacity = (long long)num_of(field(info, "Capacity"));
        f->items = (long long)num_of(field(info, "Number of items inserted"));
        const rc_value *l = field(info, "Layout");
        snprintf(f->layout, sizeof(f->layout), "%s", l && l->str ? l->str : "");
        f->fpr = num_of(field(info, "Estimated FPR"));
    }
    const rc_value *er = field(info, "Error rate");
    f->error_rate = er ? num_of(er) : -1;
    f->fill = f->capacity > 0 && f->items >= 0 ? (double)f->items / (double)f->capacity : -1;
    f->memory = r[1] && r[1]->type == ':' ? r[1]->integer : -1;
    f->ttl_ms = r[2] && r[2]->type == ':' ? (r[2]->integer < 0 ? -1 : r[2]->integer) : -1;
    const rc_value *ro = r[3];
    f->read_only =
        ro && ((ro->type == ':' && ro->integer == 1) ||
               (ro->str && (strcasecmp(ro->str, "yes") == 0 || strcmp(ro->str, "1") == 0 ||
                            strcasecmp(ro->str, "true") == 0)));
    f->have = true;
    f->updated_ms = cn_now_ms();
    hist_add(f);
}

typedef struct want {
    char *name;
    size_t len;
    bool cuckoo;
} want;

/* The summaries of keys on master, pipelined; written into the rows still
 * there. */
static void fetch_on(const char *master, const want *w, size_t n)
{
    if (n == 0)
        return;
    char err[160];
    rc_conn *c = pool_get(master, err, sizeof(err));
    if (!c)
        return;
    size_t ncmd = n * 4;
    size_t *argc = malloc(ncmd * sizeof(size_t));
    const char *(*argv)[4] = malloc(ncmd * sizeof(*argv));
    size_t(*lens)[4] = malloc(ncmd * sizeof(*lens));
    const char **av = malloc(ncmd * sizeof(char *));
    const size_t **lv = malloc(ncmd * sizeof(size_t *));
    rc_value **rep = calloc(ncmd, sizeof(rc_value *));
    bool ok = argc && argv && lens && av && lv && rep;
    for (size_t i = 0; ok && i < n; i++) {
        size_t k = i * 4;
        const char *cmds[4][4] = {{w[i].cuckoo ? "CF.INFO" : "BF.INFO", w[i].name, "ALL", NULL},
                                  {"MEMORY", "USAGE", w[i].name, NULL},
                                  {"PTTL", w[i].name, NULL, NULL},
                                  {"BF.CONFIG", w[i].name, "READONLY", NULL}};
        size_t counts[4] = {w[i].cuckoo ? 2u : 3u, 3, 2, 3};
        for (int j = 0; j < 4; j++) {
            argc[k + j] = counts[j];
            for (size_t a = 0; a < counts[j]; a++) {
                argv[k + j][a] = cmds[j][a];
                lens[k + j][a] = cmds[j][a] == w[i].name ? w[i].len : strlen(cmds[j][a]);
            }
            av[k + j] = (const char *)argv[k + j];
            lv[k + j] = lens[k + j];
        }
    }
    if (ok)
        ok =
            pool_pipeline(c, ncmd, argc, (const char *const *const *)av, lv, rep, FETCH_TIMEOUT_MS);
    pool_put(c, ok);
    if (ok) {
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < n; i++) {
            cn_filter *f = catalog_find(w[i].name, w[i].len);
            if (f && strcmp(f->master, master) == 0)
                summary_into(f, &rep[i * 4]);
        }
        pthread_mutex_unlock(&lock);
    }
    for (size_t i = 0; rep && i < ncmd; i++)
        rc_value_free(rep[i]);
    free(argc);
    free(argv);
    free(lens);
    free(av);
    free(lv);
    free(rep);
}

void catalog_fetch(char *const *names, const size_t *lens, size_t n, long long max_age_ms)
{
    /* Grouped by master, read under the lock, fetched without it. */
    want *w = calloc(n ? n : 1, sizeof(want));
    char(*masters)[CN_ADDR] = calloc(n ? n : 1, CN_ADDR);
    if (!w || !masters) {
        free(w);
        free(masters);
        return;
    }
    size_t m = 0;
    long long now = cn_now_ms();
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n; i++) {
        cn_filter *f = catalog_find(names[i], lens[i]);
        if (!f || (f->updated_ms && now - f->updated_ms < max_age_ms))
            continue;
        w[m] = (want){names[i], lens[i], f->cuckoo};
        snprintf(masters[m], CN_ADDR, "%s", f->master);
        m++;
    }
    pthread_mutex_unlock(&lock);
    bool *done = calloc(m ? m : 1, 1);
    want *batch = calloc(m ? m : 1, sizeof(want));
    for (size_t i = 0; done && batch && i < m; i++) {
        if (done[i])
            continue;
        size_t b = 0;
        for (size_t j = i; j < m; j++)
            if (!done[j] && strcmp(masters[j], masters[i]) == 0) {
                batch[b++] = w[j];
                done[j] = true;
            }
        fetch_on(masters[i], batch, b);
    }
    free(done);
    free(batch);
    free(w);
    free(masters);
}

void catalog_history(const char *name, size_t len, textbuf *b)
{
    pthread_mutex_lock(&lock);
    hist *h = NULL, *free_slot = NULL;
    for (size_t i = 0; i < HIST_FILTERS; i++) {
        if (hists[i].name && hists[i].len == len && memcmp(hists[i].name, name, len) == 0)
            h = &hists[i];
        else if (!hists[i].name && !free_slot)
            free_slot = &hists[i];
    }
    if (!h) { /* from now on its summaries are kept */
        h = free_slot ? free_slot : &hists[(size_t)rand() % HIST_FILTERS];
        free(h->name);
        memset(h, 0, sizeof(*h));
        h->name = malloc(len ? len : 1);
        if (h->name)
            memcpy(h->name, name, len);
        h->len = len;
        cn_filter *f = catalog_find(name, len);
        if (f && f->have && h->name)
            hist_add(f);
    }
    tb_puts(b, "[");
    for (size_t i = 0; i < h->n; i++) {
        size_t k = (h->head + i) % HIST_SAMPLES;
        tb_printf(b, "%s[%lld,%.6g,", i ? "," : "", h->t[k], h->fill[k] < 0 ? 0 : h->fill[k]);
        if (h->fpr[k] < 0)
            tb_puts(b, "null]");
        else
            tb_printf(b, "%.6g]", h->fpr[k]);
    }
    tb_puts(b, "]");
    pthread_mutex_unlock(&lock);
}

/* ---- the passes ---- */

typedef struct found {
    char *name;
    size_t len;
    char master[CN_ADDR];
    bool cuckoo;
} found;

typedef struct found_list {
    found *v;
    size_t n, cap;
} found_list;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Every key of one type on master; false when the master failed. */
static bool scan_type(const char *master, const char *type, bool cuckoo, found_list *out)
{
    char cursor_s[32] = "0", err[160];
    do {
        if (cn_stopping)
            return false;
        rc_conn *c = pool_get(master, err, sizeof(err));
        if (!c)
            return false;
        const char *argv[] = {"SCAN", cursor_s, "MATCH", "*", "COUNT", SCAN_COUNT, "TYPE", type};
        rc_value *v = rc_call(c, FETCH_TIMEOUT_MS, err, sizeof(err), 8, argv, NULL);
        pool_put(c, v != NULL);
        if (!v || v->type != '*' || v->n != 2 || v->elem[1].type != '*') {
            rc_value_free(v);
            return false;
        }
        snprintf(cursor_s, sizeof(cursor_s), "%s", v->elem[0].str ? v->elem[0].str : "0");
        for (size_t i = 0; i < v->elem[1].n; i++) {
            const rc_value *k = &v->elem[1].elem[i];
            if (!k->str)
                continue;
            if (out->n == out->cap) {
                size_t cap = out->cap ? out->cap * 2 : 1024;
                found *nv = realloc(out->v, cap * sizeof(found));
                if (!nv)
                    break;
                out->v = nv;
                out->cap = cap;
            }
            found *f = &out->v[out->n];
            f->name = malloc(k->len ? k->len : 1);
            if (!f->name)
                break;
            memcpy(f->name, k->str, k->len);
            f->len = k->len;
            f->cuckoo = cuckoo;
            snprintf(f->master, sizeof(f->master), "%.63s", master);
            out->n++;
        }
        rc_value_free(v);
        sleep_ms(1000 / SCANS_PER_S);
    } while (strcmp(cursor_s, "0") != 0);
    return true;
}

/* A filter's type as TYPE names it: RedisBloom's (and bloomeryd's), or
 * bloomery.so's, whose module type names are its own. A master whose keys
 * showed one family is scanned for that family only from then on. */
static const struct {
    const char *name;
    bool cuckoo;
    int family;
} types[] = {{"MBbloom--", false, 1},
             {"MBbloomCF", true, 1},
             {"bloomerBF", false, 2},
             {"bloomerCF", true, 2}};
static struct {
    char addr[CN_ADDR];
    int family;
} families[64];

static bool scan_master(const char *master, found_list *fl)
{
    int slot = -1, family = 0;
    for (int i = 0; i < 64 && slot < 0; i++)
        if (strcmp(families[i].addr, master) == 0 || !families[i].addr[0])
            slot = i;
    if (slot >= 0 && families[slot].addr[0])
        family = families[slot].family;
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        if (family && types[t].family != family)
            continue;
        size_t had = fl->n;
        if (!scan_type(master, types[t].name, types[t].cuckoo, fl))
            return false;
        if (fl->n > had && slot >= 0 && !family) {
            snprintf(families[slot].addr, CN_ADDR, "%.63s", master);
            families[slot].family = types[t].family;
        }
    }
    return true;
}

/* The rows become what the pass found; the rows of a master the pass could
 * not read stay as they were. */
static void merge(found_list *fl, char (*failed)[CN_ADDR], size_t nfailed, bool all_ok,
                  long long started)
{
    pthread_mutex_lock(&lock);
    cn_filter *nr = calloc(fl->n + nrows + 1, sizeof(cn_filter));
    hset ni;
    hset_init(&ni);
    if (!nr) {
        pthread_mutex_unlock(&lock);
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < fl->n; i++) {
        found *f = &fl->v[i];
        bool added;
        hset_entry *e = hset_insert(&ni, f->name, f->len, hash_of(f->name, f->len), &added);
        if (!e || !added || deleted_since(f->name, f->len, started)) {
            /* on two masters at once (a failover under way), or deleted by
             * the console after the pass read it */
            free(f->name);
            continue;
        }
        cn_filter *old = catalog_find(f->name, f->len);
        cn_filter *r = &nr[n];
        if (old && strcmp(old->master, f->master) == 0) {
            *r = *old; /* its name is freed with the old rows below */
        } else {
            memset(r, 0, sizeof(*r));
            r->ttl_ms = -1;
            r->fpr = r->error_rate = r->fill = -1;
            r->capacity = r->items = r->memory = -1;
        }
        r->name = f->name;
        r->len = f->len;
        r->cuckoo = f->cuckoo;
        snprintf(r->master, sizeof(r->master), "%s", f->master);
        e->seen = (uint32_t)++n;
    }
    for (size_t i = 0; i < nrows; i++) {
        /* Made by the console after the pass began: not seen by it yet. */
        bool kept = rows[i].master[0] && rows[i].touched_ms >= started;
        for (size_t j = 0; j < nfailed && !kept; j++)
            kept = strcmp(rows[i].master, failed[j]) == 0;
        bool added = false;
        hset_entry *e = kept ? hset_insert(&ni, rows[i].name, rows[i].len,
                                           hash_of(rows[i].name, rows[i].len), &added)
                             : NULL;
        if (e && added) {
            nr[n] = rows[i];
            e->seen = (uint32_t)++n;
        } else {
            free(rows[i].name);
        }
    }
    /* In name order, so that the table's default order needs no sort and
     * other orders break ties by position. */
    qsort(nr, n, sizeof(cn_filter), by_name);
    for (size_t i = 0; i < n; i++) {
        hset_entry *e = hset_find(&ni, nr[i].name, nr[i].len, hash_of(nr[i].name, nr[i].len));
        if (e)
            e->seen = (uint32_t)(i + 1);
    }
    free(rows);
    hset_free(&index_);
    rows = nr;
    nrows = n;
    name_sorted = n;
    index_ = ni;
    if (all_ok)
        complete = true;
    if (cursor >= nrows)
        cursor = 0;
    pthread_mutex_unlock(&lock);
}

static void pass(void)
{
    long long started = cn_now_ms();
    char masters[64][CN_ADDR];
    size_t nm = 0;
    const cn_topo *t = fleet_lock();
    for (size_t i = 0; t && i < t->nnodes && nm < 64; i++)
        if (t->nodes[i].master && t->nodes[i].link == CN_LINK_UP)
            snprintf(masters[nm++], CN_ADDR, "%s", t->nodes[i].addr);
    /* A group's master that does not answer: its rows stay. */
    char failed[64][CN_ADDR];
    size_t nf = 0;
    for (size_t i = 0; t && i < t->ngroups && nf < 64; i++)
        if (t->groups[i].master_down && t->groups[i].master[0])
            snprintf(failed[nf++], CN_ADDR, "%s", t->groups[i].master);
    for (size_t i = 0; t && i < t->nnodes && nf < 64; i++)
        if (t->nodes[i].link == CN_LINK_UNREACHABLE)
            snprintf(failed[nf++], CN_ADDR, "%s", t->nodes[i].addr);
    fleet_unlock();
    found_list fl = {0};
    bool all_ok = nm > 0;
    for (size_t i = 0; i < nm && !cn_stopping; i++) {
        size_t had = fl.n;
        if (!scan_master(masters[i], &fl)) {
            for (size_t k = had; k < fl.n; k++)
                free(fl.v[k].name);
            fl.n = had;
            all_ok = false;
            if (nf < 64)
                memcpy(failed[nf++], masters[i], CN_ADDR);
        }
    }
    if (cn_stopping) {
        for (size_t k = 0; k < fl.n; k++)
            free(fl.v[k].name);
        free(fl.v);
        return;
    }
    merge(&fl, failed, nf, all_ok, started);
    free(fl.v);
}

/* Up to SUMMARY_BATCH stale rows, oldest-first in index order; false when
 * none is stale. */
static bool summaries_tick(void)
{
    char *names[SUMMARY_BATCH];
    size_t lens[SUMMARY_BATCH], n = 0;
    long long now = cn_now_ms();
    pthread_mutex_lock(&lock);
    for (size_t seen = 0; seen < nrows && n < SUMMARY_BATCH; seen++) {
        cn_filter *f = &rows[cursor];
        cursor = (cursor + 1) % nrows;
        if (f->updated_ms && now - f->updated_ms < SUMMARY_MAX_AGE)
            continue;
        names[n] = malloc(f->len ? f->len : 1);
        if (!names[n])
            break;
        memcpy(names[n], f->name, f->len);
        lens[n++] = f->len;
    }
    pthread_mutex_unlock(&lock);
    if (n)
        catalog_fetch(names, lens, n, SUMMARY_MAX_AGE);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    return n > 0;
}

static void *loop(void *arg)
{
    (void)arg;
    long long next_pass = 0;
    while (!cn_stopping) {
        long long now = cn_now_ms();
        if (now >= next_pass) {
            pass();
            long long took = cn_now_ms() - now;
            next_pass = now + (took * 2 > PASS_MIN_MS ? took * 2 : PASS_MIN_MS);
            continue;
        }
        sleep_ms(summaries_tick() ? SUMMARY_TICK_MS : 500);
    }
    return NULL;
}

void catalog_touch(const char *master, const char *name, size_t len, bool gone)
{
    pthread_mutex_lock(&lock);
    cn_filter *f = catalog_find(name, len);
    if (gone) {
        free(deleted[deleted_next].name);
        deleted[deleted_next].name = malloc(len ? len : 1);
        if (deleted[deleted_next].name) {
            memcpy(deleted[deleted_next].name, name, len);
            deleted[deleted_next].len = len;
            deleted[deleted_next].ms = cn_now_ms();
            deleted_next = (deleted_next + 1) % DELETED_MAX;
        }
        if (f) { /* the name leaves the index; the row stays until the next pass */
            hset_entry *e = hset_find(&index_, name, len, hash_of(name, len));
            if (e)
                e->seen = 0;
            f->have = false;
            f->master[0] = '\0';
        }
        pthread_mutex_unlock(&lock);
        return;
    }
    if (!f) {
        cn_filter *nr = realloc(rows, (nrows + 1) * sizeof(cn_filter));
        char *nm = malloc(len ? len : 1);
        bool added;
        hset_entry *e =
            nr && nm ? hset_insert(&index_, name, len, hash_of(name, len), &added) : NULL;
        if (nr)
            rows = nr;
        if (!e) {
            free(nm);
            pthread_mutex_unlock(&lock);
            return;
        }
        memcpy(nm, name, len);
        f = &rows[nrows];
        memset(f, 0, sizeof(*f));
        f->name = nm;
        f->len = len;
        f->ttl_ms = -1;
        f->fpr = f->error_rate = f->fill = -1;
        f->capacity = f->items = f->memory = -1;
        e->seen = (uint32_t)++nrows;
    }
    snprintf(f->master, sizeof(f->master), "%s", master);
    f->updated_ms = 0;
    f->touched_ms = cn_now_ms();
    pthread_mutex_unlock(&lock);
    char *names[1] = {(char *)name};
    size_t lens[1] = {len};
    catalog_fetch(names, lens, 1, 0);
}

bool catalog_start(char *err, size_t errlen)
{
    hset_init(&index_);
    if (pthread_create(&thread, NULL, loop, NULL) != 0) {
        snprintf(err, errlen, "cannot start the catalog thread");
        return false;
    }
    running = true;
    return true;
}

void catalog_stop(void)
{
    if (running)
        pthread_join(thread, NULL);
    running = false;
    for (size_t i = 0; i < nrows; i++)
        free(rows[i].name);
    free(rows);
    rows = NULL;
    nrows = 0;
    hset_free(&index_);
    for (size_t i = 0; i < HIST_FILTERS; i++)
        free(hists[i].name);
    for (size_t i = 0; i < DELETED_MAX; i++)
        free(deleted[i].name);
}

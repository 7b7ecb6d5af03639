/* The console's JSON API (docs/CONSOLE.md). Reads come from the server's
 * state (the filters and their statistics as /metrics has them, INFO's
 * sources); changes run as commands through a worker (command.c), so
 * they take the same path as a client's, as the request's user. What the
 * user may do is told with the filters ("can"), so that the console shows
 * only those buttons; the server refuses the others anyway. On a replica
 * nothing that writes is offered, and the write routes refuse before
 * running anything. The filter list is answered a page at a time: every
 * filter's cheap statistics are gathered to search, sort and count them,
 * and the FPR estimate (a read of the filter's bits) only for the page. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_args.h"
#include "acl.h"
#include "http.h"
#include "persist.h"
#include "repl.h"
#include "server.h"
#include "snapshot.h"
#include "util.h"

static void num(textbuf *b, const char *name, double v, bool comma)
{
    if (isfinite(v))
        tb_printf(b, "\"%s\":%.17g%s", name, v, comma ? "," : "");
    else
        tb_printf(b, "\"%s\":null%s", name, comma ? "," : "");
}

static const char *yes(bool v) { return v ? "true" : "false"; }

/* Whether who may run name on the key (EXPIRE: with its seconds). */
static bool may_key(const http_who *who, const char *name, const char *key, size_t klen, int argc)
{
    const char *argv[] = {name, key, "0"};
    size_t lens[] = {strlen(name), klen, 1};
    return access_may(who, argc, argv, lens);
}

static bool is_cuckoo(const value_type *t)
{
    return strcmp(access_info_command(t), "CF.INFO") == 0;
}

/* The commands the console's item forms run, per type: a check, and an
 * add that never creates the filter (NOCREATE). */
static const char *check_command(const value_type *t)
{
    return is_cuckoo(t) ? "CF.MEXISTS" : "BF.MEXISTS";
}
static const char *add_command(const value_type *t)
{
    return is_cuckoo(t) ? "CF.INSERT" : "BF.INSERT";
}

static int keycmp(const filter_row *x, const filter_row *y)
{
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->key, y->key, n);
    return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

static int cmp_num(double a, double b) { return (a > b) - (a < b); }

/* Rows in the order of a column, ties by name. A TTL of none sorts after
 * every TTL (it never expires), a missing FPR before every FPR. */
static int by_column(const void *a, const void *b, void *ctx)
{
    const filter_row *x = a, *y = b;
    const api_list_query *q = ctx;
    int c = 0;
    switch (q->sort) {
    case API_SORT_NAME: break;
    case API_SORT_TYPE: c = strcmp(x->type->name, y->type->name); break;
    case API_SORT_LAYOUT: c = strcmp(x->stats.layout, y->stats.layout); break;
    case API_SORT_CAPACITY:
        c = cmp_num((double)x->stats.capacity, (double)y->stats.capacity);
        break;
    case API_SORT_ITEMS: c = cmp_num((double)x->stats.items, (double)y->stats.items); break;
    case API_SORT_FILL: c = cmp_num(x->fill, y->fill); break;
    case API_SORT_FPR: c = cmp_num(x->stats.fpr, y->stats.fpr); break;
    case API_SORT_BYTES: c = cmp_num((double)x->stats.bytes, (double)y->stats.bytes); break;
    case API_SORT_PARTS: c = cmp_num((double)x->stats.parts, (double)y->stats.parts); break;
    case API_SORT_TTL:
        c = cmp_num(x->ttl_s < 0 ? INFINITY : x->ttl_s, y->ttl_s < 0 ? INFINITY : y->ttl_s);
        break;
    }
    if (c == 0)
        c = keycmp(x, y);
    return q->desc ? -c : c;
}

static void error_answer(textbuf *b, const char *err)
{
    tb_puts(b, "{\"error\":");
    tb_json_str(b, err, strlen(err));
    tb_puts(b, "}");
}

int api_filters(const http_who *who, const api_filters_args *a, textbuf *b)
{
    /* A page is at most metrics-max-key-series filters (or 1000 when that
     * is lower): the FPR estimate, which reads a filter's bits, is taken
     * for the page's rows only, so a request reads no more than a scrape. */
    size_t series = (size_t)atomic_load_explicit(&cfg.metrics_max_key_series, memory_order_relaxed);
    size_t max_per_page = series > 1000 ? series : 1000;
    api_list_query q;
    char err[160];
    if (!api_list_query_parse(a->sort, a->order, a->page, a->per_page, series, max_per_page, &q,
                              err, sizeof(err))) {
        error_answer(b, err);
        return API_BAD;
    }
    filter_list fl;
    filters_find(&fl, SIZE_MAX, a->mlen ? a->match : NULL, a->mlen, false); /* "": all */
    if (fl.failed)
        b->failed = true;
    /* A filter the user may not read is left out, as from /metrics. */
    size_t n = 0;
    for (size_t i = 0; i < fl.n; i++) {
        filter_row *r = &fl.rows[i];
        if (access_may_read(who, r->type, r->key, r->klen)) {
            fl.rows[n++] = *r;
        } else {
            kv_obj_free(r->obj);
            free(r->key);
        }
    }
    fl.n = n;
    int status = API_OK;
    if (q.sort == API_SORT_FPR) {
        /* Sorting by FPR reads every matching filter's bits: as many as a
         * page may hold at most. */
        if (n > max_per_page) {
            snprintf(err, sizeof(err),
                     "sorting by fpr reads every filter: at most %zu may match (%zu do); narrow "
                     "the match",
                     max_per_page, n);
            error_answer(b, err);
            status = API_BAD;
            goto done;
        }
        for (size_t i = 0; i < n; i++)
            filters_fpr(&fl.rows[i]);
    }
    if (q.sort != API_SORT_NAME || q.desc)
        qsort_r(fl.rows, n, sizeof(*fl.rows), by_column, &q);
    /* Past the last page: no rows (page * per_page may not fit). */
    size_t from = q.page - 1 > n / q.per_page ? n : (size_t)((q.page - 1) * q.per_page);
    if (from > n)
        from = n;
    size_t to = n - from < q.per_page ? n : from + (size_t)q.per_page;
    bool replica = repl_is_replica();
    tb_puts(b, "{\"user\":");
    tb_json_str(b, who->user->name, strlen(who->user->name));
    /* On a replica nothing that writes is offered (it would answer
     * READONLY): the console shows no control for it. */
    tb_printf(
        b,
        ",\"role\":\"%s\",\"can\":{\"create\":%s,\"delete\":%s,\"expire\":%s,"
        "\"persist\":%s,\"add\":%s,\"readonly\":%s},",
        replica ? "replica" : "master", yes(!replica && access_may_cmd(who, "BF.RESERVE")),
        yes(!replica && access_may_cmd(who, "DEL")), yes(!replica && access_may_cmd(who, "EXPIRE")),
        yes(!replica && access_may_cmd(who, "PERSIST")),
        yes(!replica && (access_may_cmd(who, "BF.INSERT") || access_may_cmd(who, "CF.INSERT"))),
        yes(!replica && access_may_cmd(who, "BF.CONFIG")));
    tb_printf(b, "\"total\":%zu,\"page\":%llu,\"per_page\":%llu,\"filters\":[", n,
              (unsigned long long)q.page, (unsigned long long)q.per_page);
    for (size_t i = from; i < to; i++) {
        filter_row *r = &fl.rows[i];
        filters_fpr(r);
        tb_puts(b, i > from ? ",{\"name\":" : "{\"name\":");
        tb_json_str(b, r->key, r->klen);
        tb_printf(b, ",\"type\":\"%s\",\"layout\":\"%s\",", r->type->name, r->stats.layout);
        num(b, "capacity", (double)r->stats.capacity, true);
        num(b, "items", (double)r->stats.items, true);
        num(b, "bytes", (double)r->stats.bytes, true);
        num(b, "parts", (double)r->stats.parts, true);
        num(b, "fill", r->fill, true);
        num(b, "fpr", r->stats.fpr >= 0 ? r->stats.fpr : NAN, true);
        num(b, "ttl", r->ttl_s, true);
        bool w = !replica;
        tb_printf(b,
                  "\"read_only\":%s,\"can\":{\"delete\":%s,\"expire\":%s,\"persist\":%s,"
                  "\"check\":%s,\"add\":%s,\"readonly\":%s}}",
                  yes(r->readonly), yes(w && may_key(who, "DEL", r->key, r->klen, 2)),
                  yes(w && may_key(who, "EXPIRE", r->key, r->klen, 3)),
                  yes(w && may_key(who, "PERSIST", r->key, r->klen, 2)),
                  yes(may_key(who, check_command(r->type), r->key, r->klen, 3)),
                  yes(w && !r->readonly && may_key(who, add_command(r->type), r->key, r->klen, 3)),
                  yes(w && may_key(who, "BF.CONFIG", r->key, r->klen, 2)));
    }
    tb_printf(b, "],\"truncated\":%s}", yes(to - from < n));
done:
    filters_free(&fl);
    return status;
}

void api_status(const http_who *who, textbuf *b)
{
    uint64_t connected = atomic_load(&srv.connected);
    tb_puts(b, "{\"user\":");
    tb_json_str(b, who->user->name, strlen(who->user->name));
    tb_printf(b, ",\"version\":\"%s\",\"run_id\":\"%s\",", BLOOMERYD_VERSION, srv.run_id);
    num(b, "uptime_s", (double)(now_ms() - srv.start_ms) / 1000.0, true);
    num(b, "connected_clients", (double)connected, true);
    num(b, "keys", (double)ks_dbsize(), true);
    tb_puts(b, "\"memory\":{");
    num(b, "used", (double)ks_used_memory(), true);
    num(b, "max", (double)atomic_load(&cfg.maxmemory), true);
    num(b, "machine", (double)ks_machine_memory(), false);
    tb_puts(b, "},\"persistence\":{");
    wal_stats ws;
    wal_get_stats(&ws);
    snapshot_stats ss;
    snapshot_get_stats(&ss);
    tb_printf(b, "\"log_enabled\":%s,\"log_write_ok\":%s,", wal_enabled() ? "true" : "false",
              ws.write_ok ? "true" : "false");
    num(b, "last_fsync_s", (double)ws.last_fsync_ms / 1000.0, true);
    num(b, "pending_bytes", (double)ws.pending_bytes, true);
    tb_printf(b, "\"snapshot_in_progress\":%s,\"last_snapshot_ok\":%s,",
              ss.in_progress ? "true" : "false", ss.last_ok ? "true" : "false");
    num(b, "last_snapshot_s", (double)ss.last_save_s, true);
    num(b, "changes_since_snapshot", (double)atomic_load(&persist_dirty), false);
    tb_puts(b, "},\"replication\":{");
    repl_status rs;
    repl_get_status(&rs);
    tb_printf(b, "\"role\":\"%s\",", rs.replica ? "replica" : "master");
    num(b, "offset", (double)rs.offset, true);
    if (rs.replica) {
        tb_puts(b, "\"master\":");
        tb_json_str(b, rs.master_host, strlen(rs.master_host));
        tb_printf(b, ",\"master_port\":%d,\"link_up\":%s,", rs.master_port,
                  rs.link == REPL_LINK_CONNECTED ? "true" : "false");
    }
    tb_puts(b, "\"replicas\":[");
    for (size_t i = 0; i < rs.nreplicas; i++) {
        const repl_replica_status *r = &rs.replicas[i];
        tb_puts(b, i ? ",{\"ip\":" : "{\"ip\":");
        tb_json_str(b, r->ip, strlen(r->ip));
        tb_printf(b, ",\"port\":%d,\"state\":\"%s\",", r->port, r->state);
        num(b, "lag_s", (double)r->lag_s, true);
        num(b, "lag_records", (double)(rs.offset > r->ack ? rs.offset - r->ack : 0), false);
        tb_puts(b, "}");
    }
    tb_puts(b, "]}}");
    repl_status_free(&rs);
}

bool api_calc(const char *capacity, const char *error_rate, const char *layout, const char *window,
              const char *slices, textbuf *b)
{
    api_size sz;
    char err[128];
    if (layout == NULL || *layout == '\0') /* what BF.RESERVE would make */
        layout = cfg_layout_names[cfg_default_layout(true)];
    if (!api_sizing(capacity, error_rate, layout, window, slices, &sz, err, sizeof(err))) {
        tb_puts(b, "{\"error\":");
        tb_json_str(b, err, strlen(err));
        tb_puts(b, "}");
        return false;
    }
    tb_printf(b, "{\"layout\":\"%s\",", sz.layout);
    num(b, "bytes", (double)sz.bytes, true);
    num(b, "bits_per_key", sz.bits_per_key, true);
    num(b, "expected_fpr", sz.fpr, false);
    tb_puts(b, "}");
    return true;
}

/* {"reply": <the command's reply>}, or {"error": ...}: API_BAD, or
 * API_DENIED for the user's NOPERM. */
static int run(const http_who *who, int argc, const char *const *argv, const size_t *lens,
               textbuf *b)
{
    textbuf reply = {0};
    char err[128];
    int ok = http_command(who, argc, argv, lens, &reply, err, sizeof(err)) ? API_OK : API_BAD;
    if (ok != API_OK) {
        tb_puts(b, "{\"error\":");
        tb_json_str(b, err, strlen(err));
        tb_puts(b, "}");
    } else if (reply.p && strncmp(reply.p, "{\"error\":", 9) == 0) {
        tb_add(b, reply.p, reply.len);
        static const char noperm[] = "{\"error\":\"NOPERM ";
        ok = strncmp(reply.p, noperm, sizeof(noperm) - 1) == 0 ? API_DENIED : API_BAD;
    } else {
        tb_puts(b, "{\"reply\":");
        tb_add(b, reply.p ? reply.p : "null", reply.p ? reply.len : 4);
        tb_puts(b, "}");
    }
    if (reply.failed)
        b->failed = true;
    tb_free(&reply);
    return ok;
}

/* The write routes on a replica: refused with Redis's READONLY error
 * whatever replica-read-only says, as the console offers none there. */
static bool refuse_on_replica(textbuf *b)
{
    if (!repl_is_replica())
        return false;
    error_answer(b, "READONLY You can't write against a read only replica.");
    return true;
}

int api_create(const http_who *who, const api_filter_form *f, textbuf *b)
{
    if (refuse_on_replica(b))
        return API_BAD;
    const char *argv[API_RESERVE_MAX_ARGS];
    size_t lens[API_RESERVE_MAX_ARGS];
    char err[128];
    int argc = api_reserve_argv(f, argv, lens, err, sizeof(err));
    if (argc < 0) {
        tb_puts(b, "{\"error\":");
        tb_json_str(b, err, strlen(err));
        tb_puts(b, "}");
        return API_BAD;
    }
    return run(who, argc, argv, lens, b);
}

int api_delete(const http_who *who, const char *name, size_t len, textbuf *b)
{
    if (refuse_on_replica(b))
        return API_BAD;
    const char *argv[] = {"DEL", name};
    size_t lens[] = {3, len};
    return run(who, 2, argv, lens, b);
}

int api_expire(const http_who *who, const char *name, size_t len, const char *seconds, textbuf *b)
{
    if (refuse_on_replica(b))
        return API_BAD;
    const char *argv[] = {"EXPIRE", name, seconds ? seconds : ""};
    size_t lens[] = {6, len, seconds ? strlen(seconds) : 0};
    return run(who, 3, argv, lens, b);
}

int api_persist(const http_who *who, const char *name, size_t len, textbuf *b)
{
    if (refuse_on_replica(b))
        return API_BAD;
    const char *argv[] = {"PERSIST", name};
    size_t lens[] = {7, len};
    return run(who, 2, argv, lens, b);
}

int api_readonly(const http_who *who, const char *name, size_t len, const char *value, textbuf *b)
{
    if (refuse_on_replica(b))
        return API_BAD;
    if (value == NULL || (strcmp(value, "yes") != 0 && strcmp(value, "no") != 0)) {
        error_answer(b, "readonly must be yes or no");
        return API_BAD;
    }
    const char *argv[] = {"BF.CONFIG", name, "READONLY", value};
    size_t lens[] = {9, len, 8, strlen(value)};
    return run(who, 4, argv, lens, b);
}

#define ITEMS_MAX 65536 /* more than a 64 KiB body can hold */

int api_items(const http_who *who, bool add, const char *name, size_t len, const char *items,
              size_t ilen, textbuf *b)
{
    if (add && refuse_on_replica(b))
        return API_BAD;
    /* The command of the key's type: a key that is missing is not created
     * (NOCREATE), one of another type answers WRONGTYPE. */
    ks_ref ref;
    kv_entry *e = ks_open(&ref, name, len, false);
    const value_type *t = e ? e->obj->type : NULL;
    ks_close(&ref);
    if (t == NULL) {
        error_answer(b, "ERR not found");
        return API_BAD;
    }
    size_t head = add ? 4 : 2; /* BF.INSERT key NOCREATE ITEMS | BF.MEXISTS key */
    const char **argv = malloc((head + ITEMS_MAX) * sizeof(*argv));
    size_t *lens = malloc((head + ITEMS_MAX) * sizeof(*lens));
    int status = API_BAD;
    if (argv == NULL || lens == NULL) {
        b->failed = true;
        goto out;
    }
    size_t n =
        api_split_lines(items ? items : "", items ? ilen : 0, argv + head, lens + head, ITEMS_MAX);
    if (n == 0 || n > ITEMS_MAX) {
        error_answer(b, n ? "too many items" : "items are required, one a line");
        goto out;
    }
    argv[0] = add ? add_command(t) : check_command(t);
    lens[0] = strlen(argv[0]);
    argv[1] = name;
    lens[1] = len;
    if (add) {
        argv[2] = "NOCREATE";
        lens[2] = 8;
        argv[3] = "ITEMS";
        lens[3] = 5;
    }
    status = run(who, (int)(head + n), argv, lens, b);
out:
    free(argv);
    free(lens);
    return status;
}

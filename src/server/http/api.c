/* The console's JSON API (docs/CONSOLE.md). Reads come from the server's
 * state (the filters and their statistics as /metrics has them, INFO's
 * sources); changes run as commands through a worker (command.c), so
 * they take the same path as a client's, as the request's user. What the
 * user may do is told with the filters ("can"), so that the console shows
 * only those buttons; the server refuses the others anyway. */
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

void api_filters(const http_who *who, textbuf *b)
{
    filter_list fl;
    filters_collect(
        &fl, (size_t)atomic_load_explicit(&cfg.metrics_max_key_series, memory_order_relaxed));
    if (fl.failed)
        b->failed = true;
    tb_puts(b, "{\"user\":");
    tb_json_str(b, who->user->name, strlen(who->user->name));
    tb_printf(b, ",\"can\":{\"create\":%s,\"delete\":%s,\"expire\":%s},\"filters\":[",
              yes(access_may_cmd(who, "BF.RESERVE")), yes(access_may_cmd(who, "DEL")),
              yes(access_may_cmd(who, "EXPIRE")));
    size_t shown = 0;
    for (size_t i = 0; i < fl.n; i++) {
        const filter_row *r = &fl.rows[i];
        /* A filter the user may not read is left out, as from /metrics. */
        if (!access_may_read(who, r->type, r->key, r->klen))
            continue;
        tb_puts(b, shown++ ? ",{\"name\":" : "{\"name\":");
        tb_json_str(b, r->key, r->klen);
        tb_printf(b, ",\"type\":\"%s\",\"layout\":\"%s\",", r->type->name, r->stats.layout);
        num(b, "capacity", (double)r->stats.capacity, true);
        num(b, "items", (double)r->stats.items, true);
        num(b, "bytes", (double)r->stats.bytes, true);
        num(b, "parts", (double)r->stats.parts, true);
        num(b, "fill", r->fill, true);
        num(b, "fpr", r->stats.fpr >= 0 ? r->stats.fpr : NAN, true);
        num(b, "ttl", r->ttl_s, true);
        tb_printf(b, "\"can\":{\"delete\":%s,\"expire\":%s}}",
                  yes(may_key(who, "DEL", r->key, r->klen, 2)),
                  yes(may_key(who, "EXPIRE", r->key, r->klen, 3)));
    }
    tb_printf(b, "],\"truncated\":%s}", fl.truncated ? "true" : "false");
    filters_free(&fl);
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

int api_create(const http_who *who, const api_filter_form *f, textbuf *b)
{
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
    const char *argv[] = {"DEL", name};
    size_t lens[] = {3, len};
    return run(who, 2, argv, lens, b);
}

int api_expire(const http_who *who, const char *name, size_t len, const char *seconds, textbuf *b)
{
    const char *argv[] = {"EXPIRE", name, seconds ? seconds : ""};
    size_t lens[] = {6, len, seconds ? strlen(seconds) : 0};
    return run(who, 3, argv, lens, b);
}

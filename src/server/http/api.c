/* The console's JSON API (docs/CONSOLE.md). Reads come from the server's
 * state (the filters and their statistics as /metrics has them, INFO's
 * sources); changes run as commands through a worker (command.c), so
 * they take the same path as a client's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_args.h"
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

void api_filters(textbuf *b)
{
    filter_list fl;
    filters_collect(
        &fl, (size_t)atomic_load_explicit(&cfg.metrics_max_key_series, memory_order_relaxed));
    if (fl.failed)
        b->failed = true;
    tb_puts(b, "{\"filters\":[");
    for (size_t i = 0; i < fl.n; i++) {
        const filter_row *r = &fl.rows[i];
        tb_puts(b, i ? ",{\"name\":" : "{\"name\":");
        tb_json_str(b, r->key, r->klen);
        tb_printf(b, ",\"type\":\"%s\",\"layout\":\"%s\",", r->type->name, r->stats.layout);
        num(b, "capacity", (double)r->stats.capacity, true);
        num(b, "items", (double)r->stats.items, true);
        num(b, "bytes", (double)r->stats.bytes, true);
        num(b, "parts", (double)r->stats.parts, true);
        num(b, "fill", r->fill, true);
        num(b, "fpr", r->stats.fpr >= 0 ? r->stats.fpr : NAN, true);
        num(b, "ttl", r->ttl_s, false);
        tb_puts(b, "}");
    }
    tb_printf(b, "],\"truncated\":%s}", fl.truncated ? "true" : "false");
    filters_free(&fl);
}

void api_status(textbuf *b)
{
    uint64_t connected = atomic_load(&srv.connected);
    tb_printf(b, "{\"version\":\"%s\",\"run_id\":\"%s\",", BLOOMERYD_VERSION, srv.run_id);
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

/* {"reply": <the command's reply>}; false (an error reply or none). */
static bool run(int argc, const char *const *argv, const size_t *lens, textbuf *b)
{
    textbuf reply = {0};
    char err[128];
    bool ok = http_command(argc, argv, lens, &reply, err, sizeof(err));
    if (!ok) {
        tb_puts(b, "{\"error\":");
        tb_json_str(b, err, strlen(err));
        tb_puts(b, "}");
    } else if (reply.p && strncmp(reply.p, "{\"error\":", 9) == 0) {
        tb_add(b, reply.p, reply.len);
        ok = false;
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

bool api_create(const api_filter_form *f, textbuf *b)
{
    const char *argv[API_RESERVE_MAX_ARGS];
    size_t lens[API_RESERVE_MAX_ARGS];
    char err[128];
    int argc = api_reserve_argv(f, argv, lens, err, sizeof(err));
    if (argc < 0) {
        tb_puts(b, "{\"error\":");
        tb_json_str(b, err, strlen(err));
        tb_puts(b, "}");
        return false;
    }
    return run(argc, argv, lens, b);
}

bool api_delete(const char *name, size_t len, textbuf *b)
{
    const char *argv[] = {"DEL", name};
    size_t lens[] = {3, len};
    return run(2, argv, lens, b);
}

bool api_expire(const char *name, size_t len, const char *seconds, textbuf *b)
{
    const char *argv[] = {"EXPIRE", name, seconds ? seconds : ""};
    size_t lens[] = {6, len, seconds ? strlen(seconds) : 0};
    return run(3, argv, lens, b);
}

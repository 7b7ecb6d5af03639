/* /metrics: the server's state in Prometheus's text format (docs/CONSOLE.md
 * lists every series). Counters are summed over the workers' own
 * statistics; per-key series come from the keyspace's scan in small steps,
 * each holding one stripe's read lock briefly, and stop after
 * metrics-max-key-series keys (filters.c). The page stands for INFO (the
 * listener checks it); a key's series for SCAN and the key's INFO command
 * (BF.INFO, CF.INFO): a user who may not read a key does not see it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "exact.h"
#include "persist.h"
#include "repl.h"
#include "server.h"
#include "snapshot.h"
#include "util.h"

static void help(textbuf *b, const char *name, const char *type, const char *text)
{
    tb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

static void gauge(textbuf *b, const char *name, const char *text, double v)
{
    help(b, name, "gauge", text);
    tb_printf(b, "%s %.17g\n", name, v);
}

static void counter(textbuf *b, const char *name, const char *text, uint64_t v)
{
    help(b, name, "counter", text);
    tb_printf(b, "%s %llu\n", name, (unsigned long long)v);
}

static uint64_t load(_Atomic uint64_t *v) { return atomic_load_explicit(v, memory_order_relaxed); }

static void server_series(textbuf *b)
{
    int64_t now = now_ms();
    help(b, "bloomery_info", "gauge", "Version and run id of this server.");
    tb_printf(b, "bloomery_info{version=\"%s\",redis_version=\"%s\",run_id=\"%s\"} 1\n",
              BLOOMERYD_VERSION, REDIS_COMPAT_VERSION, srv.run_id);
    gauge(b, "bloomery_uptime_seconds", "Seconds since the server started.",
          (double)(now - srv.start_ms) / 1000.0);
    gauge(b, "bloomery_connected_clients", "Client connections open now.",
          (double)load(&srv.connected));
    counter(b, "bloomery_connections_received_total", "Connections accepted.",
            load(&srv.total_connections));
    counter(b, "bloomery_rejected_connections_total", "Connections refused (maxclients).",
            load(&srv.rejected_connections));
    uint64_t commands = 0, hits = 0, misses = 0, errors = 0, net_in = 0, net_out = 0;
    for (int i = 0; i < srv.nworkers; i++) {
        worker *w = &srv.workers[i];
        commands += load(&w->commands);
        hits += load(&w->hits);
        misses += load(&w->misses);
        errors += load(&w->errors);
        net_in += load(&w->net_in);
        net_out += load(&w->net_out);
    }
    counter(b, "bloomery_commands_processed_total", "Commands received, refused ones included.",
            commands);
    counter(b, "bloomery_error_replies_total", "Error replies.", errors);
    counter(b, "bloomery_keyspace_hits_total", "Lookups that found their key.", hits);
    counter(b, "bloomery_keyspace_misses_total", "Lookups that did not find their key.", misses);
    counter(b, "bloomery_net_input_bytes_total", "Bytes read from clients.", net_in);
    counter(b, "bloomery_net_output_bytes_total", "Bytes written to clients.", net_out);
    gauge(b, "bloomery_memory_used_bytes", "Memory counted against maxmemory.",
          (double)ks_used_memory());
    gauge(b, "bloomery_memory_max_bytes", "maxmemory (0: none).",
          (double)atomic_load_explicit(&cfg.maxmemory, memory_order_relaxed));
    gauge(b, "bloomery_memory_machine_bytes", "The machine's memory.", (double)ks_machine_memory());
    gauge(b, "bloomery_keys", "Keys in the keyspace.", (double)ks_dbsize());
    gauge(b, "bloomery_keys_with_expiry", "Keys with an expiry.", (double)ks_expires_count());
    counter(b, "bloomery_expired_keys_total", "Keys removed by their expiry.",
            load(&ks_stat_expired));
}

static void command_series(textbuf *b)
{
    help(b, "bloomery_command_calls_total", "counter", "Calls of a command that ran.");
    help(b, "bloomery_command_failed_total", "counter", "Calls that answered an error.");
    help(b, "bloomery_command_rejected_total", "counter",
         "Calls refused before running (arity, auth, OOM, MISCONF, replication).");
    help(b, "bloomery_command_duration_seconds", "histogram", "Time in the command's handler.");
    for (size_t k = 0; k < commands_count(); k++) {
        const command *cmd = command_at(k);
        uint64_t calls = 0, usec = 0, failed = 0, rejected = 0, lat[CMD_LAT_BUCKETS] = {0};
        for (int i = 0; i < srv.nworkers; i++) {
            cmd_stat *st = &srv.workers[i].stats[k];
            calls += load(&st->calls);
            usec += load(&st->usec);
            failed += load(&st->failed);
            rejected += load(&st->rejected);
            for (int j = 0; j < CMD_LAT_BUCKETS; j++)
                lat[j] += load(&st->lat[j]);
        }
        if (calls == 0 && rejected == 0)
            continue; /* only commands used since the start (or CONFIG RESETSTAT) */
        tb_printf(b, "bloomery_command_calls_total{cmd=\"%s\"} %llu\n", cmd->name,
                  (unsigned long long)calls);
        tb_printf(b, "bloomery_command_failed_total{cmd=\"%s\"} %llu\n", cmd->name,
                  (unsigned long long)failed);
        tb_printf(b, "bloomery_command_rejected_total{cmd=\"%s\"} %llu\n", cmd->name,
                  (unsigned long long)rejected);
        /* The buckets were counted one by one while calls was added to
         * separately: the +Inf bucket and _count are their sum, so the
         * histogram stays consistent however the reads interleave. */
        uint64_t cum = 0;
        for (int j = 0; j < CMD_LAT_BUCKETS; j++) {
            cum += lat[j];
            if (j < CMD_LAT_BUCKETS - 1)
                tb_printf(b,
                          "bloomery_command_duration_seconds_bucket{cmd=\"%s\",le=\"%g\"} %llu\n",
                          cmd->name, (double)cmd_lat_bounds_us[j] / 1e6, (unsigned long long)cum);
        }
        tb_printf(b, "bloomery_command_duration_seconds_bucket{cmd=\"%s\",le=\"+Inf\"} %llu\n",
                  cmd->name, (unsigned long long)cum);
        tb_printf(b, "bloomery_command_duration_seconds_sum{cmd=\"%s\"} %.6f\n", cmd->name,
                  (double)usec / 1e6);
        tb_printf(b, "bloomery_command_duration_seconds_count{cmd=\"%s\"} %llu\n", cmd->name,
                  (unsigned long long)cum);
    }
}

static void persistence_series(textbuf *b)
{
    wal_stats ws;
    wal_get_stats(&ws);
    gauge(b, "bloomery_log_enabled", "1 when the write-ahead log is on (appendonly yes).",
          wal_enabled() ? 1 : 0);
    gauge(b, "bloomery_log_write_ok", "0 after a log write or fsync error not yet repaired.",
          ws.write_ok ? 1 : 0);
    gauge(b, "bloomery_log_last_fsync_timestamp_seconds", "Time of the last fsync of the log.",
          (double)ws.last_fsync_ms / 1000.0);
    gauge(b, "bloomery_log_pending_bytes", "Log bytes written but not yet durable.",
          (double)ws.pending_bytes);
    counter(b, "bloomery_log_written_bytes_total", "Bytes written to the log.", ws.bytes);
    counter(b, "bloomery_log_fsyncs_total", "fsyncs of the log.", ws.fsyncs);
    counter(b, "bloomery_log_write_errors_total",
            "Failed writes, fsyncs and file creations of the log, retries included.", ws.errors);
    gauge(b, "bloomery_log_written_lsn", "Last log record written.", (double)ws.written_lsn);
    gauge(b, "bloomery_log_durable_lsn", "Last log record known durable.", (double)ws.durable_lsn);
    snapshot_stats ss;
    snapshot_get_stats(&ss);
    gauge(b, "bloomery_snapshot_in_progress", "1 while a snapshot is written.",
          ss.in_progress ? 1 : 0);
    gauge(b, "bloomery_snapshot_last_ok", "0 when the last snapshot failed.", ss.last_ok ? 1 : 0);
    gauge(b, "bloomery_snapshot_last_success_timestamp_seconds",
          "Time of the last successful snapshot.", (double)ss.last_save_s);
    gauge(b, "bloomery_snapshot_last_duration_seconds", "How long the last snapshot took.",
          (double)ss.last_duration_ms / 1000.0);
    gauge(b, "bloomery_snapshot_last_bytes_written", "Bytes the last snapshot wrote.",
          (double)ss.bytes_written);
    gauge(b, "bloomery_changes_since_last_snapshot", "Changes not yet in a snapshot.",
          (double)load(&persist_dirty));
}

/* Exact filters' store (docs/EXACT.md), once exact filters are used. */
static void exact_series(textbuf *b)
{
    exact_summary x;
    if (!exact_summarize(&x))
        return;
    gauge(b, "bloomery_exact_store_up", "0 when the exact store could not be opened.",
          x.store_ok ? 1 : 0);
    gauge(b, "bloomery_exact_filters", "Exact filters in the keyspace.", (double)x.filters);
    gauge(b, "bloomery_exact_store_periods", "Periods (column families) the store holds.",
          (double)x.periods);
    gauge(b, "bloomery_exact_store_keys", "Fingerprints the store holds (estimate).",
          (double)x.keys);
    gauge(b, "bloomery_exact_store_disk_bytes", "Bytes of the store's table files.",
          (double)x.disk_bytes);
    gauge(b, "bloomery_exact_store_buffer_bytes", "Bytes of fingerprints not yet in a table file.",
          (double)x.buffer_bytes);
    counter(b, "bloomery_exact_store_lookups_total", "Fingerprints looked up in the store.",
            x.lookups);
    counter(b, "bloomery_exact_store_puts_total", "Fingerprints written to the store.", x.puts);
    gauge(b, "bloomery_exact_store_applied_lsn",
          "The log position below which the store is complete.", (double)x.applied_lsn);
}

static void replication_series(textbuf *b)
{
    repl_status rs;
    repl_get_status(&rs);
    help(b, "bloomery_replication_role", "gauge", "1 for the role this server has.");
    tb_printf(b, "bloomery_replication_role{role=\"master\"} %d\n", rs.replica ? 0 : 1);
    tb_printf(b, "bloomery_replication_role{role=\"replica\"} %d\n", rs.replica ? 1 : 0);
    gauge(b, "bloomery_replication_offset", "Last LSN applied or appended.", (double)rs.offset);
    if (rs.replica) {
        gauge(b, "bloomery_master_link_up", "1 while the link to the master is up.",
              rs.link == REPL_LINK_CONNECTED ? 1 : 0);
        /* INFO's master_last_io_seconds_ago: how stale a replica's data may be. */
        gauge(b, "bloomery_master_last_io_seconds",
              "Seconds since the last data from the master (-1: none yet).",
              rs.last_io_ms ? (double)(now_ms() - rs.last_io_ms) / 1000.0 : -1);
        gauge(b, "bloomery_master_sync_in_progress", "1 while a sync from the master runs.",
              rs.sync_in_progress ? 1 : 0);
    }
    gauge(b, "bloomery_connected_replicas", "Replicas served.", (double)rs.nreplicas);
    /* The replicas a master is configured to need: what an alert compares
     * bloomery_connected_replicas with. */
    gauge(b, "bloomery_min_replicas_to_write", "min-replicas-to-write (0: writes never wait).",
          (double)atomic_load_explicit(&cfg.min_replicas_to_write, memory_order_relaxed));
    counter(b, "bloomery_replication_full_syncs_total", "Full syncs served to replicas.",
            rs.full_syncs);
    help(b, "bloomery_replication_partial_syncs_total", "counter",
         "Partial syncs asked for by replicas: accepted (ok) or refused (err).");
    tb_printf(b, "bloomery_replication_partial_syncs_total{result=\"ok\"} %llu\n",
              (unsigned long long)rs.partial_syncs_ok);
    tb_printf(b, "bloomery_replication_partial_syncs_total{result=\"err\"} %llu\n",
              (unsigned long long)rs.partial_syncs_err);
    help(b, "bloomery_replica_lag_seconds", "gauge",
         "Seconds since a replica's last acknowledgement.");
    help(b, "bloomery_replica_lag_records", "gauge",
         "Log records a replica has not acknowledged yet.");
    for (size_t i = 0; i < rs.nreplicas; i++) {
        const repl_replica_status *r = &rs.replicas[i];
        textbuf lbl = {0};
        tb_puts(&lbl, "{addr=\"");
        tb_label(&lbl, r->ip, strlen(r->ip));
        tb_printf(&lbl, ":%d\",state=\"%s\"}", r->port, r->state);
        if (lbl.failed) {
            b->failed = true;
        } else {
            tb_printf(b, "bloomery_replica_lag_seconds%s %lld\n", lbl.p, (long long)r->lag_s);
            tb_printf(b, "bloomery_replica_lag_records%s %llu\n", lbl.p,
                      (unsigned long long)(rs.offset > r->ack ? rs.offset - r->ack : 0));
        }
        tb_free(&lbl);
    }
    repl_status_free(&rs);
}

/* ---- per key ---- */

static void key_series(textbuf *b, const filter_row *r)
{
    textbuf lbl = {0};
    tb_puts(&lbl, "{key=\"");
    tb_label(&lbl, r->key, r->klen);
    tb_puts(&lbl, "\"}");
    if (lbl.failed) {
        b->failed = true;
        return;
    }
    const value_stats *s = &r->stats;
    tb_puts(b, "bloomery_filter_info{key=\"");
    tb_label(b, r->key, r->klen);
    tb_printf(b, "\",type=\"%s\",layout=\"%s\"} 1\n", r->type->name, s->layout);
    tb_printf(b, "bloomery_filter_capacity%s %llu\n", lbl.p, (unsigned long long)s->capacity);
    tb_printf(b, "bloomery_filter_items%s %llu\n", lbl.p, (unsigned long long)s->items);
    tb_printf(b, "bloomery_filter_bytes%s %llu\n", lbl.p, (unsigned long long)s->bytes);
    tb_printf(b, "bloomery_filter_parts%s %llu\n", lbl.p, (unsigned long long)s->parts);
    tb_printf(b, "bloomery_filter_fill_ratio%s %.17g\n", lbl.p, r->fill);
    if (s->fpr >= 0 && isfinite(s->fpr))
        tb_printf(b, "bloomery_filter_fpr_estimate%s %.17g\n", lbl.p, s->fpr);
    if (s->error_rate > 0)
        tb_printf(b, "bloomery_filter_error_rate%s %.17g\n", lbl.p, s->error_rate);
    tb_printf(b, "bloomery_filter_ttl_seconds%s %.3f\n", lbl.p, r->ttl_s);
    tb_free(&lbl);
}

static void keys_series(const http_who *who, textbuf *b)
{
    bool scan = access_may_cmd(who, "SCAN");
    filter_list fl;
    filters_collect(
        &fl, (size_t)atomic_load_explicit(&cfg.metrics_max_key_series, memory_order_relaxed));
    help(b, "bloomery_keys_by_type", "gauge", "Keys by value type.");
    for (size_t i = 0; i < types_count() && i < FILTERS_MAX_TYPES; i++)
        tb_printf(b, "bloomery_keys_by_type{type=\"%s\"} %llu\n", type_at(i)->name,
                  (unsigned long long)fl.by_type[i]);
    gauge(b, "bloomery_filter_series_truncated",
          "1 when filters were left out of the per-key series (metrics-max-key-series).",
          fl.truncated ? 1 : 0);
    help(b, "bloomery_filter_info", "gauge", "A filter: its type and layout.");
    help(b, "bloomery_filter_capacity", "gauge", "Items the filter was sized for.");
    help(b, "bloomery_filter_items", "gauge", "Items added (live items of a window).");
    help(b, "bloomery_filter_bytes", "gauge", "Bytes of the filter's arrays.");
    help(b, "bloomery_filter_parts", "gauge",
         "Links of a scalable chain, slices of a window, sub-filters of a cuckoo filter.");
    help(b, "bloomery_filter_fill_ratio", "gauge", "Items over capacity.");
    help(b, "bloomery_filter_fpr_estimate", "gauge",
         "False-positive rate estimated from the filter's bits now.");
    help(b, "bloomery_filter_error_rate", "gauge", "False-positive rate asked for at creation.");
    help(b, "bloomery_filter_ttl_seconds", "gauge", "Seconds until the key expires (-1: never).");
    if (fl.failed)
        b->failed = true;
    for (size_t i = 0; scan && i < fl.n; i++)
        if (access_may_read(who, fl.rows[i].type, fl.rows[i].key, fl.rows[i].klen))
            key_series(b, &fl.rows[i]);
    filters_free(&fl);
}

bool metrics_render(const http_who *who, textbuf *b)
{
    server_series(b);
    command_series(b);
    persistence_series(b);
    exact_series(b);
    replication_series(b);
    keys_series(who, b);
    return !b->failed;
}

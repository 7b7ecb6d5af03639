/* The command table, dispatch and COMMAND.
 *
 * Dispatch checks in Redis 7's order, because clients and tests see the
 * difference: unknown command, then arity, then authentication, then
 * maxmemory for commands that may allocate. Lookup is a small open-addressed
 * hash of the lowercase names, so a pipelined BF.ADD pays one hash and one
 * compare, not a scan of the table.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit.h"
#include "persist.h"
#include "repl.h"
#include "server.h"
#include "util.h"
#include "value_commands.h"

#define W CMD_WRITE
#define R CMD_READONLY
#define M CMD_DENYOOM
#define F CMD_FAST
#define N CMD_NOAUTH
#define A CMD_ADMIN
/* As Redis flags them: pubsub, noscript, loading, stale, skip_slowlog,
 * allow_busy; the host's own: allowed in RESP2 subscribed mode (SC), run at
 * once inside MULTI (TX). */
#define PS CMD_PUBSUB
#define NS CMD_NOSCRIPT
#define LS (CMD_LOADING | CMD_STALE)
#define SS CMD_SKIP_SLOWLOG
#define AB CMD_ALLOW_BUSY
#define SC CMD_SUBCTX
#define TX CMD_TXCTL

static command table[] = {
    /* connection and server */
    {"ping", pingCommand, -1, F | SC, 0, 0, 0, "connection", 0, false, NULL},
    {"echo", echoCommand, 2, F, 0, 0, 0, "connection", 0, false, NULL},
    {"hello", helloCommand, -1, F | N, 0, 0, 0, "connection", 0, false, NULL},
    {"auth", authCommand, -2, F | N, 0, 0, 0, "connection", 0, false, NULL},
    {"select", selectCommand, 2, F, 0, 0, 0, "connection", 0, false, NULL},
    {"quit", quitCommand, -1, F | N | SC | TX, 0, 0, 0, "connection", 0, false, NULL},
    {"client", clientCommand, -2, 0, 0, 0, 0, "connection", 0, false, NULL},
    {"dbsize", dbsizeCommand, 1, R | F, 0, 0, 0, "server", 0, false, NULL},
    {"shutdown", shutdownCommand, -1, A, 0, 0, 0, "server", 0, false, NULL},
    {"info", infoCommand, -1, 0, 0, 0, 0, "server", 0, false, NULL},
    {"command", commandCommand, -1, 0, 0, 0, 0, "server", 0, false, NULL},
    {"config", configCommand, -2, A, 0, 0, 0, "server", 0, false, NULL},
    {"module", moduleCommand, -2, A | NS, 0, 0, 0, "server", 0, false, NULL},
    {"memory", memoryCommand, -2, R, 2, 2, 1, "server", 0, false, NULL},
    {"time", timeCommand, 1, F, 0, 0, 0, "server", 0, false, NULL},
    {"slowlog", slowlogCommand, -2, A | LS, 0, 0, 0, "server", 0, false, NULL},
    {"latency", latencyCommand, -2, A | NS | LS, 0, 0, 0, "server", 0, false, NULL},
    {"flushall", flushallCommand, -1, W, 0, 0, 0, "server", 0, false, NULL},
    {"flushdb", flushallCommand, -1, W, 0, 0, 0, "server", 0, false, NULL},
    {"lastsave", lastsaveCommand, 1, F, 0, 0, 0, "server", 0, false, NULL},
    {"save", saveCommand, 1, A, 0, 0, 0, "server", 0, false, NULL},
    {"bgsave", bgsaveCommand, -1, A, 0, 0, 0, "server", 0, false, NULL},
    {"bgrewriteaof", bgrewriteaofCommand, 1, A, 0, 0, 0, "server", 0, false, NULL},
    /* replication (t_repl.c) */
    {"replicaof", replicaofCommand, 3, A | NS | CMD_STALE, 0, 0, 0, "server", 0, false, NULL},
    {"slaveof", replicaofCommand, 3, A | NS | CMD_STALE, 0, 0, 0, "server", 0, false, NULL},
    {"role", roleCommand, 1, F | NS | LS, 0, 0, 0, "server", 0, false, NULL},
    {"wait", waitCommand, 3, NS, 0, 0, 0, "generic", 0, false, NULL},
    {"replconf", replconfCommand, -1, A | NS | LS, 0, 0, 0, "server", 0, false, NULL},
    {"psync", psyncCommand, -3, A | NS, 0, 0, 0, "server", 0, false, NULL},
    /* Pub/Sub (pubsub.c) */
    {"subscribe", subscribeCommand, -2, PS | NS | LS | SC, 0, 0, 0, "pubsub", 0, false, NULL},
    {"unsubscribe", unsubscribeCommand, -1, PS | NS | LS | SC, 0, 0, 0, "pubsub", 0, false, NULL},
    {"psubscribe", psubscribeCommand, -2, PS | NS | LS | SC, 0, 0, 0, "pubsub", 0, false, NULL},
    {"punsubscribe", punsubscribeCommand, -1, PS | NS | LS | SC, 0, 0, 0, "pubsub", 0, false, NULL},
    {"publish", publishCommand, 3, PS | LS | F, 0, 0, 0, "pubsub", 0, false, NULL},
    {"pubsub", pubsubCommand, -2, PS | LS, 0, 0, 0, "pubsub", 0, false, NULL},
    /* transactions (multi.c) */
    {"multi", multiCommand, 1, NS | LS | F | AB | TX, 0, 0, 0, "transaction", 0, false, NULL},
    {"exec", execCommand, 1, NS | LS | SS | TX, 0, 0, 0, "transaction", 0, false, NULL},
    {"discard", discardCommand, 1, NS | LS | F | AB | TX, 0, 0, 0, "transaction", 0, false, NULL},
    {"watch", watchCommand, -2, NS | LS | F | AB | TX, 1, -1, 1, "transaction", 0, false, NULL},
    {"unwatch", unwatchCommand, 1, NS | LS | F | AB, 0, 0, 0, "transaction", 0, false, NULL},
    /* keyspace */
    {"del", delCommand, -2, W, 1, -1, 1, "generic", 0, false, NULL},
    {"unlink", delCommand, -2, W | F, 1, -1, 1, "generic", 0, false, NULL},
    {"exists", existsCommand, -2, R | F, 1, -1, 1, "generic", 0, false, NULL},
    {"type", typeCommand, 2, R | F, 1, 1, 1, "generic", 0, false, NULL},
    {"keys", keysCommand, 2, R, 0, 0, 0, "generic", 0, false, NULL},
    {"scan", scanCommand, -2, R, 0, 0, 0, "generic", 0, false, NULL},
    {"randomkey", randomkeyCommand, 1, R, 0, 0, 0, "generic", 0, false, NULL},
    {"rename", renameCommand, 3, W, 1, 2, 1, "generic", 0, false, NULL},
    {"renamenx", renamenxCommand, 3, W | F, 1, 2, 1, "generic", 0, false, NULL},
    {"expire", expireCommand, -3, W | F, 1, 1, 1, "generic", 0, false, NULL},
    {"pexpire", pexpireCommand, -3, W | F, 1, 1, 1, "generic", 0, false, NULL},
    {"expireat", expireatCommand, -3, W | F, 1, 1, 1, "generic", 0, false, NULL},
    {"pexpireat", pexpireatCommand, -3, W | F, 1, 1, 1, "generic", 0, false, NULL},
    {"ttl", ttlCommand, 2, R | F, 1, 1, 1, "generic", 0, false, NULL},
    {"pttl", pttlCommand, 2, R | F, 1, 1, 1, "generic", 0, false, NULL},
    {"expiretime", expiretimeCommand, 2, R | F, 1, 1, 1, "generic", 0, false, NULL},
    {"pexpiretime", pexpiretimeCommand, 2, R | F, 1, 1, 1, "generic", 0, false, NULL},
    {"persist", persistCommand, 2, W | F, 1, 1, 1, "generic", 0, false, NULL},
/* Bloom and cuckoo: value_commands.h, shared with the module */
#define VALUE_ROW(name, proc, arity, flags, fk, lk, ks, group, batch)                              \
    {name, proc, arity, flags, fk, lk, ks, group, 0, false, batch},
    VALUE_COMMANDS(VALUE_ROW)
#undef VALUE_ROW
    /* HyperLogLog */
    {"pfadd", pfaddCommand, -2, W | M | F, 1, 1, 1, "hyperloglog", 0, false, NULL},
    {"pfcount", pfcountCommand, -2, R, 1, -1, 1, "hyperloglog", 0, false, NULL},
    {"pfmerge", pfmergeCommand, -2, W | M, 1, -1, 1, "hyperloglog", 0, false, NULL},
};
#define NCOMMANDS (sizeof(table) / sizeof(table[0]))

#define HBITS 8
static const command *htab[1u << HBITS];

static unsigned name_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)tolower((unsigned char)s[i])) * 16777619u;
    return h & ((1u << HBITS) - 1);
}

void commands_init(void)
{
    for (size_t i = 0; i < NCOMMANDS; i++) {
        table[i].id = (int)i;
        /* Answers that depend on the data (and so on log records): every
         * command on keys, every write, and the server's readers (DBSIZE,
         * MEMORY). PING, INFO, CLIENT, CONFIG do not wait for the log. */
        const char *g = table[i].group;
        table[i].touches_keys = (strcmp(g, "connection") != 0 && strcmp(g, "server") != 0 &&
                                 strcmp(g, "pubsub") != 0 && strcmp(g, "transaction") != 0) ||
                                (table[i].flags & (CMD_WRITE | CMD_READONLY)) ||
                                table[i].first_key > 0;
        unsigned h = name_hash(table[i].name, strlen(table[i].name));
        while (htab[h])
            h = (h + 1) & ((1u << HBITS) - 1);
        htab[h] = &table[i];
    }
}

void commands_free(void) {}

const command *command_lookup(const char *name, size_t len)
{
    if (len == 0 || len > 32)
        return NULL;
    unsigned h = name_hash(name, len);
    while (htab[h]) {
        if (str_eq_ci(name, len, htab[h]->name))
            return htab[h];
        h = (h + 1) & ((1u << HBITS) - 1);
    }
    return NULL;
}

size_t commands_count(void) { return NCOMMANDS; }
const command *command_at(size_t i) { return i < NCOMMANDS ? &table[i] : NULL; }

static void stat_add(_Atomic uint64_t *v, uint64_t d)
{
    /* Single writer (the owning worker): a plain add published with relaxed
     * stores, no locked instruction. */
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + d,
                          memory_order_relaxed);
}

const uint64_t cmd_lat_bounds_us[CMD_LAT_BUCKETS - 1] = {10,   25,   50,    100,    250,    500,
                                                         1000, 2500, 10000, 100000, 1000000};

static void lat_add(cmd_stat *st, uint64_t usec, uint64_t n)
{
    int b = 0;
    while (b < CMD_LAT_BUCKETS - 1 && usec > cmd_lat_bounds_us[b])
        b++;
    stat_add(&st->lat[b], n);
}

static void reply_unknown(client *c)
{
    char args[256];
    size_t used = 0;
    args[0] = '\0';
    for (int i = 1; i < c->cx.argc && used < 128; i++) {
        int room = 128 - (int)used;
        int n = snprintf(args + used, sizeof(args) - used, "'%.*s' ",
                         (int)(c->cx.argvlen[i] < (size_t)room ? c->cx.argvlen[i] : (size_t)room),
                         c->cx.argv[i]);
        if (n < 0)
            break;
        used += (size_t)n;
        if (used >= sizeof(args)) {
            used = sizeof(args) - 1;
            break;
        }
    }
    reply_errorf(&c->cx.out, "ERR unknown command '%.*s', with args beginning with: %s",
                 (int)(c->cx.argvlen[0] < 128 ? c->cx.argvlen[0] : 128), c->cx.argv[0], args);
}

/* Why a replica, a load or too few replicas refuse a data command now
 * (NULL: they do not), in Redis's words and order: a write to a replica is
 * READONLY even while it loads its master's snapshot. */
static const char *repl_refusal(bool write)
{
    if (write && repl_too_few_replicas())
        return "NOREPLICAS Not enough good replicas to write.";
    if (write && repl_is_replica())
        return "READONLY You can't write against a read only replica.";
    if (repl_loading())
        return "LOADING Redis is loading the dataset in memory";
    if (repl_link_down() &&
        !atomic_load_explicit(&cfg.replica_serve_stale_data, memory_order_relaxed))
        return "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";
    return NULL;
}

/* A request refused before it runs; inside MULTI it also dooms the
 * transaction (EXECABORT), as in Redis. */
static void rejected(client *c, cmd_stat *st)
{
    if (st)
        stat_add(&st->rejected, 1);
    stat_add(&c->w->errors, 1);
    if (client_in_multi(c))
        c->multi_dirty = true;
}

void command_dispatch(client *c)
{
    worker *w = c->w;
    const command *cmd = c->cmd;
    /* Pipelines repeat one command: try the previous one first. */
    if (cmd == NULL || !str_eq_ci(c->cx.argv[0], c->cx.argvlen[0], cmd->name))
        cmd = command_lookup(c->cx.argv[0], c->cx.argvlen[0]);
    stat_add(&w->commands, 1);
    if (cmd == NULL) {
        reply_unknown(c);
        rejected(c, NULL);
        return;
    }
    c->cmd = cmd;
    cmd_stat *st = &w->stats[cmd->id];
    if ((cmd->arity > 0 && c->cx.argc != cmd->arity) || c->cx.argc < -cmd->arity) {
        reply_wrong_arity(&c->cx.out, cmd->name);
        rejected(c, st);
        return;
    }
    if (!c->authenticated && !(cmd->flags & CMD_NOAUTH)) {
        reply_error(&c->cx.out, "NOAUTH Authentication required.");
        rejected(c, st);
        return;
    }
    if ((cmd->flags & CMD_DENYOOM) && server_over_maxmemory()) {
        reply_oom(&c->cx);
        rejected(c, st);
        return;
    }
    /* As Redis after an AOF write error: writes (and PING) are refused
     * until the log can be written again. */
    if (((cmd->flags & CMD_WRITE) || cmd->proc == pingCommand) && !wal_write_ok()) {
        reply_errorf(&c->cx.out, "MISCONF Errors writing to the AOF file: %s",
                     strerror(wal_last_errno()));
        rejected(c, st);
        return;
    }
    if (repl_checks_data() && (cmd->flags & (CMD_WRITE | CMD_READONLY))) {
        const char *why = repl_refusal(cmd->flags & CMD_WRITE);
        if (why) {
            reply_error(&c->cx.out, why);
            rejected(c, st);
            return;
        }
    }
    if (pubsub_restricted(c) && !(cmd->flags & CMD_SUBCTX)) {
        reply_errorf(&c->cx.out,
                     "ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / "
                     "QUIT / RESET are allowed in this context",
                     cmd->name);
        rejected(c, st);
        return;
    }
    if (client_in_multi(c) && !(cmd->flags & CMD_TXCTL)) {
        multi_queue(c, cmd);
        return;
    }
    command_call(c, cmd);
}

void command_call(client *c, const command *cmd)
{
    worker *w = c->w;
    cmd_stat *st = &w->stats[cmd->id];
    c->cmd = cmd;
    atomic_store_explicit(&c->lastcmd, cmd->name, memory_order_relaxed);
    c->cx.hits = c->cx.misses = 0;
    bool write = cmd->flags & CMD_WRITE;
    size_t held = 0;
    if (write) {
        size_t bytes = 0;
        for (int i = 0; i < c->cx.argc; i++)
            bytes += c->cx.argvlen[i];
        /* Before any key lock is taken: room for what it logs. */
        size_t keylen = c->cx.argc > 1 ? c->cx.argvlen[1] : 0;
        if (!wal_reserve(wal_bound((size_t)c->cx.argc, bytes, keylen), &held)) {
            reply_error(&c->cx.out, LOG_OOM_ERROR);
            stat_add(&st->rejected, 1);
            stat_add(&w->errors, 1);
            return;
        }
        commit_write_begin(w);
        /* Again inside the gate REPLICAOF flips the role in: a write that
         * passed the dispatcher just before the flip, or one queued by
         * MULTI while this was a master, is refused, not logged. */
        if (repl_is_replica()) {
            commit_write_end(w);
            wal_release(held);
            reply_error(&c->cx.out, "READONLY You can't write against a read only replica.");
            stat_add(&st->rejected, 1);
            stat_add(&w->errors, 1);
            return;
        }
    }
    int64_t t0 = mono_us();
    bool ok = cmd->proc(&c->cx);
    int64_t dt = mono_us() - t0;
    if (write) {
        /* Inside the write gate: an EXEC that checks its watches after this
         * sees the change. */
        watch_touch_keys(cmd, &c->cx);
        commit_write_end(w);
        wal_release(held);
    }
    c->touched_keys |= cmd->touches_keys;
    stat_add(&st->calls, 1);
    stat_add(&st->usec, (uint64_t)dt);
    lat_add(st, (uint64_t)dt, 1);
    worker_count_hits(w, c->cx.hits, c->cx.misses);
    if (!ok) {
        stat_add(&st->failed, 1);
        stat_add(&w->errors, 1);
    }
}

void worker_count_hits(worker *w, uint64_t hits, uint64_t misses)
{
    if (hits)
        stat_add(&w->hits, hits);
    if (misses)
        stat_add(&w->misses, misses);
}

void command_account(client *c, const command *cmd, uint64_t n, uint64_t failed, uint64_t usec)
{
    worker *w = c->w;
    stat_add(&w->commands, n);
    stat_add(&w->stats[cmd->id].calls, n);
    stat_add(&w->stats[cmd->id].usec, usec);
    /* A batch is timed as a whole: each of its calls gets the average. */
    if (n)
        lat_add(&w->stats[cmd->id], usec / n, n);
    if (failed) {
        stat_add(&w->stats[cmd->id].failed, failed);
        stat_add(&w->errors, failed);
    }
    atomic_store_explicit(&c->lastcmd, cmd->name, memory_order_relaxed);
}

/* ---- COMMAND ---- */

static void reply_flags(cmd_ctx *c, const command *cmd)
{
    /* In Redis's order. */
    static const struct {
        unsigned flag;
        const char *name;
    } known[] = {
        {CMD_WRITE, "write"},     {CMD_READONLY, "readonly"}, {CMD_DENYOOM, "denyoom"},
        {CMD_ADMIN, "admin"},     {CMD_PUBSUB, "pubsub"},     {CMD_NOSCRIPT, "noscript"},
        {CMD_LOADING, "loading"}, {CMD_STALE, "stale"},       {CMD_SKIP_SLOWLOG, "skip_slowlog"},
        {CMD_FAST, "fast"},       {CMD_NOAUTH, "no_auth"},    {CMD_ALLOW_BUSY, "allow_busy"},
    };
    const char *names[sizeof(known) / sizeof(known[0])];
    int n = 0;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (cmd->flags & known[i].flag)
            names[n++] = known[i].name;
    reply_set(&c->out, n);
    for (int i = 0; i < n; i++)
        reply_simple(&c->out, names[i]);
}

static void reply_command_info(cmd_ctx *c, const command *cmd)
{
    if (cmd == NULL) {
        reply_null(&c->out);
        return;
    }
    reply_array(&c->out, 10);
    reply_bulk_str(&c->out, cmd->name);
    reply_int(&c->out, cmd->arity);
    reply_flags(c, cmd);
    reply_int(&c->out, cmd->first_key);
    reply_int(&c->out, cmd->last_key);
    reply_int(&c->out, cmd->key_step);
    reply_set(&c->out, 1);
    char cat[64];
    snprintf(cat, sizeof(cat), "@%s", cmd->group);
    reply_simple(&c->out, cat);
    reply_set(&c->out, 0);   /* tips */
    reply_array(&c->out, 0); /* key specs */
    reply_array(&c->out, 0); /* subcommands */
}

static void reply_command_doc(cmd_ctx *c, const command *cmd)
{
    reply_bulk_str(&c->out, cmd->name);
    reply_map(&c->out, 3);
    reply_bulk_str(&c->out, "summary");
    reply_bulk_str(&c->out, "");
    reply_bulk_str(&c->out, "since");
    reply_bulk_str(&c->out, "1.0.0");
    reply_bulk_str(&c->out, "group");
    reply_bulk_str(&c->out, cmd->group);
}

bool commandCommand(cmd_ctx *c)
{
    if (c->argc == 1) {
        reply_array(&c->out, (long long)NCOMMANDS);
        for (size_t i = 0; i < NCOMMANDS; i++)
            reply_command_info(c, &table[i]);
        return true;
    }
    if (arg_eq(c, 1, "count") && c->argc == 2) {
        reply_int(&c->out, (long long)NCOMMANDS);
    } else if (arg_eq(c, 1, "info")) {
        if (c->argc == 2) {
            reply_array(&c->out, (long long)NCOMMANDS);
            for (size_t i = 0; i < NCOMMANDS; i++)
                reply_command_info(c, &table[i]);
            return true;
        }
        reply_array(&c->out, c->argc - 2);
        for (int i = 2; i < c->argc; i++)
            reply_command_info(c, command_lookup(c->argv[i], c->argvlen[i]));
    } else if (arg_eq(c, 1, "docs")) {
        if (c->argc == 2) {
            reply_map(&c->out, (long long)NCOMMANDS);
            for (size_t i = 0; i < NCOMMANDS; i++)
                reply_command_doc(c, &table[i]);
            return true;
        }
        int found = 0;
        for (int i = 2; i < c->argc; i++)
            found += command_lookup(c->argv[i], c->argvlen[i]) != NULL;
        reply_map(&c->out, found);
        for (int i = 2; i < c->argc; i++) {
            const command *cmd = command_lookup(c->argv[i], c->argvlen[i]);
            if (cmd)
                reply_command_doc(c, cmd);
        }
    } else if (arg_eq(c, 1, "list") && c->argc == 2) {
        reply_array(&c->out, (long long)NCOMMANDS);
        for (size_t i = 0; i < NCOMMANDS; i++)
            reply_bulk_str(&c->out, table[i].name);
    } else {
        reply_errorf(&c->out,
                     "ERR unknown subcommand or wrong number of arguments for '%.*s'. "
                     "Try COMMAND HELP.",
                     (int)(c->argvlen[1] < 64 ? c->argvlen[1] : 64), c->argv[1]);
        return false;
    }
    return true;
}

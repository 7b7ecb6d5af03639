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

#include "persist.h"
#include "server.h"
#include "util.h"

#define W CMD_WRITE
#define R CMD_READONLY
#define M CMD_DENYOOM
#define F CMD_FAST
#define N CMD_NOAUTH
#define A CMD_ADMIN

static command table[] = {
    /* connection and server */
    {"ping", pingCommand, -1, F, 0, 0, 0, "connection", 0, false},
    {"echo", echoCommand, 2, F, 0, 0, 0, "connection", 0, false},
    {"hello", helloCommand, -1, F | N, 0, 0, 0, "connection", 0, false},
    {"auth", authCommand, -2, F | N, 0, 0, 0, "connection", 0, false},
    {"select", selectCommand, 2, F, 0, 0, 0, "connection", 0, false},
    {"quit", quitCommand, -1, F | N, 0, 0, 0, "connection", 0, false},
    {"client", clientCommand, -2, 0, 0, 0, 0, "connection", 0, false},
    {"dbsize", dbsizeCommand, 1, R | F, 0, 0, 0, "server", 0, false},
    {"shutdown", shutdownCommand, -1, A, 0, 0, 0, "server", 0, false},
    {"info", infoCommand, -1, 0, 0, 0, 0, "server", 0, false},
    {"command", commandCommand, -1, 0, 0, 0, 0, "server", 0, false},
    {"config", configCommand, -2, A, 0, 0, 0, "server", 0, false},
    {"memory", memoryCommand, -2, R, 2, 2, 1, "server", 0, false},
    {"time", timeCommand, 1, F, 0, 0, 0, "server", 0, false},
    {"flushall", flushallCommand, -1, W, 0, 0, 0, "server", 0, false},
    {"flushdb", flushallCommand, -1, W, 0, 0, 0, "server", 0, false},
    {"lastsave", lastsaveCommand, 1, F, 0, 0, 0, "server", 0, false},
    {"save", saveCommand, 1, A, 0, 0, 0, "server", 0, false},
    {"bgsave", bgsaveCommand, -1, A, 0, 0, 0, "server", 0, false},
    {"bgrewriteaof", bgrewriteaofCommand, 1, A, 0, 0, 0, "server", 0, false},
    /* keyspace */
    {"del", delCommand, -2, W, 1, -1, 1, "generic", 0, false},
    {"unlink", delCommand, -2, W | F, 1, -1, 1, "generic", 0, false},
    {"exists", existsCommand, -2, R | F, 1, -1, 1, "generic", 0, false},
    {"type", typeCommand, 2, R | F, 1, 1, 1, "generic", 0, false},
    {"keys", keysCommand, 2, R, 0, 0, 0, "generic", 0, false},
    {"scan", scanCommand, -2, R, 0, 0, 0, "generic", 0, false},
    {"randomkey", randomkeyCommand, 1, R, 0, 0, 0, "generic", 0, false},
    {"rename", renameCommand, 3, W, 1, 2, 1, "generic", 0, false},
    {"renamenx", renamenxCommand, 3, W | F, 1, 2, 1, "generic", 0, false},
    {"expire", expireCommand, -3, W | F, 1, 1, 1, "generic", 0, false},
    {"pexpire", pexpireCommand, -3, W | F, 1, 1, 1, "generic", 0, false},
    {"expireat", expireatCommand, -3, W | F, 1, 1, 1, "generic", 0, false},
    {"pexpireat", pexpireatCommand, -3, W | F, 1, 1, 1, "generic", 0, false},
    {"ttl", ttlCommand, 2, R | F, 1, 1, 1, "generic", 0, false},
    {"pttl", pttlCommand, 2, R | F, 1, 1, 1, "generic", 0, false},
    {"expiretime", expiretimeCommand, 2, R | F, 1, 1, 1, "generic", 0, false},
    {"pexpiretime", pexpiretimeCommand, 2, R | F, 1, 1, 1, "generic", 0, false},
    {"persist", persistCommand, 2, W | F, 1, 1, 1, "generic", 0, false},
    /* Bloom: RedisBloom checks arity in its handlers; so do we, with -2. */
    {"bf.reserve", bfReserveCommand, -2, W | M, 1, 1, 1, "bloom", 0, false},
    {"bf.add", bfAddCommand, -2, W | M, 1, 1, 1, "bloom", 0, false},
    {"bf.madd", bfMaddCommand, -2, W | M, 1, 1, 1, "bloom", 0, false},
    {"bf.exists", bfExistsCommand, -2, R | F, 1, 1, 1, "bloom", 0, false},
    {"bf.mexists", bfMexistsCommand, -2, R | F, 1, 1, 1, "bloom", 0, false},
    {"bf.insert", bfInsertCommand, -2, W | M, 1, 1, 1, "bloom", 0, false},
    {"bf.info", bfInfoCommand, -2, R | F, 1, 1, 1, "bloom", 0, false},
    {"bf.card", bfCardCommand, -2, R | F, 1, 1, 1, "bloom", 0, false},
    {"bf.scandump", bfScandumpCommand, -2, R | F, 1, 1, 1, "bloom", 0, false},
    {"bf.loadchunk", bfLoadchunkCommand, -2, W | M, 1, 1, 1, "bloom", 0, false},
    {"bf.debug", bfDebugCommand, -2, R | F, 1, 1, 1, "bloom", 0, false},
    {"bf.del", bfDelCommand, 3, W | F, 1, 1, 1, "bloom", 0, false},
    {"bf.merge", bfMergeCommand, -3, W | M, 1, -1, 1, "bloom", 0, false},
    {"cf.reserve", cfReserveCommand, -2, W | M, 1, 1, 1, "cuckoo", 0, false},
    {"cf.add", cfAddCommand, -2, W | M | F, 1, 1, 1, "cuckoo", 0, false},
    {"cf.addnx", cfAddnxCommand, -2, W | M | F, 1, 1, 1, "cuckoo", 0, false},
    {"cf.insert", cfInsertCommand, -2, W | M, 1, 1, 1, "cuckoo", 0, false},
    {"cf.insertnx", cfInsertnxCommand, -2, W | M, 1, 1, 1, "cuckoo", 0, false},
    {"cf.exists", cfExistsCommand, -2, R | F, 1, 1, 1, "cuckoo", 0, false},
    {"cf.mexists", cfMexistsCommand, -2, R | F, 1, 1, 1, "cuckoo", 0, false},
    {"cf.del", cfDelCommand, -2, W | F, 1, 1, 1, "cuckoo", 0, false},
    {"cf.count", cfCountCommand, -2, R | F, 1, 1, 1, "cuckoo", 0, false},
    {"cf.info", cfInfoCommand, -2, R | F, 1, 1, 1, "cuckoo", 0, false},
    {"cf.scandump", cfScandumpCommand, -2, R, 1, 1, 1, "cuckoo", 0, false},
    {"cf.loadchunk", cfLoadchunkCommand, -2, W | M, 1, 1, 1, "cuckoo", 0, false},
    /* HyperLogLog */
    {"pfadd", pfaddCommand, -2, W | M | F, 1, 1, 1, "hyperloglog", 0, false},
    {"pfcount", pfcountCommand, -2, R, 1, -1, 1, "hyperloglog", 0, false},
    {"pfmerge", pfmergeCommand, -2, W | M, 1, -1, 1, "hyperloglog", 0, false},
};
#define NCOMMANDS (sizeof(table) / sizeof(table[0]))

#define HBITS 8
static const command *htab[1u << HBITS];

static unsigned name_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)tolower((unsigned char)s[i])) * 16777619u;
    return h & ((1u << HBITS) - 1);
}

void commands_init(void) {
    for (size_t i = 0; i < NCOMMANDS; i++) {
        table[i].id = (int)i;
        /* Answers that depend on the data (and so on log records): every
         * command on keys, every write, and the server's readers (DBSIZE,
         * MEMORY). PING, INFO, CLIENT, CONFIG do not wait for the log. */
        table[i].touches_keys = (strcmp(table[i].group, "connection") != 0 &&
                                 strcmp(table[i].group, "server") != 0) ||
                                (table[i].flags & (CMD_WRITE | CMD_READONLY)) ||
                                table[i].first_key > 0;
        unsigned h = name_hash(table[i].name, strlen(table[i].name));
        while (htab[h]) h = (h + 1) & ((1u << HBITS) - 1);
        htab[h] = &table[i];
    }
}

void commands_free(void) {}

const command *command_lookup(const char *name, size_t len) {
    if (len == 0 || len > 32) return NULL;
    unsigned h = name_hash(name, len);
    while (htab[h]) {
        if (str_eq_ci(name, len, htab[h]->name)) return htab[h];
        h = (h + 1) & ((1u << HBITS) - 1);
    }
    return NULL;
}

size_t commands_count(void) { return NCOMMANDS; }
const command *command_at(size_t i) { return i < NCOMMANDS ? &table[i] : NULL; }

static void stat_add(_Atomic uint64_t *v, uint64_t d) {
    /* Single writer (the owning worker): a plain add published with relaxed
     * stores, no locked instruction. */
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + d,
                          memory_order_relaxed);
}

static void reply_unknown(client *c) {
    char args[256];
    size_t used = 0;
    args[0] = '\0';
    for (int i = 1; i < c->argc && used < 128; i++) {
        int room = 128 - (int)used;
        int n = snprintf(args + used, sizeof(args) - used, "'%.*s' ",
                         (int)(c->argvlen[i] < (size_t)room ? c->argvlen[i] : (size_t)room),
                         c->argv[i]);
        if (n < 0) break;
        used += (size_t)n;
        if (used >= sizeof(args)) {
            used = sizeof(args) - 1;
            break;
        }
    }
    reply_errorf(&c->out, "ERR unknown command '%.*s', with args beginning with: %s",
                 (int)(c->argvlen[0] < 128 ? c->argvlen[0] : 128), c->argv[0], args);
}

void command_dispatch(client *c) {
    worker *w = c->w;
    const command *cmd = c->cmd;
    /* Pipelines repeat one command: try the previous one first. */
    if (cmd == NULL || !str_eq_ci(c->argv[0], c->argvlen[0], cmd->name))
        cmd = command_lookup(c->argv[0], c->argvlen[0]);
    stat_add(&w->commands, 1);
    if (cmd == NULL) {
        reply_unknown(c);
        stat_add(&w->errors, 1);
        return;
    }
    c->cmd = cmd;
    cmd_stat *st = &w->stats[cmd->id];
    if ((cmd->arity > 0 && c->argc != cmd->arity) || c->argc < -cmd->arity) {
        reply_wrong_arity(&c->out, cmd->name);
        stat_add(&st->rejected, 1);
        stat_add(&w->errors, 1);
        return;
    }
    if (!c->authenticated && !(cmd->flags & CMD_NOAUTH)) {
        reply_error(&c->out, "NOAUTH Authentication required.");
        stat_add(&st->rejected, 1);
        stat_add(&w->errors, 1);
        return;
    }
    if ((cmd->flags & CMD_DENYOOM) && server_over_maxmemory()) {
        reply_oom(c);
        stat_add(&st->rejected, 1);
        stat_add(&w->errors, 1);
        return;
    }
    /* As Redis after an AOF write error: writes (and PING) are refused
     * until the log can be written again. */
    if (((cmd->flags & CMD_WRITE) || cmd->proc == pingCommand) && !wal_write_ok()) {
        reply_errorf(&c->out, "MISCONF Errors writing to the AOF file: %s",
                     strerror(wal_last_errno()));
        stat_add(&st->rejected, 1);
        stat_add(&w->errors, 1);
        return;
    }
    atomic_store_explicit(&c->lastcmd, cmd->name, memory_order_relaxed);
    size_t before = c->out.len;
    bool write = cmd->flags & CMD_WRITE;
    if (write) {
        wal_throttle();   /* before any key lock is taken */
        commit_write_begin(w);
    }
    int64_t t0 = mono_us();
    cmd->proc(c);
    int64_t dt = mono_us() - t0;
    if (write) commit_write_end(w);
    c->touched_keys |= cmd->touches_keys;
    stat_add(&st->calls, 1);
    stat_add(&st->usec, (uint64_t)dt);
    if (c->out.len > before && c->out.buf[before] == '-') {
        stat_add(&st->failed, 1);
        stat_add(&w->errors, 1);
    }
}

void command_account(client *c, const command *cmd, uint64_t n, uint64_t usec) {
    worker *w = c->w;
    stat_add(&w->commands, n);
    stat_add(&w->stats[cmd->id].calls, n);
    stat_add(&w->stats[cmd->id].usec, usec);
    atomic_store_explicit(&c->lastcmd, cmd->name, memory_order_relaxed);
}

/* ---- shared reply helpers ---- */

bool arg_eq(client *c, int i, const char *lit) {
    return i < c->argc && str_eq_ci(c->argv[i], c->argvlen[i], lit);
}

bool arg_ll(client *c, int i, long long *v) {
    if (str_to_ll(c->argv[i], c->argvlen[i], v)) return true;
    reply_not_integer(c);
    return false;
}

void reply_syntax_error(client *c) { reply_error(&c->out, "ERR syntax error"); }
void reply_not_integer(client *c) {
    reply_error(&c->out, "ERR value is not an integer or out of range");
}
void reply_wrongtype(client *c) {
    reply_error(&c->out, "WRONGTYPE Operation against a key holding the wrong kind of value");
}
void reply_oom(client *c) {
    reply_error(&c->out, "OOM command not allowed when used memory > 'maxmemory'.");
}

uint64_t server_maxmemory(void) {
    return (uint64_t)atomic_load_explicit(&cfg.maxmemory, memory_order_relaxed);
}

bool server_over_maxmemory(void) {
    uint64_t max = server_maxmemory();
    return max && ks_used_memory() > max;
}

void server_count_hit(client *c, bool hit) {
    stat_add(hit ? &c->w->hits : &c->w->misses, 1);
}

void server_count_hits(client *c, bool hit, uint64_t n) {
    stat_add(hit ? &c->w->hits : &c->w->misses, n);
}

/* ---- COMMAND ---- */

static void reply_flags(client *c, const command *cmd) {
    const char *names[8];
    int n = 0;
    if (cmd->flags & CMD_WRITE) names[n++] = "write";
    if (cmd->flags & CMD_READONLY) names[n++] = "readonly";
    if (cmd->flags & CMD_DENYOOM) names[n++] = "denyoom";
    if (cmd->flags & CMD_ADMIN) names[n++] = "admin";
    if (cmd->flags & CMD_FAST) names[n++] = "fast";
    if (cmd->flags & CMD_NOAUTH) names[n++] = "no_auth";
    reply_set(&c->out, n);
    for (int i = 0; i < n; i++) reply_simple(&c->out, names[i]);
}

static void reply_command_info(client *c, const command *cmd) {
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
    reply_set(&c->out, 0);    /* tips */
    reply_array(&c->out, 0);  /* key specs */
    reply_array(&c->out, 0);  /* subcommands */
}

static void reply_command_doc(client *c, const command *cmd) {
    reply_bulk_str(&c->out, cmd->name);
    reply_map(&c->out, 3);
    reply_bulk_str(&c->out, "summary");
    reply_bulk_str(&c->out, "");
    reply_bulk_str(&c->out, "since");
    reply_bulk_str(&c->out, "1.0.0");
    reply_bulk_str(&c->out, "group");
    reply_bulk_str(&c->out, cmd->group);
}

void commandCommand(client *c) {
    if (c->argc == 1) {
        reply_array(&c->out, (long long)NCOMMANDS);
        for (size_t i = 0; i < NCOMMANDS; i++) reply_command_info(c, &table[i]);
        return;
    }
    if (arg_eq(c, 1, "count") && c->argc == 2) {
        reply_int(&c->out, (long long)NCOMMANDS);
    } else if (arg_eq(c, 1, "info")) {
        if (c->argc == 2) {
            reply_array(&c->out, (long long)NCOMMANDS);
            for (size_t i = 0; i < NCOMMANDS; i++) reply_command_info(c, &table[i]);
            return;
        }
        reply_array(&c->out, c->argc - 2);
        for (int i = 2; i < c->argc; i++)
            reply_command_info(c, command_lookup(c->argv[i], c->argvlen[i]));
    } else if (arg_eq(c, 1, "docs")) {
        if (c->argc == 2) {
            reply_map(&c->out, (long long)NCOMMANDS);
            for (size_t i = 0; i < NCOMMANDS; i++) reply_command_doc(c, &table[i]);
            return;
        }
        int found = 0;
        for (int i = 2; i < c->argc; i++) found += command_lookup(c->argv[i], c->argvlen[i]) != NULL;
        reply_map(&c->out, found);
        for (int i = 2; i < c->argc; i++) {
            const command *cmd = command_lookup(c->argv[i], c->argvlen[i]);
            if (cmd) reply_command_doc(c, cmd);
        }
    } else if (arg_eq(c, 1, "list") && c->argc == 2) {
        reply_array(&c->out, (long long)NCOMMANDS);
        for (size_t i = 0; i < NCOMMANDS; i++) reply_bulk_str(&c->out, table[i].name);
    } else {
        reply_errorf(&c->out, "ERR unknown subcommand or wrong number of arguments for '%.*s'. "
                              "Try COMMAND HELP.",
                     (int)(c->argvlen[1] < 64 ? c->argvlen[1] : 64), c->argv[1]);
    }
}

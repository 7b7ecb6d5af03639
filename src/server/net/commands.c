/* The command table, dispatch and COMMAND.
 *
 * Dispatch checks in Redis 7's order, because clients and tests see the
 * difference: unknown command, then arity, then authentication, then the
 * user's ACL permissions, then maxmemory for commands that may allocate. Lookup is a small
 * open-addressed hash of the lowercase names, so a pipelined BF.ADD pays one hash and one compare,
 * not a scan of the table.
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
/* ACL categories a row declares beyond those its flags give, as Redis
 * derives them: write @write, readonly @read, admin @admin and @dangerous,
 * pubsub @pubsub, fast @fast and otherwise @slow. Value commands add their
 * family's (@bloom, @cuckoo, @cms, @topk, @tdigest: their group). */
#define KS CAT_KEYSPACE
#define CN CAT_CONNECTION
#define TR CAT_TRANSACTION
#define DG CAT_DANGEROUS
#define AD CAT_ADMIN
#define HL CAT_HYPERLOGLOG

typedef struct row {
    command c;
    unsigned cats;
} row;

static row table[] = {
    /* connection and server */
    {{"ping", pingCommand, -1, F | SC, 0, 0, 0, "connection", 0, false, NULL}, CN},
    {{"echo", echoCommand, 2, F, 0, 0, 0, "connection", 0, false, NULL}, CN},
    {{"hello", helloCommand, -1, F | N, 0, 0, 0, "connection", 0, false, NULL}, CN},
    {{"auth", authCommand, -2, F | N, 0, 0, 0, "connection", 0, false, NULL}, CN},
    {{"select", selectCommand, 2, F, 0, 0, 0, "connection", 0, false, NULL}, CN},
    {{"quit", quitCommand, -1, F | N | SC | TX, 0, 0, 0, "connection", 0, false, NULL}, CN},
    {{"client", clientCommand, -2, 0, 0, 0, 0, "connection", 0, false, NULL}, 0},
    {{"dbsize", dbsizeCommand, 1, R | F, 0, 0, 0, "server", 0, false, NULL}, KS},
    {{"shutdown", shutdownCommand, -1, A, 0, 0, 0, "server", 0, false, NULL}, 0},
    {{"info", infoCommand, -1, 0, 0, 0, 0, "server", 0, false, NULL}, DG},
    {{"command", commandCommand, -1, 0, 0, 0, 0, "server", 0, false, NULL}, CN},
    {{"acl", aclCommand, -2, 0, 0, 0, 0, "server", 0, false, NULL}, 0},
    {{"config", configCommand, -2, A, 0, 0, 0, "server", 0, false, NULL}, 0},
    {{"module", moduleCommand, -2, A | NS, 0, 0, 0, "server", 0, false, NULL}, 0},
    {{"memory", memoryCommand, -2, R, 2, 2, 1, "server", 0, false, NULL}, 0},
    {{"time", timeCommand, 1, F, 0, 0, 0, "server", 0, false, NULL}, 0},
    {{"slowlog", slowlogCommand, -2, A | LS, 0, 0, 0, "server", 0, false, NULL}, 0},
    {{"latency", latencyCommand, -2, A | NS | LS, 0, 0, 0, "server", 0, false, NULL}, 0},
    {{"flushall", flushallCommand, -1, W, 0, 0, 0, "server", 0, false, NULL}, KS | DG},
    {{"flushdb", flushallCommand, -1, W, 0, 0, 0, "server", 0, false, NULL}, KS | DG},
    {{"lastsave", lastsaveCommand, 1, F, 0, 0, 0, "server", 0, false, NULL}, AD | DG},
    {{"save", saveCommand, 1, A, 0, 0, 0, "server", 0, false, NULL}, 0},
    {{"bgsave", bgsaveCommand, -1, A, 0, 0, 0, "server", 0, false, NULL}, 0},
    {{"bgrewriteaof", bgrewriteaofCommand, 1, A, 0, 0, 0, "server", 0, false, NULL}, 0},
    /* replication (t_repl.c) */
    {{"replicaof", replicaofCommand, 3, A | NS | CMD_STALE, 0, 0, 0, "server", 0, false, NULL}, 0},
    {{"slaveof", replicaofCommand, 3, A | NS | CMD_STALE, 0, 0, 0, "server", 0, false, NULL}, 0},
    {{"role", roleCommand, 1, F | NS | LS, 0, 0, 0, "server", 0, false, NULL}, AD | DG},
    {{"wait", waitCommand, 3, NS, 0, 0, 0, "generic", 0, false, NULL}, CN},
    {{"replconf", replconfCommand, -1, A | NS | LS, 0, 0, 0, "server", 0, false, NULL}, 0},
    {{"psync", psyncCommand, -3, A | NS, 0, 0, 0, "server", 0, false, NULL}, 0},
    /* Pub/Sub (pubsub.c) */
    {{"subscribe", subscribeCommand, -2, PS | NS | LS | SC, 0, 0, 0, "pubsub", 0, false, NULL}, 0},
    {{"unsubscribe", unsubscribeCommand, -1, PS | NS | LS | SC, 0, 0, 0, "pubsub", 0, false, NULL},
     0},
    {{"psubscribe", psubscribeCommand, -2, PS | NS | LS | SC, 0, 0, 0, "pubsub", 0, false, NULL},
     0},
    {{"punsubscribe", punsubscribeCommand, -1, PS | NS | LS | SC, 0, 0, 0, "pubsub", 0, false,
      NULL},
     0},
    {{"publish", publishCommand, 3, PS | LS | F, 0, 0, 0, "pubsub", 0, false, NULL}, 0},
    {{"pubsub", pubsubCommand, -2, PS | LS, 0, 0, 0, "pubsub", 0, false, NULL}, 0},
    /* transactions (multi.c) */
    {{"multi", multiCommand, 1, NS | LS | F | AB | TX, 0, 0, 0, "transaction", 0, false, NULL}, TR},
    {{"exec", execCommand, 1, NS | LS | SS | TX, 0, 0, 0, "transaction", 0, false, NULL}, TR},
    {{"discard", discardCommand, 1, NS | LS | F | AB | TX, 0, 0, 0, "transaction", 0, false, NULL},
     TR},
    {{"watch", watchCommand, -2, NS | LS | F | AB | TX, 1, -1, 1, "transaction", 0, false, NULL},
     TR},
    {{"unwatch", unwatchCommand, 1, NS | LS | F | AB, 0, 0, 0, "transaction", 0, false, NULL}, TR},
    /* keyspace */
    {{"del", delCommand, -2, W, 1, -1, 1, "generic", 0, false, NULL}, KS},
    {{"unlink", delCommand, -2, W | F, 1, -1, 1, "generic", 0, false, NULL}, KS},
    {{"exists", existsCommand, -2, R | F, 1, -1, 1, "generic", 0, false, NULL}, KS},
    {{"type", typeCommand, 2, R | F, 1, 1, 1, "generic", 0, false, NULL}, KS},
    {{"keys", keysCommand, 2, R, 0, 0, 0, "generic", 0, false, NULL}, KS | DG},
    {{"scan", scanCommand, -2, R, 0, 0, 0, "generic", 0, false, NULL}, KS},
    {{"randomkey", randomkeyCommand, 1, R, 0, 0, 0, "generic", 0, false, NULL}, KS},
    {{"rename", renameCommand, 3, W, 1, 2, 1, "generic", 0, false, NULL}, KS},
    {{"renamenx", renamenxCommand, 3, W | F, 1, 2, 1, "generic", 0, false, NULL}, KS},
    {{"expire", expireCommand, -3, W | F, 1, 1, 1, "generic", 0, false, NULL}, KS},
    {{"pexpire", pexpireCommand, -3, W | F, 1, 1, 1, "generic", 0, false, NULL}, KS},
    {{"expireat", expireatCommand, -3, W | F, 1, 1, 1, "generic", 0, false, NULL}, KS},
    {{"pexpireat", pexpireatCommand, -3, W | F, 1, 1, 1, "generic", 0, false, NULL}, KS},
    {{"ttl", ttlCommand, 2, R | F, 1, 1, 1, "generic", 0, false, NULL}, KS},
    {{"pttl", pttlCommand, 2, R | F, 1, 1, 1, "generic", 0, false, NULL}, KS},
    {{"expiretime", expiretimeCommand, 2, R | F, 1, 1, 1, "generic", 0, false, NULL}, KS},
    {{"pexpiretime", pexpiretimeCommand, 2, R | F, 1, 1, 1, "generic", 0, false, NULL}, KS},
    {{"persist", persistCommand, 2, W | F, 1, 1, 1, "generic", 0, false, NULL}, KS},
/* Bloom and cuckoo: value_commands.h, shared with the module */
#define VALUE_ROW(name, proc, arity, flags, fk, lk, ks, group, batch)                              \
    {{name, proc, arity, flags, fk, lk, ks, group, 0, false, batch}, 0},
    VALUE_COMMANDS(VALUE_ROW)
#undef VALUE_ROW
    /* HyperLogLog */
    {{"pfadd", pfaddCommand, -2, W | M | F, 1, 1, 1, "hyperloglog", 0, false, NULL}, HL},
    {{"pfcount", pfcountCommand, -2, R, 1, -1, 1, "hyperloglog", 0, false, NULL}, HL},
    {{"pfmerge", pfmergeCommand, -2, W | M, 1, -1, 1, "hyperloglog", 0, false, NULL}, HL},
};
#define NCOMMANDS (sizeof(table) / sizeof(table[0]))

/* Subcommands ACL rules can name, with Redis 7's categories: a container
 * command's own are only @slow (and its explicit ones), so "+@admin"
 * grants CONFIG GET but not CLIENT SETNAME. */
#define SUB_ADMIN "@admin @slow @dangerous"
static const struct {
    const char *cmd, *sub, *cats;
} subtable[] = {
    {"client", "getname", "@slow @connection"},
    {"client", "getredir", "@slow @connection"},
    {"client", "kill", SUB_ADMIN " @connection"},
    {"client", "reply", "@slow @connection"},
    {"client", "id", "@slow @connection"},
    {"client", "info", "@slow @connection"},
    {"client", "unpause", SUB_ADMIN " @connection"},
    {"client", "trackinginfo", "@slow @connection"},
    {"client", "no-evict", SUB_ADMIN " @connection"},
    {"client", "no-touch", "@slow @connection"},
    {"client", "caching", "@slow @connection"},
    {"client", "help", "@slow @connection"},
    {"client", "unblock", SUB_ADMIN " @connection"},
    {"client", "setname", "@slow @connection"},
    {"client", "setinfo", "@slow @connection"},
    {"client", "list", SUB_ADMIN " @connection"},
    {"client", "tracking", "@slow @connection"},
    {"client", "pause", SUB_ADMIN " @connection"},
    {"config", "help", "@slow"},
    {"config", "resetstat", SUB_ADMIN},
    {"config", "set", SUB_ADMIN},
    {"config", "get", SUB_ADMIN},
    {"config", "rewrite", SUB_ADMIN},
    {"memory", "help", "@slow"},
    {"memory", "purge", "@slow"},
    {"memory", "malloc-stats", "@slow"},
    {"memory", "doctor", "@slow"},
    {"memory", "stats", "@slow"},
    {"memory", "usage", "@read @slow"},
    {"slowlog", "reset", SUB_ADMIN},
    {"slowlog", "help", "@slow"},
    {"slowlog", "len", SUB_ADMIN},
    {"slowlog", "get", SUB_ADMIN},
    {"latency", "graph", SUB_ADMIN},
    {"latency", "reset", SUB_ADMIN},
    {"latency", "doctor", SUB_ADMIN},
    {"latency", "histogram", SUB_ADMIN},
    {"latency", "help", "@slow"},
    {"latency", "latest", SUB_ADMIN},
    {"latency", "history", SUB_ADMIN},
    {"module", "load", SUB_ADMIN},
    {"module", "help", "@slow"},
    {"module", "list", SUB_ADMIN},
    {"module", "loadex", SUB_ADMIN},
    {"module", "unload", SUB_ADMIN},
    {"pubsub", "channels", "@pubsub @slow"},
    {"pubsub", "numsub", "@pubsub @slow"},
    {"pubsub", "numpat", "@pubsub @slow"},
    {"pubsub", "shardnumsub", "@pubsub @slow"},
    {"pubsub", "help", "@slow"},
    {"pubsub", "shardchannels", "@pubsub @slow"},
    {"acl", "log", SUB_ADMIN},
    {"acl", "genpass", "@slow"},
    {"acl", "dryrun", SUB_ADMIN},
    {"acl", "load", SUB_ADMIN},
    {"acl", "save", SUB_ADMIN},
    {"acl", "users", SUB_ADMIN},
    {"acl", "getuser", SUB_ADMIN},
    {"acl", "help", "@slow"},
    {"acl", "whoami", "@slow"},
    {"acl", "list", SUB_ADMIN},
    {"acl", "cat", "@slow"},
    {"acl", "setuser", SUB_ADMIN},
    {"acl", "deluser", SUB_ADMIN},
    {"command", "count", "@slow @connection"},
    {"command", "getkeysandflags", "@slow @connection"},
    {"command", "help", "@slow @connection"},
    {"command", "getkeys", "@slow @connection"},
    {"command", "list", "@slow @connection"},
    {"command", "info", "@slow @connection"},
    {"command", "docs", "@slow @connection"},
};
#define NSUBS (sizeof(subtable) / sizeof(subtable[0]))

static command_sub subs[NSUBS];
/* Per command: its subcommands are subs[first .. first+n). */
static struct {
    unsigned cats;
    int first, n;
} meta[NCOMMANDS];

const char *const acl_cat_names[ACL_NCATS] = {ACL_CAT_NAMES};

unsigned acl_cat_by_name(const char *s, size_t len)
{
    for (int i = 0; i < ACL_NCATS; i++)
        if (str_eq_ci(s, len, acl_cat_names[i]))
            return 1u << i;
    return 0;
}

static unsigned cats_of_words(const char *w)
{
    unsigned m = 0;
    while (*w) {
        while (*w == ' ' || *w == '@')
            w++;
        size_t n = strcspn(w, " ");
        m |= acl_cat_by_name(w, n);
        w += n;
    }
    return m;
}

/* Redis's implicit categories, from the flags; a container is only @slow. */
static unsigned derive_cats(const row *r, bool container)
{
    unsigned f = r->c.flags, m = r->cats | acl_cat_by_name(r->c.group, strlen(r->c.group));
    if (!container) {
        if (f & CMD_WRITE)
            m |= CAT_WRITE;
        if (f & CMD_READONLY)
            m |= CAT_READ;
        if (f & CMD_ADMIN)
            m |= CAT_ADMIN | CAT_DANGEROUS;
        if (f & CMD_PUBSUB)
            m |= CAT_PUBSUB;
    }
    m |= (f & CMD_FAST) ? CAT_FAST : CAT_SLOW;
    return m;
}

static void subs_init(void)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        meta[i].first = -1;
    for (size_t k = 0; k < NSUBS; k++) {
        const command *parent = command_lookup(subtable[k].cmd, strlen(subtable[k].cmd));
        if (parent == NULL)
            abort();
        subs[k] = (command_sub){subtable[k].sub, (int)(NCOMMANDS + k),
                                cats_of_words(subtable[k].cats), parent};
        if (meta[parent->id].first < 0)
            meta[parent->id].first = (int)k;
        meta[parent->id].n++;
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        meta[i].cats = derive_cats(&table[i], meta[i].n > 0);
    if (NCOMMANDS + NSUBS > ACL_MAX_IDS)
        abort();
}

int command_ids(void) { return (int)(NCOMMANDS + NSUBS); }
unsigned command_cats(const command *cmd) { return meta[cmd->id].cats; }

const command_sub *command_subs(const command *cmd, int *n)
{
    *n = meta[cmd->id].n;
    return *n ? &subs[meta[cmd->id].first] : NULL;
}

const command_sub *command_sub_lookup(const command *cmd, const char *name, size_t len)
{
    int n = meta[cmd->id].n;
    const command_sub *s = &subs[n ? meta[cmd->id].first : 0];
    for (int i = 0; i < n; i++)
        if (str_eq_ci(name, len, s[i].name))
            return &s[i];
    return NULL;
}

const command *command_by_id(int id, const command_sub **sub)
{
    *sub = NULL;
    if (id < 0 || id >= command_ids())
        return NULL;
    if ((size_t)id < NCOMMANDS)
        return &table[id].c;
    *sub = &subs[(size_t)id - NCOMMANDS];
    return (*sub)->parent;
}

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
        command *cmd = &table[i].c;
        cmd->id = (int)i;
        /* Answers that depend on the data (and so on log records): every
         * command on keys, every write, and the server's readers (DBSIZE,
         * MEMORY). PING, INFO, CLIENT, CONFIG do not wait for the log. */
        const char *g = cmd->group;
        cmd->touches_keys = (strcmp(g, "connection") != 0 && strcmp(g, "server") != 0 &&
                             strcmp(g, "pubsub") != 0 && strcmp(g, "transaction") != 0) ||
                            (cmd->flags & (CMD_WRITE | CMD_READONLY)) || cmd->first_key > 0;
        unsigned h = name_hash(cmd->name, strlen(cmd->name));
        while (htab[h])
            h = (h + 1) & ((1u << HBITS) - 1);
        htab[h] = cmd;
    }
    subs_init();
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
const command *command_at(size_t i) { return i < NCOMMANDS ? &table[i].c : NULL; }

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

/* Cross-protocol scripting, as Redis 7 guards it: a web page that makes a
 * browser POST to this port sends HTTP lines the inline protocol reads as
 * commands, and its body after them. A command named POST or Host: (the
 * request line, or the first header after any request line) closes the
 * connection at once: nothing after it runs and no pending reply is sent.
 * Redis checks every command; here only unknown ones are looked at, which
 * is the same set (neither name is a command) and leaves the path of known
 * commands, batches included, without a compare. The log says so at most
 * once a minute, in Redis's words, which log watchers match on. */
static bool cross_protocol_attack(client *c)
{
    if (!str_eq_ci(c->cx.argv[0], c->cx.argvlen[0], "post") &&
        !str_eq_ci(c->cx.argv[0], c->cx.argvlen[0], "host:"))
        return false;
    static _Atomic int64_t logged_ms;
    int64_t now = now_ms(), last = atomic_load_explicit(&logged_ms, memory_order_relaxed);
    if ((now - last > 60000 || last - now > 60000) &&
        atomic_compare_exchange_strong(&logged_ms, &last, now)) {
        /* A console command's socket pair has no address to name. */
        bool known = c->addr[0] && c->addr[0] != '?';
        server_log(LOG_WARNING,
                   "Possible SECURITY ATTACK detected. It looks like somebody is sending POST or "
                   "Host: commands to Redis%s%s. This is likely due to an attacker attempting to "
                   "use Cross Protocol Scripting to compromise your Redis instance. Connection "
                   "aborted.",
                   known ? " from " : "", known ? c->addr : "");
    }
    client_close(c);
    return true;
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

/* The checks a command passes before it runs, in Redis's order, for
 * every path that runs one: command_dispatch (answer set: a refusal is
 * answered and counted) and the pipelined batch in client.c (answer unset:
 * nothing is said, and a refused batch goes to command_dispatch request by
 * request, which answers). GATE_QUEUE: inside MULTI, queued instead. */
int command_gate(client *c, const command *cmd, bool answer)
{
    cmd_stat *st = answer ? &c->w->stats[cmd->id] : NULL;
    const char *why = NULL;
    char buf[160];
    if ((cmd->arity > 0 && c->cx.argc != cmd->arity) || c->cx.argc < -cmd->arity) {
        if (answer)
            reply_wrong_arity(&c->cx.out, cmd->name);
        goto refused;
    }
    if (!c->authenticated && !(cmd->flags & CMD_NOAUTH)) {
        why = "NOAUTH Authentication required.";
        goto refused;
    }
    /* Redis checks ACLs here, before maxmemory, also for commands queued by
     * MULTI (EXEC checks them again). */
    if (!acl_gate(c, cmd, answer ? ACL_GATE_REPLY : ACL_GATE_QUIET)) {
        if (answer && c->closing)
            return GATE_REFUSED;
        goto refused;
    }
    if ((cmd->flags & CMD_DENYOOM) && server_over_maxmemory()) {
        if (answer)
            reply_oom(&c->cx);
        goto refused;
    }
    /* As Redis after an AOF write error: writes (and PING) are refused
     * until the log can be written again. */
    if (((cmd->flags & CMD_WRITE) || cmd->proc == pingCommand) && !wal_write_ok()) {
        snprintf(buf, sizeof(buf), "MISCONF Errors writing to the AOF file: %s",
                 strerror(wal_last_errno()));
        why = buf;
        goto refused;
    }
    if (repl_checks_data() && (cmd->flags & (CMD_WRITE | CMD_READONLY)) &&
        (why = repl_refusal(cmd->flags & CMD_WRITE)) != NULL)
        goto refused;
    if (pubsub_restricted(c) && !(cmd->flags & CMD_SUBCTX)) {
        snprintf(buf, sizeof(buf),
                 "ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / "
                 "QUIT / RESET are allowed in this context",
                 cmd->name);
        why = buf;
        goto refused;
    }
    if (client_in_multi(c) && !(cmd->flags & CMD_TXCTL))
        return GATE_QUEUE;
    return GATE_RUN;
refused:
    if (answer) {
        if (why)
            reply_error(&c->cx.out, why);
        rejected(c, st);
    }
    return GATE_REFUSED;
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
        if (cross_protocol_attack(c))
            return;
        reply_unknown(c);
        rejected(c, NULL);
        return;
    }
    c->cmd = cmd;
    switch (command_gate(c, cmd, true)) {
    case GATE_QUEUE: multi_queue(c, cmd); return;
    case GATE_RUN: command_call(c, cmd); return;
    default: return;
    }
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
    /* ACL categories, as Redis 7 lists them. */
    unsigned cats = command_cats(cmd);
    reply_set(&c->out, __builtin_popcount(cats));
    for (int i = 0; i < ACL_NCATS; i++) {
        if (cats & (1u << i)) {
            char cat[32];
            snprintf(cat, sizeof(cat), "@%s", acl_cat_names[i]);
            reply_simple(&c->out, cat);
        }
    }
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
            reply_command_info(c, &table[i].c);
        return true;
    }
    if (arg_eq(c, 1, "count") && c->argc == 2) {
        reply_int(&c->out, (long long)NCOMMANDS);
    } else if (arg_eq(c, 1, "info")) {
        if (c->argc == 2) {
            reply_array(&c->out, (long long)NCOMMANDS);
            for (size_t i = 0; i < NCOMMANDS; i++)
                reply_command_info(c, &table[i].c);
            return true;
        }
        reply_array(&c->out, c->argc - 2);
        for (int i = 2; i < c->argc; i++)
            reply_command_info(c, command_lookup(c->argv[i], c->argvlen[i]));
    } else if (arg_eq(c, 1, "docs")) {
        if (c->argc == 2) {
            reply_map(&c->out, (long long)NCOMMANDS);
            for (size_t i = 0; i < NCOMMANDS; i++)
                reply_command_doc(c, &table[i].c);
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
            reply_bulk_str(&c->out, table[i].c.name);
    } else {
        reply_errorf(&c->out,
                     "ERR unknown subcommand or wrong number of arguments for '%.*s'. "
                     "Try COMMAND HELP.",
                     (int)(c->argvlen[1] < 64 ? c->argvlen[1] : 64), c->argv[1]);
        return false;
    }
    return true;
}

/* The command layer's interface: what a handler sees, whichever host runs
 * it (bloomeryd's connections, or another host later).
 *
 * A handler gets a cmd_ctx: its arguments and its reply (out), which it
 * answers through reply.h's calls (RESP2 or RESP3 as out.proto says); the
 * host implements them: bloomeryd's buffer, or Redis's reply calls in the
 * module. It reaches keys
 * through keyspace.h and logs its changes through the log calls in
 * persist.h; it never sees a connection. The table (commands.c) declares
 * each command's properties, batching included, so the network layer knows
 * no command by name. A handler returns whether it did what it was asked:
 * false when it replied with an error (an array ending in one included),
 * which the host counts as a failed call, as Redis does.
 */
#ifndef BLOOMERYD_CMD_H
#define BLOOMERYD_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keyspace.h"
#include "reply.h"

typedef struct cmd_ctx {
    int argc;
    const char **argv;
    size_t *argvlen;
    reply out;
    uint64_t hits, misses; /* keyspace lookups, for the host's stats */
} cmd_ctx;

#define CMD_WRITE (1u << 0)
#define CMD_READONLY (1u << 1)
#define CMD_DENYOOM (1u << 2)
#define CMD_FAST (1u << 3)
#define CMD_NOAUTH (1u << 4) /* allowed before AUTH */
#define CMD_ADMIN (1u << 5)
/* Shown by COMMAND as Redis shows them. */
#define CMD_PUBSUB (1u << 6)
#define CMD_NOSCRIPT (1u << 7)
#define CMD_LOADING (1u << 8)
#define CMD_STALE (1u << 9)
#define CMD_SKIP_SLOWLOG (1u << 10)
#define CMD_ALLOW_BUSY (1u << 11)
/* The host's own, not shown: allowed to a RESP2 client with subscriptions;
 * run at once inside MULTI instead of being queued. */
#define CMD_SUBCTX (1u << 16)
#define CMD_TXCTL (1u << 17)

typedef bool (*command_proc)(cmd_ctx *c);
/* Requests "CMD key item" pipelined on one key, run as one call and
 * answered exactly as n separate commands would be. Returns how many of
 * them failed. */
typedef size_t (*command_batch)(cmd_ctx *c, const char *key, size_t klen, const char **items,
                                const size_t *lens, size_t n);

typedef struct command {
    const char *name; /* lowercase */
    command_proc proc;
    int arity; /* Redis convention: -n means at least n */
    unsigned flags;
    int first_key, last_key, key_step;
    const char *group;
    int id;
    bool touches_keys;   /* replies wait for the log (commit.c) */
    command_batch batch; /* NULL: not batched */
} command;

void commands_init(void);
void commands_free(void);
const command *command_lookup(const char *name, size_t len);
size_t commands_count(void);
const command *command_at(size_t i);

/* ---- helpers for command handlers ---- */
bool arg_eq(cmd_ctx *c, int i, const char *lit);
bool arg_ll(cmd_ctx *c, int i, long long *v); /* replies on error */
void reply_syntax_error(cmd_ctx *c);
void reply_not_integer(cmd_ctx *c);
void reply_wrongtype(cmd_ctx *c);
void reply_oom(cmd_ctx *c);
/* maxmemory in bytes (0: none). */
uint64_t server_maxmemory(void);
bool server_over_maxmemory(void);
/* Keyspace hits and misses of the command, folded into the host's stats. */
static inline void server_count_hits(cmd_ctx *c, bool hit, uint64_t n)
{
    if (hit)
        c->hits += n;
    else
        c->misses += n;
}
static inline void server_count_hit(cmd_ctx *c, bool hit) { server_count_hits(c, hit, 1); }

/* ---- commands, by file ---- */
bool pingCommand(cmd_ctx *c);
bool echoCommand(cmd_ctx *c);
bool helloCommand(cmd_ctx *c);
bool authCommand(cmd_ctx *c);
bool selectCommand(cmd_ctx *c);
bool dbsizeCommand(cmd_ctx *c);
bool quitCommand(cmd_ctx *c);
bool shutdownCommand(cmd_ctx *c);
bool infoCommand(cmd_ctx *c);
bool commandCommand(cmd_ctx *c);
bool clientCommand(cmd_ctx *c);
bool configCommand(cmd_ctx *c);
bool moduleCommand(cmd_ctx *c);
bool memoryCommand(cmd_ctx *c);
bool timeCommand(cmd_ctx *c);
bool slowlogCommand(cmd_ctx *c);
bool latencyCommand(cmd_ctx *c);
bool subscribeCommand(cmd_ctx *c);
bool unsubscribeCommand(cmd_ctx *c);
bool psubscribeCommand(cmd_ctx *c);
bool punsubscribeCommand(cmd_ctx *c);
bool publishCommand(cmd_ctx *c);
bool pubsubCommand(cmd_ctx *c);
bool multiCommand(cmd_ctx *c);
bool execCommand(cmd_ctx *c);
bool discardCommand(cmd_ctx *c);
bool watchCommand(cmd_ctx *c);
bool unwatchCommand(cmd_ctx *c);
bool flushallCommand(cmd_ctx *c);
bool lastsaveCommand(cmd_ctx *c);
bool saveCommand(cmd_ctx *c);
bool bgsaveCommand(cmd_ctx *c);
bool bgrewriteaofCommand(cmd_ctx *c);

bool delCommand(cmd_ctx *c);
bool existsCommand(cmd_ctx *c);
bool typeCommand(cmd_ctx *c);
bool keysCommand(cmd_ctx *c);
bool scanCommand(cmd_ctx *c);
bool renameCommand(cmd_ctx *c);
bool renamenxCommand(cmd_ctx *c);
bool expireCommand(cmd_ctx *c);
bool pexpireCommand(cmd_ctx *c);
bool expireatCommand(cmd_ctx *c);
bool pexpireatCommand(cmd_ctx *c);
bool ttlCommand(cmd_ctx *c);
bool pttlCommand(cmd_ctx *c);
bool expiretimeCommand(cmd_ctx *c);
bool pexpiretimeCommand(cmd_ctx *c);
bool persistCommand(cmd_ctx *c);
bool randomkeyCommand(cmd_ctx *c);

bool bfReserveCommand(cmd_ctx *c);
bool bfAddCommand(cmd_ctx *c);
bool bfMaddCommand(cmd_ctx *c);
bool bfExistsCommand(cmd_ctx *c);
bool bfMexistsCommand(cmd_ctx *c);
bool bfInsertCommand(cmd_ctx *c);
bool bfInfoCommand(cmd_ctx *c);
bool bfCardCommand(cmd_ctx *c);
bool bfScandumpCommand(cmd_ctx *c);
bool bfLoadchunkCommand(cmd_ctx *c);
bool bfDelCommand(cmd_ctx *c);
bool bfMergeCommand(cmd_ctx *c);
bool bfDebugCommand(cmd_ctx *c);
bool bfConfigCommand(cmd_ctx *c);
size_t bfAddBatch(cmd_ctx *c, const char *key, size_t klen, const char **items, const size_t *lens,
                  size_t n);
size_t bfExistsBatch(cmd_ctx *c, const char *key, size_t klen, const char **items,
                     const size_t *lens, size_t n);

bool cfReserveCommand(cmd_ctx *c);
bool cfAddCommand(cmd_ctx *c);
bool cfAddnxCommand(cmd_ctx *c);
bool cfInsertCommand(cmd_ctx *c);
bool cfInsertnxCommand(cmd_ctx *c);
bool cfExistsCommand(cmd_ctx *c);
bool cfMexistsCommand(cmd_ctx *c);
bool cfDelCommand(cmd_ctx *c);
bool cfCountCommand(cmd_ctx *c);
bool cfInfoCommand(cmd_ctx *c);
bool cfDebugCommand(cmd_ctx *c);
bool cfScandumpCommand(cmd_ctx *c);
bool cfLoadchunkCommand(cmd_ctx *c);
/* t_window.c, from the server cron: rotate windows whose slice is due
 * (active rotation), within budget_us. */
void window_cron(int64_t budget_us);

bool cmsInitbydimCommand(cmd_ctx *c);
bool cmsInitbyprobCommand(cmd_ctx *c);
bool cmsIncrbyCommand(cmd_ctx *c);
bool cmsQueryCommand(cmd_ctx *c);
bool cmsMergeCommand(cmd_ctx *c);
bool cmsInfoCommand(cmd_ctx *c);

bool topkReserveCommand(cmd_ctx *c);
bool topkAddCommand(cmd_ctx *c);
size_t topkAddBatch(cmd_ctx *c, const char *key, size_t klen, const char **items,
                    const size_t *lens, size_t n);
bool topkIncrbyCommand(cmd_ctx *c);
bool topkQueryCommand(cmd_ctx *c);
bool topkCountCommand(cmd_ctx *c);
bool topkListCommand(cmd_ctx *c);
bool topkInfoCommand(cmd_ctx *c);

bool pfaddCommand(cmd_ctx *c);
bool pfcountCommand(cmd_ctx *c);
bool pfmergeCommand(cmd_ctx *c);

bool tdigestCreateCommand(cmd_ctx *c);
bool tdigestAddCommand(cmd_ctx *c);
bool tdigestResetCommand(cmd_ctx *c);
bool tdigestMergeCommand(cmd_ctx *c);
bool tdigestMinCommand(cmd_ctx *c);
bool tdigestMaxCommand(cmd_ctx *c);
bool tdigestQuantileCommand(cmd_ctx *c);
bool tdigestCdfCommand(cmd_ctx *c);
bool tdigestRankCommand(cmd_ctx *c);
bool tdigestRevrankCommand(cmd_ctx *c);
bool tdigestByrankCommand(cmd_ctx *c);
bool tdigestByrevrankCommand(cmd_ctx *c);
bool tdigestTrimmedMeanCommand(cmd_ctx *c);
bool tdigestInfoCommand(cmd_ctx *c);

#endif

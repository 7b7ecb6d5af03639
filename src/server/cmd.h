/* The command layer's interface: what a handler sees, whichever host runs
 * it (bloomeryd's connections, or another host later).
 *
 * A handler gets a cmd_ctx: its arguments and a reply buffer (reply.h,
 * RESP2 or RESP3 as out.proto says), which the host sends. It reaches keys
 * through keyspace.h and logs its changes through the log calls in
 * persist.h; it never sees a connection. The table (commands.c) declares
 * each command's properties, batching included, so the network layer knows
 * no command by name. A command failed when it replied with an error
 * (out.errors grew), as Redis counts failed calls.
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
    uint64_t hits, misses;   /* keyspace lookups, for the host's stats */
} cmd_ctx;

#define CMD_WRITE    (1u << 0)
#define CMD_READONLY (1u << 1)
#define CMD_DENYOOM  (1u << 2)
#define CMD_FAST     (1u << 3)
#define CMD_NOAUTH   (1u << 4)   /* allowed before AUTH */
#define CMD_ADMIN    (1u << 5)

typedef void (*command_proc)(cmd_ctx *c);
/* Requests "CMD key item" pipelined on one key, run as one call and
 * answered exactly as n separate commands would be. */
typedef void (*command_batch)(cmd_ctx *c, const char *key, size_t klen, const char **items,
                              const size_t *lens, size_t n);

typedef struct command {
    const char *name;            /* lowercase */
    command_proc proc;
    int arity;                   /* Redis convention: -n means at least n */
    unsigned flags;
    int first_key, last_key, key_step;
    const char *group;
    int id;
    bool touches_keys;           /* replies wait for the log (commit.c) */
    command_batch batch;         /* NULL: not batched */
} command;

void commands_init(void);
void commands_free(void);
const command *command_lookup(const char *name, size_t len);
size_t commands_count(void);
const command *command_at(size_t i);

/* ---- helpers for command handlers ---- */
bool arg_eq(cmd_ctx *c, int i, const char *lit);
bool arg_ll(cmd_ctx *c, int i, long long *v);    /* replies on error */
void reply_syntax_error(cmd_ctx *c);
void reply_not_integer(cmd_ctx *c);
void reply_wrongtype(cmd_ctx *c);
void reply_oom(cmd_ctx *c);
/* maxmemory in bytes (0: none). */
uint64_t server_maxmemory(void);
bool server_over_maxmemory(void);
/* Keyspace hits and misses of the command, folded into the host's stats. */
static inline void server_count_hits(cmd_ctx *c, bool hit, uint64_t n) {
    if (hit) c->hits += n;
    else c->misses += n;
}
static inline void server_count_hit(cmd_ctx *c, bool hit) { server_count_hits(c, hit, 1); }

/* ---- commands, by file ---- */
void pingCommand(cmd_ctx *c);
void echoCommand(cmd_ctx *c);
void helloCommand(cmd_ctx *c);
void authCommand(cmd_ctx *c);
void selectCommand(cmd_ctx *c);
void dbsizeCommand(cmd_ctx *c);
void quitCommand(cmd_ctx *c);
void shutdownCommand(cmd_ctx *c);
void infoCommand(cmd_ctx *c);
void commandCommand(cmd_ctx *c);
void clientCommand(cmd_ctx *c);
void configCommand(cmd_ctx *c);
void memoryCommand(cmd_ctx *c);
void timeCommand(cmd_ctx *c);
void flushallCommand(cmd_ctx *c);
void lastsaveCommand(cmd_ctx *c);
void saveCommand(cmd_ctx *c);
void bgsaveCommand(cmd_ctx *c);
void bgrewriteaofCommand(cmd_ctx *c);

void delCommand(cmd_ctx *c);
void existsCommand(cmd_ctx *c);
void typeCommand(cmd_ctx *c);
void keysCommand(cmd_ctx *c);
void scanCommand(cmd_ctx *c);
void renameCommand(cmd_ctx *c);
void renamenxCommand(cmd_ctx *c);
void expireCommand(cmd_ctx *c);
void pexpireCommand(cmd_ctx *c);
void expireatCommand(cmd_ctx *c);
void pexpireatCommand(cmd_ctx *c);
void ttlCommand(cmd_ctx *c);
void pttlCommand(cmd_ctx *c);
void expiretimeCommand(cmd_ctx *c);
void pexpiretimeCommand(cmd_ctx *c);
void persistCommand(cmd_ctx *c);
void randomkeyCommand(cmd_ctx *c);

void bfReserveCommand(cmd_ctx *c);
void bfAddCommand(cmd_ctx *c);
void bfMaddCommand(cmd_ctx *c);
void bfExistsCommand(cmd_ctx *c);
void bfMexistsCommand(cmd_ctx *c);
void bfInsertCommand(cmd_ctx *c);
void bfInfoCommand(cmd_ctx *c);
void bfCardCommand(cmd_ctx *c);
void bfScandumpCommand(cmd_ctx *c);
void bfLoadchunkCommand(cmd_ctx *c);
void bfDelCommand(cmd_ctx *c);
void bfMergeCommand(cmd_ctx *c);
void bfDebugCommand(cmd_ctx *c);
void bfAddBatch(cmd_ctx *c, const char *key, size_t klen, const char **items,
                const size_t *lens, size_t n);
void bfExistsBatch(cmd_ctx *c, const char *key, size_t klen, const char **items,
                   const size_t *lens, size_t n);

void cfReserveCommand(cmd_ctx *c);
void cfAddCommand(cmd_ctx *c);
void cfAddnxCommand(cmd_ctx *c);
void cfInsertCommand(cmd_ctx *c);
void cfInsertnxCommand(cmd_ctx *c);
void cfExistsCommand(cmd_ctx *c);
void cfMexistsCommand(cmd_ctx *c);
void cfDelCommand(cmd_ctx *c);
void cfCountCommand(cmd_ctx *c);
void cfInfoCommand(cmd_ctx *c);
void cfScandumpCommand(cmd_ctx *c);
void cfLoadchunkCommand(cmd_ctx *c);

void pfaddCommand(cmd_ctx *c);
void pfcountCommand(cmd_ctx *c);
void pfmergeCommand(cmd_ctx *c);

#endif

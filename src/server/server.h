/* bloomeryd: shared declarations of the server.
 *
 * Files, one concept each:
 *   server.c    main(): options, data directory, listener, signals, cron
 *   worker.c    worker threads: one libuv loop each and the clients it owns
 *   client.c    a connection: read, parse, run, reply, output limits
 *   resp.c      request parser (no event loop; also linked by the fuzzer)
 *   reply.c     RESP2/RESP3 reply encoding
 *   commands.c  the command table, dispatch, COMMAND
 *   keyspace.c  striped hash table of keys, expiry, memory accounting
 *   config.c    settings, config file, CONFIG GET/SET
 *   t_bloom.c   BF.* over libbloomery's scalable and counting filters
 *   t_window.c  time-windowed filters behind BF.* (BF.RESERVE ... WINDOW)
 *   t_cuckoo.c  CF.* over libbloomery's cuckoo filter
 *   dump.c      bloomery-format dumps shared by BF.* and CF.* SCANDUMP/LOADCHUNK
 *   t_hll.c     PF* over libbloomery's HyperLogLog
 *   t_keys.c    DEL, EXISTS, TYPE, KEYS, SCAN, RENAME, EXPIRE family ...
 *   t_server.c  PING, HELLO, AUTH, INFO, CLIENT, CONFIG, MEMORY, SHUTDOWN ...
 */
#ifndef BLOOMERYD_SERVER_H
#define BLOOMERYD_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "keyspace.h"
#include "reply.h"
#include "resp.h"

#define REDIS_COMPAT_VERSION "7.4.0"
#define BLOOMERYD_VERSION "0.1.0"

struct worker;
struct command;

typedef struct client {
    uint64_t id;
    struct worker *w;
    uv_tcp_t tcp;
    int fd;
    char addr[64], laddr[64];

    /* Input: the unprocessed request bytes are qbuf[qpos .. qlen). */
    char *qbuf;
    size_t qlen, qpos, qcap;
    resp_parser parser;

    /* The command being run. argv points into qbuf. */
    int argc;
    const char **argv;
    size_t *argvlen;
    int argvcap;
    const struct command *cmd;

    /* Pipelined BF.ADD / BF.EXISTS on one key, gathered for one batch call. */
    const char **bitems;
    size_t *blens;
    size_t bcap;

    /* Output: replies accumulate in out; while a write is in flight its bytes
     * live in wbuf. */
    reply out;
    char *wbuf;
    size_t wlen, wcap;
    uv_write_t wreq;
    bool writing;
    int64_t soft_limit_since;   /* ms; 0: under the soft limit */

    bool authenticated;
    bool closing;              /* handle close requested */
    bool close_after_reply;    /* QUIT, protocol error, CLIENT KILL of self */
    bool in_batch;             /* inside on_read: do not free yet */
    _Atomic bool kill;         /* set by another thread (CLIENT KILL) */
    _Atomic int resp;          /* protocol, readable by CLIENT LIST */
    _Atomic int64_t last_ms;   /* last interaction, for idle/timeout */
    int64_t ctime_ms;
    _Atomic(const char *) lastcmd;
    _Atomic size_t qbuf_used, obuf_used;
    char *name;                /* guarded by clients_lock */
    char *lib_name, *lib_ver;  /* guarded by clients_lock */

    struct client *prev, *next;      /* worker's list */
    struct client *gprev, *gnext;    /* global registry, clients_lock */

    /* Group commit (commit.c): replies wait for the log to be durable up
     * to wal_lsn while parked. */
    uint64_t wal_lsn;
    bool wal_parked;
    bool touched_keys;         /* since the last commit_defer */
    struct client *wal_prev, *wal_next;
} client;

typedef struct cmd_stat {
    _Atomic uint64_t calls, usec, rejected, failed;
} cmd_stat;

typedef struct worker {
    int idx;
    pthread_t thread;
    uv_loop_t loop;
    uv_async_t wake;          /* new connections, kills, stop */
    uv_timer_t cron;          /* timeouts, output-buffer soft limits */
    pthread_mutex_t inbox_lock;
    int *inbox;               /* accepted fds waiting to be adopted */
    size_t ninbox, capinbox;
    _Atomic bool stopping;
    client *clients;
    /* Per-worker stats, written only by this worker (relaxed stores) and
     * summed by INFO. */
    cmd_stat *stats;          /* indexed by command id */
    _Atomic uint64_t commands, net_in, net_out, hits, misses, errors;
} worker;

typedef struct server_state {
    int nworkers;
    worker *workers;
    uv_loop_t *main_loop;
    uv_async_t shutdown_async;
    _Atomic bool shutdown_requested;
    int64_t start_ms;
    char run_id[41];
    char executable[1024];
    _Atomic uint64_t next_client_id;
    _Atomic uint64_t connected, total_connections, rejected_connections;
    _Atomic uint64_t ops_sec;  /* instantaneous_ops_per_sec */
    int listen_port;           /* the bound port */
} server_state;

extern server_state srv;

/* Client registry for CLIENT LIST / KILL across workers. */
extern pthread_mutex_t clients_lock;
extern client *all_clients;

/* ---- worker.c ---- */
int workers_start(int n);
void workers_stop(void);
void worker_adopt(int fd);      /* hand an accepted socket to a worker */
void worker_wake_all(void);

/* ---- client.c ---- */
client *client_create(worker *w, int fd);
void client_close(client *c);
void client_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
void client_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
void client_flush(client *c);
void client_cron(client *c, int64_t now);
/* One CLIENT LIST line; the caller holds clients_lock. */
void client_info_line(client *c, char *out, size_t outlen);
bool client_obuf_over_limit(client *c);

/* ---- commands.c ---- */
#define CMD_WRITE    (1u << 0)
#define CMD_READONLY (1u << 1)
#define CMD_DENYOOM  (1u << 2)
#define CMD_FAST     (1u << 3)
#define CMD_NOAUTH   (1u << 4)   /* allowed before AUTH */
#define CMD_ADMIN    (1u << 5)

typedef void (*command_proc)(client *c);

typedef struct command {
    const char *name;            /* lowercase */
    command_proc proc;
    int arity;                   /* Redis convention: -n means at least n */
    unsigned flags;
    int first_key, last_key, key_step;
    const char *group;
    int id;
    bool touches_keys;           /* replies wait for the log (commit.c) */
} command;

void commands_init(void);
void commands_free(void);
const command *command_lookup(const char *name, size_t len);
size_t commands_count(void);
const command *command_at(size_t i);
void command_dispatch(client *c);
/* Account n calls of cmd that took usec in total (batched execution). */
void command_account(client *c, const command *cmd, uint64_t n, uint64_t usec);

/* ---- helpers for command handlers ---- */
bool arg_eq(client *c, int i, const char *lit);
bool arg_ll(client *c, int i, long long *v);    /* replies on error */
void reply_syntax_error(client *c);
void reply_not_integer(client *c);
void reply_wrongtype(client *c);
void reply_oom(client *c);
/* maxmemory in bytes (0: none). */
uint64_t server_maxmemory(void);
bool server_over_maxmemory(void);
void server_count_hit(client *c, bool hit);
void server_count_hits(client *c, bool hit, uint64_t n);   /* n lookups at once */

/* ---- logging ---- */
void server_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- commands, by file ---- */
void pingCommand(client *c);
void echoCommand(client *c);
void helloCommand(client *c);
void authCommand(client *c);
void selectCommand(client *c);
void dbsizeCommand(client *c);
void quitCommand(client *c);
void shutdownCommand(client *c);
void infoCommand(client *c);
void commandCommand(client *c);
void clientCommand(client *c);
void configCommand(client *c);
void memoryCommand(client *c);
void timeCommand(client *c);
void flushallCommand(client *c);
void lastsaveCommand(client *c);
void saveCommand(client *c);

void delCommand(client *c);
void existsCommand(client *c);
void typeCommand(client *c);
void keysCommand(client *c);
void scanCommand(client *c);
void renameCommand(client *c);
void renamenxCommand(client *c);
void expireCommand(client *c);
void pexpireCommand(client *c);
void expireatCommand(client *c);
void pexpireatCommand(client *c);
void ttlCommand(client *c);
void pttlCommand(client *c);
void expiretimeCommand(client *c);
void pexpiretimeCommand(client *c);
void persistCommand(client *c);
void randomkeyCommand(client *c);

void bfReserveCommand(client *c);
void bfAddCommand(client *c);
void bfMaddCommand(client *c);
void bfExistsCommand(client *c);
void bfMexistsCommand(client *c);
void bfInsertCommand(client *c);
void bfInfoCommand(client *c);
void bfCardCommand(client *c);
void bfScandumpCommand(client *c);
void bfLoadchunkCommand(client *c);
void bfDelCommand(client *c);
void bfMergeCommand(client *c);
void bfDebugCommand(client *c);
/* n pipelined "BF.ADD key item" (add) or "BF.EXISTS key item" requests on
 * one key, answered exactly as n separate commands would be. */
void bf_batch(client *c, bool add, const char *key, size_t klen, const char **items,
              const size_t *lens, size_t n);

/* t_window.c: windowed filters behind BF.* (t_bloom.c dispatches). */
bool window_reserve(client *c);   /* BF.RESERVE with WINDOW/SLICES: handled */
/* With ref shared-locked on window entry e: perform due rotations (under an
 * exclusive lock taken meanwhile) and return the entry to add to, *now the
 * clock to add at; NULL after replying. ref stays locked either way. */
kv_entry *window_open_for_add(client *c, ks_ref *ref, kv_entry *e, int64_t *now);
void window_add_items(client *c, const char *key, size_t klen, kv_obj *o, int64_t now,
                      const char **items, const size_t *lens, size_t n, bool multi);
/* n booleans, no array header. */
void window_check_items(client *c, kv_obj *o, const char **items, const size_t *lens, size_t n);
/* BF.INFO (card false) or BF.CARD on a window key: true when answered. */
bool window_info(client *c, bool card);

void cfReserveCommand(client *c);
void cfAddCommand(client *c);
void cfAddnxCommand(client *c);
void cfInsertCommand(client *c);
void cfInsertnxCommand(client *c);
void cfExistsCommand(client *c);
void cfMexistsCommand(client *c);
void cfDelCommand(client *c);
void cfCountCommand(client *c);
void cfInfoCommand(client *c);
void cfScandumpCommand(client *c);
void cfLoadchunkCommand(client *c);

void pfaddCommand(client *c);
void pfcountCommand(client *c);
void pfmergeCommand(client *c);

#endif

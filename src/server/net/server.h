/* bloomeryd: shared declarations of the server.
 *
 * Files, one concept each:
 *   server.c    main(): options, data directory, listener, signals, cron
 *   worker.c    worker threads: one libuv loop each and the clients it owns
 *   client.c    a connection: read, parse, run, reply, output limits
 *   tls_conn.c  a connection to the TLS port: its session between socket and buffers
 *   resp.c      request parser (no event loop; also linked by the fuzzer)
 *   reply.c     RESP2/RESP3 reply encoding
 *   commands.c  the command table, dispatch, COMMAND
 *   keyspace.c  striped hash table of keys, expiry, memory accounting
 *   config.c    settings, config file, CONFIG GET/SET
 *   cmdkit.c    what value commands share: keys of a kind, creating values, options
 *   bf_*.c      BF.* over libbloomery's scalable and counting filters, one
 *               concept per file (bf.h lists them)
 *   t_window.c  time-windowed filters behind BF.* (BF.RESERVE ... WINDOW)
 *   t_cuckoo.c  CF.* over libbloomery's cuckoo filter
 *   dump.c      bloomery-format dumps shared by BF.* and CF.* SCANDUMP/LOADCHUNK
 *   restore.c   a dump chunk into a key: BF./CF.LOADCHUNK's core, shared with replay
 *   t_hll.c     PF* over libbloomery's HyperLogLog
 *   t_keys.c    DEL, EXISTS, TYPE, KEYS, SCAN, RENAME, EXPIRE family ...
 *   t_server.c  PING, HELLO, AUTH, INFO, CLIENT, CONFIG, MEMORY, SHUTDOWN ...
 *   pubsub.c    SUBSCRIBE, PUBLISH ...: channels shared by every worker
 *   multi.c     MULTI, EXEC, DISCARD, WATCH: queued commands run as one request
 *   acl.c       ACL users: rules, the permission check, aclfile, ACL LOG
 *   t_acl.c     the permission gate's slow path, AUTH as a user, ACL
 */
#ifndef BLOOMERYD_SERVER_H
#define BLOOMERYD_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "acl.h"
#include "cmd.h"
#include "config.h"
#include "log.h"
#include "keyspace.h"
#include "reply.h"
#include "resp.h"

#define REDIS_COMPAT_VERSION "7.4.0"
#define BLOOMERYD_VERSION "0.1.0"
/* The module clients look for in HELLO, MODULE LIST and INFO modules:
 * RedisBloom's name and the version whose replies ours follow (2.4.23). */
#define RB_MODULE_NAME "bf"
#define RB_MODULE_VERSION 20423

struct worker;
struct command;
struct tls_link;
struct ps_entry;
struct multi_cmd;
struct multi_watch;

/* What CLIENT LIST/KILL TYPE call a client. A client's own type is NORMAL
 * unless the replication code marks the link: REPLICA for a replica
 * connected to us, MASTER for our link to our master. PUBSUB is not stored:
 * a NORMAL client with subscriptions is one (client_type()). */
enum { CLIENT_TYPE_NORMAL, CLIENT_TYPE_REPLICA, CLIENT_TYPE_PUBSUB, CLIENT_TYPE_MASTER };

typedef struct client {
    cmd_ctx cx; /* first: client_of() */
    uint64_t id;
    struct worker *w;
    uv_tcp_t tcp;
    int fd;
    char addr[64], laddr[64];
    /* A connection to the TLS port (tls_conn.c); NULL for plain ones,
     * whose bytes go straight between the socket and the buffers. */
    struct tls_link *tls;

    /* Input: the unprocessed request bytes are qbuf[qpos .. qlen). */
    char *qbuf;
    size_t qlen, qpos, qcap;
    resp_parser parser;

    /* The command being run (cx.argv points into qbuf) and the last one. */
    int argvcap;
    const struct command *cmd;

    /* Pipelined BF.ADD / BF.EXISTS on one key, gathered for one batch call. */
    const char **bitems;
    size_t *blens;
    size_t bcap;

    /* Output: replies accumulate in cx.out; while a write is in flight its
     * bytes live in wbuf. */
    char *wbuf;
    size_t wlen, wcap;
    uv_write_t wreq;
    bool writing;
    int64_t soft_limit_since; /* ms; 0: under the soft limit */

    bool authenticated;
    /* The ACL user (acl.h), swapped under clients_lock, and the acl_version
     * it was looked up at. */
    struct acl_user *user;
    uint64_t acl_ver;
    bool closing;            /* handle close requested */
    bool close_after_reply;  /* QUIT, protocol error, CLIENT KILL of self */
    bool in_batch;           /* inside on_read: do not free yet */
    _Atomic bool kill;       /* set by another thread (CLIENT KILL) */
    _Atomic int resp;        /* protocol, readable by CLIENT LIST */
    _Atomic int64_t last_ms; /* last interaction, for idle/timeout */
    int64_t ctime_ms;
    _Atomic(const char *) lastcmd;
    _Atomic size_t qbuf_used, obuf_used;
    char *name;               /* guarded by clients_lock */
    char *lib_name, *lib_ver; /* guarded by clients_lock */

    _Atomic int ctype; /* CLIENT_TYPE_NORMAL, _REPLICA or _MASTER; set by replication */

    /* Pub/Sub (pubsub.c): the entries subscribed to, changed by the owning
     * worker under pubsub's lock; counts readable by CLIENT LIST. */
    struct ps_entry **chans, **pats;
    size_t capchans, cappats;
    _Atomic int nchans, npats;
    bool ps_used; /* ever subscribed: close must clean up */
    /* Messages published from other workers wait here until this worker's
     * loop moves them to cx.out (under w->mbox_lock). */
    char *mbox;
    size_t mlen, mcap;
    bool mqueued;
    struct client *mprev, *mnext;

    /* MULTI (multi.c): queued commands; multi_n is -1 outside MULTI and is
     * read by CLIENT LIST. */
    struct multi_cmd *mq;
    size_t mqcap;
    _Atomic int multi_n;
    bool multi_dirty; /* a command was refused while queueing: EXECABORT */
    bool in_exec;     /* running queued commands */
    struct multi_watch *watched;
    size_t nwatched, capwatched;

    struct client *prev, *next;   /* worker's list */
    struct client *gprev, *gnext; /* global registry, clients_lock */

    /* Group commit (commit.c): replies wait for the log to be durable up
     * to wal_lsn while parked. */
    uint64_t wal_lsn;
    bool wal_parked;
    bool touched_keys; /* since the last commit_defer */
    struct client *wal_prev, *wal_next;

    /* Replication: what a replica said before PSYNC (t_repl.c), and a
     * WAIT in progress (wait.c): no request runs while blocked. */
    int repl_port;
    char repl_ip[64];
    bool repl_capa_bloomery;
    bool blocked;
    uint64_t wait_lsn;
    unsigned wait_replicas;
    int64_t wait_deadline_ms; /* 0: none */
    struct client *blk_prev, *blk_next;
} client;

/* Latency buckets of a command's calls (upper bounds in microseconds; the
 * last bucket is everything slower), for /metrics' histograms. */
#define CMD_LAT_BUCKETS 12
extern const uint64_t cmd_lat_bounds_us[CMD_LAT_BUCKETS - 1];

typedef struct cmd_stat {
    _Atomic uint64_t calls, usec, rejected, failed;
    _Atomic uint64_t lat[CMD_LAT_BUCKETS]; /* calls by latency bucket, not cumulative */
} cmd_stat;

typedef struct worker {
    int idx;
    pthread_t thread;
    uv_loop_t loop;
    uv_async_t wake; /* new connections, kills, stop, Pub/Sub messages */
    uv_timer_t cron; /* timeouts, output-buffer soft limits */
    pthread_mutex_t inbox_lock;
    pthread_mutex_t mbox_lock; /* Pub/Sub messages from other workers */
    struct client *mbox_head;  /* clients with a non-empty mailbox */
    struct adopt_req *inbox;   /* accepted fds waiting to be adopted */
    size_t ninbox, capinbox;
    _Atomic bool stopping;
    client *clients;
    /* Per-worker stats, written only by this worker (relaxed stores) and
     * summed by INFO. */
    cmd_stat *stats; /* indexed by command id */
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
    _Atomic uint64_t ops_sec; /* instantaneous_ops_per_sec */
    _Atomic bool ops_reset;   /* CONFIG RESETSTAT: the cron restarts its samples */
    int listen_port;          /* the bound port */
} server_state;

extern server_state srv;

/* The client running a command: connection commands (AUTH, HELLO, CLIENT,
 * QUIT) are bloomeryd's own and reach their connection through this. */
static inline client *client_of(cmd_ctx *x) { return (client *)(void *)x; }

/* Client registry for CLIENT LIST / KILL across workers. */
extern pthread_mutex_t clients_lock;
extern client *all_clients;

/* ---- worker.c ---- */
/* How an accepted socket is to be served. */
enum { ADOPT_TLS = 1 };
struct adopt_req {
    int fd;
    int flags;
};
/* Descriptors each worker's libuv loop holds: its epoll instance, the
 * eventfd its wake-ups use and the two ends of its signal pipe. */
#define WORKER_DESCRIPTORS 4
int workers_start(int n);
void workers_stop(void);
void worker_adopt(int fd); /* hand an accepted socket to a worker */
void worker_adopt_flags(int fd, int flags);
void worker_wake_all(void);

/* ---- client.c ---- */
client *client_create(worker *w, int fd, int flags);
void client_close(client *c);
void client_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
void client_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
void client_flush(client *c);
void client_cron(client *c, int64_t now);
/* One CLIENT LIST line; the caller holds clients_lock. */
void client_info_line(client *c, char *out, size_t outlen);
bool client_obuf_over_limit(client *c);
/* After a block ended (wait.c): run the requests that waited, then reply. */
void client_resume(client *c);
/* n request bytes just placed at qbuf + qlen (by the socket or TLS): run
 * what is complete and reply. */
void client_input(client *c, size_t n);
/* Buffers larger than this are released when they become empty, so an idle
 * client that once sent a large request does not keep the memory. */
#define KEEP_BUFFER (64 * 1024)

/* ---- tls_conn.c: connections to the TLS port ---- */
/* Start the server side of a TLS session on c; false when no context. */
bool tls_conn_attach(client *c);
void tls_conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
void tls_conn_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
/* client_flush for a TLS client: encrypt cx.out and send what is pending. */
void tls_conn_flush(client *c);
/* A close_notify, best effort, before the socket closes. */
void tls_conn_shutdown(client *c);
void tls_conn_free(client *c);
/* A TLS client whose handshake has not finished in time is closed. */
bool tls_conn_expired(client *c, int64_t now);
/* PSYNC: the session leaves the client for the sender thread, on fd (a
 * copy of the socket); NULL if it can't (data still buffered). */
struct ssl_st *tls_conn_detach(client *c, int fd);

/* ---- t_repl.c ---- */
bool replicaofCommand(cmd_ctx *c);
bool roleCommand(cmd_ctx *c);
bool waitCommand(cmd_ctx *c);
bool replconfCommand(cmd_ctx *c);
bool psyncCommand(cmd_ctx *c);

/* ---- wait.c: WAIT ---- */
void wait_worker_init(worker *w);
void wait_worker_close(worker *w);
/* Block c until n replicas acknowledged lsn or timeout_ms (0: forever). */
void wait_block(client *c, uint64_t lsn, unsigned n, long long timeout_ms);
void wait_forget(client *c);
void wait_cron(worker *w, int64_t now);

/* CLIENT_TYPE_* of a client, for CLIENT LIST/KILL (any thread). */
int client_type(client *c);
const char *client_type_name(int type);
/* CLIENT_TYPE_* from a name (normal, master, replica, slave, pubsub), -1 if
 * none. */
int client_type_by_name(const char *s, size_t len);

/* ---- pubsub.c ---- */
/* Channels and patterns the client is subscribed to. */
static inline int pubsub_count(client *c)
{
    return atomic_load_explicit(&c->nchans, memory_order_relaxed) +
           atomic_load_explicit(&c->npats, memory_order_relaxed);
}
/* RESP2 clients with subscriptions may run only the commands flagged
 * CMD_SUBCTX. */
static inline bool pubsub_restricted(client *c)
{
    return c->cx.out.proto == 2 && pubsub_count(c) > 0;
}
/* On close: unsubscribe everything, drop undelivered messages. */
void pubsub_client_gone(client *c);
/* From the worker's wake: move messages from other workers into replies. */
void pubsub_drain(worker *w);
void pubsub_stats(uint64_t *channels, uint64_t *patterns, uint64_t *clients);

/* ---- multi.c ---- */
static inline bool client_in_multi(client *c)
{
    return atomic_load_explicit(&c->multi_n, memory_order_relaxed) >= 0;
}
/* Queue the request in c->cx.argv (already checked by the dispatcher). */
void multi_queue(client *c, const command *cmd);
void multi_reset(client *c); /* leave MULTI and forget watched keys */
/* After a write command's change: WATCHers of its keys must fail EXEC. */
void watch_touch_keys(const command *cmd, cmd_ctx *cx);
void watch_touch_key(const char *key, size_t klen);
void watch_touch_all(void);

/* ---- t_acl.c: the permission gate ---- */
enum { ACL_GATE_REPLY, ACL_GATE_EXEC, ACL_GATE_QUIET };
/* The gate's slow path: the user looked up again after a change, then the
 * full check; refused commands are answered (NOPERM, or EXEC's words) and
 * logged unless quiet. False also when the user was deleted and the
 * client closed. */
bool acl_gate_slow(client *c, const command *cmd, int mode);
/* One check per command: a bit test while the client's user is current
 * and the command needs no key or channel matched. */
static inline bool acl_gate(client *c, const command *cmd, int mode)
{
    if (c->acl_ver == atomic_load_explicit(&acl_version, memory_order_acquire) &&
        acl_fast(c->user, cmd->id))
        return true;
    return acl_gate_slow(c, cmd, mode);
}
/* The client runs as u (its reference taken), looked up at version ver. */
void client_set_user(client *c, acl_user *u, uint64_t ver);
/* AUTH and HELLO's AUTH: WRONGPASS (logged) or the client is now user. */
bool acl_authenticate(cmd_ctx *x, const char *user, size_t ulen, const char *pass, size_t plen);
bool aclCommand(cmd_ctx *c);

/* ---- commands.c: bloomeryd's side of the command table ---- */
/* A write refused because the memory to log it is not there
 * (wal_reserve): it changed nothing. */
#define LOG_OOM_ERROR "OOM command not allowed when there is not enough memory to log it"
void command_dispatch(client *c);
/* Run an already checked command (dispatch, and EXEC for each queued one). */
void command_call(client *c, const command *cmd);
/* Account n calls of cmd, failed of which failed, that took usec in total
 * (batched execution). */
void command_account(client *c, const command *cmd, uint64_t n, uint64_t failed, uint64_t usec);
/* Fold a command's keyspace hits and misses into its worker's stats. */
void worker_count_hits(worker *w, uint64_t hits, uint64_t misses);

/* ACL categories, Redis's names in Redis's order (ACL CAT), then the
 * module categories Redis 8 gives RedisBloom's commands. */
#define ACL_CAT_NAMES                                                                              \
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",           \
        "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",             \
        "dangerous", "connection", "transaction", "scripting", "bloom", "cuckoo", "cms", "topk",   \
        "tdigest"
enum {
    CAT_KEYSPACE = 1u << 0,
    CAT_READ = 1u << 1,
    CAT_WRITE = 1u << 2,
    CAT_HYPERLOGLOG = 1u << 9,
    CAT_PUBSUB = 1u << 12,
    CAT_ADMIN = 1u << 13,
    CAT_FAST = 1u << 14,
    CAT_SLOW = 1u << 15,
    CAT_DANGEROUS = 1u << 17,
    CAT_CONNECTION = 1u << 18,
    CAT_TRANSACTION = 1u << 19,
};
#define ACL_NCATS 26
extern const char *const acl_cat_names[ACL_NCATS];
/* The category of that name (without '@'): its bit, or 0. */
unsigned acl_cat_by_name(const char *s, size_t len);

/* A subcommand as ACL rules name it ("config|get"): its id follows the
 * commands' ids. */
typedef struct command_sub {
    const char *name;
    int id;
    unsigned cats;
    const command *parent;
} command_sub;
/* Commands and subcommands: ids are 0 .. command_ids()-1. */
int command_ids(void);
/* Categories of a command (its own, for a container: not its
 * subcommands'). */
unsigned command_cats(const command *cmd);
const command_sub *command_subs(const command *cmd, int *n);
/* The subcommand argv[1] names, or NULL. */
const command_sub *command_sub_lookup(const command *cmd, const char *name, size_t len);
/* The command or subcommand of an id: *sub NULL for a command. */
const command *command_by_id(int id, const command_sub **sub);

#endif

/* Replication (docs/REPLICATION.md): a master streams its log to replicas;
 * a replica's data directory and log are its master's, LSN for LSN.
 *
 * Files, one concept each:
 *   repl_state.c  role, replication ids, the replicas a master serves,
 *                 their acknowledgements, INFO replication
 *   repl_conn.c   a blocking connection with deadlines (both ends' threads)
 *   sender.c      the master's side: one thread per replica, a full resync
 *                 (snapshot index, the chunks the replica lacks, the log
 *                 from the snapshot's start) or a partial one (the log from
 *                 the replica's position), then the log as it is written
 *   replica.c     the replica's side: the link to its master, the full
 *                 resync's install, the records applied and logged
 *
 * Offsets are LSNs: a replica's log holds its master's records under the
 * same LSNs, so "offset" in INFO, ROLE, PSYNC and WAIT counts records.
 */
#ifndef BLOOMERYD_REPL_H
#define BLOOMERYD_REPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REPL_ID_LEN 40

/* The replica link's state, as ROLE names them. */
enum {
    REPL_LINK_NONE,
    REPL_LINK_CONNECT,
    REPL_LINK_CONNECTING,
    REPL_LINK_SYNC,
    REPL_LINK_CONNECTED
};

/* After the data directory is loaded and before the first client: the
 * role comes from the replicaof setting. False (err set) when that setting
 * can't be followed: the server must not start as a master instead. */
bool repl_init(const char *dir, char *err, size_t errlen);
/* Stop every replication thread (shutdown). */
void repl_shutdown(void);

bool repl_is_replica(void);
/* A replica loading its master's snapshot: data commands answer LOADING. */
bool repl_loading(void);
/* A replica whose link is down (replica-serve-stale-data no refuses data
 * commands meanwhile). */
bool repl_link_down(void);
/* Data commands need the dispatcher's replication checks (a replica, a
 * load, min-replicas-to-write): one relaxed load for the fast paths. */
bool repl_checks_data(void);
/* A master with min-replicas-to-write set and fewer replicas whose last
 * acknowledgement is within min-replicas-max-lag seconds. */
bool repl_too_few_replicas(void);

/* REPLICAOF host port: become (or stay) a replica of host:port. *already
 * when it follows that master already. gate (may be NULL) is called with
 * true before the role becomes replica and false after: the caller's write
 * gate, so that no write command of a client lands in a replica's log. */
bool repl_replicaof(const char *host, int port, bool *already, char *err, size_t errlen,
                    void (*gate)(void *arg, bool enter), void *arg);
/* REPLICAOF NO ONE: become a master, continuing the log under a new
 * replication id (the old one stays acceptable up to this offset). */
void repl_promote(void);
/* CLIENT KILL TYPE master: drop the link to the master (it reconnects);
 * false when there is none. */
bool repl_drop_master_link(void);

/* ---- master side ---- */

typedef struct repl_peer_info {
    char ip[64];
    int port;      /* REPLCONF listening-port */
    bool bloomery; /* REPLCONF capa bloomery */
} repl_peer_info;

/* PSYNC replid next_lsn on a connection whose socket fd is handed over
 * (the caller no longer owns it), with its TLS session on that socket
 * when it came to the TLS port (also handed over; NULL for plain): a
 * sender thread answers it. */
struct ssl_st;
bool repl_sender_start(int fd, struct ssl_st *ssl, const repl_peer_info *peer, const char *replid,
                       uint64_t next_lsn, char *err, size_t errlen);
/* Replicas whose acknowledged offset is at least lsn. */
unsigned repl_replicas_acked(uint64_t lsn);
/* Called (from sender threads) when a replica acknowledged: WAIT's wake-up. */
void repl_set_ack_hook(void (*fn)(void));

/* ---- status ---- */

typedef struct repl_replica_status {
    char ip[64];
    int port;
    const char *state; /* wait_bgsave, send_bulk, online */
    uint64_t ack;
    int64_t lag_s;
} repl_replica_status;

typedef struct repl_status {
    bool replica;
    char master_host[256];
    int master_port;
    int link; /* REPL_LINK_* */
    int64_t link_down_since_ms, last_io_ms;
    bool sync_in_progress;
    uint64_t offset; /* the last LSN applied or appended */
    char replid[REPL_ID_LEN + 1], replid2[REPL_ID_LEN + 1];
    uint64_t second_offset; /* the old id is valid up to (excluding) this */
    uint64_t full_syncs, partial_syncs_ok, partial_syncs_err;
    uint64_t sync_chunks_fetched, sync_chunks_present, sync_bytes;
    size_t nreplicas;
    repl_replica_status *replicas; /* malloc'd; repl_status_free */
} repl_status;
void repl_get_status(repl_status *s);
void repl_status_free(repl_status *s);
/* INFO's Replication section body (malloc'd). */
char *repl_info(void);

#endif

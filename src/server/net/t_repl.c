/* Replication commands (docs/REPLICATION.md): REPLICAOF/SLAVEOF, ROLE,
 * WAIT, and the replica's side of the handshake, REPLCONF and PSYNC. PSYNC
 * hands the connection's socket to a sender thread (repl/sender.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commit.h"
#include "persist.h"
#include "repl.h"
#include "server.h"
#include "util.h"

/* The role becomes replica inside the write gate: a write command running
 * on another worker ends first, and one that starts later finds a replica
 * (command_call checks again inside the gate), so no client's write lands
 * in a replica's log, where its master's records go. Inside EXEC the gate
 * is held already. */
static void write_gate(void *arg, bool enter)
{
    client *cl = arg;
    if (cl->in_exec)
        return;
    if (enter)
        commit_exclusive_begin(cl->w);
    else
        commit_exclusive_end(cl->w);
}

bool replicaofCommand(cmd_ctx *c)
{
    if (arg_eq(c, 1, "no") && arg_eq(c, 2, "one")) {
        repl_promote();
        reply_ok(&c->out);
        return true;
    }
    long long port;
    if (!str_to_ll(c->argv[2], c->argvlen[2], &port) || port < 0 || port > 65535) {
        reply_error(&c->out, "ERR Invalid master port");
        return false;
    }
    char host[256];
    snprintf(host, sizeof(host), "%.*s", (int)(c->argvlen[1] < 255 ? c->argvlen[1] : 255),
             c->argv[1]);
    bool already;
    char err[256];
    if (!repl_replicaof(host, (int)port, &already, err, sizeof(err), write_gate, client_of(c))) {
        reply_errorf(&c->out, "ERR %s", err);
        return false;
    }
    if (already)
        reply_simple(&c->out, "OK Already connected to specified master");
    else
        reply_ok(&c->out);
    return true;
}

static const char *const link_names[] = {"none", "connect", "connecting", "sync", "connected"};

bool roleCommand(cmd_ctx *c)
{
    repl_status s;
    repl_get_status(&s);
    if (s.replica) {
        reply_array(&c->out, 5);
        reply_bulk_str(&c->out, "slave");
        reply_bulk_str(&c->out, s.master_host);
        reply_int(&c->out, s.master_port);
        reply_bulk_str(&c->out, link_names[s.link]);
        reply_int(&c->out, (long long)s.offset);
    } else {
        reply_array(&c->out, 3);
        reply_bulk_str(&c->out, "master");
        reply_int(&c->out, (long long)s.offset);
        reply_array(&c->out, (long long)s.nreplicas);
        for (size_t i = 0; i < s.nreplicas; i++) {
            char port[16], off[24];
            snprintf(port, sizeof(port), "%d", s.replicas[i].port);
            snprintf(off, sizeof(off), "%" PRIu64, s.replicas[i].ack);
            reply_array(&c->out, 3);
            reply_bulk_str(&c->out, s.replicas[i].ip);
            reply_bulk_str(&c->out, port);
            reply_bulk_str(&c->out, off);
        }
    }
    repl_status_free(&s);
    return true;
}

bool waitCommand(cmd_ctx *c)
{
    long long n, timeout;
    if (!arg_ll(c, 1, &n) || !arg_ll(c, 2, &timeout))
        return false;
    if (timeout < 0) {
        reply_error(&c->out, "ERR timeout is negative");
        return false;
    }
    if (repl_is_replica()) {
        reply_error(&c->out, "ERR WAIT cannot be used with replica instances. Please also note "
                             "that since Redis 4.0 if a replica is configured to be writable "
                             "(which is not the default) writes to replicas are just local and "
                             "are not propagated.");
        return false;
    }
    /* Every record appended so far bounds what this client wrote. */
    uint64_t lsn = wal_assigned_lsn();
    unsigned acked = repl_replicas_acked(lsn);
    if (n <= 0 || acked >= (unsigned long long)n) {
        reply_int(&c->out, acked);
        return true;
    }
    wait_block(client_of(c), lsn, (unsigned)n, timeout);
    return true;
}

bool replconfCommand(cmd_ctx *c)
{
    client *cl = client_of(c);
    if (c->argc % 2 == 0) {
        reply_syntax_error(c);
        return false;
    }
    for (int i = 1; i < c->argc; i += 2) {
        if (arg_eq(c, i, "listening-port")) {
            long long p;
            if (!str_to_ll(c->argv[i + 1], c->argvlen[i + 1], &p) || p < 0 || p > 65535) {
                reply_error(&c->out, "ERR value is out of range");
                return false;
            }
            cl->repl_port = (int)p;
        } else if (arg_eq(c, i, "ip-address")) {
            snprintf(cl->repl_ip, sizeof(cl->repl_ip), "%.*s",
                     (int)(c->argvlen[i + 1] < 63 ? c->argvlen[i + 1] : 63), c->argv[i + 1]);
        } else if (arg_eq(c, i, "capa")) {
            if (c->argvlen[i + 1] == 8 && memcmp(c->argv[i + 1], "bloomery", 8) == 0)
                cl->repl_capa_bloomery = true;
        } else if (arg_eq(c, i, "ack") || arg_eq(c, i, "getack")) {
            /* Only meaningful on a replication link, which is not a client. */
            return true;
        } else {
            reply_errorf(&c->out, "ERR Unrecognized REPLCONF option: %.*s",
                         (int)(c->argvlen[i] < 64 ? c->argvlen[i] : 64), c->argv[i]);
            return false;
        }
    }
    reply_ok(&c->out);
    return true;
}

bool psyncCommand(cmd_ctx *c)
{
    client *cl = client_of(c);
    if (!cl->repl_capa_bloomery) {
        /* A Redis replica expects an RDB stream we do not produce. */
        reply_error(&c->out, "ERR bloomeryd replicates only to bloomeryd replicas "
                             "(REPLCONF capa bloomery)");
        return false;
    }
    if (!wal_enabled()) {
        reply_error(&c->out, "ERR replication needs appendonly yes");
        return false;
    }
    if (repl_loading()) {
        reply_error(&c->out, "LOADING Redis is loading the dataset in memory");
        return false;
    }
    long long next = 0;
    if (c->argc == 3 && !str_to_ll(c->argv[2], c->argvlen[2], &next))
        next = 0;
    char id[REPL_ID_LEN + 1];
    snprintf(id, sizeof(id), "%.*s",
             (int)(c->argvlen[1] < REPL_ID_LEN ? c->argvlen[1] : REPL_ID_LEN), c->argv[1]);
    repl_peer_info peer = {.port = cl->repl_port, .bloomery = true};
    if (cl->repl_ip[0]) {
        snprintf(peer.ip, sizeof(peer.ip), "%s", cl->repl_ip);
    } else {
        /* The address the connection came from, without its port. */
        snprintf(peer.ip, sizeof(peer.ip), "%s", cl->addr);
        char *colon = strrchr(peer.ip, ':');
        if (colon)
            *colon = '\0';
    }
    /* The socket goes to the sender thread on a copy of its descriptor.
     * This connection closes first (libuv drops it from the loop's epoll
     * set and closes its descriptor), then the thread starts: the worker's
     * last use of the descriptor happens before anything the thread does,
     * which may open a file under the same, now free, number. */
    int fd = dup(cl->fd);
    /* A TLS session goes with its socket. */
    struct ssl_st *ssl = NULL;
    if (fd >= 0 && cl->tls && (ssl = tls_conn_detach(cl, fd)) == NULL) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        reply_error(&c->out, "ERR can't hand the connection over");
        return false;
    }
    client_close(cl);
    char err[256];
    if (!repl_sender_start(fd, ssl, &peer, id, next > 0 ? (uint64_t)next : 0, err, sizeof(err)))
        server_log(LOG_WARNING, "Replica %s:%d dropped: %s", peer.ip, peer.port, err);
    return true;
}

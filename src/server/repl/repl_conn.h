/* A connection of the replication threads (repl_conn.c): a socket read
 * and written with poll() and a deadline, so a dead peer or a stop request
 * never blocks a thread for longer than its timeout. With a TLS session
 * (ssl set) the same calls go through it, on the same deadlines. */
#ifndef BLOOMERYD_REPL_CONN_H
#define BLOOMERYD_REPL_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "le.h"

struct ssl_st;

typedef struct repl_conn {
    int fd;
    struct ssl_st *ssl; /* NULL: plain TCP */
    pbuf in;            /* read, not consumed: [pos, len) */
    size_t pos;
    int timeout_ms;     /* for each wait */
    _Atomic bool *stop; /* checked while waiting */
    uint64_t bytes_in, bytes_out;
    char err[1024];
} repl_conn;

void rc_init(repl_conn *c, int fd, int timeout_ms, _Atomic bool *stop);
void rc_close(repl_conn *c);
/* Connect to host:port within timeout_ms. */
bool rc_connect(repl_conn *c, const char *host, int port);
/* The client side of a TLS handshake on the connected socket, with the
 * session ssl (owned from here on), within the timeout. */
bool rc_start_tls(repl_conn *c, struct ssl_st *ssl);
bool rc_send(repl_conn *c, const void *p, size_t n);
/* A command as a RESP array of strings. */
bool rc_send_cmd(repl_conn *c, int argc, const char *const *argv);
/* One line without its CRLF (at most max - 1 bytes), NUL-terminated. */
bool rc_read_line(repl_conn *c, char *line, size_t max);
bool rc_read_exact(repl_conn *c, void *dst, size_t n);
/* A bulk string "$<n>\r\n<n bytes>\r\n" of at most max bytes, malloc'd. */
bool rc_read_bulk(repl_conn *c, uint8_t **out, size_t *len, size_t max);
/* Wait up to ms for input (true), or until the deadline passes (false,
 * err empty) or the connection fails (false, err set). */
bool rc_poll_in(repl_conn *c, int ms, int wake_fd);
/* Whatever can be read now, without waiting. false on EOF or error. */
bool rc_read_some(repl_conn *c);

#endif

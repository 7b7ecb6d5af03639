/* The connections the HTTP listener holds, so that sockets held open without
 * finishing a request cannot keep others out (slowloris). libmicrohttpd's
 * own timeout is an idle one: a client sending a byte every few seconds
 * never meets it, and its connection limit, once reached by such clients,
 * leaves a scrape waiting in the listen queue.
 *
 * So every connection is listed here with the time its current request
 * began. A request must have its headers within HTTP_HEADER_DEADLINE_S and
 * its body within HTTP_BODY_DEADLINE_S; and when a new connection finds
 * HTTP_MAX_CONNECTIONS held, the one that has waited longest for a request
 * it has not finished is closed for it. A peer that is not on the loopback
 * interface may hold at most HTTP_MAX_PER_IP of them. A late or evicted
 * connection is shut down, which libmicrohttpd sees as the client leaving.
 *
 * Every call comes from libmicrohttpd's one polling thread (its callbacks),
 * so the list needs no lock, and a connection listed here is still open:
 * libmicrohttpd tells of a close before it closes the socket. */
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "guard.h"
#include "http.h"
#include "util.h"

typedef enum { WAIT_HEADERS, WAIT_BODY, ANSWERING } conn_phase;

typedef struct http_conn {
    struct http_conn *prev, *next;
    int fd;
    struct sockaddr_storage peer;
    bool loopback;
    conn_phase phase;
    int64_t since_ms; /* monotonic: when the phase began */
} http_conn;

static http_conn *head, *tail; /* oldest first */
static size_t count;

static void unlink_conn(http_conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        tail = c->prev;
    c->prev = c->next = NULL;
    count--;
}

static void append(http_conn *c)
{
    c->prev = tail;
    c->next = NULL;
    if (tail)
        tail->next = c;
    else
        head = c;
    tail = c;
    count++;
}

static int64_t mono_ms(void) { return mono_us() / 1000; }

/* libmicrohttpd closes it at its next look; it stays listed until then. */
static void close_conn(http_conn *c)
{
    if (c->fd >= 0)
        shutdown(c->fd, SHUT_RDWR);
    c->fd = -1; /* once is enough */
    c->phase = ANSWERING;
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr *b)
{
    if (a->ss_family != b->sa_family)
        return false;
    if (b->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (b->sa_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
    return false;
}

bool conns_may_accept(const struct sockaddr *sa)
{
    if (http_peer_is_loopback(sa))
        return true;
    size_t same = 0;
    for (http_conn *c = head; c; c = c->next)
        if (c->fd >= 0 && same_addr(&c->peer, sa))
            same++;
    return same < HTTP_MAX_PER_IP;
}

/* Close the late ones; then, over the limit, the oldest not being answered. */
static void sweep(void)
{
    int64_t now = mono_ms();
    size_t open = 0;
    for (http_conn *c = head; c; c = c->next) {
        int64_t age = now - c->since_ms;
        if ((c->phase == WAIT_HEADERS && age >= HTTP_HEADER_DEADLINE_S * 1000) ||
            (c->phase == WAIT_BODY && age >= HTTP_BODY_DEADLINE_S * 1000))
            close_conn(c);
        if (c->fd >= 0)
            open++;
    }
    while (open > HTTP_MAX_CONNECTIONS) {
        http_conn *oldest = NULL;
        for (http_conn *c = head; c; c = c->next)
            if (c->fd >= 0 && c->phase != ANSWERING &&
                (oldest == NULL || c->since_ms < oldest->since_ms))
                oldest = c;
        if (oldest == NULL)
            break; /* all being answered: libmicrohttpd's own limit holds */
        close_conn(oldest);
        open--;
    }
}

void conns_opened(struct MHD_Connection *conn, void **ctx)
{
    http_conn *c = calloc(1, sizeof(*c));
    *ctx = c;
    if (c == NULL)
        return;
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *addr =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    c->fd = fd ? fd->connect_fd : -1;
    if (addr && addr->client_addr) {
        size_t len = addr->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                              : sizeof(struct sockaddr_in);
        memcpy(&c->peer, addr->client_addr, len);
    }
    c->phase = WAIT_HEADERS;
    c->since_ms = mono_ms();
    append(c);
    sweep();
}

void conns_closed(void **ctx)
{
    http_conn *c = *ctx;
    if (c == NULL)
        return;
    unlink_conn(c);
    free(c);
    *ctx = NULL;
}

static http_conn *of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

static void set_phase(struct MHD_Connection *conn, conn_phase phase)
{
    http_conn *c = of(conn);
    if (c == NULL || c->fd < 0)
        return;
    c->phase = phase;
    c->since_ms = mono_ms();
}

void conns_headers_in(struct MHD_Connection *conn) { set_phase(conn, WAIT_BODY); }
void conns_request_in(struct MHD_Connection *conn) { set_phase(conn, ANSWERING); }
/* Kept alive: the next request's headers are awaited, on the same clock. */
void conns_request_done(struct MHD_Connection *conn) { set_phase(conn, WAIT_HEADERS); }

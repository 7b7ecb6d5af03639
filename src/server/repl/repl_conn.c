/* Blocking-with-deadline socket I/O for the replication threads, plain or
 * through a TLS session on the socket itself (a socket BIO on the
 * non-blocking descriptor: a session that wants to read or write waits
 * for that in poll(), whichever call asked). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "repl_conn.h"
#include "tls.h"

#define READ_STEP 65536
#define POLL_STEP_MS 100
#define TLS_READ_MAX (1u << 20)

void rc_init(repl_conn *c, int fd, int timeout_ms, _Atomic bool *stop)
{
    memset(c, 0, sizeof(*c));
    c->fd = fd;
    c->timeout_ms = timeout_ms;
    c->stop = stop;
    if (fd >= 0) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            fcntl(fd, F_SETFL, fl | O_NONBLOCK);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
}

void rc_close(repl_conn *c)
{
    if (c->ssl) {
        /* A close_notify if the socket takes it now; no wait. */
        ERR_clear_error();
        SSL_shutdown(c->ssl);
        ERR_clear_error();
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->in.p);
    c->in = (pbuf){0};
    c->pos = 0;
}

static bool stopped(repl_conn *c) { return c->stop && atomic_load(c->stop); }

/* Wait for events on the socket (and wake_fd) up to ms; 1 ready, 0
 * timeout, -1 error or stop (err set). */
static int wait_fd(repl_conn *c, short events, int ms, int wake_fd)
{
    for (int waited = 0;;) {
        if (stopped(c)) {
            snprintf(c->err, sizeof(c->err), "stopping");
            return -1;
        }
        struct pollfd p[2] = {{.fd = c->fd, .events = events}, {.fd = wake_fd, .events = POLLIN}};
        int step = ms - waited < POLL_STEP_MS ? ms - waited : POLL_STEP_MS;
        int n = poll(p, wake_fd >= 0 ? 2 : 1, step < 0 ? 0 : step);
        if (n < 0 && errno != EINTR) {
            snprintf(c->err, sizeof(c->err), "poll: %s", strerror(errno));
            return -1;
        }
        if (n > 0) {
            if (wake_fd >= 0 && (p[1].revents & POLLIN)) {
                uint64_t v;
                if (read(wake_fd, &v, sizeof(v)) < 0) { /* drained: nothing to do */
                }
                if (!(p[0].revents & (events | POLLERR | POLLHUP)))
                    return 1;
            }
            if (p[0].revents & (POLLERR | POLLNVAL)) {
                snprintf(c->err, sizeof(c->err), "connection error");
                return -1;
            }
            return 1;
        }
        waited += step;
        if (waited >= ms)
            return 0;
    }
}

bool rc_connect(repl_conn *c, const char *host, int port)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc != 0) {
        snprintf(c->err, sizeof(c->err), "can't resolve %s: %s", host, gai_strerror(rc));
        return false;
    }
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            continue;
        rc_init(c, fd, c->timeout_ms, c->stop);
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 ||
            (errno == EINPROGRESS && wait_fd(c, POLLOUT, c->timeout_ms, -1) == 1)) {
            int e = 0;
            socklen_t el = sizeof(e);
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0) {
                freeaddrinfo(res);
                return true;
            }
            errno = e;
        }
        snprintf(c->err, sizeof(c->err), "can't connect to %s:%d: %s", host, port,
                 strerror(errno ? errno : ETIMEDOUT));
        close(fd);
        c->fd = -1;
    }
    freeaddrinfo(res);
    if (!c->err[0])
        snprintf(c->err, sizeof(c->err), "can't connect to %s:%d", host, port);
    return false;
}

/* What a session that returned ret wants: wait for it (true) or fail with
 * the reason in err (false). */
static bool tls_wait(repl_conn *c, int ret, const char *what)
{
    int e = SSL_get_error(c->ssl, ret);
    short ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    if (ev == 0) {
        char why[256];
        if (e == SSL_ERROR_ZERO_RETURN)
            snprintf(why, sizeof(why), "connection closed");
        else
            tls_error_string(c->ssl, ret, why, sizeof(why));
        snprintf(c->err, sizeof(c->err), "%s: %s", what, why);
        return false;
    }
    int r = wait_fd(c, ev, c->timeout_ms, -1);
    if (r == 0)
        snprintf(c->err, sizeof(c->err), "timeout in %s", what);
    return r == 1;
}

bool rc_start_tls(repl_conn *c, struct ssl_st *ssl)
{
    c->ssl = ssl;
    if (SSL_set_fd(ssl, c->fd) != 1) {
        snprintf(c->err, sizeof(c->err), "TLS: can't use the socket");
        return false;
    }
    for (;;) {
        ERR_clear_error();
        int r = SSL_connect(ssl);
        if (r == 1)
            return true;
        if (!tls_wait(c, r, "TLS handshake"))
            return false;
    }
}

static bool tls_send(repl_conn *c, const uint8_t *b, size_t n)
{
    while (n > 0) {
        size_t w = 0;
        ERR_clear_error();
        int r = SSL_write_ex(c->ssl, b, n, &w);
        if (r > 0) {
            b += w;
            n -= w;
            c->bytes_out += w;
            continue;
        }
        if (!tls_wait(c, r, "TLS write"))
            return false;
    }
    return true;
}

bool rc_send(repl_conn *c, const void *p, size_t n)
{
    const uint8_t *b = p;
    if (c->ssl)
        return tls_send(c, b, n);
    while (n > 0) {
        ssize_t w = send(c->fd, b, n, MSG_NOSIGNAL);
        if (w > 0) {
            b += w;
            n -= (size_t)w;
            c->bytes_out += (uint64_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int r = wait_fd(c, POLLOUT, c->timeout_ms, -1);
            if (r == 1)
                continue;
            if (r == 0)
                snprintf(c->err, sizeof(c->err), "timeout sending");
            return false;
        }
        snprintf(c->err, sizeof(c->err), "send: %s", strerror(errno));
        return false;
    }
    return true;
}

bool rc_send_cmd(repl_conn *c, int argc, const char *const *argv)
{
    pbuf b = {0};
    char h[32];
    pbuf_put(&b, h, (size_t)snprintf(h, sizeof(h), "*%d\r\n", argc));
    for (int i = 0; i < argc; i++) {
        size_t l = strlen(argv[i]);
        pbuf_put(&b, h, (size_t)snprintf(h, sizeof(h), "$%zu\r\n", l));
        pbuf_put(&b, argv[i], l);
        pbuf_put(&b, "\r\n", 2);
    }
    bool ok = !b.failed && rc_send(c, b.p, b.len);
    free(b.p);
    return ok;
}

bool rc_read_some(repl_conn *c)
{
    if (c->pos > 0 && c->pos == c->in.len)
        c->in.len = c->pos = 0;
    else if (c->pos > (1u << 20)) {
        memmove(c->in.p, c->in.p + c->pos, c->in.len - c->pos);
        c->in.len -= c->pos;
        c->pos = 0;
    }
    size_t read_now = 0;
    for (;;) {
        if (!pbuf_reserve(&c->in, READ_STEP)) {
            snprintf(c->err, sizeof(c->err), "out of memory");
            return false;
        }
        if (c->ssl) {
            /* Until the session wants the socket: nothing stays in it. */
            size_t got = 0;
            ERR_clear_error();
            int r = SSL_read_ex(c->ssl, c->in.p + c->in.len, READ_STEP, &got);
            if (r > 0) {
                c->in.len += got;
                c->bytes_in += got;
                /* A bound per call, as a short recv ends a plain one:
                 * what the socket still holds waits for the next. */
                if ((read_now += got) >= TLS_READ_MAX)
                    return true;
                continue;
            }
            if (SSL_get_error(c->ssl, r) == SSL_ERROR_WANT_READ)
                return true;
            if (!tls_wait(c, r, "TLS read"))
                return false;
            continue;
        }
        ssize_t n = recv(c->fd, c->in.p + c->in.len, READ_STEP, 0);
        if (n > 0) {
            c->in.len += (size_t)n;
            c->bytes_in += (uint64_t)n;
            if ((size_t)n < READ_STEP)
                return true;
            continue;
        }
        if (n == 0) {
            snprintf(c->err, sizeof(c->err), "connection closed");
            return false;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return true;
        snprintf(c->err, sizeof(c->err), "recv: %s", strerror(errno));
        return false;
    }
}

bool rc_poll_in(repl_conn *c, int ms, int wake_fd)
{
    c->err[0] = '\0';
    if (c->ssl && SSL_pending(c->ssl) > 0)
        return true;
    int r = wait_fd(c, POLLIN, ms, wake_fd);
    return r == 1;
}

/* Make at least n unread bytes available. */
static bool need(repl_conn *c, size_t n)
{
    while (c->in.len - c->pos < n) {
        size_t before = c->in.len - c->pos;
        if (!rc_read_some(c))
            return false;
        if (c->in.len - c->pos > before)
            continue;
        int r = wait_fd(c, POLLIN, c->timeout_ms, -1);
        if (r == 0)
            snprintf(c->err, sizeof(c->err), "timeout reading");
        if (r != 1)
            return false;
    }
    return true;
}

bool rc_read_line(repl_conn *c, char *line, size_t max)
{
    for (size_t scanned = 0;;) {
        size_t avail = c->in.len - c->pos;
        const char *s = c->in.p ? (const char *)c->in.p + c->pos : "";
        for (; scanned + 1 < avail; scanned++)
            if (s[scanned] == '\r' && s[scanned + 1] == '\n') {
                size_t l = scanned < max - 1 ? scanned : max - 1;
                memcpy(line, s, l);
                line[l] = '\0';
                c->pos += scanned + 2;
                return true;
            }
        if (avail > 65536) {
            snprintf(c->err, sizeof(c->err), "line too long");
            return false;
        }
        if (!need(c, avail + 1))
            return false;
    }
}

bool rc_read_exact(repl_conn *c, void *dst, size_t n)
{
    uint8_t *d = dst;
    while (n > 0) {
        if (c->in.len == c->pos && !need(c, 1))
            return false;
        size_t take = c->in.len - c->pos < n ? c->in.len - c->pos : n;
        memcpy(d, c->in.p + c->pos, take);
        c->pos += take;
        d += take;
        n -= take;
    }
    return true;
}

bool rc_read_bulk(repl_conn *c, uint8_t **out, size_t *len, size_t max)
{
    char line[64];
    *out = NULL;
    if (!rc_read_line(c, line, sizeof(line)))
        return false;
    char *end;
    unsigned long long n = line[0] == '$' ? strtoull(line + 1, &end, 10) : 0;
    if (line[0] != '$' || end == line + 1 || *end != '\0' || n > max) {
        snprintf(c->err, sizeof(c->err), "bad bulk header '%.40s'", line);
        return false;
    }
    uint8_t *p = malloc(n ? n : 1);
    char crlf[2];
    if (p == NULL || !rc_read_exact(c, p, n) || !rc_read_exact(c, crlf, 2) || crlf[0] != '\r' ||
        crlf[1] != '\n') {
        if (p && !c->err[0])
            snprintf(c->err, sizeof(c->err), "bad bulk end");
        free(p);
        return false;
    }
    *out = p;
    *len = n;
    return true;
}

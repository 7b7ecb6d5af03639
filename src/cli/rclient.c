/* Minimal pipelining RESP2 client over POSIX sockets, plain or TLS
 * (rtls.c; see rclient.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rclient.h"

int rc_connect(rc_conn *c, const char *host, const char *port, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_family = AF_UNSPEC;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "cannot resolve %s:%s: %s", host, port, gai_strerror(gai));
        return -1;
    }
    int saved = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            c->fd = fd;
            break;
        }
        saved = errno;
        close(fd);
    }
    freeaddrinfo(res);
    if (c->fd < 0) {
        snprintf(err, errlen, "cannot connect to %s:%s: %s", host, port, strerror(saved));
        return -1;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    return 0;
}

void rc_close(rc_conn *c)
{
    if (c->tls)
        c->tls->close(c);
    if (c->fd >= 0)
        close(c->fd);
    free(c->in.p);
    free(c->out.p);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

static int buf_reserve(rc_buf *b, size_t extra)
{
    if (b->len + extra <= b->cap)
        return 0;
    /* Drop consumed bytes first. */
    if (b->pos) {
        memmove(b->p, b->p + b->pos, b->len - b->pos);
        b->len -= b->pos;
        b->pos = 0;
        if (b->len + extra <= b->cap)
            return 0;
    }
    size_t c = b->cap ? b->cap : 65536;
    while (c < b->len + extra)
        c *= 2;
    char *p = realloc(b->p, c);
    if (!p)
        return -1;
    b->p = p;
    b->cap = c;
    return 0;
}

static int put(rc_conn *c, const char *p, size_t n)
{
    if (buf_reserve(&c->out, n) != 0)
        return -1;
    memcpy(c->out.p + c->out.len, p, n);
    c->out.len += n;
    return 0;
}

int rc_begin(rc_conn *c, size_t nargs)
{
    char h[32];
    int n = snprintf(h, sizeof h, "*%zu\r\n", nargs);
    return put(c, h, (size_t)n);
}

int rc_arg(rc_conn *c, const void *p, size_t len)
{
    char h[32];
    int n = snprintf(h, sizeof h, "$%zu\r\n", len);
    if (buf_reserve(&c->out, (size_t)n + len + 2) != 0)
        return -1;
    put(c, h, (size_t)n);
    if (len)
        put(c, p, len);
    return put(c, "\r\n", 2);
}

/* The line at buf[0..len) up to CRLF: its length, or -1 if incomplete. */
static long line_end(const char *buf, size_t len)
{
    const char *cr = memchr(buf, '\r', len);
    while (cr) {
        size_t at = (size_t)(cr - buf);
        if (at + 1 >= len)
            return -1;
        if (cr[1] == '\n')
            return (long)at;
        cr = memchr(cr + 1, '\r', len - at - 1);
    }
    return -1;
}

static int parse_ll(const char *s, size_t n, long long *out)
{
    if (n == 0 || n > 20)
        return -1;
    char tmp[24];
    memcpy(tmp, s, n);
    tmp[n] = 0;
    char *end;
    errno = 0;
    long long v = strtoll(tmp, &end, 10);
    if (*end || errno)
        return -1;
    *out = v;
    return 0;
}

/* One value at depth; top-level fields of r are set only at depth 0; element
 * values of a top-level array go to r->ints. */
static int parse_value(const char *buf, size_t len, size_t *used, rc_reply *r, int depth,
                       long long *elem)
{
    if (depth > 32)
        return -1;
    if (len < 1)
        return 0;
    long e = line_end(buf, len);
    if (e < 0)
        return len > 65536 && !memchr(buf, '\n', 65536) ? -1 : 0;
    char t = buf[0];
    const char *body = buf + 1;
    size_t blen = (size_t)e - 1;
    size_t head = (size_t)e + 2;
    long long n;
    if (depth == 0)
        r->type = t;
    *elem = -1;
    switch (t) {
    case '+':
    case '-':
    case ':':
    case '_':
    case '#':
    case ',':
    case '(':
        if (t == ':') {
            if (parse_ll(body, blen, &n) != 0)
                return -1;
            *elem = n;
            if (depth == 0)
                r->integer = n;
        }
        if (t == '-') {
            if (!r->err) {
                r->err = body;
                r->errlen = blen;
            }
            if (depth == 1)
                r->nerr++;
        }
        if (depth == 0) {
            r->str = body;
            r->len = blen;
        }
        *used = head;
        return 1;
    case '$':
    case '!':
    case '=':
        if (parse_ll(body, blen, &n) != 0 || n < -1)
            return -1;
        if (n == -1) {
            *used = head;
            return 1;
        }
        if (len - head < (size_t)n + 2)
            return 0;
        if (buf[head + (size_t)n] != '\r' || buf[head + (size_t)n + 1] != '\n')
            return -1;
        if (t == '!' && !r->err) {
            r->err = buf + head;
            r->errlen = (size_t)n;
        }
        if (depth == 0) {
            r->str = buf + head;
            r->len = (size_t)n;
        }
        *used = head + (size_t)n + 2;
        return 1;
    case '*':
    case '~':
    case '>':
    case '%': {
        if (parse_ll(body, blen, &n) != 0 || n < -1 || n > INT_MAX)
            return -1;
        if (depth == 0)
            r->nelem = n < 0 ? SIZE_MAX : (size_t)n;
        size_t pos = head;
        size_t count = n < 0 ? 0 : (size_t)n * (t == '%' ? 2 : 1);
        for (size_t i = 0; i < count; i++) {
            size_t u;
            long long v;
            int rc = parse_value(buf + pos, len - pos, &u, r, depth + 1, &v);
            if (rc <= 0)
                return rc;
            if (depth == 0 && r->ints && i < r->ints_cap)
                r->ints[i] = v;
            pos += u;
        }
        *used = pos;
        return 1;
    }
    default: return -1;
    }
}

int rc_parse(const char *buf, size_t len, size_t *used, rc_reply *r)
{
    long long *ints = r->ints;
    size_t cap = r->ints_cap;
    memset(r, 0, sizeof *r);
    r->ints = ints;
    r->ints_cap = cap;
    long long v;
    return parse_value(buf, len, used, r, 0, &v);
}

/* The server closed the connection: a plain client at a TLS port is
 * dropped without a reply (or sent an alert) and says no more. */
static int closed(rc_conn *c, char *err, size_t errlen)
{
    if (!c->answered && !c->tls)
        snprintf(err, errlen,
                 "the server closed the connection without answering "
                 "(a TLS port? use --tls)");
    else if (!c->answered)
        snprintf(err, errlen,
                 "the server closed the connection without answering "
                 "(does it want a client certificate? --cert and --tls-key)");
    else
        snprintf(err, errlen, "the server closed the connection");
    return -1;
}

int rc_pump(rc_conn *c, int timeout_ms, char *err, size_t errlen)
{
    /* Bytes already decrypted are read without waiting for the socket. */
    bool pending = c->tls && c->tls->pending(c);
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (c->out.pos < c->out.len)
        p.events |= POLLOUT;
    int n = poll(&p, 1, pending ? 0 : timeout_ms);
    if (n < 0) {
        if (errno == EINTR)
            return 0;
        snprintf(err, errlen, "poll: %s", strerror(errno));
        return -1;
    }
    if (n == 0 && !pending)
        return 0;
    if (p.revents & POLLOUT) {
        ssize_t w;
        if (c->tls) {
            w = c->tls->write(c, c->out.p + c->out.pos, c->out.len - c->out.pos, err, errlen);
            if (w == -2)
                return closed(c, err, errlen);
            if (w < 0)
                return -1;
        } else {
            w = send(c->fd, c->out.p + c->out.pos, c->out.len - c->out.pos, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN && errno != EINTR) {
                if (errno == ECONNRESET || errno == EPIPE)
                    return closed(c, err, errlen);
                snprintf(err, errlen, "cannot send to the server: %s", strerror(errno));
                return -1;
            }
        }
        if (w > 0) {
            c->out.pos += (size_t)w;
            if (c->out.pos == c->out.len)
                c->out.pos = c->out.len = 0;
        }
    }
    if (pending || (p.revents & (POLLIN | POLLHUP | POLLERR))) {
        if (buf_reserve(&c->in, 65536) != 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        ssize_t r;
        if (c->tls) {
            r = c->tls->read(c, c->in.p + c->in.len, c->in.cap - c->in.len, err, errlen);
            if (r == -2)
                return closed(c, err, errlen);
            if (r < 0)
                return -1;
        } else {
            r = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len, 0);
            if (r == 0 || (r < 0 && errno == ECONNRESET))
                return closed(c, err, errlen);
            if (r < 0 && errno != EAGAIN && errno != EINTR) {
                snprintf(err, errlen, "cannot read from the server: %s", strerror(errno));
                return -1;
            }
            /* A TLS record (handshake 0x16, alert 0x15) where RESP was
             * expected: the port speaks TLS. */
            if (r > 0 && !c->answered &&
                (c->in.p[c->in.len] == 0x15 || c->in.p[c->in.len] == 0x16)) {
                snprintf(err, errlen, "the server answered in TLS (use --tls)");
                return -1;
            }
        }
        if (r > 0) {
            c->in.len += (size_t)r;
            c->answered = true;
        }
    }
    return 0;
}

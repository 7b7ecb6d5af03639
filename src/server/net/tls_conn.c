/* Connections to the TLS port: the same client as a plain connection, with
 * an OpenSSL session between its socket and its buffers.
 *
 * The session works on memory BIOs, on the client's own worker loop, never
 * blocking: what the socket gives is written into the session's input BIO,
 * SSL_read then drains every record it completes straight into the query
 * buffer (client_alloc's room, so the query-buffer limit is the plain
 * path's) and each piece runs through client_input, as a plain read would.
 * Reading until the session wants more input leaves nothing in it
 * (SSL_pending is 0), so no request waits for another socket event.
 *
 * Writing: while no write is in flight, the replies in cx.out are encrypted
 * into the output BIO and its bytes go out by uv_try_write from the BIO's
 * own memory; only a rest the socket did not take is copied, into wbuf,
 * for uv_write. While that write is in flight new replies wait in cx.out
 * as on a plain connection, so the output-buffer limits count the same
 * bytes. Renegotiation is refused (SSL_OP_NO_RENEGOTIATION), so a write
 * wanting a read only happens if the peer sends a key update, and then the
 * replies simply stay in cx.out until its next bytes arrive.
 *
 * A peer that speaks something else fails the handshake and is closed at
 * once; one that says nothing is closed after TLS_HANDSHAKE_MS, whatever
 * the timeout setting (Redis leaves such a connection to timeout alone).
 * Closing sends a close_notify when it can go out without waiting.
 */
#include <openssl/err.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "server.h"
#include "tls.h"
#include "util.h"

#define TLS_HANDSHAKE_MS 10000
/* Enough for four full records; the read callback drains it each time. */
#define TLS_INPUT (64 * 1024)

typedef struct tls_link {
    SSL *ssl;   /* NULL once handed to a replication sender */
    bool ready; /* handshake done */
} tls_link;

/* The socket's bytes land here and are copied into the session's BIO
 * within the same callback: one buffer per worker thread is enough. */
static _Thread_local char tls_input[TLS_INPUT];

bool tls_conn_attach(client *c)
{
    SSL *ssl = tls_accept_ssl();
    tls_link *t = ssl ? calloc(1, sizeof(*t)) : NULL;
    if (t == NULL) {
        SSL_free(ssl);
        return false;
    }
    t->ssl = ssl;
    c->tls = t;
    return true;
}

void tls_conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    buf->base = tls_input;
    buf->len = sizeof(tls_input);
}

static void add_out(worker *w, uint64_t n)
{
    atomic_store_explicit(&w->net_out, atomic_load_explicit(&w->net_out, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* A session error on c: logged as Redis logs a failed TLS accept or read
 * (verbose), then the connection closes. */
static void fail(client *c, int ret, const char *what)
{
    char why[256];
    tls_error_string(c->tls->ssl, ret, why, sizeof(why));
    server_log(LOG_VERBOSE, "%s client id=%llu addr=%s: %s", what, (unsigned long long)c->id,
               c->addr, why);
    client_close(c);
}

/* Every complete record's plaintext into the query buffer, each piece run
 * as it arrives. */
static void read_plain(client *c)
{
    SSL *ssl = c->tls->ssl;
    while (!c->closing && !c->close_after_reply) {
        uv_buf_t b;
        client_alloc((uv_handle_t *)&c->tcp, 0, &b);
        if (b.base == NULL) {
            client_close(c);
            return;
        }
        size_t got = 0;
        ERR_clear_error();
        int r = SSL_read_ex(ssl, b.base, b.len, &got);
        if (r <= 0) {
            int e = SSL_get_error(ssl, r);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                return;
            if (e == SSL_ERROR_ZERO_RETURN) /* the peer's close_notify */
                client_close(c);
            else
                fail(c, r, "Error reading from TLS");
            return;
        }
        client_input(c, got);
    }
}

void tls_conn_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    client *c = s->data;
    if (nread < 0) {
        client_close(c);
        return;
    }
    if (nread == 0 || c->closing)
        return;
    tls_link *t = c->tls;
    if (BIO_write(SSL_get_rbio(t->ssl), buf->base, (int)nread) != (int)nread) {
        client_close(c);
        return;
    }
    if (!t->ready) {
        ERR_clear_error();
        int r = SSL_do_handshake(t->ssl);
        if (r != 1) {
            int e = SSL_get_error(t->ssl, r);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                client_flush(c); /* the handshake's next flight */
            else
                fail(c, r, "Error accepting a TLS connection from");
            return;
        }
        t->ready = true;
    }
    read_plain(c);
    /* Handshake bytes and session tickets, when no reply carried them. */
    client_flush(c);
}

static void on_written(uv_write_t *req, int status)
{
    client *c = req->data;
    c->writing = false;
    if (status < 0 || c->closing) {
        if (!c->closing)
            client_close(c);
        return;
    }
    if (c->wcap > KEEP_BUFFER) {
        free(c->wbuf);
        c->wbuf = NULL;
        c->wcap = 0;
    }
    c->wlen = 0;
    atomic_store_explicit(&c->obuf_used, c->cx.out.len, memory_order_relaxed);
    client_flush(c);
}

/* The replies in cx.out into the session; false when c was closed. */
static bool encrypt_out(client *c)
{
    SSL *ssl = c->tls->ssl;
    size_t off = 0, len = c->cx.out.len;
    while (off < len) {
        size_t n = 0;
        ERR_clear_error();
        int r = SSL_write_ex(ssl, c->cx.out.buf + off, len - off, &n);
        if (r <= 0) {
            int e = SSL_get_error(ssl, r);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                break; /* the rest goes once the peer's bytes arrive */
            fail(c, r, "Error writing to TLS");
            return false;
        }
        off += n;
    }
    /* Counted as Redis counts output: the replies' bytes. */
    add_out(c->w, off);
    if (off == len) {
        c->cx.out.len = 0;
        if (c->cx.out.cap > KEEP_BUFFER)
            reply_free(&c->cx.out);
    } else if (off > 0) {
        memmove(c->cx.out.buf, c->cx.out.buf + off, len - off);
        c->cx.out.len = len - off;
    }
    return true;
}

void tls_conn_flush(client *c)
{
    tls_link *t = c->tls;
    if (t->ready && c->cx.out.len > 0 && !encrypt_out(c))
        return;
    BIO *wbio = SSL_get_wbio(t->ssl);
    char *data = NULL;
    long n = BIO_get_mem_data(wbio, &data);
    if (n <= 0) {
        atomic_store_explicit(&c->obuf_used, c->cx.out.len, memory_order_relaxed);
        if (c->close_after_reply && c->cx.out.len == 0)
            client_close(c);
        return;
    }
    uv_buf_t b = uv_buf_init(data, (unsigned)n);
    int w = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (w == UV_EAGAIN)
        w = 0;
    if (w < 0) {
        client_close(c);
        return;
    }
    size_t rest = (size_t)n - (size_t)w;
    if (rest == 0) {
        (void)BIO_reset(wbio);
        atomic_store_explicit(&c->obuf_used, c->cx.out.len, memory_order_relaxed);
        if (c->close_after_reply && c->cx.out.len == 0)
            client_close(c);
        return;
    }
    /* The socket is full: the rest becomes the in-flight write. */
    if (c->wcap < rest) {
        char *p = realloc(c->wbuf, rest);
        if (p == NULL) {
            client_close(c);
            return;
        }
        c->wbuf = p;
        c->wcap = rest;
    }
    memcpy(c->wbuf, data + w, rest);
    (void)BIO_reset(wbio);
    c->wlen = rest;
    c->writing = true;
    c->wreq.data = c;
    atomic_store_explicit(&c->obuf_used, rest + c->cx.out.len, memory_order_relaxed);
    uv_buf_t wb = uv_buf_init(c->wbuf, (unsigned)rest);
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &wb, 1, on_written) != 0) {
        c->writing = false;
        client_close(c);
    }
}

void tls_conn_shutdown(client *c)
{
    tls_link *t = c->tls;
    if (t->ssl == NULL || c->writing)
        return; /* handed over, or a write in flight the alert can't pass */
    if (t->ready) {
        ERR_clear_error();
        SSL_shutdown(t->ssl);
        ERR_clear_error();
    }
    /* The close_notify, or the alert of a failed handshake. */
    char *data = NULL;
    long n = BIO_get_mem_data(SSL_get_wbio(t->ssl), &data);
    if (n > 0) {
        ssize_t w = send(c->fd, data, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)w;
    }
}

void tls_conn_free(client *c)
{
    SSL_free(c->tls->ssl);
    free(c->tls);
    c->tls = NULL;
}

bool tls_conn_expired(client *c, int64_t now)
{
    return !c->tls->ready && now - c->ctime_ms > TLS_HANDSHAKE_MS;
}

struct ssl_st *tls_conn_detach(client *c, int fd)
{
    tls_link *t = c->tls;
    SSL *ssl = t->ssl;
    /* Bytes still in the session or its BIOs would be lost with them. */
    if (!t->ready || c->writing || SSL_pending(ssl) > 0 ||
        BIO_ctrl_pending(SSL_get_rbio(ssl)) > 0 || BIO_ctrl_pending(SSL_get_wbio(ssl)) > 0)
        return NULL;
    /* The sender thread reads and writes the socket itself. */
    if (SSL_set_fd(ssl, fd) != 1) {
        ERR_clear_error();
        return NULL;
    }
    t->ssl = NULL;
    return ssl;
}

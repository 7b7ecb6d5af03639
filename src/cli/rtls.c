/* TLS for the CLI's RESP client (rclient.h), with OpenSSL and redis-cli's
 * options: the server's certificate is checked against --cacert/--cacertdir
 * (or the system's CAs), and its name against --sni or the host connected
 * to (an address is checked against the certificate's IP addresses);
 * --insecure checks nothing. --cert with --tls-key (redis-cli's --key)
 * gives a client certificate to servers that ask for one. Errors say what
 * failed in words a user can act on: an untrusted certificate, a plain
 * server, a missing client certificate. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "rclient.h"

/* A plain server that got our ClientHello may wait for the rest of what it
 * reads as a line: the handshake gives up after this long. */
#define HANDSHAKE_SECONDS 10

/* Words for OpenSSL's reason (the earliest error queued), with a hint for
 * the usual causes. */
static void describe(char *err, size_t errlen, const char *what)
{
    unsigned long code = ERR_peek_error();
    int reason = ERR_GET_REASON(code);
    const char *text = code ? ERR_reason_error_string(code) : NULL;
    if (!text)
        text = errno ? strerror(errno) : "unknown error";
    const char *hint = "";
    if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
        reason == SSL_R_UNEXPECTED_EOF_WHILE_READING)
        hint = " (a plain port? drop --tls)";
    else if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
             reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE)
        hint = " (does the server want a client certificate? --cert and --tls-key)";
    else if (reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA || reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE)
        hint = " (the server does not trust the client certificate)";
    snprintf(err, errlen, "%s: %s%s", what, text, hint);
    ERR_clear_error();
}

static bool is_address(const char *s)
{
    unsigned char a[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

static int setup(rc_conn *c, const char *host, const rc_tls *t, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        describe(err, errlen, "cannot start TLS");
        return -1;
    }
    c->ssl_ctx = ctx;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* rclient's output buffer may move between a refused write and its
     * retry, and takes partial writes. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (!t->insecure) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        if (t->cacert || t->cacertdir) {
            if (SSL_CTX_load_verify_locations(ctx, t->cacert, t->cacertdir) != 1) {
                char what[PATH_MAX + 64];
                snprintf(what, sizeof what, "cannot load the CA certificates of %s",
                         t->cacert ? t->cacert : t->cacertdir);
                describe(err, errlen, what);
                return -1;
            }
        } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
            describe(err, errlen, "cannot load the system's CA certificates");
            return -1;
        }
    }
    if (t->cert) {
        char what[PATH_MAX + 64];
        snprintf(what, sizeof what, "cannot load the certificate %s", t->cert);
        if (SSL_CTX_use_certificate_chain_file(ctx, t->cert) != 1) {
            describe(err, errlen, what);
            return -1;
        }
        snprintf(what, sizeof what, "cannot load the private key %s", t->key);
        if (SSL_CTX_use_PrivateKey_file(ctx, t->key, SSL_FILETYPE_PEM) != 1) {
            describe(err, errlen, what);
            return -1;
        }
    }
    SSL *ssl = SSL_new(ctx);
    if (!ssl || SSL_set_fd(ssl, c->fd) != 1) {
        SSL_free(ssl);
        describe(err, errlen, "cannot start TLS");
        return -1;
    }
    c->ssl = ssl;
    const char *name = t->sni ? t->sni : host;
    bool address = is_address(name);
    /* SNI carries host names only. */
    if (!address && SSL_set_tlsext_host_name(ssl, name) != 1) {
        describe(err, errlen, "bad --sni name");
        return -1;
    }
    if (!t->insecure) {
        X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
        X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        int ok = address ? X509_VERIFY_PARAM_set1_ip_asc(vp, name)
                         : X509_VERIFY_PARAM_set1_host(vp, name, 0);
        if (ok != 1) {
            describe(err, errlen, "cannot check the server's name");
            return -1;
        }
    }
    return 0;
}

static void set_timeout(int fd, int seconds)
{
    struct timeval tv = {.tv_sec = seconds};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* The outcome of SSL_read/SSL_write r: see rc_io. */
static long outcome(rc_conn *c, int r, const char *what, char *err, size_t errlen)
{
    if (r > 0)
        return r;
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    if (e == SSL_ERROR_ZERO_RETURN)
        return -2;
    if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        if (errno == EAGAIN || errno == EINTR)
            return 0;
        if (r == 0 || errno == 0 || errno == ECONNRESET || errno == EPIPE)
            return -2;
        snprintf(err, errlen, "%s: %s", what, strerror(errno));
        return -1;
    }
    describe(err, errlen, what);
    return -1;
}

static long tls_read(rc_conn *c, void *p, size_t n, char *err, size_t errlen)
{
    ERR_clear_error();
    errno = 0;
    int r = SSL_read(c->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
    return outcome(c, r, "cannot read from the server", err, errlen);
}

static long tls_write(rc_conn *c, const void *p, size_t n, char *err, size_t errlen)
{
    ERR_clear_error();
    errno = 0;
    int r = SSL_write(c->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
    return outcome(c, r, "cannot send to the server", err, errlen);
}

static bool tls_pending(rc_conn *c) { return SSL_pending(c->ssl) > 0; }

static void tls_close(rc_conn *c)
{
    SSL_free(c->ssl);
    SSL_CTX_free(c->ssl_ctx);
    c->ssl = NULL;
    c->ssl_ctx = NULL;
}

static const rc_io tls_io = {tls_read, tls_write, tls_pending, tls_close};

int rc_tls_start(rc_conn *c, const char *host, const char *port, const rc_tls *t, char *err,
                 size_t errlen)
{
    /* rc_close frees what setup made, whatever happens next. */
    c->tls = &tls_io;
    if (setup(c, host, t, err, errlen) != 0)
        return -1;
    ERR_clear_error();
    /* The handshake blocks, bounded by the socket's timeouts. */
    int fl = fcntl(c->fd, F_GETFL);
    fcntl(c->fd, F_SETFL, fl & ~O_NONBLOCK);
    set_timeout(c->fd, HANDSHAKE_SECONDS);
    errno = 0;
    int r = SSL_connect(c->ssl);
    int saved = errno;
    set_timeout(c->fd, 0);
    fcntl(c->fd, F_SETFL, fl);
    if (r == 1)
        return 0;
    long verify = SSL_get_verify_result(c->ssl);
    if (verify != X509_V_OK) {
        snprintf(err, errlen,
                 "cannot verify the certificate of %s:%s: %s (--cacert names the CA that "
                 "signed it, --sni the name it holds; --insecure skips the check)",
                 host, port, X509_verify_cert_error_string(verify));
        ERR_clear_error();
        return -1;
    }
    char what[512];
    int e = SSL_get_error(c->ssl, r);
    /* The socket's timeout: OpenSSL sees a read that would block. */
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        snprintf(err, errlen, "no TLS answer from %s:%s in %d s (a plain port? drop --tls)", host,
                 port, HANDSHAKE_SECONDS);
        ERR_clear_error();
        return -1;
    }
    if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        if (saved == EAGAIN || saved == EWOULDBLOCK)
            snprintf(err, errlen, "no TLS answer from %s:%s in %d s (a plain port? drop --tls)",
                     host, port, HANDSHAKE_SECONDS);
        else if (saved == 0 || saved == ECONNRESET || saved == EPIPE)
            snprintf(err, errlen,
                     "%s:%s closed the connection during the TLS handshake (a plain port? "
                     "drop --tls)",
                     host, port);
        else
            snprintf(err, errlen, "TLS handshake with %s:%s: %s", host, port, strerror(saved));
        return -1;
    }
    snprintf(what, sizeof what, "TLS handshake with %s:%s failed", host, port);
    describe(err, errlen, what);
    return -1;
}

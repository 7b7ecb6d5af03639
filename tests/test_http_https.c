/* The HTTP listener's TLS credentials (src/server/http/https.c) in a
 * libmicrohttpd daemon of the suite's own: http_tls_reload puts a new
 * certificate and key in place for the connections that come next, a
 * connection already open goes on with its own, and a pair that cannot be
 * used leaves the current one in place. The settings are this file's
 * (config_get_str below); the certificates are made with GnuTLS here, in a
 * temporary directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "http.h"

/* ---- what https.c takes from the layers below ---- */

server_config cfg;
static char cert_path[256], key_path[256];

char *config_get_str(const char *name)
{
    if (strcmp(name, "tls-cert-file") == 0)
        return strdup(cert_path);
    if (strcmp(name, "tls-key-file") == 0)
        return strdup(key_path);
    return strdup(""); /* tls-key-file-pass, tls-protocols */
}

void server_log(int level, const char *fmt, ...) { (void)level, (void)fmt; }

/* CONFIG SET's hook: this suite reloads by calling http_tls_reload itself;
 * the server suite (test_https.py) reloads through CONFIG SET. */
void config_on_set(const char *prefix, config_apply_fn fn) { (void)prefix, (void)fn; }

/* ---- certificates ---- */

static char dir[64];

static void write_pem(const char *name, const gnutls_datum_t *d)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(d->data, 1, d->size, f), d->size);
    assert_int_equal(fclose(f), 0);
}

/* <cn>.crt, self-signed, and <cn>.key. */
static void make_cert(const char *cn)
{
    gnutls_x509_privkey_t key;
    gnutls_x509_crt_t crt;
    assert_int_equal(gnutls_x509_privkey_init(&key), 0);
    assert_int_equal(gnutls_x509_privkey_generate(
                         key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0),
                     0);
    assert_int_equal(gnutls_x509_crt_init(&crt), 0);
    unsigned char serial[1] = {1};
    time_t now = time(NULL);
    assert_int_equal(gnutls_x509_crt_set_version(crt, 3), 0);
    assert_int_equal(gnutls_x509_crt_set_serial(crt, serial, 1), 0);
    assert_int_equal(gnutls_x509_crt_set_activation_time(crt, now - 60), 0);
    assert_int_equal(gnutls_x509_crt_set_expiration_time(crt, now + 3600), 0);
    assert_int_equal(
        gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn, strlen(cn)), 0);
    assert_int_equal(gnutls_x509_crt_set_key(crt, key), 0);
    assert_int_equal(gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0), 0);
    gnutls_datum_t out;
    char name[64];
    assert_int_equal(gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &out), 0);
    snprintf(name, sizeof(name), "%s.crt", cn);
    write_pem(name, &out);
    gnutls_free(out.data);
    assert_int_equal(gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &out), 0);
    snprintf(name, sizeof(name), "%s.key", cn);
    write_pem(name, &out);
    gnutls_free(out.data);
    gnutls_x509_crt_deinit(crt);
    gnutls_x509_privkey_deinit(key);
}

static void use(const char *cert_cn, const char *key_cn)
{
    snprintf(cert_path, sizeof(cert_path), "%s/%s.crt", dir, cert_cn);
    snprintf(key_path, sizeof(key_path), "%s/%s.key", dir, key_cn);
}

/* ---- a daemon and its clients ---- */

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **state)
{
    (void)cls, (void)url, (void)method, (void)version, (void)upload, (void)upload_size;
    if (*state == NULL) {
        *state = conn; /* headers in: answer once the request is */
        return MHD_YES;
    }
    static const char ok[] = "ok";
    struct MHD_Response *r = MHD_create_response_from_buffer(2, (void *)ok, MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static void notified(void *cls, struct MHD_Connection *conn, void **ctx,
                     enum MHD_ConnectionNotificationCode what)
{
    (void)cls, (void)ctx;
    if (what == MHD_CONNECTION_NOTIFY_CLOSED)
        https_conn_closed(conn);
}

static struct MHD_Daemon *start_daemon(uint16_t *port)
{
    struct MHD_OptionItem opts[3];
    char err[512];
    if (!https_setup(opts, err, sizeof(err)))
        fail_msg("%s", err);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TLS, 0, NULL, NULL, answer, NULL,
        MHD_OPTION_NOTIFY_CONNECTION, notified, NULL, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    assert_non_null(d);
    *port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
    return d;
}

typedef struct client {
    int fd;
    gnutls_session_t s;
    gnutls_certificate_credentials_t cred;
} client;

/* A TLS connection (the certificate is not verified: which one it is is
 * what the suite looks at). */
static void connect_client(client *c, uint16_t port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(c->fd >= 0);
    assert_int_equal(connect(c->fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(gnutls_certificate_allocate_credentials(&c->cred), 0);
    assert_int_equal(gnutls_init(&c->s, GNUTLS_CLIENT), 0);
    assert_int_equal(gnutls_set_default_priority(c->s), 0);
    assert_int_equal(gnutls_credentials_set(c->s, GNUTLS_CRD_CERTIFICATE, c->cred), 0);
    gnutls_transport_set_int(c->s, c->fd);
    gnutls_handshake_set_timeout(c->s, 10000);
    int rc;
    do
        rc = gnutls_handshake(c->s);
    while (rc < 0 && !gnutls_error_is_fatal(rc));
    if (rc < 0)
        fail_msg("handshake: %s", gnutls_strerror(rc));
}

static void close_client(client *c)
{
    gnutls_bye(c->s, GNUTLS_SHUT_WR);
    gnutls_deinit(c->s);
    gnutls_certificate_free_credentials(c->cred);
    close(c->fd);
}

/* The common name of the certificate the server presented. */
static void peer_cn(client *c, char *cn, size_t len)
{
    unsigned n = 0;
    const gnutls_datum_t *certs = gnutls_certificate_get_peers(c->s, &n);
    assert_true(certs && n >= 1);
    gnutls_x509_crt_t crt;
    assert_int_equal(gnutls_x509_crt_init(&crt), 0);
    assert_int_equal(gnutls_x509_crt_import(crt, &certs[0], GNUTLS_X509_FMT_DER), 0);
    assert_int_equal(
        gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn, &len), 0);
    gnutls_x509_crt_deinit(crt);
}

/* One request on the connection, answered 200. */
static void request_ok(client *c)
{
    static const char req[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    assert_int_equal(gnutls_record_send(c->s, req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
    char buf[512];
    size_t got = 0;
    while (got < sizeof(buf) - 1) {
        ssize_t n = gnutls_record_recv(c->s, buf + got, sizeof(buf) - 1 - got);
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
            continue;
        assert_true(n > 0);
        got += (size_t)n;
        buf[got] = '\0';
        if (strstr(buf, "\r\n\r\nok"))
            break;
    }
    buf[got] = '\0';
    if (strncmp(buf, "HTTP/1.1 200", 12) != 0)
        fail_msg("answer: %s", buf);
}

static void assert_cn(client *c, const char *want)
{
    char cn[64];
    peer_cn(c, cn, sizeof(cn));
    assert_string_equal(cn, want);
}

static void test_reload(void **state)
{
    (void)state;
    char err[512];
    /* No HTTPS listener: nothing to do. */
    use("nothing", "nothing");
    assert_true(http_tls_reload(err, sizeof(err)));

    use("first", "first");
    uint16_t port;
    struct MHD_Daemon *d = start_daemon(&port);
    client old, fresh, later;
    connect_client(&old, port);
    assert_cn(&old, "first");
    request_ok(&old);

    /* New files: the next connection gets them; the open one keeps its
     * own and is still answered. */
    use("second", "second");
    if (!http_tls_reload(err, sizeof(err)))
        fail_msg("%s", err);
    connect_client(&fresh, port);
    assert_cn(&fresh, "second");
    request_ok(&old);
    request_ok(&fresh);

    /* A key that is not the certificate's: refused, the second pair stays. */
    use("second", "first");
    assert_false(http_tls_reload(err, sizeof(err)));
    assert_non_null(strstr(err, "is not the key of tls-cert-file"));
    use("second", "missing");
    assert_false(http_tls_reload(err, sizeof(err)));
    assert_non_null(strstr(err, "missing.key: No such file or directory"));
    connect_client(&later, port);
    assert_cn(&later, "second");
    request_ok(&later);

    close_client(&old);
    close_client(&fresh);
    close_client(&later);
    MHD_stop_daemon(d);
    https_free(); /* under ASan: every pair freed, once */
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/bloomery-https-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    make_cert("first");
    make_cert("second");
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_reload)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    const char *names[] = {"first.crt", "first.key", "second.crt", "second.key"};
    for (size_t i = 0; i < 4; i++) {
        char path[128];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
    return rc;
}

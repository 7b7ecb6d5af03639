/* The HTTP listener's TLS (http-tls yes). The certificate chain of
 * tls-cert-file and the key of tls-key-file are read into memory and handed
 * to GnuTLS (libmicrohttpd's TLS library) by the certificate callback of
 * each handshake, not fixed when the listener starts: http_tls_reload can
 * then put new ones in place for the connections that come next, while
 * those already open keep theirs. A handshake takes a reference on the
 * credentials it was given (GnuTLS keeps pointers to them for the
 * session), dropped when libmicrohttpd tells of the connection's close.
 *
 * The callback and the close notification come from libmicrohttpd's
 * polling thread, a reload from any thread: one mutex guards all of it. */
#include <microhttpd.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "http.h"
#include "log.h"

#define CHAIN_MAX 16               /* certificates in tls-cert-file */
#define PEM_FILE_MAX (1024 * 1024) /* a chain of 16 is some 30 KB */

typedef struct https_cred {
    gnutls_pcert_st chain[CHAIN_MAX];
    unsigned n;
    gnutls_privkey_t key;
    int refs; /* 1 while current, plus 1 per connection given it */
} https_cred;

/* Which credentials each connection's handshake took. */
typedef struct hold {
    struct MHD_Connection *conn;
    https_cred *cred;
} hold;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static https_cred *current;
static hold *holds;
static size_t nholds, capholds;

static void cred_free(https_cred *c)
{
    for (unsigned i = 0; i < c->n; i++)
        gnutls_pcert_deinit(&c->chain[i]);
    if (c->key)
        gnutls_privkey_deinit(c->key);
    free(c);
}

/* Under lock. */
static void cred_unref(https_cred *c)
{
    if (c && --c->refs == 0)
        cred_free(c);
}

/* The whole of a regular file (a FIFO at the name would block the start),
 * at most PEM_FILE_MAX bytes. */
static bool read_pem(const char *setting, const char *path, gnutls_datum_t *out, char *err,
                     size_t errlen)
{
    if (path == NULL || path[0] == '\0') {
        snprintf(err, errlen, "%s is not set", setting);
        return false;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s %s: %s", setting, path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return false;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > PEM_FILE_MAX) {
        snprintf(err, errlen, "%s %s: %s", setting, path,
                 S_ISREG(st.st_mode) ? "larger than 1 MB" : "not a regular file");
        close(fd);
        return false;
    }
    unsigned char *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    int e = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            e = errno;
        if (n <= 0)
            break; /* shorter than it was: what is there is read */
        got += (size_t)n;
    }
    close(fd);
    if (buf == NULL || e || got == 0) {
        snprintf(err, errlen, "%s %s: %s", setting, path,
                 buf == NULL ? "out of memory"
                 : e         ? strerror(e)
                             : "empty");
        free(buf);
        return false;
    }
    buf[got] = '\0';
    out->data = buf;
    out->size = (unsigned)got;
    return true;
}

/* A private key's bytes are wiped before they are freed. */
static void datum_free(gnutls_datum_t *d, bool secret)
{
    if (d->data && secret)
        explicit_bzero(d->data, d->size);
    free(d->data);
    d->data = NULL;
}

/* Whether key is the private half of the certificate's public key. */
static bool key_matches(gnutls_privkey_t key, gnutls_pubkey_t cert_pub)
{
    gnutls_pubkey_t pub = NULL;
    gnutls_datum_t a = {0}, b = {0};
    bool same = gnutls_pubkey_init(&pub) == 0 &&
                gnutls_pubkey_import_privkey(pub, key, 0, 0) == 0 &&
                gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, &a) == 0 &&
                gnutls_pubkey_export2(cert_pub, GNUTLS_X509_FMT_DER, &b) == 0 && a.size == b.size &&
                memcmp(a.data, b.data, a.size) == 0;
    gnutls_free(a.data);
    gnutls_free(b.data);
    if (pub)
        gnutls_pubkey_deinit(pub);
    return same;
}

/* The credentials the settings name now, checked; NULL with err. */
static https_cred *cred_load(char *err, size_t errlen)
{
    char *cert_path = config_get_str("tls-cert-file");
    char *key_path = config_get_str("tls-key-file");
    char *pass = config_get_str("tls-key-file-pass");
    gnutls_datum_t cert = {0}, key = {0};
    https_cred *c = calloc(1, sizeof(*c));
    bool ok = c && read_pem("tls-cert-file", cert_path, &cert, err, errlen) &&
              read_pem("tls-key-file", key_path, &key, err, errlen);
    if (c == NULL)
        snprintf(err, errlen, "out of memory");
    if (ok) {
        c->n = CHAIN_MAX;
        int rc = gnutls_pcert_list_import_x509_raw(c->chain, &c->n, &cert, GNUTLS_X509_FMT_PEM,
                                                   GNUTLS_X509_CRT_LIST_IMPORT_FAIL_IF_EXCEED);
        if (rc < 0) {
            c->n = 0;
            ok = false;
            snprintf(err, errlen, "tls-cert-file %s: no PEM certificate read: %s", cert_path,
                     gnutls_strerror(rc));
        }
    }
    if (ok) {
        int rc = gnutls_privkey_init(&c->key);
        if (rc == 0)
            rc = gnutls_privkey_import_x509_raw(c->key, &key, GNUTLS_X509_FMT_PEM,
                                                pass && pass[0] ? pass : NULL, 0);
        if (rc < 0) {
            ok = false;
            snprintf(err, errlen, "tls-key-file %s: no PEM private key read%s: %s", key_path,
                     pass && pass[0] ? " with tls-key-file-pass" : "", gnutls_strerror(rc));
        }
    }
    if (ok && !key_matches(c->key, c->chain[0].pubkey)) {
        ok = false;
        snprintf(err, errlen, "tls-key-file %s is not the key of tls-cert-file %s's certificate",
                 key_path, cert_path);
    }
    datum_free(&cert, false);
    datum_free(&key, true);
    if (pass)
        explicit_bzero(pass, strlen(pass));
    free(pass);
    free(cert_path);
    free(key_path);
    if (!ok && c) {
        cred_free(c);
        c = NULL;
    }
    if (c)
        c->refs = 1;
    return c;
}

/* Under lock: conn's handshake takes c (a second handshake on the same
 * connection gives back what the first took). */
static bool hold_cred(struct MHD_Connection *conn, https_cred *c)
{
    for (size_t i = 0; i < nholds; i++) {
        if (holds[i].conn == conn) {
            cred_unref(holds[i].cred);
            holds[i].cred = c;
            c->refs++;
            return true;
        }
    }
    if (nholds == capholds) {
        size_t cap = capholds ? 2 * capholds : 64;
        hold *h = realloc(holds, cap * sizeof(*h));
        if (h == NULL)
            return false;
        holds = h;
        capholds = cap;
    }
    holds[nholds++] = (hold){conn, c};
    c->refs++;
    return true;
}

/* GnuTLS's certificate callback, in a handshake (libmicrohttpd keeps the
 * connection as the session's pointer). */
static int cert_callback(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn, int nreqs,
                         const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                         gnutls_pcert_st **pcert, unsigned int *pcert_length,
                         gnutls_privkey_t *pkey)
{
    (void)req_ca_rdn, (void)nreqs, (void)pk_algos, (void)pk_algos_length;
    struct MHD_Connection *conn = gnutls_session_get_ptr(session);
    pthread_mutex_lock(&lock);
    https_cred *c = current;
    bool ok = c && conn && hold_cred(conn, c);
    if (ok) {
        *pcert = c->chain;
        *pcert_length = c->n;
        *pkey = c->key;
    }
    pthread_mutex_unlock(&lock);
    return ok ? 0 : -1; /* -1: the handshake fails */
}

void https_conn_closed(struct MHD_Connection *conn)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nholds; i++) {
        if (holds[i].conn == conn) {
            cred_unref(holds[i].cred);
            holds[i] = holds[--nholds];
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}

/* GnuTLS's priority string: its NORMAL set, with only the protocol
 * versions of tls-protocols (Redis's names; "" is TLSv1.2 and TLSv1.3)
 * that are 1.2 or later. */
static bool priorities(char *out, size_t outlen, char *err, size_t errlen)
{
    char *protos = config_get_str("tls-protocols");
    bool v12 = false, v13 = false, ok = true;
    if (protos == NULL || protos[0] == '\0') {
        v12 = v13 = true;
    } else {
        for (char *save = NULL, *w = strtok_r(protos, " ", &save); w;
             w = strtok_r(NULL, " ", &save)) {
            if (strcasecmp(w, "TLSv1.2") == 0) {
                v12 = true;
            } else if (strcasecmp(w, "TLSv1.3") == 0) {
                v13 = true;
            } else if (strcasecmp(w, "TLSv1") == 0 || strcasecmp(w, "TLSv1.1") == 0) {
                server_log(LOG_WARNING,
                           "The HTTP listener speaks TLSv1.2 and TLSv1.3 only, not %s.", w);
            } else {
                snprintf(err, errlen, "tls-protocols: unknown protocol %.32s", w);
                ok = false;
                break;
            }
        }
    }
    free(protos);
    if (ok && !v12 && !v13) {
        snprintf(err, errlen, "tls-protocols names neither TLSv1.2 nor TLSv1.3");
        ok = false;
    }
    if (ok)
        snprintf(out, outlen, "NORMAL:-VERS-ALL%s%s%s", v13 ? ":+VERS-TLS1.3" : "",
                 v12 ? ":+VERS-TLS1.2" : "",
                 atomic_load(&cfg.tls_prefer_server_ciphers) ? ":%SERVER_PRECEDENCE" : "");
    return ok;
}

/* Under lock: c in place of the current credentials. */
static void swap_in(https_cred *c)
{
    https_cred *old = current;
    current = c;
    cred_unref(old); /* freed once the last connection given it closes */
}

/* CONFIG SET of the certificate, key or pass phrase (config_on_set):
 * new handshakes get the new pair; a pair that cannot be read refuses the
 * CONFIG SET, as the RESP listener's context does. */
static bool on_set(const char *const *names, int n, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], "tls-cert-file") == 0 || strcmp(names[i], "tls-key-file") == 0 ||
            strcmp(names[i], "tls-key-file-pass") == 0) {
            char why[384];
            if (http_tls_reload(why, sizeof(why)))
                return true;
            server_log(LOG_WARNING, "Failed to reload the HTTP listener's certificate: %s", why);
            snprintf(err, errlen, "Unable to update TLS configuration. Check server logs.");
            return false;
        }
    return true;
}

static void register_hook(void) { config_on_set("tls-", on_set); }

bool https_setup(struct MHD_OptionItem *opts, char *err, size_t errlen)
{
    static char prio[160]; /* read by libmicrohttpd as it starts */
    char why[384];
    https_cred *c = NULL;
    if (!priorities(prio, sizeof(prio), why, sizeof(why)) ||
        (c = cred_load(why, sizeof(why))) == NULL) {
        snprintf(err, errlen, "Failed to configure TLS for the HTTP listener: %s", why);
        return false;
    }
    pthread_mutex_lock(&lock);
    swap_in(c);
    pthread_mutex_unlock(&lock);
    static pthread_once_t hooked = PTHREAD_ONCE_INIT;
    pthread_once(&hooked, register_hook);
    opts[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, prio};
    opts[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0, (void *)cert_callback};
    opts[2] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    return true;
}

bool http_tls_reload(char *err, size_t errlen)
{
    pthread_mutex_lock(&lock);
    bool active = current != NULL;
    pthread_mutex_unlock(&lock);
    if (!active)
        return true; /* no HTTPS listener: nothing to reload */
    https_cred *c = cred_load(err, errlen);
    if (c == NULL)
        return false;
    pthread_mutex_lock(&lock);
    if (current)
        swap_in(c);
    else
        cred_free(c); /* the listener stopped meanwhile */
    pthread_mutex_unlock(&lock);
    server_log(LOG_NOTICE, "The HTTP listener's certificate and key were read again.");
    return true;
}

void https_free(void)
{
    /* After the listener stopped: every connection has closed. */
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nholds; i++)
        cred_unref(holds[i].cred);
    free(holds);
    holds = NULL;
    nholds = capholds = 0;
    cred_unref(current);
    current = NULL;
    pthread_mutex_unlock(&lock);
}

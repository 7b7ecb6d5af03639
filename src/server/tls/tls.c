/* TLS contexts from the settings; see tls.h.
 *
 * The meanings are Redis 7's (its tls.c and config.c): every file setting
 * "" means unset; tls-protocols lists TLSv1, TLSv1.1, TLSv1.2 and TLSv1.3
 * (none: TLSv1.2 and TLSv1.3); the peer is always asked for a certificate
 * and must present one, except on accepted connections where
 * tls-auth-clients is no (not asked) or optional (checked if sent); a CA
 * is required whenever something is verified; session caching, its size
 * and timeout, server cipher preference and DH parameters apply to the
 * server side. The replica presents tls-client-cert-file/key-file when
 * both are set, otherwise tls-cert-file/key-file.
 */
#include "tls.h"

#include <errno.h>
#include <openssl/decoder.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "log.h"

#define PROTO_TLSv1 (1 << 0)
#define PROTO_TLSv1_1 (1 << 1)
#define PROTO_TLSv1_2 (1 << 2)
#define PROTO_TLSv1_3 (1 << 3)

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static SSL_CTX *server_ctx, *client_ctx; /* client_ctx: NULL when the server's serves */

static void library_init(void) { OPENSSL_init_ssl(OPENSSL_INIT_LOAD_CONFIG, NULL); }

bool tls_wanted(void)
{
    return atomic_load(&cfg.tls_port) != 0 || atomic_load(&cfg.tls_replication) != 0;
}

/* A string setting, NULL when empty (Redis's EMPTY_STRING_IS_NULL). */
static char *setting(const char *name)
{
    char *v = config_get_str(name);
    if (v && v[0] == '\0') {
        free(v);
        v = NULL;
    }
    return v;
}

typedef struct tls_settings {
    char *cert, *key, *key_pass, *client_cert, *client_key, *client_key_pass;
    char *dh_params, *ca_file, *ca_dir, *protocols, *ciphers, *ciphersuites;
} tls_settings;

static void settings_read(tls_settings *s)
{
    s->cert = setting("tls-cert-file");
    s->key = setting("tls-key-file");
    s->key_pass = setting("tls-key-file-pass");
    s->client_cert = setting("tls-client-cert-file");
    s->client_key = setting("tls-client-key-file");
    s->client_key_pass = setting("tls-client-key-file-pass");
    s->dh_params = setting("tls-dh-params-file");
    s->ca_file = setting("tls-ca-cert-file");
    s->ca_dir = setting("tls-ca-cert-dir");
    s->protocols = setting("tls-protocols");
    s->ciphers = setting("tls-ciphers");
    s->ciphersuites = setting("tls-ciphersuites");
}

static void settings_free(tls_settings *s)
{
    char **all[] = {&s->cert,        &s->key,        &s->key_pass,
                    &s->client_cert, &s->client_key, &s->client_key_pass,
                    &s->dh_params,   &s->ca_file,    &s->ca_dir,
                    &s->protocols,   &s->ciphers,    &s->ciphersuites};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        free(*all[i]);
        *all[i] = NULL;
    }
}

/* tls-protocols as a set of PROTO_*, -1 (logged) for a word it can't hold. */
static int parse_protocols(const char *s)
{
    if (s == NULL)
        return PROTO_TLSv1_2 | PROTO_TLSv1_3;
    int set = 0;
    char *copy = strdup(s), *save = NULL;
    if (copy == NULL)
        return -1;
    for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        if (strcasecmp(w, "tlsv1") == 0) {
            set |= PROTO_TLSv1;
        } else if (strcasecmp(w, "tlsv1.1") == 0) {
            set |= PROTO_TLSv1_1;
        } else if (strcasecmp(w, "tlsv1.2") == 0) {
            set |= PROTO_TLSv1_2;
        } else if (strcasecmp(w, "tlsv1.3") == 0) {
            set |= PROTO_TLSv1_3;
        } else {
            server_log(LOG_WARNING, "Invalid tls-protocols specified. Use a combination of "
                                    "'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.");
            set = -1;
            break;
        }
    }
    free(copy);
    return set;
}

/* The key's pass phrase, given to OpenSSL while it reads the key. */
static int pass_cb(char *buf, int size, int rwflag, void *u)
{
    (void)rwflag;
    const char *pass = u;
    if (pass == NULL)
        return -1;
    size_t l = strlen(pass);
    if (l > (size_t)size)
        return -1;
    memcpy(buf, pass, l);
    return (int)l;
}

static void last_error(char *out, size_t outlen)
{
    unsigned long e = ERR_get_error();
    if (e)
        ERR_error_string_n(e, out, outlen);
    else
        snprintf(out, outlen, "unknown error");
    ERR_clear_error();
}

/* What both sides share: protocols, options, verification, the
 * certificate and key, the CAs, the ciphers. */
static SSL_CTX *base_ctx(const tls_settings *s, int protocols, bool client)
{
    const char *cert = client ? s->client_cert : s->cert;
    const char *key = client ? s->client_key : s->key;
    const char *pass = client ? s->client_key_pass : s->key_pass;
    char why[256];
    SSL_CTX *ctx = SSL_CTX_new(TLS_method());
    if (ctx == NULL) {
        last_error(why, sizeof(why));
        server_log(LOG_WARNING, "Failed to create a TLS context: %s", why);
        return NULL;
    }
    uint64_t off = SSL_OP_NO_SSLv2 | SSL_OP_NO_SSLv3 | SSL_OP_NO_COMPRESSION |
                   SSL_OP_DONT_INSERT_EMPTY_FRAGMENTS | SSL_OP_NO_RENEGOTIATION;
    if (!(protocols & PROTO_TLSv1))
        off |= SSL_OP_NO_TLSv1;
    if (!(protocols & PROTO_TLSv1_1))
        off |= SSL_OP_NO_TLSv1_1;
    if (!(protocols & PROTO_TLSv1_2))
        off |= SSL_OP_NO_TLSv1_2;
    if (!(protocols & PROTO_TLSv1_3))
        off |= SSL_OP_NO_TLSv1_3;
    SSL_CTX_set_options(ctx, off);
    /* TLSv1 and TLSv1.1 need security level 0 in OpenSSL 3: asked for, they
     * must work as in Redis built on older libraries. */
    if (protocols & (PROTO_TLSv1 | PROTO_TLSv1_1))
        SSL_CTX_set_security_level(ctx, 0);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    SSL_CTX_set_default_passwd_cb(ctx, pass_cb);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, (void *)pass);
    bool ok = false;
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) <= 0) {
        last_error(why, sizeof(why));
        server_log(LOG_WARNING, "Failed to load certificate: %s: %s", cert, why);
    } else if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) <= 0) {
        last_error(why, sizeof(why));
        server_log(LOG_WARNING, "Failed to load private key: %s: %s", key, why);
    } else if ((s->ca_file || s->ca_dir) &&
               SSL_CTX_load_verify_locations(ctx, s->ca_file, s->ca_dir) <= 0) {
        last_error(why, sizeof(why));
        server_log(LOG_WARNING, "Failed to configure CA certificate(s) file/directory: %s", why);
    } else if (s->ciphers && !SSL_CTX_set_cipher_list(ctx, s->ciphers)) {
        ERR_clear_error();
        server_log(LOG_WARNING, "Failed to configure ciphers: %s", s->ciphers);
    } else if (s->ciphersuites && !SSL_CTX_set_ciphersuites(ctx, s->ciphersuites)) {
        ERR_clear_error();
        server_log(LOG_WARNING, "Failed to configure ciphersuites: %s", s->ciphersuites);
    } else {
        ok = true;
    }
    /* The pass phrase was needed only to read the key: its copy is freed. */
    SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
    if (!ok) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

static bool load_dh_params(SSL_CTX *ctx, const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        server_log(LOG_WARNING, "Failed to load %s: %s", path, strerror(errno));
        return false;
    }
    EVP_PKEY *pkey = NULL;
    OSSL_DECODER_CTX *dctx = OSSL_DECODER_CTX_new_for_pkey(
        &pkey, "PEM", NULL, "DH", OSSL_KEYMGMT_SELECT_DOMAIN_PARAMETERS, NULL, NULL);
    bool ok = dctx && OSSL_DECODER_from_fp(dctx, f);
    OSSL_DECODER_CTX_free(dctx);
    fclose(f);
    if (!ok) {
        ERR_clear_error();
        EVP_PKEY_free(pkey);
        server_log(LOG_WARNING, "%s: failed to read DH params.", path);
        return false;
    }
    if (SSL_CTX_set0_tmp_dh_pkey(ctx, pkey) <= 0) {
        char why[256];
        last_error(why, sizeof(why));
        server_log(LOG_WARNING, "Failed to load DH params file: %s: %s", path, why);
        EVP_PKEY_free(pkey);
        return false;
    }
    return true; /* pkey is the context's now */
}

bool tls_configure(void)
{
    pthread_once(&init_once, library_init);
    tls_settings s = {0};
    settings_read(&s);
    SSL_CTX *ctx = NULL, *cctx = NULL;
    bool ok = false;
    int protocols;
    if (s.cert == NULL) {
        server_log(LOG_WARNING, "No tls-cert-file configured!");
    } else if (s.key == NULL) {
        server_log(LOG_WARNING, "No tls-key-file configured!");
    } else if ((atomic_load(&cfg.tls_auth_clients) != 0 ||
                atomic_load(&cfg.tls_replication) != 0) &&
               s.ca_file == NULL && s.ca_dir == NULL) {
        server_log(LOG_WARNING, "Either tls-ca-cert-file or tls-ca-cert-dir must be specified "
                                "when tls-replication or tls-auth-clients are enabled!");
    } else if ((protocols = parse_protocols(s.protocols)) >= 0 &&
               (ctx = base_ctx(&s, protocols, false)) != NULL) {
        if (atomic_load(&cfg.tls_session_caching)) {
            SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
            SSL_CTX_sess_set_cache_size(ctx, atomic_load(&cfg.tls_session_cache_size));
            SSL_CTX_set_timeout(ctx, (long)atomic_load(&cfg.tls_session_cache_timeout));
            SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"bloomery", 8);
        } else {
            SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        }
        SSL_CTX_set_options(ctx, SSL_OP_SINGLE_DH_USE);
        if (atomic_load(&cfg.tls_prefer_server_ciphers))
            SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
        if (s.dh_params)
            ok = load_dh_params(ctx, s.dh_params);
        else
            ok = SSL_CTX_set_dh_auto(ctx, 1) == 1;
        if (ok && s.client_cert && s.client_key) {
            cctx = base_ctx(&s, protocols, true);
            ok = cctx != NULL;
        }
    }
    settings_free(&s);
    if (!ok) {
        SSL_CTX_free(ctx);
        SSL_CTX_free(cctx);
        return false;
    }
    pthread_mutex_lock(&ctx_lock);
    SSL_CTX *old = server_ctx, *oldc = client_ctx;
    server_ctx = ctx;
    client_ctx = cctx;
    pthread_mutex_unlock(&ctx_lock);
    /* Sessions made from the old contexts hold their own references. */
    SSL_CTX_free(old);
    SSL_CTX_free(oldc);
    return true;
}

/* CONFIG SET of tls-* settings (config_on_set): the contexts are built
 * again when TLS is in use, as Redis's applyTlsCfg. tls-port cannot change
 * while the server runs and tls-auth-clients is read by each new
 * connection, so neither needs a rebuild. */
static bool on_set(const char *const *names, int n, char *err, size_t errlen)
{
    bool rebuild = false;
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], "tls-auth-clients") != 0 && strcmp(names[i], "tls-port") != 0)
            rebuild = true;
    if (!rebuild || !tls_wanted() || tls_configure())
        return true;
    snprintf(err, errlen, "Unable to update TLS configuration. Check server logs.");
    return false;
}

void tls_setup(void)
{
    pthread_once(&init_once, library_init);
    config_on_set("tls-", on_set);
}

void tls_cleanup(void)
{
    pthread_mutex_lock(&ctx_lock);
    SSL_CTX_free(server_ctx);
    SSL_CTX_free(client_ctx);
    server_ctx = client_ctx = NULL;
    pthread_mutex_unlock(&ctx_lock);
}

static SSL *new_ssl(bool client)
{
    pthread_mutex_lock(&ctx_lock);
    SSL_CTX *ctx = client && client_ctx ? client_ctx : server_ctx;
    SSL *ssl = ctx ? SSL_new(ctx) : NULL;
    pthread_mutex_unlock(&ctx_lock);
    return ssl;
}

SSL *tls_accept_ssl(void)
{
    SSL *ssl = new_ssl(false);
    if (ssl == NULL)
        return NULL;
    BIO *rbio = BIO_new(BIO_s_mem()), *wbio = BIO_new(BIO_s_mem());
    if (rbio == NULL || wbio == NULL) {
        BIO_free(rbio);
        BIO_free(wbio);
        SSL_free(ssl);
        return NULL;
    }
    /* An empty input BIO asks for more rather than reporting its end. */
    BIO_set_mem_eof_return(rbio, -1);
    SSL_set_bio(ssl, rbio, wbio);
    long long auth = atomic_load(&cfg.tls_auth_clients);
    if (auth == 0)
        SSL_set_verify(ssl, SSL_VERIFY_NONE, NULL);
    else if (auth == 2)
        SSL_set_verify(ssl, SSL_VERIFY_PEER, NULL);
    SSL_set_accept_state(ssl);
    return ssl;
}

SSL *tls_connect_ssl(void)
{
    SSL *ssl = new_ssl(true);
    if (ssl)
        SSL_set_connect_state(ssl);
    return ssl;
}

void tls_error_string(SSL *ssl, int ret, char *out, size_t outlen)
{
    int e = SSL_get_error(ssl, ret);
    long vr = SSL_get_verify_result(ssl);
    unsigned long q = ERR_peek_error();
    if (vr != X509_V_OK)
        snprintf(out, outlen, "certificate verify failed: %s", X509_verify_cert_error_string(vr));
    else if (q)
        ERR_error_string_n(q, out, outlen);
    else if (e == SSL_ERROR_SYSCALL)
        snprintf(out, outlen, "%s", errno ? strerror(errno) : "connection closed");
    else if (e == SSL_ERROR_ZERO_RETURN)
        snprintf(out, outlen, "connection closed");
    else
        snprintf(out, outlen, "TLS error %d", e);
    ERR_clear_error();
}

/* TLS contexts from the tls-* settings (tls.c): the one place OpenSSL is
 * initialized and an SSL_CTX is built, for the connections the server
 * accepts and for the replica's link to its master alike.
 *
 * The contexts are replaced whole when the settings change (CONFIG SET of a
 * tls-* setting rebuilds them, as Redis's applyTlsCfg does); an SSL made
 * from one holds its own reference, so a connection keeps the context it
 * started with and only new connections see the new one.
 */
#ifndef BLOOMERYD_TLS_H
#define BLOOMERYD_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

/* Whether the settings ask for TLS anywhere (tls-port or tls-replication),
 * so a context must exist. */
bool tls_wanted(void);

/* Build the contexts from the current settings and put them in place; on
 * failure the reasons are logged and the old contexts stay. */
bool tls_configure(void);

/* Rebuild the contexts after CONFIG SET changes a tls-* setting: hooked
 * into config.c by tls_setup(). */
void tls_setup(void);

/* Free the contexts (at exit). */
void tls_cleanup(void);

/* A new server-side session with memory BIOs, verifying the client as
 * tls-auth-clients says; NULL when there is no context. */
SSL *tls_accept_ssl(void);

/* A new client-side session for the replica's link (the client context
 * when tls-client-cert-file and tls-client-key-file are set, else the
 * server's), verifying the master; NULL when there is no context. */
SSL *tls_connect_ssl(void);

/* The reason of the last OpenSSL failure, for a log line: the error
 * queue's first entry, or the certificate verification result. */
void tls_error_string(SSL *ssl, int ret, char *out, size_t outlen);

#endif

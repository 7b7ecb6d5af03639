/* A minimal RESP2 client for load and check: one TCP connection, in TLS
 * when asked (rtls.c), commands encoded into an output buffer, replies
 * parsed incrementally from an input buffer, so a caller can keep many
 * commands in flight (pipelining) with poll(2) and never block on a full
 * socket in either direction. */
#ifndef BLOOMERY_CLI_RCLIENT_H
#define BLOOMERY_CLI_RCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rc_buf {
    char *p;
    size_t len, cap, pos; /* pos: consumed bytes (output written or input parsed) */
} rc_buf;

/* TLS settings, redis-cli's options of the same names. */
typedef struct rc_tls {
    bool on;               /* --tls */
    const char *cacert;    /* --cacert FILE: CAs that sign the server's certificate */
    const char *cacertdir; /* --cacertdir DIR (none of the two: the system's CAs) */
    const char *cert;      /* --cert FILE: the client's certificate */
    const char *key;       /* --key FILE: its private key */
    const char *sni;       /* --sni NAME: the name asked for and checked (default: host) */
    bool insecure;         /* --insecure: no check of the server's certificate */
} rc_tls;

struct rc_conn;
/* How bytes move over a TLS session (rtls.c): > 0 bytes, 0 would block, -1
 * error (message in err), -2 closed by the server. */
typedef struct rc_io {
    long (*read)(struct rc_conn *c, void *p, size_t n, char *err, size_t errlen);
    long (*write)(struct rc_conn *c, const void *p, size_t n, char *err, size_t errlen);
    bool (*pending)(struct rc_conn *c); /* bytes decrypted, waiting to be read */
    void (*close)(struct rc_conn *c);
} rc_io;

typedef struct rc_conn {
    int fd;
    rc_buf in, out;
    const rc_io *tls; /* NULL: plain TCP */
    void *ssl;        /* SSL *, SSL_CTX *: rtls.c's */
    void *ssl_ctx;
    bool answered; /* any byte came from the server */
} rc_conn;

/* Connects to host:port (name or address); 0, or -1 with a message in err. */
int rc_connect(rc_conn *c, const char *host, const char *port, char *err, size_t errlen);
void rc_close(rc_conn *c);

/* rtls.c: TLS over a connection rc_connect made, before any command: the
 * handshake, the server's certificate checked against the CAs and the
 * name; then rc_pump moves bytes through c->tls. 0, or -1 with a message
 * (a file of its own, so the parser's users need no OpenSSL). */
int rc_tls_start(rc_conn *c, const char *host, const char *port, const rc_tls *tls, char *err,
                 size_t errlen);

/* Appends "*n\r\n" then n arguments with rc_arg. -1 when out of memory. */
int rc_begin(rc_conn *c, size_t nargs);
int rc_arg(rc_conn *c, const void *p, size_t len);

/* One parsed reply. For an array, the integer elements go to ints[] (an
 * error element is counted in nerr and its text kept; other element types
 * count as -1). */
typedef struct rc_reply {
    char type;         /* '+', '-', ':', '$', '*', or a RESP3 type byte */
    long long integer; /* ':' */
    const char *str;   /* '+', '-', '$': points into the input buffer */
    size_t len;
    size_t nelem;    /* '*': element count (-1 as SIZE_MAX for a null array) */
    long long *ints; /* caller's array for the elements, may be NULL */
    size_t ints_cap;
    size_t nerr;     /* error elements */
    const char *err; /* first error text (the reply's, or an element's) */
    size_t errlen;
} rc_reply;

/* Parses one reply at buf[0..len): 1 done (*used bytes), 0 incomplete,
 * -1 protocol error. */
int rc_parse(const char *buf, size_t len, size_t *used, rc_reply *r);

/* Pumps the socket: writes pending output, reads available input, waiting at
 * most timeout_ms for either. 0 ok, -1 error or closed (message in err). */
int rc_pump(rc_conn *c, int timeout_ms, char *err, size_t errlen);

#endif

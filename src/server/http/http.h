/* bloomeryd's HTTP listener (docs/CONSOLE.md): Prometheus metrics and the
 * management console, off unless http-port is set. A layer above net/: it
 * reads the workers' statistics and runs commands through the command table.
 *
 * Files, one concept each:
 *   http.c     the listener (libmicrohttpd's thread), the checks made on
 *              a request's headers, routes, pages built off that thread
 *   access.c   who a request is (the ACL users) and what it may do
 *   conns.c    the connections held: deadlines, eviction, per-peer limit
 *   https.c    TLS (http-tls): the certificate and key, reloadable
 *   metrics.c  /metrics in Prometheus's text format
 *   filters.c  the filters of the keyspace and their statistics, bounded
 *   api.c      the console's JSON API (docs/CONSOLE.md)
 *   command.c  a command run through a worker, as a client's would be
 *   respread.c a RESP2 reply read into JSON (fuzzed)
 *   assets.c   the console's files (generated from console/ at build time)
 *   history.c  each filter's fill and FPR over the last hour, sampled
 *
 * Shared with `bloomery console`, in src/web/: guard.c (the Host allow-list
 * and the loopback test), api_args.c (form fields into BF.RESERVE's
 * arguments, the sizing calculator), textbuf.c (the text buffer the pages
 * are built in), assets.h.
 */
#ifndef BLOOMERYD_HTTP_H
#define BLOOMERYD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "assets.h"
#include "keyspace.h"
#include "textbuf.h"

/* ---- conns.c ---- */
#define HTTP_MAX_CONNECTIONS 128  /* held before the oldest unfinished goes */
#define HTTP_MAX_PER_IP 16        /* from one peer off the loopback interface */
#define HTTP_HEADER_DEADLINE_S 10 /* from connecting (or the last answer) */
#define HTTP_BODY_DEADLINE_S 30   /* from the headers */
struct MHD_Connection;
struct sockaddr;
/* The accept policy: false for a peer that already holds its share. */
bool conns_may_accept(const struct sockaddr *sa);
/* libmicrohttpd's connection notifications; ctx is its socket context. */
void conns_opened(struct MHD_Connection *conn, void **ctx);
void conns_closed(void **ctx);
/* A request's steps: headers in, body in (being answered), answered. */
void conns_headers_in(struct MHD_Connection *conn);
void conns_request_in(struct MHD_Connection *conn);
void conns_request_done(struct MHD_Connection *conn);

/* ---- access.c: who a request is, what it may do ---- */
struct acl_user;
typedef struct http_who {
    struct acl_user *user; /* a reference */
    /* The password given, so that the console's commands authenticate as
     * the user (command.c); NULL when none was given (the default user
     * needing none). */
    char *pass;
    size_t plen;
} http_who;
/* The request's credentials checked against the ACL users: HTTP Basic
 * user:password (no name or "default": the default user), or a Bearer
 * token as the default user's password; none: the default user when it
 * needs no password. false: refused (401), a failure logged in ACL LOG
 * as a failed AUTH is, its client-info naming the HTTP peer. */
bool access_login(struct MHD_Connection *conn, http_who *who);
void access_release(http_who *who);
/* The ACL check of the command argv (its keys included) for who's user. */
bool access_may(const http_who *who, int argc, const char *const *argv, const size_t *lens);
/* The check of a command alone, whatever its keys would be. */
bool access_may_cmd(const http_who *who, const char *name);
/* true when who may not run the command name: the refusal logged in ACL
 * LOG and its NOPERM text, as the RESP port's, in msg. */
bool access_refuse(struct MHD_Connection *conn, const http_who *who, const char *name, char *msg,
                   size_t msglen);
/* The command a filter's statistics stand for: BF.INFO, CF.INFO. */
struct value_type;
const char *access_info_command(const struct value_type *t);
/* Whether who may read a filter's statistics: that command on the key. */
bool access_may_read(const http_who *who, const struct value_type *t, const char *key, size_t klen);
/* The same for a key by name, its type looked up. */
bool access_may_read_key(const http_who *who, const char *key, size_t klen);

/* Start listening on http-bind:http-port when http-port is not 0 (HTTPS
 * only with http-tls yes); false with err when the address cannot be used
 * or the certificate and key cannot be read. */
bool http_start(char *err, size_t errlen);
void http_stop(void);
/* Descriptors the listener may hold when http-port is set (0 when not). */
int http_descriptors(void);

/* ---- https.c: the listener's TLS ---- */
struct MHD_OptionItem;
/* Read tls-cert-file and tls-key-file(-pass), derive the protocols from
 * tls-protocols, and fill opts (3 items) with libmicrohttpd's options for
 * them; false with err ("Failed to configure TLS for the HTTP listener:
 * <reason>"). */
bool https_setup(struct MHD_OptionItem *opts, char *err, size_t errlen);
/* Read tls-cert-file and tls-key-file again: connections from now on get
 * the new certificate and key, those open keep theirs. false with the
 * reason in err (the old ones stay in use). True, doing nothing, when the
 * listener does not speak HTTPS. */
bool http_tls_reload(char *err, size_t errlen);
/* A connection closed: the credentials its handshake took are released. */
void https_conn_closed(struct MHD_Connection *conn);
/* Once the listener has stopped. */
void https_free(void);

/* textbuf: src/web/textbuf.h */

/* ---- respread.c ---- */
#define RESP_INCOMPLETE (-1)
#define RESP_MALFORMED (-2)
/* The RESP2 reply at p[0..n) appended to out as JSON; returns the bytes it
 * took, RESP_INCOMPLETE (out unchanged) or RESP_MALFORMED. */
long resp_reply_json(const char *p, size_t n, textbuf *out);

/* ---- command.c ---- */
/* Run one command as a client of a worker does (dispatch, authentication,
 * the ACL check, the log's reservation, replies held until durable), as
 * who's user, its reply appended to out as JSON (resp_reply_json). false
 * with err when it could not be run (no reply: the server is stopping, a
 * timeout). */
bool http_command(const http_who *who, int argc, const char *const *argv, const size_t *lens,
                  textbuf *out, char *err, size_t errlen);

/* ---- api.c: bodies of the JSON API's answers ---- */
/* How an answer ends: the HTTP status it is sent with. */
enum { API_OK = 200, API_BAD = 400, API_DENIED = 403 };
struct api_filter_form;
/* GET /api/filters' query; a parameter left out is NULL. */
typedef struct api_filters_args {
    const char *match; /* a glob on the names, mlen bytes */
    size_t mlen;
    const char *sort, *order, *page, *per_page;
} api_filters_args;
/* A page of the filters who may read: API_OK, or API_BAD for a query
 * that cannot be answered. */
int api_filters(const http_who *who, const api_filters_args *a, textbuf *b);
void api_status(const http_who *who, textbuf *b);
bool api_calc(const char *capacity, const char *error_rate, const char *layout, const char *window,
              const char *slices, textbuf *b);
/* API_OK, API_BAD, or API_DENIED (the user's NOPERM error). */
int api_create(const http_who *who, const struct api_filter_form *f, textbuf *b);
int api_delete(const http_who *who, const char *name, size_t len, textbuf *b);
int api_expire(const http_who *who, const char *name, size_t len, const char *seconds, textbuf *b);
int api_persist(const http_who *who, const char *name, size_t len, textbuf *b);
/* BF.CONFIG name READONLY value (yes or no). */
int api_readonly(const http_who *who, const char *name, size_t len, const char *value, textbuf *b);
/* The items (one a line) checked (BF.MEXISTS, CF.MEXISTS) or added
 * (BF.INSERT / CF.INSERT name NOCREATE ITEMS ...): {"reply": [0|1, ...]}. */
int api_items(const http_who *who, bool add, const char *name, size_t len, const char *items,
              size_t ilen, textbuf *b);

/* ---- history.c ---- */
#define HISTORY_MAX 240 /* samples kept per filter */
/* The sampling thread, started and stopped with the listener. */
bool history_start(void);
void history_stop(void);
/* {"interval_s":N,"now_ms":T,"samples":[[t_ms,fill,fpr|null],...]}: the
 * filter's samples, oldest first (times on the server's clock); none for a
 * filter not (yet) sampled. */
void api_history(const char *name, size_t len, textbuf *b);

/* ---- assets.c (generated): the console's files (src/web/assets.h) ---- */

/* ---- filters.c ---- */
#define FILTERS_MAX_TYPES 32
typedef struct filter_row {
    char *key;
    size_t klen;
    kv_obj *obj; /* retained */
    const value_type *type;
    int64_t expire_ms;
    value_stats stats;
    double fill;   /* items / capacity */
    double ttl_s;  /* -1: no expiry */
    bool readonly; /* BF.CONFIG key READONLY yes */
    bool fpr_done; /* stats.fpr read (filters_fpr) */
} filter_row;
typedef struct filter_list {
    filter_row *rows;
    size_t n, cap, limit;
    uint64_t by_type[FILTERS_MAX_TYPES]; /* keys of each type_at(i), all of them */
    bool truncated;                      /* filters past limit were left out */
    bool full;         /* limit rows kept: a key past rows[limit - 1] is left out */
    bool failed;       /* out of memory: rows are missing */
    const char *match; /* a glob on the names; NULL: all */
    size_t mlen;
} filter_list;
/* At most limit filters, in key order, with their statistics. */
void filters_collect(filter_list *fl, size_t limit);
/* The same, only the names match matches (a glob, NULL: all), and with
 * the FPR estimate (which reads a filter's bits) only when fpr is true. */
void filters_find(filter_list *fl, size_t limit, const char *match, size_t mlen, bool fpr);
/* A row's FPR estimate, when not read yet. */
void filters_fpr(filter_row *r);
void filters_free(filter_list *fl);

/* The whole /metrics page (malloc'd text in *out), the per-key series
 * of the keys who may read (SCAN, and access_may_read); false when out
 * of memory. */
bool metrics_render(const http_who *who, textbuf *out);

#endif

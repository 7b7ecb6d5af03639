/* The HTTP listener: libmicrohttpd parses the requests, their query
 * strings, form bodies and Basic credentials, one thread per connection;
 * this file checks the password and routes to the pages. */
#include <microhttpd.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "api_args.h"
#include "config.h"
#include "http.h"
#include "log.h"

#define HTTP_MAX_CONNECTIONS 64
#define HTTP_TIMEOUT_S 30

static struct MHD_Daemon *daemon_;

static enum MHD_Result send_text(struct MHD_Connection *conn, unsigned status, const char *type,
                                 char *body, size_t len)
{
    /* MHD frees body once sent. */
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, body, body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (r == NULL) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_static(struct MHD_Connection *conn, unsigned status, const char *msg)
{
    char *p = strdup(msg);
    return send_text(conn, status, "text/plain; charset=utf-8", p, p ? strlen(p) : 0);
}

/* With requirepass set, a request carries it as the password of HTTP
 * Basic credentials (any user name) or as a Bearer token. */
static bool authorized(struct MHD_Connection *conn)
{
    if (!config_requirepass_set())
        return true;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (h && strncmp(h, "Bearer ", 7) == 0)
        return config_check_password(h + 7, strlen(h + 7));
    char *pass = NULL;
    char *user = MHD_basic_auth_get_username_password(conn, &pass);
    bool ok = pass && config_check_password(pass, strlen(pass));
    MHD_free(user);
    MHD_free(pass);
    return ok;
}

static enum MHD_Result deny(struct MHD_Connection *conn)
{
    static const char msg[] = "authentication required\n";
    struct MHD_Response *r =
        MHD_create_response_from_buffer(sizeof(msg) - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
    if (r == NULL)
        return MHD_NO;
    enum MHD_Result ret = MHD_queue_basic_auth_fail_response(conn, "bloomery", r);
    MHD_destroy_response(r);
    return ret;
}

/* A form posted to the API: the fields it may have, each bounded. */
enum { F_NAME, F_CAPACITY, F_ERROR_RATE, F_EXPIRY, F_LAYOUT, F_WINDOW, F_SLICES, F_SECONDS, NF };
static const char *const field_names[NF] = {"name",   "capacity", "error_rate", "expiry",
                                            "layout", "window",   "slices",     "seconds"};
#define FIELD_MAX 1024

typedef struct req_state {
    struct MHD_PostProcessor *pp;
    char field[NF][FIELD_MAX + 1];
    size_t flen[NF];
    bool too_long;
} req_state;

static enum MHD_Result on_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *filename, const char *ctype, const char *enc,
                                const char *data, uint64_t off, size_t size)
{
    (void)kind, (void)filename, (void)ctype, (void)enc, (void)off;
    req_state *st = cls;
    for (int i = 0; i < NF; i++) {
        if (strcmp(key, field_names[i]) != 0)
            continue;
        /* A long value arrives in pieces, appended in order. */
        if (size > FIELD_MAX - st->flen[i]) {
            st->too_long = true;
            return MHD_NO;
        }
        memcpy(st->field[i] + st->flen[i], data, size);
        st->flen[i] += size;
        st->field[i][st->flen[i]] = '\0';
    }
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **state,
                         enum MHD_RequestTerminationCode why)
{
    (void)cls, (void)conn, (void)why;
    req_state *st = *state;
    if (st == NULL)
        return;
    if (st->pp)
        MHD_destroy_post_processor(st->pp);
    free(st);
    *state = NULL;
}

static enum MHD_Result send_json(struct MHD_Connection *conn, bool ok, textbuf *b)
{
    if (b->failed) {
        tb_free(b);
        return send_static(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
    }
    return send_text(conn, ok ? MHD_HTTP_OK : MHD_HTTP_BAD_REQUEST, "application/json", b->p,
                     b->len);
}

static const char *query(struct MHD_Connection *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
}

/* The name as sent, NULs included (a key may hold any bytes). */
static void history_get(struct MHD_Connection *conn, textbuf *b)
{
    const char *name = NULL;
    size_t len = 0;
    if (MHD_lookup_connection_value_n(conn, MHD_GET_ARGUMENT_KIND, "name", 4, &name, &len) !=
        MHD_YES)
        name = NULL;
    api_history(name, len, b);
}

static enum MHD_Result api_get(struct MHD_Connection *conn, const char *url)
{
    textbuf b = {0};
    bool ok = true;
    if (strcmp(url, "/api/filters") == 0)
        api_filters(&b);
    else if (strcmp(url, "/api/status") == 0)
        api_status(&b);
    else if (strcmp(url, "/api/history") == 0)
        history_get(conn, &b);
    else if (strcmp(url, "/api/calc") == 0)
        ok = api_calc(query(conn, "capacity"), query(conn, "error_rate"), query(conn, "layout"),
                      query(conn, "window"), query(conn, "slices"), &b);
    else
        return send_static(conn, MHD_HTTP_NOT_FOUND, "not found\n");
    return send_json(conn, ok, &b);
}

static enum MHD_Result api_post(struct MHD_Connection *conn, const char *url, req_state *st)
{
    if (st->too_long)
        return send_static(conn, MHD_HTTP_CONTENT_TOO_LARGE, "field too long\n");
    textbuf b = {0};
    bool ok;
    const char *name = st->field[F_NAME];
    size_t nlen = st->flen[F_NAME];
    if (strcmp(url, "/api/filters") == 0) {
        api_filter_form f = {name,
                             nlen,
                             st->field[F_CAPACITY],
                             st->field[F_ERROR_RATE],
                             st->field[F_EXPIRY],
                             st->field[F_LAYOUT],
                             st->field[F_WINDOW],
                             st->field[F_SLICES]};
        ok = api_create(&f, &b);
    } else if (strcmp(url, "/api/filters/delete") == 0) {
        ok = api_delete(name, nlen, &b);
    } else if (strcmp(url, "/api/filters/expire") == 0) {
        ok = api_expire(name, nlen, st->field[F_SECONDS], &b);
    } else {
        return send_static(conn, MHD_HTTP_NOT_FOUND, "not found\n");
    }
    return send_json(conn, ok, &b);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **state)
{
    (void)cls;
    (void)version;
    bool get =
        strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    bool post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
    req_state *st = *state;
    if (st == NULL) {
        /* Headers only so far: answer once the request is complete. */
        st = calloc(1, sizeof(*st));
        if (st == NULL)
            return MHD_NO;
        *state = st;
        /* Forms only (urlencoded or multipart); any other body is
         * refused below. */
        if (post && strncmp(url, "/api/", 5) == 0)
            st->pp = MHD_create_post_processor(conn, 4096, on_field, st);
        return MHD_YES;
    }
    if (*upload_size) {
        if (st->pp && !st->too_long)
            MHD_post_process(st->pp, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (!authorized(conn))
        return deny(conn);
    if (strncmp(url, "/api/", 5) == 0) {
        if (get)
            return api_get(conn, url);
        if (!post)
            return send_static(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
        /* A header a page of another site cannot send without asking
         * (CORS preflight, never granted): a browser holding the password
         * cannot be made to post by another page. */
        if (MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Bloomery-Console") == NULL)
            return send_static(conn, MHD_HTTP_FORBIDDEN, "X-Bloomery-Console header required\n");
        if (st->pp == NULL)
            return send_static(conn, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "a form body is required\n");
        return api_post(conn, url, st);
    }
    if (strcmp(url, "/metrics") == 0) {
        if (!get)
            return send_static(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
        textbuf b = {0};
        if (!metrics_render(&b)) {
            tb_free(&b);
            return send_static(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
        }
        return send_text(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", b.p, b.len);
    }
    const http_asset *a = http_asset_find(url);
    if (a == NULL)
        return send_static(conn, MHD_HTTP_NOT_FOUND, "not found\n");
    if (!get)
        return send_static(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    struct MHD_Response *r =
        MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", a->type);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; frame-ancestors 'none'");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static void on_mhd_error(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[256];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    server_log(LOG_VERBOSE, "HTTP: %s", msg);
}

bool http_start(char *err, size_t errlen)
{
    long long port = atomic_load(&cfg.http_port);
    if (port == 0)
        return true;
    char *bind = config_get_str("http-bind");
    char portstr[16];
    snprintf(portstr, sizeof(portstr), "%lld", port);
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(bind && bind[0] ? bind : NULL, portstr, &hints, &ai);
    if (rc != 0) {
        snprintf(err, errlen, "http-bind %s: %s", bind ? bind : "", gai_strerror(rc));
        free(bind);
        return false;
    }
    /* A thread per connection: a console request waits for its command
     * (and the log, under appendfsync always) without holding up a scrape. */
    unsigned flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    daemon_ = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)HTTP_TIMEOUT_S, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_error, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
    if (daemon_ == NULL) {
        snprintf(err, errlen, "cannot listen for HTTP on %s:%lld", bind ? bind : "", port);
        freeaddrinfo(ai);
        free(bind);
        return false;
    }
    server_log(LOG_NOTICE, "HTTP (metrics, console) on %s:%lld", bind ? bind : "", port);
    if (!history_start())
        server_log(LOG_WARNING, "The console's fill and FPR history is off: no thread for it.");
    const struct sockaddr *sa = ai->ai_addr;
    bool loopback = (sa->sa_family == AF_INET &&
                     (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127) ||
                    (sa->sa_family == AF_INET6 &&
                     IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr));
    if (!loopback && !config_requirepass_set())
        server_log(LOG_WARNING, "The HTTP listener is open to other hosts and no requirepass is "
                                "set: anyone who reaches it can create and delete filters.");
    freeaddrinfo(ai);
    free(bind);
    return true;
}

void http_stop(void)
{
    history_stop();
    if (daemon_)
        MHD_stop_daemon(daemon_);
    daemon_ = NULL;
}

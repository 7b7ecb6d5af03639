/* The HTTP listener: libmicrohttpd parses the requests, their query
 * strings, form bodies and Basic credentials on its one polling thread;
 * this file decides from a request's headers alone whether to answer it
 * (the peer under protected mode, the Host header, the password, the
 * body's size: all before any of the body is read), and routes it. The
 * pages are built on a thread of their own while the connection is
 * suspended, so a scrape or a command waiting for the log never holds up
 * the polling thread, and a socket held open costs no thread. */
#include <microhttpd.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "acl.h"
#include "api_args.h"
#include "config.h"
#include "guard.h"
#include "http.h"
#include "log.h"
#include "util.h"

#define HTTP_TIMEOUT_S 30   /* idle: nothing sent or received */
#define HTTP_BODY_MAX 65536 /* a form of the API is at most a few KB */
#define HTTP_MAX_JOBS 16    /* pages being built at once; more: 503 */

static struct MHD_Daemon *daemon_;
static char *bind_; /* http-bind, fixed while the listener runs */

static pthread_mutex_t jobs_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t jobs_done = PTHREAD_COND_INITIALIZER;
static int jobs;
static bool stopping;

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

/* A form posted to the API, or a GET's query: the fields it may have, each
 * bounded. */
enum {
    F_NAME,
    F_CAPACITY,
    F_ERROR_RATE,
    F_EXPIRY,
    F_LAYOUT,
    F_WINDOW,
    F_SLICES,
    F_SECONDS,
    F_READONLY,
    F_SORT, /* GET /api/filters' query */
    F_ORDER,
    F_PAGE,
    F_PER_PAGE,
    NF
};
static const char *const field_names[NF] = {
    "name",    "capacity", "error_rate", "expiry", "layout", "window",  "slices",
    "seconds", "readonly", "sort",       "order",  "page",   "per_page"};
#define FIELD_MAX 1024

typedef enum {
    R_METRICS,
    R_FILTERS,
    R_STATUS,
    R_HISTORY,
    R_CALC,
    R_CREATE,
    R_DELETE,
    R_EXPIRE,
    R_PERSIST,
    R_READONLY,
    R_CHECK,
    R_ADD
} route;

typedef struct req_state {
    struct MHD_PostProcessor *pp;
    char field[NF][FIELD_MAX + 1];
    size_t flen[NF];
    bool given[NF]; /* in a GET's query (api_calc tells "" from none) */
    bool too_long;
    uint64_t body_len;
    /* GET /api/history's name, /api/filters' match: any bytes, any length
     * the URL allows. */
    char *hname;
    size_t hname_len;
    /* The item forms' items, one a line: up to the body's size. */
    char *items;
    size_t items_len;
    /* The page, built on a job's thread while the connection is suspended;
     * read here once it is resumed. */
    struct MHD_Connection *conn;
    route route;
    http_who who; /* the user the request was authenticated as */
    bool job_started;
    _Atomic bool job_done;
    unsigned status;
    const char *type;
    textbuf body;
} req_state;

static enum MHD_Result on_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *filename, const char *ctype, const char *enc,
                                const char *data, uint64_t off, size_t size)
{
    (void)kind, (void)filename, (void)ctype, (void)enc, (void)off;
    req_state *st = cls;
    if (strcmp(key, "items") == 0) {
        /* Bounded by the body's size (HTTP_BODY_MAX). */
        char *p = realloc(st->items, st->items_len + size + 1);
        if (p == NULL) {
            st->too_long = true;
            return MHD_NO;
        }
        memcpy(p + st->items_len, data, size);
        st->items = p;
        st->items_len += size;
        p[st->items_len] = '\0';
        return MHD_YES;
    }
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
    (void)cls, (void)why;
    conns_request_done(conn);
    req_state *st = *state;
    if (st == NULL)
        return;
    if (st->pp)
        MHD_destroy_post_processor(st->pp);
    tb_free(&st->body);
    free(st->hname);
    free(st->items);
    access_release(&st->who);
    free(st);
    *state = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **ctx,
                          enum MHD_ConnectionNotificationCode what)
{
    (void)cls;
    if (what == MHD_CONNECTION_NOTIFY_STARTED) {
        conns_opened(conn, ctx);
    } else {
        conns_closed(ctx);
        https_conn_closed(conn);
    }
}

static enum MHD_Result may_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
    (void)cls, (void)len;
    return conns_may_accept(addr) ? MHD_YES : MHD_NO;
}

/* ---- the checks made once the headers are in ---- */

typedef struct host_count {
    const char *value;
    size_t len;
    int n;
} host_count;

static enum MHD_Result count_host(void *cls, enum MHD_ValueKind kind, const char *key,
                                  size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    host_count *h = cls;
    if (key_size == 4 && strncasecmp(key, "Host", 4) == 0) {
        h->value = value;
        h->len = value ? value_size : 0;
        h->n++;
    }
    return MHD_YES;
}

/* An HTTP/1.0 request without a Host header is answered: a browser always
 * sends one, so its absence is no rebinding. HTTP/1.1 requires one (RFC
 * 9112, 400 without). Two are refused: which one would a proxy have read? */
static bool host_ok(struct MHD_Connection *conn, const char *version, bool *bad)
{
    host_count h = {0};
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, count_host, &h);
    *bad = h.n > 1;
    if (h.n == 0) {
        *bad = strcmp(version, MHD_HTTP_VERSION_1_0) != 0;
        return !*bad;
    }
    if (h.n > 1 || h.value == NULL)
        return false;
    char *allowed = config_get_str("http-allowed-hosts");
    bool ok = http_host_allowed(h.value, h.len, bind_, allowed);
    free(allowed);
    return ok;
}

/* Protected mode as the RESP port has it: while the default user needs no
 * password, only the loopback interface is answered. */
static bool protected_denies(struct MHD_Connection *conn)
{
    if (!atomic_load_explicit(&cfg.protected_mode, memory_order_relaxed) || !acl_default_nopass())
        return false;
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return !(i && http_peer_is_loopback(i->client_addr));
}

static bool body_too_large(struct MHD_Connection *conn)
{
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (cl == NULL)
        return false; /* none, or chunked: counted as it comes */
    char *end;
    unsigned long long n = strtoull(cl, &end, 10);
    return end == cl || *end != '\0' || n > HTTP_BODY_MAX;
}

/* An answer to the headers alone, or MHD_YES to read on. Queued before any
 * of the body is read: libmicrohttpd then closes the connection instead of
 * reading it. The Host comes before the password: a rebinding page must
 * not get a password prompt under its own name. */
static enum MHD_Result check_headers(struct MHD_Connection *conn, const char *version,
                                     http_who *who, bool *answered)
{
    static const char denied[] =
        "DENIED Protected mode is on and no requirepass is set, so only clients on the "
        "loopback interface are answered. Set requirepass, or protected-mode no (only on a "
        "trusted network), to answer other hosts.\n";
    *answered = true;
    if (protected_denies(conn))
        return send_static(conn, MHD_HTTP_FORBIDDEN, denied);
    bool bad;
    if (!host_ok(conn, version, &bad)) {
        if (bad)
            return send_static(conn, MHD_HTTP_BAD_REQUEST, "one Host header is required\n");
        return send_static(conn, MHD_HTTP_MISDIRECTED_REQUEST,
                           "misdirected request: this server does not answer for that Host "
                           "(see http-allowed-hosts)\n");
    }
    if (!access_login(conn, who))
        return deny(conn);
    if (body_too_large(conn)) {
        access_release(who);
        return send_static(conn, MHD_HTTP_CONTENT_TOO_LARGE, "request body too large\n");
    }
    *answered = false;
    return MHD_YES;
}

/* ---- the pages, built off the polling thread ---- */

static void build_page(req_state *st)
{
    textbuf *b = &st->body;
    bool ok = true;
    int status = 0; /* API_*: an answer of the user's commands */
    const char *f[NF];
    for (int i = 0; i < NF; i++)
        f[i] = st->field[i];
    st->type = "application/json";
    switch (st->route) {
    case R_METRICS:
        st->type = "text/plain; version=0.0.4; charset=utf-8";
        if (!metrics_render(&st->who, b))
            b->failed = true;
        break;
    case R_FILTERS: {
        api_filters_args a = {st->hname,  st->hname_len, f[F_SORT],
                              f[F_ORDER], f[F_PAGE],     f[F_PER_PAGE]};
        status = api_filters(&st->who, &a, b);
        break;
    }
    case R_STATUS: api_status(&st->who, b); break;
    case R_HISTORY:
        if (!access_may_read_key(&st->who, st->hname ? st->hname : "", st->hname_len)) {
            tb_puts(b, "{\"error\":\"NOPERM this user has no permissions to access one of the "
                       "keys used as arguments\"}");
            status = API_DENIED;
            break;
        }
        api_history(st->hname, st->hname_len, b);
        break;
    case R_CALC:
        /* A field the query left out is NULL, as the calculator expects. */
        ok = api_calc(st->given[F_CAPACITY] ? f[F_CAPACITY] : NULL,
                      st->given[F_ERROR_RATE] ? f[F_ERROR_RATE] : NULL,
                      st->given[F_LAYOUT] ? f[F_LAYOUT] : NULL,
                      st->given[F_WINDOW] ? f[F_WINDOW] : NULL,
                      st->given[F_SLICES] ? f[F_SLICES] : NULL, b);
        break;
    case R_CREATE: {
        api_filter_form form = {f[F_NAME],   st->flen[F_NAME], f[F_CAPACITY], f[F_ERROR_RATE],
                                f[F_EXPIRY], f[F_LAYOUT],      f[F_WINDOW],   f[F_SLICES]};
        status = api_create(&st->who, &form, b);
        break;
    }
    case R_DELETE: status = api_delete(&st->who, f[F_NAME], st->flen[F_NAME], b); break;
    case R_EXPIRE:
        status = api_expire(&st->who, f[F_NAME], st->flen[F_NAME], f[F_SECONDS], b);
        break;
    case R_PERSIST: status = api_persist(&st->who, f[F_NAME], st->flen[F_NAME], b); break;
    case R_READONLY:
        status = api_readonly(&st->who, f[F_NAME], st->flen[F_NAME], f[F_READONLY], b);
        break;
    case R_CHECK:
    case R_ADD:
        status = api_items(&st->who, st->route == R_ADD, f[F_NAME], st->flen[F_NAME], st->items,
                           st->items_len, b);
        break;
    }
    if (status == 0)
        status = ok ? API_OK : API_BAD;
    st->status = (unsigned)status;
}

static void job_finished(void)
{
    pthread_mutex_lock(&jobs_lock);
    if (--jobs == 0)
        pthread_cond_broadcast(&jobs_done);
    pthread_mutex_unlock(&jobs_lock);
}

static void *job_main(void *arg)
{
    req_state *st = arg;
    build_page(st);
    struct MHD_Connection *conn = st->conn;
    atomic_store(&st->job_done, true);
    /* From here st is the polling thread's again (it may free it). */
    MHD_resume_connection(conn);
    job_finished();
    return NULL;
}

/* The command a page stands for (docs/CONSOLE.md): a user who may not
 * run it gets 403 with the NOPERM error, logged in ACL LOG as the RESP
 * port's refusal would be. Changes need no check here: they run as the
 * user, so the server refuses what the user may not do. */
static const char *route_command(route r)
{
    switch (r) {
    case R_METRICS:
    case R_STATUS: return "INFO";
    case R_FILTERS: return "SCAN";
    default: return NULL;
    }
}

static enum MHD_Result start_job(struct MHD_Connection *conn, req_state *st, route r)
{
    const char *need = route_command(r);
    char msg[160];
    if (need && access_refuse(conn, &st->who, need, msg, sizeof(msg))) {
        textbuf b = {0};
        if (r == R_METRICS) {
            tb_puts(&b, msg);
            tb_puts(&b, "\n");
        } else {
            tb_puts(&b, "{\"error\":");
            tb_json_str(&b, msg, strlen(msg));
            tb_puts(&b, "}");
        }
        if (b.failed) {
            tb_free(&b);
            return send_static(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
        }
        return send_text(conn, MHD_HTTP_FORBIDDEN,
                         r == R_METRICS ? "text/plain; charset=utf-8" : "application/json", b.p,
                         b.len);
    }
    pthread_mutex_lock(&jobs_lock);
    bool room = !stopping && jobs < HTTP_MAX_JOBS;
    if (room)
        jobs++;
    pthread_mutex_unlock(&jobs_lock);
    if (!room)
        return send_static(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "busy, try again\n");
    st->conn = conn;
    st->route = r;
    st->job_started = true;
    MHD_suspend_connection(conn);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, job_main, st);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        /* Answered below, once resumed, as out of memory. */
        st->body.failed = true;
        atomic_store(&st->job_done, true);
        MHD_resume_connection(conn);
        job_finished();
    }
    return MHD_YES;
}

static enum MHD_Result send_page(struct MHD_Connection *conn, req_state *st)
{
    if (st->body.failed) {
        tb_free(&st->body);
        return send_static(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
    }
    textbuf b = st->body;
    st->body = (textbuf){0}; /* the response owns it now */
    return send_text(conn, st->status, st->type, b.p, b.len);
}

/* GET /api/...: its query in the fields, checked here. */
static enum MHD_Result api_get(struct MHD_Connection *conn, const char *url, req_state *st)
{
    route r;
    if (strcmp(url, "/api/filters") == 0)
        r = R_FILTERS;
    else if (strcmp(url, "/api/status") == 0)
        r = R_STATUS;
    else if (strcmp(url, "/api/history") == 0)
        r = R_HISTORY;
    else if (strcmp(url, "/api/calc") == 0)
        r = R_CALC;
    else
        return send_static(conn, MHD_HTTP_NOT_FOUND, "not found\n");
    if (r == R_HISTORY || r == R_FILTERS) {
        /* The name (the match) as sent, NULs included (a key may hold any
         * bytes). */
        const char *arg = r == R_HISTORY ? "name" : "match";
        const char *name = NULL;
        size_t len = 0;
        if (MHD_lookup_connection_value_n(conn, MHD_GET_ARGUMENT_KIND, arg, strlen(arg), &name,
                                          &len) == MHD_YES &&
            name) {
            st->hname = mem_dup(name, len);
            if (st->hname == NULL)
                return send_static(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
            st->hname_len = len;
        }
    }
    if (r == R_CALC || r == R_FILTERS) {
        int from = r == R_CALC ? F_CAPACITY : F_SORT, to = r == R_CALC ? F_SLICES : F_PER_PAGE;
        for (int i = from; i <= to; i++) {
            const char *v =
                MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, field_names[i]);
            if (v == NULL || i == F_EXPIRY)
                continue;
            size_t n = strlen(v);
            if (n > FIELD_MAX)
                return send_static(conn, MHD_HTTP_CONTENT_TOO_LARGE, "field too long\n");
            memcpy(st->field[i], v, n + 1);
            st->flen[i] = n;
            st->given[i] = true;
        }
    }
    return start_job(conn, st, r);
}

static enum MHD_Result api_post(struct MHD_Connection *conn, const char *url, req_state *st)
{
    if (st->too_long)
        return send_static(conn, MHD_HTTP_CONTENT_TOO_LARGE, "field too long\n");
    if (strcmp(url, "/api/filters") == 0)
        return start_job(conn, st, R_CREATE);
    if (strcmp(url, "/api/filters/delete") == 0)
        return start_job(conn, st, R_DELETE);
    if (strcmp(url, "/api/filters/expire") == 0)
        return start_job(conn, st, R_EXPIRE);
    if (strcmp(url, "/api/filters/persist") == 0)
        return start_job(conn, st, R_PERSIST);
    if (strcmp(url, "/api/filters/readonly") == 0)
        return start_job(conn, st, R_READONLY);
    if (strcmp(url, "/api/filters/check") == 0)
        return start_job(conn, st, R_CHECK);
    if (strcmp(url, "/api/filters/add") == 0)
        return start_job(conn, st, R_ADD);
    return send_static(conn, MHD_HTTP_NOT_FOUND, "not found\n");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **state)
{
    (void)cls;
    bool get =
        strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    bool post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
    req_state *st = *state;
    if (st == NULL) {
        /* Headers only so far: refuse now what the headers alone refuse;
         * else answer once the request is complete. */
        conns_headers_in(conn);
        bool answered;
        http_who who;
        enum MHD_Result ret = check_headers(conn, version, &who, &answered);
        if (answered)
            return ret;
        st = calloc(1, sizeof(*st));
        if (st == NULL) {
            access_release(&who);
            return MHD_NO;
        }
        st->who = who;
        *state = st;
        /* Forms only (urlencoded or multipart); any other body is
         * refused below. */
        if (post && strncmp(url, "/api/", 5) == 0)
            st->pp = MHD_create_post_processor(conn, 4096, on_field, st);
        return MHD_YES;
    }
    if (*upload_size) {
        /* A chunked body has no Content-Length to refuse up front. */
        st->body_len += *upload_size;
        if (st->body_len > HTTP_BODY_MAX)
            return MHD_NO;
        if (st->pp && !st->too_long)
            MHD_post_process(st->pp, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (st->job_started) {
        if (!atomic_load(&st->job_done))
            return MHD_YES; /* not ours to answer yet */
        return send_page(conn, st);
    }
    conns_request_in(conn);
    if (strncmp(url, "/api/", 5) == 0) {
        if (get)
            return api_get(conn, url, st);
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
        return start_job(conn, st, R_METRICS);
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
    /* One polling thread for every connection (a socket held open costs
     * no thread); the pages are built on threads of their own (start_job).
     * libmicrohttpd's limit is twice conns.c's, so that a new connection is
     * still accepted, and the oldest unfinished one closed for it, when
     * conns.c's is reached. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    /* http-tls: HTTPS only. The handshake happens after libmicrohttpd
     * tells conns.c of the connection, so the header deadline covers it. */
    bool tls = atomic_load(&cfg.http_tls);
    struct MHD_OptionItem tls_opts[3] = {{MHD_OPTION_END, 0, NULL}};
    if (tls && !https_setup(tls_opts, err, errlen)) {
        freeaddrinfo(ai);
        free(bind);
        return false;
    }
    if (tls)
        flags |= MHD_USE_TLS;
    bind_ = bind;
    stopping = false;
    daemon_ = MHD_start_daemon(flags, (uint16_t)port, may_accept, NULL, on_request, NULL,
                               MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT,
                               (unsigned)(2 * HTTP_MAX_CONNECTIONS), MHD_OPTION_CONNECTION_TIMEOUT,
                               (unsigned)HTTP_TIMEOUT_S, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_error,
                               NULL, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                               MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL, MHD_OPTION_ARRAY,
                               tls_opts, MHD_OPTION_END);
    if (daemon_ == NULL) {
        snprintf(err, errlen, "cannot listen for %s on %s:%lld", tls ? "HTTPS" : "HTTP",
                 bind ? bind : "", port);
        https_free();
        freeaddrinfo(ai);
        free(bind);
        bind_ = NULL;
        return false;
    }
    server_log(LOG_NOTICE, "%s (metrics, console) on %s:%lld", tls ? "HTTPS" : "HTTP",
               bind ? bind : "", port);
    if (!history_start())
        server_log(LOG_WARNING, "The console's fill and FPR history is off: no thread for it.");
    if (!http_peer_is_loopback(ai->ai_addr) && acl_default_nopass())
        server_log(LOG_WARNING,
                   "The HTTP listener is open to other hosts and no requirepass is set: %s",
                   atomic_load(&cfg.protected_mode)
                       ? "protected mode answers only clients on the loopback interface."
                       : "anyone who reaches it can create and delete filters.");
    freeaddrinfo(ai);
    return true;
}

int http_descriptors(void)
{
    /* libmicrohttpd's connections (its limit is twice conns.c's), both
     * ends of the socket pair of each page being built (the worker's end is
     * a client maxclients does not count), the listening socket, its epoll
     * instance and wake-up pipe. */
    return atomic_load(&cfg.http_port) ? 2 * HTTP_MAX_CONNECTIONS + 2 * HTTP_MAX_JOBS + 4 : 0;
}

void http_stop(void)
{
    history_stop();
    /* libmicrohttpd must not be stopped with a connection suspended: no
     * page is started from now on, and those being built are awaited
     * (a command gives up after its timeout). */
    pthread_mutex_lock(&jobs_lock);
    stopping = true;
    while (jobs > 0)
        pthread_cond_wait(&jobs_done, &jobs_lock);
    pthread_mutex_unlock(&jobs_lock);
    if (daemon_)
        MHD_stop_daemon(daemon_);
    daemon_ = NULL;
    https_free();
    free(bind_);
    bind_ = NULL;
}

/* The console's HTTP listener (libmicrohttpd, a thread per connection: an
 * answer may wait on a node). What the headers alone decide is refused
 * before the body is read, as bloomeryd's listener does: a Host outside
 * the allow-list (421, the DNS-rebinding defence, guard.h), missing or
 * wrong credentials (401), a body over the limit (413). Writes are POSTs
 * carrying the X-Bloomery-Console header, which a page of another site
 * cannot send without a CORS preflight that is never granted. */
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "assets.h"
#include "console.h"
#include "guard.h"

#define BODY_MAX (1024 * 1024) /* items to check or add, one per line */
#define CONN_MAX 64
#define PER_IP_MAX 16
#define TIMEOUT_S 30 /* a connection idle this long, headers or body, goes */
#define LOGIN_CACHE 16
#define LOGIN_TTL_MS 60000

static struct MHD_Daemon *daemon_;

typedef struct req {
    cn_who who;
    char *body;
    size_t len;
    bool too_large;
} req;

/* Credentials checked lately, so that a page's polling does not AUTH on
 * every request. */
static struct {
    char user[128], pass[256];
    long long ok_until;
} logins[LOGIN_CACHE];
static pthread_mutex_t login_lock = PTHREAD_MUTEX_INITIALIZER;

static bool login(const char *user, const char *pass)
{
    long long now = cn_now_ms();
    pthread_mutex_lock(&login_lock);
    for (int i = 0; i < LOGIN_CACHE; i++)
        if (logins[i].ok_until > now && strcmp(logins[i].user, user) == 0 &&
            strcmp(logins[i].pass, pass) == 0) {
            pthread_mutex_unlock(&login_lock);
            return true;
        }
    pthread_mutex_unlock(&login_lock);
    if (!ops_login(user, pass))
        return false;
    pthread_mutex_lock(&login_lock);
    int oldest = 0;
    for (int i = 1; i < LOGIN_CACHE; i++)
        if (logins[i].ok_until < logins[oldest].ok_until)
            oldest = i;
    snprintf(logins[oldest].user, sizeof(logins[oldest].user), "%s", user);
    snprintf(logins[oldest].pass, sizeof(logins[oldest].pass), "%s", pass);
    logins[oldest].ok_until = now + LOGIN_TTL_MS;
    pthread_mutex_unlock(&login_lock);
    return true;
}

static enum MHD_Result send_body(struct MHD_Connection *conn, unsigned status, const char *type,
                                 char *p, size_t len, bool owned)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, p ? p : (char *)"", owned && p ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        if (owned)
            free(p);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; frame-ancestors 'none'");
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, "WWW-Authenticate",
                                "Basic realm=\"bloomery\", charset=\"UTF-8\"");
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_error(struct MHD_Connection *conn, unsigned status, const char *text)
{
    textbuf b = {0};
    api_error(&b, (int)status, text);
    if (b.failed) {
        tb_free(&b);
        return MHD_NO;
    }
    return send_body(conn, status, "application/json", b.p, b.len, true);
}

/* ---- forms: a GET's query or a POST's urlencoded body ---- */

const char *form_get(const cn_form *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->key[i], name) == 0)
            return f->val[i];
    return NULL;
}

static enum MHD_Result query_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    (void)kind;
    cn_form *f = cls;
    if (f->n < CN_FORM_MAX) {
        f->key[f->n] = (char *)key;
        f->val[f->n] = (char *)(value ? value : "");
        f->n++;
    }
    return MHD_YES;
}

static void parse_body(char *body, cn_form *f)
{
    for (char *save = NULL, *pair = strtok_r(body, "&", &save); pair && f->n < CN_FORM_MAX;
         pair = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(pair, '=');
        char *v = eq ? eq + 1 : pair + strlen(pair);
        if (eq)
            *eq = '\0';
        for (char *p = pair; *p; p++)
            if (*p == '+')
                *p = ' ';
        for (char *p = v; *p; p++)
            if (*p == '+')
                *p = ' ';
        MHD_http_unescape(pair);
        MHD_http_unescape(v);
        f->key[f->n] = pair;
        f->val[f->n] = v;
        f->n++;
    }
}

/* ---- routes ---- */

static int route_get(const char *url, struct MHD_Connection *conn, const cn_who *w, textbuf *b)
{
    cn_form q = {0};
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, query_field, &q);
    if (strcmp(url, "/api/me") == 0)
        return api_me(w, b);
    if (strcmp(url, "/api/overview") == 0)
        return api_overview(b);
    if (strcmp(url, "/api/nodes") == 0)
        return api_nodes(b);
    if (strcmp(url, "/api/filters") == 0)
        return api_filters(&q, b);
    if (strcmp(url, "/api/filter") == 0)
        return api_filter(&q, w, b);
    if (strcmp(url, "/api/routing") == 0)
        return api_routing(&q, b);
    if (strcmp(url, "/api/placement") == 0)
        return api_placement(&q, b);
    if (strcmp(url, "/api/calc") == 0)
        return api_calc_get(&q, b);
    if (strncmp(url, "/api/rebalance/", 15) == 0)
        return api_rebalance("GET", url, w, b);
    return api_error(b, 404, "not found");
}

static int route_post(const char *url, req *st, textbuf *b)
{
    cn_form f = {0};
    if (st->body)
        parse_body(st->body, &f);
    const cn_who *w = &st->who;
    if (strcmp(url, "/api/filters") == 0)
        return ops_create(w, &f, b);
    if (strcmp(url, "/api/filter/check") == 0)
        return ops_items(w, &f, false, b);
    if (strcmp(url, "/api/filter/add") == 0)
        return ops_items(w, &f, true, b);
    if (strcmp(url, "/api/filter/expire") == 0)
        return ops_key(w, &f, "expire", b);
    if (strcmp(url, "/api/filter/persist") == 0)
        return ops_key(w, &f, "persist", b);
    if (strcmp(url, "/api/filter/delete") == 0)
        return ops_key(w, &f, "delete", b);
    if (strcmp(url, "/api/filter/readonly") == 0)
        return ops_key(w, &f, "readonly", b);
    if (strncmp(url, "/api/rebalance/", 15) == 0)
        return api_rebalance("POST", url, w, b);
    return api_error(b, 404, "not found");
}

/* What the headers alone refuse; 0 when the request may go on. */
static unsigned check_headers(struct MHD_Connection *conn, cn_who *who, const char **why)
{
    const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
    if (!host || !http_host_allowed(host, strlen(host), cn_cfg.bind, cn_cfg.allowed_hosts)) {
        *why = host ? "misdirected request: this console does not answer for that Host (see "
                      "--http-allowed-hosts)"
                    : "a Host header is required";
        return host ? MHD_HTTP_MISDIRECTED_REQUEST : MHD_HTTP_BAD_REQUEST;
    }
    char *pass = NULL;
    char *user = MHD_basic_auth_get_username_password(conn, &pass);
    memset(who, 0, sizeof(*who));
    if (user) {
        snprintf(who->user, sizeof(who->user), "%s", *user ? user : "default");
        snprintf(who->pass, sizeof(who->pass), "%s", pass ? pass : "");
        who->given = true;
    }
    MHD_free(user);
    MHD_free(pass);
    if (!who->given && cn_cfg.need_auth) {
        *why = "sign in with a user of the deployment";
        return MHD_HTTP_UNAUTHORIZED;
    }
    if (who->given && !login(who->user, who->pass)) {
        *why = "WRONGPASS invalid username-password pair or user is disabled.";
        return MHD_HTTP_UNAUTHORIZED;
    }
    const char *len = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (len && strtoull(len, NULL, 10) > BODY_MAX) {
        *why = "request body too large";
        return MHD_HTTP_CONTENT_TOO_LARGE;
    }
    return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **state)
{
    (void)cls;
    (void)version;
    req *st = *state;
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    bool post = strcmp(method, "POST") == 0;
    if (!st) {
        cn_who who;
        const char *why = NULL;
        unsigned status = check_headers(conn, &who, &why);
        if (status)
            return send_error(conn, status, why);
        st = calloc(1, sizeof(*st));
        if (!st)
            return MHD_NO;
        st->who = who;
        *state = st;
        return MHD_YES;
    }
    if (*upload_size) {
        if (st->len + *upload_size > BODY_MAX) {
            st->too_large = true;
        } else if (!st->too_large) {
            char *p = realloc(st->body, st->len + *upload_size + 1);
            if (!p)
                return MHD_NO;
            memcpy(p + st->len, upload, *upload_size);
            st->len += *upload_size;
            p[st->len] = '\0';
            st->body = p;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (st->too_large)
        return send_error(conn, MHD_HTTP_CONTENT_TOO_LARGE, "request body too large");
    if (strncmp(url, "/api/", 5) == 0) {
        textbuf b = {0};
        int status;
        if (get) {
            status = route_get(url, conn, &st->who, &b);
        } else if (!post) {
            return send_error(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed");
        } else if (!MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Bloomery-Console")) {
            return send_error(conn, MHD_HTTP_FORBIDDEN, "X-Bloomery-Console header required");
        } else {
            const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
            if (st->len && (!ct || strncmp(ct, "application/x-www-form-urlencoded", 33) != 0))
                return send_error(conn, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
                                  "a form body (application/x-www-form-urlencoded) is required");
            status = route_post(url, st, &b);
        }
        if (b.failed) {
            tb_free(&b);
            return send_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory");
        }
        return send_body(conn, (unsigned)status, "application/json", b.p, b.len, true);
    }
    const http_asset *a = http_asset_find(url);
    if (!a)
        return send_error(conn, MHD_HTTP_NOT_FOUND, "not found");
    if (!get)
        return send_error(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed");
    return send_body(conn, MHD_HTTP_OK, a->type, (char *)a->data, a->len, false);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **state,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    req *st = *state;
    if (st) {
        memset(st->who.pass, 0, sizeof(st->who.pass));
        free(st->body);
        free(st);
        *state = NULL;
    }
}

bool cn_bind_is_loopback(const char *bind)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(bind, "0", &hints, &ai) != 0)
        return false;
    bool all = ai != NULL;
    for (struct addrinfo *p = ai; p; p = p->ai_next)
        all = all && http_peer_is_loopback(p->ai_addr);
    freeaddrinfo(ai);
    return all;
}

bool serve_start(char *err, size_t errlen)
{
    char port[16];
    snprintf(port, sizeof(port), "%d", cn_cfg.port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(cn_cfg.bind, port, &hints, &ai);
    if (rc != 0) {
        snprintf(err, errlen, "--http-bind %s: %s", cn_cfg.bind, gai_strerror(rc));
        return false;
    }
    unsigned flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    daemon_ = MHD_start_daemon(
        flags, (uint16_t)cn_cfg.port, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR,
        ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_MAX,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)PER_IP_MAX, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)TIMEOUT_S, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!daemon_) {
        snprintf(err, errlen, "cannot listen on %s:%d", cn_cfg.bind, cn_cfg.port);
        return false;
    }
    return true;
}

void serve_stop(void)
{
    if (daemon_)
        MHD_stop_daemon(daemon_);
    daemon_ = NULL;
}

/* The HTTP listener: libmicrohttpd parses the requests (and the Basic
 * credentials) on its own thread; this file checks the password and routes
 * to the pages. Only GET and HEAD of known paths are served. */
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **state)
{
    (void)cls;
    (void)version;
    (void)upload_data;
    static int first_call;
    if (*state == NULL) {
        /* Headers only so far: answer once the request is complete. */
        *state = &first_call;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0; /* no route takes a body */
        return MHD_YES;
    }
    if (!authorized(conn))
        return deny(conn);
    bool get =
        strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
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
    return send_static(conn, MHD_HTTP_NOT_FOUND, "not found\n");
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
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    daemon_ = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)HTTP_TIMEOUT_S, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_error, NULL, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (daemon_ == NULL) {
        snprintf(err, errlen, "cannot listen for HTTP on %s:%lld", bind ? bind : "", port);
        free(bind);
        return false;
    }
    server_log(LOG_NOTICE, "HTTP (metrics, console) on %s:%lld", bind ? bind : "", port);
    free(bind);
    return true;
}

void http_stop(void)
{
    if (daemon_)
        MHD_stop_daemon(daemon_);
    daemon_ = NULL;
}

/* A client connection: read, parse, run, reply.
 *
 * Every read callback parses and runs all complete requests in the input
 * buffer and then flushes the replies with one write, so a pipeline of N
 * commands costs one read and one write, not N. Replies go to the client's
 * own buffer (no allocation per command once it has grown); a write tries
 * uv_try_write first and only hands the rest to uv_write when the socket is
 * full, while new replies keep accumulating behind it.
 *
 * A client of the TLS port takes the same path (tls_conn.c): its read
 * callback decrypts into qbuf and calls client_input, and client_flush
 * hands its replies to the session; a plain client pays one test of
 * c->tls per flush for it.
 *
 * Output limits as Redis's client-output-buffer-limit for normal clients:
 * pending output past the hard limit, or past the soft limit for longer than
 * its seconds, closes the client at once (its replies are dropped), so a
 * client that sends but never reads cannot exhaust memory.
 *
 * A client that has not authenticated while a password is required is
 * closed once more than UNAUTH_OUTPUT_MAX bytes of replies wait for it, as
 * Redis 7.4.3 does (CVE-2025-21605): its refusals are all it can be sent, and
 * a client that sends without reading would otherwise make the server hold
 * up to the hard limit of them per connection.
 *
 * Input limit as Redis's client-query-buffer-limit: a client whose pending
 * input passes it is closed without a reply. Pending input is every byte not
 * yet run: the arguments of a request being received live in qbuf until it
 * runs, so they count in full (Redis moves each argument of 32 KiB or more
 * out of its query buffer as it arrives; a request of many large arguments
 * passes there and not here). Redis 7.4 also caps input before AUTH at
 * 1 MiB; here resp.c's limits before AUTH (10 arguments of 16 KiB) keep it
 * far below that already.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "commit.h"
#include "persist.h"
#include "repl.h"
#include "server.h"
#include "util.h"

#define READ_CHUNK (16 * 1024)
/* What Redis lets wait for an unauthenticated client: its 16 KiB reply
 * buffer; the first reply past it goes to the reply list, whose limit for
 * such a client is 1024 bytes and whose smallest block is 16 KiB. */
#define UNAUTH_OUTPUT_MAX (16 * 1024)

pthread_mutex_t clients_lock = PTHREAD_MUTEX_INITIALIZER;
client *all_clients;

static void format_addr(const struct sockaddr_storage *ss, char *out, size_t n)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &s->sin_addr, host, sizeof(host));
        port = ntohs(s->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof(host));
        port = ntohs(s->sin6_port);
    }
    snprintf(out, n, "%s:%d", host, port);
}

static void free_unopened(uv_handle_t *h) { free(h->data); }

client *client_create(worker *w, int fd, int flags)
{
    client *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    if (uv_tcp_init(&w->loop, &c->tcp) != 0) {
        free(c);
        return NULL;
    }
    if (uv_tcp_open(&c->tcp, fd) != 0) {
        /* The handle is initialized: it must go through uv_close. */
        c->tcp.data = c;
        uv_close((uv_handle_t *)&c->tcp, free_unopened);
        return NULL;
    }
    c->tcp.data = c;
    c->w = w;
    c->fd = fd;
    c->id = atomic_fetch_add(&srv.next_client_id, 1) + 1;
    uv_tcp_nodelay(&c->tcp, 1);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
        format_addr(&ss, c->addr, sizeof(c->addr));
    sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        format_addr(&ss, c->laddr, sizeof(c->laddr));
    reply_init(&c->cx.out);
    resp_parser_init(&c->parser);
    /* Every connection starts as the default user, authenticated when
     * that user needs no password (Redis: on and nopass). */
    c->acl_ver = atomic_load_explicit(&acl_version, memory_order_acquire);
    c->user = acl_user_get("default", 7);
    c->authenticated = acl_default_nopass();
    atomic_store(&c->resp, 2);
    c->ctime_ms = now_ms();
    atomic_store(&c->last_ms, c->ctime_ms);
    atomic_store(&c->lastcmd, "NULL");
    atomic_store(&c->multi_n, -1);

    c->next = w->clients;
    if (w->clients)
        w->clients->prev = c;
    w->clients = c;
    pthread_mutex_lock(&clients_lock);
    c->gnext = all_clients;
    if (all_clients)
        all_clients->gprev = c;
    all_clients = c;
    pthread_mutex_unlock(&clients_lock);

    if ((flags & ADOPT_TLS) && !tls_conn_attach(c)) {
        client_close(c);
        return c;
    }
    if (uv_read_start((uv_stream_t *)&c->tcp, c->tls ? tls_conn_alloc : client_alloc,
                      c->tls ? tls_conn_on_read : client_on_read) != 0) {
        client_close(c);
        return c;
    }
    return c;
}

static void on_closed(uv_handle_t *h)
{
    client *c = h->data;
    if (c->tls)
        tls_conn_free(c);
    resp_parser_free(&c->parser);
    reply_free(&c->cx.out);
    free(c->wbuf);
    free(c->qbuf);
    free(c->cx.argv);
    free(c->cx.argvlen);
    free(c->bitems);
    free(c->blens);
    free(c->name);
    free(c->lib_name);
    free(c->lib_ver);
    multi_reset(c);
    acl_user_put(c->user);
    free(c);
    atomic_fetch_sub(&srv.connected, 1);
}

void client_close(client *c)
{
    if (c->closing)
        return;
    c->closing = true;
    commit_forget(c);
    wait_forget(c);
    pubsub_client_gone(c);
    worker *w = c->w;
    if (c->prev)
        c->prev->next = c->next;
    else
        w->clients = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_lock(&clients_lock);
    if (c->gprev)
        c->gprev->gnext = c->gnext;
    else
        all_clients = c->gnext;
    if (c->gnext)
        c->gnext->gprev = c->gprev;
    pthread_mutex_unlock(&clients_lock);
    if (c->tls)
        tls_conn_shutdown(c);
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static size_t query_limit(void)
{
    return (size_t)atomic_load_explicit(&cfg.client_query_buffer_limit, memory_order_relaxed);
}

void client_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    client *c = h->data;
    /* Move the unprocessed tail to the front; the parser's offsets are
     * relative to the request start, which moves with it. */
    if (c->qpos > 0) {
        memmove(c->qbuf, c->qbuf + c->qpos, c->qlen - c->qpos);
        c->qlen -= c->qpos;
        c->qpos = 0;
    }
    size_t want = READ_CHUNK;
    if (c->parser.need > want)
        want = c->parser.need;
    /* Room for a large argument, but none past the query-buffer limit: the
     * byte after it closes the client, so a header announcing 512 MB costs
     * no more than the limit. */
    size_t limit = query_limit();
    size_t room = limit >= c->qlen ? limit - c->qlen + 1 : 1;
    if (want > room)
        want = room > READ_CHUNK ? room : READ_CHUNK;
    if (c->qcap - c->qlen < want) {
        size_t need = c->qlen + want, most = limit + 1 > need ? limit + 1 : need;
        size_t cap = c->qcap ? c->qcap : READ_CHUNK;
        while (cap < need)
            cap *= 2;
        if (cap > most)
            cap = most;
        char *q = realloc(c->qbuf, cap);
        if (q == NULL) {
            buf->base = NULL;
            buf->len = 0;
            return;
        }
        c->qbuf = q;
        c->qcap = cap;
    }
    buf->base = c->qbuf + c->qlen;
    buf->len = c->qcap - c->qlen;
}

static size_t pending_output(client *c) { return c->cx.out.len + (c->writing ? c->wlen : 0); }

bool client_obuf_over_limit(client *c)
{
    size_t used = pending_output(c);
    if (!c->authenticated && used > UNAUTH_OUTPUT_MAX)
        return true;
    long long hard = atomic_load_explicit(&cfg.obuf_hard, memory_order_relaxed);
    long long soft = atomic_load_explicit(&cfg.obuf_soft, memory_order_relaxed);
    if (hard > 0 && used >= (size_t)hard)
        return true;
    if (soft > 0 && used >= (size_t)soft) {
        int64_t now = now_ms();
        long long secs = atomic_load_explicit(&cfg.obuf_soft_seconds, memory_order_relaxed);
        if (c->soft_limit_since == 0) {
            c->soft_limit_since = now;
            return secs == 0;
        }
        return now - c->soft_limit_since >= secs * 1000;
    }
    c->soft_limit_since = 0;
    return false;
}

static void drop_over_limit(client *c)
{
    if (c->closing) /* closed by the command itself */
        return;
    server_log(LOG_WARNING, "Client id=%llu addr=%s closed for overcoming of output buffer limits.",
               (unsigned long long)c->id, c->addr);
    client_close(c);
}

/* Up to 64 bytes as a quoted string with escapes, as Redis's sdscatrepr. */
static void repr64(const char *s, size_t len, char *out, size_t outlen)
{
    size_t o = 0;
    if (len > 64)
        len = 64;
    out[o++] = '"';
    for (size_t i = 0; i < len && o + 6 < outlen; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = ch == '\\'   ? "\\\\"
                          : ch == '"'  ? "\\\""
                          : ch == '\n' ? "\\n"
                          : ch == '\r' ? "\\r"
                          : ch == '\t' ? "\\t"
                          : ch == '\a' ? "\\a"
                          : ch == '\b' ? "\\b"
                                       : NULL;
        if (esc)
            o += (size_t)snprintf(out + o, outlen - o, "%s", esc);
        else if (ch >= 0x20 && ch < 0x7f)
            out[o++] = (char)ch;
        else
            o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", ch);
    }
    out[o++] = '"';
    out[o] = '\0';
}

static void drop_query_over_limit(client *c)
{
    char info[512], bytes[300];
    pthread_mutex_lock(&clients_lock);
    client_info_line(c, info, sizeof(info));
    pthread_mutex_unlock(&clients_lock);
    repr64(c->qbuf + c->qpos, c->qlen - c->qpos, bytes, sizeof(bytes));
    server_log(LOG_WARNING,
               "Closing client that reached max query buffer length: %s (qbuf initial bytes: %s)",
               info, bytes);
    client_close(c);
}

static bool ensure_argv(client *c, size_t n)
{
    if ((size_t)c->argvcap >= n)
        return true;
    size_t cap = c->argvcap ? (size_t)c->argvcap : 16;
    while (cap < n)
        cap *= 2;
    const char **a = realloc(c->cx.argv, cap * sizeof(*a));
    if (a == NULL)
        return false;
    c->cx.argv = a;
    size_t *l = realloc(c->cx.argvlen, cap * sizeof(*l));
    if (l == NULL)
        return false;
    c->cx.argvlen = l;
    c->argvcap = (int)cap;
    return true;
}

#define BATCH_MAX 1024

static bool batch_push(client *c, size_t n, const char *item, size_t len)
{
    if (n == c->bcap) {
        size_t cap = c->bcap ? c->bcap * 2 : 64;
        const char **a = realloc(c->bitems, cap * sizeof(*a));
        if (a == NULL)
            return false;
        c->bitems = a;
        size_t *l = realloc(c->blens, cap * sizeof(*l));
        if (l == NULL)
            return false;
        c->blens = l;
        c->bcap = cap;
    }
    c->bitems[n] = item;
    c->blens[n] = len;
    return true;
}

/* The request just parsed is "BF.ADD|BF.EXISTS key item": gather the
 * following complete requests of the same command on the same key and run
 * them as one library batch, which hashes and prefetches a whole group
 * before probing. Replies are those of the separate commands. Only
 * multibulk requests are looked ahead at: parsing them changes nothing in
 * the buffer, so one that does not fit is simply parsed again. */
static void run_batch(client *c, const command *cmd, char *start)
{
    const char *key = start + c->parser.argv[1].off;
    size_t klen = c->parser.argv[1].len;
    size_t n = 0;
    resp_limits lim = {
        .max_bulk = atomic_load_explicit(&cfg.proto_max_bulk_len, memory_order_relaxed),
        .max_args = atomic_load_explicit(&cfg.proto_max_multibulk_len, memory_order_relaxed),
        .authenticated = true,
    };
    /* Clients repeat a request byte for byte up to its item ("*3\r\n$6\r\n
     * BF.ADD\r\n$<k>\r\n<key>\r\n"): a request with the same prefix needs only
     * its item's header read. */
    size_t prefix = c->parser.argv[1].off + klen + 2;
    batch_push(c, n++, start + c->parser.argv[2].off, c->parser.argv[2].len);
    c->qpos += c->parser.pos;
    resp_parser_reset(&c->parser);
    while (n < BATCH_MAX && c->qpos < c->qlen && c->qbuf[c->qpos] == '*') {
        char *next = c->qbuf + c->qpos;
        size_t avail = c->qlen - c->qpos, hdr;
        if (avail > prefix && memcmp(next, start, prefix) == 0) {
            long long ilen = resp_bulk_header(next + prefix, avail - prefix, &hdr);
            if (ilen >= 0 && avail - prefix - hdr >= (size_t)ilen + 2) {
                if (!batch_push(c, n, next + prefix + hdr, (size_t)ilen))
                    break;
                n++;
                c->qpos += prefix + hdr + (size_t)ilen + 2;
                continue;
            }
        }
        resp_status st = resp_parse(&c->parser, next, c->qlen - c->qpos, &lim);
        resp_arg *a = c->parser.argv;
        if (st != RESP_DONE || c->parser.argc != 3 || a[1].len != klen ||
            memcmp(next + a[1].off, key, klen) != 0 ||
            !str_eq_ci(next + a[0].off, a[0].len, cmd->name) ||
            !batch_push(c, n, next + a[2].off, a[2].len)) {
            resp_parser_reset(&c->parser);
            break;
        }
        n++;
        c->qpos += c->parser.pos;
        resp_parser_reset(&c->parser);
    }
    bool write = cmd->flags & CMD_WRITE;
    size_t held = 0;
    if (write) {
        size_t bytes = klen;
        for (size_t i = 0; i < n; i++)
            bytes += c->blens[i];
        if (!wal_reserve(wal_bound(n + 1, bytes, klen), &held)) {
            for (size_t i = 0; i < n; i++)
                reply_error(&c->cx.out, LOG_OOM_ERROR);
            command_account(c, cmd, n, n, 0);
            return;
        }
        commit_write_begin(c->w);
    }
    int64_t t0 = mono_us();
    c->cx.hits = c->cx.misses = 0;
    size_t failed = cmd->batch(&c->cx, key, klen, c->bitems, c->blens, n);
    if (write) {
        watch_touch_key(key, klen);
        commit_write_end(c->w);
        wal_release(held);
    }
    c->touched_keys = true;
    worker_count_hits(c->w, c->cx.hits, c->cx.misses);
    command_account(c, cmd, n, failed, (uint64_t)(mono_us() - t0));
}

static void after_input(client *c);

static void process_input(client *c)
{
    resp_limits lim = {
        .max_bulk = atomic_load_explicit(&cfg.proto_max_bulk_len, memory_order_relaxed),
        .max_args = atomic_load_explicit(&cfg.proto_max_multibulk_len, memory_order_relaxed),
    };
    while (!c->closing && !c->close_after_reply && !c->blocked && c->qpos < c->qlen) {
        lim.authenticated = c->authenticated;
        char *start = c->qbuf + c->qpos;
        resp_status st = resp_parse(&c->parser, start, c->qlen - c->qpos, &lim);
        if (st == RESP_AGAIN)
            break;
        if (st == RESP_ERROR) {
            reply_errorf(&c->cx.out, "ERR Protocol error: %s", c->parser.error);
            server_log(LOG_VERBOSE, "Protocol error (%s) from client id=%llu addr=%s",
                       c->parser.error, (unsigned long long)c->id, c->addr);
            c->close_after_reply = true;
            break;
        }
        size_t argc = c->parser.argc;
        if (argc > 0) {
            if (!ensure_argv(c, argc)) {
                c->close_after_reply = true;
                break;
            }
            for (size_t i = 0; i < argc; i++) {
                c->cx.argv[i] = start + c->parser.argv[i].off;
                c->cx.argvlen[i] = c->parser.argv[i].len;
            }
            c->cx.argc = (int)argc;
            const command *cmd = c->cmd;
            if (argc == 3 && cmd && !c->parser.inline_req && cmd->batch &&
                str_eq_ci(c->cx.argv[0], c->cx.argvlen[0], cmd->name) &&
                /* The dispatcher's own checks, unanswered: a request they
                 * refuse or queue goes to the dispatcher, which answers.
                 * The batch's key and command are every request's, so one
                 * check covers them all. */
                command_gate(c, cmd, false) == GATE_RUN) {
                c->cx.argc = 0;
                run_batch(c, cmd, start);
                if (c->cx.out.failed || client_obuf_over_limit(c)) {
                    drop_over_limit(c);
                    return;
                }
                continue;
            }
            command_dispatch(c);
            c->cx.argc = 0;
        }
        c->qpos += c->parser.pos;
        resp_parser_reset(&c->parser);
        if (c->cx.out.failed || client_obuf_over_limit(c)) {
            drop_over_limit(c);
            return;
        }
    }
    if (c->qpos == c->qlen) {
        c->qpos = c->qlen = 0;
        if (c->qcap > KEEP_BUFFER && c->parser.need == 0) {
            free(c->qbuf);
            c->qbuf = NULL;
            c->qcap = 0;
        }
    }
}

void client_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    client *c = s->data;
    if (nread < 0) {
        client_close(c);
        return;
    }
    if (nread == 0 || c->closing)
        return;
    client_input(c, (size_t)nread);
}

void client_input(client *c, size_t nread)
{
    c->qlen += nread;
    worker *w = c->w;
    atomic_store_explicit(&w->net_in,
                          atomic_load_explicit(&w->net_in, memory_order_relaxed) + (uint64_t)nread,
                          memory_order_relaxed);
    atomic_store_explicit(&c->last_ms, now_ms(), memory_order_relaxed);
    /* Checked before anything runs, as Redis: no reply, the request is lost. */
    if (c->qlen - c->qpos > query_limit()) {
        drop_query_over_limit(c);
        return;
    }
    wal_defer_wakes();
    process_input(c);
    wal_wake_deferred();
    after_input(c);
}

/* Replies of what ran go out (or wait for the log, commit.c). */
static void after_input(client *c)
{
    if (c->closing)
        return;
    atomic_store_explicit(&c->qbuf_used, c->qlen - c->qpos, memory_order_relaxed);
    if (c->close_after_reply)
        uv_read_stop((uv_stream_t *)&c->tcp);
    /* Replies that may depend on log records wait for them under
     * appendfsync always. */
    if (c->touched_keys) {
        c->touched_keys = false;
        if (commit_defer(c))
            return;
    }
    client_flush(c);
}

void client_resume(client *c)
{
    c->blocked = false;
    wal_defer_wakes();
    process_input(c);
    wal_wake_deferred();
    after_input(c);
}

static void on_written(uv_write_t *req, int status)
{
    client *c = req->data;
    c->writing = false;
    if (status < 0 || c->closing) {
        if (!c->closing)
            client_close(c);
        return;
    }
    worker *w = c->w;
    atomic_store_explicit(&w->net_out,
                          atomic_load_explicit(&w->net_out, memory_order_relaxed) + c->wlen,
                          memory_order_relaxed);
    /* Keep the written buffer as the next output buffer when that one is
     * still empty: steady pipelines then allocate nothing. */
    if (c->cx.out.len == 0 && c->cx.out.cap < KEEP_BUFFER) {
        free(c->cx.out.buf);
        c->cx.out.buf = c->wbuf;
        c->cx.out.cap = c->wcap;
    } else {
        free(c->wbuf);
    }
    c->wbuf = NULL;
    c->wlen = c->wcap = 0;
    client_flush(c);
}

void client_flush(client *c)
{
    if (c->closing || c->writing || c->wal_parked)
        return;
    if (c->tls) {
        tls_conn_flush(c);
        return;
    }
    if (c->cx.out.len == 0) {
        if (c->close_after_reply)
            client_close(c);
        return;
    }
    uv_buf_t b = uv_buf_init(c->cx.out.buf, (unsigned)c->cx.out.len);
    int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (n == UV_EAGAIN)
        n = 0;
    if (n < 0) {
        client_close(c);
        return;
    }
    worker *w = c->w;
    atomic_store_explicit(&w->net_out,
                          atomic_load_explicit(&w->net_out, memory_order_relaxed) + (uint64_t)n,
                          memory_order_relaxed);
    if ((size_t)n == c->cx.out.len) {
        c->cx.out.len = 0;
        if (c->cx.out.cap > KEEP_BUFFER)
            reply_free(&c->cx.out);
        atomic_store_explicit(&c->obuf_used, 0, memory_order_relaxed);
        if (c->close_after_reply)
            client_close(c);
        return;
    }
    /* The socket is full: the unsent rest becomes the in-flight write and a
     * fresh buffer takes new replies. */
    size_t rest = c->cx.out.len - (size_t)n;
    memmove(c->cx.out.buf, c->cx.out.buf + n, rest);
    c->wbuf = c->cx.out.buf;
    c->wcap = c->cx.out.cap;
    c->wlen = rest;
    c->cx.out.buf = NULL;
    c->cx.out.len = c->cx.out.cap = 0;
    c->writing = true;
    c->wreq.data = c;
    uv_buf_t wb = uv_buf_init(c->wbuf, (unsigned)rest);
    atomic_store_explicit(&c->obuf_used, rest, memory_order_relaxed);
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &wb, 1, on_written) != 0) {
        c->writing = false;
        client_close(c);
    }
}

void client_cron(client *c, int64_t now)
{
    if (c->tls && tls_conn_expired(c, now)) {
        server_log(LOG_VERBOSE, "Closing client id=%llu: no TLS handshake in time",
                   (unsigned long long)c->id);
        client_close(c);
        return;
    }
    long long timeout = atomic_load_explicit(&cfg.timeout, memory_order_relaxed);
    if (timeout > 0 && !c->writing &&
        now - atomic_load_explicit(&c->last_ms, memory_order_relaxed) > timeout * 1000) {
        server_log(LOG_VERBOSE, "Closing idle client id=%llu", (unsigned long long)c->id);
        client_close(c);
        return;
    }
    if (c->writing && client_obuf_over_limit(c))
        drop_over_limit(c);
}

int client_type(client *c)
{
    int t = atomic_load_explicit(&c->ctype, memory_order_relaxed);
    if (t == CLIENT_TYPE_NORMAL && pubsub_count(c) > 0)
        return CLIENT_TYPE_PUBSUB;
    return t;
}

const char *client_type_name(int type)
{
    static const char *const names[] = {"normal", "slave", "pubsub", "master"};
    return type >= 0 && type <= CLIENT_TYPE_MASTER ? names[type] : "normal";
}

int client_type_by_name(const char *s, size_t len)
{
    if (str_eq_ci(s, len, "normal"))
        return CLIENT_TYPE_NORMAL;
    if (str_eq_ci(s, len, "slave") || str_eq_ci(s, len, "replica"))
        return CLIENT_TYPE_REPLICA;
    if (str_eq_ci(s, len, "pubsub"))
        return CLIENT_TYPE_PUBSUB;
    if (str_eq_ci(s, len, "master"))
        return CLIENT_TYPE_MASTER;
    return -1;
}

/* CLIENT LIST's flags: S replica, M master, P subscriptions, x in MULTI;
 * N for none of them. */
static void client_flags(client *c, char *out)
{
    char *p = out;
    int t = atomic_load_explicit(&c->ctype, memory_order_relaxed);
    if (t == CLIENT_TYPE_REPLICA)
        *p++ = 'S';
    if (t == CLIENT_TYPE_MASTER)
        *p++ = 'M';
    if (pubsub_count(c) > 0)
        *p++ = 'P';
    if (client_in_multi(c))
        *p++ = 'x';
    if (p == out)
        *p++ = 'N';
    *p = '\0';
}

void client_info_line(client *c, char *out, size_t outlen)
{
    int64_t now = now_ms();
    const char *name = c->name ? c->name : "";
    const char *libn = c->lib_name ? c->lib_name : "";
    const char *libv = c->lib_ver ? c->lib_ver : "";
    size_t q = atomic_load_explicit(&c->qbuf_used, memory_order_relaxed);
    size_t o = atomic_load_explicit(&c->obuf_used, memory_order_relaxed);
    const char *cmd = atomic_load_explicit(&c->lastcmd, memory_order_relaxed);
    char flags[8];
    client_flags(c, flags);
    snprintf(out, outlen,
             "id=%llu addr=%s laddr=%s fd=%d name=%s age=%lld idle=%lld flags=%s db=0 sub=%d "
             "psub=%d ssub=0 multi=%d qbuf=%zu qbuf-free=0 argv-mem=0 multi-mem=0 rbs=%d rbp=0 "
             "obl=0 oll=0 omem=%zu tot-mem=%zu events=r cmd=%s user=%s redir=-1 resp=%d "
             "lib-name=%s lib-ver=%s",
             (unsigned long long)c->id, c->addr, c->laddr, c->fd, name,
             (long long)((now - c->ctime_ms) / 1000),
             (long long)((now - atomic_load_explicit(&c->last_ms, memory_order_relaxed)) / 1000),
             flags, atomic_load_explicit(&c->nchans, memory_order_relaxed),
             atomic_load_explicit(&c->npats, memory_order_relaxed),
             atomic_load_explicit(&c->multi_n, memory_order_relaxed), q, READ_CHUNK, o,
             sizeof(client) + q + o, cmd, c->user ? c->user->name : "default",
             atomic_load_explicit(&c->resp, memory_order_relaxed), libn, libv);
}

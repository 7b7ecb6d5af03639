/* A load generator for Redis-protocol servers that can keep many server cores
 * busy from the same machine. redis-benchmark formats every request as it
 * goes and, with --threads, still tops out near half a million requests per
 * second; here each connection's requests are encoded once, before the run,
 * into one buffer that is written batch by batch, so the client's CPU goes
 * to write and read system calls and to counting replies.
 *
 * One libuv loop per thread, each with its own connections. A connection
 * sends a batch of P requests (one write), waits for P complete replies and
 * sends the next: P=1 with many connections is the unpipelined case. The
 * latency of a batch is its round trip, kept in a log-linear histogram.
 *
 * The command is a template: `--cmd 'BF.ADD bf {}'`. `{}` (or
 * `__rand_int__`) stands for random items, 16 hex digits of a per-thread
 * xorshift; `--items-per-request N` repeats it N times (BF.MADD of N
 * items). The first argument after the command name is the key: with
 * `--keys K` each request picks one of KEY:0 .. KEY:K-1, else all go to
 * the one key. Once a batch's replies are in, its items are overwritten in
 * place with fresh random ones (--no-refresh keeps them, and the stream
 * repeats), so adds keep adding new items.
 *
 * `--dups F` makes a fraction F of the items duplicates of items sent
 * earlier: the thread's items are then numbered (item = a bijective mix of
 * the thread and a counter, so fresh items never collide) and a batch's
 * items are written just before it is sent; a duplicate repeats one, drawn
 * uniformly, of the thread's items whose replies are all in (below the
 * oldest batch in flight), so the server has seen it whatever the order in
 * which it serves the connections. Integer replies of 0 are counted: to
 * BF.MADD into an exact filter they are exactly the duplicates; into a
 * plain one, the duplicates and the false positives.
 *
 * Replies are counted by scanning RESP (simple strings, errors, integers,
 * bulk strings, arrays, and RESP3's types), errors included at any depth:
 * the first one ends the run and the exit status is 1, unless --allow-errors
 * (then they are only counted).
 *
 * Prints one JSON object: requests/s, items/s, latency percentiles, the
 * client's CPU time (getrusage) and cores busy; with --server-pid, the
 * server's CPU time (its threads' /proc schedstat, before and after), per
 * item, and its cores busy, and which side was the limit.
 *
 *   build/bench/loadgen [-h HOST] [-p PORT] [-t THREADS] [-c CONNS/THREAD]
 *       [-P PIPELINE] [-n REQUESTS | -d SECONDS] --cmd TEMPLATE [-i ITEMS]
 *       [-k KEYS] [--dups F] [--server-pid PID [--server-cores N]]
 *       [--allow-errors]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <uv.h>

#define ITEM_HEX 16
/* "$16\r\n" + 16 hex digits + "\r\n" */
#define ITEM_BYTES (5 + ITEM_HEX + 2)
/* -DREAD_BUF=5 builds one that reads a few bytes at a time: every reply is
 * split across reads, which checks the scanner. */
#ifndef READ_BUF
#define READ_BUF (256 * 1024)
#endif
#define MAX_DEPTH 16
/* Log-linear histogram of nanoseconds: 32 buckets per power of two (3%). */
#define HIST_SUB 32
#define HIST_BUCKETS (60 * HIST_SUB)

static struct {
    const char *host;
    int port;
    int threads;
    int conns;
    int pipeline;
    uint64_t requests;
    double duration;
    const char *cmd;
    int items;
    int keys;
    int stream;
    bool refresh;
    bool allow_errors;
    uint64_t seed;
    int server_pid;
    int server_cores;
    double dups; /* < 0: items are random, refreshed after the reply */
} opt = {"127.0.0.1", 6379, 1, 50, 1, 0, 0, NULL, 1, 1, 0, true, false, 1, 0, 0, -1};

/* The template split into arguments; `item_arg` is the placeholder's index
 * (-1: none). */
static char **args;
static int nargs, item_arg = -1;
static struct sockaddr_storage addr;

struct parser {
    uint64_t left[MAX_DEPTH]; /* elements still due at each open array */
    int depth;
    uint64_t skip; /* bytes of a bulk string (and its CRLF) still to come */
    char type;     /* type of the line being read; 0 between lines */
    bool neg;
    bool capture; /* the line is the first error: keep its text */
    int64_t num;
};

struct worker;

struct conn {
    uv_tcp_t tcp;
    uv_write_t wr;
    struct worker *w;
    char *stream;       /* the connection's requests, encoded */
    uint32_t *req_end;  /* end offset of each request in stream */
    uint32_t *item_off; /* offset of each request's first item */
    uint32_t nreq;      /* requests in stream, a multiple of the pipeline */
    uint32_t next;      /* first request of the next batch */
    uint32_t first, n;  /* the batch in flight */
    uint32_t pending;   /* its replies not yet read */
    uint64_t id_lo;     /* --dups: the batch in flight's first item number */
    uint64_t sent_at;
    bool writing, deferred, closed;
    struct parser ps;
};

struct worker {
    pthread_t thread;
    int id;
    uv_loop_t loop;
    uv_timer_t timer;
    bool timer_open;
    struct conn *conns;
    int connected, active;
    bool stop;
    uint64_t budget; /* requests this thread may still send; UINT64_MAX: no bound */
    uint64_t rng;
    char *rbuf;
    uint64_t requests, errors, batches;
    uint64_t zeros;                      /* integer replies of 0 */
    uint64_t next_id, fresh, duplicates; /* --dups */
    uint64_t dup_threshold;
    uint64_t hist[HIST_BUCKETS];
    char first_error[128];
};

static struct worker *workers;
static pthread_barrier_t ready, go;
static char hexpair[256][2];

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("loadgen: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static void put_item(char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        memcpy(p + 2 * i, hexpair[v & 0xff], 2);
}

/* ---- encoding ---- */

struct buf {
    char *p;
    size_t len, cap;
};

static void buf_put(struct buf *b, const void *s, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 4096;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            die("out of memory");
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void buf_printf(struct buf *b, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    buf_put(b, tmp, (size_t)n);
}

static void build_stream(struct conn *c, uint64_t *rng)
{
    struct buf b = {0};
    int argc = nargs + (item_arg >= 0 ? opt.items - 1 : 0);
    c->req_end = malloc(sizeof(uint32_t) * c->nreq);
    c->item_off = malloc(sizeof(uint32_t) * c->nreq);
    if (!c->req_end || !c->item_off)
        die("out of memory");
    for (uint32_t r = 0; r < c->nreq; r++) {
        buf_printf(&b, "*%d\r\n", argc);
        for (int a = 0; a < nargs; a++) {
            if (a == item_arg) {
                c->item_off[r] = (uint32_t)b.len;
                for (int i = 0; i < opt.items; i++) {
                    char item[ITEM_BYTES] = "$16\r\n";
                    put_item(item + 5, xorshift(rng));
                    memcpy(item + 5 + ITEM_HEX, "\r\n", 2);
                    buf_put(&b, item, ITEM_BYTES);
                }
            } else if (a == 1 && opt.keys > 1) {
                char key[256];
                int n = snprintf(key, sizeof key, "%s:%u", args[a],
                                 (unsigned)(xorshift(rng) % (uint64_t)opt.keys));
                buf_printf(&b, "$%d\r\n", n);
                buf_put(&b, key, (size_t)n);
                buf_put(&b, "\r\n", 2);
            } else {
                size_t n = strlen(args[a]);
                buf_printf(&b, "$%zu\r\n", n);
                buf_put(&b, args[a], n);
                buf_put(&b, "\r\n", 2);
            }
        }
        if (b.len > UINT32_MAX)
            die("a connection's stream is over 4 GiB: lower --stream");
        c->req_end[r] = (uint32_t)b.len;
    }
    c->stream = b.p;
}

/* New items for the requests [first, first + n), already sent and answered. */
static void refresh_items(struct conn *c, uint32_t first, uint32_t n)
{
    uint64_t *rng = &c->w->rng;
    for (uint32_t r = first; r < first + n; r++) {
        char *p = c->stream + c->item_off[r] + 5;
        for (int i = 0; i < opt.items; i++, p += ITEM_BYTES)
            put_item(p, xorshift(rng));
    }
}

/* --dups: the items of the requests [first, first + n), just before they are
 * sent. A duplicate is one of the thread's items below the oldest batch in
 * flight on any of its connections, all of which have been answered. */
static void fill_items(struct conn *c, uint32_t first, uint32_t n)
{
    struct worker *w = c->w;
    uint64_t answered = w->next_id;
    for (int i = 0; i < opt.conns; i++) {
        if (w->conns[i].id_lo < answered)
            answered = w->conns[i].id_lo;
    }
    c->id_lo = w->next_id;
    uint64_t base = (uint64_t)w->id << 40, key = splitmix(opt.seed ^ 0xd0b5);
    for (uint32_t r = first; r < first + n; r++) {
        char *p = c->stream + c->item_off[r] + 5;
        for (int i = 0; i < opt.items; i++, p += ITEM_BYTES) {
            uint64_t id;
            if (answered && xorshift(&w->rng) < w->dup_threshold) {
                id = xorshift(&w->rng) % answered;
                w->duplicates++;
            } else {
                id = w->next_id++;
                w->fresh++;
            }
            put_item(p, splitmix((base | id) ^ key));
        }
    }
}

/* ---- replies ---- */

/* One element is complete: returns 1 when that completes a top-level reply. */
static uint32_t element_done(struct parser *ps)
{
    while (ps->depth > 0) {
        if (--ps->left[ps->depth - 1] > 0)
            return 0;
        ps->depth--;
    }
    return 1;
}

static void push_array(struct parser *ps, uint64_t n)
{
    if (ps->depth == MAX_DEPTH)
        die("replies nested deeper than %d arrays", MAX_DEPTH);
    ps->left[ps->depth++] = n;
}

/* The first error's text is kept, for the report; it may come in pieces. */
static void note_error(struct parser *ps, struct worker *w)
{
    w->errors++;
    ps->capture = !w->first_error[0];
    /* Unless errors are expected, the first ends the thread's run. */
    if (!opt.allow_errors)
        w->stop = true;
}

static void append_error(struct worker *w, const char *p, const char *end)
{
    size_t have = strlen(w->first_error), n = (size_t)(end - p);
    if (n > sizeof w->first_error - 1 - have)
        n = sizeof w->first_error - 1 - have;
    memcpy(w->first_error + have, p, n);
    w->first_error[have + n] = 0;
    char *cr = strchr(w->first_error, '\r');
    if (cr)
        *cr = 0;
}

/* Scans [p, end), which may start or stop anywhere in a reply; returns the
 * top-level replies it completed. */
static uint32_t parse(struct parser *ps, struct worker *w, const char *p, const char *end)
{
    uint32_t done = 0;
    while (p < end) {
        if (ps->skip) {
            uint64_t n = (uint64_t)(end - p) < ps->skip ? (uint64_t)(end - p) : ps->skip;
            p += n;
            ps->skip -= n;
            if (!ps->skip)
                done += element_done(ps);
            continue;
        }
        if (!ps->type) {
            /* The usual reply to an add or a check, in one step. */
            if (end - p >= 4 && p[0] == ':' && p[2] == '\r' && p[3] == '\n') {
                w->zeros += p[1] == '0';
                p += 4;
                done += element_done(ps);
                continue;
            }
            ps->type = *p++;
            ps->num = 0;
            ps->neg = false;
            if (ps->type == '-')
                note_error(ps, w);
            continue;
        }
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        if (strchr("$*%~>=!", ps->type)) {
            for (const char *q = p; q < stop; q++) {
                if (*q >= '0' && *q <= '9')
                    ps->num = ps->num * 10 + (*q - '0');
                else if (*q == '-')
                    ps->neg = true;
            }
        }
        if (ps->type == '-' && ps->capture)
            append_error(w, p, stop);
        if (!nl)
            break;
        p = nl + 1;
        ps->capture = false;
        char type = ps->type;
        int64_t num = ps->neg ? -ps->num : ps->num;
        ps->type = 0;
        switch (type) {
        case '!': /* a RESP3 blob error */
            note_error(ps, w);
            if (ps->capture) {
                static const char blob[] = "(blob error)";
                append_error(w, blob, blob + sizeof blob - 1);
                ps->capture = false;
            }
            /* fall through */
        case '$':
        case '=':
            if (num < 0)
                done += element_done(ps);
            else
                ps->skip = (uint64_t)num + 2;
            break;
        case '*':
        case '~':
        case '>':
        case '%':
            if (type == '%')
                num *= 2;
            if (num <= 0)
                done += element_done(ps);
            else
                push_array(ps, (uint64_t)num);
            break;
        default:
            w->zeros += type == ':' && num == 0;
            done += element_done(ps);
            break;
        }
    }
    return done;
}

/* ---- connections ---- */

static void hist_add(struct worker *w, uint64_t ns)
{
    int idx;
    if (ns < 2 * HIST_SUB) {
        idx = (int)ns;
    } else {
        int shift = 63 - __builtin_clzll(ns) - 5;
        idx = (shift + 1) * HIST_SUB + (int)(ns >> shift) - HIST_SUB;
    }
    if (idx >= HIST_BUCKETS)
        idx = HIST_BUCKETS - 1;
    w->hist[idx]++;
}

/* The middle of a bucket, in nanoseconds. */
static double hist_value(int idx)
{
    if (idx < 2 * HIST_SUB)
        return idx;
    int shift = idx / HIST_SUB - 1;
    double low = (double)((uint64_t)(idx % HIST_SUB + HIST_SUB) << shift);
    return low + (double)(1ULL << shift) / 2;
}

static void on_closed(uv_handle_t *h) { (void)h; }

static void conn_finish(struct conn *c)
{
    if (c->closed)
        return;
    c->closed = true;
    uv_close((uv_handle_t *)&c->tcp, on_closed);
    struct worker *w = c->w;
    if (--w->active == 0 && w->timer_open) {
        w->timer_open = false;
        uv_close((uv_handle_t *)&w->timer, on_closed);
    }
}

static void on_written(uv_write_t *req, int status);

static void send_batch(struct conn *c)
{
    struct worker *w = c->w;
    if (w->stop || w->budget == 0) {
        conn_finish(c);
        return;
    }
    uint32_t n = (uint32_t)opt.pipeline;
    if (w->budget != UINT64_MAX) {
        if (w->budget < n)
            n = (uint32_t)w->budget;
        w->budget -= n;
    }
    uint32_t first = c->next;
    size_t from = first ? c->req_end[first - 1] : 0;
    size_t to = c->req_end[first + n - 1];
    c->first = first;
    c->n = n;
    c->pending = n;
    if (opt.dups >= 0 && item_arg >= 0)
        fill_items(c, first, n);
    c->next = (first + (uint32_t)opt.pipeline) % c->nreq;
    c->sent_at = uv_hrtime();
    uv_buf_t b = uv_buf_init(c->stream + from, (unsigned)(to - from));
    int r = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (r == UV_EAGAIN)
        r = 0;
    else if (r < 0)
        die("write: %s", uv_strerror(r));
    if ((size_t)r < b.len) {
        b.base += r;
        b.len -= (size_t)r;
        c->writing = true;
        r = uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, on_written);
        if (r < 0)
            die("write: %s", uv_strerror(r));
    }
}

static void on_written(uv_write_t *req, int status)
{
    struct conn *c = req->data;
    if (status < 0)
        die("write: %s", uv_strerror(status));
    c->writing = false;
    if (c->deferred) {
        c->deferred = false;
        send_batch(c);
    }
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    (void)hint;
    struct conn *c = h->data;
    *b = uv_buf_init(c->w->rbuf, READ_BUF);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct conn *c = s->data;
    struct worker *w = c->w;
    if (nread < 0)
        die("read: %s (the server closed a connection%s%s)", uv_strerror((int)nread),
            w->first_error[0] ? "; its first error reply: " : "", w->first_error);
    if (nread == 0)
        return;
    uint32_t done = parse(&c->ps, w, b->base, b->base + nread);
    if (!done)
        return;
    if (done > c->pending)
        die("%u replies to %u requests", done, c->pending);
    c->pending -= done;
    if (c->pending)
        return;
    hist_add(w, uv_hrtime() - c->sent_at);
    w->requests += c->n;
    w->batches++;
    c->id_lo = UINT64_MAX;
    if (opt.refresh && opt.dups < 0 && item_arg >= 0)
        refresh_items(c, c->first, c->n);
    if (c->writing)
        c->deferred = true;
    else
        send_batch(c);
}

static void on_connect(uv_connect_t *req, int status)
{
    struct conn *c = req->data;
    free(req);
    if (status < 0)
        die("connect to %s:%d: %s", opt.host, opt.port, uv_strerror(status));
    uv_tcp_nodelay(&c->tcp, 1);
    if (++c->w->connected == opt.conns)
        uv_stop(&c->w->loop);
}

static void on_timer(uv_timer_t *t)
{
    struct worker *w = t->data;
    w->stop = true;
    if (w->timer_open) {
        w->timer_open = false;
        uv_close((uv_handle_t *)&w->timer, on_closed);
    }
}

static void *run_worker(void *arg)
{
    struct worker *w = arg;
    w->rbuf = malloc(READ_BUF);
    w->conns = calloc((size_t)opt.conns, sizeof *w->conns);
    if (!w->rbuf || !w->conns)
        die("out of memory");
    uv_loop_init(&w->loop);
    for (int i = 0; i < opt.conns; i++) {
        struct conn *c = &w->conns[i];
        c->w = w;
        c->id_lo = UINT64_MAX;
        c->nreq = (uint32_t)opt.stream;
        build_stream(c, &w->rng);
        uv_tcp_init(&w->loop, &c->tcp);
        c->tcp.data = c;
        c->wr.data = c;
        uv_connect_t *req = malloc(sizeof *req);
        req->data = c;
        int r = uv_tcp_connect(req, &c->tcp, (struct sockaddr *)&addr, on_connect);
        if (r < 0)
            die("connect: %s", uv_strerror(r));
    }
    uv_run(&w->loop, UV_RUN_DEFAULT);
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&go);
    w->active = opt.conns;
    if (opt.duration > 0) {
        uv_timer_init(&w->loop, &w->timer);
        w->timer.data = w;
        w->timer_open = true;
        uv_timer_start(&w->timer, on_timer, (uint64_t)(opt.duration * 1000), 0);
    }
    for (int i = 0; i < opt.conns; i++) {
        uv_read_start((uv_stream_t *)&w->conns[i].tcp, on_alloc, on_read);
        send_batch(&w->conns[i]);
    }
    uv_run(&w->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* ---- measuring ---- */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* CPU seconds of every thread of pid, from the scheduler's nanosecond
 * counts; -1 if pid is gone. */
static double proc_cpu(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    double total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[300];
        snprintf(p, sizeof p, "/proc/%d/task/%s/schedstat", pid, e->d_name);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        unsigned long long ns;
        if (fscanf(f, "%llu", &ns) == 1)
            total += (double)ns / 1e9;
        fclose(f);
    }
    closedir(d);
    return total;
}

static void rusage_cpu(double *user, double *sys)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
    *sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

/* ---- options ---- */

static void usage(FILE *f)
{
    fprintf(f, "usage: loadgen [options] --cmd 'BF.ADD bf {}'\n"
               "  -h, --host HOST            server address (127.0.0.1)\n"
               "  -p, --port PORT            server port (6379)\n"
               "  -t, --threads N            client threads, one event loop each (1)\n"
               "  -c, --connections N        connections per thread (50)\n"
               "  -P, --pipeline N           requests per batch on a connection (1)\n"
               "  -n, --requests N           total requests (1000000 unless -d)\n"
               "  -d, --duration SECONDS     run this long (with -n: whichever ends first)\n"
               "      --cmd TEMPLATE         the request; {} or __rand_int__ is a random item,\n"
               "                             the argument after the command name the key\n"
               "  -i, --items-per-request N  items in place of the one {} (1)\n"
               "  -k, --keys K               spread requests over KEY:0..KEY:K-1 (1: one key)\n"
               "      --stream N             requests encoded per connection (a multiple of -P;\n"
               "                             default: max(P, 64, 2K) rounded up)\n"
               "      --no-refresh           send the same encoded items again, never new ones\n"
               "      --seed N               random seed (1)\n"
               "      --allow-errors         error replies are counted, not fatal\n"
               "      --dups F               a fraction F of the items repeat earlier ones\n"
               "      --server-pid PID       also measure that process's CPU time\n"
               "      --server-cores N       cores the server may use (default: its affinity)\n");
}

static uint64_t num_arg(const char *s, const char *name, uint64_t min, uint64_t max)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || end == s || v < min || v > max)
        die("%s: %s is not a number in [%" PRIu64 ", %" PRIu64 "]", name, s, min, max);
    return v;
}

static void parse_options(int argc, char **argv)
{
    enum { O_CMD = 256, O_STREAM, O_NOREFRESH, O_SEED, O_ALLOW, O_SPID, O_SCORES, O_DUPS, O_HELP };
    static const struct option longopts[] = {
        {"host", required_argument, NULL, 'h'},
        {"port", required_argument, NULL, 'p'},
        {"threads", required_argument, NULL, 't'},
        {"connections", required_argument, NULL, 'c'},
        {"pipeline", required_argument, NULL, 'P'},
        {"requests", required_argument, NULL, 'n'},
        {"duration", required_argument, NULL, 'd'},
        {"items-per-request", required_argument, NULL, 'i'},
        {"keys", required_argument, NULL, 'k'},
        {"cmd", required_argument, NULL, O_CMD},
        {"stream", required_argument, NULL, O_STREAM},
        {"no-refresh", no_argument, NULL, O_NOREFRESH},
        {"seed", required_argument, NULL, O_SEED},
        {"allow-errors", no_argument, NULL, O_ALLOW},
        {"server-pid", required_argument, NULL, O_SPID},
        {"server-cores", required_argument, NULL, O_SCORES},
        {"dups", required_argument, NULL, O_DUPS},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "h:p:t:c:P:n:d:i:k:", longopts, NULL)) != -1) {
        switch (ch) {
        case 'h': opt.host = optarg; break;
        case 'p': opt.port = (int)num_arg(optarg, "--port", 1, 65535); break;
        case 't': opt.threads = (int)num_arg(optarg, "--threads", 1, 1024); break;
        case 'c': opt.conns = (int)num_arg(optarg, "--connections", 1, 100000); break;
        case 'P': opt.pipeline = (int)num_arg(optarg, "--pipeline", 1, 1000000); break;
        case 'n': opt.requests = num_arg(optarg, "--requests", 1, UINT64_MAX - 1); break;
        case 'd': {
            char *end;
            opt.duration = strtod(optarg, &end);
            if (*end || end == optarg || !(opt.duration > 0))
                die("--duration: %s is not a positive number of seconds", optarg);
            break;
        }
        case 'i': opt.items = (int)num_arg(optarg, "--items-per-request", 1, 1000000); break;
        case 'k': opt.keys = (int)num_arg(optarg, "--keys", 1, 100000000); break;
        case O_CMD: opt.cmd = optarg; break;
        case O_STREAM: opt.stream = (int)num_arg(optarg, "--stream", 1, 100000000); break;
        case O_NOREFRESH: opt.refresh = false; break;
        case O_SEED: opt.seed = num_arg(optarg, "--seed", 0, UINT64_MAX); break;
        case O_ALLOW: opt.allow_errors = true; break;
        case O_SPID: opt.server_pid = (int)num_arg(optarg, "--server-pid", 1, INT32_MAX); break;
        case O_SCORES: opt.server_cores = (int)num_arg(optarg, "--server-cores", 1, 65536); break;
        case O_DUPS: {
            char *end;
            opt.dups = strtod(optarg, &end);
            if (*end || end == optarg || !(opt.dups >= 0 && opt.dups < 1))
                die("--dups: %s is not a fraction in [0, 1)", optarg);
            break;
        }
        case O_HELP: usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind != argc || !opt.cmd) {
        usage(stderr);
        exit(2);
    }
    if (!opt.requests && !(opt.duration > 0))
        opt.requests = 1000000;

    char *copy = strdup(opt.cmd);
    args = calloc(strlen(opt.cmd) / 2 + 2, sizeof *args);
    for (char *save = NULL, *a = strtok_r(copy, " \t", &save); a; a = strtok_r(NULL, " \t", &save))
        args[nargs++] = a;
    if (!nargs)
        die("--cmd is empty");
    for (int a = 0; a < nargs; a++) {
        if (!strcmp(args[a], "{}") || !strcmp(args[a], "__rand_int__")) {
            if (item_arg >= 0)
                die("--cmd: one {} at most (--items-per-request repeats it)");
            item_arg = a;
        }
    }
    if (opt.items > 1 && item_arg < 0)
        die("--items-per-request needs a {} in --cmd");
    if (opt.dups >= 0 && item_arg < 0)
        die("--dups needs a {} in --cmd");
    if (opt.keys > 1 && (nargs < 2 || item_arg == 1))
        die("--keys needs a key after the command name");

    uint64_t min = (uint64_t)(opt.keys > 32 ? 2 * opt.keys : 64);
    if (!opt.stream)
        opt.stream = (int)(min > (uint64_t)opt.pipeline ? min : (uint64_t)opt.pipeline);
    opt.stream = (opt.stream + opt.pipeline - 1) / opt.pipeline * opt.pipeline;
}

static void resolve(void)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
    char port[16];
    snprintf(port, sizeof port, "%d", opt.port);
    int r = getaddrinfo(opt.host, port, &hints, &res);
    if (r)
        die("%s: %s", opt.host, gai_strerror(r));
    memcpy(&addr, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
}

int main(int argc, char **argv)
{
    parse_options(argc, argv);
    resolve();
    signal(SIGPIPE, SIG_IGN);
    /* Many connections need as many descriptors. */
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl)) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 256; i++) {
        hexpair[i][0] = hex[i >> 4];
        hexpair[i][1] = hex[i & 15];
    }

    workers = calloc((size_t)opt.threads, sizeof *workers);
    if (!workers)
        die("out of memory");
    pthread_barrier_init(&ready, NULL, (unsigned)opt.threads + 1);
    pthread_barrier_init(&go, NULL, (unsigned)opt.threads + 1);
    for (int t = 0; t < opt.threads; t++) {
        struct worker *w = &workers[t];
        w->id = t;
        w->rng = splitmix(opt.seed * 0x100000001b3ULL + (uint64_t)t) | 1;
        w->budget = UINT64_MAX;
        w->dup_threshold = opt.dups > 0 ? (uint64_t)(opt.dups * 18446744073709551615.0) : 0;
        if (opt.requests) {
            w->budget = opt.requests / (uint64_t)opt.threads +
                        ((uint64_t)t < opt.requests % (uint64_t)opt.threads);
        }
        if (pthread_create(&w->thread, NULL, run_worker, w))
            die("pthread_create failed");
    }
    pthread_barrier_wait(&ready);

    /* Everything is encoded and connected: the run starts here. */
    double user0, sys0;
    rusage_cpu(&user0, &sys0);
    double server0 = opt.server_pid ? proc_cpu(opt.server_pid) : 0;
    if (server0 < 0)
        die("no process %d", opt.server_pid);
    double t0 = now();
    pthread_barrier_wait(&go);
    for (int t = 0; t < opt.threads; t++)
        pthread_join(workers[t].thread, NULL);
    double wall = now() - t0;
    double server1 = opt.server_pid ? proc_cpu(opt.server_pid) : 0;
    double user1, sys1;
    rusage_cpu(&user1, &sys1);

    uint64_t requests = 0, errors = 0, batches = 0, zeros = 0, fresh = 0, duplicates = 0;
    static uint64_t hist[HIST_BUCKETS];
    const char *first_error = "";
    for (int t = 0; t < opt.threads; t++) {
        struct worker *w = &workers[t];
        requests += w->requests;
        errors += w->errors;
        batches += w->batches;
        zeros += w->zeros;
        fresh += w->fresh;
        duplicates += w->duplicates;
        for (int i = 0; i < HIST_BUCKETS; i++)
            hist[i] += w->hist[i];
        if (!first_error[0])
            first_error = w->first_error;
    }
    double pct[4] = {0.50, 0.99, 0.999, 1.0}, lat[4] = {0};
    uint64_t seen = 0;
    int k = 0;
    for (int i = 0; i < HIST_BUCKETS && k < 4; i++) {
        seen += hist[i];
        while (k < 4 && hist[i] && (double)seen >= pct[k] * (double)batches)
            lat[k++] = hist_value(i) / 1e3;
    }
    uint64_t items = requests * (uint64_t)(item_arg >= 0 ? opt.items : 1);
    double client_cpu = (user1 - user0) + (sys1 - sys0);

    printf("{\"host\": ");
    json_string(opt.host);
    printf(", \"port\": %d, \"command\": ", opt.port);
    json_string(opt.cmd);
    printf(", \"items_per_request\": %d, \"keys\": %d, \"threads\": %d, "
           "\"connections\": %d, \"pipeline\": %d, \"stream_requests\": %d, \"refresh\": %s,\n",
           item_arg >= 0 ? opt.items : 1, opt.keys, opt.threads, opt.threads * opt.conns,
           opt.pipeline, opt.stream, opt.refresh ? "true" : "false");
    printf(" \"requests\": %" PRIu64 ", \"items\": %" PRIu64 ", \"errors\": %" PRIu64
           ", \"first_error\": ",
           requests, items, errors);
    json_string(first_error);
    printf(", \"replies_zero\": %" PRIu64, zeros);
    if (opt.dups >= 0) {
        printf(", \"dups\": %g, \"items_fresh\": %" PRIu64 ", \"items_dup\": %" PRIu64, opt.dups,
               fresh, duplicates);
    }
    printf(", \"wall_s\": %.4f, \"requests_s\": %.0f, \"items_s\": %.0f,\n", wall,
           (double)requests / wall, (double)items / wall);
    printf(" \"latency_us\": {\"p50\": %.1f, \"p99\": %.1f, \"p999\": %.1f, \"max\": %.1f, "
           "\"batches\": %" PRIu64 "},\n",
           lat[0], lat[1], lat[2], lat[3], batches);
    double client_busy = client_cpu / wall;
    double client_util = client_busy / opt.threads;
    printf(" \"client_cpu_s\": %.4f, \"client_user_s\": %.4f, \"client_sys_s\": %.4f, "
           "\"client_cores_busy\": %.3f, \"client_util\": %.3f",
           client_cpu, user1 - user0, sys1 - sys0, client_busy, client_util);
    if (opt.server_pid) {
        int cores = opt.server_cores;
        if (!cores) {
            cpu_set_t set;
            CPU_ZERO(&set);
            cores = sched_getaffinity(opt.server_pid, sizeof set, &set) ? 1 : CPU_COUNT(&set);
        }
        double server_cpu = server1 < 0 ? -1 : server1 - server0;
        double server_busy = server_cpu / wall, server_util = server_busy / cores;
        /* The side nearer to all of its cores busy held the rate back;
         * neither, when both had a quarter of their cores to spare. */
        const char *limit = server_util >= client_util ? "server" : "client";
        if (server_util < 0.75 && client_util < 0.75)
            limit = "neither";
        printf(",\n \"server_pid\": %d, \"server_cpu_s\": %.4f, \"server_cpu_per_item_us\": %.4f, "
               "\"server_cores\": %d, \"server_cores_busy\": %.3f, \"server_util\": %.3f, "
               "\"limit\": \"%s\"",
               opt.server_pid, server_cpu, items ? server_cpu * 1e6 / (double)items : 0.0, cores,
               server_busy, server_util, limit);
    }
    printf("}\n");
    if (errors && !opt.allow_errors) {
        fprintf(stderr, "loadgen: %" PRIu64 " error replies, the first: %s\n", errors, first_error);
        return 1;
    }
    return 0;
}

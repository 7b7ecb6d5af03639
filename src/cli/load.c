/* bloomery load / bloomery check: stream keys from files or stdin to a
 * bloomeryd (or any RedisBloom-compatible server) as pipelined BF.MADD or
 * BF.MEXISTS commands of --batch keys each, with up to --pipeline commands
 * in flight on one connection. Replies are matched to batches in order; an
 * error reply (for example "ERR non scaling filter is full") stops the run
 * with the server's text and exit code 1. check writes the keys that may
 * exist (or, with --missing, those that do not; with --all every key with 1
 * or 0) in input order. The connection takes redis-cli's options: TLS
 * (rtls.c) and AUTH [user] password before anything else. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "rcall.h"
#include "records.h"

typedef struct batch {
    char *keys; /* key bytes back to back */
    size_t klen, kcap;
    size_t *lens;
    size_t n, cap;
} batch;

typedef struct loader {
    const char *prog;
    bool check;
    int show; /* check: 1 may exist, 0 missing, 2 all */
    const char *name;
    size_t batch_size, depth;
    batch *ring; /* depth batches; head is the oldest in flight */
    size_t head, inflight;
    rc_conn conn;
    long long *ints;
    uint64_t keys, positive, replies;
    FILE *out;
    char err[512];
} loader;

static void loadcheck_usage(FILE *f, bool check)
{
    const char *cmd = check ? "check" : "load";
    fprintf(f, "usage: bloomery %s [options] --key NAME [FILE...]\n\n", cmd);
    if (check)
        fprintf(f, "Asks a bloomeryd (or any RedisBloom-compatible server) which keys may be in\n"
                   "the filter NAME, with pipelined BF.MEXISTS commands, and writes the keys that\n"
                   "may exist to stdout in input order.\n\n");
    else
        fprintf(f, "Adds keys to the filter NAME on a bloomeryd (or any RedisBloom-compatible\n"
                   "server) with pipelined BF.MADD commands.\n\n");
    fprintf(f, "Keys are the records (lines) of the FILEs, or of stdin when there are none.\n"
               "\n"
               "      --key NAME        the filter (required)\n"
               "  -H, --host HOST       server host (default 127.0.0.1)\n"
               "  -p, --port PORT       server port (default 6379)\n");
    fputs(rc_opts_help, f);
    fprintf(f, "  -b, --batch N         keys per command (default 1000)\n"
               "  -P, --pipeline N      commands in flight (default 16)\n"
               "  -f, --fields LIST     key fields of each record, 1-based, e.g. 1,3-5\n"
               "                        (default: the whole record)\n"
               "  -d, --delimiter C     field delimiter: one byte, or \\t (default), comma\n"
               "  -z, --zero            records end with NUL instead of newline\n");
    if (check)
        fprintf(f, "      --missing         write the keys that are certainly absent instead\n"
                   "      --all             write every key as \"1<TAB>key\" or \"0<TAB>key\"\n");
    else
        fprintf(f, "  -n, --capacity N      first BF.RESERVE NAME with this capacity (an existing\n"
                   "                        filter is kept)\n"
                   "  -e, --error P         its error rate (default 0.01)\n"
                   "      --nonscaling      reserve a filter that does not grow\n");
    fprintf(f,
            "      --progress        progress on stderr (default when it is a terminal)\n"
            "      --no-progress\n"
            "  -q, --quiet           no summary\n"
            "\n"
            "A summary (keys, %s, seconds, keys per second) goes to stderr. An error\n"
            "reply stops the run with the server's message.\n"
            "\n"
            "Exit codes: 0 ok, 1 error (input, connection, or an error reply), 2 usage.\n",
            check ? "how many may exist" : "how many were new");
}

static int batch_add(batch *b, const char *key, size_t len)
{
    if (b->n == b->cap) {
        size_t c = b->cap ? b->cap * 2 : 1024;
        size_t *l = realloc(b->lens, c * sizeof *l);
        if (!l)
            return -1;
        b->lens = l;
        b->cap = c;
    }
    if (b->klen + len > b->kcap) {
        size_t c = b->kcap ? b->kcap : 65536;
        while (c < b->klen + len)
            c *= 2;
        char *k = realloc(b->keys, c);
        if (!k)
            return -1;
        b->keys = k;
        b->kcap = c;
    }
    if (len)
        memcpy(b->keys + b->klen, key, len);
    b->klen += len;
    b->lens[b->n++] = len;
    return 0;
}

static int send_batch(loader *L, batch *b)
{
    const char *cmd = L->check ? "BF.MEXISTS" : "BF.MADD";
    if (rc_begin(&L->conn, b->n + 2) != 0 || rc_arg(&L->conn, cmd, strlen(cmd)) != 0 ||
        rc_arg(&L->conn, L->name, strlen(L->name)) != 0)
        return -1;
    size_t off = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (rc_arg(&L->conn, b->keys + off, b->lens[i]) != 0)
            return -1;
        off += b->lens[i];
    }
    return 0;
}

static void write_key(loader *L, const char *k, size_t len, long long v)
{
    if (L->show == 2)
        fprintf(L->out, "%d\t", v == 1);
    else if ((v == 1) != (L->show == 1))
        return;
    fwrite(k, 1, len, L->out);
    fputc('\n', L->out);
}

/* Handles every complete reply in the input buffer. 0 ok, -1 error. */
static int take_replies(loader *L)
{
    rc_conn *c = &L->conn;
    while (L->inflight > 0) {
        batch *b = &L->ring[L->head];
        rc_reply r = {.ints = L->ints, .ints_cap = L->batch_size};
        size_t used;
        int rc = rc_parse(c->in.p + c->in.pos, c->in.len - c->in.pos, &used, &r);
        if (rc == 0)
            return 0;
        if (rc < 0) {
            snprintf(L->err, sizeof L->err, "cannot parse the server's reply");
            return -1;
        }
        c->in.pos += used;
        L->replies++;
        if (r.err) {
            int n = (int)(r.errlen > 400 ? 400 : r.errlen);
            snprintf(L->err, sizeof L->err, "server error: %.*s", n, r.err);
            return -1;
        }
        if (r.type != '*' || r.nelem != b->n) {
            snprintf(L->err, sizeof L->err,
                     "unexpected reply to %s (type '%c', %zu elements for %zu keys)",
                     L->check ? "BF.MEXISTS" : "BF.MADD", r.type, r.type == '*' ? r.nelem : 0,
                     b->n);
            return -1;
        }
        size_t off = 0;
        for (size_t i = 0; i < b->n; i++) {
            long long v = L->ints[i];
            if (v != 0 && v != 1) {
                snprintf(L->err, sizeof L->err, "unexpected element in the reply: %lld", v);
                return -1;
            }
            L->positive += v == 1;
            if (L->check)
                write_key(L, b->keys + off, b->lens[i], v);
            off += b->lens[i];
        }
        if (L->check && ferror(L->out)) {
            snprintf(L->err, sizeof L->err, "cannot write the output: %s", strerror(errno));
            return -1;
        }
        b->n = b->klen = 0;
        L->head = (L->head + 1) % L->depth;
        L->inflight--;
    }
    if (c->in.pos == c->in.len)
        c->in.pos = c->in.len = 0;
    return 0;
}

/* Waits for the oldest batch's reply (or any progress). */
static int pump(loader *L)
{
    if (rc_pump(&L->conn, 1000, L->err, sizeof L->err) != 0)
        return -1;
    return take_replies(L);
}

/* Sends one command and waits for its reply, written to reply as its type
 * byte and text ("+OK", "-ERR item exists"). 0, or -1 with L->err set. */
static int simple_command(loader *L, int argc, const char **argv, char *reply, size_t rlen)
{
    rc_conn *c = &L->conn;
    if (rc_begin(c, (size_t)argc) != 0)
        return -1;
    for (int i = 0; i < argc; i++)
        if (rc_arg(c, argv[i], strlen(argv[i])) != 0)
            return -1;
    for (;;) {
        rc_reply r = {0};
        size_t used;
        int rc = rc_parse(c->in.p + c->in.pos, c->in.len - c->in.pos, &used, &r);
        if (rc < 0) {
            snprintf(L->err, sizeof L->err, "cannot parse the server's reply");
            return -1;
        }
        if (rc > 0) {
            snprintf(reply, rlen, "%c%.*s", r.type, (int)(r.len > 200 ? 200 : r.len),
                     r.str ? r.str : "");
            c->in.pos += used;
            return 0;
        }
        if (rc_pump(c, 1000, L->err, sizeof L->err) != 0)
            return -1;
    }
}

static void progress(loader *L, double t0, bool final)
{
    double s = cli_now() - t0;
    fprintf(stderr, "\r%s %llu keys, %.0f keys/s%s", L->check ? "check" : "load",
            (unsigned long long)L->keys, s > 0 ? (double)L->keys / s : 0.0, final ? "\n" : "");
}

static int run(int argc, char **argv, bool check)
{
    const char *prog = check ? "bloomery check" : "bloomery load";
    const char *host = "127.0.0.1", *port = "6379", *name = NULL, *fields = NULL;
    rc_opts conn = {0};
    unsigned long long batch_size = 1000, depth = 16, capacity = 0;
    double error = 0.01;
    bool nonscaling = false, quiet = false;
    int show = 1, show_progress = -1;
    unsigned char fs = '\t', rs = '\n';
    char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    int ninputs = 0;
    if (!inputs) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return CLI_ERROR;
    }
    bool only_args = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_args || a[0] != '-' || strcmp(a, "-") == 0) {
            inputs[ninputs++] = argv[i];
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_args = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            loadcheck_usage(stdout, check);
            free(inputs);
            return CLI_OK;
        }
        if (strcmp(a, "-z") == 0 || strcmp(a, "--zero") == 0) {
            rs = '\0';
            continue;
        }
        if (strcmp(a, "--progress") == 0 || strcmp(a, "--no-progress") == 0) {
            show_progress = a[2] == 'p';
            continue;
        }
        if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = true;
            continue;
        }
        if (check && (strcmp(a, "--missing") == 0 || strcmp(a, "--all") == 0)) {
            show = a[2] == 'm' ? 0 : 2;
            continue;
        }
        int taken = rc_opts_arg(&conn, argc, argv, &i, prog);
        if (taken != 0) {
            if (taken > 0)
                continue;
            free(inputs);
            return CLI_USAGE;
        }
        if (!check && strcmp(a, "--nonscaling") == 0) {
            nonscaling = true;
            continue;
        }
        static const char *valued[] = {"--key",       "-H", "--host",     "-p", "--port",   "-b",
                                       "--batch",     "-P", "--pipeline", "-f", "--fields", "-d",
                                       "--delimiter", "-n", "--capacity", "-e", "--error"};
        bool known = false;
        for (size_t j = 0; j < sizeof valued / sizeof valued[0]; j++)
            known = known || strcmp(a, valued[j]) == 0;
        if (check && (a[1] == 'n' || a[1] == 'e' || strcmp(a, "--capacity") == 0 ||
                      strcmp(a, "--error") == 0))
            known = false;
        if (!known) {
            fprintf(stderr, "%s: unknown option '%s'\n(bloomery %s --help lists the options)\n",
                    prog, a, check ? "check" : "load");
            free(inputs);
            return CLI_USAGE;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s: %s needs a value\n", prog, a);
            free(inputs);
            return CLI_USAGE;
        }
        const char *v = argv[++i];
        bool bad = false;
        if (strcmp(a, "--key") == 0)
            name = v;
        else if (strcmp(a, "-H") == 0 || strcmp(a, "--host") == 0)
            host = v;
        else if (strcmp(a, "-p") == 0 || strcmp(a, "--port") == 0) {
            unsigned long long pn;
            bad = cli_parse_count(v, &pn) != 0 || pn == 0 || pn > 65535;
            port = v;
        } else if (strcmp(a, "-b") == 0 || strcmp(a, "--batch") == 0)
            bad = cli_parse_count(v, &batch_size) != 0 || batch_size == 0 || batch_size > 1000000;
        else if (strcmp(a, "-P") == 0 || strcmp(a, "--pipeline") == 0)
            bad = cli_parse_count(v, &depth) != 0 || depth == 0 || depth > 4096;
        else if (strcmp(a, "-f") == 0 || strcmp(a, "--fields") == 0)
            fields = v;
        else if (strcmp(a, "-d") == 0 || strcmp(a, "--delimiter") == 0)
            bad = cli_parse_delim(v, &fs) != 0;
        else if (strcmp(a, "-n") == 0 || strcmp(a, "--capacity") == 0)
            bad = cli_parse_count(v, &capacity) != 0 || capacity == 0;
        else
            bad = cli_parse_double(v, &error) != 0 || !(error > 0 && error < 1);
        if (bad) {
            fprintf(stderr, "%s: bad value for %s: '%s'\n", prog, a, v);
            free(inputs);
            return CLI_USAGE;
        }
    }
    const char *conflict = rc_opts_finish(&conn);
    if (conflict) {
        fprintf(stderr, "%s: %s\n", prog, conflict);
        free(inputs);
        return CLI_USAGE;
    }
    keyspec ks;
    if (!name || !*name) {
        fprintf(stderr, "%s: --key NAME (the filter) is required\n", prog);
        free(inputs);
        return CLI_USAGE;
    }
    if (keyspec_parse(&ks, fields, fs) != 0) {
        fprintf(stderr, "%s: bad --fields list '%s'\n", prog, fields);
        free(inputs);
        return CLI_USAGE;
    }
    int nstdin = 0;
    for (int i = 0; i < ninputs; i++)
        nstdin += strcmp(inputs[i], "-") == 0;
    bool all_regular;
    uint64_t total;
    if (nstdin > 1) {
        fprintf(stderr, "%s: stdin ('-') can be read only once\n", prog);
        keyspec_free(&ks);
        free(inputs);
        return CLI_USAGE;
    }
    if (rdr_check_inputs(prog, inputs, ninputs, &all_regular, &total) != 0) {
        keyspec_free(&ks);
        free(inputs);
        return CLI_ERROR;
    }

    int rc = CLI_OK;
    loader L = {0};
    L.prog = prog;
    L.check = check;
    L.show = show;
    L.name = name;
    L.batch_size = batch_size;
    L.depth = depth;
    L.out = stdout;
    L.conn.fd = -1;
    rdr rd;
    rdr_init(&rd, prog, inputs, ninputs, rs);
    char *buf = NULL, *kscratch = NULL;
    size_t cap = 0, kcap = 0;
    L.ring = calloc(depth, sizeof *L.ring);
    L.ints = calloc(batch_size, sizeof *L.ints);
    if (!L.ring || !L.ints) {
        snprintf(L.err, sizeof L.err, "out of memory");
        goto fail;
    }
    if (rc_open(&L.conn, host, port, &conn, L.err, sizeof L.err) != 0)
        goto fail;
    if (capacity) {
        char cbuf[32], ebuf[32], reply[256];
        snprintf(cbuf, sizeof cbuf, "%llu", capacity);
        snprintf(ebuf, sizeof ebuf, "%.17g", error);
        const char *args[] = {"BF.RESERVE", name, ebuf, cbuf, "NONSCALING"};
        if (simple_command(&L, nonscaling ? 5 : 4, args, reply, sizeof reply) != 0)
            goto fail;
        if (reply[0] == '-' && !strstr(reply, "exists")) {
            snprintf(L.err, sizeof L.err, "server error: %s", reply + 1);
            goto fail;
        }
    }
    bool progress_on = show_progress == -1 ? isatty(2) : show_progress;
    double t0 = cli_now(), last = t0;
    bool eof = false;
    batch *cur = NULL;
    size_t tail = 0; /* next free ring slot */
    ssize_t blen = 0;
    size_t bpos = 0;
    for (;;) {
        /* Fill and send batches while there is room in the pipeline. */
        while (!eof && L.inflight < depth) {
            cur = &L.ring[tail];
            while (cur->n < batch_size) {
                if (bpos >= (size_t)blen) {
                    int file;
                    bool unterm;
                    blen = rdr_next(&rd, &buf, &cap, (size_t)1 << 20, &file, &unterm);
                    bpos = 0;
                    if (blen < 0) {
                        L.err[0] = 0;
                        rc = CLI_ERROR;
                        goto done;
                    }
                    if (blen == 0) {
                        eof = true;
                        break;
                    }
                }
                const char *s = buf + bpos;
                const char *e = memchr(s, rs, (size_t)blen - bpos);
                size_t len = e ? (size_t)(e - s) : (size_t)blen - bpos;
                bpos += len + 1;
                size_t need = keyspec_scratch(&ks, len);
                if (need > kcap) {
                    char *k = realloc(kscratch, need);
                    if (!k) {
                        snprintf(L.err, sizeof L.err, "out of memory");
                        goto fail;
                    }
                    kscratch = k;
                    kcap = need;
                }
                const char *key;
                size_t klen;
                if (keyspec_extract(&ks, s, len, kscratch, &key, &klen) != 0) {
                    snprintf(L.err, sizeof L.err, "record %llu has too few fields for --fields %s",
                             (unsigned long long)(L.keys + cur->n + 1), fields);
                    goto fail;
                }
                if (batch_add(cur, key, klen) != 0) {
                    snprintf(L.err, sizeof L.err, "out of memory");
                    goto fail;
                }
            }
            if (cur->n == 0)
                break;
            if (send_batch(&L, cur) != 0) {
                snprintf(L.err, sizeof L.err, "out of memory");
                goto fail;
            }
            L.keys += cur->n;
            tail = (tail + 1) % depth;
            L.inflight++;
        }
        if (eof && L.inflight == 0 && L.conn.out.pos == L.conn.out.len)
            break;
        if (pump(&L) != 0)
            goto fail;
        if (progress_on && cli_now() - last > 0.2) {
            last = cli_now();
            progress(&L, t0, false);
        }
    }
    double secs = cli_now() - t0;
    if (progress_on)
        progress(&L, t0, true);
    if (check && fflush(L.out) != 0) {
        snprintf(L.err, sizeof L.err, "cannot write the output: %s", strerror(errno));
        goto fail;
    }
    if (!quiet)
        fprintf(stderr, "%s: %llu keys, %llu %s, %.3f s, %.0f keys/s\n", prog,
                (unsigned long long)L.keys, (unsigned long long)L.positive,
                check ? "may exist" : "new", secs, secs > 0 ? (double)L.keys / secs : 0.0);
    goto done;
fail:
    rc = CLI_ERROR;
    if (check)
        fflush(L.out);
    fprintf(stderr, "%s: %s\n", prog, L.err);
done:
    rc_close(&L.conn);
    rdr_close(&rd);
    for (size_t i = 0; L.ring && i < depth; i++) {
        free(L.ring[i].keys);
        free(L.ring[i].lens);
    }
    free(L.ring);
    free(L.ints);
    free(buf);
    free(kscratch);
    keyspec_free(&ks);
    free(inputs);
    return rc;
}

int cmd_load(int argc, char **argv) { return run(argc, argv, false); }

int cmd_check(int argc, char **argv) { return run(argc, argv, true); }

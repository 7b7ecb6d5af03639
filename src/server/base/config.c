/* Settings table, config file and CONFIG GET/SET; see config.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bloomery/cuckoo.h"
#include "bloomery/scalable.h"
#include "resp.h"
#include "log.h"
#include "util.h"

server_config cfg;

static pthread_mutex_t str_lock = PTHREAD_MUTEX_INITIALIZER;
static char *s_bind, *s_dir, *s_requirepass, *s_logfile, *s_config_file, *s_pidfile, *s_save;
static char *s_replicaof, *s_masterauth, *s_masteruser, *s_announce_ip, *s_http_bind;
static char *s_http_allowed_hosts;

/* T_WORDS: a string of several words, kept space-separated ("save 3600 1"). */
typedef enum { T_INT, T_MEM, T_DOUBLE, T_STR, T_WORDS, T_ENUM, T_OBUF, T_FIXED } cfg_type;

typedef struct cfg_entry {
    const char *name;
    cfg_type type;
    bool mutable_;
    _Atomic long long *num;
    long long min, max;
    char **str;
    const char *const *enums; /* T_ENUM: names by value */
    const char *fixed;        /* T_FIXED: the only value, shown by CONFIG GET */
    const char *deflt;
} cfg_entry;

const char *const cfg_layout_names[] = {"blocked", "classic", "prefix", "growing", NULL};
const char *const cfg_default_layout_names[] = {"blocked", "classic", "prefix",
                                                "growing", "auto",    NULL};

int cfg_default_layout(bool capacity_named)
{
    long long l = atomic_load_explicit(&cfg.bf_layout, memory_order_relaxed);
    if (l == CFG_LAYOUT_AUTO)
        return capacity_named ? BLOOMERY_LAYOUT_PREFIX : BLOOMERY_LAYOUT_GROWING;
    return (int)l;
}
static const char *const loglevels[] = {"debug", "verbose", "notice", "warning", NULL};
static const char *const policies[] = {"noeviction", NULL};
static const char *const yesno[] = {"no", "yes", NULL};
static const char *const fsyncs[] = {"always", "everysec", "no", NULL};
/* A replica's log is its master's byte for byte: it takes no write of its
 * own (docs/REPLICATION.md). */
static const char *const yesonly[] = {"yes", NULL};
static _Atomic long long policy_dummy;
static _Atomic long long databases_dummy;

#define GB (1024LL * 1024 * 1024)

static const cfg_entry table[] = {
    {"bind", T_WORDS, false, NULL, 0, 0, &s_bind, NULL, NULL, "127.0.0.1"},
    {"port", T_INT, false, &cfg.port, 0, 65535, NULL, NULL, NULL, "6379"},
    {"threads", T_INT, false, &cfg.threads, 0, 256, NULL, NULL, NULL, "0"},
    {"dir", T_STR, false, NULL, 0, 0, &s_dir, NULL, NULL, "./data"},
    {"requirepass", T_STR, true, NULL, 0, 0, &s_requirepass, NULL, NULL, ""},
    {"maxmemory", T_MEM, true, &cfg.maxmemory, 0, 1LL << 62, NULL, NULL, NULL, "0"},
    {"maxmemory-policy", T_ENUM, true, &policy_dummy, 0, 0, NULL, policies, NULL, "noeviction"},
    {"maxclients", T_INT, true, &cfg.maxclients, 1, 1000000, NULL, NULL, NULL, "10000"},
    {"timeout", T_INT, true, &cfg.timeout, 0, 1LL << 31, NULL, NULL, NULL, "0"},
    /* The HTTP listener (/metrics, the console): off unless a port is set. */
    {"http-port", T_INT, false, &cfg.http_port, 0, 65535, NULL, NULL, NULL, "0"},
    {"http-bind", T_STR, false, NULL, 0, 0, &s_http_bind, NULL, NULL, "127.0.0.1"},
    {"http-allowed-hosts", T_WORDS, true, NULL, 0, 0, &s_http_allowed_hosts, NULL, NULL, ""},
    {"metrics-max-key-series", T_INT, true, &cfg.metrics_max_key_series, 0, 1000000, NULL, NULL,
     NULL, "1000"},
    {"console-sample-interval", T_INT, true, &cfg.console_sample_interval, 1, 3600, NULL, NULL,
     NULL, "15"},
    /* Ranges and defaults as Redis 7. */
    {"proto-max-bulk-len", T_MEM, true, &cfg.proto_max_bulk_len, 1024 * 1024, LLONG_MAX, NULL, NULL,
     NULL, "512mb"},
    {"proto-max-multibulk-len", T_INT, true, &cfg.proto_max_multibulk_len, 1, 2147483647LL, NULL,
     NULL, NULL, "8388608"},
    {"client-query-buffer-limit", T_MEM, true, &cfg.client_query_buffer_limit, 1024 * 1024,
     LLONG_MAX, NULL, NULL, NULL, "1gb"},
    {"protected-mode", T_ENUM, true, &cfg.protected_mode, 0, 0, NULL, yesno, NULL, "yes"},
    {"client-output-buffer-limit", T_OBUF, true, NULL, 0, 0, NULL, NULL, NULL,
     "normal 256mb 64mb 60"},
    {"hll-sparse-max-bytes", T_MEM, true, &cfg.hll_sparse_max_bytes, 0, 16000, NULL, NULL, NULL,
     "3000"},
    {"bf-error-rate", T_DOUBLE, true, NULL, 0, 0, NULL, NULL, NULL, "0.01"},
    {"bf-initial-size", T_INT, true, &cfg.bf_initial_size, 1, 1LL << 30, NULL, NULL, NULL, "100"},
    {"bf-expansion-factor", T_INT, true, &cfg.bf_expansion, 0, SBF_MAX_EXPANSION, NULL, NULL, NULL,
     "2"},
    {"bf-default-layout", T_ENUM, true, &cfg.bf_layout, 0, 0, NULL, cfg_default_layout_names, NULL,
     "auto"},
    {"cf-max-expansions", T_INT, true, &cfg.cf_max_expansions, 1, CF_MAX_MAX_FILTERS, NULL, NULL,
     NULL, "32"},
    /* For tests only: added to the clock windowed filters rotate by. */
    {"debug-clock-offset-ms", T_INT, true, &cfg.debug_clock_offset_ms, -(1LL << 40), 1LL << 40,
     NULL, NULL, NULL, "0"},
    {"hz", T_INT, true, &cfg.hz, 1, 500, NULL, NULL, NULL, "10"},
    {"tcp-backlog", T_INT, false, &cfg.tcp_backlog, 1, 65535, NULL, NULL, NULL, "511"},
    {"loglevel", T_ENUM, true, &cfg.loglevel, 0, 0, NULL, loglevels, NULL, "notice"},
    {"logfile", T_STR, false, NULL, 0, 0, &s_logfile, NULL, NULL, ""},
    {"pidfile", T_STR, false, NULL, 0, 0, &s_pidfile, NULL, NULL, ""},
    {"databases", T_INT, false, &databases_dummy, 1, 1, NULL, NULL, NULL, "1"},
    /* Persistence (docs/PERSISTENCE.md). save: "<seconds> <changes> ...",
     * or "" for no schedule. */
    {"save", T_WORDS, true, NULL, 0, 0, &s_save, NULL, NULL, "3600 1 300 100 60 10000"},
    /* Threads that load a snapshot's chunks at start-up and full resync;
     * 0: one per CPU (at most 16). */
    {"load-threads", T_INT, true, &cfg.load_threads, 0, 256, NULL, NULL, NULL, "0"},
    {"appendonly", T_ENUM, false, &cfg.appendonly, 0, 0, NULL, yesno, NULL, "yes"},
    {"appendfsync", T_ENUM, true, &cfg.appendfsync, 0, 0, NULL, fsyncs, NULL, "everysec"},
    /* Replication (docs/REPLICATION.md). replicaof: "<host> <port>" or "". */
    {"replicaof", T_WORDS, false, NULL, 0, 0, &s_replicaof, NULL, NULL, ""},
    {"masterauth", T_STR, true, NULL, 0, 0, &s_masterauth, NULL, NULL, ""},
    {"masteruser", T_STR, true, NULL, 0, 0, &s_masteruser, NULL, NULL, ""},
    {"replica-read-only", T_ENUM, true, &cfg.replica_read_only, 0, 0, NULL, yesonly, NULL, "yes"},
    {"replica-serve-stale-data", T_ENUM, true, &cfg.replica_serve_stale_data, 0, 0, NULL, yesno,
     NULL, "yes"},
    {"replica-priority", T_INT, true, &cfg.replica_priority, 0, 2147483647LL, NULL, NULL, NULL,
     "100"},
    {"replica-announced", T_ENUM, true, &cfg.replica_announced, 0, 0, NULL, yesno, NULL, "yes"},
    {"replica-announce-ip", T_STR, true, NULL, 0, 0, &s_announce_ip, NULL, NULL, ""},
    {"replica-announce-port", T_INT, true, &cfg.replica_announce_port, 0, 65535, NULL, NULL, NULL,
     "0"},
    {"min-replicas-to-write", T_INT, true, &cfg.min_replicas_to_write, 0, 2147483647LL, NULL, NULL,
     NULL, "0"},
    {"min-replicas-max-lag", T_INT, true, &cfg.min_replicas_max_lag, 0, 2147483647LL, NULL, NULL,
     NULL, "10"},
    {"repl-timeout", T_INT, true, &cfg.repl_timeout, 1, 2147483647LL, NULL, NULL, NULL, "60"},
    /* Redis's older names of the same settings. */
    {"slave-read-only", T_ENUM, true, &cfg.replica_read_only, 0, 0, NULL, yesonly, NULL, "yes"},
    {"slave-serve-stale-data", T_ENUM, true, &cfg.replica_serve_stale_data, 0, 0, NULL, yesno, NULL,
     "yes"},
    {"slave-priority", T_INT, true, &cfg.replica_priority, 0, 2147483647LL, NULL, NULL, NULL,
     "100"},
    {"slave-announce-port", T_INT, true, &cfg.replica_announce_port, 0, 65535, NULL, NULL, NULL,
     "0"},
    {"min-slaves-to-write", T_INT, true, &cfg.min_replicas_to_write, 0, 2147483647LL, NULL, NULL,
     NULL, "0"},
    {"min-slaves-max-lag", T_INT, true, &cfg.min_replicas_max_lag, 0, 2147483647LL, NULL, NULL,
     NULL, "10"},
};
#define NTABLE (sizeof(table) / sizeof(table[0]))

/* Every setting's default as config_format prints it, for CONFIG REWRITE. */
static char *deflt_fmt[NTABLE];

static const cfg_entry *find(const char *name)
{
    for (size_t i = 0; i < NTABLE; i++)
        if (str_eq_ci(name, strlen(name), table[i].name))
            return &table[i];
    return NULL;
}

static bool set_obuf(int argc, const char *const *argv, const size_t *lens, char *err,
                     size_t errlen)
{
    /* "class hard soft seconds" groups; only the normal class applies here,
     * the others are accepted for redis.conf compatibility. */
    if (argc == 0 || argc % 4 != 0) {
        snprintf(err, errlen, "wrong number of arguments");
        return false;
    }
    for (int i = 0; i < argc; i += 4) {
        long long h, s, t;
        if (!str_to_mem(argv[i + 1], lens[i + 1], &h) ||
            !str_to_mem(argv[i + 2], lens[i + 2], &s) || !str_to_ll(argv[i + 3], lens[i + 3], &t) ||
            h < 0 || s < 0 || t < 0) {
            snprintf(err, errlen, "Invalid arguments");
            return false;
        }
        if (str_eq_ci(argv[i], lens[i], "normal")) {
            atomic_store(&cfg.obuf_hard, h);
            atomic_store(&cfg.obuf_soft, s);
            atomic_store(&cfg.obuf_soft_seconds, t);
        } else if (!str_eq_ci(argv[i], lens[i], "replica") &&
                   !str_eq_ci(argv[i], lens[i], "slave") &&
                   !str_eq_ci(argv[i], lens[i], "pubsub")) {
            snprintf(err, errlen, "Invalid client class specified in buffer limit configuration.");
            return false;
        }
    }
    return true;
}

static bool apply_entry(const cfg_entry *c, int argc, const char *const *argv, const size_t *lens,
                        char *err, size_t errlen)
{
    if (c->type == T_OBUF) {
        /* A single quoted value holds the groups: split it. */
        if (argc == 1) {
            resp_parser p;
            resp_parser_init(&p);
            char *copy = mem_dup(argv[0], lens[0]);
            bool ok = copy && resp_split_line(&p, copy, lens[0]);
            const char *v[64];
            size_t l[64];
            int n = 0;
            for (size_t i = 0; ok && i < p.argc && n < 64; i++, n++) {
                v[n] = copy + p.argv[i].off;
                l[n] = p.argv[i].len;
                copy[p.argv[i].off + p.argv[i].len] = '\0';
            }
            ok = ok && set_obuf(n, v, l, err, errlen);
            free(copy);
            resp_parser_free(&p);
            return ok;
        }
        return set_obuf(argc, argv, lens, err, errlen);
    }
    if (c->type == T_WORDS) {
        /* "bind a b c", "save 3600 1 300 100": several words, kept
         * space-separated. */
        size_t total = 1;
        for (int i = 0; i < argc; i++)
            total += lens[i] + 1;
        char *v = calloc(1, total);
        if (v == NULL)
            return false;
        for (int i = 0; i < argc; i++) {
            if (i)
                strcat(v, " ");
            strncat(v, argv[i], lens[i]);
        }
        pthread_mutex_lock(&str_lock);
        free(*c->str);
        *c->str = v;
        pthread_mutex_unlock(&str_lock);
        return true;
    }
    if (argc != 1) {
        snprintf(err, errlen, "wrong number of arguments");
        return false;
    }
    const char *a = argv[0];
    size_t al = lens[0];
    long long v;
    switch (c->type) {
    case T_INT:
        if (!str_to_ll(a, al, &v)) {
            snprintf(err, errlen, "argument couldn't be parsed into an integer");
            return false;
        }
        if (v < c->min || v > c->max) {
            snprintf(err, errlen, "argument must be between %lld and %lld inclusive", c->min,
                     c->max);
            return false;
        }
        atomic_store(c->num, v);
        return true;
    case T_MEM:
        if (!str_to_mem(a, al, &v)) {
            snprintf(err, errlen, "argument must be a memory value");
            return false;
        }
        if (v < c->min || v > c->max) {
            snprintf(err, errlen, "argument must be between %lld and %lld inclusive", c->min,
                     c->max);
            return false;
        }
        atomic_store(c->num, v);
        return true;
    case T_DOUBLE: {
        double d;
        if (!str_to_double(a, al, &d) || !(d > 0 && d < 1)) {
            snprintf(err, errlen, "argument must be a number in the range (0, 1)");
            return false;
        }
        /* RedisBloom caps the default error rate, with only a warning. */
        if (d > 0.25) {
            server_log(LOG_WARNING, "bf-error-rate %g is above 0.25; using 0.25", d);
            d = 0.25;
        }
        atomic_store(&cfg.bf_error_rate, d);
        return true;
    }
    case T_ENUM:
        for (int i = 0; c->enums[i]; i++) {
            if (str_eq_ci(a, al, c->enums[i])) {
                atomic_store(c->num, i);
                return true;
            }
        }
        if (c->enums == yesno) { /* Redis's boolean settings */
            snprintf(err, errlen, "argument must be 'yes' or 'no'");
            return false;
        }
        snprintf(err, errlen, "argument(s) must be one of the following: ");
        for (int i = 0; c->enums[i]; i++) {
            strncat(err, c->enums[i], errlen - strlen(err) - 1);
            if (c->enums[i + 1])
                strncat(err, ", ", errlen - strlen(err) - 1);
        }
        return false;
    case T_STR: {
        char *s = strndup(a, al);
        if (s == NULL)
            return false;
        pthread_mutex_lock(&str_lock);
        free(*c->str);
        *c->str = s;
        pthread_mutex_unlock(&str_lock);
        return true;
    }
    case T_FIXED:
        if (al != strlen(c->fixed) || memcmp(a, c->fixed, al) != 0) {
            snprintf(err, errlen, "persistence is not available in this version");
            return false;
        }
        return true;
    case T_WORDS:
    case T_OBUF: break;
    }
    return false;
}

bool config_apply(const char *name, int argc, const char *const *argv, const size_t *lens,
                  bool at_startup, char *err, size_t errlen)
{
    const cfg_entry *c = find(name);
    if (c == NULL) {
        snprintf(err, errlen, "unknown option '%s'", name);
        return false;
    }
    if (!at_startup && !c->mutable_) {
        snprintf(err, errlen, "can't set immutable config");
        return false;
    }
    return apply_entry(c, argc, argv, lens, err, errlen);
}

void config_init(void)
{
    atomic_store(&cfg.bf_error_rate, 0.01);
    for (size_t i = 0; i < NTABLE; i++) {
        const cfg_entry *c = &table[i];
        char err[256];
        if (c->type == T_FIXED)
            continue;
        if (c->type == T_STR || c->type == T_WORDS) {
            *c->str = strdup(c->deflt);
            continue;
        }
        const char *v = c->deflt;
        size_t l = strlen(v);
        if (!apply_entry(c, 1, &v, &l, err, sizeof(err)))
            abort();
    }
    s_config_file = strdup("");
    for (size_t i = 0; i < NTABLE; i++) {
        char v[512];
        config_format(table[i].name, v, sizeof(v));
        deflt_fmt[i] = strdup(v);
    }
}

void config_free(void)
{
    pthread_mutex_lock(&str_lock);
    char **all[] = {&s_bind,        &s_dir,        &s_requirepass, &s_logfile,
                    &s_config_file, &s_pidfile,    &s_save,        &s_replicaof,
                    &s_masterauth,  &s_masteruser, &s_announce_ip, &s_http_bind};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        free(*all[i]);
        *all[i] = NULL;
    }
    free(s_http_allowed_hosts);
    s_http_allowed_hosts = NULL;
    pthread_mutex_unlock(&str_lock);
    for (size_t i = 0; i < NTABLE; i++) {
        free(deflt_fmt[i]);
        deflt_fmt[i] = NULL;
    }
}

bool config_load_file(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "can't open config file '%s': %s", path, strerror(errno));
        return false;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int lineno = 0;
    bool ok = true;
    resp_parser p;
    resp_parser_init(&p);
    while (ok && (n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        size_t len = (size_t)n;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            len--;
        size_t i = 0;
        while (i < len && (line[i] == ' ' || line[i] == '\t'))
            i++;
        if (i == len || line[i] == '#')
            continue;
        if (!resp_split_line(&p, line, len)) {
            snprintf(err, errlen, "%s:%d: unbalanced quotes", path, lineno);
            ok = false;
            break;
        }
        if (p.argc == 0)
            continue;
        const char *argv[64];
        size_t lens[64];
        size_t argc = p.argc < 64 ? p.argc : 64;
        for (size_t k = 0; k < argc; k++) {
            argv[k] = line + p.argv[k].off;
            lens[k] = p.argv[k].len;
        }
        char name[128];
        snprintf(name, sizeof(name), "%.*s", (int)lens[0], argv[0]);
        char why[256];
        if (!config_apply(name, (int)argc - 1, argv + 1, lens + 1, true, why, sizeof(why))) {
            snprintf(err, errlen, "%s:%d: '%s': %s", path, lineno, name, why);
            ok = false;
        }
    }
    resp_parser_free(&p);
    free(line);
    fclose(f);
    if (ok) {
        char *abs = realpath(path, NULL);
        pthread_mutex_lock(&str_lock);
        free(s_config_file);
        s_config_file = abs ? abs : strdup(path);
        pthread_mutex_unlock(&str_lock);
    }
    return ok;
}

bool config_format(const char *name, char *out, size_t outlen)
{
    const cfg_entry *c = find(name);
    if (c == NULL)
        return false;
    switch (c->type) {
    case T_INT:
    case T_MEM: snprintf(out, outlen, "%lld", atomic_load(c->num)); break;
    case T_DOUBLE: snprintf(out, outlen, "%g", atomic_load(&cfg.bf_error_rate)); break;
    case T_ENUM: snprintf(out, outlen, "%s", c->enums[atomic_load(c->num)]); break;
    case T_STR:
    case T_WORDS:
        pthread_mutex_lock(&str_lock);
        snprintf(out, outlen, "%s", *c->str ? *c->str : "");
        pthread_mutex_unlock(&str_lock);
        break;
    case T_FIXED: snprintf(out, outlen, "%s", c->fixed); break;
    case T_OBUF:
        snprintf(out, outlen,
                 "normal %lld %lld %lld slave 268435456 67108864 60 pubsub 33554432 8388608 60",
                 atomic_load(&cfg.obuf_hard), atomic_load(&cfg.obuf_soft),
                 atomic_load(&cfg.obuf_soft_seconds));
        break;
    }
    return true;
}

void config_match(const char *pat, size_t plen, void (*fn)(void *ctx, const char *name), void *ctx)
{
    for (size_t i = 0; i < NTABLE; i++)
        if (glob_match(pat, plen, table[i].name, strlen(table[i].name), true))
            fn(ctx, table[i].name);
}

char *config_get_str(const char *name)
{
    char *v = NULL;
    pthread_mutex_lock(&str_lock);
    if (strcmp(name, "config-file") == 0) {
        v = strdup(s_config_file ? s_config_file : "");
    } else {
        const cfg_entry *c = find(name);
        if (c && (c->type == T_STR || c->type == T_WORDS))
            v = strdup(*c->str ? *c->str : "");
    }
    pthread_mutex_unlock(&str_lock);
    return v;
}

void config_set_str(const char *name, const char *value)
{
    const cfg_entry *c = find(name);
    char *v = strdup(value);
    if (c == NULL || (c->type != T_STR && c->type != T_WORDS) || v == NULL) {
        free(v);
        return;
    }
    pthread_mutex_lock(&str_lock);
    free(*c->str);
    *c->str = v;
    pthread_mutex_unlock(&str_lock);
}

bool config_requirepass_set(void)
{
    pthread_mutex_lock(&str_lock);
    bool set = s_requirepass && s_requirepass[0];
    pthread_mutex_unlock(&str_lock);
    return set;
}

bool config_check_password(const char *p, size_t len)
{
    pthread_mutex_lock(&str_lock);
    size_t n = strlen(s_requirepass);
    unsigned diff = (unsigned)(n ^ len);
    for (size_t i = 0; i < len; i++)
        diff |= (unsigned char)(p[i] ^ s_requirepass[n ? i % n : 0]);
    pthread_mutex_unlock(&str_lock);
    return n > 0 && diff == 0;
}

/* ---- CONFIG REWRITE ---- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool failed;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

/* A value the loader reads back as one word: quoted, with escapes, when it
 * is empty or holds blanks, quotes or unprintable bytes. */
static void sb_word(sbuf *b, const char *v)
{
    bool plain = v[0] != '\0';
    for (const char *p = v; *p; p++)
        if (*p <= ' ' || *p == '"' || *p == '\'' || *p == '\\' || (unsigned char)*p >= 0x7f)
            plain = false;
    if (plain) {
        sb_str(b, v);
        return;
    }
    sb_str(b, "\"");
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\')
            snprintf(esc, sizeof(esc), "\\%c", *p);
        else if (*p < ' ' || *p >= 0x7f)
            snprintf(esc, sizeof(esc), "\\x%02x", *p);
        else
            snprintf(esc, sizeof(esc), "%c", *p);
        sb_str(b, esc);
    }
    sb_str(b, "\"");
}

/* "name value" as the loader reads it back. */
static void sb_setting(sbuf *b, const cfg_entry *c)
{
    char v[512];
    config_format(c->name, v, sizeof(v));
    if (c->type == T_MEM) {
        /* As Redis writes sizes: in the largest unit that divides them. */
        long long n = atomic_load(c->num);
        static const char *const units[] = {"gb", "mb", "kb"};
        for (int u = 0; u < 3 && n > 0; u++) {
            long long m = 1LL << (10 * (3 - u));
            if (n % m == 0) {
                snprintf(v, sizeof(v), "%lld%s", n / m, units[u]);
                break;
            }
        }
    }
    sb_str(b, c->name);
    sb_str(b, " ");
    if ((c->type == T_WORDS || c->type == T_OBUF) && v[0] != '\0')
        sb_str(b, v); /* several words */
    else
        sb_word(b, v);
    sb_str(b, "\n");
}

#define REWRITE_SIGNATURE "# Generated by CONFIG REWRITE"

/* The entry a setting is stored under: an older name of a setting (Redis's
 * slave-* for replica-*) shares its storage with the first entry of it, and
 * the rewrite writes only that one. */
static size_t canonical(size_t k)
{
    for (size_t i = 0; i < k; i++) {
        if ((table[k].num && table[i].num == table[k].num) ||
            (table[k].str && table[i].str == table[k].str))
            return i;
    }
    return k;
}

static bool write_file(const char *path, const char *data, size_t len, char *err, size_t errlen)
{
    /* A new file renamed over the old one: a crash leaves one or the other. */
    size_t plen = strlen(path) + 32;
    char *tmp = malloc(plen);
    if (tmp == NULL) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    snprintf(tmp, plen, "%s.rewrite-%d", path, (int)getpid());
    struct stat st;
    mode_t mode = stat(path, &st) == 0 ? st.st_mode & 07777 : 0644;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    bool ok = fd >= 0;
    for (size_t off = 0; ok && off < len;) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            ok = false;
        else
            off += (size_t)n;
    }
    ok = ok && fchmod(fd, mode) == 0 && fsync(fd) == 0;
    int saved = errno;
    if (fd >= 0 && close(fd) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        saved = errno;
    }
    if (!ok) {
        unlink(tmp);
        snprintf(err, errlen, "%s", strerror(saved));
    }
    free(tmp);
    return ok;
}

int config_rewrite(char *err, size_t errlen)
{
    static pthread_mutex_t rewrite_lock = PTHREAD_MUTEX_INITIALIZER;
    char *path = config_get_str("config-file");
    if (path == NULL || path[0] == '\0') {
        free(path);
        return CONFIG_REWRITE_NO_FILE;
    }
    pthread_mutex_lock(&rewrite_lock);
    bool done[NTABLE] = {false};
    bool signature = false;
    sbuf out = {0};
    FILE *f = fopen(path, "r");
    int ret = CONFIG_REWRITE_OK;
    if (f == NULL && errno != ENOENT) {
        snprintf(err, errlen, "%s", strerror(errno));
        ret = CONFIG_REWRITE_ERROR;
        goto end;
    }
    resp_parser p;
    resp_parser_init(&p);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while (f && (n = getline(&line, &cap, f)) >= 0) {
        size_t len = (size_t)n;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            len--;
        line[len] = '\0';
        size_t i = 0;
        while (i < len && (line[i] == ' ' || line[i] == '\t'))
            i++;
        if (strcmp(line + i, REWRITE_SIGNATURE) == 0)
            signature = true;
        const cfg_entry *c = NULL;
        if (i < len && line[i] != '#') {
            char *copy = mem_dup(line, len);
            if (copy && resp_split_line(&p, copy, len) && p.argc > 0) {
                char name[128];
                snprintf(name, sizeof(name), "%.*s", (int)p.argv[0].len, copy + p.argv[0].off);
                c = find(name);
            }
            free(copy);
        }
        if (c == NULL) {
            /* Comments, blank lines and lines of no setting stay as they were. */
            sb_add(&out, line, len);
            sb_str(&out, "\n");
            continue;
        }
        size_t k = canonical((size_t)(c - table));
        /* A setting's first line takes its current value, in place; later
         * lines of the same setting go. */
        if (!done[k])
            sb_setting(&out, &table[k]);
        done[k] = true;
    }
    free(line);
    resp_parser_free(&p);
    if (f)
        fclose(f);
    /* Settings off their defaults and not in the file yet go at the end. */
    for (size_t k = 0; k < NTABLE; k++) {
        if (done[k] || canonical(k) != k)
            continue;
        char v[512];
        config_format(table[k].name, v, sizeof(v));
        if (strcmp(v, deflt_fmt[k] ? deflt_fmt[k] : "") == 0)
            continue;
        if (!signature) {
            if (out.len && out.p[out.len - 1] != '\n')
                sb_str(&out, "\n");
            sb_str(&out, REWRITE_SIGNATURE "\n");
            signature = true;
        }
        sb_setting(&out, &table[k]);
    }
    if (out.failed) {
        snprintf(err, errlen, "out of memory");
        ret = CONFIG_REWRITE_ERROR;
    } else if (!write_file(path, out.p ? out.p : "", out.len, err, errlen)) {
        ret = CONFIG_REWRITE_ERROR;
    }
end:
    free(out.p);
    pthread_mutex_unlock(&rewrite_lock);
    free(path);
    return ret;
}

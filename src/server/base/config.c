/* Settings table, config file and CONFIG GET/SET; see config.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bloomery/cuckoo.h"
#include "bloomery/scalable.h"
#include "fdlimit.h"
#include "log.h"
#include "resp.h"
#include "util.h"

server_config cfg;

static pthread_mutex_t str_lock = PTHREAD_MUTEX_INITIALIZER;
static char *s_bind, *s_dir, *s_requirepass, *s_logfile, *s_config_file, *s_pidfile, *s_save;
static char *s_replicaof, *s_masterauth, *s_masteruser, *s_announce_ip, *s_http_bind;
static char *s_http_allowed_hosts;
static char *s_tls_cert_file, *s_tls_key_file, *s_tls_key_file_pass, *s_tls_client_cert_file;
static char *s_tls_client_key_file, *s_tls_client_key_file_pass, *s_tls_ca_cert_file;
static char *s_tls_ca_cert_dir, *s_tls_dh_params_file, *s_tls_protocols, *s_tls_ciphers;
static char *s_tls_ciphersuites;
static char *s_aclfile;

/* "user" lines of the config file (and --user options), kept for the ACL
 * code above, which applies them at start-up; their line numbers (0 for an
 * option) for its errors. */
static char **user_lines;
static int *user_linenos;
static size_t nuser_lines;
static char *(*rewrite_users_hook)(void);

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
static const char *const tls_auth[] = {"no", "yes", "optional", NULL};
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
    /* ACL users (docs/SECURITY.md): their file, read at start-up only, and
     * the length of ACL LOG. */
    {"aclfile", T_STR, false, NULL, 0, 0, &s_aclfile, NULL, NULL, ""},
    {"acllog-max-len", T_INT, true, &cfg.acllog_max_len, 0, LLONG_MAX, NULL, NULL, NULL, "128"},
    {"maxmemory", T_MEM, true, &cfg.maxmemory, 0, 1LL << 62, NULL, NULL, NULL, "0"},
    {"maxmemory-policy", T_ENUM, true, &policy_dummy, 0, 0, NULL, policies, NULL, "noeviction"},
    {"maxclients", T_INT, true, &cfg.maxclients, 1, 1000000, NULL, NULL, NULL, "10000"},
    {"timeout", T_INT, true, &cfg.timeout, 0, 1LL << 31, NULL, NULL, NULL, "0"},
    /* The HTTP listener (/metrics, the console): off unless a port is set. */
    {"http-port", T_INT, false, &cfg.http_port, 0, 65535, NULL, NULL, NULL, "0"},
    {"http-bind", T_STR, false, NULL, 0, 0, &s_http_bind, NULL, NULL, "127.0.0.1"},
    {"http-allowed-hosts", T_WORDS, true, NULL, 0, 0, &s_http_allowed_hosts, NULL, NULL, ""},
    /* HTTPS only, with tls-cert-file and tls-key-file (docs/SECURITY.md). */
    {"http-tls", T_ENUM, false, &cfg.http_tls, 0, 0, NULL, yesno, NULL, "no"},
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
    /* Exact filters (docs/EXACT.md): fingerprints a period gathers in
     * memory before they are written out as one table file. */
    {"exact-buffer-keys", T_INT, true, &cfg.exact_buffer_keys, 1, 1LL << 26, NULL, NULL, NULL,
     "4194304"},
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
    /* TLS (docs/SECURITY.md), Redis's names, meanings and defaults; the
     * files are read again when CONFIG SET changes any of them. */
    {"tls-port", T_INT, false, &cfg.tls_port, 0, 65535, NULL, NULL, NULL, "0"},
    {"tls-cert-file", T_STR, true, NULL, 0, 0, &s_tls_cert_file, NULL, NULL, ""},
    {"tls-key-file", T_STR, true, NULL, 0, 0, &s_tls_key_file, NULL, NULL, ""},
    {"tls-key-file-pass", T_STR, true, NULL, 0, 0, &s_tls_key_file_pass, NULL, NULL, ""},
    {"tls-client-cert-file", T_STR, true, NULL, 0, 0, &s_tls_client_cert_file, NULL, NULL, ""},
    {"tls-client-key-file", T_STR, true, NULL, 0, 0, &s_tls_client_key_file, NULL, NULL, ""},
    {"tls-client-key-file-pass", T_STR, true, NULL, 0, 0, &s_tls_client_key_file_pass, NULL, NULL,
     ""},
    {"tls-dh-params-file", T_STR, true, NULL, 0, 0, &s_tls_dh_params_file, NULL, NULL, ""},
    {"tls-ca-cert-file", T_STR, true, NULL, 0, 0, &s_tls_ca_cert_file, NULL, NULL, ""},
    {"tls-ca-cert-dir", T_STR, true, NULL, 0, 0, &s_tls_ca_cert_dir, NULL, NULL, ""},
    {"tls-auth-clients", T_ENUM, true, &cfg.tls_auth_clients, 0, 0, NULL, tls_auth, NULL, "yes"},
    {"tls-replication", T_ENUM, true, &cfg.tls_replication, 0, 0, NULL, yesno, NULL, "no"},
    /* "": TLSv1.2 and TLSv1.3, as Redis. */
    {"tls-protocols", T_WORDS, true, NULL, 0, 0, &s_tls_protocols, NULL, NULL, ""},
    {"tls-ciphers", T_STR, true, NULL, 0, 0, &s_tls_ciphers, NULL, NULL, ""},
    {"tls-ciphersuites", T_STR, true, NULL, 0, 0, &s_tls_ciphersuites, NULL, NULL, ""},
    {"tls-prefer-server-ciphers", T_ENUM, true, &cfg.tls_prefer_server_ciphers, 0, 0, NULL, yesno,
     NULL, "no"},
    {"tls-session-caching", T_ENUM, true, &cfg.tls_session_caching, 0, 0, NULL, yesno, NULL, "yes"},
    {"tls-session-cache-size", T_INT, true, &cfg.tls_session_cache_size, 0, 2147483647LL, NULL,
     NULL, NULL, "20480"},
    {"tls-session-cache-timeout", T_INT, true, &cfg.tls_session_cache_timeout, 0, 2147483647LL,
     NULL, NULL, NULL, "300"},
};
#define NTABLE (sizeof(table) / sizeof(table[0]))

/* Every setting's default as config_format prints it, for CONFIG REWRITE. */
static char *deflt_fmt[NTABLE];

static const cfg_entry *find_n(const char *name, size_t len)
{
    for (size_t i = 0; i < NTABLE; i++)
        if (str_eq_ci(name, len, table[i].name))
            return &table[i];
    return NULL;
}

static const cfg_entry *find(const char *name) { return find_n(name, strlen(name)); }

/* A value is written back to the config file as one line: a control
 * character (a newline above all) in it could end that line and start a
 * setting nobody set, so no setting takes one. */
static bool has_control(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7f)
            return true;
    return false;
}

static bool set_obuf(int argc, const char *const *argv, const size_t *lens, bool store, char *err,
                     size_t errlen)
{
    /* "class hard soft seconds" groups; only the normal class applies here,
     * the others are accepted for redis.conf compatibility. All are checked
     * before any is kept. */
    if (argc == 0 || argc % 4 != 0) {
        snprintf(err, errlen, "wrong number of arguments");
        return false;
    }
    bool normal = false;
    long long nh = 0, ns = 0, nt = 0;
    for (int i = 0; i < argc; i += 4) {
        long long h, s, t;
        if (!str_to_mem(argv[i + 1], lens[i + 1], &h) ||
            !str_to_mem(argv[i + 2], lens[i + 2], &s) || !str_to_ll(argv[i + 3], lens[i + 3], &t) ||
            h < 0 || s < 0 || t < 0 || t > INT_MAX) {
            /* Seconds an int, as Redis keeps them: in ms they still fit. */
            snprintf(err, errlen, "Invalid arguments");
            return false;
        }
        if (str_eq_ci(argv[i], lens[i], "normal")) {
            normal = true;
            nh = h;
            ns = s;
            nt = t;
        } else if (!str_eq_ci(argv[i], lens[i], "replica") &&
                   !str_eq_ci(argv[i], lens[i], "slave") &&
                   !str_eq_ci(argv[i], lens[i], "pubsub")) {
            snprintf(err, errlen, "Invalid client class specified in buffer limit configuration.");
            return false;
        }
    }
    if (store && normal) {
        atomic_store(&cfg.obuf_hard, nh);
        atomic_store(&cfg.obuf_soft, ns);
        atomic_store(&cfg.obuf_soft_seconds, nt);
    }
    return true;
}

/* n words joined by single spaces; NULL when out of memory. */
static char *join_words(int n, const char *const *w, const size_t *l)
{
    size_t total = 1;
    for (int i = 0; i < n; i++)
        total += l[i] + 1;
    char *v = malloc(total), *p = v;
    if (v == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        if (i)
            *p++ = ' ';
        memcpy(p, w[i], l[i]);
        p += l[i];
    }
    *p = '\0';
    return v;
}

/* save: pairs "<seconds> <changes>", seconds at least 1, as Redis 7 checks
 * them; kept in canonical form. */
static char *words_save(int n, const char *const *w, const size_t *l, char *err, size_t errlen)
{
    char *v = n % 2 == 0 ? malloc((size_t)n * 21 + 1) : NULL;
    if (v == NULL && n % 2 == 0)
        return NULL;
    size_t off = 0;
    for (int i = 0; v && i < n; i++) {
        long long x;
        if (!str_to_ll(w[i], l[i], &x) || x < (i % 2 == 0 ? 1 : 0)) {
            free(v);
            v = NULL;
        } else {
            off += (size_t)sprintf(v + off, i ? " %lld" : "%lld", x);
        }
    }
    if (v == NULL) {
        snprintf(err, errlen, "Invalid save parameters");
        return NULL;
    }
    v[off] = '\0';
    return v;
}

/* bind: the addresses listen_on() takes (numeric, "*", "::*"), each
 * optional with a leading '-'; "" for none. */
#define CFG_BIND_MAX 16
static char *words_bind(int n, const char *const *w, const size_t *l, char *err, size_t errlen)
{
    if (n > CFG_BIND_MAX) {
        snprintf(err, errlen, "Too many bind addresses specified.");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        char host[128];
        snprintf(host, sizeof(host), "%.*s", (int)(l[i] < 127 ? l[i] : 127), w[i]);
        const char *h = host[0] == '-' ? host + 1 : host;
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_flags = AI_NUMERICHOST};
        struct addrinfo *ai = NULL;
        bool ok = l[i] < 127 && (strcmp(h, "*") == 0 || strcmp(h, "::*") == 0 ||
                                 (h[0] && getaddrinfo(h, NULL, &hints, &ai) == 0));
        if (ai)
            freeaddrinfo(ai);
        if (!ok) {
            snprintf(err, errlen, "Invalid bind address '%s'", host);
            return NULL;
        }
    }
    return join_words(n, w, l);
}

/* replicaof: "<host> <port>", or "no one" or "" for none. */
static char *words_replicaof(int n, const char *const *w, const size_t *l, char *err, size_t errlen)
{
    if (n == 0 || (n == 2 && str_eq_ci(w[0], l[0], "no") && str_eq_ci(w[1], l[1], "one")))
        return strdup("");
    if (n != 2 || l[0] == 0) {
        snprintf(err, errlen, "wrong number of arguments");
        return NULL;
    }
    long long port;
    if (!str_to_ll(w[1], l[1], &port) || port < 0 || port > 65535) {
        snprintf(err, errlen, "Invalid master port");
        return NULL;
    }
    char *v = malloc(l[0] + 8);
    if (v)
        sprintf(v, "%.*s %lld", (int)l[0], w[0], port);
    return v;
}

/* T_WORDS: the arguments, or the words of a single one, separated by
 * single spaces (Redis splits CONFIG SET's value so); checked by the
 * setting's rule and kept space-separated. A word may hold no space, so
 * the words read back exactly. */
static bool apply_words(const cfg_entry *c, int argc, const char *const *argv, const size_t *lens,
                        bool store, char *err, size_t errlen)
{
    char *joined = join_words(argc, argv, lens);
    size_t jl = argc > 0 ? (size_t)argc - 1 : 0; /* the value may hold a NUL */
    for (int i = 0; i < argc; i++)
        jl += lens[i];
    int n = 0;
    if (joined && jl > 0) {
        n = 1;
        for (size_t i = 0; i < jl; i++)
            n += joined[i] == ' ';
    }
    const char **w = malloc(sizeof(*w) * (size_t)(n + 1));
    size_t *l = malloc(sizeof(*l) * (size_t)(n + 1));
    char *v = NULL;
    bool oom = joined == NULL || w == NULL || l == NULL;
    if (!oom) {
        char *end = joined + jl;
        for (int k = 0; k < n; k++) {
            char *p = k ? (char *)w[k - 1] + l[k - 1] + 1 : joined;
            char *sp = memchr(p, ' ', (size_t)(end - p));
            w[k] = p;
            l[k] = sp ? (size_t)(sp - p) : (size_t)(end - p);
        }
        err[0] = '\0';
        if (c->str == &s_save) {
            v = words_save(n, w, l, err, errlen);
        } else if (c->str == &s_bind) {
            v = words_bind(n, w, l, err, errlen);
        } else if (c->str == &s_replicaof) {
            v = words_replicaof(n, w, l, err, errlen);
        } else {
            for (int i = 0; i < n; i++)
                if (l[i] == 0)
                    snprintf(err, errlen, "arguments are separated by single spaces");
            v = err[0] ? NULL : join_words(n, w, l);
        }
        oom = v == NULL && err[0] == '\0';
    }
    if (oom)
        snprintf(err, errlen, "out of memory");
    free(joined);
    free(w);
    free(l);
    if (v == NULL)
        return false;
    if (store) {
        pthread_mutex_lock(&str_lock);
        free(*c->str);
        *c->str = v;
        pthread_mutex_unlock(&str_lock);
    } else {
        free(v);
    }
    return true;
}

/* http-bind: "" (every interface) or one address or host name. */
static bool valid_http_bind(const char *a, size_t al)
{
    for (size_t i = 0; i < al; i++) {
        char ch = a[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '-' || ch == ':' || ch == '%' || ch == '_'))
            return false;
    }
    return true;
}

/* Parse a setting's value and check it; keep it only when store is set,
 * so CONFIG SET can check every pair before it changes any. */
static bool apply_entry(const cfg_entry *c, int argc, const char *const *argv, const size_t *lens,
                        bool store, char *err, size_t errlen)
{
    /* Numbers, names and save's pairs refuse a control character by their
     * own rule, with Redis's words; the others are checked here. */
    bool any_string =
        c->type == T_STR || c->type == T_OBUF || (c->type == T_WORDS && c->str != &s_save);
    for (int i = 0; any_string && i < argc; i++) {
        if (has_control(argv[i], lens[i])) {
            snprintf(err, errlen, "argument must not contain control characters");
            return false;
        }
    }
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
            if (!ok || p.argc > 64) {
                snprintf(err, errlen, copy ? "wrong number of arguments" : "out of memory");
                ok = false;
            }
            for (size_t i = 0; ok && i < p.argc; i++, n++) {
                v[n] = copy + p.argv[i].off;
                l[n] = p.argv[i].len;
                copy[p.argv[i].off + p.argv[i].len] = '\0';
            }
            ok = ok && set_obuf(n, v, l, store, err, errlen);
            free(copy);
            resp_parser_free(&p);
            return ok;
        }
        return set_obuf(argc, argv, lens, store, err, errlen);
    }
    if (c->type == T_WORDS)
        return apply_words(c, argc, argv, lens, store, err, errlen);
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
        if (store)
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
        if (store)
            atomic_store(c->num, v);
        return true;
    case T_DOUBLE: {
        double d;
        /* Normal doubles only: a subnormal would not read back from its
         * shortest form. */
        if (!str_to_double(a, al, &d) || !(d > 0 && d < 1) || !isnormal(d)) {
            snprintf(err, errlen, "argument must be a number in the range (0, 1)");
            return false;
        }
        if (!store)
            return true;
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
                if (store)
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
        if (c->str == &s_http_bind && !valid_http_bind(a, al)) {
            snprintf(err, errlen, "Invalid http-bind address");
            return false;
        }
        if (!store)
            return true;
        char *s = mem_dup(a, al);
        if (s == NULL) {
            snprintf(err, errlen, "out of memory");
            return false;
        }
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

static bool add_user_line(const char *line, size_t len, int lineno)
{
    char **l = realloc(user_lines, (nuser_lines + 1) * sizeof(*l));
    if (l == NULL)
        return false;
    user_lines = l;
    int *n = realloc(user_linenos, (nuser_lines + 1) * sizeof(*n));
    if (n == NULL)
        return false;
    user_linenos = n;
    user_lines[nuser_lines] = mem_dup(line, len);
    if (user_lines[nuser_lines] == NULL)
        return false;
    user_linenos[nuser_lines++] = lineno;
    return true;
}

char **config_user_lines(size_t *n, const int **linenos)
{
    *n = nuser_lines;
    *linenos = user_linenos;
    return user_lines;
}

void config_on_rewrite_users(char *(*fn)(void)) { rewrite_users_hook = fn; }

bool config_apply(const char *name, int argc, const char *const *argv, const size_t *lens,
                  bool at_startup, char *err, size_t errlen)
{
    if (at_startup && strcmp(name, "user") == 0) {
        /* --user name rules...: one line, as the file would hold it. */
        size_t len = 4;
        for (int i = 0; i < argc; i++)
            len += lens[i] + 1;
        char *line = malloc(len + 1);
        bool ok = line != NULL;
        if (ok) {
            memcpy(line, "user", 4);
            size_t o = 4;
            for (int i = 0; i < argc; i++) {
                line[o++] = ' ';
                memcpy(line + o, argv[i], lens[i]);
                o += lens[i];
            }
            ok = add_user_line(line, o, 0);
        }
        free(line);
        if (!ok)
            snprintf(err, errlen, "out of memory");
        return ok;
    }
    const cfg_entry *c = find(name);
    if (c == NULL) {
        snprintf(err, errlen, "unknown option '%s'", name);
        return false;
    }
    if (!at_startup && !c->mutable_) {
        snprintf(err, errlen, "can't set immutable config");
        return false;
    }
    return apply_entry(c, argc, argv, lens, true, err, errlen);
}

static size_t canonical(size_t k);
static char *format_alloc(const cfg_entry *c);

#define MAX_APPLY_HOOKS 4
typedef struct apply_hook {
    const char *prefix;
    config_apply_fn fn;
} apply_hook;
static apply_hook hooks[MAX_APPLY_HOOKS];
static int nhooks;

void config_on_set(const char *prefix, config_apply_fn fn)
{
    if (nhooks < MAX_APPLY_HOOKS)
        hooks[nhooks++] = (apply_hook){prefix, fn};
}

/* The hooks whose settings the stored pairs changed; false (err set, *bad
 * the first pair of the hook that refused) when one refuses. */
static bool run_hooks(int npairs, const cfg_entry *const *e, int *bad, char *err, size_t errlen)
{
    const char **names = malloc(sizeof(*names) * (size_t)(npairs > 0 ? npairs : 1));
    if (names == NULL) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    bool ok = true;
    for (int h = 0; h < nhooks && ok; h++) {
        int n = 0, first = -1;
        size_t pl = strlen(hooks[h].prefix);
        for (int i = 0; i < npairs; i++)
            if (strncmp(e[i]->name, hooks[h].prefix, pl) == 0) {
                if (first < 0)
                    first = i;
                names[n++] = e[i]->name;
            }
        if (n > 0 && !hooks[h].fn(names, n, err, errlen)) {
            *bad = first;
            ok = false;
        }
    }
    free(names);
    return ok;
}

/* A value CONFIG SET gives must also fit the machine: maxclients, the open
 * files (at start, main() fits it once). As Redis, a number of clients that
 * cannot be had is refused and the setting keeps its value. */
static bool fits_the_machine(const cfg_entry *c, const char *a, size_t al, char *err, size_t errlen)
{
    long long v;
    if (c->num != &cfg.maxclients || !str_to_ll(a, al, &v) || v <= atomic_load(&cfg.maxclients))
        return true;
    long long fit = fdlimit_fit(v, false);
    if (fit >= v)
        return true;
    snprintf(err, errlen,
             "The operating system is not able to handle the specified number of clients, try "
             "with %lld",
             fit);
    return false;
}

int config_set_pairs(int npairs, const char *const *argv, const size_t *lens, int *bad, char *err,
                     size_t errlen)
{
    *bad = 0;
    const cfg_entry **e = malloc(sizeof(*e) * (size_t)(npairs > 0 ? npairs : 1));
    if (e == NULL) {
        snprintf(err, errlen, "out of memory");
        return CONFIG_SET_FAILED;
    }
    int ret = CONFIG_SET_OK;
    for (int i = 0; i < npairs && ret == CONFIG_SET_OK; i++) {
        e[i] = find_n(argv[2 * i], lens[2 * i]);
        if (e[i] == NULL) {
            *bad = i;
            ret = CONFIG_SET_UNKNOWN;
        }
    }
    for (int i = 0; i < npairs && ret == CONFIG_SET_OK; i++) {
        *bad = i;
        if (!e[i]->mutable_) {
            snprintf(err, errlen, "can't set immutable config");
            ret = CONFIG_SET_FAILED;
        }
        /* An older name is the same setting as its current one. */
        for (int j = 0; j < i && ret == CONFIG_SET_OK; j++) {
            if (canonical((size_t)(e[j] - table)) == canonical((size_t)(e[i] - table))) {
                snprintf(err, errlen, "duplicate parameter");
                ret = CONFIG_SET_FAILED;
            }
        }
    }
    /* The values before, put back when an apply hook refuses the new
     * ones. */
    char **old = calloc((size_t)(npairs > 0 ? npairs : 1), sizeof(*old));
    if (old == NULL && ret == CONFIG_SET_OK) {
        snprintf(err, errlen, "out of memory");
        ret = CONFIG_SET_FAILED;
    }
    for (int i = 0; i < npairs && ret == CONFIG_SET_OK; i++) {
        old[i] = format_alloc(e[i]);
        if (old[i] == NULL) {
            snprintf(err, errlen, "out of memory");
            ret = CONFIG_SET_FAILED;
        }
    }
    /* All or none, as Redis 7: every value is checked before any is kept;
     * then keeping one fails only for want of memory. */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < npairs && ret == CONFIG_SET_OK; i++) {
            *bad = i;
            if (!apply_entry(e[i], 1, &argv[2 * i + 1], &lens[2 * i + 1], pass == 1, err, errlen) ||
                (pass == 0 &&
                 !fits_the_machine(e[i], argv[2 * i + 1], lens[2 * i + 1], err, errlen)))
                ret = CONFIG_SET_FAILED;
        }
    }
    if (ret == CONFIG_SET_OK && !run_hooks(npairs, e, bad, err, errlen)) {
        for (int i = 0; i < npairs; i++) {
            char why[256];
            const char *v = old[i];
            size_t l = strlen(v);
            apply_entry(e[i], 1, &v, &l, true, why, sizeof(why));
        }
        ret = CONFIG_SET_FAILED;
    }
    for (int i = 0; old && i < npairs; i++)
        free(old[i]);
    free(old);
    free(e);
    return ret;
}

/* The shortest form of d that reads back as d. */
static void format_double(char *out, size_t outlen, double d)
{
    for (int prec = 1; prec <= 17; prec++) {
        double back;
        snprintf(out, outlen, "%.*g", prec, d);
        if (str_to_double(out, strlen(out), &back) && back == d)
            return;
    }
}

/* A setting's current value as CONFIG GET shows it, whatever its length;
 * NULL when out of memory. */
static char *format_alloc(const cfg_entry *c)
{
    char buf[256];
    switch (c->type) {
    case T_INT:
    case T_MEM: snprintf(buf, sizeof(buf), "%lld", atomic_load(c->num)); break;
    case T_DOUBLE: format_double(buf, sizeof(buf), atomic_load(&cfg.bf_error_rate)); break;
    case T_ENUM: snprintf(buf, sizeof(buf), "%s", c->enums[atomic_load(c->num)]); break;
    case T_STR:
    case T_WORDS: {
        pthread_mutex_lock(&str_lock);
        char *v = strdup(*c->str ? *c->str : "");
        pthread_mutex_unlock(&str_lock);
        return v;
    }
    case T_FIXED: snprintf(buf, sizeof(buf), "%s", c->fixed); break;
    case T_OBUF:
        snprintf(buf, sizeof(buf),
                 "normal %lld %lld %lld slave 268435456 67108864 60 pubsub 33554432 8388608 60",
                 atomic_load(&cfg.obuf_hard), atomic_load(&cfg.obuf_soft),
                 atomic_load(&cfg.obuf_soft_seconds));
        break;
    }
    return strdup(buf);
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
        if (!apply_entry(c, 1, &v, &l, true, err, sizeof(err)))
            abort();
    }
    s_config_file = strdup("");
    for (size_t i = 0; i < NTABLE; i++)
        deflt_fmt[i] = format_alloc(&table[i]);
}

void config_free(void)
{
    pthread_mutex_lock(&str_lock);
    /* Every string setting is one table row's; config-file is the one
     * outside the table. */
    for (size_t i = 0; i < NTABLE; i++)
        if (table[i].str) {
            free(*table[i].str);
            *table[i].str = NULL;
        }
    free(s_config_file);
    s_config_file = NULL;
    pthread_mutex_unlock(&str_lock);
    for (size_t i = 0; i < nuser_lines; i++)
        free(user_lines[i]);
    free(user_lines);
    free(user_linenos);
    user_lines = NULL;
    user_linenos = NULL;
    nuser_lines = 0;
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
        size_t argc = p.argc;
        const char **argv = malloc(sizeof(*argv) * argc);
        size_t *lens = malloc(sizeof(*lens) * argc);
        if (argv == NULL || lens == NULL || argc > INT_MAX) {
            snprintf(err, errlen, "%s:%d: out of memory", path, lineno);
            ok = false;
            free(argv);
            free(lens);
            break;
        }
        for (size_t k = 0; k < argc; k++) {
            argv[k] = line + p.argv[k].off;
            lens[k] = p.argv[k].len;
        }
        char name[128];
        snprintf(name, sizeof(name), "%.*s", (int)(lens[0] < 127 ? lens[0] : 127), argv[0]);
        char why[256];
        if (strcmp(name, "user") == 0) {
            if (!add_user_line(line + i, len - i, lineno)) {
                snprintf(err, errlen, "%s:%d: out of memory", path, lineno);
                ok = false;
            }
        } else if (strlen(name) != lens[0]) {
            /* A NUL or a very long name: no setting's. */
            snprintf(err, errlen, "%s:%d: unknown option", path, lineno);
            ok = false;
        } else if (!config_apply(name, (int)argc - 1, argv + 1, lens + 1, true, why, sizeof(why))) {
            snprintf(err, errlen, "%s:%d: '%s': %s", path, lineno, name, why);
            ok = false;
        }
        free(argv);
        free(lens);
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
    char *v = c ? format_alloc(c) : NULL;
    if (v == NULL)
        return false;
    snprintf(out, outlen, "%s", v);
    free(v);
    return true;
}

char *config_format_dup(const char *name)
{
    const cfg_entry *c = find(name);
    return c ? format_alloc(c) : NULL;
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

bool config_set_str(const char *name, const char *value)
{
    const cfg_entry *c = find(name);
    if (c == NULL || (c->type != T_STR && c->type != T_WORDS))
        return false;
    /* The same rule as the config file's, so CONFIG REWRITE writes only
     * what a restart reads back. */
    size_t len = strlen(value);
    char err[256];
    if (!apply_entry(c, 1, &value, &len, true, err, sizeof(err))) {
        server_log(LOG_WARNING, "Setting %s not updated: %s", c->name, err);
        return false;
    }
    return true;
}

/* ---- CONFIG REWRITE ---- */

/* A value the loader reads back as one word: quoted, with escapes, when it
 * is empty or holds blanks, quotes or unprintable bytes. */
static void sb_word(strbuf *b, const char *v)
{
    bool plain = v[0] != '\0';
    for (const char *p = v; *p; p++)
        if (*p <= ' ' || *p == '"' || *p == '\'' || *p == '\\' || (unsigned char)*p >= 0x7f)
            plain = false;
    if (plain) {
        strbuf_str(b, v);
        return;
    }
    strbuf_str(b, "\"");
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\')
            snprintf(esc, sizeof(esc), "\\%c", *p);
        else if (*p < ' ' || *p >= 0x7f)
            snprintf(esc, sizeof(esc), "\\x%02x", *p);
        else
            snprintf(esc, sizeof(esc), "%c", *p);
        strbuf_str(b, esc);
    }
    strbuf_str(b, "\"");
}

/* "name value" as the loader reads it back. */
static void sb_setting(strbuf *b, const cfg_entry *c)
{
    char *v = format_alloc(c);
    if (v == NULL) {
        b->failed = true;
        return;
    }
    char mem[64];
    const char *shown = v;
    if (c->type == T_MEM) {
        /* As Redis writes sizes: in the largest unit that divides them. */
        long long n = atomic_load(c->num);
        static const char *const units[] = {"gb", "mb", "kb"};
        for (int u = 0; u < 3 && n > 0; u++) {
            long long m = 1LL << (10 * (3 - u));
            if (n % m == 0) {
                snprintf(mem, sizeof(mem), "%lld%s", n / m, units[u]);
                shown = mem;
                break;
            }
        }
    }
    strbuf_str(b, c->name);
    if ((c->type == T_WORDS || c->type == T_OBUF) && v[0] != '\0') {
        /* Several words, each quoted as it needs: none holds a space. */
        char *save = NULL;
        for (char *w = strtok_r(v, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
            strbuf_str(b, " ");
            sb_word(b, w);
        }
    } else {
        strbuf_str(b, " ");
        sb_word(b, shown);
    }
    strbuf_str(b, "\n");
    free(v);
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

bool config_write_file(const char *path, const char *data, size_t len, char *err, size_t errlen)
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
    /* A fresh name, never a link someone planted at it: the file is
     * written with the server's rights. */
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
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
    /* The ACL users as user lines, in place of the file's, unless an
     * aclfile keeps them (NULL). */
    char *users = rewrite_users_hook ? rewrite_users_hook() : NULL;
    bool users_done = false;
    bool done[NTABLE] = {false};
    bool signature = false;
    strbuf out = {0};
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
        bool user_line = false;
        if (i < len && line[i] != '#') {
            char *copy = mem_dup(line, len);
            if (copy && resp_split_line(&p, copy, len) && p.argc > 0) {
                char name[128];
                snprintf(name, sizeof(name), "%.*s", (int)p.argv[0].len, copy + p.argv[0].off);
                c = find(name);
                user_line = strcmp(name, "user") == 0;
            }
            free(copy);
        }
        if (user_line && users) {
            /* The first user line takes all the users; the others go. */
            if (!users_done)
                strbuf_str(&out, users);
            users_done = true;
            continue;
        }
        if (c == NULL) {
            /* Comments, blank lines and lines of no setting stay as they were. */
            strbuf_add(&out, line, len);
            strbuf_str(&out, "\n");
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
                strbuf_str(&out, "\n");
            strbuf_str(&out, REWRITE_SIGNATURE "\n");
            signature = true;
        }
        sb_setting(&out, &table[k]);
    }
    /* Users beyond the default one as it starts, at the end. */
    if (users && !users_done && strcmp(users, "user default on nopass ~* &* +@all\n") != 0) {
        if (!signature) {
            if (out.len && out.p[out.len - 1] != '\n')
                strbuf_str(&out, "\n");
            strbuf_str(&out, REWRITE_SIGNATURE "\n");
            signature = true;
        }
        strbuf_str(&out, users);
    }
    free(users);
    if (out.failed) {
        snprintf(err, errlen, "out of memory");
        ret = CONFIG_REWRITE_ERROR;
    } else if (!config_write_file(path, out.p ? out.p : "", out.len, err, errlen)) {
        ret = CONFIG_REWRITE_ERROR;
    }
end:
    free(out.p);
    pthread_mutex_unlock(&rewrite_lock);
    free(path);
    return ret;
}

/* Server settings: one table names every setting, its type, default and
 * range, and whether CONFIG SET may change it while the server runs. The same
 * table reads the config file (redis.conf syntax), the command line
 * (--name value) and serves CONFIG GET/SET.
 *
 * Numeric settings are atomics: workers read them on every command without a
 * lock. String settings are guarded by a mutex; copy them with
 * config_get_str().
 */
#ifndef BLOOMERYD_CONFIG_H
#define BLOOMERYD_CONFIG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct server_config {
    _Atomic long long port;
    _Atomic long long threads;
    _Atomic long long load_threads;      /* snapshot loading; 0: one per CPU */
    _Atomic long long exact_buffer_keys; /* exact store: keys per table file */
    _Atomic long long maxmemory;
    _Atomic long long maxclients;
    _Atomic long long timeout;
    _Atomic long long http_port;               /* 0: no HTTP listener */
    _Atomic long long http_tls;                /* 0 no, 1 yes: HTTPS only */
    _Atomic long long metrics_max_key_series;  /* keys described by /metrics */
    _Atomic long long console_sample_interval; /* seconds between history samples */
    _Atomic long long proto_max_bulk_len;
    _Atomic long long proto_max_multibulk_len;
    _Atomic long long client_query_buffer_limit;
    _Atomic long long protected_mode; /* 0 no, 1 yes */
    _Atomic long long obuf_hard, obuf_soft, obuf_soft_seconds;
    _Atomic long long hll_sparse_max_bytes;
    _Atomic long long bf_initial_size;
    _Atomic long long bf_expansion;
    _Atomic long long hz;
    _Atomic long long tcp_backlog;
    _Atomic long long loglevel;              /* 0 debug .. 3 warning */
    _Atomic long long bf_layout;             /* bloomery_layout or CFG_LAYOUT_AUTO */
    _Atomic long long appendonly;            /* 0 no, 1 yes */
    _Atomic long long appendfsync;           /* FSYNC_* in persist.h */
    _Atomic long long cf_max_expansions;     /* sub-filters a cuckoo add may start from */
    _Atomic long long debug_clock_offset_ms; /* tests: shifts the windows' clock */
    _Atomic double bf_error_rate;
    /* Replication */
    _Atomic long long replica_read_only, replica_serve_stale_data, replica_priority;
    _Atomic long long replica_announced, replica_announce_port;
    _Atomic long long min_replicas_to_write, min_replicas_max_lag, repl_timeout;
    /* TLS; tls_auth_clients 0 no, 1 yes, 2 optional */
    _Atomic long long tls_port, tls_auth_clients, tls_replication, tls_prefer_server_ciphers;
    _Atomic long long tls_session_caching, tls_session_cache_size, tls_session_cache_timeout;
    _Atomic long long acllog_max_len;
} server_config;

extern server_config cfg;

/* The Bloom layouts' names by bloomery_layout, then NULL: the LAYOUT
 * options and what BF.INFO shows. */
extern const char *const cfg_layout_names[];
/* bf-default-layout's values: the layouts, then "auto" (CFG_LAYOUT_AUTO),
 * prefix for a filter whose capacity is named and growing for one an add
 * creates at bf-initial-size (bf_create.c). */
extern const char *const cfg_default_layout_names[];
#define CFG_LAYOUT_AUTO 4
/* The layout (a bloomery_layout) bf-default-layout gives a new filter
 * whose capacity the command names, or one an add creates. */
int cfg_default_layout(bool capacity_named);

enum { LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3 };

/* Defaults into cfg. */
void config_init(void);
void config_free(void);

/* Apply "name arg..." (already split). err receives a static or buffered
 * message on failure. at_startup allows immutable settings. */
bool config_apply(const char *name, int argc, const char *const *argv, const size_t *lens,
                  bool at_startup, char *err, size_t errlen);

/* CONFIG SET: argv holds npairs name/value pairs (lens their lengths).
 * All or none, as Redis 7: an unknown name, an immutable or repeated
 * setting or a bad value changes nothing. On failure *bad is the pair at
 * fault and err the reason (CONFIG_SET_FAILED). A value with a control
 * character is refused, here as in the config file: CONFIG REWRITE writes
 * each setting on one line. */
enum { CONFIG_SET_OK = 0, CONFIG_SET_UNKNOWN = 1, CONFIG_SET_FAILED = 2 };
int config_set_pairs(int npairs, const char *const *argv, const size_t *lens, int *bad, char *err,
                     size_t errlen);

/* What CONFIG SET calls once the values of all its pairs are stored, when
 * at least one of their names starts with prefix; names are those (table
 * names). The code that owns those settings applies them there (TLS
 * rebuilds its contexts): it is registered from above, so this layer
 * never calls up. false refuses the CONFIG SET: every pair gets its old
 * value back and err is the reason, as Redis's apply functions do. */
typedef bool (*config_apply_fn)(const char *const *names, int n, char *err, size_t errlen);
void config_on_set(const char *prefix, config_apply_fn fn);

/* Read a redis.conf-style file. */
bool config_load_file(const char *path, char *err, size_t errlen);

/* CONFIG REWRITE: the config file the server started with, its comments
 * and unknown lines kept, each setting's first line given its current
 * value (later lines of it dropped), and settings off their defaults that
 * the file lacks appended. Iterates the settings table, so a new setting
 * needs nothing here. */
enum { CONFIG_REWRITE_OK = 0, CONFIG_REWRITE_NO_FILE = 1, CONFIG_REWRITE_ERROR = 2 };
int config_rewrite(char *err, size_t errlen);

/* Current value as CONFIG GET prints it; returns false for an unknown name. */
bool config_format(const char *name, char *out, size_t outlen);
/* The same, whole, in a string the caller frees; NULL for an unknown name. */
char *config_format_dup(const char *name);

/* Names matching a glob pattern, in table order; fn called for each. */
void config_match(const char *pat, size_t plen, void (*fn)(void *ctx, const char *name), void *ctx);

/* Copy of a string setting ("bind", "dir", "requirepass", "logfile", "http-bind",
 * "config-file", "save"); caller frees. */
char *config_get_str(const char *name);
/* Set a string setting from the server itself (REPLICAOF keeps
 * "replicaof" current, so CONFIG REWRITE writes what is true): "host port"
 * or "" for replicaof. Checked as the config file's value is; false (and
 * the setting unchanged) for a value the file could not hold. */
bool config_set_str(const char *name, const char *value);
/* The config file's "user" lines (and --user options), whole, in order,
 * with their line numbers (0: an option); applied by the ACL code. */
char **config_user_lines(size_t *n, const int **linenos);
/* CONFIG REWRITE asks fn for the user lines to write ("" for none; NULL:
 * the file's user lines stay as they are). */
void config_on_rewrite_users(char *(*fn)(void));
/* A file replaced atomically: a new file (never a link planted at its
 * name), synced, renamed over path. */
bool config_write_file(const char *path, const char *data, size_t len, char *err, size_t errlen);

#endif

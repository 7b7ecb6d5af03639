/* `bloomery console`: a deployment's console over HTTP (docs/CONSOLE.md,
 * "The fleet console"). Every answer comes from memory, kept up to date by
 * background threads, so that an open console costs the nodes little and a
 * page of 100,000 filters answers at once.
 *
 * Files, one concept each:
 *   console.c   the options, start and stop, signals, protected mode
 *   serve.c     the HTTP listener (libmicrohttpd): checks on the headers
 *               (Host, credentials, writes' header), routes
 *   pool.c      connections to the nodes, kept open and shared
 *   fleet.c     the topology: nodes and groups from Sentinels, a Cluster
 *               or the nodes given, refreshed every second
 *   catalog.c   the filter index: SCAN ... TYPE on every master, the
 *               filters' summaries fetched pipelined within a budget
 *   api.c       the JSON answers of the GET routes
 *   ops.c       the writes, run on the key's master as the request's user
 *   placement.c where a new filter goes (pure)
 *   slot.c      Redis Cluster's key slot (CRC16, hash tags; pure)
 *   rebalance_api.c the rebalance routes (src/cli/rebalance.h)
 */
#ifndef BLOOMERY_CLI_CONSOLE_H
#define BLOOMERY_CLI_CONSOLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rcall.h"
#include "textbuf.h"

#define CN_ADDR 64
#define CN_SLOTS 16384

long long cn_now_ms(void); /* the wall clock, ms since the epoch */

/* ---- console.c: the settings ---- */
enum { CN_MODE_NODES, CN_MODE_SENTINEL, CN_MODE_CLUSTER };
extern const char *const cn_mode_names[];
typedef struct cn_sentinel_group {
    char *name;       /* --master-name */
    char **sentinels; /* host:port */
    size_t nsentinels;
} cn_sentinel_group;
typedef struct cn_settings {
    int mode;
    rc_opts opts; /* the monitoring connections' credentials and TLS */
    char **seeds; /* --node addresses, or the --cluster seed */
    size_t nseeds;
    cn_sentinel_group *groups;
    size_t ngroups;
    const char *bind, *allowed_hosts;
    int port;
    bool need_auth; /* bound off the loopback: Basic credentials required */
} cn_settings;
extern cn_settings cn_cfg;
extern volatile int cn_stopping;

/* ---- serve.c: the HTTP listener ---- */
bool serve_start(char *err, size_t errlen);
void serve_stop(void);
/* Whether the address bind resolves to is a loopback one. */
bool cn_bind_is_loopback(const char *bind);

/* ---- pool.c ---- */
/* A connection to addr with the monitoring credentials, held by the caller
 * alone until pool_put; NULL with err when it cannot be opened. */
rc_conn *pool_get(const char *addr, char *err, size_t errlen);
/* ok false: the connection is closed (an I/O error or a timeout). */
void pool_put(rc_conn *c, bool ok);
void pool_close_all(void);
/* n commands sent at once, their replies read into out[0..n) (NULL where
 * none came); false when the connection failed. */
bool pool_pipeline(rc_conn *c, size_t n, const size_t *argc, const char *const *const *argv,
                   const size_t *const *lens, rc_value **out, int timeout_ms);
/* One command on addr through the pool; NULL with err. */
rc_value *pool_call(const char *addr, char *err, size_t errlen, size_t argc,
                    const char *const *argv, const size_t *lens);
/* An error reply's text, or NULL. */
const char *rv_err(const rc_value *v);

/* ---- fleet.c: the topology ---- */
enum { CN_LINK_UP, CN_LINK_DOWN, CN_LINK_UNREACHABLE };
typedef struct cn_node {
    char addr[CN_ADDR];
    char id[48];
    int group; /* index into groups, -1 none */
    bool master;
    char master_addr[CN_ADDR]; /* a replica's master */
    int link;
    long long used, maxmemory, sysmem, ops, offset, lag; /* lag -1: none */
    long long last_failover_ms;                          /* -1: none */
    char error[160];
} cn_node;
#define CN_MAX_REPLICAS 16
typedef struct cn_group {
    char name[CN_ADDR];
    char master[CN_ADDR]; /* "" none known */
    char replicas[CN_MAX_REPLICAS][CN_ADDR];
    size_t nreplicas;
    int replicas_up;
    int quorum, sentinels; /* -1: not a Sentinel group */
    bool ok, missing_replica, master_down;
    long long last_failover_ms; /* -1: none seen */
    char *slots;                /* "0-5460 10923" (cluster), NULL */
    char error[160];
} cn_group;
typedef struct cn_topo {
    cn_node *nodes;
    size_t nnodes;
    cn_group *groups;
    size_t ngroups;
    int16_t slot_group[CN_SLOTS]; /* cluster: the group serving each slot, -1 */
    long long updated_ms;
} cn_topo;
/* The topology; read only between fleet_lock and fleet_unlock. */
const cn_topo *fleet_lock(void);
void fleet_unlock(void);
bool fleet_start(char *err, size_t errlen);
void fleet_stop(void);
/* Asks for a refresh now (a MOVED reply, a write); returns once done. */
void fleet_refresh_now(void);
/* The group of a filter named key: cluster: its slot's; otherwise -1 (the
 * catalog knows). */
int fleet_group_of_key(const cn_topo *t, const char *key, size_t len);
const cn_node *fleet_node(const cn_topo *t, const char *addr);

/* ---- catalog.c: the filter index ---- */
typedef struct cn_filter {
    char *name;
    size_t len;
    char master[CN_ADDR]; /* where it was found */
    bool cuckoo;
    bool have; /* the summary below was read */
    bool read_only;
    char layout[16];
    long long capacity, items, memory, ttl_ms;
    double fill, fpr, error_rate; /* fpr, error_rate < 0: none */
    long long updated_ms;         /* when the summary was read; 0: never */
    long long touched_ms;         /* when the console itself made or changed it */
} cn_filter;
bool catalog_start(char *err, size_t errlen);
void catalog_stop(void);
/* The index, read only while held. */
void catalog_lock(void);
void catalog_unlock(void);
/* All filters, and whether every master's SCAN completed once. */
cn_filter *catalog_rows(size_t *n, bool *complete);
cn_filter *catalog_find(const char *name, size_t len);
/* How many rows from the first are in name order (those of the last pass;
 * rows the console added since follow unsorted). */
size_t catalog_name_sorted(void);
int catalog_name_cmp(const cn_filter *a, const cn_filter *b);
size_t catalog_count_on(const char *master);
/* A filter added or changed by the console: its row (re)read now, so the
 * table shows it at once. gone: removed. */
void catalog_touch(const char *master, const char *name, size_t len, bool gone);
/* Refreshes the summaries of the named rows when older than max_age_ms,
 * pipelined per master (a page's rows before answering). Called with the
 * index not held. */
void catalog_fetch(char *const *names, const size_t *lens, size_t n, long long max_age_ms);
/* The history of a filter's fill and FPR, as sampled by the summaries. */
void catalog_history(const char *name, size_t len, textbuf *b);

/* ---- placement.c (pure) ---- */
typedef struct pl_group {
    const char *name;
    bool up;                  /* its master answers */
    unsigned long long used;  /* used_memory */
    unsigned long long limit; /* maxmemory, or the machine's memory */
    unsigned long long filters;
} pl_group;
/* Seed 001's rule: the group with the most free memory (limit - used),
 * then the fewest filters, then the first; -1 when none is up. */
int placement_pick(const pl_group *g, size_t n);

/* ---- slot.c (pure) ---- */
/* Redis Cluster's slot of a key: CRC16 of the key, or of its {hash tag}. */
unsigned slot_of(const char *key, size_t len);

/* ---- ops.c: the writes ---- */
/* Who a request is: the user and password it signed in with (Basic), or
 * none (the monitoring credentials). */
typedef struct cn_who {
    char user[128];
    char pass[256];
    bool given;
} cn_who;
/* Each answers JSON into b and returns the HTTP status. */
#define CN_FORM_MAX 32
typedef struct cn_form {
    size_t n;
    char *key[CN_FORM_MAX], *val[CN_FORM_MAX];
} cn_form;
/* A field's value, NULL when absent. */
const char *form_get(const cn_form *f, const char *name);
int ops_create(const cn_who *w, const cn_form *f, textbuf *b);
int ops_items(const cn_who *w, const cn_form *f, bool add, textbuf *b);
int ops_key(const cn_who *w, const cn_form *f, const char *what, textbuf *b);
/* Checks user:pass by AUTH against a reachable master. */
bool ops_login(const char *user, const char *pass);

/* ---- api.c: the GET answers ---- */
int api_me(const cn_who *w, textbuf *b);
int api_overview(textbuf *b);
int api_nodes(textbuf *b);
int api_filters(const cn_form *q, textbuf *b);
int api_filter(const cn_form *q, const cn_who *w, textbuf *b);
int api_routing(const cn_form *q, textbuf *b);
int api_placement(const cn_form *q, textbuf *b);
int api_calc_get(const cn_form *q, textbuf *b);
/* {"error": text} with status. */
int api_error(textbuf *b, int status, const char *text);
/* An rc_value as JSON. */
void api_value_json(textbuf *b, const rc_value *v);
/* Where a new filter named name goes: the group's index (-1: none, why in
 * reason), its group and master (group given: that group). */
int placement_for(const char *name, size_t len, const char *want_group, char *master, char *group,
                  char *reason, size_t reasonlen, int *slot);
/* The master a key lives on now ("" when none is up), its group's index. */
bool api_key_master(const char *key, size_t len, char *addr, int *group);

/* ---- rebalance_api.c: /api/rebalance/plan, start, status ---- */
int api_rebalance(const char *method, const char *url, const cn_who *w, textbuf *b);

#endif

/* Whole replies and one command at a time over an rc_conn (rclient.h), for
 * the tools that manage a deployment (console, rebalance): they read nested
 * replies (SCAN, CLUSTER SHARDS, SENTINEL REPLICAS, INFO) where load and
 * check only count integers. Also the connection options every tool that
 * talks to a server shares (redis-cli's names), parsed in one place. */
#ifndef BLOOMERY_CLI_RCALL_H
#define BLOOMERY_CLI_RCALL_H

#include <stdbool.h>
#include <stddef.h>

#include "rclient.h"

/* One reply as a tree. RESP3 maps and sets read as arrays ('*', a map's
 * keys and values alternating), RESP3 null and a RESP2 null bulk or array
 * as '_'; doubles, big numbers and verbatim strings as '$' text. */
typedef struct rc_value {
    char type; /* '+', '-', ':', '$', '*', '_' */
    long long integer;
    char *str; /* '+', '-', '$': NUL-terminated (len bytes, may hold NULs) */
    size_t len;
    struct rc_value *elem; /* '*' */
    size_t n;
} rc_value;

/* Parses one reply at buf[0..len): 1 done (*v allocated, *used bytes), 0
 * incomplete, -1 malformed or out of memory. At most 32 levels deep. */
int rc_value_parse(const char *buf, size_t len, size_t *used, rc_value **v);
void rc_value_free(rc_value *v);

/* Queues one command (lens NULL: the arguments' strlen). -1: out of memory. */
int rc_send(rc_conn *c, size_t argc, const char *const *argv, const size_t *lens);
/* Reads the next reply, waiting at most timeout_ms for it in all; NULL with
 * the reason in err (timeout, closed, malformed). */
rc_value *rc_read(rc_conn *c, int timeout_ms, char *err, size_t errlen);
/* rc_send then rc_read. */
rc_value *rc_call(rc_conn *c, int timeout_ms, char *err, size_t errlen, size_t argc,
                  const char *const *argv, const size_t *lens);
/* The same with NUL-terminated arguments, the list ended by NULL. */
rc_value *rc_callv(rc_conn *c, int timeout_ms, char *err, size_t errlen, const char *cmd, ...)
    __attribute__((sentinel));

/* A field of INFO's text ("name:value" lines) copied into out; false when
 * absent. */
bool rc_info_field(const rc_value *info, const char *field, char *out, size_t outlen);
/* The same as a number (0 when absent or not a number). */
long long rc_info_ll(const rc_value *info, const char *field);

/* "host:port" or "[v6]:port" into its parts; false when malformed. */
bool rc_split_addr(const char *addr, char *host, size_t hostlen, char *port, size_t portlen);

/* How to reach a server: AUTH and TLS, redis-cli's options. */
typedef struct rc_opts {
    const char *user; /* --user */
    const char *pass; /* -a, --pass (default: REDISCLI_AUTH) */
    rc_tls tls;       /* --tls --insecure --cacert --cacertdir --cert --tls-key --sni */
    int timeout_ms;   /* for connecting, the handshake and AUTH (0: 5000) */
} rc_opts;

/* Takes the option at argv[*i] when it is one of rc_opts's, moving *i past
 * its value: 1 taken, 0 not one of them, -1 a value missing (said on
 * stderr after prog). */
int rc_opts_arg(rc_opts *o, int argc, char **argv, int *i, const char *prog);
/* Once every option is read: REDISCLI_AUTH as the default password, and
 * the combinations that cannot work; NULL, or what is wrong. */
const char *rc_opts_finish(rc_opts *o);
/* The lines of --help for these options. */
extern const char rc_opts_help[];

/* Connects to host:port, TLS when asked, then AUTH [user] pass when a
 * password is given: 0, or -1 with the reason in err (c closed). */
int rc_open(rc_conn *c, const char *host, const char *port, const rc_opts *o, char *err,
            size_t errlen);

#endif

/* Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH, with Redis 7's
 * replies.
 *
 * Inside MULTI the dispatcher checks each request as usual (unknown
 * command, arity, authentication, memory, a broken log) and queues it with
 * a copy of its arguments; a refusal marks the transaction, which EXEC then
 * discards with EXECABORT. EXEC runs the queued commands one after another
 * through command_call, the path of every command, so their replies (one
 * array) wait for the log like any other (commit.c) when one touched keys.
 *
 * Isolation: while EXEC runs its commands it owns commit.c's write gate, so
 * no write command of another client runs in between, on any worker. Reads
 * of other clients are not held back and may see a transaction half done.
 * Changes made outside commands (active expiry, windows rotating on the
 * clock) are not held back either.
 *
 * WATCH: every write command, after its change and before it leaves the
 * write gate, bumps the version of each key its table row names (a hashed
 * slot, so another key sharing the slot also aborts a transaction: never a
 * missed change, sometimes a needless retry); a write naming no key
 * (FLUSHALL) bumps an epoch that every watch sees. EXEC compares the
 * versions after taking the gate, so no write slips between the check and
 * the queued commands. A watched key that existed and has expired since
 * (no write saw it go) fails EXEC too, as in Redis: EXEC looks it up again.
 * Code that changes keys without a command (the replication stream, say)
 * must call watch_touch_key/watch_touch_all.
 */
#include <stdlib.h>
#include <string.h>

#include "commit.h"
#include "persist.h"
#include "server.h"

typedef struct multi_cmd {
    const command *cmd;
    int argc;
    const char **argv;
    size_t *argvlen;
    char *buf;
} multi_cmd;

typedef struct multi_watch {
    uint32_t slot;
    uint64_t version, epoch;
    char *key; /* set when the key existed at WATCH */
    size_t klen;
} multi_watch;

#define WATCH_SLOTS (1u << 16)
static _Atomic uint64_t versions[WATCH_SLOTS];
static _Atomic uint64_t epoch;

static uint32_t key_slot(const char *k, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
    return (uint32_t)(h ^ (h >> 32)) & (WATCH_SLOTS - 1);
}

void watch_touch_key(const char *key, size_t klen)
{
    atomic_fetch_add_explicit(&versions[key_slot(key, klen)], 1, memory_order_seq_cst);
}

void watch_touch_all(void) { atomic_fetch_add_explicit(&epoch, 1, memory_order_seq_cst); }

void watch_touch_keys(const command *cmd, cmd_ctx *cx)
{
    if (cmd->first_key <= 0) {
        watch_touch_all();
        return;
    }
    int last = cmd->last_key < 0 ? cx->argc + cmd->last_key : cmd->last_key;
    int step = cmd->key_step > 0 ? cmd->key_step : 1;
    for (int i = cmd->first_key; i <= last && i < cx->argc; i += step)
        watch_touch_key(cx->argv[i], cx->argvlen[i]);
}

static bool key_exists(const char *key, size_t klen)
{
    ks_ref ref;
    bool found = ks_open(&ref, key, klen, false) != NULL;
    ks_close(&ref);
    return found;
}

static bool watches_hold(client *c)
{
    for (size_t i = 0; i < c->nwatched; i++) {
        multi_watch *w = &c->watched[i];
        if (atomic_load_explicit(&versions[w->slot], memory_order_seq_cst) != w->version ||
            atomic_load_explicit(&epoch, memory_order_seq_cst) != w->epoch)
            return false;
        if (w->key && !key_exists(w->key, w->klen))
            return false;
    }
    return true;
}

static void forget_watches(client *c)
{
    for (size_t i = 0; i < c->nwatched; i++)
        free(c->watched[i].key);
    free(c->watched);
    c->watched = NULL;
    c->nwatched = c->capwatched = 0;
}

static void free_queue(client *c)
{
    int n = atomic_load_explicit(&c->multi_n, memory_order_relaxed);
    for (int i = 0; i < n; i++) {
        free(c->mq[i].buf);
        free(c->mq[i].argv);
        free(c->mq[i].argvlen);
    }
}

void multi_reset(client *c)
{
    free_queue(c);
    free(c->mq);
    c->mq = NULL;
    c->mqcap = 0;
    atomic_store_explicit(&c->multi_n, -1, memory_order_relaxed);
    c->multi_dirty = false;
    forget_watches(c);
}

void multi_queue(client *c, const command *cmd)
{
    cmd_ctx *x = &c->cx;
    int n = atomic_load_explicit(&c->multi_n, memory_order_relaxed);
    if ((size_t)n == c->mqcap) {
        size_t cap = c->mqcap ? c->mqcap * 2 : 8;
        multi_cmd *q = realloc(c->mq, cap * sizeof(*q));
        if (q == NULL)
            goto oom;
        c->mq = q;
        c->mqcap = cap;
    }
    size_t bytes = 0;
    for (int i = 0; i < x->argc; i++)
        bytes += x->argvlen[i] + 1;
    multi_cmd *m = &c->mq[n];
    m->cmd = cmd;
    m->argc = x->argc;
    m->buf = malloc(bytes ? bytes : 1);
    m->argv = malloc((size_t)x->argc * sizeof(*m->argv));
    m->argvlen = malloc((size_t)x->argc * sizeof(*m->argvlen));
    if (m->buf == NULL || m->argv == NULL || m->argvlen == NULL) {
        free(m->buf);
        free(m->argv);
        free(m->argvlen);
        goto oom;
    }
    char *p = m->buf;
    for (int i = 0; i < x->argc; i++) {
        memcpy(p, x->argv[i], x->argvlen[i]);
        p[x->argvlen[i]] = '\0';
        m->argv[i] = p;
        m->argvlen[i] = x->argvlen[i];
        p += x->argvlen[i] + 1;
    }
    atomic_store_explicit(&c->multi_n, n + 1, memory_order_relaxed);
    reply_simple(&x->out, "QUEUED");
    return;
oom:
    c->multi_dirty = true;
    reply_oom(x);
}

bool multiCommand(cmd_ctx *x)
{
    client *c = client_of(x);
    if (client_in_multi(c)) {
        reply_error(&x->out, "ERR MULTI calls can not be nested");
        return false;
    }
    atomic_store_explicit(&c->multi_n, 0, memory_order_relaxed);
    c->multi_dirty = false;
    reply_ok(&x->out);
    return true;
}

bool discardCommand(cmd_ctx *x)
{
    client *c = client_of(x);
    if (!client_in_multi(c)) {
        reply_error(&x->out, "ERR DISCARD without MULTI");
        return false;
    }
    multi_reset(c);
    reply_ok(&x->out);
    return true;
}

static void reply_null_array(reply *r)
{
    if (r->proto == 3)
        reply_raw(r, "_\r\n", 3);
    else
        reply_raw(r, "*-1\r\n", 5);
}

bool execCommand(cmd_ctx *x)
{
    client *c = client_of(x);
    if (!client_in_multi(c)) {
        reply_error(&x->out, "ERR EXEC without MULTI");
        return false;
    }
    if (c->multi_dirty) {
        multi_reset(c);
        reply_error(&x->out, "EXECABORT Transaction discarded because of previous errors.");
        return false;
    }
    commit_exclusive_begin(c->w);
    if (!watches_hold(c)) {
        commit_exclusive_end(c->w);
        multi_reset(c);
        reply_null_array(&x->out);
        return true;
    }
    /* The queue leaves the client first: a queued command sees a client
     * outside MULTI, as in Redis. */
    multi_cmd *q = c->mq;
    int n = atomic_load_explicit(&c->multi_n, memory_order_relaxed);
    c->mq = NULL;
    c->mqcap = 0;
    atomic_store_explicit(&c->multi_n, -1, memory_order_relaxed);
    forget_watches(c);

    int argc = x->argc;
    const char **argv = x->argv;
    size_t *argvlen = x->argvlen;
    const command *self = c->cmd;
    reply_array(&x->out, n);
    c->in_exec = true;
    for (int i = 0; i < n; i++) {
        x->argc = q[i].argc;
        x->argv = q[i].argv;
        x->argvlen = q[i].argvlen;
        /* As Redis: the user's rules may have changed since queueing. */
        if (!acl_gate(c, q[i].cmd, ACL_GATE_EXEC))
            continue;
        if ((q[i].cmd->flags & CMD_WRITE) && !wal_write_ok())
            reply_errorf(&x->out, "MISCONF Errors writing to the AOF file: %s",
                         strerror(wal_last_errno()));
        else
            command_call(c, q[i].cmd);
    }
    c->in_exec = false;
    commit_exclusive_end(c->w);
    x->argc = argc;
    x->argv = argv;
    x->argvlen = argvlen;
    c->cmd = self;
    for (int i = 0; i < n; i++) {
        free(q[i].buf);
        free(q[i].argv);
        free(q[i].argvlen);
    }
    free(q);
    return true;
}

bool watchCommand(cmd_ctx *x)
{
    client *c = client_of(x);
    if (client_in_multi(c)) {
        reply_error(&x->out, "ERR WATCH inside MULTI is not allowed");
        return false;
    }
    size_t need = c->nwatched + (size_t)(x->argc - 1);
    if (need > c->capwatched) {
        multi_watch *w = realloc(c->watched, need * sizeof(*w));
        if (w == NULL) {
            reply_oom(x);
            return false;
        }
        c->watched = w;
        c->capwatched = need;
    }
    uint64_t ep = atomic_load_explicit(&epoch, memory_order_seq_cst);
    for (int i = 1; i < x->argc; i++) {
        uint32_t slot = key_slot(x->argv[i], x->argvlen[i]);
        multi_watch w = {
            .slot = slot,
            .version = atomic_load_explicit(&versions[slot], memory_order_seq_cst),
            .epoch = ep,
        };
        /* After the version: a write between the two is caught by it. */
        if (key_exists(x->argv[i], x->argvlen[i])) {
            w.key = malloc(x->argvlen[i] ? x->argvlen[i] : 1);
            if (w.key == NULL) {
                reply_oom(x);
                return false;
            }
            memcpy(w.key, x->argv[i], x->argvlen[i]);
            w.klen = x->argvlen[i];
        }
        c->watched[c->nwatched++] = w;
    }
    reply_ok(&x->out);
    return true;
}

bool unwatchCommand(cmd_ctx *x)
{
    client *c = client_of(x);
    forget_watches(c);
    reply_ok(&x->out);
    return true;
}

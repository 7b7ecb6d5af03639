/* Pub/Sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH and
 * PUBSUB, with Redis 7's replies.
 *
 * Subscribers live on every worker's loop, so the channels and patterns are
 * one table for the whole server under one mutex (subscribing and
 * publishing are rare next to filter commands; Sentinel publishes every two
 * seconds). A publisher never touches another worker's client: it appends
 * the encoded message to the subscriber's mailbox under that worker's
 * mbox_lock and wakes the worker, whose loop moves the mailbox into the
 * client's replies (pubsub_drain). A message to the publisher itself goes
 * straight into its replies, before PUBLISH's own answer, as in Redis.
 *
 * Lifetime: a client leaves every table entry under the pubsub lock and
 * its worker's pending list under mbox_lock before it is freed, so a
 * publisher (which finds subscribers only under the pubsub lock) never
 * reaches a freed client. Lock order: pubsub lock, then a mbox_lock.
 */
#include <stdlib.h>
#include <string.h>

#include "keyhash.h"
#include "server.h"
#include "util.h"

typedef struct ps_entry {
    char *name;
    size_t len;
    uint64_t hash;
    client **subs;
    size_t nsubs, cap;
    struct ps_entry *next;
} ps_entry;

typedef struct ps_table {
    ps_entry **b;
    size_t nb, n;
} ps_table;

static pthread_mutex_t ps_lock = PTHREAD_MUTEX_INITIALIZER;
static ps_table channels, patterns;
static _Atomic uint64_t nchannels, npatterns, nsubscribers;

/* Keyed: channel names are chosen by clients (keyhash.h). */
static uint64_t hash_name(const char *s, size_t n) { return keyhash(s, n); }

static ps_entry *table_find(ps_table *t, const char *s, size_t n, uint64_t h)
{
    if (t->nb == 0)
        return NULL;
    for (ps_entry *e = t->b[h & (t->nb - 1)]; e; e = e->next)
        if (e->hash == h && e->len == n && memcmp(e->name, s, n) == 0)
            return e;
    return NULL;
}

static bool table_grow(ps_table *t)
{
    size_t nb = t->nb ? t->nb * 2 : 16;
    ps_entry **b = calloc(nb, sizeof(*b));
    if (b == NULL)
        return false;
    for (size_t i = 0; i < t->nb; i++) {
        ps_entry *next;
        for (ps_entry *e = t->b[i]; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
        }
    }
    free(t->b);
    t->b = b;
    t->nb = nb;
    return true;
}

static ps_entry *table_add(ps_table *t, const char *s, size_t n, uint64_t h)
{
    if (t->n >= t->nb && !table_grow(t))
        return NULL;
    ps_entry *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    e->name = malloc(n + 1);
    if (e->name == NULL) {
        free(e);
        return NULL;
    }
    memcpy(e->name, s, n);
    e->name[n] = '\0';
    e->len = n;
    e->hash = h;
    e->next = t->b[h & (t->nb - 1)];
    t->b[h & (t->nb - 1)] = e;
    t->n++;
    return e;
}

static void table_remove(ps_table *t, ps_entry *e)
{
    ps_entry **p = &t->b[e->hash & (t->nb - 1)];
    while (*p != e)
        p = &(*p)->next;
    *p = e->next;
    t->n--;
    free(e->subs);
    free(e->name);
    free(e);
    if (t->n == 0) {
        free(t->b);
        t->b = NULL;
        t->nb = 0;
    }
}

/* ---- one client's subscriptions (its own worker, under ps_lock) ---- */

typedef struct kind {
    ps_table *t;
    _Atomic uint64_t *count;
    const char *sub, *unsub; /* reply names */
    bool pattern;
} kind;

static const kind CHANNELS = {&channels, &nchannels, "subscribe", "unsubscribe", false};
static const kind PATTERNS = {&patterns, &npatterns, "psubscribe", "punsubscribe", true};

static ps_entry ***list_of(client *c, const kind *k, _Atomic int **n, size_t **cap)
{
    *n = k->pattern ? &c->npats : &c->nchans;
    *cap = k->pattern ? &c->cappats : &c->capchans;
    return k->pattern ? &c->pats : &c->chans;
}

static void counts_changed(int before, int after)
{
    if (before == 0 && after > 0)
        atomic_fetch_add(&nsubscribers, 1);
    else if (before > 0 && after == 0)
        atomic_fetch_sub(&nsubscribers, 1);
}

/* Returns false only when out of memory. */
static bool subscribe_one(client *c, const kind *k, const char *s, size_t n)
{
    _Atomic int *cnt;
    size_t *cap;
    ps_entry ***list = list_of(c, k, &cnt, &cap);
    uint64_t h = hash_name(s, n);
    ps_entry *e = table_find(k->t, s, n, h);
    if (e) {
        for (int i = 0; i < atomic_load(cnt); i++)
            if ((*list)[i] == e)
                return true; /* already subscribed: the reply repeats the count */
    }
    if ((size_t)atomic_load(cnt) == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        ps_entry **p = realloc(*list, nc * sizeof(*p));
        if (p == NULL)
            return false;
        *list = p;
        *cap = nc;
    }
    bool created = false;
    if (e == NULL) {
        e = table_add(k->t, s, n, h);
        if (e == NULL)
            return false;
        created = true;
        atomic_fetch_add(k->count, 1);
    }
    if (e->nsubs == e->cap) {
        size_t nc = e->cap ? e->cap * 2 : 4;
        client **p = realloc(e->subs, nc * sizeof(*p));
        if (p == NULL) {
            if (created) {
                table_remove(k->t, e);
                atomic_fetch_sub(k->count, 1);
            }
            return false;
        }
        e->subs = p;
        e->cap = nc;
    }
    e->subs[e->nsubs++] = c;
    int before = pubsub_count(c);
    (*list)[atomic_load(cnt)] = e;
    atomic_fetch_add(cnt, 1);
    counts_changed(before, pubsub_count(c));
    c->ps_used = true;
    return true;
}

/* Drop the client's i-th entry of kind k. */
static void unsubscribe_at(client *c, const kind *k, int i)
{
    _Atomic int *cnt;
    size_t *cap;
    ps_entry ***list = list_of(c, k, &cnt, &cap);
    ps_entry *e = (*list)[i];
    for (size_t j = 0; j < e->nsubs; j++) {
        if (e->subs[j] == c) {
            /* Keep the order: earlier subscribers are served first. */
            memmove(&e->subs[j], &e->subs[j + 1], (e->nsubs - j - 1) * sizeof(client *));
            e->nsubs--;
            break;
        }
    }
    if (e->nsubs == 0) {
        table_remove(k->t, e);
        atomic_fetch_sub(k->count, 1);
    }
    int before = pubsub_count(c);
    int last = atomic_load(cnt) - 1;
    memmove(&(*list)[i], &(*list)[i + 1], (size_t)(last - i) * sizeof(ps_entry *));
    atomic_store(cnt, last);
    counts_changed(before, pubsub_count(c));
}

static int find_own(client *c, const kind *k, const char *s, size_t n)
{
    _Atomic int *cnt;
    size_t *cap;
    ps_entry ***list = list_of(c, k, &cnt, &cap);
    for (int i = 0; i < atomic_load(cnt); i++)
        if ((*list)[i]->len == n && memcmp((*list)[i]->name, s, n) == 0)
            return i;
    return -1;
}

static void reply_sub(client *c, const char *what, const char *s, size_t n, bool null)
{
    reply *r = &c->cx.out;
    reply_push(r, 3);
    reply_bulk_str(r, what);
    if (null)
        reply_null(r);
    else
        reply_bulk(r, s, n);
    reply_int(r, pubsub_count(c));
}

static bool do_subscribe(cmd_ctx *x, const kind *k)
{
    client *c = client_of(x);
    for (int i = 1; i < x->argc; i++) {
        pthread_mutex_lock(&ps_lock);
        bool ok = subscribe_one(c, k, x->argv[i], x->argvlen[i]);
        pthread_mutex_unlock(&ps_lock);
        if (!ok) {
            reply_oom(x);
            return false;
        }
        reply_sub(c, k->sub, x->argv[i], x->argvlen[i], false);
    }
    return true;
}

static bool do_unsubscribe(cmd_ctx *x, const kind *k)
{
    client *c = client_of(x);
    _Atomic int *cnt;
    size_t *cap;
    ps_entry ***list = list_of(c, k, &cnt, &cap);
    if (x->argc == 1) {
        if (atomic_load(cnt) == 0) {
            reply_sub(c, k->unsub, NULL, 0, true);
            return true;
        }
        while (atomic_load(cnt) > 0) {
            /* The name outlives the entry only through a copy. */
            ps_entry *e = (*list)[0];
            size_t n = e->len;
            char *name = malloc(n + 1);
            if (name)
                memcpy(name, e->name, n);
            pthread_mutex_lock(&ps_lock);
            unsubscribe_at(c, k, 0);
            pthread_mutex_unlock(&ps_lock);
            reply_sub(c, k->unsub, name ? name : "", name ? n : 0, false);
            free(name);
        }
        return true;
    }
    for (int i = 1; i < x->argc; i++) {
        pthread_mutex_lock(&ps_lock);
        int at = find_own(c, k, x->argv[i], x->argvlen[i]);
        if (at >= 0)
            unsubscribe_at(c, k, at);
        pthread_mutex_unlock(&ps_lock);
        reply_sub(c, k->unsub, x->argv[i], x->argvlen[i], false);
    }
    return true;
}

bool subscribeCommand(cmd_ctx *c) { return do_subscribe(c, &CHANNELS); }
bool psubscribeCommand(cmd_ctx *c) { return do_subscribe(c, &PATTERNS); }
bool unsubscribeCommand(cmd_ctx *c) { return do_unsubscribe(c, &CHANNELS); }
bool punsubscribeCommand(cmd_ctx *c) { return do_unsubscribe(c, &PATTERNS); }

void pubsub_client_gone(client *c)
{
    if (!c->ps_used)
        return;
    pthread_mutex_lock(&ps_lock);
    while (atomic_load(&c->nchans) > 0)
        unsubscribe_at(c, &CHANNELS, atomic_load(&c->nchans) - 1);
    while (atomic_load(&c->npats) > 0)
        unsubscribe_at(c, &PATTERNS, atomic_load(&c->npats) - 1);
    pthread_mutex_unlock(&ps_lock);
    free(c->chans);
    free(c->pats);
    c->chans = c->pats = NULL;
    c->capchans = c->cappats = 0;
    worker *w = c->w;
    pthread_mutex_lock(&w->mbox_lock);
    if (c->mqueued) {
        if (c->mprev)
            c->mprev->mnext = c->mnext;
        else
            w->mbox_head = c->mnext;
        if (c->mnext)
            c->mnext->mprev = c->mprev;
        c->mqueued = false;
    }
    free(c->mbox);
    c->mbox = NULL;
    c->mlen = c->mcap = 0;
    pthread_mutex_unlock(&w->mbox_lock);
}

/* ---- PUBLISH ---- */

/* A message is encoded once as a RESP2 array; a RESP3 subscriber gets the
 * same bytes with '>' for '*'. */
static void deliver(client *self, client *to, const reply *m)
{
    int proto = atomic_load_explicit(&to->resp, memory_order_relaxed);
    if (to == self) {
        size_t at = self->cx.out.len;
        reply_raw(&self->cx.out, m->buf, m->len);
        if (!self->cx.out.failed && proto == 3)
            self->cx.out.buf[at] = '>';
        return;
    }
    worker *w = to->w;
    pthread_mutex_lock(&w->mbox_lock);
    if (to->mlen + m->len > to->mcap) {
        size_t cap = to->mcap ? to->mcap : 256;
        while (cap < to->mlen + m->len)
            cap *= 2;
        char *p = realloc(to->mbox, cap);
        if (p == NULL) {
            /* Dropped, as a subscriber over its output limit would be. */
            pthread_mutex_unlock(&w->mbox_lock);
            return;
        }
        to->mbox = p;
        to->mcap = cap;
    }
    memcpy(to->mbox + to->mlen, m->buf, m->len);
    if (proto == 3)
        to->mbox[to->mlen] = '>';
    to->mlen += m->len;
    if (!to->mqueued) {
        to->mqueued = true;
        to->mprev = NULL;
        to->mnext = w->mbox_head;
        if (w->mbox_head)
            w->mbox_head->mprev = to;
        w->mbox_head = to;
    }
    pthread_mutex_unlock(&w->mbox_lock);
    uv_async_send(&w->wake);
}

bool publishCommand(cmd_ctx *x)
{
    client *self = client_of(x);
    const char *ch = x->argv[1], *data = x->argv[2];
    size_t chl = x->argvlen[1], dl = x->argvlen[2];
    reply m, pm;
    reply_init(&m);
    reply_init(&pm);
    m.proto = pm.proto = 2;
    reply_array(&m, 3);
    reply_bulk_str(&m, "message");
    reply_bulk(&m, ch, chl);
    reply_bulk(&m, data, dl);
    long long receivers = 0;
    pthread_mutex_lock(&ps_lock);
    ps_entry *e = table_find(&channels, ch, chl, hash_name(ch, chl));
    if (e && !m.failed) {
        for (size_t i = 0; i < e->nsubs; i++)
            deliver(self, e->subs[i], &m);
        receivers += (long long)e->nsubs;
    }
    for (size_t b = 0; b < patterns.nb; b++) {
        for (ps_entry *p = patterns.b[b]; p; p = p->next) {
            if (!glob_match(p->name, p->len, ch, chl, false))
                continue;
            pm.len = 0;
            reply_array(&pm, 4);
            reply_bulk_str(&pm, "pmessage");
            reply_bulk(&pm, p->name, p->len);
            reply_bulk(&pm, ch, chl);
            reply_bulk(&pm, data, dl);
            if (pm.failed)
                continue;
            for (size_t i = 0; i < p->nsubs; i++)
                deliver(self, p->subs[i], &pm);
            receivers += (long long)p->nsubs;
        }
    }
    pthread_mutex_unlock(&ps_lock);
    reply_free(&m);
    reply_free(&pm);
    reply_int(&x->out, receivers);
    return true;
}

void pubsub_drain(worker *w)
{
    for (;;) {
        pthread_mutex_lock(&w->mbox_lock);
        client *c = w->mbox_head;
        if (c == NULL) {
            pthread_mutex_unlock(&w->mbox_lock);
            return;
        }
        w->mbox_head = c->mnext;
        if (w->mbox_head)
            w->mbox_head->mprev = NULL;
        c->mqueued = false;
        c->mnext = c->mprev = NULL;
        reply_raw(&c->cx.out, c->mbox, c->mlen);
        c->mlen = 0;
        if (c->mcap > 64 * 1024) {
            free(c->mbox);
            c->mbox = NULL;
            c->mcap = 0;
        }
        pthread_mutex_unlock(&w->mbox_lock);
        if (c->cx.out.failed || client_obuf_over_limit(c)) {
            client_close(c);
            continue;
        }
        client_flush(c);
    }
}

/* ---- PUBSUB ---- */

static void reply_names(cmd_ctx *x, ps_table *t, const char *pat, size_t plen)
{
    size_t slot = reply_defer_len(&x->out);
    long long n = 0;
    pthread_mutex_lock(&ps_lock);
    for (size_t b = 0; b < t->nb; b++) {
        for (ps_entry *e = t->b[b]; e; e = e->next) {
            if (pat && !glob_match(pat, plen, e->name, e->len, false))
                continue;
            reply_bulk(&x->out, e->name, e->len);
            n++;
        }
    }
    pthread_mutex_unlock(&ps_lock);
    reply_set_array_len(&x->out, slot, n);
}

bool pubsubCommand(cmd_ctx *x)
{
    reply *r = &x->out;
    if (arg_eq(x, 1, "channels") && x->argc <= 3) {
        reply_names(x, &channels, x->argc == 3 ? x->argv[2] : NULL,
                    x->argc == 3 ? x->argvlen[2] : 0);
    } else if (arg_eq(x, 1, "numsub")) {
        reply_array(r, (long long)(x->argc - 2) * 2);
        for (int i = 2; i < x->argc; i++) {
            pthread_mutex_lock(&ps_lock);
            ps_entry *e = table_find(&channels, x->argv[i], x->argvlen[i],
                                     hash_name(x->argv[i], x->argvlen[i]));
            long long n = e ? (long long)e->nsubs : 0;
            pthread_mutex_unlock(&ps_lock);
            reply_bulk(r, x->argv[i], x->argvlen[i]);
            reply_int(r, n);
        }
    } else if (arg_eq(x, 1, "numpat") && x->argc == 2) {
        reply_int(r, (long long)atomic_load(&npatterns));
    } else if (arg_eq(x, 1, "shardchannels") && x->argc <= 3) {
        reply_array(r, 0); /* no cluster, no shard channels */
    } else if (arg_eq(x, 1, "shardnumsub")) {
        reply_array(r, (long long)(x->argc - 2) * 2);
        for (int i = 2; i < x->argc; i++) {
            reply_bulk(r, x->argv[i], x->argvlen[i]);
            reply_int(r, 0);
        }
    } else if (arg_eq(x, 1, "help") && x->argc == 2) {
        static const char *help[] = {
            "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: "
            "'*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
            "HELP",
            "    Prints this help.",
        };
        reply_lines(r, help, sizeof(help) / sizeof(help[0]));
    } else if (arg_eq(x, 1, "channels") || arg_eq(x, 1, "numpat") || arg_eq(x, 1, "help") ||
               arg_eq(x, 1, "shardchannels")) {
        char sub[16];
        size_t i = 0;
        for (; i < x->argvlen[1] && i < sizeof(sub) - 1; i++)
            sub[i] = (char)(x->argv[1][i] | 0x20);
        sub[i] = '\0';
        reply_errorf(r, "ERR wrong number of arguments for 'pubsub|%s' command", sub);
        return false;
    } else {
        reply_errorf(r, "ERR unknown subcommand '%.*s'. Try PUBSUB HELP.",
                     (int)(x->argvlen[1] < 128 ? x->argvlen[1] : 128), x->argv[1]);
        return false;
    }
    return true;
}

void pubsub_stats(uint64_t *nchan, uint64_t *npat, uint64_t *nclients)
{
    *nchan = atomic_load(&nchannels);
    *npat = atomic_load(&npatterns);
    *nclients = atomic_load(&nsubscribers);
}

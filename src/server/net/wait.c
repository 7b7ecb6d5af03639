/* WAIT numreplicas timeout: the client blocks until that many replicas
 * acknowledged every record appended before it ran, or the timeout. Its
 * worker keeps a list of its blocked clients; a replica's acknowledgement
 * (a sender thread) wakes every worker with blocked clients, and the
 * worker's cron ends the ones whose time is up, as Redis's does. */
#include <stdlib.h>

#include "repl.h"
#include "server.h"
#include "util.h"

typedef struct wait_worker {
    uv_async_t async;
    client *head;
    _Atomic bool has_blocked;
    bool open;
} wait_worker;

static wait_worker *wws;
static int nwws;
static pthread_mutex_t wlock = PTHREAD_MUTEX_INITIALIZER;

static void unlink_client(wait_worker *ww, client *c)
{
    if (c->blk_prev)
        c->blk_prev->blk_next = c->blk_next;
    else
        ww->head = c->blk_next;
    if (c->blk_next)
        c->blk_next->blk_prev = c->blk_prev;
    c->blk_next = c->blk_prev = NULL;
    if (ww->head == NULL)
        atomic_store(&ww->has_blocked, false);
}

/* Answer and unblock the clients that are done (or all, when timeout is
 * a deadline that passed). */
static void check(worker *w, int64_t now)
{
    wait_worker *ww = &wws[w->idx];
    client *next;
    for (client *c = ww->head; c; c = next) {
        next = c->blk_next;
        unsigned n = repl_replicas_acked(c->wait_lsn);
        if (n < c->wait_replicas && !(c->wait_deadline_ms && now >= c->wait_deadline_ms))
            continue;
        unlink_client(ww, c);
        reply_int(&c->cx.out, (long long)n);
        client_resume(c);
    }
}

static void on_ack(uv_async_t *a)
{
    worker *w = a->data;
    check(w, now_ms());
}

static void notify(void)
{
    pthread_mutex_lock(&wlock);
    for (int i = 0; i < nwws; i++)
        if (wws[i].open && atomic_load(&wws[i].has_blocked))
            uv_async_send(&wws[i].async);
    pthread_mutex_unlock(&wlock);
}

void wait_worker_init(worker *w)
{
    pthread_mutex_lock(&wlock);
    if (wws == NULL) {
        wws = calloc((size_t)srv.nworkers, sizeof(*wws));
        if (wws == NULL)
            abort();
        nwws = srv.nworkers;
    }
    repl_set_ack_hook(notify);
    wait_worker *ww = &wws[w->idx];
    uv_async_init(&w->loop, &ww->async, on_ack);
    ww->async.data = w;
    ww->open = true;
    pthread_mutex_unlock(&wlock);
}

static void closed(uv_handle_t *h) { (void)h; }

void wait_worker_close(worker *w)
{
    pthread_mutex_lock(&wlock);
    wws[w->idx].open = false;
    pthread_mutex_unlock(&wlock);
    uv_close((uv_handle_t *)&wws[w->idx].async, closed);
}

void wait_block(client *c, uint64_t lsn, unsigned n, long long timeout_ms)
{
    wait_worker *ww = &wws[c->w->idx];
    c->blocked = true;
    c->wait_lsn = lsn;
    c->wait_replicas = n;
    c->wait_deadline_ms = timeout_ms > 0 ? now_ms() + timeout_ms : 0;
    c->blk_prev = NULL;
    c->blk_next = ww->head;
    if (ww->head)
        ww->head->blk_prev = c;
    ww->head = c;
    atomic_store(&ww->has_blocked, true);
    /* An acknowledgement may have come between the check and the flag. */
    uv_async_send(&ww->async);
}

void wait_forget(client *c)
{
    if (!c->blocked || wws == NULL)
        return;
    unlink_client(&wws[c->w->idx], c);
    c->blocked = false;
}

void wait_cron(worker *w, int64_t now)
{
    if (wws && wws[w->idx].head)
        check(w, now);
}

/* Worker threads, memcached-style: each worker runs its own libuv loop and
 * owns the clients handed to it; nothing about a connection is shared with
 * another loop, so the read/parse/run/reply path takes no lock but the
 * keyspace stripe of the key it touches.
 *
 * The main thread accepts every connection and passes the socket to a worker
 * through a small mutex-protected inbox plus uv_async_send. We prefer this to
 * one SO_REUSEPORT listener per loop because the kernel's 4-tuple hash can
 * put most of a small benchmark's connections on one worker, while
 * round-robin hand-off spreads them evenly; it also gives maxclients one
 * place to be enforced and works the same for every bind address. Accepting
 * is rare next to requests, so the extra hop costs nothing measurable.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commit.h"
#include "persist.h"
#include "server.h"
#include "util.h"

/* The server's state, shared by every layer above this one and main(). */
server_state srv;

static _Atomic unsigned next_worker;

static void close_handle_cb(uv_handle_t *h) { (void)h; }

static void on_wake(uv_async_t *a)
{
    worker *w = a->data;
    if (atomic_load(&w->stopping)) {
        for (client *c = w->clients; c; c = c->next)
            client_close(c);
        pthread_mutex_lock(&w->inbox_lock);
        for (size_t i = 0; i < w->ninbox; i++)
            close(w->inbox[i].fd);
        w->ninbox = 0;
        pthread_mutex_unlock(&w->inbox_lock);
        uv_close((uv_handle_t *)&w->wake, close_handle_cb);
        uv_close((uv_handle_t *)&w->cron, close_handle_cb);
        commit_worker_close(w);
        wait_worker_close(w);
        return;
    }
    struct adopt_req reqs[64];
    for (;;) {
        size_t n = 0;
        pthread_mutex_lock(&w->inbox_lock);
        while (n < 64 && w->ninbox)
            reqs[n++] = w->inbox[--w->ninbox];
        pthread_mutex_unlock(&w->inbox_lock);
        if (n == 0)
            break;
        for (size_t i = 0; i < n; i++) {
            if (client_create(w, reqs[i].fd, reqs[i].flags) == NULL) {
                close(reqs[i].fd);
                atomic_fetch_sub(&srv.connected, 1);
            }
        }
    }
    client *next;
    for (client *c = w->clients; c; c = next) {
        next = c->next;
        if (atomic_load_explicit(&c->kill, memory_order_relaxed))
            client_close(c);
    }
    pubsub_drain(w);
}

static void on_cron(uv_timer_t *t)
{
    worker *w = t->data;
    int64_t now = now_ms();
    client *next;
    for (client *c = w->clients; c; c = next) {
        next = c->next;
        client_cron(c, now);
    }
    wait_cron(w, now);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    uv_run(&w->loop, UV_RUN_DEFAULT);
    return NULL;
}

int workers_start(int n)
{
    srv.nworkers = n;
    srv.workers = calloc((size_t)n, sizeof(worker));
    if (srv.workers == NULL)
        return -1;
    for (int i = 0; i < n; i++) {
        worker *w = &srv.workers[i];
        w->idx = i;
        w->stats = calloc(commands_count(), sizeof(cmd_stat));
        if (w->stats == NULL || uv_loop_init(&w->loop) != 0)
            return -1;
        pthread_mutex_init(&w->inbox_lock, NULL);
        pthread_mutex_init(&w->mbox_lock, NULL);
        uv_async_init(&w->loop, &w->wake, on_wake);
        w->wake.data = w;
        uv_timer_init(&w->loop, &w->cron);
        w->cron.data = w;
        uv_timer_start(&w->cron, on_cron, 100, 100);
        commit_worker_init(w);
        wait_worker_init(w);
    }
    for (int i = 0; i < n; i++) {
        if (pthread_create(&srv.workers[i].thread, NULL, worker_main, &srv.workers[i]) != 0)
            return -1;
    }
    return 0;
}

void workers_stop(void)
{
    for (int i = 0; i < srv.nworkers; i++) {
        atomic_store(&srv.workers[i].stopping, true);
        uv_async_send(&srv.workers[i].wake);
    }
    for (int i = 0; i < srv.nworkers; i++) {
        worker *w = &srv.workers[i];
        pthread_join(w->thread, NULL);
        uv_loop_close(&w->loop);
        pthread_mutex_destroy(&w->inbox_lock);
        pthread_mutex_destroy(&w->mbox_lock);
        free(w->inbox);
        free(w->stats);
    }
    free(srv.workers);
    srv.workers = NULL;
    srv.nworkers = 0;
}

void worker_adopt(int fd) { worker_adopt_flags(fd, 0); }

void worker_adopt_flags(int fd, int flags)
{
    unsigned i = atomic_fetch_add(&next_worker, 1) % (unsigned)srv.nworkers;
    worker *w = &srv.workers[i];
    pthread_mutex_lock(&w->inbox_lock);
    if (w->ninbox == w->capinbox) {
        size_t cap = w->capinbox ? w->capinbox * 2 : 16;
        struct adopt_req *p = realloc(w->inbox, cap * sizeof(*p));
        if (p == NULL) {
            pthread_mutex_unlock(&w->inbox_lock);
            close(fd);
            atomic_fetch_sub(&srv.connected, 1);
            return;
        }
        w->inbox = p;
        w->capinbox = cap;
    }
    w->inbox[w->ninbox++] = (struct adopt_req){fd, flags};
    pthread_mutex_unlock(&w->inbox_lock);
    uv_async_send(&w->wake);
}

void worker_wake_all(void)
{
    for (int i = 0; i < srv.nworkers; i++)
        uv_async_send(&srv.workers[i].wake);
}

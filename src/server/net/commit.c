/* Group commit of replies under appendfsync always: the one place where
 * the durability contract is enforced.
 *
 * No reply of a command that touched keys (a write, a duplicate add, a
 * read) leaves before the log is durable up to every record its answer may
 * depend on, as Redis flushes its AOF before writing any reply. A record
 * an answer depends on was appended by the command itself, or by another
 * command whose change it saw. Changes under an exclusive key lock are
 * logged before the lock is released, so they are appended before anyone
 * can see them. Bloom adds change bits under a shared lock and log right
 * after, so a reader on another worker may see bits whose record is not
 * appended yet: each worker publishes an odd sequence number while a write
 * command runs (commit_write_begin/end), and the dependency of a client's
 * replies is taken only after every write command that was running on
 * another worker has ended. It is then the last LSN appended: a bound on
 * every record seen, at the price of waiting for records of other keys,
 * which the same group fsync covers anyway.
 *
 * Instead of blocking its worker on the fsync, the worker parks the client
 * on its own list and goes on serving other connections; the log thread,
 * after each fsync, wakes every worker that has parked clients (uv_async),
 * and the worker writes out the replies of those now covered. One fsync
 * thus releases every client of every worker whose records it covered, and
 * a worker's loop never waits for the disk.
 *
 * The parked flag also holds back writes started elsewhere (the end of a
 * previous write): client_flush() does nothing while it is set.
 */
#include <sched.h>
#include <stdlib.h>

#include "commit.h"
#include "persist.h"
#include "server.h"

typedef struct commit_worker {
    _Atomic uint64_t writing; /* odd while a write command runs */
    char pad[56];             /* written often: its own cache line */
    uv_async_t async;
    client *head; /* parked clients; this worker's thread only */
    _Atomic bool has_parked;
    bool open; /* async usable; under notify_lock */
} commit_worker;

static commit_worker *cws;
static int ncws;
/* The log thread must not signal a handle its worker has closed. */
static pthread_mutex_t notify_lock = PTHREAD_MUTEX_INITIALIZER;

static void unlink_client(commit_worker *cw, client *c)
{
    if (c->wal_prev)
        c->wal_prev->wal_next = c->wal_next;
    else
        cw->head = c->wal_next;
    if (c->wal_next)
        c->wal_next->wal_prev = c->wal_prev;
    c->wal_next = c->wal_prev = NULL;
    c->wal_parked = false;
}

static void on_durable(uv_async_t *a)
{
    commit_worker *cw = a->data;
    uint64_t durable = wal_durable_lsn();
    client *next;
    for (client *c = cw->head; c; c = next) {
        next = c->wal_next;
        if (c->wal_lsn <= durable) {
            unlink_client(cw, c);
            client_flush(c);
        }
    }
    if (cw->head == NULL)
        atomic_store(&cw->has_parked, false);
    /* Parked again meanwhile, or a notification raced the flag: check once
     * more so no client waits for an fsync that already happened. */
    if (cw->head && wal_durable_lsn() > durable)
        uv_async_send(&cw->async);
}

void commit_worker_init(worker *w)
{
    pthread_mutex_lock(&notify_lock);
    if (cws == NULL) {
        cws = calloc((size_t)srv.nworkers, sizeof(*cws));
        if (cws == NULL)
            abort();
        ncws = srv.nworkers;
    }
    wal_set_durable_hook(commit_notify);
    commit_worker *cw = &cws[w->idx];
    uv_async_init(&w->loop, &cw->async, on_durable);
    cw->async.data = cw;
    cw->open = true;
    pthread_mutex_unlock(&notify_lock);
}

static void closed(uv_handle_t *h) { (void)h; }

void commit_worker_close(worker *w)
{
    commit_worker *cw = &cws[w->idx];
    pthread_mutex_lock(&notify_lock);
    cw->open = false;
    pthread_mutex_unlock(&notify_lock);
    uv_close((uv_handle_t *)&cw->async, closed);
}

/* EXEC runs its queued commands alone among writers: while a worker owns
 * the gate, write commands of the other workers wait in commit_write_begin
 * before they take any key lock. Each side publishes first and then looks
 * (the writer its odd count, the owner its index; both seq_cst), so either
 * the writer sees the owner and backs off, or the owner sees the writer
 * and waits for it to end. */
static _Atomic int gate_owner = -1;
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;

void commit_write_begin(worker *w)
{
    if (cws == NULL)
        return;
    _Atomic uint64_t *mine = &cws[w->idx].writing;
    for (;;) {
        atomic_fetch_add_explicit(mine, 1, memory_order_seq_cst);
        int owner = atomic_load_explicit(&gate_owner, memory_order_seq_cst);
        if (owner < 0 || owner == w->idx)
            return;
        atomic_fetch_add_explicit(mine, 1, memory_order_seq_cst);
        for (unsigned spins = 0; atomic_load_explicit(&gate_owner, memory_order_seq_cst) >= 0;
             spins++)
            if (spins > 64)
                sched_yield();
    }
}

void commit_exclusive_begin(worker *w)
{
    if (cws == NULL)
        return;
    pthread_mutex_lock(&gate_lock);
    atomic_store_explicit(&gate_owner, w->idx, memory_order_seq_cst);
    for (int i = 0; i < ncws; i++) {
        if (i == w->idx)
            continue;
        for (unsigned spins = 0; atomic_load_explicit(&cws[i].writing, memory_order_seq_cst) & 1;
             spins++)
            if (spins > 64)
                sched_yield();
    }
}

void commit_exclusive_end(worker *w)
{
    (void)w;
    if (cws == NULL)
        return;
    atomic_store_explicit(&gate_owner, -1, memory_order_seq_cst);
    pthread_mutex_unlock(&gate_lock);
}

void commit_write_end(worker *w)
{
    if (cws)
        atomic_fetch_add_explicit(&cws[w->idx].writing, 1, memory_order_seq_cst);
}

/* Wait until every write command running on another worker now has ended
 * (each is CPU work under key locks this thread does not hold: short), then
 * the last LSN appended bounds every record this worker's commands saw. */
static uint64_t dependency(worker *self)
{
    for (int i = 0; i < ncws; i++) {
        if (i == self->idx)
            continue;
        uint64_t s = atomic_load_explicit(&cws[i].writing, memory_order_seq_cst);
        if ((s & 1) == 0)
            continue;
        for (unsigned spins = 0; atomic_load_explicit(&cws[i].writing, memory_order_seq_cst) == s;
             spins++)
            if (spins > 64)
                sched_yield();
    }
    return wal_assigned_lsn();
}

bool commit_defer(client *c)
{
    if (!wal_enabled() ||
        atomic_load_explicit(&cfg.appendfsync, memory_order_relaxed) != FSYNC_ALWAYS)
        return false;
    uint64_t lsn = dependency(c->w);
    if (lsn > c->wal_lsn)
        c->wal_lsn = lsn;
    if (c->wal_parked)
        return true;
    if (wal_durable_lsn() >= c->wal_lsn)
        return false;
    commit_worker *cw = &cws[c->w->idx];
    c->wal_prev = NULL;
    c->wal_next = cw->head;
    if (cw->head)
        cw->head->wal_prev = c;
    cw->head = c;
    c->wal_parked = true;
    /* Publish the flag before the last look at the durable LSN: the log
     * thread stores that LSN before reading the flag, so one of the two
     * sees the other. */
    atomic_store(&cw->has_parked, true);
    if (wal_durable_lsn() >= c->wal_lsn)
        uv_async_send(&cw->async);
    return true;
}

void commit_forget(client *c)
{
    if (c->wal_parked)
        unlink_client(&cws[c->w->idx], c);
}

void commit_notify(void)
{
    pthread_mutex_lock(&notify_lock);
    for (int i = 0; i < ncws; i++)
        if (cws[i].open && atomic_load(&cws[i].has_parked))
            uv_async_send(&cws[i].async);
    pthread_mutex_unlock(&notify_lock);
}

void commit_free(void)
{
    pthread_mutex_lock(&notify_lock);
    free(cws);
    cws = NULL;
    ncws = 0;
    pthread_mutex_unlock(&notify_lock);
}

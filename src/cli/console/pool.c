/* Connections to the nodes with the monitoring credentials, kept open and
 * shared by the console's threads: each is held by one caller at a time,
 * so replies never interleave; a connection that failed is closed and the
 * next caller opens a new one. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"

#define POOL_MAX 96
#define CALL_TIMEOUT_MS 5000

typedef struct entry {
    rc_conn c;
    char addr[CN_ADDR];
    bool busy;
} entry;

static entry *pool[POOL_MAX];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

const char *rv_err(const rc_value *v) { return v && v->type == '-' ? v->str : NULL; }

rc_conn *pool_get(const char *addr, char *err, size_t errlen)
{
    pthread_mutex_lock(&lock);
    int freeslot = -1;
    for (int i = 0; i < POOL_MAX; i++) {
        if (pool[i] && !pool[i]->busy && strcmp(pool[i]->addr, addr) == 0) {
            pool[i]->busy = true;
            pthread_mutex_unlock(&lock);
            return &pool[i]->c;
        }
        if (!pool[i] && freeslot < 0)
            freeslot = i;
    }
    if (freeslot < 0) { /* full: an idle connection to another node goes */
        for (int i = 0; i < POOL_MAX; i++)
            if (!pool[i]->busy) {
                rc_close(&pool[i]->c);
                free(pool[i]);
                pool[i] = NULL;
                freeslot = i;
                break;
            }
    }
    if (freeslot < 0) {
        pthread_mutex_unlock(&lock);
        snprintf(err, errlen, "too many connections in use");
        return NULL;
    }
    entry *e = calloc(1, sizeof(*e));
    if (!e) {
        pthread_mutex_unlock(&lock);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(e->addr, sizeof(e->addr), "%s", addr);
    e->busy = true;
    e->c.fd = -1;
    pool[freeslot] = e;
    pthread_mutex_unlock(&lock);

    char host[CN_ADDR], port[16];
    if (!rc_split_addr(addr, host, sizeof(host), port, sizeof(port))) {
        snprintf(err, errlen, "malformed address %s", addr);
    } else if (rc_open(&e->c, host, port, &cn_cfg.opts, err, errlen) == 0) {
        return &e->c;
    }
    pthread_mutex_lock(&lock);
    pool[freeslot] = NULL;
    pthread_mutex_unlock(&lock);
    free(e);
    return NULL;
}

void pool_put(rc_conn *c, bool ok)
{
    if (!c)
        return;
    entry *e = (entry *)c; /* c is the entry's first member */
    pthread_mutex_lock(&lock);
    if (ok) {
        e->busy = false;
    } else {
        for (int i = 0; i < POOL_MAX; i++)
            if (pool[i] == e)
                pool[i] = NULL;
        rc_close(&e->c);
        free(e);
    }
    pthread_mutex_unlock(&lock);
}

void pool_close_all(void)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < POOL_MAX; i++)
        if (pool[i] && !pool[i]->busy) {
            rc_close(&pool[i]->c);
            free(pool[i]);
            pool[i] = NULL;
        }
    pthread_mutex_unlock(&lock);
}

bool pool_pipeline(rc_conn *c, size_t n, const size_t *argc, const char *const *const *argv,
                   const size_t *const *lens, rc_value **out, int timeout_ms)
{
    char err[160];
    for (size_t i = 0; i < n; i++) {
        out[i] = NULL;
        if (rc_send(c, argc[i], argv[i], lens ? lens[i] : NULL) != 0)
            return false;
    }
    for (size_t i = 0; i < n; i++)
        if (!(out[i] = rc_read(c, timeout_ms, err, sizeof(err))))
            return false;
    return true;
}

rc_value *pool_call(const char *addr, char *err, size_t errlen, size_t argc,
                    const char *const *argv, const size_t *lens)
{
    rc_conn *c = pool_get(addr, err, errlen);
    if (!c)
        return NULL;
    rc_value *v = rc_call(c, CALL_TIMEOUT_MS, err, errlen, argc, argv, lens);
    pool_put(c, v != NULL);
    return v;
}

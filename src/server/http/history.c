/* Fill and false-positive rate of each filter over the last hour, for the
 * console's chart. A thread of the HTTP layer samples the filters every
 * console-sample-interval seconds, so the chart shows the hour before the
 * page was opened, whoever watched it. At most metrics-max-key-series
 * filters (the ones /metrics describes) and HISTORY_MAX samples each; a
 * filter that is gone loses its history at the next sample. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "http.h"
#include "util.h"

#define HOUR_MS (3600 * 1000LL)

typedef struct sample {
    int64_t t_ms;
    double fill, fpr; /* fpr < 0: the type has no estimate */
} sample;

typedef struct series {
    char *key;
    size_t klen;
    sample s[HISTORY_MAX]; /* a ring: the oldest at head when n == HISTORY_MAX */
    unsigned head, n;
} series;

static struct {
    pthread_mutex_t lock; /* the series; held briefly, never while sampling */
    pthread_cond_t wake;
    bool running, stop;
    pthread_t thread;
    series **v; /* in key order */
    size_t n;
} H = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static int keycmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

static void series_free(series *s)
{
    if (s) {
        free(s->key);
        free(s);
    }
}

/* The new set of series: the filters of fl (in key order, as
 * filters_collect gives them), each with its old samples and one more. A
 * series that cannot be allocated is left out until the next sample. */
static void record(const filter_list *fl, int64_t now)
{
    series **next = calloc(fl->n ? fl->n : 1, sizeof(*next));
    if (next == NULL)
        return;
    pthread_mutex_lock(&H.lock);
    size_t j = 0, m = 0;
    for (size_t i = 0; i < fl->n; i++) {
        const filter_row *r = &fl->rows[i];
        while (j < H.n && keycmp(H.v[j]->key, H.v[j]->klen, r->key, r->klen) < 0)
            series_free(H.v[j++]);
        series *s = NULL;
        if (j < H.n && keycmp(H.v[j]->key, H.v[j]->klen, r->key, r->klen) == 0) {
            s = H.v[j++];
        } else if ((s = calloc(1, sizeof(*s))) != NULL) {
            s->key = malloc(r->klen ? r->klen : 1);
            if (s->key == NULL) {
                free(s);
                continue;
            }
            memcpy(s->key, r->key, r->klen);
            s->klen = r->klen;
        } else {
            continue;
        }
        /* Samples older than an hour go first, then the oldest if full. */
        while (s->n && now - s->s[s->head].t_ms > HOUR_MS) {
            s->head = (s->head + 1) % HISTORY_MAX;
            s->n--;
        }
        if (s->n == HISTORY_MAX) {
            s->head = (s->head + 1) % HISTORY_MAX;
            s->n--;
        }
        s->s[(s->head + s->n++) % HISTORY_MAX] = (sample){now, r->fill, r->stats.fpr};
        next[m++] = s;
    }
    while (j < H.n)
        series_free(H.v[j++]);
    free(H.v);
    H.v = next;
    H.n = m;
    pthread_mutex_unlock(&H.lock);
}

static long long interval_s(void)
{
    return atomic_load_explicit(&cfg.console_sample_interval, memory_order_relaxed);
}

static void *sampler(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&H.lock);
    while (!H.stop) {
        pthread_mutex_unlock(&H.lock);
        filter_list fl;
        filters_collect(
            &fl, (size_t)atomic_load_explicit(&cfg.metrics_max_key_series, memory_order_relaxed));
        record(&fl, now_ms());
        filters_free(&fl);
        pthread_mutex_lock(&H.lock);
        /* The interval is read again each time: CONFIG SET takes effect
         * at the next sample. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += interval_s();
        while (!H.stop && pthread_cond_timedwait(&H.wake, &H.lock, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&H.lock);
    return NULL;
}

bool history_start(void)
{
    H.stop = false;
    H.running = pthread_create(&H.thread, NULL, sampler, NULL) == 0;
    return H.running;
}

void history_stop(void)
{
    if (!H.running)
        return;
    pthread_mutex_lock(&H.lock);
    H.stop = true;
    pthread_cond_signal(&H.wake);
    pthread_mutex_unlock(&H.lock);
    pthread_join(H.thread, NULL);
    H.running = false;
    for (size_t i = 0; i < H.n; i++)
        series_free(H.v[i]);
    free(H.v);
    H.v = NULL;
    H.n = 0;
}

void api_history(const char *name, size_t len, textbuf *b)
{
    tb_printf(b, "{\"interval_s\":%lld,\"now_ms\":%lld,\"samples\":[", interval_s(),
              (long long)now_ms());
    pthread_mutex_lock(&H.lock);
    size_t lo = 0, hi = name ? H.n : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (keycmp(H.v[mid]->key, H.v[mid]->klen, name, len) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (name && lo < H.n && keycmp(H.v[lo]->key, H.v[lo]->klen, name, len) == 0) {
        const series *s = H.v[lo];
        for (unsigned i = 0; i < s->n; i++) {
            const sample *p = &s->s[(s->head + i) % HISTORY_MAX];
            tb_printf(b, "%s[%lld,%.17g,", i ? "," : "", (long long)p->t_ms, p->fill);
            if (p->fpr >= 0)
                tb_printf(b, "%.17g]", p->fpr);
            else
                tb_puts(b, "null]");
        }
    }
    pthread_mutex_unlock(&H.lock);
    tb_puts(b, "]}");
}

/* The server's log lines: "pid:M date mark message", as Redis writes them. */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static FILE *logfp;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static void (*_Atomic log_sink)(int level, const char *msg);

void log_set_sink(void (*sink)(int level, const char *msg)) { atomic_store(&log_sink, sink); }

bool log_open(const char *path)
{
    FILE *f = fopen(path, "a");
    if (f == NULL)
        return false;
    pthread_mutex_lock(&log_lock);
    logfp = f;
    pthread_mutex_unlock(&log_lock);
    return true;
}

void log_close(void)
{
    pthread_mutex_lock(&log_lock);
    if (logfp)
        fclose(logfp);
    logfp = NULL;
    pthread_mutex_unlock(&log_lock);
}

void server_log(int level, const char *fmt, ...)
{
    void (*sink)(int, const char *) = atomic_load(&log_sink);
    if (sink == NULL && level < atomic_load_explicit(&cfg.loglevel, memory_order_relaxed))
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (sink) {
        sink(level, msg);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    char when[64];
    size_t off = strftime(when, sizeof(when), "%d %b %Y %H:%M:%S.", &tm);
    snprintf(when + off, sizeof(when) - off, "%03d", (int)(ts.tv_nsec / 1000000));
    const char *mark = ".-*#";
    pthread_mutex_lock(&log_lock);
    FILE *fp = logfp ? logfp : stdout;
    fprintf(fp, "%d:M %s %c %s\n", (int)getpid(), when, mark[level], msg);
    fflush(fp);
    pthread_mutex_unlock(&log_lock);
}

/* maxclients against the open-file limit; see fdlimit.h. */
#include "fdlimit.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>

#include "log.h"

static _Atomic long long reserved = FDLIMIT_MIN_RESERVED;

void fdlimit_set_reserved(long long n) { atomic_store(&reserved, n); }

/* The soft limit v, keeping the hard limit unless v is past it (which takes
 * the privilege to raise it). */
static bool set_soft(rlim_t v, rlim_t hard)
{
    struct rlimit r = {.rlim_cur = v, .rlim_max = v > hard ? v : hard};
    return setrlimit(RLIMIT_NOFILE, &r) == 0;
}

long long fdlimit_fit(long long maxclients, bool at_start)
{
    long long res = atomic_load(&reserved);
    rlim_t want = (rlim_t)(maxclients + res);
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0) {
        server_log(LOG_WARNING,
                   "Unable to obtain the current NOFILE limit (%s), assuming 1024 and setting "
                   "the max clients configuration accordingly.",
                   strerror(errno));
        return 1024 - res;
    }
    rlim_t old = lim.rlim_cur;
    if (old >= want)
        return maxclients;
    if (set_soft(want, lim.rlim_max)) {
        server_log(LOG_NOTICE,
                   "Increased maximum number of open files to %llu (it was originally set to "
                   "%llu).",
                   (unsigned long long)want, (unsigned long long)old);
        return maxclients;
    }
    int why = errno;
    /* The largest limit that can be set, by bisection between the current
     * one (set) and want (refused): the hard limit without the privilege,
     * the system's nr_open with it. Successes only ever raise the limit, so
     * the last one is where it stays. */
    rlim_t lo = old, hi = want;
    while (hi - lo > 1) {
        rlim_t mid = lo + (hi - lo) / 2;
        if (set_soft(mid, lim.rlim_max))
            lo = mid;
        else
            hi = mid;
    }
    long long fit = (long long)lo - res;
    if (fit < 1) {
        if (at_start) {
            server_log(LOG_WARNING,
                       "Your current 'ulimit -n' of %llu is not enough for the server to start. "
                       "Please increase your open file limit to at least %llu. Exiting.",
                       (unsigned long long)old, (unsigned long long)want);
            return 0;
        }
        fit = 0;
    }
    server_log(LOG_WARNING,
               "You requested maxclients of %lld requiring at least %llu max file descriptors.",
               maxclients, (unsigned long long)want);
    server_log(LOG_WARNING, "Server can't set maximum open files to %llu because of OS error: %s.",
               (unsigned long long)want, strerror(why));
    server_log(LOG_WARNING,
               "Current maximum open files is %llu. maxclients has been reduced to %lld to "
               "compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.",
               (unsigned long long)lo, fit);
    return fit;
}

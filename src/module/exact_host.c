/* bloomery.so keeps no exact store: Redis owns the module's persistence
 * and replication, and a RocksDB beside each Redis node would be neither
 * in its RDB nor in its replication stream. BF.RESERVE ... EXACT answers
 * "ERR EXACT is not available: ..." with this reason (docs/EXACT.md). */
#include <stdio.h>
#include <string.h>

#include "exact_store.h"

#define NO_STORE                                                                                   \
    "bloomery.so keeps no exact store (its values live in Redis's RDB and replication); "          \
    "run exact filters in bloomeryd"

bool xs_open(const char *dir, char *err, size_t errlen)
{
    (void)dir;
    snprintf(err, errlen, "%s", NO_STORE);
    return false;
}

void xs_close(void) {}
bool xs_write_failing(void) { return false; }
void xs_heal(void) {}

void xs_close_failed(const char *why) { (void)why; }
bool xs_ok(void) { return false; }
const char *xs_error(void) { return NO_STORE; }

static bool refuse(char *err, size_t errlen)
{
    snprintf(err, errlen, "%s", NO_STORE);
    return false;
}

bool xs_get(uint64_t id, const int64_t *periods, size_t np, const uint8_t *fps, size_t n,
            uint8_t *found, char *err, size_t errlen)
{
    (void)id, (void)periods, (void)np, (void)fps;
    memset(found, 0, n);
    return refuse(err, errlen);
}

uint64_t xs_epoch(void) { return 0; }

bool xs_put(uint64_t id, int64_t period, const uint8_t *fps, size_t n, char *err, size_t errlen)
{
    (void)id, (void)period, (void)fps, (void)n;
    return refuse(err, errlen);
}

bool xs_drop(uint64_t id, int64_t period, char *err, size_t errlen)
{
    (void)id, (void)period;
    return refuse(err, errlen);
}

size_t xs_periods(uint64_t id, int64_t *out, size_t max)
{
    (void)id, (void)out, (void)max;
    return 0;
}

bool xs_sync(uint64_t upto, char *err, size_t errlen)
{
    (void)upto;
    return refuse(err, errlen);
}

uint64_t xs_applied(void) { return 0; }
void xs_gc(bool (*live)(uint64_t id)) { (void)live; }
bool xs_checkpoint(const char *path, char *err, size_t errlen)
{
    (void)path;
    return refuse(err, errlen);
}

void xs_compact(void) {}

void xs_get_stats(xs_stats *s) { memset(s, 0, sizeof(*s)); }

uint64_t xs_count(uint64_t id)
{
    (void)id;
    return 0;
}

bool xs_reopen(const char *dir, char *err, size_t errlen)
{
    (void)dir;
    return refuse(err, errlen);
}

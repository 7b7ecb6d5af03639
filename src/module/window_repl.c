/* Windows' time inside Redis: the clock a window command runs at, its
 * rotations sent to replicas and the AOF as explicit effects, and the
 * periodic rotation of idle windows.
 *
 * A master runs a window command at its own clock (wal_window_clock_ms)
 * and replicates, before the command itself:
 *
 *   BLOOMERY.WINROTATE key start_ms early   one per rotation it performed
 *   BLOOMERY.WINCLOCK now_ms                the instant the command ran at
 *
 * (Redis wraps them with the command in MULTI/EXEC). A replica, or an AOF
 * being loaded, applies each rotation as recorded and runs the command at
 * the pinned instant, so its creation time, its adds' view of which slices
 * are live and its counts are the master's, whatever its own clock says;
 * with the rotations already applied it finds none due at that instant.
 * The pin holds for the next command of ours only.
 *
 * A timer rotates idle windows on masters (window_cron, a bounded scan per
 * tick) and replicates those rotations the same way; replicas and loads
 * never rotate by their own clock, nor does a master while writes are
 * paused.
 */
#include <stdlib.h>
#include <string.h>

#include "bloomery/window.h"
#include "cmd.h"
#include "config.h"
#include "host.h"
#include "persist.h"
#include "util.h"

#define CRON_PERIOD_MS 100
#define CRON_BUDGET_US 1000

typedef struct rotation {
    char *key;
    size_t klen;
    int64_t start;
    bool early;
} rotation;

static rotation *rots;
static size_t nrots, rots_cap;
static bool touched;     /* the command ran a window at its clock */
static int64_t used_now; /* the instant it read */
static bool pinned;      /* a WINCLOCK came from the master or the AOF */
static int64_t pinned_now;

int64_t wal_window_clock_ms(void)
{
    touched = true;
    used_now =
        pinned ? pinned_now
               : now_ms() + atomic_load_explicit(&cfg.debug_clock_offset_ms, memory_order_relaxed);
    return used_now;
}

void mh_win_note_rotation(const char *key, size_t klen, int64_t start, bool early)
{
    if (nrots == rots_cap) {
        size_t cap = rots_cap ? rots_cap * 2 : 8;
        rotation *r = realloc(rots, cap * sizeof(*r));
        if (r == NULL)
            return; /* the replica finds it due at the pinned instant anyway */
        rots = r;
        rots_cap = cap;
    }
    char *copy = malloc(klen ? klen : 1);
    if (copy == NULL)
        return;
    memcpy(copy, key, klen);
    rots[nrots++] = (rotation){copy, klen, start, early};
}

static bool from_master(RedisModuleCtx *ctx)
{
    return rm.GetContextFlags(ctx) & (RM_CTX_FLAGS_REPLICATED | RM_CTX_FLAGS_LOADING);
}

void mh_win_begin(void)
{
    touched = false;
    nrots = 0;
}

/* What a command (or a cron tick) must replicate ahead of itself. The
 * master's stream already carries the WINCLOCK of a command a replica
 * applies, and Redis passes it on verbatim. */
void mh_win_replicate(RedisModuleCtx *ctx, bool command)
{
    for (size_t i = 0; i < nrots; i++) {
        rm.Replicate(ctx, "bloomery.winrotate", "bll", rots[i].key, rots[i].klen,
                     (long long)rots[i].start, (long long)rots[i].early);
        free(rots[i].key);
    }
    nrots = 0;
    if (command && touched && !from_master(ctx))
        rm.Replicate(ctx, "bloomery.winclock", "l", (long long)used_now);
}

void mh_win_end(void)
{
    for (size_t i = 0; i < nrots; i++)
        free(rots[i].key);
    nrots = 0;
    touched = false;
    pinned = false;
}

static int refuse_from_client(RedisModuleCtx *ctx, const char *name)
{
    (void)name;
    return rm.ReplyWithError(ctx, "ERR this command only comes from a master or an AOF file: it "
                                  "carries a window's rotations and clock");
}

static bool parse_ms(RedisModuleString *s, long long *out)
{
    size_t len;
    const char *p = rm.StringPtrLen(s, &len);
    return str_to_ll(p, len, out);
}

/* BLOOMERY.WINCLOCK now_ms */
static int winclock(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 2)
        return rm.ReplyWithError(ctx,
                                 "ERR wrong number of arguments for 'bloomery.winclock' command");
    if (!from_master(ctx))
        return refuse_from_client(ctx, "winclock");
    long long ms;
    if (!parse_ms(argv[1], &ms))
        return rm.ReplyWithError(ctx, "ERR the clock must be an integer of milliseconds");
    pinned = true;
    pinned_now = ms;
    rm.ReplicateVerbatim(ctx);
    return rm.ReplyWithSimpleString(ctx, "OK");
}

/* BLOOMERY.WINROTATE key start_ms early */
static int winrotate(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 4)
        return rm.ReplyWithError(ctx,
                                 "ERR wrong number of arguments for 'bloomery.winrotate' command");
    if (!from_master(ctx))
        return refuse_from_client(ctx, "winrotate");
    long long start, early;
    if (!parse_ms(argv[2], &start))
        return rm.ReplyWithError(ctx, "ERR the slice start must be an integer of milliseconds");
    if (!parse_ms(argv[3], &early) || (early != 0 && early != 1))
        return rm.ReplyWithError(ctx, "ERR early must be 0 or 1");
    size_t klen;
    const char *key = rm.StringPtrLen(argv[1], &klen);
    mh_begin(ctx, true);
    ks_ref ref;
    kv_entry *e = ks_open(&ref, key, klen, true);
    const char *err = e == NULL                      ? "ERR not found"
                      : e->obj->type != &window_type ? "WRONGTYPE the key holds no window"
                                                     : NULL;
    if (err == NULL)
        win_rotate(e->obj->v, start, early);
    ks_close(&ref);
    mh_end();
    if (err)
        return rm.ReplyWithError(ctx, err);
    rm.ReplicateVerbatim(ctx);
    return rm.ReplyWithSimpleString(ctx, "OK");
}

static void cron(RedisModuleCtx *ctx, void *data)
{
    (void)data;
    int flags = rm.GetContextFlags(ctx);
    /* Writes are paused during a shutdown that waits for replicas, a
     * CLIENT PAUSE or a manual failover: Redis refuses propagation then. */
    if (!(flags & (RM_CTX_FLAGS_SLAVE | RM_CTX_FLAGS_LOADING)) && !rm.AvoidReplicaTraffic()) {
        mh_win_begin();
        mh_begin(ctx, true);
        window_cron(CRON_BUDGET_US);
        mh_end();
        mh_win_replicate(ctx, false);
        mh_win_end();
    }
    rm.CreateTimer(ctx, CRON_PERIOD_MS, cron, NULL);
}

bool mh_window_register(RedisModuleCtx *ctx)
{
    if (!mh_create_command(ctx, "bloomery.winclock", winclock) ||
        !mh_create_command(ctx, "bloomery.winrotate", winrotate))
        return false;
    rm.CreateTimer(ctx, CRON_PERIOD_MS, cron, NULL);
    return true;
}

/* bloomery.so: the value commands of bloomeryd inside Redis.
 *
 * OnLoad registers every row of value_commands.h, each with a wrapper that
 * builds the handlers' cmd_ctx from Redis's arguments, runs the row's
 * handler with the host of keyspace_host.c, whose replies go to Redis as
 * they are made (reply_rm.c), and replicates the command when it changed data (log_host.c).
 * Module arguments are bloomeryd settings as name/value pairs
 * (bf-error-rate 0.001 bf-initial-size 1000 ..., or RedisBloom's names);
 * the same settings are module configs (config_host.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "config.h"
#include "host.h"
#include "log.h"
#include "util.h"
#include "value_commands.h"

#define MODULE_NAME "bloomery"
#define MODULE_VERSION 100 /* 0.1.0 */

/* The keyspace event of a write that changed data, on its first key (the
 * destination of a merge): the command's name in lower case, as
 * RedisBloom names its events ("bf.add", "cf.insert", ...), in the generic
 * class. */
static void notify(RedisModuleCtx *ctx, const command *cmd, RedisModuleString **argv, int argc)
{
    if (cmd->first_key < 1 || cmd->first_key >= argc)
        return;
    rm.NotifyKeyspaceEvent(ctx, RM_NOTIFY_GENERIC, cmd->name, argv[cmd->first_key]);
}

/* Runs one command row: what bloomeryd's dispatcher does for it once
 * Redis has looked it up and applied its own refusals (ACL, OOM for
 * deny-oom, replicas' read-only, MULTI). */
static int run(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, const command *cmd)
{
    /* Room for a 100-item BF.MADD without allocating. */
    const char *small_argv[128];
    size_t small_lens[128];
    const char **av = argc <= 128 ? small_argv : malloc((size_t)argc * sizeof(*av));
    size_t *lens = argc <= 128 ? small_lens : malloc((size_t)argc * sizeof(*lens));
    if (av == NULL || lens == NULL) {
        if (av != small_argv)
            free(av);
        if (lens != small_lens)
            free(lens);
        return rm.ReplyWithError(ctx, "ERR out of memory");
    }
    for (int i = 0; i < argc; i++)
        av[i] = rm.StringPtrLen(argv[i], &lens[i]);
    cmd_ctx c = {.argc = argc, .argv = av, .argvlen = lens};
    reply_init(&c.out);
    c.out.host = ctx;
    c.out.proto = (rm.GetContextFlags(ctx) & RM_CTX_FLAGS_RESP3) ? 3 : 2;
    if ((cmd->arity > 0 && argc != cmd->arity) || argc < -cmd->arity) {
        reply_wrong_arity(&c.out, cmd->name);
    } else {
        mh_win_begin();
        mh_begin(ctx, cmd->flags & CMD_WRITE);
        mh_args(argv, av, lens, argc);
        cmd->proc(&c);
        bool changed = mh_changed;
        mh_end();
        if (changed && (cmd->flags & CMD_WRITE)) {
            mh_win_replicate(ctx, true);
            rm.ReplicateVerbatim(ctx);
            notify(ctx, cmd, argv, argc);
        }
        mh_win_end();
    }
    /* A handler that replied nothing would leave the client waiting. */
    if (c.out.len == 0)
        rm.ReplyWithError(ctx, "ERR bloomery: the command sent no reply");
    reply_free(&c.out);
    if (av != small_argv)
        free(av);
    if (lens != small_lens)
        free(lens);
    return RM_OK;
}

/* One row and one wrapper per command, from the shared list. */
#define ROW(name, proc, arity, flags, fk, lk, ks, group, batch)                                    \
    static const command row_##proc = {name, proc,  arity, flags, fk,   lk,                        \
                                       ks,   group, 0,     false, batch};                          \
    static int run_##proc(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)                 \
    {                                                                                              \
        return run(ctx, argv, argc, &row_##proc);                                                  \
    }
VALUE_COMMANDS(ROW)
#undef ROW

typedef struct registration {
    const command *row;
    rm_cmd_fn fn;
} registration;

#define REG(name, proc, arity, flags, fk, lk, ks, group, batch) {&row_##proc, run_##proc},
static const registration registrations[] = {VALUE_COMMANDS(REG)};
#undef REG

static bool register_command(RedisModuleCtx *ctx, const registration *r)
{
    return mh_create_command(ctx, r->row->name, r->fn);
}

/* maxmemory as Redis has it, for the handlers' reservations (Redis
 * refuses deny-oom commands over it by itself): read at load and again
 * after every CONFIG SET. */
static void read_maxmemory(RedisModuleCtx *ctx)
{
    RedisModuleCallReply *r = rm.Call(ctx, "CONFIG", "cc", "GET", "maxmemory");
    if (r == NULL)
        return;
    if (rm.CallReplyType(r) == RM_REPLY_ARRAY && rm.CallReplyLength(r) == 2) {
        size_t len;
        const char *s = rm.CallReplyStringPtr(rm.CallReplyArrayElement(r, 1), &len);
        char tmp[32];
        if (s && len < sizeof(tmp)) {
            memcpy(tmp, s, len);
            tmp[len] = '\0';
            atomic_store(&cfg.maxmemory, strtoll(tmp, NULL, 10));
        }
    }
    rm.FreeCallReply(r);
}

/* server_log's lines go to Redis's log, which filters them by its own
 * loglevel. */
static void log_to_redis(int level, const char *msg)
{
    static const char *const levels[] = {"debug", "verbose", "notice", "warning"};
    rm.Log(mh_ctx(), levels[level >= 0 && level <= 3 ? level : 3], "%s", msg);
}

static void on_config_change(RedisModuleCtx *ctx, rm_event event, uint64_t subevent, void *data)
{
    (void)event;
    (void)subevent;
    (void)data;
    read_maxmemory(ctx);
}

/* RedisBloom's argument names, so its loadmodule lines keep working. */
static const char *const redisbloom_names[][2] = {
    {"ERROR_RATE", "bf-error-rate"},
    {"INITIAL_SIZE", "bf-initial-size"},
    {"CF_MAX_EXPANSIONS", "cf-max-expansions"},
};

/* The module's arguments: bloomeryd settings, as name/value pairs. */
static bool apply_arguments(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc % 2) {
        rm.Log(ctx, "warning", "bloomery: arguments come as name/value pairs");
        return false;
    }
    for (int i = 0; i < argc; i += 2) {
        size_t nlen, vlen;
        const char *name = rm.StringPtrLen(argv[i], &nlen);
        const char *value = rm.StringPtrLen(argv[i + 1], &vlen);
        for (size_t k = 0; k < sizeof(redisbloom_names) / sizeof(redisbloom_names[0]); k++)
            if (str_eq_ci(name, nlen, redisbloom_names[k][0])) {
                name = redisbloom_names[k][1];
                nlen = strlen(name);
            }
        char err[256];
        char setting[64];
        snprintf(setting, sizeof(setting), "%.*s", (int)(nlen < 63 ? nlen : 63), name);
        if (!config_apply(setting, 1, &value, &vlen, true, err, sizeof(err))) {
            rm.Log(ctx, "warning", "bloomery: %.*s: %s", (int)nlen, name, err);
            return false;
        }
    }
    return true;
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
    __attribute__((visibility("default")));

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (!rm_api_init(ctx))
        return RM_ERR; /* a Redis before 7.0 */
    if (rm.IsModuleNameBusy(MODULE_NAME))
        return RM_ERR;
    rm.SetModuleAttribs(ctx, MODULE_NAME, MODULE_VERSION, RM_APIVER_1);
    /* A damaged value fails the load cleanly (rdb.c returns NULL). */
    rm.SetModuleOptions(ctx, RM_OPTIONS_HANDLE_IO_ERRORS);
    config_init();
    log_set_sink(log_to_redis);
    read_maxmemory(ctx);
    if (!apply_arguments(ctx, argv, argc))
        return RM_ERR;
    if (rm.SubscribeToServerEvent(ctx, (rm_event){RM_EVENT_CONFIG, 1}, on_config_change) != RM_OK)
        rm.Log(ctx, "warning", "bloomery: maxmemory changes will not be seen until a restart");
    if (!mh_config_register(ctx))
        return RM_ERR;
    mh_add_acl_categories(ctx);
    if (!mh_rdb_register(ctx) || !mh_redisbloom_register(ctx) || !mh_loadchunk_register(ctx) ||
        !mh_window_register(ctx))
        return RM_ERR;
    for (size_t i = 0; i < sizeof(registrations) / sizeof(registrations[0]); i++)
        if (!register_command(ctx, &registrations[i]))
            return RM_ERR;
    return RM_OK;
}

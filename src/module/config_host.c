/* bloomeryd's value settings as Redis module configs: CONFIG GET and SET
 * bloomery.<name>, and bloomery.<name> in redis.conf or on the command
 * line. Each is a string config over config.h's table, so values are
 * checked and shown exactly as bloomeryd does. Registered after the
 * module's arguments are applied, with the resulting values as defaults,
 * so an argument still sets a value when the config is not given.
 */
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "host.h"

static const char *const names[] = {
    "bf-error-rate",     "bf-initial-size",   "bf-expansion-factor",
    "bf-default-layout", "cf-max-expansions", "debug-clock-offset-ms",
};
#define NNAMES (sizeof(names) / sizeof(names[0]))

/* The string handed to Redis by the last get of each setting: Redis reads
 * it and leaves it to the module. */
static RedisModuleString *shown[NNAMES];

static RedisModuleString *get(const char *name, void *arg)
{
    size_t i = (size_t)(uintptr_t)arg;
    char buf[128];
    if (!config_format(names[i], buf, sizeof(buf)))
        buf[0] = '\0';
    if (shown[i])
        rm.FreeString(NULL, shown[i]);
    shown[i] = rm.CreateString(NULL, buf, strlen(buf));
    (void)name;
    return shown[i];
}

static int set(const char *name, RedisModuleString *value, void *arg, RedisModuleString **err)
{
    size_t i = (size_t)(uintptr_t)arg, len;
    const char *v = rm.StringPtrLen(value, &len);
    char why[256];
    (void)name;
    if (config_apply(names[i], 1, &v, &len, true, why, sizeof(why)))
        return RM_OK;
    *err = rm.CreateString(NULL, why, strlen(why));
    return RM_ERR;
}

bool mh_config_register(RedisModuleCtx *ctx)
{
    for (size_t i = 0; i < NNAMES; i++) {
        char deflt[128];
        if (!config_format(names[i], deflt, sizeof(deflt)) ||
            rm.RegisterStringConfig(ctx, names[i], deflt, RM_CONFIG_DEFAULT, get, set, NULL,
                                    (void *)(uintptr_t)i) != RM_OK)
            return false;
    }
    return rm.LoadConfigs(ctx) == RM_OK;
}

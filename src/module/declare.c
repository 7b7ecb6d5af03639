/* What each command of the module declares to Redis: its flags, its keys
 * and its ACL categories, as RedisBloom declares its own, so Redis's ACL
 * rules, cluster routing and COMMAND INFO treat our commands as they treat
 * RedisBloom's.
 *
 * Redis flags: RedisBloom's (checked against RedisBloom 2.4.23 loaded in
 * Redis 7.0.15, COMMAND INFO side by side). They differ from bloomeryd's
 * rows in a few places (CF.ADD is not "fast", t-digest reads are not
 * "fast", CF.SCANDUMP is), which is why this table is the module's own.
 * TOPK.COUNT stays "readonly": RedisBloom 2.4 registers it "write" though
 * it only reads, which makes replicas refuse it.
 *
 * Key specs (SetCommandInfo, Redis 7.0): the key each command opens, with
 * RedisBloom's RW/RO and the logical flags of Redis's own commands (RO
 * ACCESS for reads, RW INSERT for adds and creations, RW UPDATE for
 * changes, RW ACCESS UPDATE where the reply shows the value, as INCRBY,
 * RW DELETE for deletions), so `%R~`/`%W~` key permissions apply as they
 * do to Redis's commands. Merges declare their sources too: after a
 * count (CMS.MERGE, TDIGEST.MERGE: dest numkeys src ...) or every
 * argument after dest (BF.MERGE), which first/last/step cannot express.
 *
 * ACL categories: Redis 7.0 derives @read/@write/@fast/@slow from the
 * flags. Where Redis has SetCommandACLCategories (7.2) the command also
 * gets RedisBloom's categories (read/write, fast), and where it has
 * AddACLCategory (7.4) the family's: @bloom, @cuckoo, @cms, @topk,
 * @tdigest.
 */
#include <stdio.h>
#include <string.h>

#include "host.h"

/* Where a command's keys are. */
typedef enum key_layout {
    KEYS_NONE,    /* no key */
    KEYS_ONE,     /* argv[1] */
    KEYS_REST,    /* argv[1] the destination, argv[2..] sources */
    KEYS_NUMKEYS, /* argv[1] the destination, argv[2] a count of sources */
} key_layout;

typedef struct declaration {
    const char *name;
    const char *flags;  /* Redis's command flags */
    const char *acl;    /* ACL categories but the family's (Redis 7.2) */
    const char *family; /* the family's ACL category (Redis 7.4) */
    key_layout keys;
    uint64_t key_flags; /* of argv[1] */
} declaration;

#define RO_ACCESS (RM_CMD_KEY_RO | RM_CMD_KEY_ACCESS)
#define RW_INSERT (RM_CMD_KEY_RW | RM_CMD_KEY_INSERT)
#define RW_UPDATE (RM_CMD_KEY_RW | RM_CMD_KEY_UPDATE)
#define RW_ACCESS_UPDATE (RM_CMD_KEY_RW | RM_CMD_KEY_ACCESS | RM_CMD_KEY_UPDATE)
#define RW_DELETE (RM_CMD_KEY_RW | RM_CMD_KEY_DELETE)

#define CREATE "write deny-oom", "write fast"
#define ADD "write deny-oom", "write"
#define READ_FAST "readonly fast", "read"
#define INFO_FAST "readonly fast", "read fast"
#define READ "readonly", "read"
#define TD_READ "readonly", "read fast"

static const declaration declarations[] = {
    {"bf.reserve", CREATE, "bloom", KEYS_ONE, RW_INSERT},
    {"bf.add", ADD, "bloom", KEYS_ONE, RW_INSERT},
    {"bf.madd", ADD, "bloom", KEYS_ONE, RW_INSERT},
    {"bf.insert", ADD, "bloom", KEYS_ONE, RW_INSERT},
    {"bf.exists", READ_FAST, "bloom", KEYS_ONE, RO_ACCESS},
    {"bf.mexists", READ_FAST, "bloom", KEYS_ONE, RO_ACCESS},
    {"bf.info", INFO_FAST, "bloom", KEYS_ONE, RO_ACCESS},
    {"bf.card", INFO_FAST, "bloom", KEYS_ONE, RO_ACCESS},
    {"bf.scandump", READ_FAST, "bloom", KEYS_ONE, RO_ACCESS},
    {"bf.loadchunk", ADD, "bloom", KEYS_ONE, RW_UPDATE},
    {"bf.debug", READ_FAST, "bloom", KEYS_ONE, RO_ACCESS},
    /* Ours: as CF.DEL and a merge. */
    {"bf.del", "write fast", "write", "bloom", KEYS_ONE, RW_DELETE},
    {"bf.merge", ADD, "bloom", KEYS_REST, RW_UPDATE},
    /* Ours: sets (or shows) a flag of the filter, which must exist. */
    {"bf.config", "write", "write", "bloom", KEYS_ONE, RW_UPDATE},
    {"cf.reserve", CREATE, "cuckoo", KEYS_ONE, RW_INSERT},
    {"cf.add", ADD, "cuckoo", KEYS_ONE, RW_INSERT},
    {"cf.addnx", ADD, "cuckoo", KEYS_ONE, RW_INSERT},
    {"cf.insert", ADD, "cuckoo", KEYS_ONE, RW_INSERT},
    {"cf.insertnx", ADD, "cuckoo", KEYS_ONE, RW_INSERT},
    {"cf.exists", READ_FAST, "cuckoo", KEYS_ONE, RO_ACCESS},
    {"cf.mexists", READ_FAST, "cuckoo", KEYS_ONE, RO_ACCESS},
    {"cf.count", READ_FAST, "cuckoo", KEYS_ONE, RO_ACCESS},
    {"cf.del", "write fast", "write", "cuckoo", KEYS_ONE, RW_DELETE},
    {"cf.info", INFO_FAST, "cuckoo", KEYS_ONE, RO_ACCESS},
    {"cf.scandump", READ_FAST, "cuckoo", KEYS_ONE, RO_ACCESS},
    {"cf.debug", READ_FAST, "cuckoo", KEYS_ONE, RO_ACCESS},
    {"cf.loadchunk", ADD, "cuckoo", KEYS_ONE, RW_UPDATE},
    {"cms.initbydim", CREATE, "cms", KEYS_ONE, RW_INSERT},
    {"cms.initbyprob", CREATE, "cms", KEYS_ONE, RW_INSERT},
    {"cms.incrby", ADD, "cms", KEYS_ONE, RW_ACCESS_UPDATE},
    {"cms.query", READ, "cms", KEYS_ONE, RO_ACCESS},
    {"cms.merge", ADD, "cms", KEYS_NUMKEYS, RW_UPDATE},
    {"cms.info", "readonly", "read fast", "cms", KEYS_ONE, RO_ACCESS},
    {"topk.reserve", CREATE, "topk", KEYS_ONE, RW_INSERT},
    {"topk.add", ADD, "topk", KEYS_ONE, RW_ACCESS_UPDATE},
    {"topk.incrby", ADD, "topk", KEYS_ONE, RW_ACCESS_UPDATE},
    {"topk.query", READ, "topk", KEYS_ONE, RO_ACCESS},
    {"topk.count", READ, "topk", KEYS_ONE, RO_ACCESS},
    {"topk.list", READ, "topk", KEYS_ONE, RO_ACCESS},
    {"topk.info", "readonly", "read fast", "topk", KEYS_ONE, RO_ACCESS},
    {"tdigest.create", CREATE, "tdigest", KEYS_ONE, RW_INSERT},
    {"tdigest.add", ADD, "tdigest", KEYS_ONE, RW_UPDATE},
    {"tdigest.reset", "write deny-oom", "write fast", "tdigest", KEYS_ONE, RW_UPDATE},
    {"tdigest.merge", ADD, "tdigest", KEYS_NUMKEYS, RW_UPDATE},
    {"tdigest.min", TD_READ, "tdigest", KEYS_ONE, RO_ACCESS},
    {"tdigest.max", TD_READ, "tdigest", KEYS_ONE, RO_ACCESS},
    {"tdigest.quantile", TD_READ, "tdigest", KEYS_ONE, RO_ACCESS},
    {"tdigest.cdf", TD_READ, "tdigest", KEYS_ONE, RO_ACCESS},
    {"tdigest.rank", TD_READ, "tdigest", KEYS_ONE, RO_ACCESS},
    {"tdigest.revrank", TD_READ, "tdigest", KEYS_ONE, RO_ACCESS},
    {"tdigest.byrank", TD_READ, "tdigest", KEYS_ONE, RO_ACCESS},
    {"tdigest.byrevrank", TD_READ, "tdigest", KEYS_ONE, RO_ACCESS},
    {"tdigest.trimmed_mean", READ, "tdigest", KEYS_ONE, RO_ACCESS},
    {"tdigest.info", TD_READ, "tdigest", KEYS_ONE, RO_ACCESS},
    /* The module's own: restores and windows' effects (from masters and
     * AOF files only but for LOADCHUNK). */
    {"bloomery.loadchunk", ADD, "bloom", KEYS_ONE, RW_UPDATE},
    {"bloomery.winrotate", "write", "write", "bloom", KEYS_ONE, RW_UPDATE},
    {"bloomery.winclock", "write", "write", "bloom", KEYS_NONE, 0},
};

static const declaration *find(const char *name)
{
    for (size_t i = 0; i < sizeof(declarations) / sizeof(declarations[0]); i++)
        if (strcmp(declarations[i].name, name) == 0)
            return &declarations[i];
    return NULL;
}

static const char *const families[] = {"bloom", "cuckoo", "cms", "topk", "tdigest"};
/* Whether AddACLCategory took every family (Redis 7.4 and later). */
static bool families_added;

void mh_add_acl_categories(RedisModuleCtx *ctx)
{
    if (!rm.AddACLCategory || !rm.SetCommandACLCategories)
        return;
    families_added = true;
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
        if (rm.AddACLCategory(ctx, families[i]) != RM_OK) {
            /* Taken already (RedisBloom built into Redis 8): the
             * commands keep read/write/fast only. */
            rm.Log(ctx, "warning", "bloomery: ACL category %s not added", families[i]);
            families_added = false;
        }
}

static bool set_info(RedisModuleCommand *cmd, const declaration *d)
{
    static const rm_command_info_version version = {
        .version = 1,
        .sizeof_historyentry = 2 * sizeof(const char *),
        .sizeof_keyspec = sizeof(rm_key_spec),
        .sizeof_arg = 0, /* no args given */
    };
    rm_key_spec specs[3];
    memset(specs, 0, sizeof(specs));
    specs[0] = (rm_key_spec){.flags = d->key_flags,
                             .begin_search_type = RM_KSPEC_BS_INDEX,
                             .bs.index.pos = 1,
                             .find_keys_type = RM_KSPEC_FK_RANGE,
                             .fk.range = {.lastkey = 0, .keystep = 1, .limit = 0}};
    if (d->keys == KEYS_REST)
        specs[1] = (rm_key_spec){.flags = RO_ACCESS,
                                 .begin_search_type = RM_KSPEC_BS_INDEX,
                                 .bs.index.pos = 2,
                                 .find_keys_type = RM_KSPEC_FK_RANGE,
                                 .fk.range = {.lastkey = -1, .keystep = 1, .limit = 0}};
    else if (d->keys == KEYS_NUMKEYS)
        specs[1] = (rm_key_spec){.flags = RO_ACCESS,
                                 .begin_search_type = RM_KSPEC_BS_INDEX,
                                 .bs.index.pos = 2,
                                 .find_keys_type = RM_KSPEC_FK_KEYNUM,
                                 .fk.keynum = {.keynumidx = 0, .firstkey = 1, .keystep = 1}};
    rm_command_info info = {.version = &version, .key_specs = specs};
    /* Redis copies what it keeps, so specs may live on this stack. */
    return rm.SetCommandInfo(cmd, &info) == RM_OK;
}

bool mh_create_command(RedisModuleCtx *ctx, const char *name, rm_cmd_fn fn)
{
    const declaration *d = find(name);
    if (d == NULL) {
        rm.Log(ctx, "warning", "bloomery: %s has no declaration", name);
        return false;
    }
    /* first/last/step for a Redis that reads them before the key specs:
     * the destination, or every argument from it for BF.MERGE. */
    int first = d->keys == KEYS_NONE ? 0 : 1;
    int last = d->keys == KEYS_NONE ? 0 : d->keys == KEYS_REST ? -1 : 1;
    if (rm.CreateCommand(ctx, name, fn, d->flags, first, last, first) != RM_OK)
        return false;
    RedisModuleCommand *cmd = rm.GetCommand(ctx, name);
    if (cmd == NULL)
        return false;
    if (d->keys != KEYS_NONE && !set_info(cmd, d)) {
        rm.Log(ctx, "warning", "bloomery: %s: key specs refused", name);
        return false;
    }
    if (rm.SetCommandACLCategories) {
        char categories[64];
        snprintf(categories, sizeof(categories), "%s%s%s", d->acl, families_added ? " " : "",
                 families_added ? d->family : "");
        if (rm.SetCommandACLCategories(cmd, categories) != RM_OK) {
            rm.Log(ctx, "warning", "bloomery: %s: ACL categories %s refused", name, categories);
            return false;
        }
    }
    return true;
}

/* The rows of the value commands (Bloom, cuckoo, count-min, top-k,
 * t-digest), one list for every host:
 * bloomeryd's table (net/commands.c) and the Redis module (src/module)
 * expand it, so a command's arity, flags, keys and batch entry point are
 * declared once.
 *
 * X(name, proc, arity, flags, first_key, last_key, key_step, group, batch)
 */
#ifndef BLOOMERYD_VALUE_COMMANDS_H
#define BLOOMERYD_VALUE_COMMANDS_H

#include "cmd.h"

/* RedisBloom checks arity in its handlers; so do we, with -2. Count-min
 * and top-k flags are RedisBloom's ("fast" is only an ACL category of
 * theirs); t-digest arities are RedisBloom's commands.json, CREATE checks
 * the rest in its handler. BF.CONFIG is ours: a write, as it sets a
 * filter's flag, so reading the flag through it needs write permission
 * too (one ACL decision per command). */
#define VALUE_COMMANDS(X)                                                                          \
    X("bf.reserve", bfReserveCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "bloom", NULL)         \
    X("bf.add", bfAddCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "bloom", bfAddBatch)           \
    X("bf.madd", bfMaddCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "bloom", NULL)               \
    X("bf.exists", bfExistsCommand, -2, CMD_READONLY | CMD_FAST, 1, 1, 1, "bloom", bfExistsBatch)  \
    X("bf.mexists", bfMexistsCommand, -2, CMD_READONLY | CMD_FAST, 1, 1, 1, "bloom", NULL)         \
    X("bf.insert", bfInsertCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "bloom", NULL)           \
    X("bf.info", bfInfoCommand, -2, CMD_READONLY | CMD_FAST, 1, 1, 1, "bloom", NULL)               \
    X("bf.card", bfCardCommand, -2, CMD_READONLY | CMD_FAST, 1, 1, 1, "bloom", NULL)               \
    X("bf.scandump", bfScandumpCommand, -2, CMD_READONLY | CMD_FAST, 1, 1, 1, "bloom", NULL)       \
    X("bf.loadchunk", bfLoadchunkCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "bloom", NULL)     \
    X("bf.debug", bfDebugCommand, -2, CMD_READONLY | CMD_FAST, 1, 1, 1, "bloom", NULL)             \
    X("bf.del", bfDelCommand, 3, CMD_WRITE | CMD_FAST, 1, 1, 1, "bloom", NULL)                     \
    X("bf.merge", bfMergeCommand, -3, CMD_WRITE | CMD_DENYOOM, 1, -1, 1, "bloom", NULL)            \
    X("bf.config", bfConfigCommand, -3, CMD_WRITE, 1, 1, 1, "bloom", NULL)                         \
    X("cf.reserve", cfReserveCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "cuckoo", NULL)        \
    X("cf.add", cfAddCommand, -2, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "cuckoo", NULL)     \
    X("cf.addnx", cfAddnxCommand, -2, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "cuckoo", NULL) \
    X("cf.insert", cfInsertCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "cuckoo", NULL)          \
    X("cf.insertnx", cfInsertnxCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "cuckoo", NULL)      \
    X("cf.exists", cfExistsCommand, -2, CMD_READONLY | CMD_FAST, 1, 1, 1, "cuckoo", NULL)          \
    X("cf.mexists", cfMexistsCommand, -2, CMD_READONLY | CMD_FAST, 1, 1, 1, "cuckoo", NULL)        \
    X("cf.del", cfDelCommand, -2, CMD_WRITE | CMD_FAST, 1, 1, 1, "cuckoo", NULL)                   \
    X("cf.count", cfCountCommand, -2, CMD_READONLY | CMD_FAST, 1, 1, 1, "cuckoo", NULL)            \
    X("cf.info", cfInfoCommand, -2, CMD_READONLY | CMD_FAST, 1, 1, 1, "cuckoo", NULL)              \
    X("cf.scandump", cfScandumpCommand, -2, CMD_READONLY, 1, 1, 1, "cuckoo", NULL)                 \
    X("cf.debug", cfDebugCommand, -2, CMD_READONLY | CMD_FAST, 1, 1, 1, "cuckoo", NULL)            \
    X("cf.loadchunk", cfLoadchunkCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "cuckoo", NULL)    \
    X("cms.initbydim", cmsInitbydimCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "cms", NULL)     \
    X("cms.initbyprob", cmsInitbyprobCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "cms", NULL)   \
    X("cms.incrby", cmsIncrbyCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "cms", NULL)           \
    X("cms.query", cmsQueryCommand, -2, CMD_READONLY, 1, 1, 1, "cms", NULL)                        \
    X("cms.merge", cmsMergeCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "cms", NULL)             \
    X("cms.info", cmsInfoCommand, -2, CMD_READONLY, 1, 1, 1, "cms", NULL)                          \
    X("topk.reserve", topkReserveCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "topk", NULL)      \
    X("topk.add", topkAddCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "topk", topkAddBatch)      \
    X("topk.incrby", topkIncrbyCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "topk", NULL)        \
    X("topk.query", topkQueryCommand, -2, CMD_READONLY, 1, 1, 1, "topk", NULL)                     \
    X("topk.count", topkCountCommand, -2, CMD_READONLY, 1, 1, 1, "topk", NULL)                     \
    X("topk.list", topkListCommand, -2, CMD_READONLY, 1, 1, 1, "topk", NULL)                       \
    X("topk.info", topkInfoCommand, -2, CMD_READONLY, 1, 1, 1, "topk", NULL)                       \
    X("tdigest.create", tdigestCreateCommand, -2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "tdigest",     \
      NULL)                                                                                        \
    X("tdigest.add", tdigestAddCommand, -3, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "tdigest", NULL)     \
    X("tdigest.reset", tdigestResetCommand, 2, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "tdigest", NULL)  \
    X("tdigest.merge", tdigestMergeCommand, -4, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "tdigest", NULL) \
    X("tdigest.min", tdigestMinCommand, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "tdigest", NULL)      \
    X("tdigest.max", tdigestMaxCommand, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "tdigest", NULL)      \
    X("tdigest.quantile", tdigestQuantileCommand, -3, CMD_READONLY | CMD_FAST, 1, 1, 1, "tdigest", \
      NULL)                                                                                        \
    X("tdigest.cdf", tdigestCdfCommand, -3, CMD_READONLY | CMD_FAST, 1, 1, 1, "tdigest", NULL)     \
    X("tdigest.rank", tdigestRankCommand, -3, CMD_READONLY | CMD_FAST, 1, 1, 1, "tdigest", NULL)   \
    X("tdigest.revrank", tdigestRevrankCommand, -3, CMD_READONLY | CMD_FAST, 1, 1, 1, "tdigest",   \
      NULL)                                                                                        \
    X("tdigest.byrank", tdigestByrankCommand, -3, CMD_READONLY | CMD_FAST, 1, 1, 1, "tdigest",     \
      NULL)                                                                                        \
    X("tdigest.byrevrank", tdigestByrevrankCommand, -3, CMD_READONLY | CMD_FAST, 1, 1, 1,          \
      "tdigest", NULL)                                                                             \
    X("tdigest.trimmed_mean", tdigestTrimmedMeanCommand, 4, CMD_READONLY | CMD_FAST, 1, 1, 1,      \
      "tdigest", NULL)                                                                             \
    X("tdigest.info", tdigestInfoCommand, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, "tdigest", NULL)

#endif

/* BF.MERGE dest src...: ORs Bloom filters of the same shape into dest, a
 * copy of the first source when dest is missing; counting filters add
 * their counters. The work is bloom_merge (type_bloom.c), which the log's
 * replay runs too; this answers and logs it. */
#include "bf.h"
#include "persist.h"
#include "cmd.h"
#include "config.h"
#include "log.h"

static const char *err_merge_shape =
    "ERR filters must have the same layout, capacity, error rate, expansion and number of filters";

bool bfMergeCommand(cmd_ctx *c)
{
    size_t n = (size_t)c->argc - 1;
    ks_multi m;
    ks_lock_many(&m, c->argv + 1, c->argvlen + 1, n, true);
    /* The destination is the filter that changes. */
    ks_ref dst;
    kv_entry *d = ks_find_locked(c->argv[1], c->argvlen[1], &dst, true);
    if (d && ck_is(&bfc_kind, d->obj) && ck_refuse_readonly(c, d->obj)) {
        ks_unlock_many(&m);
        return false;
    }
    bool created;
    value_status st = bloom_merge(c->argv + 1, c->argvlen + 1, n, &created);
    switch (st) {
    case VS_OK:
        wal_log_merge(WAL_BF_MERGE, created, c->argv + 1, c->argvlen + 1, n);
        reply_ok(&c->out);
        break;
    case VS_MISMATCH: reply_error(&c->out, err_merge_shape); break;
    case VS_NOMEM: reply_error(&c->out, bfc_kind.nomem); break;
    default: ck_reply_status(c, &bfc_kind, st); break;
    }
    ks_unlock_many(&m);
    return st == VS_OK;
}

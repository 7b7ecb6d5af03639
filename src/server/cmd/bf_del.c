/* BF.DEL: deleting an item from a counting filter (BF.RESERVE ...
 * COUNTING). Writers of a counting filter serialize on its object, so the
 * log holds its adds and deletes in the order they were applied. */
#include "bf.h"
#include "persist.h"
#include "cmd.h"
#include "config.h"
#include "log.h"

bool bfDelCommand(cmd_ctx *c)
{
    ks_ref ref;
    kv_entry *e;
    ck_open(c, &ref, c->argv[1], c->argvlen[1], &bfc_kind, CK_MUST_EXIST | CK_CHANGE, &e);
    bool ok = e && e->obj->type == &counting_type;
    if (e && !ok)
        reply_error(&c->out, "ERR BF.DEL needs a counting filter (BF.RESERVE ... COUNTING)");
    if (ok) {
        kv_obj *o = e->obj;
        pthread_mutex_lock(&o->lock);
        bool deleted = cntbf_delete(o->v, c->argv[2], c->argvlen[2]);
        if (deleted)
            wal_log_counting(WAL_CNT_DEL, c->argv[1], c->argvlen[1], o->v, c->argv + 2,
                             c->argvlen + 2, 1, NULL);
        pthread_mutex_unlock(&o->lock);
        reply_bool(&c->out, deleted);
    }
    ks_close(&ref);
    return ok;
}

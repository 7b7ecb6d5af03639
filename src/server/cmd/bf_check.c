/* Checking Bloom filters: BF.EXISTS, BF.MEXISTS and pipelined BF.EXISTS
 * on one key as one batch. As in RedisBloom a missing key, a key of another
 * type or a dump still loading answers 0 for every item, never an error. */
#include <stdlib.h>

#include "bf.h"
#include "cmd.h"
#include "config.h"
#include "log.h"

size_t bfExistsBatch(cmd_ctx *c, const char *key, size_t klen, const char **items,
                     const size_t *lens, size_t n)
{
    ks_ref ref;
    kv_entry *e = ks_open(&ref, key, klen, false);
    kv_obj *o = e ? e->obj : NULL;
    server_count_hits(c, e != NULL, n);
    if (o && o->type == &bloom_type) {
        int res[256];
        for (size_t base = 0; base < n; base += 256) {
            size_t g = n - base < 256 ? n - base : 256;
            sbf_check_many(o->v, (const void *const *)(items + base), lens + base, g, res);
            reply_bools(&c->out, res, g);
        }
    } else if (o && o->type == &window_type) {
        window_check_items(c, o, items, lens, n);
    } else {
        bool counting = o && o->type == &counting_type;
        for (size_t i = 0; i < n; i++)
            reply_bool(&c->out, counting && cntbf_check(o->v, items[i], lens[i]));
    }
    ks_close(&ref);
    return 0;
}

static void check_items(cmd_ctx *c, bool multi)
{
    size_t n = (size_t)c->argc - 2;
    ks_ref ref;
    kv_entry *e = ks_open(&ref, c->argv[1], c->argvlen[1], false);
    kv_obj *o = e ? e->obj : NULL;
    server_count_hit(c, e != NULL);
    if (multi)
        reply_array(&c->out, (long long)n);
    if (o && o->type == &bloom_type) {
        int small[256];
        int *res = n <= 256 ? small : malloc(n * sizeof(int));
        if (res) {
            sbf_check_many(o->v, (const void *const *)(c->argv + 2), c->argvlen + 2, n, res);
            reply_bools(&c->out, res, n);
            if (res != small)
                free(res);
        } else {
            for (size_t i = 0; i < n; i++)
                reply_bool(&c->out, sbf_check(o->v, c->argv[2 + i], c->argvlen[2 + i]) == 1);
        }
    } else if (o && o->type == &counting_type) {
        for (size_t i = 0; i < n; i++)
            reply_bool(&c->out, cntbf_check(o->v, c->argv[2 + i], c->argvlen[2 + i]));
    } else if (o && o->type == &window_type) {
        window_check_items(c, o, c->argv + 2, c->argvlen + 2, n);
    } else {
        /* Missing key, wrong type or still loading: every item is absent. */
        for (size_t i = 0; i < n; i++)
            reply_bool(&c->out, false);
    }
    ks_close(&ref);
}

bool bfExistsCommand(cmd_ctx *c)
{
    if (c->argc != 3) {
        reply_wrong_arity(&c->out, "bf.exists");
        return false;
    }
    check_items(c, false);
    return true;
}

bool bfMexistsCommand(cmd_ctx *c)
{
    if (c->argc < 3) {
        reply_wrong_arity(&c->out, "bf.mexists");
        return false;
    }
    check_items(c, true);
    return true;
}

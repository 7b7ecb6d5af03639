/* Keyspace commands: DEL, UNLINK, EXISTS, TYPE, KEYS, SCAN, RANDOMKEY,
 * RENAME, RENAMENX and the expiry family, with Redis 7's replies. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "persist.h"
#include "cmd.h"
#include "config.h"
#include "log.h"
#include "util.h"

bool delCommand(cmd_ctx *c)
{
    long long n = 0;
    for (int i = 1; i < c->argc; i++) {
        ks_ref ref;
        if (ks_open(&ref, c->argv[i], c->argvlen[i], true)) {
            ks_remove(&ref);
            wal_log_del(c->argv + i, c->argvlen + i, 1);
            n++;
        }
        ks_close(&ref);
    }
    reply_int(&c->out, n);
    return true;
}

bool existsCommand(cmd_ctx *c)
{
    long long n = 0;
    for (int i = 1; i < c->argc; i++) {
        ks_ref ref;
        if (ks_open(&ref, c->argv[i], c->argvlen[i], false))
            n++;
        ks_close(&ref);
    }
    reply_int(&c->out, n);
    return true;
}

bool typeCommand(cmd_ctx *c)
{
    ks_ref ref;
    kv_entry *e = ks_open(&ref, c->argv[1], c->argvlen[1], false);
    const char *t = e ? e->obj->type->type_reply : "none";
    ks_close(&ref);
    reply_simple(&c->out, t);
    return true;
}

/* ---- KEYS and SCAN ---- */

typedef struct key_filter {
    reply *out;
    const char *pat;
    size_t plen;
    bool all;
    const char *type;
    size_t tlen;
    long long n;
} key_filter;

static void emit_key(void *ctx, const kv_entry *e)
{
    key_filter *f = ctx;
    if (!f->all && !glob_match(f->pat, f->plen, e->key, e->klen, false))
        return;
    if (f->type && !str_eq_ci(f->type, f->tlen, e->obj->type->type_reply))
        return;
    reply_bulk(f->out, e->key, e->klen);
    f->n++;
}

bool keysCommand(cmd_ctx *c)
{
    key_filter f = {
        &c->out, c->argv[1], c->argvlen[1], c->argvlen[1] == 1 && c->argv[1][0] == '*', NULL, 0, 0};
    size_t slot = reply_defer_len(&c->out);
    ks_foreach(emit_key, &f);
    reply_set_array_len(&c->out, slot, f.n);
    return true;
}

bool scanCommand(cmd_ctx *c)
{
    char tmp[32];
    if (c->argvlen[1] == 0 || c->argvlen[1] >= sizeof(tmp)) {
        reply_error(&c->out, "ERR invalid cursor");
        return false;
    }
    memcpy(tmp, c->argv[1], c->argvlen[1]);
    tmp[c->argvlen[1]] = '\0';
    char *end;
    unsigned long long cursor = strtoull(tmp, &end, 10);
    if (*end != '\0' || tmp[0] == '-' || tmp[0] == ' ') {
        reply_error(&c->out, "ERR invalid cursor");
        return false;
    }
    key_filter f = {NULL, NULL, 0, true, NULL, 0, 0};
    long long count = 10;
    for (int i = 2; i < c->argc; i += 2) {
        if (i + 1 >= c->argc) {
            reply_syntax_error(c);
            return false;
        }
        if (arg_eq(c, i, "count")) {
            if (!arg_ll(c, i + 1, &count))
                return false;
            if (count < 1) {
                reply_syntax_error(c);
                return false;
            }
        } else if (arg_eq(c, i, "match")) {
            f.pat = c->argv[i + 1];
            f.plen = c->argvlen[i + 1];
            f.all = f.plen == 1 && f.pat[0] == '*';
        } else if (arg_eq(c, i, "type")) {
            f.type = c->argv[i + 1];
            f.tlen = c->argvlen[i + 1];
        } else {
            reply_syntax_error(c);
            return false;
        }
    }
    /* The cursor comes first in the reply but is known last: build the
     * keys into a side buffer. */
    reply keys;
    reply_init(&keys);
    keys.proto = c->out.proto;
    f.out = &keys;
    uint64_t next = ks_scan(cursor, (uint64_t)count, emit_key, &f);
    reply_array(&c->out, 2);
    reply_bulk_ll(&c->out, (long long)next);
    reply_array(&c->out, f.n);
    reply_raw(&c->out, keys.buf, keys.len);
    if (keys.failed)
        c->out.failed = true;
    reply_free(&keys);
    return true;
}

typedef struct pick {
    char *key;
    size_t len;
} pick;

static void pick_first(void *ctx, const kv_entry *e)
{
    pick *p = ctx;
    if (p->key)
        return;
    p->key = malloc(e->klen ? e->klen : 1);
    if (p->key == NULL)
        return;
    memcpy(p->key, e->key, e->klen);
    p->len = e->klen;
}

bool randomkeyCommand(cmd_ctx *c)
{
    if (ks_dbsize() == 0) {
        reply_null(&c->out);
        return true;
    }
    pick p = {NULL, 0};
    uint64_t start = ((uint64_t)now_us() * 0x9e3779b97f4a7c15ULL) & (KS_STRIPES - 1);
    uint64_t cursor = start;
    /* Walk from a random stripe until a key turns up. */
    for (int guard = 0; p.key == NULL && guard < 1 << 20; guard++) {
        cursor = ks_scan(cursor, 1, pick_first, &p);
        if (cursor == 0 && p.key == NULL) {
            if (ks_dbsize() == 0)
                break;
        }
    }
    if (p.key)
        reply_bulk(&c->out, p.key, p.len);
    else
        reply_null(&c->out);
    free(p.key);
    return true;
}

/* ---- RENAME ---- */

static bool rename_generic(cmd_ctx *c, bool nx)
{
    const char *keys[2] = {c->argv[1], c->argv[2]};
    size_t lens[2] = {c->argvlen[1], c->argvlen[2]};
    ks_multi m;
    ks_lock_many(&m, keys, lens, 2, true);
    ks_ref src, dst;
    kv_entry *e = ks_find_locked(keys[0], lens[0], &src, true);
    if (e == NULL) {
        ks_unlock_many(&m);
        reply_error(&c->out, "ERR no such key");
        return false;
    }
    if (lens[0] == lens[1] && memcmp(keys[0], keys[1], lens[0]) == 0) {
        ks_unlock_many(&m);
        if (nx)
            reply_int(&c->out, 0);
        else
            reply_ok(&c->out);
        return true;
    }
    kv_entry *d = ks_find_locked(keys[1], lens[1], &dst, true);
    if (d && nx) {
        ks_unlock_many(&m);
        reply_int(&c->out, 0);
        return true;
    }
    if (d)
        ks_remove(&dst);
    /* Move the value: the new entry adopts the object, then the old entry
     * is unlinked without freeing it. */
    kv_obj *obj = e->obj;
    int64_t expire = e->expire_ms;
    kv_obj *placeholder = kv_obj_new(&hll_type, NULL);
    if (placeholder == NULL || ks_add(&dst, obj) == NULL) {
        kv_obj_free(placeholder);
        ks_unlock_many(&m);
        reply_oom(c);
        return false;
    }
    if (expire)
        ks_set_expire(&dst, expire);
    /* The old entry keeps an empty placeholder so removing it frees neither
     * the object nor its counted bytes. */
    e->obj = placeholder;
    src.e = e;
    ks_remove(&src);
    wal_log_rename(keys[0], lens[0], keys[1], lens[1]);
    ks_unlock_many(&m);
    if (nx)
        reply_int(&c->out, 1);
    else
        reply_ok(&c->out);
    return true;
}

bool renameCommand(cmd_ctx *c) { return rename_generic(c, false); }
bool renamenxCommand(cmd_ctx *c) { return rename_generic(c, true); }

/* ---- expiry ---- */

#define EXP_NX 1
#define EXP_XX 2
#define EXP_GT 4
#define EXP_LT 8

static bool expire_generic(cmd_ctx *c, int64_t base_ms, int64_t unit_ms, const char *name)
{
    int flags = 0;
    for (int i = 3; i < c->argc; i++) {
        if (arg_eq(c, i, "nx"))
            flags |= EXP_NX;
        else if (arg_eq(c, i, "xx"))
            flags |= EXP_XX;
        else if (arg_eq(c, i, "gt"))
            flags |= EXP_GT;
        else if (arg_eq(c, i, "lt"))
            flags |= EXP_LT;
        else {
            reply_errorf(&c->out, "ERR Unsupported option %.*s",
                         (int)(c->argvlen[i] < 64 ? c->argvlen[i] : 64), c->argv[i]);
            return false;
        }
    }
    if ((flags & EXP_NX) && (flags & (EXP_XX | EXP_GT | EXP_LT))) {
        reply_error(&c->out, "ERR NX and XX, GT or LT options at the same time are not compatible");
        return false;
    }
    if ((flags & EXP_GT) && (flags & EXP_LT)) {
        reply_error(&c->out, "ERR GT and LT options at the same time are not compatible");
        return false;
    }
    long long when;
    if (!arg_ll(c, 2, &when))
        return false;
    if (when > LLONG_MAX / unit_ms || when < LLONG_MIN / unit_ms)
        goto invalid;
    when *= unit_ms;
    if ((when > 0 && base_ms > LLONG_MAX - when) || (when < 0 && base_ms < LLONG_MIN - when))
        goto invalid;
    when += base_ms;

    ks_ref ref;
    kv_entry *e = ks_open(&ref, c->argv[1], c->argvlen[1], true);
    if (e == NULL) {
        ks_close(&ref);
        reply_int(&c->out, 0);
        return true;
    }
    int64_t cur = e->expire_ms;
    bool ok = true;
    if ((flags & EXP_NX) && cur)
        ok = false;
    if ((flags & EXP_XX) && !cur)
        ok = false;
    if ((flags & EXP_GT) && (!cur || when <= cur))
        ok = false;
    if ((flags & EXP_LT) && cur && when >= cur)
        ok = false;
    if (!ok) {
        ks_close(&ref);
        reply_int(&c->out, 0);
        return true;
    }
    if (when <= now_ms()) {
        ks_remove(&ref);
        wal_log_del(c->argv + 1, c->argvlen + 1, 1);
    } else {
        ks_set_expire(&ref, when);
        wal_log_expire(c->argv[1], c->argvlen[1], when);
    }
    ks_close(&ref);
    reply_int(&c->out, 1);
    return true;
invalid:
    reply_errorf(&c->out, "ERR invalid expire time in '%s' command", name);
    return false;
}

bool expireCommand(cmd_ctx *c) { return expire_generic(c, now_ms(), 1000, "expire"); }
bool pexpireCommand(cmd_ctx *c) { return expire_generic(c, now_ms(), 1, "pexpire"); }
bool expireatCommand(cmd_ctx *c) { return expire_generic(c, 0, 1000, "expireat"); }
bool pexpireatCommand(cmd_ctx *c) { return expire_generic(c, 0, 1, "pexpireat"); }

static bool ttl_generic(cmd_ctx *c, bool ms, bool absolute)
{
    ks_ref ref;
    kv_entry *e = ks_open(&ref, c->argv[1], c->argvlen[1], false);
    long long v;
    if (e == NULL)
        v = -2;
    else if (e->expire_ms == 0)
        v = -1;
    else if (absolute)
        v = ms ? e->expire_ms : (e->expire_ms + 500) / 1000;
    else {
        long long left = e->expire_ms - now_ms();
        if (left < 0)
            left = 0;
        v = ms ? left : (left + 500) / 1000;
    }
    ks_close(&ref);
    reply_int(&c->out, v);
    return true;
}

bool ttlCommand(cmd_ctx *c) { return ttl_generic(c, false, false); }
bool pttlCommand(cmd_ctx *c) { return ttl_generic(c, true, false); }
bool expiretimeCommand(cmd_ctx *c) { return ttl_generic(c, false, true); }
bool pexpiretimeCommand(cmd_ctx *c) { return ttl_generic(c, true, true); }

bool persistCommand(cmd_ctx *c)
{
    ks_ref ref;
    kv_entry *e = ks_open(&ref, c->argv[1], c->argvlen[1], true);
    long long v = 0;
    if (e && e->expire_ms) {
        ks_set_expire(&ref, 0);
        wal_log_expire(c->argv[1], c->argvlen[1], 0);
        v = 1;
    }
    ks_close(&ref);
    reply_int(&c->out, v);
    return true;
}

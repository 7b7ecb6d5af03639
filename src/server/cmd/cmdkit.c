/* What the value commands' handlers share; see cmdkit.h. */
#include "cmdkit.h"

#include <ctype.h>
#include <string.h>

#include "util.h"

/* ---- keys ---- */

bool ck_is(const ck_kind *k, const kv_obj *o)
{
    for (size_t i = 0; i < sizeof(k->types) / sizeof(k->types[0]) && k->types[i]; i++)
        if (o->type == k->types[i])
            return true;
    return false;
}

/* An entry of the wrong type: answered. */
static bool reply_type(cmd_ctx *c, const ck_kind *k, const kv_obj *o)
{
    if (ck_is(k, o))
        return false;
    if (k->loading && o->type == k->loading)
        reply_error(&c->out, k->loading_err);
    else
        reply_wrongtype(c);
    return true;
}

bool ck_refuse_readonly(cmd_ctx *c, const kv_obj *o)
{
    if (!o->readonly)
        return false;
    reply_error(&c->out, CK_READONLY_ERR);
    return true;
}

bool ck_open(cmd_ctx *c, ks_ref *ref, const char *key, size_t klen, const ck_kind *k,
             unsigned flags, kv_entry **e)
{
    *e = flags & CK_EXCLUSIVE ? ks_open_exclusive(ref, key, klen)
                              : ks_open(ref, key, klen, flags & CK_WRITE);
    if (flags & CK_COUNT_HIT)
        server_count_hit(c, *e != NULL);
    if (*e == NULL) {
        if (!(flags & CK_MUST_EXIST))
            return true;
        reply_error(&c->out, k->not_found);
        return false;
    }
    if (!reply_type(c, k, (*e)->obj) && !((flags & CK_CHANGE) && ck_refuse_readonly(c, (*e)->obj)))
        return true;
    *e = NULL;
    return false;
}

kv_entry *ck_open_or_create(cmd_ctx *c, ks_ref *ref, const char *key, size_t klen, const ck_kind *k,
                            ck_create_fn create, const void *arg)
{
    kv_entry *e = ks_open(ref, key, klen, false);
    if (e == NULL) {
        /* Again exclusively: another client may create it meanwhile. */
        ks_close(ref);
        e = ks_open(ref, key, klen, true);
        if (e == NULL) {
            if (create == NULL) {
                reply_error(&c->out, k->not_found);
                return NULL;
            }
            e = create(c, ref, arg);
            if (e == NULL)
                return NULL;
        }
    }
    return reply_type(c, k, e->obj) || ck_refuse_readonly(c, e->obj) ? NULL : e;
}

void ck_reply_status(cmd_ctx *c, const ck_kind *k, value_status st)
{
    switch (st) {
    case VS_NOT_FOUND: reply_error(&c->out, k->not_found); break;
    case VS_WRONGTYPE: reply_wrongtype(c); break;
    case VS_LOADING: reply_error(&c->out, k->loading_err); break;
    case VS_OOM: reply_oom(c); break;
    case VS_FAILED: reply_error(&c->out, k->failed); break;
    default: reply_errorf(&c->out, "ERR %s", value_status_text(st)); break;
    }
}

/* ---- values ---- */

static const char *err_create_nomem = "ERR Insufficient memory to create filter";

static const char *create_nomem(const ck_kind *k)
{
    return k->create_nomem ? k->create_nomem : err_create_nomem;
}

void ck_reply_nomem(cmd_ctx *c, int rc, const char *nomem)
{
    if (rc == BLOOMERY_EREFUSED && server_maxmemory())
        reply_oom(c);
    else
        reply_error(&c->out, nomem);
}

kv_entry *ck_create(cmd_ctx *c, ks_ref *ref, const ck_value *v)
{
    if (v->refused) {
        reply_error(&c->out, v->refused);
        return NULL;
    }
    uint64_t maxmem = server_maxmemory();
    uint64_t overhead = ks_entry_overhead(ref->klen);
    kv_obj *o = kv_obj_new(v->type, NULL);
    if (o == NULL) {
        reply_error(&c->out, v->kind->nomem);
        return NULL;
    }
    if (v->bytes == 0) {
        kv_obj_free(o);
        reply_error(&c->out, v->kind->failed);
        return NULL;
    }
    /* Up front, whatever the capacity: the value's bytes (a growing value's
     * first allocation, which it reserves itself) and the entry's must fit
     * the limit, so a filter too big is refused before it is allocated. */
    uint64_t limit = ks_mem_limit(maxmem), used = ks_used_memory();
    if (v->bytes == CK_BYTES_TOO_BIG ||
        (limit &&
         (v->bytes > limit || overhead > limit - v->bytes || used > limit - v->bytes - overhead))) {
        kv_obj_free(o);
        ck_reply_nomem(c, BLOOMERY_EREFUSED, create_nomem(v->kind));
        return NULL;
    }
    if (!v->grows) {
        if (!ks_mem_try_reserve(v->bytes + overhead, maxmem)) {
            kv_obj_free(o);
            ck_reply_nomem(c, BLOOMERY_EREFUSED, create_nomem(v->kind));
            return NULL;
        }
        ks_mem_add(-(int64_t)overhead); /* ks_add counts it */
        atomic_store(&o->value_bytes, v->bytes);
    }
    int rc = v->build(o, v->params);
    if (rc != BLOOMERY_OK) {
        ks_mem_add(-(int64_t)kv_obj_bytes(o));
        atomic_store(&o->value_bytes, 0);
        kv_obj_free(o);
        /* Without maxmemory the machine's memory refused it: a failed
         * allocation, as RedisBloom answers it. */
        if (rc == BLOOMERY_ENOMEM || rc == BLOOMERY_EREFUSED)
            ck_reply_nomem(c, rc, create_nomem(v->kind));
        else
            reply_error(&c->out, v->kind->failed);
        return NULL;
    }
    kv_entry *e = ks_add(ref, o);
    if (e == NULL) {
        ks_mem_add(-(int64_t)kv_obj_bytes(o));
        kv_obj_free(o);
        reply_error(&c->out, v->kind->nomem);
        return NULL;
    }
    if (v->ttl_s > 0)
        ks_set_expire(ref, now_ms() + v->ttl_s * 1000);
    v->log(ref, e, v->params);
    return e;
}

bool ck_reserve(cmd_ctx *c, const char *key, size_t klen, const ck_kind *exists, const ck_value *v)
{
    ks_ref ref;
    kv_entry *e = ks_open(&ref, key, klen, true);
    bool ok = false;
    if (e) {
        if (exists == NULL || ck_is(exists, e->obj) || e->obj->type == exists->loading)
            reply_error(&c->out, "ERR item exists");
        else
            reply_wrongtype(c);
    } else if (ck_create(c, &ref, v)) {
        reply_ok(&c->out);
        ok = true;
    }
    ks_close(&ref);
    return ok;
}

/* ---- options ---- */

int ck_arg_index(cmd_ctx *c, int from, const char *name)
{
    for (int i = from; i < c->argc; i++)
        if (arg_eq(c, i, name))
            return i;
    return -1;
}

static bool takes_value(const opt_spec *s)
{
    return s->kind == OPT_INT || s->kind == OPT_RATE || s->kind == OPT_CHOICE;
}

/* Reply text, which may show the option's name and range. */
static bool fail(cmd_ctx *c, const opt_spec *s, const char *text)
{
    reply_errorf(&c->out, text, s->name, s->lo, s->hi);
    return false;
}

/* The value of s at argv[i] into *v; false after replying. */
static bool parse_value(cmd_ctx *c, const char *cmd, const opt_spec *s, int i, opt_val *all,
                        opt_val *v, const void *ctx, bool late)
{
    v->late = false;
    if (s->kind == OPT_REFUSED)
        return fail(c, s, s->bad);
    if (i >= c->argc && s->kind != OPT_FLAG) {
        if (s->missing)
            return fail(c, s, s->missing);
        reply_wrong_arity(&c->out, cmd);
        return false;
    }
    bool in_range = true;
    switch (s->kind) {
    case OPT_INT:
        if (!str_to_ll(c->argv[i], c->argvlen[i], &v->n))
            return fail(c, s, s->bad);
        in_range = v->n >= s->lo && v->n <= s->hi;
        break;
    case OPT_RATE:
        if (!str_to_double(c->argv[i], c->argvlen[i], &v->d))
            return fail(c, s, s->bad);
        in_range = v->d > 0 && v->d < 1;
        break;
    case OPT_CHOICE:
        for (v->n = 0; s->choices[v->n] && !arg_eq(c, i, s->choices[v->n]); v->n++) {
        }
        if (s->choices[v->n] == NULL)
            return fail(c, s, s->bad);
        break;
    default: break;
    }
    const char *conflict = s->check ? s->check(all, ctx) : NULL;
    if (conflict) {
        reply_error(&c->out, conflict);
        return false;
    }
    if (!in_range && late && s->late) {
        v->late = true;
        return true;
    }
    if (!in_range)
        return fail(c, s, s->range ? s->range : s->bad);
    return true;
}

/* Whether argument a names s, by its letters or whole. */
static bool names(const char *a, size_t len, const opt_spec *s)
{
    if (s->letters == 0)
        return str_eq_ci(a, len, s->name);
    for (unsigned i = 0; i < 32 && (s->letters >> i); i++) {
        if (!(s->letters >> i & 1))
            continue;
        if (i >= len || tolower((unsigned char)a[i]) != tolower((unsigned char)s->name[i]))
            return false;
    }
    return true;
}

static bool scan_search(cmd_ctx *c, const char *cmd, const opt_table *t, opt_val *v,
                        const void *ctx)
{
    for (size_t k = 0; k < t->n; k++) {
        const opt_spec *s = &t->specs[k];
        v[k].at = s->pos > 0 ? s->pos : ck_arg_index(c, t->from, s->name);
        if (v[k].at < 0)
            v[k].at = 0;
    }
    for (size_t k = 0; k < t->n; k++) {
        const opt_spec *s = &t->specs[k];
        if (v[k].at == 0)
            continue;
        int vi = s->pos > 0 ? s->pos : v[k].at + 1;
        if (!parse_value(c, cmd, s, vi, v, &v[k], ctx, false))
            return false;
    }
    const char *conflict = t->done ? t->done(v, ctx) : NULL;
    if (conflict) {
        reply_error(&c->out, conflict);
        return false;
    }
    for (int i = t->from; t->strict && i < c->argc; i++) {
        size_t k = 0;
        while (k < t->n && (t->specs[k].pos > 0 || !arg_eq(c, i, t->specs[k].name)))
            k++;
        if (k == t->n) {
            reply_syntax_error(c);
            return false;
        }
        if (takes_value(&t->specs[k]))
            i++;
    }
    return true;
}

static bool scan_sequence(cmd_ctx *c, const char *cmd, const opt_table *t, opt_val *v,
                          const void *ctx)
{
    for (int i = t->from; i < c->argc;) {
        size_t k = 0;
        while (k < t->n && !names(c->argv[i], c->argvlen[i], &t->specs[k]))
            k++;
        if (k < t->n && t->specs[k].once && v[k].at)
            k = t->n;
        if (k == t->n) {
            if (t->unknown)
                reply_error(&c->out, t->unknown);
            else
                reply_syntax_error(c);
            return false;
        }
        const opt_spec *s = &t->specs[k];
        v[k].at = i;
        if (s->kind == OPT_ITEMS) {
            /* A repeated option's last value is the one checked. */
            for (size_t j = 0; i + 1 < c->argc && j < t->n; j++) {
                if (v[j].at && v[j].late) {
                    reply_error(&c->out, t->late_range);
                    return false;
                }
            }
            if (i + 1 < c->argc)
                return true;
            if (s->missing)
                return fail(c, s, s->missing);
            reply_wrong_arity(&c->out, cmd);
            return false;
        }
        if (!parse_value(c, cmd, s, i + 1, v, &v[k], ctx, t->late_range != NULL))
            return false;
        i += takes_value(s) ? 2 : 1;
    }
    return true;
}

bool ck_scan(cmd_ctx *c, const char *cmd, const opt_table *t, opt_val *v, const void *ctx)
{
    memset(v, 0, t->n * sizeof(*v));
    return t->mode == OPT_SEARCH ? scan_search(c, cmd, t, v, ctx)
                                 : scan_sequence(c, cmd, t, v, ctx);
}

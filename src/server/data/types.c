/* The registry of value types: every descriptor, once. */
#include <stddef.h>
#include <stdlib.h>

#include "keyspace.h"
#include "types.h"

#define VALUE_TYPE_REF(name) &name##_type,
static const value_type *const registry[] = {VALUE_TYPES(VALUE_TYPE_REF)};
#undef VALUE_TYPE_REF
#define NTYPES (sizeof(registry) / sizeof(registry[0]))

size_t types_count(void) { return NTYPES; }
const value_type *type_at(size_t i) { return i < NTYPES ? registry[i] : NULL; }

const value_type *type_by_snap_kind(uint8_t kind)
{
    for (size_t i = 0; i < NTYPES; i++)
        if (kind != 0 && registry[i]->snap_kind == kind)
            return registry[i];
    return NULL;
}

const value_type *type_by_record(uint8_t wal_type)
{
    for (size_t i = 0; i < NTYPES; i++)
        for (const uint8_t *r = registry[i]->records; r && *r; r++)
            if (*r == wal_type)
                return registry[i];
    return NULL;
}

bloomery_object type_object(const kv_obj *o)
{
    return (bloomery_object){.type = o->type->image, .u.any = o->v};
}

const char *value_status_text(value_status st)
{
    switch (st) {
    case VS_OK: return "ok";
    case VS_NOT_FOUND: return "key is missing";
    case VS_WRONGTYPE: return "key holds another type";
    case VS_LOADING: return "key is still being loaded";
    case VS_MISMATCH: return "filters of different shapes";
    case VS_OOM: return "out of memory (maxmemory)";
    case VS_NOMEM: return "out of memory";
    case VS_FAILED: return "could not create the value";
    case VS_BAD_HEADER: return "dump header refused";
    case VS_BAD_CHUNK: return "dump chunk refused";
    case VS_BAD_OFFSET: return "dump chunk at no link";
    case VS_TOO_BIG: return "dump chunk too big for its link";
    case VS_CORRUPT: return "corrupted HLL";
    case VS_OVERFLOW: return "a count or total weight would overflow";
    }
    return "unknown status";
}

kv_entry *type_open_record_key(ks_ref *ref, const wal_op *op, const value_type *t, bool write,
                               const char **why)
{
    /* A replica replays while its readers run: a value whose readers hold
     * its own lock is changed under the stripe's exclusive lock instead,
     * which keeps every reader out. */
    kv_entry *e = ks_open(ref, (const char *)op->key, op->klen, write || t->locked);
    if (e == NULL || e->obj->type != t) {
        *why = value_status_text(e ? VS_WRONGTYPE : VS_NOT_FOUND);
        ks_close(ref);
        return NULL;
    }
    return e;
}

const char *type_replay_merge(const wal_op *op, type_merge_fn merge)
{
    size_t n = op->n;
    const char *small[16];
    size_t small_lens[16];
    const char **keys = n <= 16 ? small : malloc(n * sizeof(*keys));
    size_t *lens = n <= 16 ? small_lens : malloc(n * sizeof(*lens));
    const char *why = NULL;
    if (keys == NULL || lens == NULL) {
        why = "out of memory";
        goto out;
    }
    size_t cur = 0, k = 0;
    const uint8_t *key;
    size_t klen;
    while (k < n && wal_op_next_key(op, &cur, &key, &klen)) {
        keys[k] = (const char *)key;
        lens[k++] = klen;
    }
    if (k == 0) {
        why = "no keys";
        goto out;
    }
    ks_multi m;
    ks_lock_many(&m, keys, lens, k, true);
    /* The destination was missing when the merge created it. */
    ks_ref ref;
    if (op->created && ks_find_locked(keys[0], lens[0], &ref, true))
        ks_remove(&ref);
    bool created;
    value_status st = merge(op, keys, lens, k, &created);
    ks_unlock_many(&m);
    if (st != VS_OK)
        why = value_status_text(st);
out:
    if (keys != small)
        free(keys);
    if (lens != small_lens)
        free(lens);
    return why;
}

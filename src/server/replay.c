/* Replay of log records on the recovered keyspace (recovery.c calls it for
 * every record at or after the snapshot's start LSN, in LSN order, on one
 * thread, before any client connects).
 *
 * Data records apply hashes through the library's *_hashed calls. Bloom
 * adds are idempotent ORs, so a record whose bits a snapshot already copied
 * changes nothing but the item count, which the record's "new" bit
 * corrects. Counting filters and HLLs were copied exactly at the
 * snapshot's start, so their records apply once each.
 *
 * Barriers re-create the structural change: creation with the logged
 * parameters, deletion, expiry, a forced rename, flush. Merges and loaded
 * chunks run their command again on the replayed state, through the same
 * handler that ran them first (a private client whose reply is inspected).
 * Expiry is paused meanwhile (keyspace.h), so the keyspace looks as it did
 * when the records were written; a key that existed then exists now.
 *
 * A record that no longer fits the state (its key missing, another type)
 * is skipped with a warning: the state is what the log produced, and a
 * replay never stops half way for a semantic mismatch.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "persist.h"
#include "replay.h"
#include "server.h"
#include "util.h"

static uint64_t skipped;

static void skip(const wal_record *rec, const char *why) {
    if (skipped++ < 20)
        server_log(LOG_WARNING, "Replay: %s record LSN %" PRIu64 " skipped: %s",
                   wal_type_name(rec->type), rec->lsn, why);
}

uint64_t replay_skipped(void) { return skipped; }

static void drop_key(const uint8_t *key, size_t klen) {
    ks_ref ref;
    if (ks_open(&ref, (const char *)key, klen, true)) ks_remove(&ref);
    ks_close(&ref);
}

/* Run a command through its handler on a private client. */
static bool run_command(int argc, const char **argv, size_t *lens, char *why, size_t whylen) {
    static worker nobody;
    const command *cmd = command_lookup(argv[0], lens[0]);
    if (cmd == NULL) {
        snprintf(why, whylen, "no command %s", argv[0]);
        return false;
    }
    client c;
    memset(&c, 0, sizeof(c));
    c.w = &nobody;
    c.authenticated = true;
    reply_init(&c.out);
    c.argc = argc;
    c.argv = argv;
    c.argvlen = lens;
    cmd->proc(&c);
    bool ok = c.out.len > 0 && c.out.buf[0] != '-';
    if (!ok)
        snprintf(why, whylen, "%s answered %.*s", argv[0],
                 (int)(c.out.len > 2 ? (c.out.len - 2 < 200 ? c.out.len - 2 : 200) : 0), c.out.buf);
    reply_free(&c.out);
    return ok;
}

static void adjust_count(sbf_t *f, int delta) {
    size_t n = sbf_nlinks(f);
    if (sbf_layout(f) == BLOOMERY_LAYOUT_CLASSIC) {
        cbf_t *l = sbf_link_classic(f, n - 1);
        uint64_t v = cbf_count(l);
        if (delta > 0 || v > 0) cbf_set_count(l, v + (uint64_t)(int64_t)delta);
    } else {
        bf_t *l = sbf_link_blocked(f, n - 1);
        uint64_t v = bf_count(l);
        if (delta > 0 || v > 0) bf_set_count(l, v + (uint64_t)(int64_t)delta);
    }
}

static void apply_bf_add(const wal_record *rec, const wal_op *op) {
    ks_ref ref;
    kv_entry *e = ks_open(&ref, (const char *)op->key, op->klen, false);
    if (e == NULL || e->obj->type != KV_BLOOM) {
        ks_close(&ref);
        skip(rec, e ? "key is not a Bloom filter" : "key is missing");
        return;
    }
    sbf_t *f = e->obj->u.sbf;
    for (uint32_t i = 0; i < op->n; i++) {
        sbf_hash h = {le_load(op->items + 16 * (size_t)i, 8), le_load(op->items + 16 * (size_t)i + 8, 8)};
        bool was_new = op->flags[i / 8] >> (i % 8) & 1;
        int r = sbf_add_hashed(f, h);
        if (r < 0) {
            skip(rec, "the filter refused an item");
            continue;
        }
        if (was_new != (r == 1)) adjust_count(f, was_new ? 1 : -1);
    }
    ks_close(&ref);
}

static void apply_counting(const wal_record *rec, const wal_op *op) {
    ks_ref ref;
    kv_entry *e = ks_open(&ref, (const char *)op->key, op->klen, false);
    if (e == NULL || e->obj->type != KV_COUNTING) {
        ks_close(&ref);
        skip(rec, e ? "key is not a counting filter" : "key is missing");
        return;
    }
    for (uint32_t i = 0; i < op->n; i++) {
        bloomery_hash h = {le_load(op->items + 16 * (size_t)i, 8),
                           le_load(op->items + 16 * (size_t)i + 8, 8)};
        if (op->type == WAL_CNT_ADD) cntbf_add_hashed(e->obj->u.cnt, h);
        else cntbf_delete_hashed(e->obj->u.cnt, h);
    }
    ks_close(&ref);
}

static size_t sparse_max(void) {
    long long v = atomic_load_explicit(&cfg.hll_sparse_max_bytes, memory_order_relaxed);
    return v > 0 ? (size_t)v : 1;
}

static void account_hll(kv_obj *o) {
    size_t len;
    hll_bytes(o->u.hll, &len);
    uint64_t old = atomic_exchange(&o->value_bytes, (uint64_t)len);
    ks_mem_add((int64_t)len - (int64_t)old);
}

static void apply_pf_add(const wal_record *rec, const wal_op *op) {
    if (op->created) {
        drop_key(op->key, op->klen);
        hll_t *h;
        kv_obj *o = NULL;
        ks_ref ref;
        ks_open(&ref, (const char *)op->key, op->klen, true);
        if (hll_create(&h, sparse_max()) == BLOOMERY_OK && (o = kv_obj_new(KV_HLL, h)) != NULL) {
            account_hll(o);
            if (ks_add(&ref, o) == NULL) {
                ks_mem_add(-(int64_t)kv_obj_bytes(o));
                kv_obj_free(o);
            }
        }
        ks_close(&ref);
    }
    ks_ref ref;
    kv_entry *e = ks_open(&ref, (const char *)op->key, op->klen, false);
    if (e == NULL || e->obj->type != KV_HLL) {
        ks_close(&ref);
        skip(rec, e ? "key is not an HLL" : "key is missing");
        return;
    }
    hll_set_sparse_max(e->obj->u.hll, sparse_max());
    for (uint32_t i = 0; i < op->n; i++)
        if (hll_add_hashed(e->obj->u.hll, le_load(op->items + 8 * (size_t)i, 8)) < 0) {
            skip(rec, "the HLL refused an element");
            break;
        }
    account_hll(e->obj);
    ks_close(&ref);
}

static void apply_create(const wal_record *rec, const wal_op *op) {
    const wal_create *p = &op->create;
    drop_key(op->key, op->klen);
    kv_obj *o = kv_obj_new(p->kind == WAL_KIND_COUNTING ? KV_COUNTING : KV_BLOOM, NULL);
    if (o == NULL) {
        skip(rec, "out of memory");
        return;
    }
    int rc;
    if (p->kind == WAL_KIND_COUNTING) {
        uint64_t bytes = cntbf_bytes_for(p->capacity, p->error, NULL);
        rc = cntbf_create(&o->u.cnt, p->capacity, p->error, NULL);
        if (rc == BLOOMERY_OK) {
            atomic_store(&o->value_bytes, bytes);
            ks_mem_add((int64_t)bytes);
        }
    } else {
        sbf_options opts = {
            .layout = (bloomery_layout)p->layout,
            .expansion = p->expansion,
            .seed = 0,
            .policy = BLOOMERY_POLICY_LATENCY,
            .may_allocate = bf_growth_hook,
            .may_allocate_ctx = o,
        };
        rc = sbf_create(&o->u.sbf, p->capacity, p->error, &opts);
        if (rc != BLOOMERY_OK) {
            ks_mem_add(-(int64_t)kv_obj_bytes(o));
            atomic_store(&o->value_bytes, 0);
        }
    }
    if (rc != BLOOMERY_OK) {
        kv_obj_free(o);
        skip(rec, bloomery_strerror(rc));
        return;
    }
    ks_ref ref;
    ks_open(&ref, (const char *)op->key, op->klen, true);
    if (ks_add(&ref, o) == NULL) {
        ks_mem_add(-(int64_t)kv_obj_bytes(o));
        kv_obj_free(o);
        skip(rec, "out of memory");
    } else if (p->expire_ms) {
        ks_set_expire(&ref, p->expire_ms);
    }
    ks_close(&ref);
}

static void apply_rename(const wal_op *op) {
    const char *keys[2] = {(const char *)op->key, (const char *)op->key2};
    size_t lens[2] = {op->klen, op->klen2};
    if (lens[0] == lens[1] && memcmp(keys[0], keys[1], lens[0]) == 0) return;
    ks_multi m;
    ks_lock_many(&m, keys, lens, 2, true);
    ks_ref src, dst;
    kv_entry *e = ks_find_locked(keys[0], lens[0], &src, true);
    if (ks_find_locked(keys[1], lens[1], &dst, true)) ks_remove(&dst);
    kv_obj *placeholder = e ? kv_obj_new(KV_HLL, NULL) : NULL;
    if (e && placeholder && ks_add(&dst, e->obj)) {
        if (e->expire_ms) ks_set_expire(&dst, e->expire_ms);
        /* As RENAME does: the old entry keeps an empty object. */
        e->obj = placeholder;
        src.e = e;
        ks_remove(&src);
    } else {
        kv_obj_free(placeholder);
    }
    ks_unlock_many(&m);
}

/* Merges and loaded chunks: run the command again. */
static void apply_command(const wal_record *rec, const wal_op *op) {
    const char *argv[64];
    size_t lens[64];
    const char **av = argv;
    size_t *al = lens;
    bool load = op->type == WAL_LOADCHUNK || op->type == WAL_CF_LOADCHUNK;
    size_t need = load ? 4 : (size_t)op->n + 1;
    if (need > 64) {
        av = malloc(need * sizeof(*av));
        al = malloc(need * sizeof(*al));
        if (av == NULL || al == NULL) {
            free(av);
            free(al);
            skip(rec, "out of memory");
            return;
        }
    }
    char iter[32];
    if (load) {
        /* A header on iterator 1 loads only onto a missing key. */
        if (op->iter == 1) drop_key(op->key, op->klen);
        av[0] = op->type == WAL_CF_LOADCHUNK ? "cf.loadchunk" : "bf.loadchunk";
        av[1] = (const char *)op->key;
        al[1] = op->klen;
        al[2] = (size_t)snprintf(iter, sizeof(iter), "%" PRId64, op->iter);
        av[2] = iter;
        av[3] = (const char *)op->data;
        al[3] = op->dlen;
    } else {
        if (op->created) drop_key(op->key, op->klen);
        av[0] = op->type == WAL_BF_MERGE ? "bf.merge" : "pfmerge";
        size_t cur = 0, k = 1;
        const uint8_t *key;
        size_t klen;
        while (wal_op_next_key(op, &cur, &key, &klen)) {
            av[k] = (const char *)key;
            al[k++] = klen;
        }
    }
    al[0] = strlen(av[0]);
    char why[256];
    if (!run_command((int)need, av, al, why, sizeof(why))) skip(rec, why);
    if (av != argv) {
        free(av);
        free(al);
    }
}

void replay_apply(const wal_record *rec, const wal_op *op) {
    switch (op->type) {
    case WAL_BF_ADD: apply_bf_add(rec, op); break;
    case WAL_CNT_ADD:
    case WAL_CNT_DEL: apply_counting(rec, op); break;
    case WAL_PF_ADD: apply_pf_add(rec, op); break;
    case WAL_CREATE: apply_create(rec, op); break;
    case WAL_DEL: {
        size_t cur = 0, klen;
        const uint8_t *key;
        while (wal_op_next_key(op, &cur, &key, &klen)) drop_key(key, klen);
        break;
    }
    case WAL_EXPIRE: {
        ks_ref ref;
        if (ks_open(&ref, (const char *)op->key, op->klen, true)) ks_set_expire(&ref, op->when_ms);
        else skip(rec, "key is missing");
        ks_close(&ref);
        break;
    }
    case WAL_RENAME: apply_rename(op); break;
    case WAL_FLUSH: ks_flush(); break;
    case WAL_BF_MERGE:
    case WAL_PF_MERGE:
    case WAL_LOADCHUNK:
    case WAL_CF_LOADCHUNK: apply_command(rec, op); break;
    case WAL_WIN_CREATE:
    case WAL_WIN_ADD:
    case WAL_WIN_ROTATE: {
        const char *why = window_replay(op);
        if (why) skip(rec, why);
        break;
    }
    case WAL_CF_CREATE:
    case WAL_CF_OP: {
        const char *why = cuckoo_replay(op);
        if (why) skip(rec, why);
        break;
    }
    }
}

/* bloomery check-data, exact filters: their store (DIR/exact, RocksDB)
 * against their windows.
 *
 * Every fingerprint a period holds whose period is one of its window's
 * slices must be in that slice's filter as the snapshot has it, or in an
 * exact-put record of the log after the snapshot (the store may be ahead of
 * the snapshot; the log after it is replayed at start). Reading every
 * table file with checksums verified also finds damaged files. A store that
 * cannot be opened, a read error or a fingerprint the filter lacks is a
 * problem; periods of filters the snapshot does not hold are noted (the
 * server drops them). The other direction, filter to store, cannot be
 * checked: a filter does not list its items.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <rocksdb/c.h>

#include "bloomery/window.h"
#include "check_exact.h"
#include "exact_manifest.h"
#include "hset.h"
#include "le.h"

typedef struct kept {
    uint64_t id;
    char *key;
    win_t *w;
} kept;

static kept *keys;
static size_t nkeys;
static hset logged; /* id (8 bytes) + fingerprint (16) of the log's puts */

void check_exact_keep(const snap_entry *e, bloomery_object *obj)
{
    kept *k = realloc(keys, (nkeys + 1) * sizeof(*keys));
    char *name = malloc(e->klen + 1);
    if (k == NULL || name == NULL || obj->type != BLOOMERY_TYPE_WINDOW) {
        free(name);
        if (k)
            keys = k;
        bloomery_object_free(obj);
        return;
    }
    keys = k;
    memcpy(name, e->key, e->klen);
    name[e->klen] = '\0';
    keys[nkeys++] = (kept){snap_exact_id(e), name, obj->u.any};
    obj->u.any = NULL;
}

void check_exact_record(const wal_op *op)
{
    if (op->type != WAL_EXACT_PUT)
        return;
    if (logged.slots == NULL)
        hset_init(&logged);
    for (uint32_t i = 0; i < op->n; i++) {
        uint8_t k[24];
        le_store(k, op->store_id, 8);
        memcpy(k + 8, op->items + 16 * (size_t)i, 16);
        bool added;
        hset_insert(&logged, k, sizeof(k), le_load(k + 8, 8), &added);
    }
}

static bool in_log(uint64_t id, const uint8_t *fp)
{
    if (logged.slots == NULL)
        return false;
    uint8_t k[24];
    le_store(k, id, 8);
    memcpy(k + 8, fp, 16);
    return hset_find(&logged, k, sizeof(k), le_load(k + 8, 8)) != NULL;
}

static const kept *find_kept(uint64_t id)
{
    for (size_t i = 0; i < nkeys; i++)
        if (keys[i].id == id)
            return &keys[i];
    return NULL;
}

/* The slice of w that starts at period, or NULL. */
static bf_t *slice_at(const win_t *w, int64_t period)
{
    for (unsigned i = 0; i <= win_slices(w); i++)
        if (win_slice_start(w, i) == period)
            return win_slice(w, i);
    return NULL;
}

/* One period: its fingerprints read through, each checked. */
static void check_period(rocksdb_t *db, rocksdb_column_family_handle_t *h, const char *name,
                         const kept *k, int64_t period, void (*problem)(const char *))
{
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_verify_checksums(ro, 1);
    rocksdb_readoptions_set_fill_cache(ro, 0);
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(db, ro, h);
    bf_t *slice = slice_at(k->w, period);
    uint64_t n = 0, lacking = 0, bad = 0;
    for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t len;
        const uint8_t *fp = (const uint8_t *)rocksdb_iter_key(it, &len);
        n++;
        if (len != 16) {
            bad++;
            continue;
        }
        bloomery_hash bh = {le_load(fp, 8), le_load(fp + 8, 8)};
        if (slice && !bf_check_hashed(slice, bh) && !in_log(k->id, fp))
            lacking++;
    }
    char *err = NULL, msg[1400];
    rocksdb_iter_get_error(it, &err);
    if (err) {
        snprintf(msg, sizeof(msg), "exact store: period %s of key \"%.200s\": %.800s", name, k->key,
                 err);
        problem(msg);
        free(err);
    }
    if (bad) {
        snprintf(msg, sizeof(msg),
                 "exact store: period %s of key \"%.200s\": %" PRIu64 " keys not 16 bytes long",
                 name, k->key, bad);
        problem(msg);
    }
    if (lacking) {
        snprintf(msg, sizeof(msg),
                 "exact store: period %s of key \"%.200s\": %" PRIu64 " of %" PRIu64
                 " fingerprints are in neither the window's slice nor the log after the snapshot",
                 name, k->key, lacking, n);
        problem(msg);
    }
    printf("exact store: key \"%.200s\" period %" PRId64 ": %" PRIu64 " fingerprints%s\n", k->key,
           period, n, slice ? "" : " (outside the window: kept for AT and RETAIN)");
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
}

void check_exact_run(const char *dir, void (*problem)(const char *))
{
    char path[4200], msg[9000];
    snprintf(path, sizeof(path), "%s/exact", dir);
    struct stat st;
    bool present = stat(path, &st) == 0;
    if (!present && nkeys == 0)
        goto out;
    if (!present) {
        snprintf(msg, sizeof(msg), "%s: missing, and the snapshot holds %zu exact filters", path,
                 nkeys);
        problem(msg);
        goto out;
    }
    rocksdb_options_t *opts = rocksdb_options_create();
    char *err = NULL;
    size_t nnames = 0;
    char **names = rocksdb_list_column_families(opts, path, &nnames, &err);
    rocksdb_column_family_handle_t **hs = NULL;
    const rocksdb_options_t **cfo = NULL;
    rocksdb_t *db = NULL;
    if (err == NULL) {
        hs = calloc(nnames, sizeof(*hs));
        cfo = calloc(nnames, sizeof(*cfo));
        for (size_t i = 0; cfo && i < nnames; i++)
            cfo[i] = opts;
        if (hs && cfo)
            db = rocksdb_open_for_read_only_column_families(
                opts, path, (int)nnames, (const char *const *)names, cfo, hs, 0, &err);
    }
    if (db == NULL) {
        snprintf(msg, sizeof(msg), "%s: can't be opened: %.4000s", path, err ? err : "no memory");
        problem(msg);
    }
    free(err);
    for (size_t i = 0; db && i < nnames; i++) {
        uint64_t id;
        int64_t period;
        if (!exact_period_parse(names[i], &id, &period))
            continue;
        const kept *k = find_kept(id);
        if (k)
            check_period(db, hs[i], names[i], k, period, problem);
        else
            printf("note: exact store period %s belongs to no filter of the snapshot (the server "
                   "drops it, or the log creates its filter)\n",
                   names[i]);
    }
    for (size_t i = 0; db && i < nnames; i++)
        rocksdb_column_family_handle_destroy(hs[i]);
    if (db)
        rocksdb_close(db);
    free(hs);
    free(cfo);
    if (names)
        rocksdb_list_column_families_destroy(names, nnames);
    rocksdb_options_destroy(opts);
out:
    for (size_t i = 0; i < nkeys; i++) {
        win_free(keys[i].w);
        free(keys[i].key);
    }
    free(keys);
    keys = NULL;
    nkeys = 0;
    if (logged.slots)
        hset_free(&logged);
}

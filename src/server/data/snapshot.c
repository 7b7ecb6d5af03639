/* Snapshots: capture, background write, publication, cleanup.
 *
 * Capture (on the thread that asked, every stripe write-locked, so no
 * command runs): L0 = the next LSN, at which the log rotates to a new
 * file; for every key its name, kind, expiry, a reference to its object
 * (kv_obj_retain: a key deleted meanwhile keeps its object until the write
 * is done) and its serial.h image header. The pause is a walk of the key
 * table: no large value is copied under it.
 *
 * Values are then read by the writer threads while commands run:
 * - monotone values (Bloom chains, windows; types.h) are read live: a copy
 *   taken while writers run, with the log replayed from L0 over it, yields
 *   exactly the final state (docs/PERSISTENCE.md);
 * - cuckoo and counting filters are kept as at L0 by copy-on-write: the
 *   capture installs the library's write barrier, and a writer about to
 *   change a 4 KiB page of a chunk the snapshot has not read yet first
 *   saves the page's bytes (cow_before_write). A snapshot thread reads
 *   one chunk at a time under the value's cow mutex, taking saved pages
 *   for live ones (cow_read), so a command on that key waits at most for
 *   one chunk's memcpy, other keys not at all, and the extra memory is the
 *   pages changed before they were read. The barriers are removed under a
 *   second brief all-stripes lock when the chunks are done (no command can
 *   be inside one then);
 * - HLLs (at most 16 KB) are copied at the capture.
 *
 * Write (two threads): each chunk is copied, hashed (XXH3-128 names the
 * content) and checksummed (serial.h's per-chunk checksum, for the
 * loader). A chunk whose content file already exists is reused, not
 * written: that is what makes a snapshot of mostly unchanged filters
 * cheap. A new chunk is compressed with zstd; a frame of at most
 * INLINE_MAX bytes (zeros compress to a few dozen) goes into the index,
 * others into DIR/chunks/<hash>.zst through a temporary name, fsync and
 * rename.
 *
 * Publication: the index is written to a temporary name, fsynced, renamed
 * to DIR/snapshots/<seq>.index and the directory fsynced; only then are
 * older indexes, unreferenced chunk files and log files below L0 deleted.
 *
 * Tests: with BLOOMERYD_TEST_SNAPSHOT_GATE set to the path of a FIFO, a
 * background snapshot waits after its capture until something is written
 * to the FIFO and it is closed, so a test can change values between L0
 * and the reading of their chunks.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "datadir.h"
#include "datadir_fs.h"
#include "persist.h"
#include "config.h"
#include "exact.h"
#include "log.h"
#include "page_map.h"
#include "snapshot.h"
#include "test_gate.h"
#include "util.h"

#define INLINE_MAX 4096
#define WRITE_THREADS 2
#define ZSTD_LEVEL 1

typedef struct cap_chunk {
    size_t len;
    snap_chunk out; /* filled by the writers */
    uint8_t *frame; /* inline frame, owned */
    bool pending;   /* written under a temporary name */
} cap_chunk;

struct snapshot;

/* Copy-on-write state of one value (see the top of the file). Every field
 * but s and img is guarded by lock. */
#define COW_PAGE 4096u

typedef struct cow {
    pthread_mutex_t lock;
    struct snapshot *s;
    const bloomery_image *img; /* the value's regions as at L0 */
    uint64_t nchunks;
    uint64_t *first_page; /* per chunk, and the total at [nchunks] */
    uint8_t *read;        /* per chunk: read by a writer thread */
    uint8_t **saved;      /* per page: NULL (live), COW_ZERO or its bytes */
    bool failed;
} cow;

typedef struct cap_key {
    char *key;
    size_t klen;
    uint8_t kind;
    int64_t expire_ms;
    kv_obj *obj;         /* retained */
    bloomery_image *img; /* monotone and copy-on-write: chunks of the live value */
    cow *cow;            /* copy-on-write values */
    uint8_t *header;
    size_t hlen;
    uint8_t *copy; /* HLL: the chunks as captured */
    uint64_t nchunks;
    cap_chunk *chunks;
    size_t *offsets; /* HLL: chunk i at copy + offsets[i] */
} cap_key;

typedef struct snapshot {
    uint64_t seq, start_lsn;
    uint64_t log_from; /* the oldest record a restore in progress needs */
    int64_t created_ms;
    uint64_t dirty; /* changes counted at capture */
    cap_key *keys;
    size_t nkeys, capkeys;
    bool failed; /* capture ran out of memory */
    /* work distribution */
    size_t *work_key; /* flat list of (key, chunk) */
    uint64_t *work_chunk;
    size_t nwork;
    _Atomic size_t next;
    _Atomic bool error;
    pthread_mutex_t lock;
    char err[512];
    _Atomic uint64_t bytes_written, chunks_written, chunks_reused, chunks_inline;
    int64_t capture_us, chunks_us; /* phase durations, for the log */
    bool hooked;                   /* write barriers installed */
    int64_t unhook_us;             /* the all-stripes pause that removed them */
    /* Copy-on-write: pages saved, bytes held now and at most. */
    _Atomic uint64_t cow_pages, cow_bytes, cow_peak;
} snapshot;

static char data_dir[4096];
static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t state_cond = PTHREAD_COND_INITIALIZER;
static bool running;
static bool thread_joinable;
static pthread_t bg_thread;
static snapshot_stats stats = {.last_ok = true};
static uint64_t last_seq;
static unsigned file_holds; /* under state_lock */
pthread_mutex_t snapshot_apply_lock = PTHREAD_MUTEX_INITIALIZER;

void snapshot_hold_files(bool hold)
{
    pthread_mutex_lock(&state_lock);
    if (hold)
        file_holds++;
    else if (file_holds)
        file_holds--;
    pthread_mutex_unlock(&state_lock);
}

void snapshot_init(const char *dir)
{
    snprintf(data_dir, sizeof(data_dir), "%s", dir);
    stats.last_save_s = now_ms() / 1000;
    /* Temporary files of a snapshot that did not finish. */
    const char *subs[] = {"snapshots", "chunks"};
    for (int s = 0; s < 2; s++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", dir, subs[s]);
        DIR *d = datadir_opendir(path);
        if (d == NULL)
            continue;
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (strstr(de->d_name, ".tmp") == NULL)
                continue;
            char f[8400];
            snprintf(f, sizeof(f), "%s/%s", path, de->d_name);
            datadir_unlink(f);
        }
        closedir(d);
    }
}

void snapshot_adopt(uint64_t seq, const snap_index *ix)
{
    last_seq = seq;
    stats.seq = seq;
    stats.start_lsn = ix->start_lsn;
    stats.keys = ix->nkeys;
    stats.chunks = ix->nchunks;
    stats.last_save_s = ix->created_ms / 1000;
}

/* ---- copy-on-write ---- */

static void fail(snapshot *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A saved page that was all zeros: no copy needed. */
static uint8_t cow_zero_marker;
#define COW_ZERO (&cow_zero_marker)

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

static cow *cow_new(snapshot *s, const bloomery_image *img)
{
    cow *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return NULL;
    pthread_mutex_init(&w->lock, NULL);
    w->s = s;
    w->img = img;
    w->nchunks = bloomery_image_nchunks(img);
    w->first_page = malloc((w->nchunks + 1) * sizeof(*w->first_page));
    w->read = calloc(w->nchunks ? w->nchunks : 1, 1);
    if (w->first_page == NULL || w->read == NULL)
        goto fail;
    uint64_t pages = 0;
    for (uint64_t i = 0; i < w->nchunks; i++) {
        size_t len;
        bloomery_image_chunk(img, i, &len);
        w->first_page[i] = pages;
        pages += (len + COW_PAGE - 1) / COW_PAGE;
    }
    w->first_page[w->nchunks] = pages;
    w->saved = calloc(pages ? pages : 1, sizeof(*w->saved));
    if (w->saved == NULL)
        goto fail;
    return w;
fail:
    free(w->first_page);
    free(w->read);
    pthread_mutex_destroy(&w->lock);
    free(w);
    return NULL;
}

static void cow_free(cow *w)
{
    if (w == NULL)
        return;
    uint64_t freed = 0;
    for (uint64_t p = 0; p < w->first_page[w->nchunks]; p++)
        if (w->saved[p] && w->saved[p] != COW_ZERO) {
            free(w->saved[p]);
            freed += COW_PAGE;
        }
    atomic_fetch_sub(&w->s->cow_bytes, freed);
    free(w->saved);
    free(w->first_page);
    free(w->read);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

/* The write barrier: a writer is about to change bytes [off, off + len) of
 * region r. Pages of chunks not read yet keep their bytes as at L0. Ranges
 * past what the image holds (grown since L0) are not in the snapshot. */
static void cow_before_write(void *ctx, uint32_t r, uint64_t off, uint64_t len)
{
    cow *w = ctx;
    pthread_mutex_lock(&w->lock);
    while (len > 0 && !w->failed) {
        size_t at, clen;
        uint64_t i = bloomery_image_chunk_at(w->img, r, off, &at);
        if (i == UINT64_MAX)
            break;
        const uint8_t *live = bloomery_image_chunk(w->img, i, &clen);
        uint64_t n = len < clen - at ? len : clen - at;
        for (uint64_t p = at / COW_PAGE; !w->read[i] && p <= (at + n - 1) / COW_PAGE; p++) {
            uint8_t **slot = &w->saved[w->first_page[i] + p];
            if (*slot)
                continue;
            size_t plen = clen - p * COW_PAGE < COW_PAGE ? clen - p * COW_PAGE : COW_PAGE;
            const uint8_t *src = live + p * COW_PAGE;
            if (all_zero(src, plen)) {
                *slot = COW_ZERO;
                continue;
            }
            if ((*slot = malloc(plen)) == NULL) {
                /* The snapshot fails; the writer goes on. */
                w->failed = true;
                fail(w->s, "out of memory saving a page for copy-on-write");
                break;
            }
            memcpy(*slot, src, plen);
            atomic_fetch_add(&w->s->cow_pages, 1);
            uint64_t now = atomic_fetch_add(&w->s->cow_bytes, COW_PAGE) + COW_PAGE;
            uint64_t peak = atomic_load(&w->s->cow_peak);
            while (now > peak && !atomic_compare_exchange_weak(&w->s->cow_peak, &peak, now)) {
            }
        }
        off += n;
        len -= n;
    }
    pthread_mutex_unlock(&w->lock);
}

/* Chunk i as at L0 into buf: live pages not changed since, saved ones for
 * the others, zeros for pages never written (pm: the writer's map). Writers
 * of the value wait meanwhile (one memcpy of a chunk); from then on they
 * change the chunk freely. */
static void cow_read(cow *w, uint64_t i, uint8_t *buf, page_map *pm)
{
    size_t len;
    pthread_mutex_lock(&w->lock);
    const uint8_t *live = bloomery_image_chunk(w->img, i, &len);
    /* Under the lock: a page written since L0 was saved first. */
    page_map_load(pm, live, len);
    uint64_t freed = 0;
    for (uint64_t p = w->first_page[i], off = 0; p < w->first_page[i + 1]; p++, off += COW_PAGE) {
        size_t plen = len - off < COW_PAGE ? len - off : COW_PAGE;
        uint8_t *saved = w->saved[p];
        if (saved == NULL && page_map_untouched(pm, live + off, plen)) {
            memset(buf + off, 0, plen);
        } else if (saved == NULL) {
            memcpy(buf + off, live + off, plen);
        } else if (saved == COW_ZERO) {
            memset(buf + off, 0, plen);
        } else {
            memcpy(buf + off, saved, plen);
            free(saved);
            freed += COW_PAGE;
        }
        w->saved[p] = NULL;
    }
    w->read[i] = 1;
    pthread_mutex_unlock(&w->lock);
    atomic_fetch_sub(&w->s->cow_bytes, freed);
}

/* Install (capture, every stripe locked) or remove the write barriers. No
 * writer is inside a barrier while every stripe is locked: writers hold
 * their key's stripe lock. */
static void cow_install(snapshot *s)
{
    for (size_t i = 0; i < s->nkeys; i++) {
        cap_key *k = &s->keys[i];
        if (k->cow) {
            k->obj->type->set_write_hook(k->obj->v, cow_before_write, k->cow);
            s->hooked = true;
        }
    }
}

static void cow_remove(snapshot *s)
{
    if (s->hooked) {
        int64_t t0 = mono_us();
        ks_lock_all();
        for (size_t i = 0; i < s->nkeys; i++) {
            cap_key *k = &s->keys[i];
            if (k->cow)
                k->obj->type->set_write_hook(k->obj->v, NULL, NULL);
        }
        ks_unlock_all();
        s->hooked = false;
        s->unhook_us = mono_us() - t0;
    }
    for (size_t i = 0; i < s->nkeys; i++) {
        cow_free(s->keys[i].cow);
        s->keys[i].cow = NULL;
    }
}

/* ---- capture ---- */

static cap_key *new_key(snapshot *s)
{
    if (s->nkeys == s->capkeys) {
        size_t cap = s->capkeys ? s->capkeys * 2 : 64;
        cap_key *k = realloc(s->keys, cap * sizeof(*k));
        if (k == NULL)
            return NULL;
        s->keys = k;
        s->capkeys = cap;
    }
    cap_key *k = &s->keys[s->nkeys];
    memset(k, 0, sizeof(*k));
    return k;
}

/* A LOADCHUNK restore in progress has no image yet: the entry lists the
 * LSNs of its records, which stay in the log for recovery to replay. */
static bool capture_restore(snapshot *s, const kv_entry *e)
{
    kv_obj *o = e->obj;
    if (o->restore_lost)
        return false;
    if (o->nrestore == 0)
        return true; /* never logged (appendonly no) */
    cap_key *k = new_key(s);
    if (k == NULL)
        return false;
    k->key = malloc(e->klen ? e->klen : 1);
    k->header = malloc(8 * o->nrestore);
    if (!k->key || !k->header) {
        free(k->key);
        free(k->header);
        return false;
    }
    memcpy(k->key, e->key, e->klen);
    k->klen = e->klen;
    for (size_t i = 0; i < o->nrestore; i++)
        le_store(k->header + 8 * i, o->restore_lsns[i], 8);
    k->hlen = 8 * o->nrestore;
    k->kind = SNAP_KIND_RESTORE;
    k->expire_ms = e->expire_ms;
    if (o->restore_lsns[0] < s->log_from)
        s->log_from = o->restore_lsns[0];
    s->nkeys++;
    return true;
}

static bool capture_key(snapshot *s, const kv_entry *e)
{
    kv_obj *o = e->obj;
    uint8_t kind = o->type->snap_kind;
    if (kind == 0)
        return true;
    if (kind == SNAP_KIND_RESTORE)
        return capture_restore(s, e);
    bloomery_object obj = type_object(o);
    cap_key *k = new_key(s);
    if (k == NULL)
        return false;
    bloomery_image *img;
    if (bloomery_image_create(&img, obj, 0) != BLOOMERY_OK)
        return false;
    size_t hlen;
    const uint8_t *h = bloomery_image_header(img, &hlen);
    k->key = malloc(e->klen ? e->klen : 1);
    k->header = malloc(hlen + EXACT_META_LEN);
    k->nchunks = bloomery_image_nchunks(img);
    k->chunks = calloc(k->nchunks, sizeof(cap_chunk));
    if (!k->key || !k->header || !k->chunks)
        goto fail;
    memcpy(k->key, e->key, e->klen);
    k->klen = e->klen;
    memcpy(k->header, h, hlen);
    k->hlen = hlen;
    if (o->exact) {
        /* The store's name follows the window's header (SNAP_KIND_EXACT). */
        exact_meta_encode(o->exact, k->header + hlen);
        k->hlen += EXACT_META_LEN;
        kind |= SNAP_KIND_EXACT;
    }
    k->kind = kind | (o->readonly ? SNAP_KIND_READONLY : 0);
    k->expire_ms = e->expire_ms;
    size_t total = 0;
    for (uint64_t i = 0; i < k->nchunks; i++) {
        bloomery_image_chunk(img, i, &k->chunks[i].len);
        total += k->chunks[i].len;
    }
    if (o->type->monotone && o->type->monotone(o->v)) {
        k->img = img;
    } else if (o->type->set_write_hook) {
        /* Copy-on-write: the barrier is installed once the walk is done. */
        if ((k->cow = cow_new(s, img)) == NULL)
            goto fail;
        k->img = img;
    } else {
        /* Small (HLL): copy now, checksum now. */
        k->copy = malloc(total ? total : 1);
        k->offsets = calloc(k->nchunks, sizeof(size_t));
        if (!k->copy || !k->offsets)
            goto fail;
        size_t at = 0;
        for (uint64_t i = 0; i < k->nchunks; i++) {
            size_t len;
            const uint8_t *p = bloomery_image_chunk(img, i, &len);
            memcpy(k->copy + at, p, len);
            k->offsets[i] = at;
            k->chunks[i].out.checksum = bloomery_image_chunk_checksum(img, i, k->copy + at, len);
            at += len;
        }
        bloomery_image_free(img);
    }
    k->obj = o;
    kv_obj_retain(o);
    s->nkeys++;
    return true;
fail:
    free(k->key);
    free(k->header);
    free(k->chunks);
    free(k->copy);
    free(k->offsets);
    bloomery_image_free(img);
    return false;
}

static void capture_visit(void *ctx, const kv_entry *e)
{
    snapshot *s = ctx;
    if (!s->failed && !capture_key(s, e))
        s->failed = true;
}

static void snapshot_free(snapshot *s)
{
    cow_remove(s);
    for (size_t i = 0; i < s->nkeys; i++) {
        cap_key *k = &s->keys[i];
        for (uint64_t c = 0; c < k->nchunks; c++) {
            free(k->chunks[c].frame);
            if (k->chunks[c].pending) {
                /* A failed snapshot's chunk, never renamed. */
                char hex[33], tmp[4400];
                chunk_hash_hex(k->chunks[c].out.hash, hex);
                snprintf(tmp, sizeof(tmp), "%s/chunks/%s.zst.tmp.%zu.%" PRIu64, data_dir, hex, i,
                         c);
                datadir_unlink(tmp);
            }
        }
        bloomery_image_free(k->img);
        kv_obj_free(k->obj);
        free(k->key);
        free(k->header);
        free(k->chunks);
        free(k->copy);
        free(k->offsets);
    }
    free(s->keys);
    free(s->work_key);
    free(s->work_chunk);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static snapshot *capture(void)
{
    int64_t t0 = mono_us();
    snapshot *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_lock(&snapshot_apply_lock);
    ks_lock_all();
    s->start_lsn = wal_rotate();
    s->log_from = s->start_lsn;
    s->created_ms = now_ms();
    s->dirty = atomic_load(&persist_dirty);
    ks_foreach_locked(capture_visit, s);
    if (!s->failed)
        cow_install(s);
    ks_unlock_all();
    pthread_mutex_unlock(&snapshot_apply_lock);
    uint64_t n = 0;
    for (size_t i = 0; i < s->nkeys; i++)
        n += s->keys[i].nchunks;
    s->work_key = malloc((n ? n : 1) * sizeof(size_t));
    s->work_chunk = malloc((n ? n : 1) * sizeof(uint64_t));
    if (s->failed || !s->work_key || !s->work_chunk) {
        snapshot_free(s);
        return NULL;
    }
    for (size_t i = 0; i < s->nkeys; i++)
        for (uint64_t c = 0; c < s->keys[i].nchunks; c++) {
            s->work_key[s->nwork] = i;
            s->work_chunk[s->nwork++] = c;
        }
    s->capture_us = mono_us() - t0;
    return s;
}

/* ---- write ---- */

static void fail(snapshot *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(snapshot *s, const char *fmt, ...)
{
    pthread_mutex_lock(&s->lock);
    if (!atomic_load(&s->error)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->err, sizeof(s->err), fmt, ap);
        va_end(ap);
        atomic_store(&s->error, true);
    }
    pthread_mutex_unlock(&s->lock);
}

static bool write_file(const char *path, const void *a, size_t alen, const void *b, size_t blen,
                       bool sync)
{
    int fd = datadir_create(path);
    if (fd < 0)
        return false;
    const void *parts[2] = {a, b};
    size_t lens[2] = {alen, blen};
    for (int i = 0; i < 2; i++) {
        const uint8_t *p = parts[i];
        size_t n = lens[i];
        while (n) {
            ssize_t w = write(fd, p, n);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                close(fd);
                return false;
            }
            p += w;
            n -= (size_t)w;
        }
    }
    bool ok = !sync || fsync(fd) == 0;
    return close(fd) == 0 && ok;
}

typedef struct writer {
    snapshot *s;
    uint8_t *buf;
    size_t cap;
    chunk_hash last_inline; /* consecutive equal chunks (zeros) share one frame */
    uint8_t *last_frame;
    size_t last_flen;
    chunk_compressor zc;
    page_map pm; /* of the chunk being read */
    int id;
} writer;

/* Copy a live chunk into buf while hashing it, a slice at a time so the
 * hash reads the slice from the cache the copy just filled: one pass over
 * memory instead of two. */
#define SLICE (256u << 10)

/* Writers OR bits into the live lanes meanwhile (relaxed atomics): read
 * them the same way, eight bytes at a time, so the race the monotone
 * property makes harmless is also a declared one. */
static void copy_words(uint8_t *dst, const uint8_t *src, size_t n)
{
    size_t i = 0;
    if (((uintptr_t)src & 7) == 0)
        for (; i + 8 <= n; i += 8) {
            uint64_t v =
                __atomic_load_n((const uint64_t *)(const void *)(src + i), __ATOMIC_RELAXED);
            memcpy(dst + i, &v, 8);
        }
    for (; i < n; i++)
        dst[i] = __atomic_load_n(src + i, __ATOMIC_RELAXED);
}

/* A page never written before pm was loaded had no bit set at the capture
 * (which came first): zeros, without reading it. Per page, as a chunk need
 * not start on a huge page: a present neighbour must not make the rest of
 * the chunk count as written. */
static void copy_live(uint8_t *dst, const uint8_t *src, size_t n, const page_map *pm)
{
    if (!pm->known) {
        copy_words(dst, src, n);
        return;
    }
    size_t page = (size_t)1 << pm->shift;
    while (n > 0) {
        size_t run = page - (size_t)((uintptr_t)src & (page - 1));
        if (run > n)
            run = n;
        if (page_map_untouched(pm, src, run))
            memset(dst, 0, run);
        else
            copy_words(dst, src, run);
        dst += run;
        src += run;
        n -= run;
    }
}

static chunk_hash copy_and_hash(uint8_t *buf, const uint8_t *live, size_t len, page_map *pm)
{
    XXH3_state_t st;
    XXH3_128bits_reset(&st);
    page_map_load(pm, live, len);
    for (size_t off = 0; off < len; off += SLICE) {
        size_t n = len - off < SLICE ? len - off : SLICE;
        copy_live(buf + off, live + off, n, pm);
        XXH3_128bits_update(&st, buf + off, n);
    }
    XXH128_hash_t h = XXH3_128bits_digest(&st);
    return (chunk_hash){h.low64, h.high64};
}

static void write_chunk(writer *w, cap_key *k, uint64_t i)
{
    snapshot *s = w->s;
    cap_chunk *c = &k->chunks[i];
    const uint8_t *data;
    if (k->img) {
        size_t len;
        const uint8_t *live = bloomery_image_chunk(k->img, i, &len);
        if (w->cap < len) {
            free(w->buf);
            w->buf = malloc(len);
            w->cap = w->buf ? len : 0;
            if (w->buf == NULL) {
                fail(s, "out of memory");
                return;
            }
        }
        /* Copy first: the hash and the checksum must describe the same
         * bytes, and writers may change them meanwhile. */
        if (k->cow) {
            cow_read(k->cow, i, w->buf, &w->pm);
            c->out.hash = chunk_hash_of(w->buf, len);
        } else {
            c->out.hash = copy_and_hash(w->buf, live, len, &w->pm);
        }
        data = w->buf;
        c->out.checksum = bloomery_image_chunk_checksum(k->img, i, data, len);
    } else {
        data = k->copy + k->offsets[i];
        c->out.hash = chunk_hash_of(data, c->len);
    }
    c->out.raw_len = (uint32_t)c->len;
    char hex[33], path[4200];
    chunk_hash_hex(c->out.hash, hex);
    snprintf(path, sizeof(path), "%s/chunks/%s.zst", data_dir, hex);
    if (w->last_frame && chunk_hash_eq(w->last_inline, c->out.hash)) {
        c->frame = malloc(w->last_flen);
        if (c->frame == NULL) {
            fail(s, "out of memory");
            return;
        }
        memcpy(c->frame, w->last_frame, w->last_flen);
        c->out.where = SNAP_CHUNK_INLINE;
        c->out.flen = w->last_flen;
        atomic_fetch_add(&s->chunks_inline, 1);
        return;
    }
    /* Only a regular file counts: a link planted at the name is replaced
     * by the new chunk's rename, never read through. */
    if (datadir_is_file(path)) {
        c->out.where = SNAP_CHUNK_FILE;
        atomic_fetch_add(&s->chunks_reused, 1);
        return;
    }
    const uint8_t *frame;
    size_t flen;
    if (!chunk_compress_with(&w->zc, data, c->len, ZSTD_LEVEL, &frame, &flen)) {
        fail(s, "compression failed");
        return;
    }
    if (flen <= INLINE_MAX) {
        c->frame = malloc(flen ? flen : 1);
        if (c->frame == NULL) {
            fail(s, "out of memory");
            return;
        }
        memcpy(c->frame, frame, flen);
        c->out.where = SNAP_CHUNK_INLINE;
        c->out.flen = flen;
        atomic_fetch_add(&s->chunks_inline, 1);
        free(w->last_frame);
        w->last_frame = malloc(flen);
        if (w->last_frame) {
            memcpy(w->last_frame, frame, flen);
            w->last_flen = flen;
            w->last_inline = c->out.hash;
        }
        return;
    }
    /* Written under a temporary name and renamed only after one syncfs
     * made every new chunk durable (publish): a chunk file's name is a
     * promise that its content is on disk. */
    uint8_t hdr[CHUNK_HEADER_SIZE];
    chunk_file_header(hdr, (uint32_t)c->len, c->out.hash, flen);
    char tmp[4300];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%" PRIu64 ".%" PRIu64, path, (uint64_t)(k - s->keys), i);
    if (!write_file(tmp, hdr, sizeof(hdr), frame, flen, false)) {
        fail(s, "writing chunk file %s: %s", tmp, datadir_strerror(errno));
        datadir_unlink(tmp);
    } else {
        c->out.where = SNAP_CHUNK_FILE;
        c->pending = true;
        atomic_fetch_add(&s->chunks_written, 1);
        atomic_fetch_add(&s->bytes_written, sizeof(hdr) + flen);
    }
}

static void *writer_main(void *arg)
{
    writer *w = arg;
    snapshot *s = w->s;
    for (;;) {
        size_t j = atomic_fetch_add(&s->next, 1);
        if (j >= s->nwork || atomic_load(&s->error))
            break;
        write_chunk(w, &s->keys[s->work_key[j]], s->work_chunk[j]);
    }
    free(w->buf);
    free(w->last_frame);
    chunk_compressor_free(&w->zc);
    page_map_free(&w->pm);
    return NULL;
}

/* Delete older indexes and chunk files no index references any more. */
static void collect_garbage(snapshot *s)
{
    char dir[4200], path[8400];
    snprintf(dir, sizeof(dir), "%s/snapshots", data_dir);
    uint64_t *seqs;
    size_t n = datadir_list(dir, ".index", &seqs);
    for (size_t i = 0; i < n; i++) {
        if (seqs[i] >= s->seq)
            continue;
        snprintf(path, sizeof(path), "%s/%016" PRIx64 ".index", dir, seqs[i]);
        datadir_unlink(path);
    }
    free(seqs);
    size_t nref = 0;
    for (size_t i = 0; i < s->nkeys; i++)
        nref += s->keys[i].nchunks;
    chunk_hash *refs = malloc((nref ? nref : 1) * sizeof(*refs));
    if (refs == NULL)
        return;
    nref = 0;
    for (size_t i = 0; i < s->nkeys; i++)
        for (uint64_t c = 0; c < s->keys[i].nchunks; c++)
            if (s->keys[i].chunks[c].out.where == SNAP_CHUNK_FILE)
                refs[nref++] = s->keys[i].chunks[c].out.hash;
    qsort(refs, nref, sizeof(*refs), chunk_hash_cmp);
    snprintf(dir, sizeof(dir), "%s/chunks", data_dir);
    DIR *d = datadir_opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            chunk_hash h;
            if (strlen(de->d_name) != 36 || strcmp(de->d_name + 32, ".zst") != 0 ||
                !chunk_hash_from_hex(de->d_name, &h))
                continue;
            if (bsearch(&h, refs, nref, sizeof(*refs), chunk_hash_cmp))
                continue;
            snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
            datadir_unlink(path);
        }
        closedir(d);
    }
    free(refs);
}

static bool sync_new_chunks(snapshot *s, const char *cdir)
{
    uint64_t pending = 0;
    for (size_t i = 0; i < s->nkeys; i++)
        for (uint64_t c = 0; c < s->keys[i].nchunks; c++)
            pending += s->keys[i].chunks[c].pending;
    if (pending == 0)
        return true;
    int fd = datadir_open_dir(cdir);
    if (fd < 0 || syncfs(fd) != 0) {
        fail(s, "syncing %s: %s", cdir, datadir_strerror(errno));
        if (fd >= 0)
            close(fd);
        return false;
    }
    for (size_t i = 0; i < s->nkeys; i++) {
        cap_key *k = &s->keys[i];
        for (uint64_t c = 0; c < k->nchunks; c++) {
            if (!k->chunks[c].pending)
                continue;
            char hex[33], path[4300], tmp[4400];
            chunk_hash_hex(k->chunks[c].out.hash, hex);
            snprintf(path, sizeof(path), "%s/%s.zst", cdir, hex);
            snprintf(tmp, sizeof(tmp), "%s.tmp.%zu.%" PRIu64, path, i, c);
            if (!datadir_rename(tmp, path)) {
                fail(s, "renaming %s: %s", tmp, strerror(errno));
                close(fd);
                return false;
            }
            k->chunks[c].pending = false;
        }
    }
    bool ok = fsync(fd) == 0;
    close(fd);
    if (!ok)
        fail(s, "syncing %s: %s", cdir, strerror(errno));
    return ok;
}

static bool publish(snapshot *s)
{
    pbuf b = {0};
    snap_index_begin(&b, s->seq, s->start_lsn, s->created_ms, s->nkeys);
    for (size_t i = 0; i < s->nkeys; i++) {
        cap_key *k = &s->keys[i];
        snap_index_entry(&b, k->key, k->klen, k->kind, k->expire_ms, k->header, k->hlen,
                         k->nchunks);
        for (uint64_t c = 0; c < k->nchunks; c++) {
            k->chunks[c].out.frame = k->chunks[c].frame;
            snap_index_chunk(&b, &k->chunks[c].out);
        }
    }
    snap_index_finish(&b);
    if (b.failed) {
        free(b.p);
        fail(s, "out of memory encoding the index");
        return false;
    }
    char cdir[4200], sdir[4200], tmp[4400], path[4300];
    snprintf(cdir, sizeof(cdir), "%s/chunks", data_dir);
    snprintf(sdir, sizeof(sdir), "%s/snapshots", data_dir);
    /* New chunks: one syncfs for all of them, then their final names, then
     * the directory; only then may an index name them. */
    if (!sync_new_chunks(s, cdir)) {
        free(b.p);
        return false;
    }
    snprintf(path, sizeof(path), "%s/%016" PRIx64 ".index", sdir, s->seq);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    bool ok = write_file(tmp, b.p, b.len, NULL, 0, true) && datadir_rename(tmp, path) &&
              datadir_sync_dir(sdir);
    atomic_fetch_add(&s->bytes_written, b.len);
    free(b.p);
    if (!ok) {
        fail(s, "writing %s: %s", path, datadir_strerror(errno));
        datadir_unlink(tmp);
        return false;
    }
    return true;
}

static void finish(snapshot *s, int64_t t0)
{
    bool ok = !atomic_load(&s->error);
    /* Every exact store write below L0 was made before the capture: on
     * disk before the log that holds them may go. */
    if (ok)
        exact_sync(s->start_lsn);
    if (ok)
        ok = publish(s);
    if (ok) {
        /* Only once the new index is durable: older state goes. Log files
         * below L0 go after the rotation reached the disk. */
        pthread_mutex_lock(&state_lock);
        bool held = file_holds > 0;
        pthread_mutex_unlock(&state_lock);
        if (!held) {
            collect_garbage(s);
            uint64_t keep = exact_log_needed();
            if (wal_wait_rotated(s->start_lsn))
                wal_delete_below(keep < s->log_from ? keep : s->log_from);
        }
        atomic_fetch_sub(&persist_dirty, s->dirty);
    }
    int64_t ms = (mono_us() - t0) / 1000;
    /* Logged before the state says the snapshot is over, so whoever saw
     * it over in INFO finds its line in the log. */
    if (ok)
        server_log(LOG_NOTICE,
                   "Snapshot %" PRIu64 " saved in %lld ms (capture %.1f ms, chunks "
                   "%.1f ms): %zu keys, %zu chunks (%llu written, %llu reused, %llu inline), %llu "
                   "bytes written; copy-on-write: %llu pages saved, at most %llu bytes held, "
                   "barriers removed in %.1f ms",
                   s->seq, (long long)ms, s->capture_us / 1e3, s->chunks_us / 1e3, s->nkeys,
                   s->nwork, (unsigned long long)s->chunks_written,
                   (unsigned long long)s->chunks_reused, (unsigned long long)s->chunks_inline,
                   (unsigned long long)s->bytes_written, (unsigned long long)s->cow_pages,
                   (unsigned long long)s->cow_peak, s->unhook_us / 1e3);
    else
        server_log(LOG_WARNING, "Snapshot failed: %s", s->err);
    pthread_mutex_lock(&state_lock);
    stats.last_ok = ok;
    stats.last_duration_ms = ms;
    stats.bytes_written = s->bytes_written;
    stats.chunks_written = s->chunks_written;
    stats.chunks_reused = s->chunks_reused;
    stats.chunks_inline = s->chunks_inline;
    stats.cow_pages = s->cow_pages;
    stats.cow_peak_bytes = s->cow_peak;
    if (ok) {
        stats.last_save_s = s->created_ms / 1000;
        stats.seq = s->seq;
        stats.start_lsn = s->start_lsn;
        stats.keys = s->nkeys;
        stats.chunks = s->nwork;
        last_seq = s->seq;
    }
    running = false;
    pthread_cond_broadcast(&state_cond);
    pthread_mutex_unlock(&state_lock);
    snapshot_free(s);
}

static void write_all(snapshot *s)
{
    int64_t t0 = mono_us();
    writer w[WRITE_THREADS];
    pthread_t th[WRITE_THREADS];
    int started = 0;
    for (int i = 0; i < WRITE_THREADS; i++) {
        w[i] = (writer){.s = s, .id = i};
        if (i > 0 && pthread_create(&th[i], NULL, writer_main, &w[i]) == 0)
            started |= 1 << i;
    }
    writer_main(&w[0]);
    for (int i = 1; i < WRITE_THREADS; i++)
        if (started & (1 << i))
            pthread_join(th[i], NULL);
    s->chunks_us = mono_us() - t0;
    /* Before the next snapshot may install its own. */
    cow_remove(s);
    finish(s, t0);
}

static void *bg_main(void *arg)
{
    /* Tests only: see the top of the file. */
    test_gate("BLOOMERYD_TEST_SNAPSHOT_GATE");
    write_all(arg);
    return NULL;
}

bool snapshot_run(bool wait, char *err, size_t errlen)
{
    pthread_mutex_lock(&state_lock);
    if (running) {
        pthread_mutex_unlock(&state_lock);
        snprintf(err, errlen, "Background save already in progress");
        return false;
    }
    running = true;
    stats.current_start_ms = now_ms();
    stats.last_attempt_ms = stats.current_start_ms;
    if (thread_joinable) {
        pthread_join(bg_thread, NULL);
        thread_joinable = false;
    }
    pthread_mutex_unlock(&state_lock);
    snapshot *s = capture();
    if (s == NULL) {
        pthread_mutex_lock(&state_lock);
        running = false;
        stats.last_ok = false;
        pthread_cond_broadcast(&state_cond);
        pthread_mutex_unlock(&state_lock);
        snprintf(err, errlen, "out of memory capturing the keyspace");
        return false;
    }
    s->seq = ++last_seq;
    if (wait) {
        write_all(s);
        pthread_mutex_lock(&state_lock);
        bool ok = stats.last_ok;
        pthread_mutex_unlock(&state_lock);
        if (!ok)
            snprintf(err, errlen, "snapshot failed, see the server log");
        return ok;
    }
    pthread_mutex_lock(&state_lock);
    if (pthread_create(&bg_thread, NULL, bg_main, s) != 0) {
        pthread_mutex_unlock(&state_lock);
        write_all(s);
        return true;
    }
    thread_joinable = true;
    pthread_mutex_unlock(&state_lock);
    return true;
}

bool snapshot_in_progress(void)
{
    pthread_mutex_lock(&state_lock);
    bool r = running;
    pthread_mutex_unlock(&state_lock);
    return r;
}

void snapshot_shutdown(void)
{
    pthread_mutex_lock(&state_lock);
    while (running)
        pthread_cond_wait(&state_cond, &state_lock);
    if (thread_joinable) {
        pthread_join(bg_thread, NULL);
        thread_joinable = false;
    }
    pthread_mutex_unlock(&state_lock);
}

void snapshot_get_stats(snapshot_stats *out)
{
    pthread_mutex_lock(&state_lock);
    *out = stats;
    out->in_progress = running;
    pthread_mutex_unlock(&state_lock);
}

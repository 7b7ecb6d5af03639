/* Reading and validating a data directory: see datadir.h and
 * docs/PERSISTENCE.md ("Recovery"). */
#include "datadir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chunk_format.h"
#include "datadir_fs.h"
#include "wal_last.h"

/* ---- files ---- */

bool datadir_parse_name(const char *name, const char *suffix, uint64_t *num)
{
    size_t sl = strlen(suffix);
    if (strlen(name) != 16 + sl || strcmp(name + 16, suffix) != 0)
        return false;
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char c = name[i];
        int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (x < 0)
            return false;
        v = v << 4 | (uint64_t)x;
    }
    *num = v;
    return true;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

size_t datadir_list(const char *dir, const char *suffix, uint64_t **out)
{
    DIR *d = datadir_opendir(dir);
    *out = NULL;
    if (d == NULL)
        return 0;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        uint64_t v;
        if (!datadir_parse_name(de->d_name, suffix, &v))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            uint64_t *p = realloc(*out, cap * sizeof(uint64_t));
            if (p == NULL)
                break;
            *out = p;
        }
        (*out)[n++] = v;
    }
    closedir(d);
    if (n)
        qsort(*out, n, sizeof(uint64_t), cmp_u64);
    return n;
}

bool datadir_write_file(const char *path, const void *p, size_t len)
{
    char tmp[DATADIR_PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = datadir_create(tmp);
    bool ok = fd >= 0;
    const uint8_t *b = p;
    for (size_t done = 0; ok && done < len;) {
        ssize_t w = write(fd, b + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        ok = w > 0;
        if (ok)
            done += (size_t)w;
    }
    ok = ok && fdatasync(fd) == 0;
    int e = errno;
    if (fd >= 0)
        close(fd);
    ok = ok && datadir_rename(tmp, path);
    if (!ok) {
        e = errno ? errno : e;
        datadir_unlink(tmp);
        errno = e;
    }
    return ok;
}

bool datadir_read_file(const char *path, uint8_t **out, size_t *len)
{
    int fd = datadir_open_read(path);
    if (fd < 0)
        return false;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return false;
    }
    uint8_t *buf = malloc(st.st_size ? (size_t)st.st_size : 1);
    size_t got = 0;
    int e = buf ? 0 : ENOMEM;
    while (buf && got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            e = n < 0 ? errno : EIO; /* shorter than fstat said */
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    if (buf == NULL || got != (size_t)st.st_size) {
        free(buf);
        errno = e;
        return false;
    }
    *out = buf;
    *len = got;
    return true;
}

/* ---- snapshot ---- */

bloomery_type datadir_kind_type(uint8_t kind)
{
    switch (kind) {
    case SNAP_KIND_BLOOM: return BLOOMERY_TYPE_SCALABLE;
    case SNAP_KIND_COUNTING: return BLOOMERY_TYPE_COUNTING;
    case SNAP_KIND_HLL: return BLOOMERY_TYPE_HLL;
    case SNAP_KIND_WINDOW: return BLOOMERY_TYPE_WINDOW;
    case SNAP_KIND_CUCKOO: return BLOOMERY_TYPE_CUCKOO;
    case SNAP_KIND_CMS: return BLOOMERY_TYPE_CMS;
    case SNAP_KIND_TOPK: return BLOOMERY_TYPE_TOPK;
    case SNAP_KIND_TDIGEST: return BLOOMERY_TYPE_TDIGEST;
    }
    return 0;
}

#define KEYFMT "key '%.*s'"
#define KEYARG(e) (int)((e)->klen < 200 ? (e)->klen : 200), (const char *)(e)->key

static int cmp_entry(const void *a, const void *b, void *entries)
{
    const snap_entry *x = &((const snap_entry *)entries)[*(const uint64_t *)a];
    const snap_entry *y = &((const snap_entry *)entries)[*(const uint64_t *)b];
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = n ? memcmp(x->key, y->key, n) : 0;
    if (c)
        return c;
    if (x->klen != y->klen)
        return x->klen < y->klen ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The keyspace refuses a key twice; so does the index. */
static bool unique_keys(const datadir_snapshot *s, char *err, size_t errlen)
{
    const snap_index *ix = &s->ix;
    if (ix->nkeys < 2)
        return true;
    uint64_t *ord = malloc(ix->nkeys * sizeof(uint64_t));
    if (ord == NULL) {
        snprintf(err, errlen, "%s: offset 0: out of memory", s->path);
        return false;
    }
    for (uint64_t k = 0; k < ix->nkeys; k++)
        ord[k] = k;
    qsort_r(ord, ix->nkeys, sizeof(uint64_t), cmp_entry, ix->entries);
    bool ok = true;
    for (uint64_t k = 1; k < ix->nkeys && ok; k++) {
        const snap_entry *a = &ix->entries[ord[k - 1]], *b = &ix->entries[ord[k]];
        if (a->klen == b->klen && (a->klen == 0 || memcmp(a->key, b->key, a->klen) == 0)) {
            snprintf(err, errlen, "%s: offset %zu: " KEYFMT ": key appears twice", s->path, b->off,
                     KEYARG(b));
            ok = false;
        }
    }
    free(ord);
    return ok;
}

int datadir_snapshot_open(const char *dir, datadir_snapshot *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    char sdir[4200];
    snprintf(sdir, sizeof(sdir), "%.4096s/snapshots", dir);
    uint64_t *seqs;
    size_t n = datadir_list(sdir, ".index", &seqs);
    if (n == 0) {
        free(seqs);
        return 0;
    }
    uint64_t seq = seqs[n - 1];
    free(seqs);
    snprintf(s->path, sizeof(s->path), "%s/%016" PRIx64 ".index", sdir, seq);
    size_t off;
    if (!datadir_read_file(s->path, &s->buf, &s->len)) {
        snprintf(err, errlen, "%s: offset 0: can't read: %s", s->path, datadir_strerror(errno));
        return -1;
    }
    char why[256];
    if (!snap_index_parse(s->buf, s->len, &s->ix, why, sizeof(why), &off)) {
        snprintf(err, errlen, "%s: offset %zu: %s", s->path, off, why);
        datadir_snapshot_close(s);
        return -1;
    }
    if (s->ix.seq != seq) {
        snprintf(err, errlen, "%s: offset 16: holds sequence %" PRIu64, s->path, s->ix.seq);
        datadir_snapshot_close(s);
        return -1;
    }
    if (!unique_keys(s, err, errlen)) {
        datadir_snapshot_close(s);
        return -1;
    }
    return 1;
}

void datadir_snapshot_close(datadir_snapshot *s)
{
    snap_index_free(&s->ix);
    free(s->buf);
    s->buf = NULL;
    s->len = 0;
}

bloomery_loader *datadir_open_entry(const char *index_path, const snap_entry *e, char *err,
                                    size_t errlen)
{
    bloomery_loader *l = NULL;
    size_t used;
    int rc = bloomery_loader_open(&l, e->header, e->hlen, 0, &used);
    if (rc != BLOOMERY_OK || used != e->hlen ||
        bloomery_loader_type(l) != datadir_kind_type(e->kind) ||
        bloomery_loader_nchunks(l) != e->nchunks) {
        snprintf(err, errlen, "%s: offset %zu: " KEYFMT ": %s", index_path, e->off, KEYARG(e),
                 rc != BLOOMERY_OK ? bloomery_loader_error(l)
                                   : "image header does not match the entry");
        bloomery_loader_free(l);
        return NULL;
    }
    for (uint64_t i = 0; i < e->nchunks; i++)
        if (e->chunks[i].raw_len != bloomery_loader_chunk_len(l, i)) {
            snprintf(err, errlen,
                     "%s: offset %zu: " KEYFMT ": chunk %" PRIu64 " has the wrong length",
                     index_path, e->chunks[i].off, KEYARG(e), i);
            bloomery_loader_free(l);
            return NULL;
        }
    return l;
}

/* Grow *buf to hold n bytes (a thread's buffers only ever grow). */
static bool reserve(uint8_t **buf, size_t *cap, size_t n)
{
    if (n <= *cap)
        return true;
    uint8_t *p = realloc(*buf, n);
    if (p == NULL)
        return false;
    *buf = p;
    *cap = n;
    return true;
}

/* The whole file at path into b->file; false with errno set. */
static bool read_chunk_file(const char *path, datadir_chunk_buf *b, size_t *len)
{
    int fd = datadir_open_read(path);
    if (fd < 0)
        return false;
    struct stat st;
    int e = 0;
    size_t got = 0;
    if (fstat(fd, &st) != 0)
        e = errno;
    else if (!reserve(&b->file, &b->file_cap, st.st_size ? (size_t)st.st_size : 1))
        e = ENOMEM;
    while (e == 0 && got < (size_t)st.st_size) {
        ssize_t n = read(fd, b->file + got, (size_t)st.st_size - got);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            e = n < 0 ? errno : EIO; /* shorter than fstat said */
        } else {
            got += (size_t)n;
        }
    }
    close(fd);
    errno = e;
    *len = got;
    return e == 0;
}

void datadir_chunk_buf_free(datadir_chunk_buf *b)
{
    free(b->file);
    free(b->raw);
    memset(b, 0, sizeof(*b));
}

void datadir_prefetch_chunk(const char *dir, const snap_entry *e, uint64_t i)
{
    const snap_chunk *c = &e->chunks[i];
    if (c->where == SNAP_CHUNK_INLINE)
        return;
    char hex[33], path[DATADIR_PATH_MAX];
    chunk_hash_hex(c->hash, hex);
    snprintf(path, sizeof(path), "%.4096s/chunks/%s.zst", dir, hex);
    int fd = datadir_open_read(path);
    if (fd < 0)
        return; /* the load itself reports it */
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
    close(fd);
}

/* A frame at least 1/64 of its raw size holds 64 compressed bytes per
 * 4 KiB page on average: its pages hold something, and decompressing it
 * straight into the object costs no memory that the copy of nonzero pages
 * would have saved (the object's pages are 2 MiB where huge pages are
 * available, mem.c, so one byte touches the page around it anyway). A
 * smaller frame is mostly zeros (a big filter that is mostly empty): it
 * goes through the thread's scratch buffer and only its nonzero pages are
 * copied, so that memory stays unallocated. */
#define DIRECT_MIN_RATIO 64

bool datadir_load_chunk(const char *dir, const char *index_path, const snap_entry *e, uint64_t i,
                        bloomery_loader *l, datadir_chunk_buf *b, char *err, size_t errlen)
{
    const snap_chunk *c = &e->chunks[i];
    char why[256];
    size_t len;
    uint8_t *dest = bloomery_loader_chunk_dest(l, i, &len);
    if (dest == NULL || len != c->raw_len) {
        snprintf(err, errlen, "%s: offset %zu: " KEYFMT ": chunk %" PRIu64 " has the wrong length",
                 index_path, c->off, KEYARG(e), i);
        return false;
    }
    datadir_chunk_buf own = {0};
    if (b == NULL)
        b = &own;
    const uint8_t *frame = c->frame;
    size_t flen = c->flen;
    char path[DATADIR_PATH_MAX];
    if (c->where != SNAP_CHUNK_INLINE) {
        char hex[33];
        chunk_hash_hex(c->hash, hex);
        snprintf(path, sizeof(path), "%.4096s/chunks/%s.zst", dir, hex);
        size_t off;
        uint32_t rl;
        chunk_hash h;
        bool ok = false;
        if (!read_chunk_file(path, b, &flen))
            snprintf(err, errlen,
                     "%s: offset 0: can't read chunk file (%s), named by %s at offset %zu", path,
                     datadir_strerror(errno), index_path, c->off);
        else if (!chunk_file_header_check(b->file, flen, &c->hash, &rl, &h, &frame, &flen, why,
                                          sizeof(why), &off))
            snprintf(err, errlen, "%s: offset %zu: %s", path, off, why);
        else if (rl != c->raw_len)
            snprintf(err, errlen, "%s: offset 12: %u bytes, the index says %u", path, rl,
                     c->raw_len);
        else
            ok = true;
        if (!ok) {
            datadir_chunk_buf_free(&own);
            return false;
        }
    }
    bool direct = (uint64_t)flen * DIRECT_MIN_RATIO >= c->raw_len;
    uint8_t *raw = dest;
    if (!direct) {
        if (!reserve(&b->raw, &b->raw_cap, c->raw_len ? c->raw_len : 1)) {
            snprintf(err, errlen, "%s: offset %zu: " KEYFMT ": chunk %" PRIu64 ": out of memory",
                     index_path, c->off, KEYARG(e), i);
            datadir_chunk_buf_free(&own);
            return false;
        }
        raw = b->raw;
    }
    /* The file's hash equals the index's (checked with its header), so
     * c->hash is what the content must hash to either way. */
    bool ok = chunk_frame_decode(frame, flen, c->raw_len, c->hash, raw, why, sizeof(why));
    if (!ok) {
        if (c->where == SNAP_CHUNK_INLINE)
            snprintf(err, errlen, "%s: offset %zu: inline chunk of " KEYFMT ": %s", index_path,
                     c->off, KEYARG(e), why);
        else
            snprintf(err, errlen, "%s: offset %d: %s", path, CHUNK_HEADER_SIZE, why);
    } else {
        /* Direct: the bytes are in place already, checked where they are. */
        int rc = bloomery_loader_chunk_placed(l, i, direct ? NULL : raw, c->raw_len, c->checksum,
                                              why, sizeof(why));
        if (rc != BLOOMERY_OK) {
            snprintf(err, errlen, "%s: offset %zu: " KEYFMT ": chunk %" PRIu64 ": %s", index_path,
                     c->off, KEYARG(e), i, why);
            ok = false;
        }
    }
    datadir_chunk_buf_free(&own);
    return ok;
}

bool datadir_finish_entry(const char *index_path, const snap_entry *e, bloomery_loader *l,
                          bloomery_object *out, char *err, size_t errlen)
{
    if (bloomery_loader_finish(l, out) == BLOOMERY_OK)
        return true;
    snprintf(err, errlen, "%s: offset %zu: " KEYFMT ": %s", index_path, e->off, KEYARG(e),
             bloomery_loader_error(l));
    return false;
}

/* ---- log ---- */

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* The first LSN the scan must read: the start, or an earlier `from`. */
static uint64_t log_from(const datadir_log *lg)
{
    return lg->from && lg->from < lg->start ? lg->from : lg->start;
}

datadir_log_status datadir_log_file(datadir_log *lg, const char *path, uint64_t name_lsn,
                                    const uint8_t *buf, size_t len, bool newest, size_t *torn_off,
                                    char *err, size_t errlen)
{
    char why[256];
    uint64_t first;
    if (!wal_header_decode(buf, len, &first, why, sizeof(why))) {
        /* Created but its header never complete: a crash while creating
         * it. (Even the file LAST names: re-creating the newest file at the
         * same LSN truncates it first.) */
        if (newest && (len < WAL_HEADER_SIZE || all_zero(buf, len))) {
            *torn_off = 0;
            snprintf(err, errlen, "no complete file header (a crash while the file was created)");
            return DATADIR_LOG_TORN;
        }
        snprintf(err, errlen, "%s: offset 0: %s", path, why);
        return DATADIR_LOG_BAD;
    }
    if (first != name_lsn) {
        snprintf(err, errlen, "%s: offset 16: first LSN %" PRIu64 " does not match the file name",
                 path, first);
        return DATADIR_LOG_BAD;
    }
    if (lg->expect && first != lg->expect) {
        snprintf(err, errlen,
                 "%s: offset 16: starts at LSN %" PRIu64 " but LSN %" PRIu64
                 " was expected (a log file is missing)",
                 path, first, lg->expect);
        return DATADIR_LOG_BAD;
    }
    uint64_t need = log_from(lg);
    if (lg->expect == 0 && need && first > need) {
        snprintf(err, errlen,
                 "%s: offset 16: the log starts at LSN %" PRIu64 " but the %s needs "
                 "records from LSN %" PRIu64 " (a log file is missing)",
                 path, first, lg->have_snapshot ? "snapshot" : "empty data set", need);
        return DATADIR_LOG_BAD;
    }
    lg->expect = first;
    size_t off = WAL_HEADER_SIZE;
    for (;;) {
        wal_record rec;
        wal_status st = wal_record_next(buf, len, off, &rec, why, sizeof(why));
        if (st == WAL_REC_END)
            break;
        if (st == WAL_REC_TORN && newest) {
            *torn_off = off;
            snprintf(err, errlen, "%s", why);
            return DATADIR_LOG_TORN;
        }
        if (st != WAL_REC_OK) {
            snprintf(err, errlen, "%s: offset %zu: %s", path, off, why);
            return DATADIR_LOG_BAD;
        }
        if (rec.lsn != lg->expect) {
            snprintf(err, errlen,
                     "%s: offset %zu: record LSN %" PRIu64 " where %" PRIu64 " was expected", path,
                     off, rec.lsn, lg->expect);
            return DATADIR_LOG_BAD;
        }
        /* The writer updates LAST before the first record of a new file. */
        if (lg->have_last && name_lsn > lg->last) {
            snprintf(err, errlen,
                     "%s: offset %zu: a record in a log file newer than "
                     "%016" PRIx64 ".wal, the newest one LAST names",
                     path, off, lg->last);
            return DATADIR_LOG_BAD;
        }
        wal_op op;
        if (!wal_op_parse(rec.type, rec.payload, rec.len, &op, why, sizeof(why))) {
            snprintf(err, errlen, "%s: offset %zu: %s", path, off, why);
            return DATADIR_LOG_BAD;
        }
        if (rec.lsn >= lg->start) {
            if (lg->fn)
                lg->fn(lg->ctx, &rec, &op);
            lg->applied++;
        } else {
            if (lg->below && rec.lsn >= need)
                lg->below(lg->ctx, &rec, &op);
            lg->passed++;
        }
        lg->expect++;
        off += rec.size;
    }
    return DATADIR_LOG_OK;
}

static int fsync_dir_of(const char *path)
{
    char dir[DATADIR_PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == dir)
        slash[1] = '\0';
    else
        *slash = '\0';
    return datadir_sync_dir(dir) ? 0 : -1;
}

bool datadir_keep_torn(const char *path, const uint8_t *buf, size_t len, size_t off, char *kept,
                       size_t keptlen, char *err, size_t errlen)
{
    kept[0] = '\0';
    if (len > off) {
        /* The copy is durable before the log loses the bytes: a crash in
         * between leaves both, and the next start copies them again. */
        snprintf(kept, keptlen, "%s.torn-%zu", path, off);
        int fd = datadir_create(kept);
        size_t done = 0;
        while (fd >= 0 && done < len - off) {
            ssize_t w = write(fd, buf + off + done, len - off - done);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break;
            done += (size_t)w;
        }
        bool ok = fd >= 0 && done == len - off && fsync(fd) == 0;
        int e = errno;
        if (fd >= 0)
            close(fd);
        if (!ok || fsync_dir_of(kept) != 0) {
            snprintf(err, errlen, "%s: offset %zu: can't keep the torn tail aside in %s: %s", path,
                     off, kept, datadir_strerror(ok ? errno : e));
            kept[0] = '\0';
            return false;
        }
    }
    if (off == 0) {
        if (!datadir_unlink(path) || fsync_dir_of(path) != 0) {
            snprintf(err, errlen, "%s: offset 0: can't remove the torn file: %s", path,
                     strerror(errno));
            return false;
        }
        return true;
    }
    int fd = datadir_open_write(path, 0);
    if (fd < 0 || ftruncate(fd, (off_t)off) != 0 || fdatasync(fd) != 0) {
        snprintf(err, errlen, "%s: offset %zu: can't truncate the torn tail: %s", path, off,
                 datadir_strerror(errno));
        if (fd >= 0)
            close(fd);
        return false;
    }
    close(fd);
    return true;
}

static bool has(const uint64_t *v, size_t n, uint64_t x)
{
    return n && bsearch(&x, v, n, sizeof(uint64_t), cmp_u64) != NULL;
}

/* One file: map it, check it, keep or report a torn tail. */
static bool scan_file(datadir_log *lg, const char *path, uint64_t name_lsn, bool newest, char *err,
                      size_t errlen)
{
    int fd = datadir_open_read(path);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: offset 0: can't open: %s", path, datadir_strerror(errno));
        if (fd >= 0)
            close(fd);
        return false;
    }
    size_t len = (size_t)st.st_size;
    const uint8_t *buf = NULL;
    if (len > 0) {
        void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            snprintf(err, errlen, "%s: offset 0: can't map: %s", path, strerror(errno));
            close(fd);
            return false;
        }
        buf = m;
    }
    close(fd);
    lg->files++;
    size_t torn_off = 0;
    datadir_log_status st2 =
        datadir_log_file(lg, path, name_lsn, buf, len, newest, &torn_off, err, errlen);
    bool ok = st2 != DATADIR_LOG_BAD;
    if (st2 == DATADIR_LOG_TORN) {
        lg->torn = true;
        snprintf(lg->torn_file, sizeof(lg->torn_file), "%s", path);
        snprintf(lg->torn_why, sizeof(lg->torn_why), "%s", err);
        lg->torn_off = torn_off;
        lg->torn_len = len - torn_off;
        if (lg->keep_torn)
            ok = datadir_keep_torn(path, buf, len, torn_off, lg->torn_kept, sizeof(lg->torn_kept),
                                   err, errlen);
    }
    if (buf)
        munmap((void *)buf, len);
    return ok;
}

bool datadir_scan_log(const char *dir, datadir_log *lg, char *err, size_t errlen)
{
    char ldir[4200], path[DATADIR_PATH_MAX];
    snprintf(ldir, sizeof(ldir), "%.4096s/log", dir);
    lg->expect = 0;
    lg->applied = lg->passed = 0;
    lg->files = 0;
    lg->torn = false;
    lg->torn_kept[0] = '\0';
    int lr = wal_last_read(ldir, &lg->last, err, errlen);
    if (lr < 0)
        return false;
    lg->have_last = lr > 0;
    uint64_t *files;
    size_t n = datadir_list(ldir, ".wal", &files);
    /* The newest log file is gone (or all of them): records after the
     * snapshot's start were in it. A file below the start held nothing
     * the snapshot lacks (a snapshot deletes those files). */
    if (lg->have_last && lg->last >= lg->start && !has(files, n, lg->last)) {
        snprintf(err, errlen,
                 "%s/" WAL_LAST_NAME ": offset 16: log file %016" PRIx64
                 ".wal named by LAST is missing",
                 ldir, lg->last);
        free(files);
        return false;
    }
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        /* Wholly before what is needed: the next file starts at or below it. */
        if (i + 1 < n && files[i + 1] <= log_from(lg))
            continue;
        snprintf(path, sizeof(path), "%s/%016" PRIx64 ".wal", ldir, files[i]);
        ok = scan_file(lg, path, files[i], i + 1 == n, err, errlen);
    }
    free(files);
    lg->next_lsn = lg->expect > lg->start ? lg->expect : lg->start;
    if (lg->next_lsn == 0)
        lg->next_lsn = 1;
    return ok;
}

static bool torn_name(const char *name)
{
    uint64_t v;
    char head[21];
    if (strlen(name) <= 26 || strncmp(name + 16, ".wal.torn-", 10) != 0)
        return false;
    snprintf(head, sizeof(head), "%.16s.wal", name);
    if (!datadir_parse_name(head, ".wal", &v))
        return false;
    for (const char *p = name + 26; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    return true;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

size_t datadir_torn_files(const char *dir, char ***out)
{
    char ldir[4200];
    snprintf(ldir, sizeof(ldir), "%.4096s/log", dir);
    *out = NULL;
    DIR *d = datadir_opendir(ldir);
    if (d == NULL)
        return 0;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!torn_name(de->d_name))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            char **p = realloc(*out, cap * sizeof(char *));
            if (p == NULL)
                break;
            *out = p;
        }
        if (((*out)[n] = strdup(de->d_name)) != NULL)
            n++;
    }
    closedir(d);
    if (n)
        qsort(*out, n, sizeof(char *), cmp_str);
    return n;
}

/* bloomery check-data: verify a bloomeryd data directory offline.
 *
 * The newest snapshot index (checksum, structure), every key's image
 * header and every chunk it names (inline frame or chunk file: header,
 * decompression within the declared size, content hash, serial.h's chunk
 * checksum through the library's loader), and every log file (header,
 * record checksums, payloads, LSNs following each other from the
 * snapshot's start). Each problem is reported as "file: offset N: reason".
 * Exit 0 when clean, 1 when damaged. --fix truncates a torn tail of the
 * newest log file (what bloomeryd does itself at start) and nothing else.
 * Loading a key's chunks builds the filter, so memory use is that of the
 * largest filter. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bloomery/bloomery.h"
#include "chunk_format.h"
#include "cli.h"
#include "snapshot_index.h"
#include "wal_format.h"

static unsigned problems;

static void problem(const char *path, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void problem(const char *path, size_t off, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s: offset %zu: ", path, off);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    problems++;
}

static bool read_file(const char *path, uint8_t **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return false;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return false;
    }
    uint8_t *buf = malloc(st.st_size ? (size_t)st.st_size : 1);
    size_t got = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (buf == NULL || got != (size_t)st.st_size) {
        free(buf);
        return false;
    }
    *out = buf;
    *len = got;
    return true;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* "<16 hex><suffix>" names in dir, sorted. */
static size_t list(const char *dir, const char *suffix, uint64_t **out) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char tail[32];
        uint64_t v;
        if (strlen(de->d_name) != 16 + strlen(suffix) ||
            sscanf(de->d_name, "%16" SCNx64 "%31s", &v, tail) != 2 || strcmp(tail, suffix) != 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            uint64_t *p = realloc(*out, cap * sizeof(uint64_t));
            if (p == NULL) break;
            *out = p;
        }
        (*out)[n++] = v;
    }
    closedir(d);
    if (n) qsort(*out, n, sizeof(uint64_t), cmp_u64);
    return n;
}

static const bloomery_type kind_type[] = {0, BLOOMERY_TYPE_SCALABLE, BLOOMERY_TYPE_COUNTING,
                                          BLOOMERY_TYPE_HLL};

static uint8_t *chunk_bytes(const char *dir, const char *ipath, const snap_chunk *c) {
    char why[256];
    if (c->where == SNAP_CHUNK_INLINE) {
        uint8_t *raw = malloc(c->raw_len);
        if (raw && chunk_frame_decode(c->frame, c->flen, c->raw_len, c->hash, raw, why, sizeof(why)))
            return raw;
        free(raw);
        problem(ipath, c->off, "inline chunk: %s", raw ? why : "out of memory");
        return NULL;
    }
    char hex[33], path[4200];
    chunk_hash_hex(c->hash, hex);
    snprintf(path, sizeof(path), "%s/chunks/%s.zst", dir, hex);
    uint8_t *buf, *raw;
    size_t len, off;
    uint32_t rl;
    if (!read_file(path, &buf, &len)) {
        problem(path, 0, "can't read (%s); named by %s at offset %zu", strerror(errno), ipath,
                c->off);
        return NULL;
    }
    bool ok = chunk_file_decode(buf, len, &c->hash, &raw, &rl, why, sizeof(why), &off);
    free(buf);
    if (!ok) {
        problem(path, off, "%s", why);
        return NULL;
    }
    if (rl != c->raw_len) {
        problem(path, 12, "%u bytes where the index says %u", rl, c->raw_len);
        free(raw);
        return NULL;
    }
    return raw;
}

static void check_entry(const char *dir, const char *ipath, const snap_entry *e) {
    bloomery_loader *l = NULL;
    size_t used;
    int rc = bloomery_loader_open(&l, e->header, e->hlen, 0, &used);
    if (rc != BLOOMERY_OK || used != e->hlen || bloomery_loader_type(l) != kind_type[e->kind] ||
        bloomery_loader_nchunks(l) != e->nchunks) {
        problem(ipath, e->off, "key '%.*s': %s", (int)(e->klen < 200 ? e->klen : 200), e->key,
                rc != BLOOMERY_OK ? bloomery_loader_error(l) : "image header does not match the entry");
        bloomery_loader_free(l);
        return;
    }
    bool ok = true;
    for (uint64_t i = 0; i < e->nchunks; i++) {
        const snap_chunk *c = &e->chunks[i];
        if (c->raw_len != bloomery_loader_chunk_len(l, i)) {
            problem(ipath, c->off, "chunk %" PRIu64 " has the wrong length", i);
            ok = false;
            continue;
        }
        uint8_t *raw = chunk_bytes(dir, ipath, c);
        if (raw == NULL) {
            ok = false;
            continue;
        }
        if (bloomery_loader_chunk(l, i, raw, c->raw_len, c->checksum) != BLOOMERY_OK) {
            problem(ipath, c->off, "chunk %" PRIu64 ": %s", i, bloomery_loader_error(l));
            ok = false;
        }
        free(raw);
    }
    bloomery_object obj = {0};
    if (ok) {
        if (bloomery_loader_finish(l, &obj) == BLOOMERY_OK) bloomery_object_free(&obj);
        else problem(ipath, e->off, "key: %s", bloomery_loader_error(l));
    }
    bloomery_loader_free(l);
}

/* Returns the snapshot's start LSN (1 without a snapshot). */
static uint64_t check_snapshot(const char *dir, bool *found) {
    char sdir[4200], path[4300];
    snprintf(sdir, sizeof(sdir), "%s/snapshots", dir);
    uint64_t *seqs;
    size_t n = list(sdir, ".index", &seqs);
    *found = n > 0;
    if (n == 0) {
        printf("no snapshot\n");
        free(seqs);
        return 1;
    }
    snprintf(path, sizeof(path), "%s/%016" PRIx64 ".index", sdir, seqs[n - 1]);
    free(seqs);
    uint8_t *buf;
    size_t len, off;
    if (!read_file(path, &buf, &len)) {
        problem(path, 0, "can't read: %s", strerror(errno));
        return 1;
    }
    snap_index ix;
    char why[256];
    if (!snap_index_parse(buf, len, &ix, why, sizeof(why), &off)) {
        problem(path, off, "%s", why);
        free(buf);
        return 1;
    }
    unsigned before = problems;
    for (uint64_t k = 0; k < ix.nkeys; k++) check_entry(dir, path, &ix.entries[k]);
    uint64_t start = ix.start_lsn;
    printf("snapshot %s: %" PRIu64 " keys, %" PRIu64 " chunks, log from LSN %" PRIu64 ": %s\n",
           path, ix.nkeys, ix.nchunks, start, problems == before ? "ok" : "DAMAGED");
    snap_index_free(&ix);
    free(buf);
    return start;
}

static void check_logs(const char *dir, uint64_t start, bool have_snapshot, bool fix) {
    char ldir[4200], path[4300];
    snprintf(ldir, sizeof(ldir), "%s/log", dir);
    uint64_t *files;
    size_t n = list(ldir, ".wal", &files);
    uint64_t expect = 0, records = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n && files[i + 1] <= start) continue;   /* below the snapshot */
        bool last = i + 1 == n;
        snprintf(path, sizeof(path), "%s/%016" PRIx64 ".wal", ldir, files[i]);
        uint8_t *buf;
        size_t len;
        if (!read_file(path, &buf, &len)) {
            problem(path, 0, "can't read: %s", strerror(errno));
            continue;
        }
        char why[256];
        uint64_t first;
        if (!wal_header_decode(buf, len, &first, why, sizeof(why))) {
            problem(path, 0, "%s", why);
            free(buf);
            break;
        }
        if (first != files[i]) problem(path, 16, "first LSN %" PRIu64 " does not match the name", first);
        if (expect && first != expect)
            problem(path, 16, "starts at LSN %" PRIu64 ", LSN %" PRIu64 " expected (a file is missing)",
                    first, expect);
        if (!expect && first > start)
            problem(path, 16, "starts at LSN %" PRIu64 " but the %s needs LSN %" PRIu64, first,
                    have_snapshot ? "snapshot" : "empty data set", start);
        expect = first;
        size_t off = WAL_HEADER_SIZE;
        for (;;) {
            wal_record rec;
            wal_status st = wal_record_next(buf, len, off, &rec, why, sizeof(why));
            if (st == WAL_REC_END) break;
            if (st == WAL_REC_TORN && last) {
                if (fix) {
                    if (truncate(path, (off_t)off) == 0) {
                        printf("%s: offset %zu: torn tail of %zu bytes (%s): truncated\n", path, off,
                               len - off, why);
                    } else {
                        problem(path, off, "torn tail, truncation failed: %s", strerror(errno));
                    }
                } else {
                    problem(path, off, "torn tail of %zu bytes (%s); bloomeryd drops it at start, "
                            "--fix truncates it", len - off, why);
                }
                break;
            }
            if (st != WAL_REC_OK) {
                problem(path, off, "%s", why);
                break;
            }
            wal_op op;
            if (rec.lsn != expect) {
                problem(path, off, "record LSN %" PRIu64 " where %" PRIu64 " was expected", rec.lsn,
                        expect);
                break;
            }
            if (!wal_op_parse(rec.type, rec.payload, rec.len, &op, why, sizeof(why))) {
                problem(path, off, "%s", why);
                break;
            }
            expect++;
            records++;
            off += rec.size;
        }
        free(buf);
    }
    free(files);
    printf("log: %" PRIu64 " records checked%s\n", records,
           expect ? "" : " (no log file after the snapshot)");
}

int cmd_check_data(int argc, char **argv) {
    bool fix = false;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--fix") == 0) fix = true;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: bloomery check-data DIR [--fix]\n\n"
                   "Verifies a bloomeryd data directory: the newest snapshot, every chunk it\n"
                   "names and the log. Each problem is printed as 'file: offset N: reason'.\n"
                   "--fix truncates a torn tail of the newest log file, nothing else.\n"
                   "Exit status 0 when clean, 1 when damaged.\n");
            return CLI_OK;
        } else if (dir == NULL) dir = argv[i];
        else {
            fprintf(stderr, "bloomery check-data: unexpected argument '%s'\n", argv[i]);
            return CLI_USAGE;
        }
    }
    if (dir == NULL) {
        fprintf(stderr, "usage: bloomery check-data DIR [--fix]\n");
        return CLI_USAGE;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "bloomery check-data: %s is not a directory\n", dir);
        return CLI_ERROR;
    }
    bool found;
    uint64_t start = check_snapshot(dir, &found);
    check_logs(dir, start, found, fix);
    printf("%s: %s\n", dir, problems ? "DAMAGED" : "ok");
    return problems ? CLI_ERROR : CLI_OK;
}

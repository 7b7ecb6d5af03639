/* bloomery check-data: verify a bloomeryd data directory offline.
 *
 * The same checks as bloomeryd's start-up, through the same code
 * (src/persist/datadir.c): the newest snapshot index (checksum, structure),
 * every key's image header and every chunk it names (inline frame or chunk
 * file: header, decompression within the declared size, content hash,
 * serial.h's chunk checksum through the library's loader), and the log
 * (DIR/log/LAST, every file's header, record checksums, payloads, LSNs
 * following each other from the snapshot's start). Each problem is reported
 * as "file: offset N: reason", the message bloomeryd would stop with. Exit 0
 * when clean, 1 when damaged; a torn tail bloomeryd would cut off counts as
 * damage until it is handled. --fix does what bloomeryd does to a torn tail
 * at start (keeps it aside in <file>.torn-<offset> and cuts it off) and
 * nothing else. Loading a key's chunks builds the filter, so memory use is
 * that of the largest filter.
 *
 * Who may change the directory is checked first, with the server's rule
 * (datadir_fs.h): a directory or subdirectory that group or others may
 * write, or that its owner does not own throughout, is a problem (bloomeryd
 * refuses to start on it). The server must run as the directory's owner:
 * when that is not the user running the check, a warning says so. Files
 * inside that are links, not regular, owned by another user or writable by
 * others are warnings.
 *
 * Exact filters' store is read through and checked against their windows
 * (check_exact.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bloomery/bloomery.h"
#include "check_exact.h"
#include "cli.h"
#include "datadir.h"
#include "datadir_fs.h"

static unsigned problems;

/* msg is already "file: offset N: reason". */
static void problem(const char *msg)
{
    printf("%s\n", msg);
    problems++;
}

static void warning(void *ctx, const char *msg)
{
    (void)ctx;
    printf("warning: %s\n", msg);
}

/* The server's start-up rule, for the user that owns the directory. */
static void check_access(const char *dir, const struct stat *st)
{
    char err[9000];
    if (st->st_uid != geteuid())
        printf("warning: data directory \"%s\" is owned by uid %u, not by uid %u who runs this "
               "check: bloomeryd must run as uid %u to use it\n",
               dir, (unsigned)st->st_uid, (unsigned)geteuid(), (unsigned)st->st_uid);
    if (!datadir_check_access(dir, st->st_uid, err, sizeof(err)))
        problem(err);
    datadir_check_files(dir, st->st_uid, warning, NULL);
}

/* The first LSN the snapshot needs from the log (restores in progress). */
static uint64_t log_from;

static void check_entry(const char *dir, const char *ipath, const snap_entry *e)
{
    /* A restore in progress has no image: its records are in the log, which
     * check_logs reads from the first of them. */
    if (e->kind == SNAP_KIND_RESTORE)
        return;
    char err[1024];
    bloomery_loader *l = datadir_open_entry(ipath, e, err, sizeof(err));
    if (l == NULL) {
        problem(err);
        return;
    }
    bool ok = true;
    datadir_chunk_buf buf = {0};
    for (uint64_t i = 0; i < e->nchunks; i++)
        if (!datadir_load_chunk(dir, ipath, e, i, l, &buf, err, sizeof(err))) {
            problem(err);
            ok = false;
        }
    datadir_chunk_buf_free(&buf);
    bloomery_object obj = {0};
    if (ok) {
        if (!datadir_finish_entry(ipath, e, l, &obj, err, sizeof(err)))
            problem(err);
        else if (e->exact)
            check_exact_keep(e, &obj);
        else
            bloomery_object_free(&obj);
    }
    bloomery_loader_free(l);
}

/* The log's start: the snapshot's (1 without a snapshot, 0 when the index
 * can't be read). */
static uint64_t check_snapshot(const char *dir, bool *found)
{
    datadir_snapshot s;
    char err[1024];
    int rc = datadir_snapshot_open(dir, &s, err, sizeof(err));
    *found = rc != 0;
    if (rc == 0) {
        printf("no snapshot\n");
        return 1;
    }
    if (rc < 0) {
        problem(err);
        return 0;
    }
    unsigned before = problems;
    for (uint64_t k = 0; k < s.ix.nkeys; k++)
        check_entry(dir, s.path, &s.ix.entries[k]);
    uint64_t start = s.ix.start_lsn;
    log_from = snap_index_log_from(&s.ix);
    printf("snapshot %s: %" PRIu64 " keys, %" PRIu64 " chunks, log from LSN %" PRIu64 ": %s\n",
           s.path, s.ix.nkeys, s.ix.nchunks, start, problems == before ? "ok" : "DAMAGED");
    datadir_snapshot_close(&s);
    return start;
}

static void log_record(void *ctx, const wal_record *rec, const wal_op *op)
{
    (void)ctx, (void)rec;
    check_exact_record(op);
}

static void check_logs(const char *dir, uint64_t start, bool have_snapshot, bool fix)
{
    datadir_log lg = {.start = start,
                      .from = log_from,
                      .have_snapshot = have_snapshot,
                      .keep_torn = fix,
                      .fn = log_record};
    char err[1024];
    bool ok = datadir_scan_log(dir, &lg, err, sizeof(err));
    if (lg.torn) {
        char aside[DATADIR_PATH_MAX + 32];
        snprintf(aside, sizeof(aside), "%s.torn-%zu", lg.torn_file, lg.torn_off);
        if (fix && lg.torn_kept[0])
            printf("%s: offset %zu: torn tail of %zu bytes at offset %zu (%s): kept aside in %s, "
                   "cut off the log\n",
                   lg.torn_file, lg.torn_off, lg.torn_len, lg.torn_off, lg.torn_why, lg.torn_kept);
        else if (fix && ok)
            printf("%s: offset %zu: torn tail of 0 bytes (%s): removed the empty file\n",
                   lg.torn_file, lg.torn_off, lg.torn_why);
        else if (!fix)
            printf("%s: offset %zu: torn tail of %zu bytes at offset %zu (%s); the server keeps "
                   "it aside in %s and cuts it off at start, --fix does the same\n",
                   lg.torn_file, lg.torn_off, lg.torn_len, lg.torn_off, lg.torn_why, aside);
        if (!fix)
            problems++;
    }
    if (!ok)
        problem(err);
    if (lg.have_last)
        printf("log: LAST names %016" PRIx64 ".wal\n", lg.last);
    else if (lg.files)
        printf("log: no LAST file (written by an older version; the next log file creates it)\n");
    printf("log: %" PRIu64 " records checked in %u file%s%s\n", lg.applied + lg.passed, lg.files,
           lg.files == 1 ? "" : "s", ok && !lg.expect ? " (no log file after the snapshot)" : "");
    char **torn;
    size_t n = datadir_torn_files(dir, &torn);
    for (size_t i = 0; i < n; i++) {
        char path[DATADIR_PATH_MAX + 300];
        struct stat st;
        snprintf(path, sizeof(path), "%s/log/%s", dir, torn[i]);
        long long size = lstat(path, &st) == 0 ? (long long)st.st_size : -1;
        printf("note: %s: a torn tail of %lld bytes kept aside earlier (not part of the log; "
               "delete it once looked at)\n",
               path, size);
        free(torn[i]);
    }
    free(torn);
}

int cmd_check_data(int argc, char **argv)
{
    bool fix = false;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--fix") == 0)
            fix = true;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: bloomery check-data DIR [--fix]\n\n"
                   "Verifies a bloomeryd data directory with the server's own start-up checks:\n"
                   "the newest snapshot, every chunk it names and the log. Each problem is\n"
                   "printed as 'file: offset N: reason'. A torn tail at the end of the newest\n"
                   "log file counts as damage; --fix keeps it aside in <file>.torn-<offset>\n"
                   "and cuts it off (what bloomeryd does at start), nothing else. A directory\n"
                   "that group or others may write, or not owned by its owner throughout,\n"
                   "is a problem too (bloomeryd refuses it); links inside are warnings.\n"
                   "Exit status 0 when clean, 1 when damaged.\n");
            return CLI_OK;
        } else if (dir == NULL)
            dir = argv[i];
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
    datadir_set_root(dir);
    check_access(dir, &st);
    bool found;
    uint64_t start = check_snapshot(dir, &found);
    check_logs(dir, start, found, fix);
    check_exact_run(dir, problem);
    printf("%s: %s\n", dir, problems ? "DAMAGED" : "ok");
    return problems ? CLI_ERROR : CLI_OK;
}

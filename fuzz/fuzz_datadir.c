// fuzz-sources: src/persist/datadir.c src/persist/wal_last.c src/persist/wal_format.c
// fuzz-sources: src/persist/chunk_format.c src/persist/snapshot_index.c src/persist/datadir_fs.c
/* Fuzz target: the data directory reader's parsers. The first 8 bytes
 * choose the scan's start LSN, the file's name and whether it is the
 * newest; the rest is one log file for datadir_log_file (the rules bloomeryd
 * and check-data share) and a LAST file for wal_last_decode. Whatever the
 * bytes, the reader must classify the file as good, torn or damaged without
 * reading out of bounds, and its counts must add up. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/persist/datadir.h"
#include "../src/persist/wal_last.h"

static uint64_t records;

static void on_record(void *ctx, const wal_record *rec, const wal_op *op)
{
    (void)ctx;
    if (rec->type != op->type)
        abort();
    records++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint64_t start = data[0] & 3; /* 0 (unknown), 1, 2, 3 */
    uint64_t name = 1 + (data[1] & 3);
    bool newest = data[2] & 1;
    bool have_last = data[2] & 2;
    uint64_t last = data[3] & 7;
    const uint8_t *buf = data + 8;
    size_t len = size - 8;

    records = 0;
    datadir_log lg = {.start = start, .fn = on_record, .have_last = have_last, .last = last};
    char err[1024];
    size_t torn = 0;
    datadir_log_status st =
        datadir_log_file(&lg, "F", name, buf, len, newest, &torn, err, sizeof(err));
    if (records != lg.applied)
        abort();
    if (st == DATADIR_LOG_TORN && (!newest || torn > len))
        abort();
    if (st == DATADIR_LOG_BAD && strncmp(err, "F: offset ", 10) != 0)
        abort();

    uint64_t v;
    size_t off;
    if (wal_last_decode(buf, len, &v, err, sizeof(err), &off)) {
        uint8_t again[WAL_LAST_SIZE];
        wal_last_encode(again, v);
        if (len != WAL_LAST_SIZE || memcmp(again, buf, len) != 0)
            abort();
    } else if (off > len) {
        abort();
    }
    return 0;
}

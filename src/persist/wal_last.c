/* DIR/log/LAST: see wal_last.h and docs/PERSISTENCE.md. */
#include "wal_last.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "datadir_fs.h"
#include "le.h"

void wal_last_encode(uint8_t out[WAL_LAST_SIZE], uint64_t first_lsn)
{
    memcpy(out, WAL_LAST_MAGIC, 8);
    le_store(out + 8, WAL_LAST_VERSION, 2);
    le_store(out + 10, 0, 2);
    le_store(out + 12, WAL_LAST_SIZE, 4);
    le_store(out + 16, first_lsn, 8);
    le_store(out + 24, XXH3_64bits(out, 24), 8);
}

bool wal_last_decode(const uint8_t *buf, size_t len, uint64_t *first_lsn, char *err, size_t errlen,
                     size_t *err_off)
{
    const char *why = NULL;
    size_t off = 0;
    if (len != WAL_LAST_SIZE) {
        snprintf(err, errlen, "%zu bytes, not %d", len, WAL_LAST_SIZE);
        *err_off = len < WAL_LAST_SIZE ? len : WAL_LAST_SIZE;
        return false;
    }
    if (memcmp(buf, WAL_LAST_MAGIC, 8) != 0) {
        why = "bad magic: not a bloomery LAST file";
    } else if (le_load(buf + 24, 8) != XXH3_64bits(buf, 24)) {
        why = "checksum mismatch";
        off = 24;
    } else if (le_load(buf + 8, 2) != WAL_LAST_VERSION) {
        why = "unsupported version";
        off = 8;
    } else if (le_load(buf + 10, 2) != 0 || le_load(buf + 12, 4) != WAL_LAST_SIZE) {
        why = "unexpected header fields";
        off = 10;
    } else if (le_load(buf + 16, 8) == 0) {
        why = "first LSN is 0";
        off = 16;
    }
    if (why) {
        snprintf(err, errlen, "%s", why);
        *err_off = off;
        return false;
    }
    *first_lsn = le_load(buf + 16, 8);
    return true;
}

bool wal_last_write(const char *logdir, uint64_t first_lsn, char *err, size_t errlen)
{
    char tmp[4300], path[4300];
    snprintf(tmp, sizeof(tmp), "%s/" WAL_LAST_NAME ".tmp", logdir);
    snprintf(path, sizeof(path), "%s/" WAL_LAST_NAME, logdir);
    uint8_t b[WAL_LAST_SIZE];
    wal_last_encode(b, first_lsn);
    int fd = datadir_create(tmp);
    bool ok = fd >= 0 && write(fd, b, sizeof(b)) == (ssize_t)sizeof(b) && fdatasync(fd) == 0;
    int e = errno;
    if (fd >= 0 && close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    /* The rename is atomic: LAST is the old or the new content, never torn. */
    if (ok && (!datadir_rename(tmp, path) || !datadir_sync_dir(logdir))) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        snprintf(err, errlen, "can't write %s: %s", path, datadir_strerror(e));
        datadir_unlink(tmp);
    }
    return ok;
}

int wal_last_read(const char *logdir, uint64_t *first_lsn, char *err, size_t errlen)
{
    char path[4300];
    snprintf(path, sizeof(path), "%s/" WAL_LAST_NAME, logdir);
    int fd = datadir_open_read(path);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "%s: offset 0: can't open: %s", path, datadir_strerror(errno));
        return -1;
    }
    /* One byte more than the format: a longer file is damage too. */
    uint8_t b[WAL_LAST_SIZE + 1];
    size_t got = 0;
    while (got < sizeof(b)) {
        ssize_t n = read(fd, b + got, sizeof(b) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errlen, "%s: offset %zu: can't read: %s", path, got, strerror(errno));
            close(fd);
            return -1;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    char why[128];
    size_t off;
    if (!wal_last_decode(b, got, first_lsn, why, sizeof(why), &off)) {
        snprintf(err, errlen, "%s: offset %zu: %s", path, off, why);
        return -1;
    }
    return 1;
}

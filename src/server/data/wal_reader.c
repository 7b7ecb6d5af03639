/* Following the log files from an LSN, as the log thread writes them: what
 * a master sends its replicas. A replica's partial resync and the tail of
 * a full one are served from DIR/log, so the log a master keeps (every
 * record since its last snapshot) is its replication backlog.
 *
 * The reader holds the file it reads open, so a snapshot deleting it
 * meanwhile does not disturb it; a file it has not reached yet and that
 * was deleted means the replica fell behind the log kept (it then needs a
 * full resync). A file is finished once the next one exists: the log
 * thread creates the next file only after writing and syncing the last
 * bytes of the previous one, so the reader reads the old file to its end
 * once more before it moves on.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datadir.h"
#include "datadir_fs.h"
#include "persist.h"

#define READ_STEP (1u << 20)

struct wal_reader {
    char logdir[4200];
    int fd;
    uint64_t next; /* LSN of the next record to hand out */
    pbuf buf;      /* bytes read from fd, not yet handed out: [pos, len) */
    size_t pos;
};

static bool fill(wal_reader *r, size_t *got)
{
    *got = 0;
    if (r->pos > 0 && r->pos == r->buf.len) {
        r->buf.len = r->pos = 0;
    } else if (r->pos > READ_STEP) {
        memmove(r->buf.p, r->buf.p + r->pos, r->buf.len - r->pos);
        r->buf.len -= r->pos;
        r->pos = 0;
    }
    if (!pbuf_reserve(&r->buf, READ_STEP))
        return false;
    ssize_t n;
    do
        n = read(r->fd, r->buf.p + r->buf.len, READ_STEP);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return false;
    r->buf.len += (size_t)n;
    *got = (size_t)n;
    return true;
}

/* Open DIR/log/<first>.wal and check its header. */
static int open_file(const char *logdir, uint64_t first, char *err, size_t errlen)
{
    char path[4300];
    snprintf(path, sizeof(path), "%s/%016" PRIx64 ".wal", logdir, first);
    int fd = datadir_open_read(path);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, datadir_strerror(errno));
        return -1;
    }
    uint8_t h[WAL_HEADER_SIZE];
    uint64_t lsn;
    if (read(fd, h, sizeof(h)) != (ssize_t)sizeof(h) ||
        !wal_header_decode(h, sizeof(h), &lsn, err, errlen) || lsn != first) {
        if (!err[0])
            snprintf(err, errlen, "%s: bad header", path);
        close(fd);
        return -1;
    }
    return fd;
}

/* Bytes of the record at buf[pos]: 0 when not all of it is there yet. */
static size_t whole_record(const wal_reader *r)
{
    size_t avail = r->buf.len - r->pos;
    if (avail < WAL_PREFIX)
        return 0;
    uint64_t plen = le_load(r->buf.p + r->pos, 4);
    size_t size = wal_record_size((size_t)plen);
    return plen <= WAL_MAX_PAYLOAD && avail >= size ? size : 0;
}

wal_reader *wal_reader_open(const char *dir, uint64_t lsn, char *err, size_t errlen)
{
    err[0] = '\0';
    wal_reader *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(r->logdir, sizeof(r->logdir), "%s/log", dir);
    r->fd = -1;
    uint64_t *files;
    size_t n = datadir_list(r->logdir, ".wal", &files);
    /* The file holding lsn: the last one starting at or below it. */
    size_t i = n;
    while (i > 0 && files[i - 1] > lsn)
        i--;
    if (i == 0) {
        snprintf(err, errlen, "LSN %" PRIu64 " is older than the log kept", lsn);
        free(files);
        free(r);
        return NULL;
    }
    uint64_t first = files[i - 1];
    free(files);
    r->fd = open_file(r->logdir, first, err, errlen);
    if (r->fd < 0) {
        free(r);
        return NULL;
    }
    /* Skip to lsn: records before it in the file, as far as written. */
    r->next = first;
    while (r->next < lsn) {
        size_t size = whole_record(r), got;
        if (size) {
            r->pos += size;
            r->next++;
            continue;
        }
        if (!fill(r, &got) || got == 0) {
            snprintf(err, errlen, "LSN %" PRIu64 " is not in the log yet", lsn);
            wal_reader_close(r);
            return NULL;
        }
    }
    return r;
}

void wal_reader_close(wal_reader *r)
{
    if (r == NULL)
        return;
    if (r->fd >= 0)
        close(r->fd);
    free(r->buf.p);
    free(r);
}

uint64_t wal_reader_next_lsn(const wal_reader *r) { return r->next; }

int wal_reader_read(wal_reader *r, pbuf *out, size_t max, uint64_t upto, char *err, size_t errlen)
{
    err[0] = '\0';
    size_t start = out->len;
    bool switched = false;
    while (r->next <= upto && out->len - start < max) {
        size_t size = whole_record(r);
        if (size) {
            wal_record rec;
            if (wal_record_next(r->buf.p, r->buf.len, r->pos, &rec, err, errlen) != WAL_REC_OK ||
                rec.lsn != r->next) {
                if (!err[0])
                    snprintf(err, errlen, "LSN %" PRIu64 " expected, %" PRIu64 " found", r->next,
                             rec.lsn);
                return -1;
            }
            pbuf_put(out, r->buf.p + r->pos, size);
            if (out->failed) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            r->pos += size;
            r->next++;
            switched = false;
            continue;
        }
        size_t got;
        if (!fill(r, &got)) {
            snprintf(err, errlen, "reading the log: %s", strerror(errno));
            return -1;
        }
        if (got > 0)
            continue;
        /* The end of this file: the records up to `upto` are written, so
         * they continue in the file starting at the next LSN. */
        if (switched || r->buf.len > r->pos) {
            snprintf(err, errlen, "log file ends inside a record before LSN %" PRIu64, r->next);
            return -1;
        }
        int fd = open_file(r->logdir, r->next, err, errlen);
        if (fd < 0) {
            snprintf(err, errlen, "LSN %" PRIu64 " is no longer in the log", r->next);
            return -1;
        }
        /* The old file was complete before the new one was created; read
         * it to its end once more before leaving it. */
        if (!fill(r, &got)) {
            close(fd);
            snprintf(err, errlen, "reading the log: %s", strerror(errno));
            return -1;
        }
        if (got > 0) {
            close(fd);
            continue;
        }
        close(r->fd);
        r->fd = fd;
        r->buf.len = r->pos = 0;
        switched = true;
    }
    return (int)(out->len - start);
}

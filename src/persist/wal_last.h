/* DIR/log/LAST: the first LSN of the newest log file, kept durably by the
 * log writer so that a reader notices a deleted newest log file (or all of
 * them), which the LSN chain alone cannot show. docs/PERSISTENCE.md has the
 * rules; the file (32 bytes, little-endian):
 *
 *   "BLMRYLST" | u16 version (1) | u16 0 | u32 size (32) |
 *   u64 first LSN of the newest log file | u64 XXH3-64 of bytes 0..23
 *
 * The writer replaces it (LAST.tmp, fdatasync, rename, fsync of DIR/log)
 * every time it creates a log file: after the file's header is durable and
 * before any record goes into it. A directory written before LAST existed
 * has none; readers accept that and the next log file creates it.
 */
#ifndef BLOOMERY_WAL_LAST_H
#define BLOOMERY_WAL_LAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WAL_LAST_NAME "LAST"
#define WAL_LAST_MAGIC "BLMRYLST"
#define WAL_LAST_VERSION 1
#define WAL_LAST_SIZE 32

void wal_last_encode(uint8_t out[WAL_LAST_SIZE], uint64_t first_lsn);
/* false with a reason in err and the offset of the fault in *err_off. */
bool wal_last_decode(const uint8_t *buf, size_t len, uint64_t *first_lsn, char *err, size_t errlen,
                     size_t *err_off);

/* Replace logdir/LAST durably. false with a message in err. */
bool wal_last_write(const char *logdir, uint64_t first_lsn, char *err, size_t errlen);
/* Read logdir/LAST: 1 with *first_lsn, 0 when there is none, -1 when it is
 * unreadable or damaged (err: "path: offset N: reason"). */
int wal_last_read(const char *logdir, uint64_t *first_lsn, char *err, size_t errlen);

#endif

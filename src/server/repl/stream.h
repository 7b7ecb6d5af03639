/* The replication stream's messages (stream.c): what a replica reads from
 * its master, checked before anything is applied. Pure over a repl_conn
 * and buffers, so the fuzz target drives it with arbitrary bytes. */
#ifndef BLOOMERYD_REPL_STREAM_H
#define BLOOMERYD_REPL_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "repl_conn.h"
#include "wal_format.h"

#define REPL_MAX_BATCH (256u << 20)

/* One message of the stream: 0 "+PING", 1 a batch of whole records
 * (*batch malloc'd, *len bytes), -1 anything else or a failed read
 * (c->err says why). */
int repl_read_message(repl_conn *c, uint8_t **batch, size_t *len);
/* The record at *off of a batch: framing and checksums good, its payload
 * parsed, numbered expect; *off moves past it. false with err. */
bool repl_batch_next(const uint8_t *b, size_t n, size_t *off, uint64_t expect, wal_record *rec,
                     wal_op *op, char *err, size_t errlen);
/* The master's answer to PSYNC: 'c' +CONTINUE <id>, 'f' +FULLRESYNC <id>
 * <offset>, 0 anything else. id holds 40 characters at most. */
char repl_psync_reply(const char *line, char id[41], uint64_t *offset);

#endif

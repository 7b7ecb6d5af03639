/* The replication stream's messages (sender.c draws the protocol). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream.h"

int repl_read_message(repl_conn *c, uint8_t **batch, size_t *len)
{
    char line[64];
    *batch = NULL;
    if (!rc_read_line(c, line, sizeof(line)))
        return -1;
    if (strcmp(line, "+PING") == 0)
        return 0;
    char *end;
    unsigned long long n = line[0] == '$' ? strtoull(line + 1, &end, 10) : 0;
    if (line[0] != '$' || end == line + 1 || *end || line[1] == '-' || n > REPL_MAX_BATCH) {
        snprintf(c->err, sizeof(c->err), "unexpected '%.40s' from the master", line);
        return -1;
    }
    uint8_t *b = malloc(n ? n : 1);
    char crlf[2];
    if (b == NULL) {
        snprintf(c->err, sizeof(c->err), "out of memory");
        return -1;
    }
    if (!rc_read_exact(c, b, n) || !rc_read_exact(c, crlf, 2)) {
        free(b);
        return -1;
    }
    if (crlf[0] != '\r' || crlf[1] != '\n') {
        snprintf(c->err, sizeof(c->err), "batch from the master not ended by CRLF");
        free(b);
        return -1;
    }
    *batch = b;
    *len = n;
    return 1;
}

bool repl_batch_next(const uint8_t *b, size_t n, size_t *off, uint64_t expect, wal_record *rec,
                     wal_op *op, char *err, size_t errlen)
{
    char why[256] = "";
    if (wal_record_next(b, n, *off, rec, why, sizeof(why)) != WAL_REC_OK) {
        snprintf(err, errlen, "damaged record from the master at %zu: %s", *off,
                 why[0] ? why : "cut short");
        return false;
    }
    if (rec->lsn != expect) {
        snprintf(err, errlen, "LSN %" PRIu64 " expected, %" PRIu64 " received", expect, rec->lsn);
        return false;
    }
    if (!wal_op_parse(rec->type, rec->payload, rec->len, op, why, sizeof(why))) {
        snprintf(err, errlen, "record LSN %" PRIu64 " refused: %s", rec->lsn, why);
        return false;
    }
    *off += rec->size;
    return true;
}

static bool is_id(const char *s, size_t n)
{
    if (n == 0 || n > 40)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

char repl_psync_reply(const char *line, char id[41], uint64_t *offset)
{
    const char *p;
    if (strncmp(line, "+CONTINUE ", 10) == 0) {
        p = line + 10;
        size_t n = strlen(p);
        if (!is_id(p, n))
            return 0;
        memcpy(id, p, n);
        id[n] = '\0';
        return 'c';
    }
    if (strncmp(line, "+FULLRESYNC ", 12) != 0)
        return 0;
    p = line + 12;
    const char *sp = strchr(p, ' ');
    if (sp == NULL || !is_id(p, (size_t)(sp - p)))
        return 0;
    char *end;
    if (sp[1] < '0' || sp[1] > '9')
        return 0;
    unsigned long long v = strtoull(sp + 1, &end, 10);
    if (*end)
        return 0;
    memcpy(id, p, (size_t)(sp - p));
    id[sp - p] = '\0';
    *offset = v;
    return 'f';
}

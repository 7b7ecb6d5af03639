// fuzz-sources: src/server/repl/stream.c src/server/repl/repl_conn.c src/persist/wal_format.c
// fuzz-sources: -Isrc/server/repl -Isrc/server/tls -Isrc/persist -lssl -lcrypto
/* Fuzz target: arbitrary bytes as what a master sends its replica. The
 * first line is taken as the answer to PSYNC; the rest is read as the
 * stream (pings and batches of records) through the replica's own reader
 * over a socket, and every record of a batch is checked as the replica
 * checks it before applying anything (LSNs from the first record's). No
 * input may crash, hang or read out of bounds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stream.h"
#include "tls.h"

/* The stream comes in plain text here; tls.c, with the settings it reads,
 * is not linked, and only its error text is asked for on a TLS link. */
void tls_error_string(SSL *ssl, int ret, char *out, size_t outlen)
{
    (void)ssl, (void)ret;
    snprintf(out, outlen, "TLS error");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int sv[2];
    if (size > 100000 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 0;
    int big = 1 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    if (size && write(sv[0], data, size) != (ssize_t)size) {
        close(sv[0]);
        close(sv[1]);
        return 0;
    }
    close(sv[0]);
    repl_conn c;
    rc_init(&c, sv[1], 1000, NULL);
    char line[512], id[41];
    uint64_t off;
    if (rc_read_line(&c, line, sizeof(line)))
        (void)repl_psync_reply(line, id, &off);
    uint64_t expect = 0;
    for (int msgs = 0; msgs < 64; msgs++) {
        uint8_t *b;
        size_t n;
        int kind = repl_read_message(&c, &b, &n);
        if (kind < 0)
            break;
        if (kind == 0)
            continue;
        size_t at = 0;
        wal_record rec;
        wal_op op;
        char err[256];
        if (expect == 0 && n >= 13)
            memcpy(&expect, b + 5, 8); /* the first record's LSN, as a replica at it */
        while (at < n && repl_batch_next(b, n, &at, expect, &rec, &op, err, sizeof(err)))
            expect++;
        free(b);
    }
    rc_close(&c);
    return 0;
}

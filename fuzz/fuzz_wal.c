// fuzz-sources: src/persist/wal_format.c
/* Fuzz target: arbitrary bytes as a log file. The reader must classify
 * every record as good, torn or damaged without reading out of bounds, and
 * every payload it accepts must walk cleanly. Inputs are also tried with
 * the record checksums recomputed, so the payload parsers behind them are
 * reached too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/persist/wal_format.h"

static void walk(const uint8_t *buf, size_t len)
{
    char err[256];
    uint64_t first;
    if (!wal_header_decode(buf, len, &first, err, sizeof(err)))
        return;
    size_t off = WAL_HEADER_SIZE;
    for (;;) {
        wal_record rec;
        if (wal_record_next(buf, len, off, &rec, err, sizeof(err)) != WAL_REC_OK)
            return;
        wal_op op;
        if (wal_op_parse(rec.type, rec.payload, rec.len, &op, err, sizeof(err))) {
            size_t cur = 0, kl;
            const uint8_t *k;
            volatile size_t total = 0;
            if (op.type == WAL_DEL || op.type == WAL_BF_MERGE || op.type == WAL_PF_MERGE)
                while (wal_op_next_key(&op, &cur, &k, &kl))
                    total += kl + (kl ? k[0] : 0);
            if (op.items_len)
                total += op.items[op.items_len - 1];
            if (op.dlen)
                total += op.data[op.dlen - 1];
            (void)total;
        }
        off += rec.size;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    walk(data, size);
    /* Reseal: data after a valid header is taken as a sequence of
     * (u8 type, u16 payload length, payload) and framed properly. */
    if (size < 1)
        return 0;
    uint8_t *buf = malloc(WAL_HEADER_SIZE + size * 9 + 64);
    if (!buf)
        return 0;
    wal_header_encode(buf, 1);
    size_t off = WAL_HEADER_SIZE, i = 0;
    uint64_t lsn = 1;
    while (i + 3 <= size) {
        uint8_t type = data[i];
        size_t plen = (size_t)data[i + 1] | (size_t)data[i + 2] << 8;
        i += 3;
        if (plen > size - i)
            plen = size - i;
        memcpy(buf + off + WAL_PREFIX, data + i, plen);
        wal_record_seal(buf + off, type, lsn++, plen);
        off += wal_record_size(plen);
        i += plen;
    }
    walk(buf, off);
    free(buf);
    return 0;
}

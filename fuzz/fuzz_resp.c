// fuzz-sources: src/server/base/resp.c
/* libFuzzer target for bloomeryd's request parser (src/server/base/resp.c).
 *
 * The input is fed the way the server feeds a connection: in pieces of a
 * size taken from the first byte, into a buffer that is compacted after
 * every request, so the incremental states (header split, bulk split,
 * inline line split) are all reached. Every completed request must lie
 * inside the bytes consumed, and a protocol error must come with a message.
 * The inline splitter is also run over the raw input as a config line, and
 * the bulk-header shortcut is checked against a plain reading of the digits.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/server/base/resp.h"

static void run(const uint8_t *data, size_t size, size_t piece, bool authed)
{
    char *buf = malloc(size + 1);
    if (buf == NULL)
        return;
    resp_parser p;
    resp_parser_init(&p);
    resp_limits lim = {.max_bulk = 1 << 20, .max_args = 4096, .authenticated = authed};
    size_t fed = 0, start = 0, len = 0;
    while (fed < size || start < len) {
        size_t n = size - fed < piece ? size - fed : piece;
        memcpy(buf + len, data + fed, n);
        len += n;
        fed += n;
        for (;;) {
            resp_status st = resp_parse(&p, buf + start, len - start, &lim);
            if (st == RESP_ERROR) {
                assert(p.error != NULL && p.error[0] != '\0');
                goto done;
            }
            if (st == RESP_AGAIN)
                break;
            assert(p.pos > 0 && p.pos <= len - start);
            for (size_t i = 0; i < p.argc; i++) {
                assert(p.argv[i].off <= p.pos);
                assert(p.argv[i].len <= p.pos - p.argv[i].off);
            }
            start += p.pos;
            resp_parser_reset(&p);
        }
        /* Compact as the server does: offsets are relative to the request. */
        memmove(buf, buf + start, len - start);
        len -= start;
        start = 0;
        if (n == 0)
            break; /* all fed and nothing more completes */
    }
done:
    resp_parser_free(&p);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t piece = (size_t)(data[0] % 64) + 1;
    bool authed = data[0] & 0x80;
    run(data + 1, size - 1, piece, authed);
    run(data + 1, size - 1, size, !authed);

    size_t h;
    long long n = resp_bulk_header((const char *)data, size, &h);
    if (n >= 0) {
        assert(h >= 4 && h <= size && data[0] == '$' && data[1] != '0' && data[h - 2] == '\r');
        long long v = 0;
        for (size_t i = 1; i < h - 2; i++) {
            assert(data[i] >= '0' && data[i] <= '9');
            v = v * 10 + (data[i] - '0');
        }
        assert(v == n && n <= RESP_UNAUTH_MAX_BULK);
    }

    char *line = malloc(size);
    if (line) {
        memcpy(line, data, size);
        resp_parser p;
        resp_parser_init(&p);
        if (resp_split_line(&p, line, size)) {
            for (size_t i = 0; i < p.argc; i++)
                assert(p.argv[i].off + p.argv[i].len <= size);
        }
        resp_parser_free(&p);
        free(line);
    }
    return 0;
}

// fuzz-sources: src/web/api_args.c -Isrc/web
/* Fuzz target: arbitrary bytes as the console API's fields (split at NUL
 * bytes: name, capacity, error rate, expiry, layout, window, slices, then
 * sort, order, page, per_page): the number parsers, BF.RESERVE's
 * arguments, the sizing calculator, /api/filters' paging and sorting, and
 * the item forms' lines (the whole input). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api_args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    const char *f[11] = {"", "", "", "", "", "", "", "", "", "", ""};
    size_t nf = 0, start = 0;
    for (size_t i = 0; i <= size && nf < 11; i++) {
        if (i == size || buf[i] == '\0') {
            f[nf++] = buf + start;
            start = i + 1;
        }
    }
    uint64_t n;
    double d;
    if (api_parse_count(f[1], &n) && n == 0)
        abort();
    if (api_parse_rate(f[2], &d) && !(d > 0 && d < 1))
        abort();
    api_filter_form form = {f[0], strlen(f[0]), f[1], f[2], f[3], f[4], f[5], f[6]};
    const char *argv[API_RESERVE_MAX_ARGS];
    size_t lens[API_RESERVE_MAX_ARGS];
    char err[128];
    int argc = api_reserve_argv(&form, argv, lens, err, sizeof(err));
    if (argc > API_RESERVE_MAX_ARGS || (argc >= 0 && (argc < 4 || lens[0] != 10)))
        abort();
    api_size sz;
    if (api_sizing(f[1], f[2], f[4], f[5], f[6], &sz, err, sizeof(err))) {
        if (sz.bytes == 0 || !(sz.bits_per_key > 0) || !(sz.fpr >= 0 && sz.fpr <= 1))
            abort();
    }
    api_list_query q;
    uint64_t max = size % 2000 + 1;
    if (api_list_query_parse(f[7], f[8], f[9], f[10], size % 3 ? max : 0, max, &q, err,
                             sizeof(err))) {
        if (q.page == 0 || q.per_page == 0 || q.per_page > max || q.sort > API_SORT_TTL)
            abort();
    }
    /* Lines: each stored one non-empty, inside the input, without its end. */
    const char *lines[64];
    size_t llens[64];
    size_t nl = api_split_lines((const char *)data, size, lines, llens, 64);
    const char *end = (const char *)data + size;
    for (size_t i = 0; i < nl && i < 64; i++) {
        const char *p = lines[i], *after = lines[i] + llens[i];
        if (llens[i] == 0 || p < (const char *)data || after > end || memchr(p, '\n', llens[i]))
            abort();
        /* What follows is the line's end: "\n", "\r\n", or the input's. */
        if (after < end && *after == '\r')
            after++;
        if (after < end && *after != '\n')
            abort();
    }
    free(buf);
    return 0;
}

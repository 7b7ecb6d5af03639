/* A RESP2 reply (what bloomeryd answers the console's commands) read into
 * JSON: simple strings and bulk strings become strings, integers numbers,
 * nil null, arrays arrays, errors {"error": "..."}. Bounded nesting; the
 * input is the server's own output, but it is fuzzed like any parser
 * (fuzz/fuzz_http_resp.c). */
#include <stdlib.h>
#include <string.h>

#include "http.h"

#define RESP_MAX_DEPTH 8

/* The line at p[0..n) up to CRLF: its length, or -1 when incomplete. */
static long line_len(const char *p, size_t n)
{
    const char *cr = memchr(p, '\r', n);
    if (cr == NULL || (size_t)(cr - p) + 1 >= n)
        return -1;
    return cr[1] == '\n' ? cr - p : -2;
}

static bool parse_ll(const char *p, size_t n, long long *v)
{
    if (n == 0 || n > 20)
        return false;
    bool neg = p[0] == '-';
    size_t i = neg ? 1 : 0;
    if (i == n)
        return false;
    unsigned long long x = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        unsigned d = (unsigned)(p[i] - '0');
        if (x > (9223372036854775807ULL - d) / 10)
            return false;
        x = x * 10 + d;
    }
    *v = neg ? -(long long)x : (long long)x;
    return true;
}

static long read_one(const char *p, size_t n, textbuf *out, int depth)
{
    if (n == 0)
        return RESP_INCOMPLETE;
    if (depth > RESP_MAX_DEPTH)
        return RESP_MALFORMED;
    long ll = line_len(p + 1, n - 1);
    if (ll == -1)
        return RESP_INCOMPLETE;
    if (ll < 0)
        return RESP_MALFORMED;
    const char *body = p + 1;
    size_t used = 1 + (size_t)ll + 2;
    long long v;
    switch (p[0]) {
    case '+': tb_json_str(out, body, (size_t)ll); return (long)used;
    case '-':
        tb_puts(out, "{\"error\":");
        tb_json_str(out, body, (size_t)ll);
        tb_puts(out, "}");
        return (long)used;
    case ':':
        if (!parse_ll(body, (size_t)ll, &v))
            return RESP_MALFORMED;
        tb_printf(out, "%lld", v);
        return (long)used;
    case '$':
        if (!parse_ll(body, (size_t)ll, &v) || v < -1)
            return RESP_MALFORMED;
        if (v == -1) {
            tb_puts(out, "null");
            return (long)used;
        }
        if ((unsigned long long)v > n - used || n - used - (size_t)v < 2)
            return RESP_INCOMPLETE;
        if (p[used + (size_t)v] != '\r' || p[used + (size_t)v + 1] != '\n')
            return RESP_MALFORMED;
        tb_json_str(out, p + used, (size_t)v);
        return (long)(used + (size_t)v + 2);
    case '*':
        if (!parse_ll(body, (size_t)ll, &v) || v < -1)
            return RESP_MALFORMED;
        if (v == -1) {
            tb_puts(out, "null");
            return (long)used;
        }
        tb_puts(out, "[");
        for (long long i = 0; i < v; i++) {
            if (i)
                tb_puts(out, ",");
            long r = read_one(p + used, n - used, out, depth + 1);
            if (r < 0)
                return r;
            used += (size_t)r;
        }
        tb_puts(out, "]");
        return (long)used;
    default: return RESP_MALFORMED;
    }
}

long resp_reply_json(const char *p, size_t n, textbuf *out)
{
    size_t mark = out->len;
    long r = read_one(p, n, out, 0);
    if (r < 0 && !out->failed) {
        /* Nothing of a reply that is not whole. */
        out->len = mark;
        if (out->p)
            out->p[mark] = '\0';
    }
    return r;
}

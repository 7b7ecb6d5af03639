/* RESP request parser. See resp.h for the contract.
 *
 * Error texts and limits follow Redis 7's networking.c so clients and tests
 * that match on them see the same words: a header line longer than 64 KiB is
 * "too big ... count string", a bad count is "invalid multibulk length" /
 * "invalid bulk length", and before AUTH a request may carry at most 10
 * arguments of at most 16 KiB. As in Redis the two bytes after a bulk payload
 * are skipped without looking at them.
 */
#include "resp.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void resp_parser_init(resp_parser *p)
{
    memset(p, 0, sizeof(*p));
    p->args_left = -1;
    p->bulk_len = -1;
}

void resp_parser_free(resp_parser *p)
{
    free(p->argv);
    p->argv = NULL;
    p->argcap = 0;
}

void resp_parser_reset(resp_parser *p)
{
    p->pos = 0;
    p->args_left = -1;
    p->bulk_len = -1;
    p->inline_req = false;
    p->argc = 0;
    p->need = 0;
    p->error = NULL;
}

static resp_status fail(resp_parser *p, const char *msg)
{
    p->error = msg;
    return RESP_ERROR;
}

/* Strict decimal: optional '-', no '+', no leading zeros, no spaces. */
static bool parse_ll(const char *s, size_t len, long long *out)
{
    size_t i = 0;
    bool neg = false;
    unsigned long long v = 0;
    if (len == 0 || len > 20)
        return false;
    if (len == 1 && s[0] == '0') {
        *out = 0;
        return true;
    }
    if (s[0] == '-') {
        neg = true;
        i = 1;
        if (len == 1)
            return false;
    }
    if (s[i] < '1' || s[i] > '9')
        return false;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        if (v > (ULLONG_MAX - (unsigned)(s[i] - '0')) / 10)
            return false;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (neg) {
        if (v > (unsigned long long)LLONG_MAX + 1)
            return false;
        *out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
    } else {
        if (v > LLONG_MAX)
            return false;
        *out = (long long)v;
    }
    return true;
}

static bool push_arg(resp_parser *p, size_t off, size_t len)
{
    if (p->argc == p->argcap) {
        size_t cap = p->argcap ? p->argcap * 2 : 16;
        resp_arg *a = realloc(p->argv, cap * sizeof(*a));
        if (a == NULL)
            return false;
        p->argv = a;
        p->argcap = cap;
    }
    p->argv[p->argc].off = off;
    p->argv[p->argc].len = len;
    p->argc++;
    return true;
}

static bool reserve_args(resp_parser *p, size_t n)
{
    if (n <= p->argcap)
        return true;
    resp_arg *a = realloc(p->argv, n * sizeof(*a));
    if (a == NULL)
        return false;
    p->argv = a;
    p->argcap = n;
    return true;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f' || c == '\0';
}

/* Split line[0..len) into words in place, as redis-cli and Redis's inline
 * form do. Returns false on unbalanced quotes. */
static bool split_inline(resp_parser *p, char *line, size_t len, bool *oom)
{
    size_t r = 0;
    *oom = false;
    for (;;) {
        while (r < len && is_blank(line[r]))
            r++;
        if (r == len)
            return true;
        size_t start = r, w = r;
        bool inq = false, insq = false, done = false;
        while (!done) {
            if (inq) {
                if (r == len)
                    return false;
                if (line[r] == '\\' && r + 3 < len + 0 && line[r + 1] == 'x' &&
                    hexval(line[r + 2]) >= 0 && hexval(line[r + 3]) >= 0) {
                    line[w++] = (char)(hexval(line[r + 2]) * 16 + hexval(line[r + 3]));
                    r += 4;
                } else if (line[r] == '\\' && r + 1 < len) {
                    char c = line[r + 1];
                    switch (c) {
                    case 'n': c = '\n'; break;
                    case 'r': c = '\r'; break;
                    case 't': c = '\t'; break;
                    case 'b': c = '\b'; break;
                    case 'a': c = '\a'; break;
                    default: break;
                    }
                    line[w++] = c;
                    r += 2;
                } else if (line[r] == '"') {
                    /* A closing quote must end the word. */
                    if (r + 1 < len && !is_blank(line[r + 1]))
                        return false;
                    r++;
                    done = true;
                } else {
                    line[w++] = line[r++];
                }
            } else if (insq) {
                if (r == len)
                    return false;
                if (line[r] == '\\' && r + 1 < len && line[r + 1] == '\'') {
                    line[w++] = '\'';
                    r += 2;
                } else if (line[r] == '\'') {
                    if (r + 1 < len && !is_blank(line[r + 1]))
                        return false;
                    r++;
                    done = true;
                } else {
                    line[w++] = line[r++];
                }
            } else {
                if (r == len || is_blank(line[r])) {
                    done = true;
                } else if (line[r] == '"') {
                    inq = true;
                    r++;
                } else if (line[r] == '\'') {
                    insq = true;
                    r++;
                } else {
                    line[w++] = line[r++];
                }
            }
        }
        if (!push_arg(p, start, w - start)) {
            *oom = true;
            return false;
        }
    }
}

bool resp_split_line(resp_parser *p, char *line, size_t len)
{
    bool oom;
    p->argc = 0;
    return split_inline(p, line, len, &oom);
}

static resp_status parse_inline(resp_parser *p, char *buf, size_t len)
{
    char *nl = memchr(buf, '\n', len);
    if (nl == NULL) {
        if (len > RESP_INLINE_MAX)
            return fail(p, "too big inline request");
        return RESP_AGAIN;
    }
    size_t linelen = (size_t)(nl - buf);
    size_t end = linelen + 1;
    if (linelen > 0 && buf[linelen - 1] == '\r')
        linelen--;
    bool oom;
    p->argc = 0;
    if (!split_inline(p, buf, linelen, &oom)) {
        p->argc = 0;
        return fail(p, oom ? "out of memory" : "unbalanced quotes in request");
    }
    p->pos = end;
    return RESP_DONE;
}

/* Find the \r\n ending a header line that starts at buf[from]. Returns the
 * index of '\r', or -1 when more bytes are needed. */
static long long find_crlf(const char *buf, size_t from, size_t len)
{
    const char *cr = memchr(buf + from, '\r', len - from);
    if (cr == NULL)
        return -1;
    size_t i = (size_t)(cr - buf);
    if (i + 1 >= len)
        return -1; /* the \n has not arrived yet */
    return (long long)i;
}

/* The common bulk header, "$" and 1 to 9 digits without a leading zero
 * followed by \r and one more byte, read in one pass: returns the length and
 * moves *pos past the header. Anything else (zero, long or malformed counts,
 * an incomplete line) returns -1 and goes through the general path, which
 * also applies the limits; so do lengths above RESP_UNAUTH_MAX_BULK. */
static inline long long bulk_header_fast_at(const char *buf, size_t *pos, size_t len)
{
    size_t i = *pos;
    if (buf[i] != '$' || i + 1 >= len || buf[i + 1] < '1' || buf[i + 1] > '9')
        return -1;
    long long v = buf[i + 1] - '0';
    size_t j = i + 2, end = i + 11 < len ? i + 11 : len;
    while (j < end && buf[j] >= '0' && buf[j] <= '9')
        v = v * 10 + (buf[j++] - '0');
    if (j >= end || buf[j] != '\r' || j + 1 >= len || v > RESP_UNAUTH_MAX_BULK)
        return -1;
    *pos = j + 2;
    return v;
}

long long resp_bulk_header(const char *buf, size_t len, size_t *hdrlen)
{
    size_t pos = 0;
    if (len == 0)
        return -1;
    long long n = bulk_header_fast_at(buf, &pos, len);
    if (n >= 0)
        *hdrlen = pos;
    return n;
}

resp_status resp_parse(resp_parser *p, char *buf, size_t len, const resp_limits *lim)
{
    if (p->args_left < 0 && !p->inline_req) {
        if (len == 0)
            return RESP_AGAIN;
        if (buf[0] != '*') {
            p->inline_req = true;
        } else {
            long long cr = find_crlf(buf, 0, len);
            if (cr < 0) {
                if (len > RESP_INLINE_MAX)
                    return fail(p, "too big mbulk count string");
                return RESP_AGAIN;
            }
            long long n;
            if (!parse_ll(buf + 1, (size_t)cr - 1, &n) || n > INT_MAX || n > lim->max_args)
                return fail(p, "invalid multibulk length");
            if (n > RESP_UNAUTH_MAX_ARGS && !lim->authenticated)
                return fail(p, "unauthenticated multibulk length");
            p->pos = (size_t)cr + 2;
            if (n <= 0) {
                p->argc = 0;
                return RESP_DONE;
            }
            /* Do not trust a huge count for a preallocation. */
            if (!reserve_args(p, (size_t)(n < 1024 ? n : 1024)))
                return fail(p, "out of memory");
            p->args_left = n;
            p->bulk_len = -1;
            p->argc = 0;
        }
    }
    if (p->inline_req)
        return parse_inline(p, buf, len);

    while (p->args_left > 0) {
        if (p->bulk_len < 0) {
            if (p->pos >= len)
                return RESP_AGAIN;
            long long fast = bulk_header_fast_at(buf, &p->pos, len);
            if (fast >= 0) {
                p->bulk_len = fast;
                goto have_len;
            }
            long long cr = find_crlf(buf, p->pos, len);
            if (cr < 0) {
                if (len - p->pos > RESP_INLINE_MAX)
                    return fail(p, "too big bulk count string");
                return RESP_AGAIN;
            }
            if (buf[p->pos] != '$') {
                snprintf(p->errbuf, sizeof(p->errbuf), "expected '$', got '%c'", buf[p->pos]);
                return fail(p, p->errbuf);
            }
            long long n;
            if (!parse_ll(buf + p->pos + 1, (size_t)cr - p->pos - 1, &n) || n < 0 ||
                n > lim->max_bulk)
                return fail(p, "invalid bulk length");
            if (n > RESP_UNAUTH_MAX_BULK && !lim->authenticated)
                return fail(p, "unauthenticated bulk length");
            p->pos = (size_t)cr + 2;
            p->bulk_len = n;
        }
    have_len:;
        size_t want = (size_t)p->bulk_len + 2;
        if (len - p->pos < want) {
            p->need = want - (len - p->pos);
            return RESP_AGAIN;
        }
        p->need = 0;
        if (!push_arg(p, p->pos, (size_t)p->bulk_len))
            return fail(p, "out of memory");
        p->pos += want;
        p->bulk_len = -1;
        p->args_left--;
    }
    p->args_left = -1;
    return RESP_DONE;
}

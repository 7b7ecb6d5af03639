/* Reply encoding; see reply.h. */
#include "reply.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A deferred array header reserves room for the longest "*<n>\r\n"; once n
 * is known the body is moved left over the unused part of the slot. */
#define DEFER_SLOT 24

void reply_init(reply *r)
{
    memset(r, 0, sizeof(*r));
    r->proto = 2;
}

void reply_free(reply *r)
{
    free(r->buf);
    r->buf = NULL;
    r->len = r->cap = 0;
}

bool reply_reserve(reply *r, size_t extra)
{
    if (r->failed)
        return false;
    if (r->cap - r->len >= extra)
        return true;
    size_t cap = r->cap ? r->cap : 1024;
    while (cap - r->len < extra)
        cap *= 2;
    char *b = realloc(r->buf, cap);
    if (b == NULL) {
        r->failed = true;
        return false;
    }
    r->buf = b;
    r->cap = cap;
    return true;
}

void reply_raw(reply *r, const void *p, size_t n)
{
    if (n == 0 || !reply_reserve(r, n))
        return;
    memcpy(r->buf + r->len, p, n);
    r->len += n;
}

/* "00".."99": two digits at a time. */
static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324"
                                     "25262728293031323334353637383940414243444546474849"
                                     "50515253545556575859606162636465666768697071727374"
                                     "75767778798081828384858687888990919293949596979899";

/* Write "<c><v>\r\n" at p, which has room for 24 bytes; returns the end. */
static inline char *put_prefixed_ll(char *p, char c, long long v)
{
    *p++ = c;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    if (v < 0)
        *p++ = '-';
    size_t n = 1;
    for (unsigned long long x = u; x >= 10; x /= 10)
        n++;
    char *q = p + n;
    while (u >= 100) {
        unsigned d = (unsigned)(u % 100);
        u /= 100;
        q -= 2;
        memcpy(q, digit_pairs + 2 * d, 2);
    }
    if (u >= 10)
        memcpy(q - 2, digit_pairs + 2 * u, 2);
    else
        q[-1] = (char)('0' + u);
    p += n;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/* Write "<c><v>\r\n". */
static void prefixed_ll(reply *r, char c, long long v)
{
    if (!reply_reserve(r, 32))
        return;
    r->len = (size_t)(put_prefixed_ll(r->buf + r->len, c, v) - r->buf);
}

void reply_simple(reply *r, const char *s)
{
    size_t n = strlen(s);
    if (!reply_reserve(r, n + 3))
        return;
    r->buf[r->len++] = '+';
    memcpy(r->buf + r->len, s, n);
    r->len += n;
    r->buf[r->len++] = '\r';
    r->buf[r->len++] = '\n';
}

void reply_simple_len(reply *r, const char *s, size_t n)
{
    if (!reply_reserve(r, n + 3))
        return;
    r->buf[r->len++] = '+';
    memcpy(r->buf + r->len, s, n);
    r->len += n;
    r->buf[r->len++] = '\r';
    r->buf[r->len++] = '\n';
}

void reply_ok(reply *r) { reply_raw(r, "+OK\r\n", 5); }

void reply_error(reply *r, const char *msg)
{
    size_t n = strlen(msg);
    if (!reply_reserve(r, n + 3))
        return;
    r->buf[r->len++] = '-';
    for (size_t i = 0; i < n; i++) {
        char c = msg[i];
        r->buf[r->len++] = (c == '\r' || c == '\n') ? ' ' : c;
    }
    r->buf[r->len++] = '\r';
    r->buf[r->len++] = '\n';
}

void reply_errorf(reply *r, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof(small)) {
        reply_error(r, small);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (big == NULL) {
        r->failed = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    reply_error(r, big);
    free(big);
}

void reply_int(reply *r, long long v)
{
    if (v == 0 || v == 1) {
        reply_raw(r, v ? ":1\r\n" : ":0\r\n", 4);
        return;
    }
    prefixed_ll(r, ':', v);
}

void reply_ints(reply *r, const int64_t *v, size_t n)
{
    if (n == 0 || !reply_reserve(r, 24 * n))
        return;
    char *p = r->buf + r->len;
    for (size_t i = 0; i < n; i++)
        p = put_prefixed_ll(p, ':', v[i]);
    r->len = (size_t)(p - r->buf);
}

void reply_bool(reply *r, bool v)
{
    if (r->proto == 3)
        reply_raw(r, v ? "#t\r\n" : "#f\r\n", 4);
    else
        reply_raw(r, v ? ":1\r\n" : ":0\r\n", 4);
}

void reply_bools(reply *r, const int *v, size_t n)
{
    if (n == 0 || !reply_reserve(r, 4 * n))
        return;
    char t = r->proto == 3 ? '#' : ':';
    char yes = r->proto == 3 ? 't' : '1', no = r->proto == 3 ? 'f' : '0';
    char *p = r->buf + r->len;
    for (size_t i = 0; i < n; i++, p += 4) {
        p[0] = t;
        p[1] = v[i] == 1 ? yes : no;
        p[2] = '\r';
        p[3] = '\n';
    }
    r->len += 4 * n;
}

void reply_bulk(reply *r, const void *p, size_t n)
{
    prefixed_ll(r, '$', (long long)n);
    if (!reply_reserve(r, n + 2))
        return;
    if (n)
        memcpy(r->buf + r->len, p, n);
    r->len += n;
    r->buf[r->len++] = '\r';
    r->buf[r->len++] = '\n';
}

void reply_bulk_str(reply *r, const char *s) { reply_bulk(r, s, strlen(s)); }

void reply_bulk_ll(reply *r, long long v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof(tmp), "%lld", v);
    reply_bulk(r, tmp, (size_t)n);
}

void *reply_bulk_begin(reply *r, size_t n)
{
    prefixed_ll(r, '$', (long long)n);
    if (!reply_reserve(r, n + 2))
        return NULL;
    return r->buf + r->len;
}

void reply_bulk_end(reply *r, size_t n)
{
    r->len += n;
    r->buf[r->len++] = '\r';
    r->buf[r->len++] = '\n';
}

void reply_double(reply *r, double d)
{
    char tmp[64];
    int n;
    if (isinf(d))
        n = snprintf(tmp, sizeof(tmp), "%s", d > 0 ? "inf" : "-inf");
    else if (isnan(d))
        n = snprintf(tmp, sizeof(tmp), "nan");
    else
        n = snprintf(tmp, sizeof(tmp), "%.17g", d);
    if (r->proto == 3) {
        reply_raw(r, ",", 1);
        reply_raw(r, tmp, (size_t)n);
        reply_raw(r, "\r\n", 2);
    } else {
        reply_bulk(r, tmp, (size_t)n);
    }
}

void reply_null(reply *r)
{
    if (r->proto == 3)
        reply_raw(r, "_\r\n", 3);
    else
        reply_raw(r, "$-1\r\n", 5);
}

void reply_array(reply *r, long long n) { prefixed_ll(r, '*', n); }

void reply_map(reply *r, long long n)
{
    if (r->proto == 3)
        prefixed_ll(r, '%', n);
    else
        prefixed_ll(r, '*', n * 2);
}

void reply_push(reply *r, long long n) { prefixed_ll(r, r->proto == 3 ? '>' : '*', n); }

void reply_set(reply *r, long long n) { prefixed_ll(r, r->proto == 3 ? '~' : '*', n); }

void reply_verbatim(reply *r, const char *s, size_t n)
{
    if (r->proto != 3) {
        reply_bulk(r, s, n);
        return;
    }
    prefixed_ll(r, '=', (long long)n + 4);
    reply_raw(r, "txt:", 4);
    reply_raw(r, s, n);
    reply_raw(r, "\r\n", 2);
}

void reply_wrong_arity(reply *r, const char *cmdname)
{
    char lower[64];
    size_t i;
    for (i = 0; cmdname[i] && i < sizeof(lower) - 1; i++)
        lower[i] = (char)tolower((unsigned char)cmdname[i]);
    lower[i] = '\0';
    reply_errorf(r, "ERR wrong number of arguments for '%s' command", lower);
}

size_t reply_defer_len(reply *r)
{
    size_t slot = r->len;
    if (!reply_reserve(r, DEFER_SLOT))
        return slot;
    memset(r->buf + r->len, 0, DEFER_SLOT);
    r->len += DEFER_SLOT;
    return slot;
}

void reply_set_array_len(reply *r, size_t slot, long long n)
{
    if (r->failed)
        return;
    char hdr[DEFER_SLOT + 1];
    int hn = snprintf(hdr, sizeof(hdr), "*%lld\r\n", n);
    /* Close the gap between the real header and the body that follows. */
    size_t body = slot + DEFER_SLOT;
    memcpy(r->buf + slot, hdr, (size_t)hn);
    memmove(r->buf + slot + hn, r->buf + body, r->len - body);
    r->len -= DEFER_SLOT - (size_t)hn;
}

void reply_lines(reply *r, const char *const *lines, size_t n)
{
    reply_array(r, (long long)n);
    for (size_t i = 0; i < n; i++)
        reply_simple(r, lines[i]);
}

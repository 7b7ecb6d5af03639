/* A server's reply as a tree (rcall.h): pure, fuzzed (fuzz_cli_reply.c),
 * no I/O, so its users and the fuzzer need no sockets or OpenSSL. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rcall.h"

/* ---- parsing ---- */

static long line_len(const char *buf, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++)
        if (buf[i] == '\r' && buf[i + 1] == '\n')
            return (long)i;
    return -1;
}

static int rv_parse_ll(const char *s, size_t n, long long *out)
{
    if (n == 0 || n > 20)
        return -1;
    char tmp[24], *end;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    errno = 0;
    long long v = strtoll(tmp, &end, 10);
    if (*end || errno)
        return -1;
    *out = v;
    return 0;
}

static int set_str(rc_value *v, const char *p, size_t n)
{
    v->str = malloc(n + 1);
    if (!v->str)
        return -1;
    memcpy(v->str, p, n);
    v->str[n] = 0;
    v->len = n;
    return 1;
}

/* Fills v from buf; same returns as rc_value_parse. On 0 or -1, what v
 * holds is freed by the caller (rc_value_free of the root). set_str
 * answers 1 or -1 as this does. */
static int parse_into(const char *buf, size_t len, size_t *used, rc_value *v, int depth)
{
    if (depth > 32)
        return -1;
    long e = line_len(buf, len);
    if (e < 0)
        return len > 65536 ? -1 : 0; /* no header is that long */
    char t = buf[0];
    const char *body = buf + 1;
    size_t blen = e > 0 ? (size_t)e - 1 : 0, head = (size_t)e + 2;
    long long n;
    if (e < 1)
        return -1;
    switch (t) {
    case '+':
    case '-':
    case ',':
    case '(':
        v->type = t == '+' || t == '-' ? t : '$';
        *used = head;
        return set_str(v, body, blen);
    case ':':
        v->type = ':';
        *used = head;
        return rv_parse_ll(body, blen, &v->integer) == 0 ? 1 : -1;
    case '#':
        v->type = ':';
        v->integer = blen == 1 && body[0] == 't';
        *used = head;
        return 1;
    case '_':
        v->type = '_';
        *used = head;
        return 1;
    case '$':
    case '!':
    case '=':
        if (rv_parse_ll(body, blen, &n) != 0 || n < -1 || n > INT_MAX)
            return -1;
        if (n == -1) {
            v->type = '_';
            *used = head;
            return 1;
        }
        if (len - head < (size_t)n + 2)
            return 0;
        if (buf[head + (size_t)n] != '\r' || buf[head + (size_t)n + 1] != '\n')
            return -1;
        v->type = t == '!' ? '-' : '$';
        *used = head + (size_t)n + 2;
        /* A verbatim string's "txt:" prefix is not part of its text. */
        if (t == '=' && n >= 4)
            return set_str(v, buf + head + 4, (size_t)n - 4);
        return set_str(v, buf + head, (size_t)n);
    case '*':
    case '~':
    case '>':
    case '%': {
        if (rv_parse_ll(body, blen, &n) != 0 || n < -1 || n > INT_MAX / 2)
            return -1;
        if (n == -1) {
            v->type = '_';
            *used = head;
            return 1;
        }
        size_t count = (size_t)n * (t == '%' ? 2 : 1);
        /* Each element takes at least 3 bytes: an announced count beyond
         * what has arrived is not allocated before the bytes are there. */
        if (count > (len - head) / 3 + 1)
            return 0;
        v->type = '*';
        v->elem = count ? calloc(count, sizeof *v->elem) : NULL;
        if (count && !v->elem)
            return -1;
        v->n = count;
        size_t pos = head;
        for (size_t i = 0; i < count; i++) {
            size_t u;
            int rc = parse_into(buf + pos, len - pos, &u, &v->elem[i], depth + 1);
            if (rc <= 0)
                return rc;
            pos += u;
        }
        *used = pos;
        return 1;
    }
    default: return -1;
    }
}

static void value_clear(rc_value *v)
{
    for (size_t i = 0; i < v->n; i++)
        value_clear(&v->elem[i]);
    free(v->elem);
    free(v->str);
}

void rc_value_free(rc_value *v)
{
    if (!v)
        return;
    value_clear(v);
    free(v);
}

int rc_value_parse(const char *buf, size_t len, size_t *used, rc_value **out)
{
    *out = NULL;
    if (len == 0)
        return 0;
    rc_value *v = calloc(1, sizeof *v);
    if (!v)
        return -1;
    int rc = parse_into(buf, len, used, v, 0);
    if (rc != 1) {
        rc_value_free(v);
        return rc;
    }
    *out = v;
    return 1;
}

/* ---- INFO and addresses ---- */

bool rc_info_field(const rc_value *info, const char *field, char *out, size_t outlen)
{
    if (!info || info->type != '$' || outlen == 0)
        return false;
    size_t fl = strlen(field);
    const char *p = info->str, *end = info->str + info->len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if ((size_t)(le - p) > fl && memcmp(p, field, fl) == 0 && p[fl] == ':') {
            const char *v = p + fl + 1;
            size_t n = (size_t)(le - v);
            if (n && v[n - 1] == '\r')
                n--;
            if (n >= outlen)
                n = outlen - 1;
            memcpy(out, v, n);
            out[n] = 0;
            return true;
        }
        p = le + 1;
    }
    return false;
}

long long rc_info_ll(const rc_value *info, const char *field)
{
    char b[64];
    if (!rc_info_field(info, field, b, sizeof b))
        return 0;
    return strtoll(b, NULL, 10);
}

bool rc_split_addr(const char *addr, char *host, size_t hostlen, char *port, size_t portlen)
{
    const char *colon, *h = addr;
    size_t hl;
    if (addr[0] == '[') {
        const char *rb = strchr(addr, ']');
        if (!rb || rb[1] != ':')
            return false;
        h = addr + 1;
        hl = (size_t)(rb - h);
        colon = rb + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon)
            return false;
        hl = (size_t)(colon - addr);
    }
    const char *p = colon + 1;
    size_t pl = strlen(p);
    if (hl == 0 || hl >= hostlen || pl == 0 || pl >= portlen || pl > 5 ||
        strspn(p, "0123456789") != pl || atoi(p) < 1 || atoi(p) > 65535)
        return false;
    memcpy(host, h, hl);
    host[hl] = 0;
    memcpy(port, p, pl + 1);
    return true;
}

/* reply.h inside Redis: each reply call goes straight to Redis's reply API
 * for the command's context (r->host), which encodes it for the client's
 * protocol itself (a map is a flat array in RESP2, a boolean :0/:1, a
 * double a bulk string, ...). No RESP is built in between, so nothing is
 * parsed back.
 *
 * bloomery.so links this file in place of src/server/base/reply.c. Here
 * r->len counts the top-level calls made, so the host can tell a handler
 * that replied nothing (module.c); r->buf is scratch for a bulk string
 * written in place (reply_bulk_begin) and for copies that need a NUL.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reply.h"
#include "rm_api.h"

#define CTX(r) ((RedisModuleCtx *)(r)->host)

/* Redis's postponed length (REDISMODULE_POSTPONED_LEN). */
#define RM_POSTPONED_LEN (-1L)

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

/* Room for n bytes of scratch at r->buf; false (an error replied in the
 * place of the element, so the reply stays whole) when out of memory. */
static bool scratch(reply *r, size_t n)
{
    if (r->cap >= n)
        return true;
    char *b = realloc(r->buf, n);
    if (b == NULL) {
        r->failed = true;
        rm.ReplyWithError(CTX(r), "ERR out of memory");
        return false;
    }
    r->buf = b;
    r->cap = n;
    return true;
}

void reply_simple_len(reply *r, const char *s, size_t n)
{
    r->len++;
    char small[256];
    char *t = small;
    if (n >= sizeof(small)) {
        if (!scratch(r, n + 1))
            return;
        t = r->buf;
    }
    memcpy(t, s, n);
    t[n] = '\0';
    rm.ReplyWithSimpleString(CTX(r), t);
}

void reply_simple(reply *r, const char *s)
{
    r->len++;
    rm.ReplyWithSimpleString(CTX(r), s);
}

void reply_ok(reply *r) { reply_simple(r, "OK"); }

/* Redis sends msg as given (its own "ERR " prefix included) and turns CR
 * and LF into spaces, as reply.c does. */
void reply_error(reply *r, const char *msg)
{
    r->len++;
    rm.ReplyWithError(CTX(r), msg);
}

void reply_errorf(reply *r, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        reply_error(r, "ERR");
        return;
    }
    if ((size_t)n < sizeof(small)) {
        reply_error(r, small);
        return;
    }
    r->len++;
    if (!scratch(r, (size_t)n + 1))
        return;
    va_start(ap, fmt);
    vsnprintf(r->buf, (size_t)n + 1, fmt, ap);
    va_end(ap);
    rm.ReplyWithError(CTX(r), r->buf);
}

void reply_int(reply *r, long long v)
{
    r->len++;
    rm.ReplyWithLongLong(CTX(r), v);
}

void reply_ints(reply *r, const int64_t *v, size_t n)
{
    r->len += n;
    for (size_t i = 0; i < n; i++)
        rm.ReplyWithLongLong(CTX(r), v[i]);
}

void reply_bool(reply *r, bool v)
{
    r->len++;
    rm.ReplyWithBool(CTX(r), v);
}

void reply_bools(reply *r, const int *v, size_t n)
{
    r->len += n;
    for (size_t i = 0; i < n; i++)
        rm.ReplyWithBool(CTX(r), v[i] == 1);
}

void reply_bulk(reply *r, const void *p, size_t n)
{
    r->len++;
    rm.ReplyWithStringBuffer(CTX(r), p, n);
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
    if (!scratch(r, n ? n : 1)) {
        r->len++;
        return NULL;
    }
    return r->buf;
}

void reply_bulk_end(reply *r, size_t n) { reply_bulk(r, r->buf, n); }

void reply_double(reply *r, double d)
{
    r->len++;
    /* A NaN's sign would show ("-nan"); bloomeryd writes "nan". */
    rm.ReplyWithDouble(CTX(r), isnan(d) ? NAN : d);
}

void reply_null(reply *r)
{
    r->len++;
    rm.ReplyWithNull(CTX(r));
}

void reply_array(reply *r, long long n)
{
    r->len++;
    rm.ReplyWithArray(CTX(r), (long)n);
}

void reply_map(reply *r, long long n)
{
    r->len++;
    rm.ReplyWithMap(CTX(r), (long)n);
}

void reply_set(reply *r, long long n)
{
    r->len++;
    rm.ReplyWithSet(CTX(r), (long)n);
}

/* A module command has no out-of-band data: an array, as in RESP2. */
void reply_push(reply *r, long long n) { reply_array(r, n); }

void reply_verbatim(reply *r, const char *s, size_t n)
{
    r->len++;
    rm.ReplyWithVerbatimString(CTX(r), s, n);
}

void reply_wrong_arity(reply *r, const char *cmdname)
{
    char lower[64];
    size_t i;
    for (i = 0; cmdname[i] && i < sizeof(lower) - 1; i++)
        lower[i] = (char)(cmdname[i] >= 'A' && cmdname[i] <= 'Z' ? cmdname[i] + 32 : cmdname[i]);
    lower[i] = '\0';
    reply_errorf(r, "ERR wrong number of arguments for '%s' command", lower);
}

/* Redis keeps postponed lengths as a stack: the slot is not needed. */
size_t reply_defer_len(reply *r)
{
    r->len++;
    rm.ReplyWithArray(CTX(r), RM_POSTPONED_LEN);
    return 0;
}

void reply_set_array_len(reply *r, size_t slot, long long n)
{
    (void)slot;
    rm.ReplySetArrayLength(CTX(r), (long)n);
}

void reply_lines(reply *r, const char *const *lines, size_t n)
{
    reply_array(r, (long long)n);
    for (size_t i = 0; i < n; i++)
        rm.ReplyWithSimpleString(CTX(r), lines[i]);
}

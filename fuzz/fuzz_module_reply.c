// fuzz-sources: src/module/reply.c src/module/rm_api.c src/server/base/reply.c
// fuzz-sources: src/server/base/util.c -Isrc/module -Isrc/server/base
/* Fuzz target: arbitrary bytes as a handler's reply buffer, sent through
 * the module's translator (src/module/reply.c) to a stand-in for Redis's
 * reply calls. Either the buffer is refused and exactly one error is sent,
 * or exactly one complete reply is sent: every array, map and set gets as
 * many elements as it announced, and every string lies inside the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reply_send.h"

#define MAX_STACK 64

static const char *in_lo, *in_hi;
static long long pending[MAX_STACK]; /* elements each open aggregate still needs */
static int depth;
static int values; /* complete top-level values sent */
static int errors;

static void element(void)
{
    if (depth == 0) {
        values++;
        return;
    }
    if (pending[depth - 1] <= 0)
        abort(); /* more elements than announced */
    if (--pending[depth - 1] == 0) {
        depth--;
        element(); /* the aggregate itself is now complete */
    }
}

static void aggregate(long long n)
{
    if (n < 0)
        abort();
    if (n == 0) {
        element();
        return;
    }
    if (depth == MAX_STACK)
        abort(); /* nesting the translator should have refused */
    pending[depth++] = n;
}

static void inside(const char *p, size_t len)
{
    if (len && (p < in_lo || p + len > in_hi))
        abort();
}

static int ll(RedisModuleCtx *c, long long v)
{
    (void)c, (void)v, element();
    return RM_OK;
}
static int err(RedisModuleCtx *c, const char *m)
{
    (void)c, (void)m, errors++, element();
    return RM_OK;
}
static int simple(RedisModuleCtx *c, const char *s)
{
    (void)c, (void)s, element();
    return RM_OK;
}
static int arr(RedisModuleCtx *c, long n)
{
    (void)c, aggregate(n);
    return RM_OK;
}
static int map(RedisModuleCtx *c, long n)
{
    (void)c, aggregate(2 * (long long)n);
    return RM_OK;
}
static int bulk(RedisModuleCtx *c, const char *p, size_t n)
{
    (void)c, inside(p, n), element();
    return RM_OK;
}
static int null(RedisModuleCtx *c)
{
    (void)c, element();
    return RM_OK;
}
static int boolean(RedisModuleCtx *c, int b)
{
    (void)c, (void)b, element();
    return RM_OK;
}
static int dbl(RedisModuleCtx *c, double d)
{
    (void)c, (void)d, element();
    return RM_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rm.ReplyWithLongLong = ll;
    rm.ReplyWithError = err;
    rm.ReplyWithSimpleString = simple;
    rm.ReplyWithArray = arr;
    rm.ReplyWithMap = map;
    rm.ReplyWithSet = arr;
    rm.ReplyWithStringBuffer = bulk;
    rm.ReplyWithVerbatimString = bulk;
    rm.ReplyWithNull = null;
    rm.ReplyWithNullArray = null;
    rm.ReplyWithBool = boolean;
    rm.ReplyWithDouble = dbl;
    char *copy = malloc(size ? size : 1);
    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    in_lo = copy;
    in_hi = copy + size;
    depth = values = errors = 0;
    reply r = {.buf = copy, .len = size, .cap = size, .proto = 3};
    bool ok = mh_reply((RedisModuleCtx *)&r, &r);
    if (values != 1 || depth != 0)
        abort(); /* exactly one complete reply, whatever the input */
    if (!ok && errors != 1)
        abort();
    free(copy);
    return 0;
}

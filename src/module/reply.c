/* A handler's reply, RESP2 or RESP3 bytes in its reply buffer, sent
 * through Redis's reply calls, which encode it again for the client's
 * protocol.
 *
 * The buffer is walked twice: once to check that it is exactly one
 * well-formed reply of types Redis can send (nesting bounded, every length
 * inside the buffer), then to send it, so a damaged buffer never leaves a
 * client with half a reply.
 */
#include <stdlib.h>
#include <string.h>

#include "reply_send.h"
#include "util.h"

#define MAX_DEPTH 32

typedef struct walker {
    RedisModuleCtx *ctx; /* NULL: only check */
    const char *p, *end;
} walker;

/* The line at w->p (without its CRLF) into *s, *n; advances past it. */
static bool line(walker *w, const char **s, size_t *n)
{
    /* Lines are short (":1", "*100"): a plain scan beats memchr's call. */
    const char *q = w->p;
    while (q + 1 < w->end && (q[0] != '\r' || q[1] != '\n'))
        q++;
    if (q + 1 >= w->end)
        return false;
    *s = w->p;
    *n = (size_t)(q - w->p);
    w->p = q + 2;
    return true;
}

/* The handlers write integers in canonical form; str_to_ll takes only
 * that, without strtoll's copy and locale (a hot path: one per item of a
 * multi-item reply). */
static bool parse_ll(const char *s, size_t n, long long *v) { return str_to_ll(s, n, v); }

/* Calls that need a NUL-terminated string. */
static void send_text(walker *w, char type, const char *s, size_t n)
{
    char small[256];
    char *t = n < sizeof(small) ? small : malloc(n + 1);
    if (t == NULL) {
        rm.ReplyWithError(w->ctx, "ERR out of memory");
        return;
    }
    memcpy(t, s, n);
    t[n] = '\0';
    if (type == '+')
        rm.ReplyWithSimpleString(w->ctx, t);
    else if (type == '-')
        rm.ReplyWithError(w->ctx, t);
    else
        rm.ReplyWithDouble(w->ctx, strtod(t, NULL));
    if (t != small)
        free(t);
}

static bool walk(walker *w, int depth)
{
    const char *s;
    size_t n;
    long long v;
    if (depth > MAX_DEPTH || w->p >= w->end)
        return false;
    char type = *w->p++;
    if (!line(w, &s, &n))
        return false;
    switch (type) {
    case '+':
    case '-':
    case ',':
        if (w->ctx)
            send_text(w, type, s, n);
        return true;
    case ':':
        /* Most integers are a check's 0 or 1. */
        if (n == 1 && s[0] >= '0' && s[0] <= '9')
            v = s[0] - '0';
        else if (!parse_ll(s, n, &v))
            return false;
        if (w->ctx)
            rm.ReplyWithLongLong(w->ctx, v);
        return true;
    case '_':
        if (n != 0)
            return false;
        if (w->ctx)
            rm.ReplyWithNull(w->ctx);
        return true;
    case '#':
        if (n != 1 || (s[0] != 't' && s[0] != 'f'))
            return false;
        if (w->ctx)
            rm.ReplyWithBool(w->ctx, s[0] == 't');
        return true;
    case '$':
    case '=':
        if (!parse_ll(s, n, &v) || v < -1)
            return false;
        if (v == -1) {
            if (type == '=')
                return false;
            if (w->ctx)
                rm.ReplyWithNull(w->ctx);
            return true;
        }
        if ((size_t)(w->end - w->p) < (size_t)v + 2 || w->p[v] != '\r' || w->p[v + 1] != '\n')
            return false;
        if (type == '=' && (v < 4 || w->p[3] != ':'))
            return false;
        if (w->ctx) {
            /* A verbatim string's format is "txt": Redis adds it itself. */
            if (type == '=')
                rm.ReplyWithVerbatimString(w->ctx, w->p + 4, (size_t)v - 4);
            else
                rm.ReplyWithStringBuffer(w->ctx, w->p, (size_t)v);
        }
        w->p += v + 2;
        return true;
    case '*':
    case '%':
    case '~': {
        if (!parse_ll(s, n, &v) || v < -1 || (v == -1 && type != '*'))
            return false;
        if (v == -1) {
            if (w->ctx)
                rm.ReplyWithNullArray(w->ctx);
            return true;
        }
        /* Every element takes at least 3 bytes: a count beyond what is
         * left is damage, refused before anything is sent (and before it
         * is doubled for a map). */
        if (v > (w->end - w->p) / 3)
            return false;
        long long elems = type == '%' ? 2 * v : v;
        if (w->ctx) {
            if (type == '*')
                rm.ReplyWithArray(w->ctx, (long)v);
            else if (type == '%')
                rm.ReplyWithMap(w->ctx, (long)v);
            else
                rm.ReplyWithSet(w->ctx, (long)v);
        }
        for (long long i = 0; i < elems; i++)
            if (!walk(w, depth + 1))
                return false;
        return true;
    }
    default: return false;
    }
}

bool mh_reply(RedisModuleCtx *ctx, const reply *out)
{
    walker check = {NULL, out->buf, out->buf + out->len};
    if (out->failed || out->len == 0 || !walk(&check, 0) || check.p != check.end) {
        rm.ReplyWithError(ctx, "ERR bloomery: the command's reply could not be sent");
        return false;
    }
    walker send = {ctx, out->buf, out->buf + out->len};
    walk(&send, 0);
    return true;
}

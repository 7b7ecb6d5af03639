/* A growing text buffer; allocation failures are remembered, not fatal. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

static bool grow(textbuf *b, size_t need)
{
    if (b->failed)
        return false;
    if (b->len + need + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + need + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void tb_add(textbuf *b, const char *s, size_t n)
{
    if (!grow(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void tb_puts(textbuf *b, const char *s) { tb_add(b, s, strlen(s)); }

void tb_printf(textbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !grow(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void tb_label(textbuf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch >= 0x7f || ch == '%' || ch == '"' || ch == '\\') {
            char esc[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            tb_add(b, esc, 3);
        } else {
            tb_add(b, (const char *)&ch, 1);
        }
    }
}

void tb_free(textbuf *b)
{
    free(b->p);
    *b = (textbuf){0};
}

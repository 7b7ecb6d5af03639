/* A growing text buffer; allocation failures are remembered, not fatal. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "textbuf.h"

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

/* Length of the valid UTF-8 sequence at s[0..n), 0 if there is none. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t min, cp;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0) {
        len = 2, min = 0x80, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3, min = 0x800, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4, min = 0x10000, cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void tb_json_str(textbuf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    tb_add(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            tb_add(b, esc, 2);
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            tb_printf(b, "\\u%04x", c);
            i++;
        } else {
            size_t len = utf8_len(u + i, n - i);
            if (len == 0) {
                tb_puts(b, "\\ufffd");
                i++;
            } else {
                tb_add(b, s + i, len);
                i += len;
            }
        }
    }
    tb_add(b, "\"", 1);
}

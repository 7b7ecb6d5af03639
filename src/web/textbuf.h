/* A growing text buffer the HTTP pages and JSON answers are built in
 * (textbuf.c), shared by bloomeryd's console and `bloomery console`.
 * Allocation failures are remembered, not fatal. */
#ifndef BLOOMERY_WEB_TEXTBUF_H
#define BLOOMERY_WEB_TEXTBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct textbuf {
    char *p;
    size_t len, cap;
    bool failed; /* out of memory: the text is incomplete */
} textbuf;

void tb_add(textbuf *b, const char *s, size_t n);
void tb_puts(textbuf *b, const char *s);
void tb_printf(textbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as a Prometheus label value: bytes outside printable ASCII, '%', '"'
 * and '\\' as %XX, so any key name gives a valid, distinct label. */
void tb_label(textbuf *b, const char *s, size_t n);
void tb_free(textbuf *b);

/* s as a JSON string, quotes included; bytes that are not UTF-8 become
 * U+FFFD. */
void tb_json_str(textbuf *b, const char *s, size_t n);

#endif

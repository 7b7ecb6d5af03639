/* bloomeryd's HTTP listener (docs/CONSOLE.md): Prometheus metrics and the
 * management console, off unless http-port is set. A layer above net/: it
 * reads the workers' statistics and runs commands through the command table.
 *
 * Files, one concept each:
 *   http.c     the listener (libmicrohttpd's thread), authentication, routes
 *   metrics.c  /metrics in Prometheus's text format
 *   textbuf.c  a growing text buffer the pages are built in
 */
#ifndef BLOOMERYD_HTTP_H
#define BLOOMERYD_HTTP_H

#include <stdbool.h>
#include <stddef.h>

/* Start listening on http-bind:http-port when http-port is not 0; false
 * with err when the address cannot be used. */
bool http_start(char *err, size_t errlen);
void http_stop(void);

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

/* The whole /metrics page (malloc'd text in *out); false when out of
 * memory. */
bool metrics_render(textbuf *out);

#endif

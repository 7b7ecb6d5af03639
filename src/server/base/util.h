/* Small helpers shared by the server: number parsing with Redis's rules,
 * memory units, clocks; glob matching for KEYS/SCAN/CONFIG GET from
 * src/web/glob.h, shared with the CLI. */
#ifndef BLOOMERYD_UTIL_H
#define BLOOMERYD_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glob.h"

/* Redis's string2ll: optional '-', no '+', no leading zeros, no spaces. */
bool str_to_ll(const char *s, size_t len, long long *out);
/* Redis's string2d: strtod over the whole string, no leading space, no NaN,
 * no overflow/underflow (ERANGE). */
bool str_to_double(const char *s, size_t len, double *out);
/* "100", "1k" (1000), "1kb" (1024), "1m", "1mb", "1g", "1gb"; false if bad. */
bool str_to_mem(const char *s, size_t len, long long *out);

/* Case-insensitive equality of a counted string and a C string. */
bool str_eq_ci(const char *s, size_t len, const char *lit);

int64_t now_ms(void);  /* wall clock, ms */
int64_t now_us(void);  /* wall clock, us */
int64_t mono_us(void); /* monotonic, us */

/* "1.50M" style for INFO's *_human fields. */
void bytes_human(char *out, size_t n, unsigned long long bytes);

/* A NUL-terminated copy of exactly s[0..n), embedded NULs included (strndup
 * stops at the first), or NULL when out of memory. */
char *mem_dup(const char *s, size_t n);

/* A growing NUL-terminated string; {0} is empty. After an allocation
 * failure it keeps failed set and takes nothing more; the owner frees p. */
typedef struct strbuf {
    char *p;
    size_t len, cap;
    bool failed;
} strbuf;
void strbuf_add(strbuf *b, const char *s, size_t n);
void strbuf_str(strbuf *b, const char *s);

#endif

/* Shared helpers for the cmocka suites: deterministic keys and scaling of
 * heavy loops (sanitizer builds set BLOOMERY_QUICK=1 and run smaller sizes). */
#ifndef BLOOMERY_TESTUTIL_H
#define BLOOMERY_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* A test that starts threads. ThreadSanitizer finds races only between
 * threads, so its build runs these alone (testutil.c sets cmocka's filter
 * to their names' suffix): every other test already runs in the release and
 * ASan builds, and under TSan it only took minutes of CPU. A test that
 * starts threads must be marked so, or TSan never sees it. */
#define TU_THREADS_SUFFIX " (threads)"
#define tu_threaded_test(f)                                                                        \
    {                                                                                              \
#f TU_THREADS_SUFFIX, f, NULL, NULL, NULL                                                  \
    }
#define tu_threaded_test_teardown(f, t)                                                            \
    {                                                                                              \
#f TU_THREADS_SUFFIX, f, NULL, t, NULL                                                     \
    }

/* splitmix64: a fixed-seed generator so every run sees the same keys. */
uint64_t tu_next(uint64_t *state);

/* Writes "<prefix><n>" into buf (size >= 32); returns its length. Members and
 * non-members use different prefixes so they never collide. */
size_t tu_key(char *buf, const char *prefix, uint64_t n);

/* 1 when BLOOMERY_QUICK is set in the environment. */
int tu_quick(void);

/* full when not quick, else quick_value. */
uint64_t tu_scale(uint64_t full, uint64_t quick_value);

/* Allowed maximum of a measured rate: p + 3 sigma of a binomial with q trials. */
double tu_fpr_bound(double p, uint64_t q);

/* Path of a file in the vectors directory (BLOOMERY_VECTORS); static buffer. */
const char *tu_vector_path(const char *name);

/* Reads a whole file; NULL on error. */
char *tu_read_file(const char *path, size_t *len);

/* Flattened vectors (tests/vectors/flatten.py): load "<name>.flat" from
 * BLOOMERY_VECTORS, then look values up by path. */
typedef struct tu_flat tu_flat;
tu_flat *tu_flat_load(const char *name);
void tu_flat_free(tu_flat *f);
/* Kind character of path ('s','i','f','b','n','a','o') or 0 if absent. */
char tu_flat_kind(const tu_flat *f, const char *path);
long long tu_flat_int(const tu_flat *f, const char *path); /* i, b, a, o */
double tu_flat_double(const tu_flat *f, const char *path); /* i, f */
/* String bytes (hex-decoded) into a malloc'd buffer; *len receives the length. */
unsigned char *tu_flat_str(const tu_flat *f, const char *path, size_t *len);
/* Decodes a hex string value into bytes (for "hex data" fields). */
unsigned char *tu_hex_decode(const char *hex, size_t hexlen, size_t *len);
#endif

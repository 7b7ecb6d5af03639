/* The console API's inputs (api_args.c): pure, fuzzed. */
#ifndef BLOOMERY_WEB_API_ARGS_H
#define BLOOMERY_WEB_API_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A filter to create, as the console's form sends it; NULL or "" for a
 * field left out. name may hold any bytes (name_len of them). */
typedef struct api_filter_form {
    const char *name;
    size_t name_len;
    const char *capacity, *error_rate, *expiry, *layout, *window, *slices;
} api_filter_form;

#define API_RESERVE_MAX_ARGS 12

bool api_parse_count(const char *s, uint64_t *v);
bool api_parse_rate(const char *s, double *v);
/* BF.RESERVE's arguments for f into argv/lens (API_RESERVE_MAX_ARGS of
 * room); their count, or -1 with err when a required field is missing. */
int api_reserve_argv(const api_filter_form *f, const char **argv, size_t *lens, char *err,
                     size_t errlen);

typedef struct api_size {
    const char *layout;
    uint64_t bytes;
    double bits_per_key, fpr; /* expected FPR at capacity */
} api_size;
/* The sizing calculator: what BF.RESERVE would allocate. */
bool api_sizing(const char *capacity, const char *error_rate, const char *layout,
                const char *window, const char *slices, api_size *out, char *err, size_t errlen);

#endif

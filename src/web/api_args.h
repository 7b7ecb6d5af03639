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

/* GET /api/filters' paging and sorting. A parameter left out is NULL or
 * "". Columns are named as the answer's fields ("memory" is "bytes"). */
typedef enum {
    API_SORT_NAME,
    API_SORT_TYPE,
    API_SORT_LAYOUT,
    API_SORT_CAPACITY,
    API_SORT_ITEMS,
    API_SORT_FILL,
    API_SORT_FPR,
    API_SORT_BYTES,
    API_SORT_PARTS,
    API_SORT_TTL,
} api_sort;

typedef struct api_list_query {
    api_sort sort;
    bool desc;
    uint64_t page;     /* from 1 */
    uint64_t per_page; /* 1 .. max_per_page */
} api_list_query;

/* The query's sort, order (asc, desc), page and per_page (default
 * def_per_page, at most max_per_page); false with err for a value that is
 * none of those. */
bool api_list_query_parse(const char *sort, const char *order, const char *page,
                          const char *per_page, uint64_t def_per_page, uint64_t max_per_page,
                          api_list_query *q, char *err, size_t errlen);

/* The items of a form's field, one a line ("\n" or "\r\n"; empty lines
 * skipped), into argv/lens (room for max): how many there were, which may
 * be more than max (those past max are not stored). */
size_t api_split_lines(const char *s, size_t n, const char **argv, size_t *lens, size_t max);

#endif

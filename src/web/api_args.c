/* The console API's inputs: numbers of the sizing calculator and the
 * fields of a filter to create turned into BF.RESERVE's arguments. Pure
 * (no server state), fuzzed by fuzz/fuzz_http_api.c. The values of a
 * command's arguments are not checked here: the command's handler does,
 * as for any client. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_args.h"
#include "bloomery/counting.h"
#include "bloomery/scalable.h"
#include "bloomery/sizing.h"
#include "bloomery/window.h"

bool api_parse_count(const char *s, uint64_t *v)
{
    /* Digits, or a number in exponent form ("1e9"), as the calculator's
     * users write capacities. */
    if (s == NULL || *s == '\0' || strlen(s) > 32)
        return false;
    char *end;
    double d = strtod(s, &end);
    if (*end != '\0' || !(d >= 1) || d > 1e15 || d != floor(d))
        return false;
    *v = (uint64_t)d;
    return true;
}

bool api_parse_rate(const char *s, double *v)
{
    if (s == NULL || *s == '\0' || strlen(s) > 32)
        return false;
    char *end;
    double d = strtod(s, &end);
    if (*end != '\0' || !(d > 0 && d < 1))
        return false;
    *v = d;
    return true;
}

static bool present(const char *s) { return s && s[0]; }

int api_reserve_argv(const api_filter_form *f, const char **argv, size_t *lens, char *err,
                     size_t errlen)
{
    int n = 0;
#define ARG(s) (argv[n] = (s), lens[n] = strlen(argv[n]), n++)
    if (!present(f->name) || !present(f->capacity) || !present(f->error_rate)) {
        snprintf(err, errlen, "name, capacity and error_rate are required");
        return -1;
    }
    ARG("BF.RESERVE");
    argv[n] = f->name;
    lens[n++] = f->name_len;
    ARG(f->error_rate);
    ARG(f->capacity);
    if (present(f->window)) {
        ARG("WINDOW");
        ARG(f->window);
        if (present(f->slices)) {
            ARG("SLICES");
            ARG(f->slices);
        }
    } else if (present(f->layout) && strcmp(f->layout, "counting") == 0) {
        ARG("COUNTING");
    } else if (present(f->layout)) {
        ARG("LAYOUT");
        ARG(f->layout);
    }
    if (present(f->expiry)) {
        ARG("TTL");
        ARG(f->expiry);
    }
#undef ARG
    return n;
}

bool api_sizing(const char *capacity, const char *error_rate, const char *layout,
                const char *window, const char *slices, api_size *out, char *err, size_t errlen)
{
    uint64_t n, s = 4; /* BF.RESERVE's default slices */
    double p;
    if (!api_parse_count(capacity, &n) || !api_parse_rate(error_rate, &p)) {
        snprintf(err, errlen, "capacity must be a whole number >= 1 and error_rate in (0, 1)");
        return false;
    }
    if (present(window) && present(slices) && (!api_parse_count(slices, &s) || s > 64)) {
        snprintf(err, errlen, "slices must be 1 to 64");
        return false;
    }
    *out = (api_size){.layout = "blocked"};
    unsigned b = bloomery_blocks_per_key(p, BLOOMERY_POLICY_LATENCY);
    if (present(window)) {
        out->layout = "window";
        out->bytes = win_bytes_for(n, p, (unsigned)s, NULL);
        /* s+1 slices at p/(s+1) each: at most p for the ring. */
        out->fpr = p;
    } else if (present(layout) && strcmp(layout, "counting") == 0) {
        out->layout = "counting";
        out->bytes = cntbf_bytes_for(n, p, NULL);
        /* Lanes of 16 counters, and as many blocks per key as need the
         * fewest bits (the counting filter's policy). */
        unsigned cb = 1;
        double best = INFINITY;
        for (unsigned k = 1; k <= 4; k++) {
            double c = bloomery_bits_per_key_split(p * BLOOMERY_SIZING_MARGIN, k, 16);
            if (c < best)
                best = c, cb = k;
        }
        out->fpr = bloomery_model_fpr_split((double)out->bytes * 8 / (double)n, cb, 16);
    } else if (present(layout) && strcmp(layout, "classic") == 0) {
        sbf_options o = {.layout = BLOOMERY_LAYOUT_CLASSIC, .expansion = 2};
        out->layout = "classic";
        out->bytes = sbf_bytes_for(n, p, &o);
        out->fpr = bloomery_classic_fpr((double)bloomery_classic_bits(n, p) / (double)n,
                                        bloomery_classic_hashes(p));
    } else if (present(layout) && strcmp(layout, "prefix") == 0) {
        sbf_options o = {.layout = BLOOMERY_LAYOUT_PREFIX, .expansion = 2};
        pf_shape sh;
        out->layout = "prefix";
        out->bytes = sbf_bytes_for(n, p, &o);
        /* The first link is built at p/2, as a classic chain's. */
        out->fpr = pf_plan(p * 0.5, &sh) == 0 ? sh.model_fpr : p;
    } else if (present(layout) && strcmp(layout, "growing") == 0) {
        sbf_options o = {.layout = BLOOMERY_LAYOUT_GROWING, .expansion = 2};
        out->layout = "growing";
        out->bytes = sbf_bytes_for(n, p, &o);
        out->fpr = p; /* the bound it keeps however far it grows */
    } else if (!present(layout) || strcmp(layout, "blocked") == 0) {
        sbf_options o = {.layout = BLOOMERY_LAYOUT_BLOCKED, .expansion = 2};
        out->bytes = sbf_bytes_for(n, p, &o);
        out->fpr = bloomery_model_fpr_split((double)out->bytes * 8 / (double)n, b, 64);
    } else {
        snprintf(err, errlen, "layout must be blocked, classic, prefix, growing or counting");
        return false;
    }
    if (out->bytes == 0) {
        snprintf(err, errlen, "no filter of that size can be made");
        return false;
    }
    out->bits_per_key = (double)out->bytes * 8 / (double)n;
    return true;
}

static const char *const sort_names[] = {
    [API_SORT_NAME] = "name",         [API_SORT_TYPE] = "type",   [API_SORT_LAYOUT] = "layout",
    [API_SORT_CAPACITY] = "capacity", [API_SORT_ITEMS] = "items", [API_SORT_FILL] = "fill",
    [API_SORT_FPR] = "fpr",           [API_SORT_BYTES] = "bytes", [API_SORT_PARTS] = "parts",
    [API_SORT_TTL] = "ttl",
};

/* A page number or size: digits only, no sign or exponent. */
static bool parse_whole(const char *s, uint64_t *v)
{
    if (s == NULL || *s == '\0' || strlen(s) > 15)
        return false;
    uint64_t n = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        n = n * 10 + (uint64_t)(*s - '0');
    }
    *v = n;
    return true;
}

bool api_list_query_parse(const char *sort, const char *order, const char *page,
                          const char *per_page, uint64_t def_per_page, uint64_t max_per_page,
                          api_list_query *q, char *err, size_t errlen)
{
    *q = (api_list_query){.sort = API_SORT_NAME, .page = 1, .per_page = def_per_page};
    if (present(sort)) {
        size_t i = 0, n = sizeof(sort_names) / sizeof(*sort_names);
        while (i < n && strcmp(sort, sort_names[i]) != 0)
            i++;
        if (i == n && strcmp(sort, "memory") == 0)
            i = API_SORT_BYTES;
        if (i == n) {
            snprintf(err, errlen,
                     "sort must be name, type, layout, capacity, items, fill, fpr, bytes, "
                     "parts or ttl");
            return false;
        }
        q->sort = (api_sort)i;
    }
    if (present(order)) {
        if (strcmp(order, "desc") == 0)
            q->desc = true;
        else if (strcmp(order, "asc") != 0) {
            snprintf(err, errlen, "order must be asc or desc");
            return false;
        }
    }
    if (present(page) && (!parse_whole(page, &q->page) || q->page == 0)) {
        snprintf(err, errlen, "page must be a whole number >= 1");
        return false;
    }
    if (present(per_page) &&
        (!parse_whole(per_page, &q->per_page) || q->per_page == 0 || q->per_page > max_per_page)) {
        snprintf(err, errlen, "per_page must be 1 to %llu", (unsigned long long)max_per_page);
        return false;
    }
    if (q->per_page == 0 || q->per_page > max_per_page)
        q->per_page = max_per_page ? max_per_page : 1;
    return true;
}

size_t api_split_lines(const char *s, size_t n, const char **argv, size_t *lens, size_t max)
{
    size_t count = 0, start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '\n')
            continue;
        size_t len = i - start;
        if (len && s[start + len - 1] == '\r')
            len--;
        if (len) {
            if (count < max) {
                argv[count] = s + start;
                lens[count] = len;
            }
            count++;
        }
        start = i + 1;
    }
    return count;
}

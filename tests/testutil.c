#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t tu_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

size_t tu_key(char *buf, const char *prefix, uint64_t n)
{
    return (size_t)snprintf(buf, 32, "%s%llu", prefix, (unsigned long long)n);
}

#if defined(__SANITIZE_THREAD__)
#include <setjmp.h>
#include <stdarg.h>

#include <cmocka.h>

/* See tu_threaded_test. */
__attribute__((constructor)) static void only_threaded_tests(void)
{
    cmocka_set_test_filter("*" TU_THREADS_SUFFIX);
}
#endif

int tu_quick(void)
{
    const char *q = getenv("BLOOMERY_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

uint64_t tu_scale(uint64_t full, uint64_t quick_value) { return tu_quick() ? quick_value : full; }

double tu_fpr_bound(double p, uint64_t q) { return p + 3.0 * sqrt(p * (1.0 - p) / (double)q); }

const char *tu_vector_path(const char *name)
{
    static char path[4096];
    const char *dir = getenv("BLOOMERY_VECTORS");
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/vectors", name);
    return path;
}

char *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long n = ftell(f);
    rewind(f);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return NULL;
    }
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

typedef struct tu_flat_entry {
    char *path;
    char kind;
    char *value;
} tu_flat_entry;

struct tu_flat {
    char *text;
    tu_flat_entry *e;
    size_t n;
};

tu_flat *tu_flat_load(const char *name)
{
    char file[256];
    snprintf(file, sizeof file, "%s.flat", name);
    size_t len;
    char *text = tu_read_file(tu_vector_path(file), &len);
    if (!text)
        return NULL;
    tu_flat *f = calloc(1, sizeof *f);
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    f->text = text;
    f->e = calloc(lines + 1, sizeof *f->e);
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        if (!nl)
            break;
        *nl = '\0';
        char *t1 = strchr(line, '\t');
        char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (t1 && t2) {
            *t1 = *t2 = '\0';
            f->e[f->n++] = (tu_flat_entry){line, t1[1], t2 + 1};
        }
        line = nl + 1;
    }
    return f;
}

void tu_flat_free(tu_flat *f)
{
    if (!f)
        return;
    free(f->text);
    free(f->e);
    free(f);
}

static const tu_flat_entry *flat_find(const tu_flat *f, const char *path)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->e[i].path, path) == 0)
            return &f->e[i];
    return NULL;
}

char tu_flat_kind(const tu_flat *f, const char *path)
{
    const tu_flat_entry *e = flat_find(f, path);
    return e ? e->kind : 0;
}

long long tu_flat_int(const tu_flat *f, const char *path)
{
    const tu_flat_entry *e = flat_find(f, path);
    return e ? strtoll(e->value, NULL, 10) : 0;
}

double tu_flat_double(const tu_flat *f, const char *path)
{
    const tu_flat_entry *e = flat_find(f, path);
    return e ? strtod(e->value, NULL) : 0.0;
}

unsigned char *tu_hex_decode(const char *hex, size_t hexlen, size_t *len)
{
    unsigned char *out = malloc(hexlen / 2 + 1);
    for (size_t i = 0; i + 1 < hexlen; i += 2) {
        unsigned v;
        sscanf(hex + i, "%2x", &v);
        out[i / 2] = (unsigned char)v;
    }
    *len = hexlen / 2;
    return out;
}

unsigned char *tu_flat_str(const tu_flat *f, const char *path, size_t *len)
{
    const tu_flat_entry *e = flat_find(f, path);
    if (!e || e->kind != 's') {
        *len = 0;
        return NULL;
    }
    return tu_hex_decode(e->value, strlen(e->value), len);
}

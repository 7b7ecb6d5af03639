/* The exact store's write buffer (exact_buffer.h). Keys are fingerprints,
 * uniformly spread: their first bytes index the set and the radix pass. */
#include <stdlib.h>
#include <string.h>

#include "exact_buffer.h"
#include "le.h"

static size_t home(const xs_buffer *b, const uint8_t *key)
{
    return (size_t)le_load(key, 8) & b->mask;
}

bool xb_has(const xs_buffer *b, const uint8_t *key)
{
    if (b->n == 0)
        return false;
    for (size_t h = home(b, key);; h = (h + 1) & b->mask) {
        uint32_t v = b->slot[h];
        if (v == 0)
            return false;
        if (memcmp(b->keys + XB_KEY * (v - 1), key, XB_KEY) == 0)
            return true;
    }
}

/* Keys and index doubled; the index at most half full. */
static bool grow(xs_buffer *b)
{
    size_t cap = b->cap ? 2 * b->cap : 4096;
    uint8_t *keys = realloc(b->keys, cap * XB_KEY);
    if (keys == NULL)
        return false;
    b->keys = keys;
    uint32_t *slot = calloc(2 * cap, sizeof(uint32_t));
    if (slot == NULL)
        return false;
    free(b->slot);
    b->slot = slot;
    b->cap = cap;
    b->mask = 2 * cap - 1;
    for (size_t i = 0; i < b->n; i++) {
        size_t h = home(b, b->keys + XB_KEY * i);
        while (b->slot[h])
            h = (h + 1) & b->mask;
        b->slot[h] = (uint32_t)i + 1;
    }
    return true;
}

bool xb_add(xs_buffer *b, const uint8_t *key)
{
    if (b->n == b->cap && !grow(b))
        return false;
    size_t h = home(b, key);
    for (uint32_t v; (v = b->slot[h]) != 0; h = (h + 1) & b->mask)
        if (memcmp(b->keys + XB_KEY * (v - 1), key, XB_KEY) == 0)
            return true;
    memcpy(b->keys + XB_KEY * b->n, key, XB_KEY);
    b->slot[h] = (uint32_t)++b->n;
    return true;
}

static int cmp_key(const void *a, const void *b) { return memcmp(a, b, XB_KEY); }

uint8_t *xb_sorted(const xs_buffer *b)
{
    /* One counting pass on the first two bytes, then each bucket (a few
     * dozen keys at most sizes) sorted on its own. */
    enum { BUCKETS = 1 << 16 };
    size_t *start = calloc(BUCKETS + 1, sizeof(size_t));
    uint8_t *out = malloc(b->n ? b->n * XB_KEY : 1);
    if (start == NULL || out == NULL) {
        free(start);
        free(out);
        return NULL;
    }
    for (size_t i = 0; i < b->n; i++) {
        const uint8_t *k = b->keys + XB_KEY * i;
        start[((size_t)k[0] << 8 | k[1]) + 1]++;
    }
    for (size_t i = 1; i <= BUCKETS; i++)
        start[i] += start[i - 1];
    for (size_t i = 0; i < b->n; i++) {
        const uint8_t *k = b->keys + XB_KEY * i;
        memcpy(out + XB_KEY * start[(size_t)k[0] << 8 | k[1]]++, k, XB_KEY);
    }
    /* start[i] is now the end of bucket i. */
    for (size_t i = 0, from = 0; i < BUCKETS; from = start[i++])
        if (start[i] - from > 1)
            qsort(out + XB_KEY * from, start[i] - from, XB_KEY, cmp_key);
    free(start);
    return out;
}

void xb_clear(xs_buffer *b)
{
    free(b->keys);
    free(b->slot);
    memset(b, 0, sizeof(*b));
}

size_t xb_bytes(const xs_buffer *b) { return b->cap * XB_KEY + (b->cap ? 2 * b->cap * 4 : 0); }

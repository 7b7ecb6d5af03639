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

static uint64_t tag_of(const uint8_t *key) { return le_load(key + 8, 4) << 32; }

#define SLOT_INDEX(v) ((uint32_t)(v))
#define SLOT_TAG(v) ((v)&0xffffffff00000000ull)

static bool slot_is(const xs_buffer *b, uint64_t v, uint64_t tag, const uint8_t *key)
{
    return SLOT_TAG(v) == tag && memcmp(b->keys + XB_KEY * (SLOT_INDEX(v) - 1), key, XB_KEY) == 0;
}

bool xb_has(const xs_buffer *b, const uint8_t *key)
{
    if (b->n == 0)
        return false;
    uint64_t tag = tag_of(key);
    for (size_t h = home(b, key);; h = (h + 1) & b->mask) {
        uint64_t v = b->slot[h];
        if (v == 0)
            return false;
        if (slot_is(b, v, tag, key))
            return true;
    }
}

/* Keys and index to cap; the index at most half full. */
static bool resize(xs_buffer *b, size_t cap)
{
    uint8_t *keys = realloc(b->keys, cap * XB_KEY);
    if (keys == NULL)
        return false;
    b->keys = keys;
    uint64_t *slot = calloc(2 * cap, sizeof(uint64_t));
    if (slot == NULL)
        return false;
    free(b->slot);
    b->slot = slot;
    b->cap = cap;
    b->mask = 2 * cap - 1;
    for (size_t i = 0; i < b->n; i++) {
        const uint8_t *k = b->keys + XB_KEY * i;
        size_t h = home(b, k);
        while (b->slot[h])
            h = (h + 1) & b->mask;
        b->slot[h] = (i + 1) | tag_of(k);
    }
    return true;
}

bool xb_reserve(xs_buffer *b, size_t cap)
{
    size_t p = 4096;
    while (p < cap)
        p *= 2;
    return b->n == 0 && p > b->cap ? resize(b, p) : true;
}

bool xb_add(xs_buffer *b, const uint8_t *key)
{
    if (b->n == b->cap && !resize(b, b->cap ? 2 * b->cap : 4096))
        return false;
    size_t h = home(b, key);
    uint64_t tag = tag_of(key);
    for (uint64_t v; (v = b->slot[h]) != 0; h = (h + 1) & b->mask)
        if (slot_is(b, v, tag, key))
            return true;
    memcpy(b->keys + XB_KEY * b->n, key, XB_KEY);
    b->slot[h] = ++b->n | tag;
    return true;
}

bool xb_add_many(xs_buffer *b, const uint8_t *keys, size_t n)
{
    enum { AHEAD = 8 };
    for (size_t i = 0; i < n; i++) {
        /* The index may grow within the batch: prefetch is only a hint. */
        if (i + AHEAD < n && b->slot)
            __builtin_prefetch(&b->slot[home(b, keys + XB_KEY * (i + AHEAD))]);
        if (!xb_add(b, keys + XB_KEY * i))
            return false;
    }
    return true;
}

static int cmp_key(const void *a, const void *b) { return memcmp(a, b, XB_KEY); }

void xb_sorted_into(const xs_buffer *b, uint8_t *out)
{
    /* One counting pass on the first two bytes, then each bucket (a few
     * dozen keys at most sizes) sorted on its own. */
    enum { BUCKETS = 1 << 16 };
    size_t *start = calloc(BUCKETS + 1, sizeof(size_t));
    if (start == NULL) {
        /* Without the counts: one sort of the whole. */
        memcpy(out, b->keys, b->n * XB_KEY);
        qsort(out, b->n, XB_KEY, cmp_key);
        return;
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
}

void xb_recycle(xs_buffer *b)
{
    if (b->slot)
        memset(b->slot, 0, 2 * b->cap * sizeof(uint64_t));
    b->n = 0;
}

void xb_clear(xs_buffer *b)
{
    free(b->keys);
    free(b->slot);
    memset(b, 0, sizeof(*b));
}

size_t xb_bytes(const xs_buffer *b) { return b->cap * XB_KEY + 2 * b->cap * sizeof(uint64_t); }

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

static uint64_t be_load(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

/* Keys of a short run in order: an insertion sort on the key as two
 * big-endian words, where qsort's call and memcmp per comparison were half
 * of the flusher's time. */
static void insertion_sort(uint8_t *k, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        uint8_t cur[XB_KEY];
        memcpy(cur, k + XB_KEY * i, XB_KEY);
        uint64_t hi = be_load(cur), lo = be_load(cur + 8);
        size_t j = i;
        for (; j > 0; j--) {
            const uint8_t *p = k + XB_KEY * (j - 1);
            uint64_t phi = be_load(p);
            if (phi < hi || (phi == hi && be_load(p + 8) <= lo))
                break;
        }
        memmove(k + XB_KEY * (j + 1), k + XB_KEY * j, XB_KEY * (i - j));
        memcpy(k + XB_KEY * j, cur, XB_KEY);
    }
}

enum { RADIX = 256, SHORT_RUN = 48 };

/* The n keys of src into dst by their byte at depth, stably; start[b] is
 * where bucket b begins in dst, start[RADIX] = n. */
static void counting_pass(const uint8_t *src, uint8_t *dst, size_t n, unsigned depth,
                          size_t start[RADIX + 1])
{
    memset(start, 0, (RADIX + 1) * sizeof(size_t));
    for (size_t i = 0; i < n; i++)
        start[src[XB_KEY * i + depth] + 1]++;
    for (size_t i = 1; i <= RADIX; i++)
        start[i] += start[i - 1];
    size_t at[RADIX];
    memcpy(at, start, sizeof(at));
    for (size_t i = 0; i < n; i++)
        memcpy(dst + XB_KEY * at[src[XB_KEY * i + depth]]++, src + XB_KEY * i, XB_KEY);
}

/* Sort n keys at k that agree on their first depth bytes: a counting pass
 * on byte depth through tmp (room for n keys), then each bucket alike. */
static void radix_sort(uint8_t *k, size_t n, unsigned depth, uint8_t *tmp)
{
    if (n <= SHORT_RUN || depth == XB_KEY) {
        insertion_sort(k, n);
        return;
    }
    size_t start[RADIX + 1];
    counting_pass(k, tmp, n, depth, start);
    memcpy(k, tmp, n * XB_KEY);
    for (size_t b = 0; b < RADIX; b++)
        if (start[b + 1] - start[b] > 1)
            radix_sort(k + XB_KEY * start[b], start[b + 1] - start[b], depth + 1, tmp);
}

void xb_sorted_into(const xs_buffer *b, uint8_t *out)
{
    /* The first byte's pass goes from the buffer straight into out, in
     * 256 sequential streams; each bucket (1/256 of the keys, uniformly
     * spread fingerprints) is then sorted within the cache. */
    size_t start[RADIX + 1];
    counting_pass(b->keys, out, b->n, 0, start);
    size_t largest = 0;
    for (size_t i = 0; i < RADIX; i++)
        if (start[i + 1] - start[i] > largest)
            largest = start[i + 1] - start[i];
    uint8_t *tmp = malloc((largest ? largest : 1) * XB_KEY);
    for (size_t i = 0; i < RADIX; i++) {
        size_t len = start[i + 1] - start[i];
        if (tmp)
            radix_sort(out + XB_KEY * start[i], len, 1, tmp);
        else /* without the room: each bucket by qsort */
            qsort(out + XB_KEY * start[i], len, XB_KEY, cmp_key);
    }
    free(tmp);
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

/* Exact set of byte strings: open addressing, linear probing, arena for the
 * key bytes (see hset.h). */
#include <stdlib.h>
#include <string.h>

#include "hset.h"

void hset_init(hset *s) { memset(s, 0, sizeof *s); }

void hset_free(hset *s)
{
    free(s->slots);
    free(s->arena);
    memset(s, 0, sizeof *s);
}

static uint64_t fix(uint64_t h) { return h ? h : 1; }

static hset_entry *probe(const hset *s, const void *key, size_t len, uint64_t h)
{
    for (uint64_t i = h & s->mask;; i = (i + 1) & s->mask) {
        hset_entry *e = &s->slots[i];
        if (e->hash == 0)
            return e;
        if (e->hash == h && e->len == len && (len == 0 || memcmp(s->arena + e->off, key, len) == 0))
            return e;
    }
}

static int rehash(hset *s, uint64_t nslots)
{
    hset_entry *old = s->slots;
    uint64_t oldn = s->slots ? s->mask + 1 : 0;
    hset_entry *n = calloc(nslots, sizeof *n);
    if (!n)
        return -1;
    s->slots = n;
    s->mask = nslots - 1;
    for (uint64_t i = 0; i < oldn; i++) {
        if (old[i].hash == 0)
            continue;
        uint64_t j = old[i].hash & s->mask;
        while (n[j].hash)
            j = (j + 1) & s->mask;
        n[j] = old[i];
    }
    free(old);
    return 0;
}

hset_entry *hset_insert(hset *s, const void *key, size_t len, uint64_t hash, bool *added)
{
    *added = false;
    if (len >= UINT32_MAX)
        return NULL;
    uint64_t h = fix(hash);
    if (!s->slots || (s->count + 1) * 8 > (s->mask + 1) * 5) {
        if (rehash(s, s->slots ? (s->mask + 1) * 2 : 1024) != 0)
            return NULL;
    }
    hset_entry *e = probe(s, key, len, h);
    if (e->hash)
        return e;
    if (s->arena_len + len > s->arena_cap) {
        uint64_t c = s->arena_cap ? s->arena_cap : 65536;
        while (c < s->arena_len + len)
            c *= 2;
        char *a = realloc(s->arena, c);
        if (!a)
            return NULL;
        s->arena = a;
        s->arena_cap = c;
    }
    if (len)
        memcpy(s->arena + s->arena_len, key, len);
    e->hash = h;
    e->off = s->arena_len;
    e->len = (uint32_t)len;
    e->seen = 0;
    s->arena_len += len;
    s->count++;
    *added = true;
    return e;
}

hset_entry *hset_find(const hset *s, const void *key, size_t len, uint64_t hash)
{
    if (!s->slots)
        return NULL;
    hset_entry *e = probe(s, key, len, fix(hash));
    return e->hash ? e : NULL;
}

uint64_t hset_bytes(const hset *s)
{
    return (s->slots ? (s->mask + 1) * sizeof(hset_entry) : 0) + s->arena_cap;
}

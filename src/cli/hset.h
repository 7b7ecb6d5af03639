/* An exact set of byte strings for dedup's suspects: open addressing with
 * linear probing on the caller's 128-bit hash (no rehashing of the keys),
 * key bytes in an arena, one "seen" flag per key. Grows at 5/8 load. Not
 * thread-safe: dedup gives each channel its own set. */
#ifndef BLOOMERY_CLI_HSET_H
#define BLOOMERY_CLI_HSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hset_entry {
    uint64_t hash; /* 0 marks an empty slot (hashes of 0 are stored as 1) */
    uint64_t off;  /* key bytes at arena + off */
    uint32_t len;
    uint32_t seen;
} hset_entry;

typedef struct hset {
    hset_entry *slots;
    uint64_t mask; /* slots - 1 */
    uint64_t count;
    char *arena;
    uint64_t arena_len, arena_cap;
} hset;

void hset_init(hset *s);
void hset_free(hset *s);

/* Inserts key if absent. Returns its entry (NULL when out of memory or the
 * key is 4 GiB or longer); *added tells whether it was new. The entry is
 * valid until the next insert. */
hset_entry *hset_insert(hset *s, const void *key, size_t len, uint64_t hash, bool *added);

/* The key's entry, or NULL. */
hset_entry *hset_find(const hset *s, const void *key, size_t len, uint64_t hash);

/* Starts fetching the slot where a lookup of hash begins. */
static inline void hset_prefetch(const hset *s, uint64_t hash)
{
    if (s->slots)
        __builtin_prefetch(&s->slots[(hash ? hash : 1) & s->mask]);
}

/* Bytes allocated (slots and arena). */
uint64_t hset_bytes(const hset *s);

#endif

/* The exact store's write buffer (exact_store.c): the fingerprints added to
 * one period since its last table file, as a set (appended in order, found
 * through an open-addressed index) that hands them out sorted to be
 * written as one table file. It replaces RocksDB's own write buffer: an
 * insert is one probe instead of a skip list's walk, and a flush is one
 * radix sort instead of a merge of the buffer's lists.
 */
#ifndef BLOOMERYD_EXACT_BUFFER_H
#define BLOOMERYD_EXACT_BUFFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XB_KEY 16

typedef struct xs_buffer {
    uint8_t *keys; /* n keys of XB_KEY bytes, in the order added */
    /* Open-addressed index: (index + 1) | tag << 32, 0 empty. The tag (key
     * bytes 8..11) settles most mismatches without reading the key. */
    uint64_t *slot;
    size_t n, cap, mask;
} xs_buffer;

/* True when key is in b. */
bool xb_has(const xs_buffer *b, const uint8_t *key);
/* Room for cap keys at once (an empty buffer), so that filling it never
 * rehashes: its pages are only touched as keys arrive. */
bool xb_reserve(xs_buffer *b, size_t cap);
/* Add key (nothing when present); false without the memory. */
bool xb_add(xs_buffer *b, const uint8_t *key);
/* Add n keys (16 bytes apart), their slots fetched ahead. */
bool xb_add_many(xs_buffer *b, const uint8_t *keys, size_t n);
void xb_clear(xs_buffer *b);
/* Empty it but keep its memory for the next keys: the index is zeroed in
 * place, where fresh memory would be zeroed by page faults. */
void xb_recycle(xs_buffer *b);
/* A copy of b's keys, sorted ascending, into out, which holds b->n keys:
 * b stays as it is until it is written out. */
void xb_sorted_into(const xs_buffer *b, uint8_t *out);
/* Bytes held. */
size_t xb_bytes(const xs_buffer *b);

#endif

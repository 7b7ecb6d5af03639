/* RedisBloom's RDB encodings of its Bloom filters (module type MBbloom--,
 * encoding versions 2 to 4; 0 and 1, from RedisBloom 1.x, hash with 32 bits
 * and are refused) and cuckoo filters (MBbloomCF, versions 0 to 4), read
 * into our classic-layout chain and our cuckoo filter bit for bit, and
 * written back in RedisBloom's latest version (4).
 *
 * Pure: the fields come from an abstract reader (Redis's RDB calls in the
 * module, src/module/rb_types.c; a byte buffer in the fuzz target) and only
 * the library is used, so arbitrary input is checked field by field and
 * refused with a reason, never trusted.
 *
 * Bloom, in RDB order: total items, filters, options, [growth (v >= 4;
 * else 2)], then per link: capacity, error rate (double), hashes, bits per
 * entry (double), bits, n2, the bit array (string), items.
 * Cuckoo: filters, buckets, items, [deletes, bucket size, max iterations,
 * expansion (v >= 4; else 0, 2, 20, 1)], then per sub-filter: [buckets
 * (v >= 4; else all have the top-level count)], the buckets (string), one
 * byte per slot.
 */
#ifndef BLOOMERYD_RB_RDB_H
#define BLOOMERYD_RB_RDB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomery/bloomery.h"

#define RB_BLOOM_ENCVER 4
#define RB_CUCKOO_ENCVER 4

typedef struct rb_reader {
    void *ctx;
    /* Each returns false once the input is exhausted or damaged. A string
     * stays valid until the next call. */
    bool (*get_unsigned)(void *ctx, uint64_t *v);
    bool (*get_double)(void *ctx, double *v);
    bool (*get_string)(void *ctx, const uint8_t **p, size_t *len);
} rb_reader;

typedef struct rb_writer {
    void *ctx;
    void (*put_unsigned)(void *ctx, uint64_t v);
    void (*put_double)(void *ctx, double v);
    void (*put_string)(void *ctx, const uint8_t *p, size_t len);
} rb_writer;

/* A Bloom chain of encoding version encver: BLOOMERY_OK and *out, or an
 * error code with *why saying what was refused. Bit arrays summing to more
 * than max_bytes are refused (BLOOMERY_ETOOBIG) before they are allocated. */
int rb_read_bloom(const rb_reader *r, int encver, uint64_t max_bytes, sbf_t **out,
                  const char **why);
/* A cuckoo filter, likewise; max_filters: the sub-filters an add may start
 * from (raised to the filter's own count). */
int rb_read_cuckoo(const rb_reader *r, int encver, uint64_t max_bytes, unsigned max_filters,
                   cf_t **out, const char **why);

/* The classic chain RedisBloom's header h describes, over links built from
 * its shapes (n of them, in order): RedisBloom's rules for the chain's
 * requested rate (a scaling chain's first link has half of it) and growth.
 * Takes the links on success. Shared with BF.LOADCHUNK of RedisBloom's
 * SCANDUMP header (restore.c). */
int rb_chain_assemble(const cbf_rb_header *h, void **links, uint32_t n, sbf_t **out);

/* RedisBloom's CF.SCANDUMP: a 38-byte header (packed, little-endian: items,
 * buckets of sub-filter 0, deletes, sub-filters as u64; bucket size, max
 * iterations, expansion as u16), then the sub-filters' tables laid end to
 * end, one byte per slot, in chunks within one table, each with iterator
 * 1 + the offset of its end. The header as an empty cuckoo filter of that
 * shape (checked as rb_read_cuckoo checks, BLOOMERY_EINVAL for another
 * length); a chunk into c (8-bit fingerprints) at its place, through the
 * write barrier: BLOOMERY_EINVAL when empty or not inside one table. */
#define RB_CF_DUMP_HEADER_LEN 38
int rb_cuckoo_dump_header(const uint8_t *buf, size_t len, uint64_t max_bytes, unsigned max_filters,
                          cf_t **out, const char **why);
int rb_cuckoo_dump_chunk(cf_t *c, long long iter, const uint8_t *data, size_t len);

/* Version 4 of a classic-layout chain / a cuckoo filter of 8-bit
 * fingerprints (what the readers build); false for any other value. */
bool rb_write_bloom(const rb_writer *w, const sbf_t *f);
bool rb_write_cuckoo(const rb_writer *w, const cf_t *c);

#endif

/* Restoring a dump into a key: the core of BF.LOADCHUNK and CF.LOADCHUNK,
 * shared by the commands and the replay of their log records (the loading
 * types' descriptors, type_loading.c), so a replayed chunk does exactly
 * what the command did.
 *
 * Called with the key open exclusively (ref, e its entry or NULL when
 * missing); a header (iterator 1) on a missing key creates it. The caller
 * logs an accepted chunk before closing the key. Formats: dump.h.
 */
#ifndef BLOOMERYD_RESTORE_H
#define BLOOMERYD_RESTORE_H

#include <stddef.h>
#include <stdint.h>

#include "keyspace.h"
#include "types.h"

/* A Bloom or counting filter's chunk, either format. On VS_BAD_CHUNK,
 * *detail is the image loader's reason when it has one (else NULL), valid
 * while the key stays open. */
value_status restore_bf_chunk(ks_ref *ref, kv_entry *e, long long iter, const uint8_t *data,
                              size_t len, const char **detail);
/* A cuckoo filter's chunk: ours (the image, iter >= 1) or RedisBloom's
 * (its header as iter 1 on a missing key, then its chunks into a filter of
 * 8-bit fingerprints, at any time, as RedisBloom takes them). */
value_status restore_cf_chunk(ks_ref *ref, kv_entry *e, long long iter, const uint8_t *data,
                              size_t len);

/* The replay of a WAL_LOADCHUNK or WAL_CF_LOADCHUNK record (the loading
 * types' descriptors): NULL when applied, else why it was skipped. A header
 * (iterator 1) loads only onto a missing key, so the key is dropped first,
 * as it was missing then. */
const char *restore_replay(const wal_op *op);

#endif

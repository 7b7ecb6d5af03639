/* Dumps in bloomery's own format (serial.h images), shared by BF.SCANDUMP /
 * BF.LOADCHUNK for blocked and counting filters and CF.SCANDUMP /
 * CF.LOADCHUNK: the image header is the first chunk, then every chunk is
 * sent as its bytes followed by their 8-byte checksum. Classic-layout
 * chains dump in RedisBloom's format instead: a header, then the links'
 * bit arrays as one byte range. Replies and error strings stay with the
 * commands, which follow RedisBloom's per family; restore.h applies a
 * chunk to a key. */
#ifndef BLOOMERYD_DUMP_H
#define BLOOMERYD_DUMP_H

#include <stdbool.h>
#include <stdint.h>

#include "bloomery/serial.h"
#include "keyspace.h"
#include "reply.h"

/* The bulk of chunk i: its bytes and a checksum of the copy that is sent, so
 * writers changing the live bits meanwhile cannot make the pair disagree. */
void dump_reply_chunk(reply *r, const bloomery_image *img, uint64_t i);

/* RedisBloom's format: the link of a classic chain holding byte off of its
 * links' bit arrays laid end to end in creation order, and where that link
 * starts (*link_start). sbf_nlinks(f) when off is past the end. */
size_t dump_classic_link_at(const sbf_t *f, uint64_t off, uint64_t *link_start);

/* Bytes a loader may still allocate under ks_mem_limit (0: no limit). */
uint64_t dump_load_limit(void);

/* A header for a missing key: a loading object of type `loading` whose image
 * must be one of the `n` types in `types`. NULL when the header is refused;
 * *rc says why (BLOOMERY_ENOMEM / BLOOMERY_ETOOBIG for memory). */
kv_obj *dump_open(const uint8_t *buf, size_t len, const value_type *loading,
                  const bloomery_type *types, size_t ntypes, int *rc);

/* Chunk i (bytes plus checksum) into a loading object. Returns BLOOMERY_OK
 * and, once every chunk has arrived, fills *done with the loaded object
 * (done->u.any is NULL until then); the loader is freed then and the caller
 * turns o into its final type. On error the object is unchanged and
 * bloomery_loader_error(o->v) says why. */
int dump_load_chunk(kv_obj *o, uint64_t i, const uint8_t *data, size_t len, bloomery_object *done);

#endif

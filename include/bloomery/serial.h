/* Serialization: every structure as a header plus fixed-size checksummed
 * chunks.
 *
 * An image describes a live object: a header (magic, format version, type,
 * parameters, the size of every data region, chunk size, and an XXH3-64 of
 * all of it) and the object's data regions cut into chunks of at most
 * chunk_size bytes (a chunk never spans two regions). Each chunk carries an
 * XXH3-64 checksum seeded with the header checksum and the chunk's index, so
 * a chunk cannot be moved to another place or another object unnoticed.
 * Snapshots store the header and chunks separately; bloomery_serialize()
 * writes them back to back (header, then each chunk followed by its 8-byte
 * checksum) as one blob.
 *
 * Chunk pointers point into the live object. Bloom bits only go from 0 to 1,
 * so copying them while writers run yields a state between the start and the
 * end of the copy; the other types must not be written during a copy, unless
 * their writers first save what they change (the write barriers of cuckoo.h
 * and counting.h, located with bloomery_image_chunk_at). An image keeps the
 * region pointers and sizes it was made with and never reads through them
 * itself.
 *
 * Loading checks everything before trusting it: sizes against the type's
 * rules and a caller-supplied maximum, every checksum, every chunk present
 * exactly once. Any damage gives an error code and a message, never a crash
 * and never a half-loaded object.
 */
#ifndef BLOOMERY_SERIAL_H
#define BLOOMERY_SERIAL_H

#include <stddef.h>
#include <stdint.h>

#include "bloomery/blocked.h"
#include "bloomery/cms.h"
#include "bloomery/counting.h"
#include "bloomery/cuckoo.h"
#include "bloomery/hll.h"
#include "bloomery/scalable.h"
#include "bloomery/topk.h"
#include "bloomery/tdigest.h"
#include "bloomery/window.h"
#include "bloomery/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BLOOMERY_SERIAL_VERSION 1
#define BLOOMERY_CHUNK_DEFAULT (2u << 20) /* 2 MiB */
#define BLOOMERY_CHUNK_MAX (64u << 20)

typedef enum bloomery_type {
    BLOOMERY_TYPE_BLOCKED = 1,  /* bf_t */
    BLOOMERY_TYPE_SCALABLE = 2, /* sbf_t, blocked or classic links */
    BLOOMERY_TYPE_COUNTING = 3, /* cntbf_t */
    BLOOMERY_TYPE_HLL = 4,      /* hll_t */
    BLOOMERY_TYPE_CUCKOO = 5,   /* cf_t */
    BLOOMERY_TYPE_WINDOW = 6,   /* win_t */
    BLOOMERY_TYPE_CMS = 7,      /* cms_t */
    BLOOMERY_TYPE_TOPK = 8,     /* topk_t */
    BLOOMERY_TYPE_TDIGEST = 9,  /* tdigest_t */
} bloomery_type;

typedef struct bloomery_object {
    bloomery_type type;
    union {
        bf_t *bf;
        sbf_t *sbf;
        cntbf_t *cnt;
        hll_t *hll;
        cf_t *cf;
        win_t *win;
        cms_t *cms;
        topk_t *topk;
        tdigest_t *td;
        void *any;
    } u;
} bloomery_object;

BLOOMERY_API void bloomery_object_free(bloomery_object *o);

/* ---- writing ---- */

typedef struct bloomery_image bloomery_image;

/* chunk_size 0 means BLOOMERY_CHUNK_DEFAULT. The object must outlive the
 * image and keep its shape (no growth) while the image is in use. */
BLOOMERY_API int bloomery_image_create(bloomery_image **out, bloomery_object obj,
                                       uint32_t chunk_size);
BLOOMERY_API void bloomery_image_free(bloomery_image *img);

BLOOMERY_API const uint8_t *bloomery_image_header(const bloomery_image *img, size_t *len);
BLOOMERY_API uint64_t bloomery_image_nchunks(const bloomery_image *img);
/* Pointer into the object and length of chunk i. */
BLOOMERY_API const uint8_t *bloomery_image_chunk(const bloomery_image *img, uint64_t i,
                                                 size_t *len);
/* The chunk holding byte `offset` of data region r (a write barrier's
 * position: cf_set_write_hook, cntbf_set_write_hook), with the byte's offset
 * in that chunk in *at; UINT64_MAX when the image has no such byte (a region
 * or an offset the object did not have when the image was made). */
BLOOMERY_API uint64_t bloomery_image_chunk_at(const bloomery_image *img, uint32_t r,
                                              uint64_t offset, size_t *at);
/* Checksum of chunk i's bytes (from a copy of them, as they were copied). */
BLOOMERY_API uint64_t bloomery_image_chunk_checksum(const bloomery_image *img, uint64_t i,
                                                    const uint8_t *data, size_t len);

/* The whole object as one malloc'd blob. */
BLOOMERY_API int bloomery_serialize(bloomery_object obj, uint32_t chunk_size, uint8_t **out,
                                    size_t *len);

/* ---- reading ---- */

typedef struct bloomery_loader bloomery_loader;

/* Parse and verify a header (first `len` bytes of buf; *used receives its
 * length) and allocate the zeroed object, refusing objects whose data would
 * exceed max_bytes (0: no limit). On failure *out may still hold a loader,
 * whose bloomery_loader_error() says why; free it with bloomery_loader_free. */
BLOOMERY_API int bloomery_loader_open(bloomery_loader **out, const uint8_t *buf, size_t len,
                                      uint64_t max_bytes, size_t *used);
BLOOMERY_API uint64_t bloomery_loader_nchunks(const bloomery_loader *l);
/* The type the opened header describes. */
BLOOMERY_API bloomery_type bloomery_loader_type(const bloomery_loader *l);
BLOOMERY_API size_t bloomery_loader_chunk_len(const bloomery_loader *l, uint64_t i);
/* Verify and copy chunk i. */
BLOOMERY_API int bloomery_loader_chunk(bloomery_loader *l, uint64_t i, const uint8_t *data,
                                       size_t len, uint64_t checksum);
/* Filling chunks on several threads at once. Where chunk i's bytes go
 * (*len receives its length; NULL when i is out of range or no header is
 * loaded): */
BLOOMERY_API uint8_t *bloomery_loader_chunk_dest(bloomery_loader *l, uint64_t i, size_t *len);
/* Verify chunk i against its checksum, put it in place and count it
 * loaded: data (data_len bytes) is copied to its dest, all-zero 4 KiB pages
 * skipped, so a mostly empty object stays mostly unallocated; data NULL
 * means the bytes were written at dest already. Safe to call from several
 * threads at once for distinct chunks; the message of a failure goes to
 * err (as bloomery_loader_error would say it), not to the loader; bytes
 * refused in place are zeroed again, so the chunk may be retried. Until
 * bloomery_loader_finish succeeds the object's bytes are not to be
 * trusted. */
BLOOMERY_API int bloomery_loader_chunk_placed(bloomery_loader *l, uint64_t i, const uint8_t *data,
                                              size_t data_len, uint64_t checksum, char *err,
                                              size_t errlen);
/* All chunks must have been loaded; hands over the object. The loader is
 * spent then: later chunk calls fail with BLOOMERY_ESTATE. */
BLOOMERY_API int bloomery_loader_finish(bloomery_loader *l, bloomery_object *out);
/* Why the last call failed: a message naming the field or chunk. */
BLOOMERY_API const char *bloomery_loader_error(const bloomery_loader *l);
BLOOMERY_API void bloomery_loader_free(bloomery_loader *l);

/* Load a blob made by bloomery_serialize. On error *msg (if not NULL) points
 * to a static or thread-local message. */
BLOOMERY_API int bloomery_deserialize(const uint8_t *buf, size_t len, uint64_t max_bytes,
                                      bloomery_object *out, const char **msg);

#ifdef __cplusplus
}
#endif

#endif

/* libbloomery: probabilistic membership, cardinality, frequency and quantile structures.
 *
 * Umbrella header and the conventions every part of the library shares:
 * - Functions that can fail return an int: BLOOMERY_OK (0) or a negative
 *   bloomery_err code; bloomery_strerror() names it.
 * - Objects are opaque and owned by the caller once created; *_free(NULL)
 *   is a no-op.
 * - Sizes and counts are 64-bit everywhere: a 50-Gbit filter is ordinary.
 * - The library does no I/O. Serialization produces and consumes memory.
 */
#ifndef BLOOMERY_BLOOMERY_H
#define BLOOMERY_BLOOMERY_H

#define BLOOMERY_VERSION_MAJOR 0
#define BLOOMERY_VERSION_MINOR 1
#define BLOOMERY_VERSION_PATCH 0
#define BLOOMERY_VERSION_STRING "0.1.0"

#include "bloomery/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bloomery_err {
    BLOOMERY_OK = 0,
    BLOOMERY_ENOMEM = -1,    /* allocation failed */
    BLOOMERY_EINVAL = -2,    /* argument out of range */
    BLOOMERY_EFULL = -3,     /* non-scaling filter reached its capacity */
    BLOOMERY_ECORRUPT = -4,  /* serialized data fails a check */
    BLOOMERY_ETRUNC = -5,    /* serialized data ends early */
    BLOOMERY_ETOOBIG = -6,   /* a size exceeds what may be allocated */
    BLOOMERY_EVERSION = -7,  /* serialized by an unknown format version */
    BLOOMERY_ETYPE = -8,     /* serialized data holds another type */
    BLOOMERY_ESTATE = -9,    /* call out of order (e.g. chunk before header) */
    BLOOMERY_EREFUSED = -10, /* the caller's may_allocate hook refused memory */
} bloomery_err;

/* A static English description of an error code. */
BLOOMERY_API const char *bloomery_strerror(int err);

#ifdef __cplusplus
}
#endif

#include "bloomery/sizing.h"
#include "bloomery/blocked.h"
#include "bloomery/classic.h"
#include "bloomery/prefix.h"
#include "bloomery/growing.h"
#include "bloomery/scalable.h"
#include "bloomery/counting.h"
#include "bloomery/cuckoo.h"
#include "bloomery/hll.h"
#include "bloomery/window.h"
#include "bloomery/cms.h"
#include "bloomery/topk.h"
#include "bloomery/tdigest.h"
#include "bloomery/serial.h"

#endif

#include "bloomery/bloomery.h"

const char *bloomery_strerror(int err)
{
    switch (err) {
    case BLOOMERY_OK: return "ok";
    case BLOOMERY_ENOMEM: return "out of memory";
    case BLOOMERY_EINVAL: return "invalid argument";
    case BLOOMERY_EFULL: return "non scaling filter is full";
    case BLOOMERY_ECORRUPT: return "data is corrupt";
    case BLOOMERY_ETRUNC: return "data is truncated";
    case BLOOMERY_ETOOBIG: return "size too large";
    case BLOOMERY_EVERSION: return "unsupported format version";
    case BLOOMERY_ETYPE: return "wrong object type";
    case BLOOMERY_ESTATE: return "call out of order";
    case BLOOMERY_EREFUSED: return "memory refused by the caller";
    default: return "unknown error";
    }
}

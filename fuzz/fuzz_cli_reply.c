// fuzz-sources: src/cli/rclient.c
/* Fuzz target: bytes from a server as the CLI's RESP reply parser sees them
 * (bloomery load/check talk to any RedisBloom-compatible server). Every
 * prefix must parse as complete, incomplete or a protocol error, and a
 * complete reply must never claim more bytes than it was given. */
#include <stdint.h>
#include <stdlib.h>

#include "../src/cli/rclient.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    long long ints[64];
    size_t off = 0;
    while (off < size) {
        rc_reply r = {.ints = ints, .ints_cap = 64};
        size_t used = 0;
        int rc = rc_parse((const char *)data + off, size - off, &used, &r);
        if (rc != 1)
            break;
        if (used == 0 || used > size - off)
            abort();
        off += used;
    }
    return 0;
}

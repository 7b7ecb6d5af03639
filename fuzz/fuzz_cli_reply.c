// fuzz-sources: src/cli/rclient.c src/cli/rvalue.c
/* Fuzz target: bytes from a server as the CLI's RESP reply parsers see them
 * (bloomery load/check count integers, console and rebalance read whole
 * trees; all talk to any RedisBloom-compatible server). Every input must
 * parse as complete, incomplete or a protocol error, a complete reply must
 * never claim more bytes than it was given, and both parsers must agree on
 * where a reply ends. */
#include <stdint.h>
#include <stdlib.h>

#include "../src/cli/rcall.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    long long ints[64];
    size_t off = 0;
    while (off < size) {
        rc_reply r = {.ints = ints, .ints_cap = 64};
        size_t used = 0;
        int rc = rc_parse((const char *)data + off, size - off, &used, &r);
        if (rc != 1) {
            rc_value *v = NULL;
            size_t vused = 0;
            /* Incomplete or malformed for one is never complete for the
             * other. */
            if (rc_value_parse((const char *)data + off, size - off, &vused, &v) == 1)
                abort();
            break;
        }
        if (used == 0 || used > size - off)
            abort();
        rc_value *v = NULL;
        size_t vused = 0;
        int vrc = rc_value_parse((const char *)data + off, size - off, &vused, &v);
        /* The tree parser refuses what the counting one takes only for
         * lack of memory; when both finish they end at the same byte. */
        if (vrc == 1 && vused != used)
            abort();
        rc_value_free(v);
        off += used;
    }
    return 0;
}

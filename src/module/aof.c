/* AOF rewrite without the RDB preamble: a value written as the LOADCHUNK
 * commands that rebuild it, in bloomery's dump format (dump.h): the image
 * header as iterator 1, then chunk k-2 with its checksum as iterator k.
 * Each command carries at most one chunk (BLOOMERY_CHUNK_DEFAULT), so no
 * command in the file is large whatever the filter's size.
 *
 * Bloom, counting and cuckoo filters are written as BF.LOADCHUNK and
 * CF.LOADCHUNK, which RedisBloom's clients know; every other value
 * (count-min, top-k, t-digest, windowed filter), which no RedisBloom
 * command rebuilds exactly, as our BLOOMERY.LOADCHUNK (loadchunk.c), the
 * same format. A dump still being restored has no image: the rewrite
 * fails, with a log line saying to keep aof-use-rdb-preamble yes (Redis's
 * default, which writes values as RDB). Redis 7.0 gives the callback no
 * way to fail but an error of the command it emits, so it emits a name no
 * command has. A read-only value ends with BF.CONFIG key READONLY yes,
 * after its chunks.
 */
#include <stdlib.h>
#include <string.h>

#include "host.h"

void mh_aof_rewrite(RedisModuleIO *io, RedisModuleString *key, void *value)
{
    kv_obj *o = value;
    const char *cmd = o->type == &cuckoo_type                               ? "CF.LOADCHUNK"
                      : o->type == &bloom_type || o->type == &counting_type ? "BF.LOADCHUNK"
                      : o->type->image != 0                                 ? "BLOOMERY.LOADCHUNK"
                                                                            : NULL;
    bloomery_image *img = NULL;
    if (cmd == NULL || bloomery_image_create(&img, type_object(o), 0) != BLOOMERY_OK) {
        rm.LogIOError(io, "warning",
                      "bloomery: a %s cannot be written as commands; keep "
                      "aof-use-rdb-preamble yes",
                      o->type->name);
        rm.EmitAOF(io, "bloomery-cannot-rewrite", "");
        return;
    }
    size_t len;
    const uint8_t *h = bloomery_image_header(img, &len);
    rm.EmitAOF(io, cmd, "slb", key, 1LL, (const char *)h, len);
    uint8_t *buf = NULL;
    for (uint64_t i = 0; i < bloomery_image_nchunks(img); i++) {
        const uint8_t *c = bloomery_image_chunk(img, i, &len);
        uint8_t *b = realloc(buf, len + 8);
        if (b == NULL) {
            rm.LogIOError(io, "warning", "bloomery: no memory to rewrite a %s", o->type->name);
            rm.EmitAOF(io, "bloomery-cannot-rewrite", "");
            break;
        }
        buf = b;
        memcpy(buf, c, len);
        uint64_t sum = bloomery_image_chunk_checksum(img, i, buf, len);
        for (int k = 0; k < 8; k++)
            buf[len + (size_t)k] = (uint8_t)(sum >> (8 * k));
        rm.EmitAOF(io, cmd, "slb", key, (long long)i + 2, (const char *)buf, len + 8);
    }
    free(buf);
    bloomery_image_free(img);
    if (o->readonly)
        rm.EmitAOF(io, "BF.CONFIG", "scc", key, "READONLY", "yes");
}

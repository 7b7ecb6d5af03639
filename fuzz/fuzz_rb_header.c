/* Fuzz target: RedisBloom SCANDUMP headers as BF.LOADCHUNK would receive them.
 *
 * The header arrives from the network before any data, and the links it
 * describes are allocated from it, so a hostile header must fail cleanly and
 * an accepted one must describe links we can build and use. The memory limit
 * keeps accepted shapes small enough to allocate on every run. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "bloomery/bloomery.h"
#include "bloomery/classic.h"

#define FUZZ_MAX_BYTES (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cbf_rb_header h;
    if (cbf_rb_header_decode(data, size, FUZZ_MAX_BYTES, &h) != BLOOMERY_OK) {
        if (h.links != NULL || h.nfilters != 0)
            abort();
        return 0;
    }

    uint64_t items = 0;
    for (uint32_t i = 0; i < h.nfilters; i++) {
        cbf_t *f;
        /* decode promised every link passes cbf_create_shape's checks. */
        if (cbf_create_shape(&f, &h.links[i].shape) != BLOOMERY_OK)
            abort();
        cbf_set_count(f, h.links[i].items);
        /* Probing walks every hash of the loaded shape (k up to 1075). */
        cbf_add(f, data, size < 16 ? size : 16);
        if (!cbf_check(f, data, size < 16 ? size : 16))
            abort();
        cbf_free(f);
        items += h.links[i].items;
    }
    if (items != h.total_items)
        abort();

    /* What was accepted encodes back to the same bytes. */
    uint8_t *out = malloc(cbf_rb_header_size(h.nfilters));
    if (out) {
        cbf_rb_header_encode(&h, out);
        for (size_t i = 0; i < size; i++)
            if (out[i] != data[i])
                abort();
        free(out);
    }
    cbf_rb_header_release(&h);
    return 0;
}

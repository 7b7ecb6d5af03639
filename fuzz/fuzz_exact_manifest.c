// fuzz-sources: src/persist/exact_manifest.c src/persist/chunk_format.c
/* Fuzz target: arbitrary bytes as the list of exact store files a master
 * sends its replica in a full resync. Whatever decodes names only bare
 * file names and encodes back to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/persist/exact_manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    exact_file *files;
    size_t n;
    if (!exact_manifest_decode(data, size, &files, &n))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (files[i].name[0] == '\0' || files[i].name[0] == '.' || strchr(files[i].name, '/'))
            abort();
    pbuf b = {0};
    exact_manifest_encode(&b, files, n);
    if (b.failed || b.len != size || memcmp(b.p, data, size) != 0)
        abort();
    free(b.p);
    free(files);
    return 0;
}

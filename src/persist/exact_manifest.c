/* The list of exact store files a master sends in a full resync
 * (exact_manifest.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exact_manifest.h"

void exact_manifest_encode(pbuf *b, const exact_file *files, size_t n)
{
    pbuf_u32(b, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        pbuf_str(b, files[i].name, strlen(files[i].name));
        pbuf_u64(b, files[i].size);
        pbuf_u64(b, files[i].hash.lo);
        pbuf_u64(b, files[i].hash.hi);
    }
}

bool exact_manifest_decode(const uint8_t *p, size_t len, exact_file **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (len < 4)
        return false;
    uint32_t count = (uint32_t)le_load(p, 4);
    /* Each entry takes at least 4 + 1 + 24 bytes. */
    if (count > EXACT_MANIFEST_MAX_FILES || count > (len - 4) / 29)
        return false;
    exact_file *files = calloc(count ? count : 1, sizeof(*files));
    if (files == NULL)
        return false;
    size_t at = 4;
    for (uint32_t i = 0; i < count; i++) {
        if (len - at < 4)
            goto bad;
        uint32_t nl = (uint32_t)le_load(p + at, 4);
        at += 4;
        if (nl == 0 || nl >= sizeof(files->name) || len - at < nl + 24)
            goto bad;
        memcpy(files[i].name, p + at, nl);
        at += nl;
        /* A bare file name of the store's: nothing that walks out of it. */
        if (memchr(files[i].name, '/', nl) || memchr(files[i].name, '\0', nl) ||
            files[i].name[0] == '.')
            goto bad;
        files[i].size = le_load(p + at, 8);
        files[i].hash.lo = le_load(p + at + 8, 8);
        files[i].hash.hi = le_load(p + at + 16, 8);
        at += 24;
    }
    if (at != len)
        goto bad;
    *out = files;
    *n = count;
    return true;
bad:
    free(files);
    return false;
}

void exact_period_name(char *out, size_t len, uint64_t id, int64_t period)
{
    snprintf(out, len, "x%016" PRIx64 ".%" PRId64, id, period);
}

bool exact_period_parse(const char *name, uint64_t *id, int64_t *period)
{
    char *end;
    if (name[0] != 'x' || strlen(name) < 19 || name[17] != '.')
        return false;
    errno = 0;
    *id = strtoull(name + 1, &end, 16);
    if (end != name + 17 || errno)
        return false;
    *period = strtoll(name + 18, &end, 10);
    return *end == '\0' && errno == 0;
}

// fuzz-sources: src/web/guard.c -Isrc/web
/* Fuzz target: arbitrary bytes as the HTTP listener's Host check (split at
 * NUL bytes: the Host header, http-bind, http-allowed-hosts). Checks that
 * nothing reads past the header and that what is answered is a loopback
 * name, the bound address or a listed name, never a name nobody gave. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "guard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The header, exactly its bytes (no terminator: the check is counted). */
    const uint8_t *nul = memchr(data, '\0', size);
    size_t hlen = nul ? (size_t)(nul - data) : size;
    char *host = malloc(hlen ? hlen : 1);
    if (host == NULL)
        return 0;
    memcpy(host, data, hlen);
    size_t rest = nul ? size - hlen - 1 : 0;
    char *tail = malloc(rest + 1);
    if (tail == NULL) {
        free(host);
        return 0;
    }
    memcpy(tail, nul ? nul + 1 : data, rest);
    tail[rest] = '\0';
    const char *bind = tail;
    const char *allowed = tail + strlen(tail);
    if (allowed < tail + rest)
        allowed++;
    bool ok = http_host_allowed(host, hlen, bind, allowed);
    /* A host nobody named is never answered. */
    if (http_host_allowed(host, hlen, "", "") && !ok)
        abort();
    if (hlen && memchr(host, '@', hlen) && ok)
        abort();
    free(tail);
    free(host);
    return 0;
}

// fuzz-sources: src/server/base/util.c
// fuzz-sources: src/web/glob.c -Isrc/web
/* libFuzzer target for str_to_double (src/server/base/util.c), the parser
 * of every floating-point argument: its fast path for plain decimals must
 * give exactly what strtod gives, accept what it accepts and refuse what it
 * refuses. The reference below is the parser without the fast path. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/server/base/util.h"

static int reference(const char *s, size_t len, double *out)
{
    char buf[128];
    if (len == 0 || len >= sizeof(buf))
        return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (isspace((unsigned char)buf[0]))
        return 0;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if ((size_t)(end - buf) != len || errno == ERANGE || isnan(v))
        return 0;
    *out = v;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    double a = 0, b = 0;
    int ok = str_to_double((const char *)data, size, &a);
    int want = reference((const char *)data, size, &b);
    assert(ok == want);
    /* Bit for bit: -0.0 and 0.0 differ. */
    assert(!ok || memcmp(&a, &b, sizeof(a)) == 0);
    return 0;
}

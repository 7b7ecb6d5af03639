// fuzz-sources: src/server/http/respread.c src/web/textbuf.c
// fuzz-sources: -Isrc/server/http -Isrc/web -Isrc/server/data -Isrc/server/base -Isrc/persist
/* Fuzz target: arbitrary bytes as the reply the console's command reader
 * (respread.c) turns into JSON. A whole reply must read the same however
 * it is cut: every proper prefix is incomplete, never malformed; the JSON
 * holds no raw control byte. Also the text encoders: a label value holds
 * only printable ASCII without '"' or '\\'. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    textbuf out = {0};
    long r = resp_reply_json(p, size, &out);
    if (r > (long)size || (r < 0 && r != RESP_INCOMPLETE && r != RESP_MALFORMED))
        abort();
    if (r < 0 && out.len != 0)
        abort();
    for (size_t i = 0; i < out.len; i++)
        if ((unsigned char)out.p[i] < 0x20)
            abort();
    if (r > 0) {
        for (size_t cut = 0; cut < (size_t)r; cut += 1 + cut / 8) {
            textbuf part = {0};
            if (resp_reply_json(p, cut, &part) != RESP_INCOMPLETE)
                abort();
            tb_free(&part);
        }
    }
    tb_free(&out);

    textbuf lbl = {0};
    tb_label(&lbl, p, size);
    for (size_t i = 0; i < lbl.len; i++) {
        unsigned char c = (unsigned char)lbl.p[i];
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
            abort();
    }
    tb_free(&lbl);
    textbuf js = {0};
    tb_json_str(&js, p, size);
    if (js.len < 2 || js.p[0] != '"' || js.p[js.len - 1] != '"')
        abort();
    for (size_t i = 0; i < js.len; i++)
        if ((unsigned char)js.p[i] < 0x20)
            abort();
    tb_free(&js);
    return 0;
}

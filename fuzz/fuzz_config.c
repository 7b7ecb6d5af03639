// fuzz-sources: src/server/base/config.c src/server/base/resp.c src/server/base/util.c
// fuzz-sources: src/web/glob.c -Isrc/web
// fuzz-sources: src/server/base/log.c src/server/base/fdlimit.c
/* libFuzzer target for bloomeryd's configuration reader (src/server/base/
 * config.c): the input is a bloomery.conf, read from a memory file the way
 * the server reads its config file. Every input must end in success or a
 * clear error naming the line; after a success every setting must format
 * back (what CONFIG GET answers). The settings are reset between runs.
 */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../src/server/base/config.h"

static void check_name(void *ctx, const char *name)
{
    (void)ctx;
    char out[4096];
    assert(config_format(name, out, sizeof(out)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("bloomery.conf", 0);
    if (fd < 0)
        return 0;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    char path[64], err[512];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    config_init();
    err[0] = '\0';
    bool ok = config_load_file(path, err, sizeof(err));
    if (!ok) {
        /* "file:line: ..." or a reason: never an empty message. */
        assert(err[0] != '\0');
    } else {
        config_match("*", 1, check_name, NULL);
    }
    config_free();
    close(fd);
    return 0;
}

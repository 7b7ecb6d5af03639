/* Keyed table hash; see keyhash.h. */
#include "keyhash.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>
#include <xxhash.h>

#include "util.h"

static unsigned char secret[XXH3_SECRET_SIZE_MIN + 56];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void draw(void)
{
    size_t got = 0;
    while (got < sizeof(secret)) {
        ssize_t n = getrandom(secret + got, sizeof(secret) - got, 0);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        /* No kernel randomness (a very old kernel or a seccomp filter):
         * a time-and-pid mix still keeps keys from colliding by design. */
        uint64_t x = (uint64_t)now_us() ^ ((uint64_t)getpid() << 32);
        for (size_t i = got; i < sizeof(secret); i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            secret[i] = (unsigned char)(x >> 56);
        }
        break;
    }
}

void keyhash_init(void) { pthread_once(&once, draw); }

uint64_t keyhash(const void *data, size_t len)
{
    return XXH3_64bits_withSecret(data, len, secret, sizeof(secret));
}

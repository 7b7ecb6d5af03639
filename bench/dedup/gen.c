/* Generates dedup benchmark input: N lines of 16 hex digits, a fraction F of
 * them repeating an earlier key chosen uniformly.
 *   gen N F [SEED] > file      prints the number of distinct keys on stderr
 * Distinct keys are a bijective 64-bit mix of a counter, so they never
 * collide by chance. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: gen N DUP_FRACTION [SEED]\n");
        return 2;
    }
    uint64_t n = (uint64_t)strtod(argv[1], NULL);
    double f = strtod(argv[2], NULL);
    uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
    uint64_t rng = mix(seed ^ 0x5eed), distinct = 0;
    uint64_t threshold = (uint64_t)(f * 18446744073709551615.0);
    static const char hex[] = "0123456789abcdef";
    static char buf[1 << 16];
    size_t len = 0;
    for (uint64_t i = 0; i < n; i++) {
        rng += 0x9e3779b97f4a7c15ULL;
        uint64_t r = mix(rng);
        uint64_t id;
        if (distinct > 0 && f > 0 && r < threshold) {
            rng += 0x9e3779b97f4a7c15ULL;
            id = mix(rng) % distinct;
        } else {
            id = distinct++;
        }
        uint64_t k = mix(id + seed * 0x9e3779b97f4a7c15ULL);
        for (int j = 15; j >= 0; j--) {
            buf[len + (size_t)j] = hex[k & 15];
            k >>= 4;
        }
        buf[len + 16] = '\n';
        len += 17;
        if (len + 17 > sizeof buf) {
            fwrite(buf, 1, len, stdout);
            len = 0;
        }
    }
    fwrite(buf, 1, len, stdout);
    fprintf(stderr, "%llu\n", (unsigned long long)distinct);
    return ferror(stdout) ? 1 : 0;
}

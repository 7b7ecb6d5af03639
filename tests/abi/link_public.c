/* A program that uses libbloomery the way an outside user does: public
 * headers only, linked against the shared library. If a public function
 * lost its export, this would not link; it then checks that the calls work
 * across the library boundary (a filter, a serialized round trip, an HLL). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bloomery/bloomery.h>
#include <bloomery/murmur.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond);                             \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void)
{
    bf_t *bf;
    CHECK(bf_create(&bf, 10000, 0.01, NULL) == BLOOMERY_OK);
    CHECK(bf_check_and_add(bf, "apple", 5));
    CHECK(!bf_check_and_add(bf, "apple", 5));
    CHECK(bf_check(bf, "apple", 5));
    CHECK(bf_count(bf) == 1);

    uint8_t *blob;
    size_t len;
    bloomery_object o = {.type = BLOOMERY_TYPE_BLOCKED, .u.bf = bf};
    CHECK(bloomery_serialize(o, 0, &blob, &len) == BLOOMERY_OK);
    bloomery_object back;
    const char *msg = NULL;
    CHECK(bloomery_deserialize(blob, len, 0, &back, &msg) == BLOOMERY_OK);
    CHECK(back.type == BLOOMERY_TYPE_BLOCKED && bf_check(back.u.bf, "apple", 5));
    blob[len - 1] ^= 1; /* a damaged checksum is refused with a message */
    bloomery_object bad;
    CHECK(bloomery_deserialize(blob, len, 0, &bad, &msg) == BLOOMERY_ECORRUPT && msg != NULL);
    free(blob);
    bloomery_object_free(&back);
    bloomery_object_free(&o);

    hll_t *h;
    CHECK(hll_create(&h, 0) == BLOOMERY_OK);
    for (int i = 0; i < 1000; i++) {
        char item[16];
        int n = snprintf(item, sizeof item, "item-%d", i);
        CHECK(hll_add(h, item, (size_t)n) >= 0);
    }
    uint64_t card;
    CHECK(hll_count(h, &card) == BLOOMERY_OK && card > 950 && card < 1050);
    hll_free(h);

    CHECK(bloomery_murmur64a("", 0, 0) == bloomery_murmur64a("", 0, 0));
    CHECK(strcmp(bloomery_strerror(BLOOMERY_EINVAL), "invalid argument") == 0);
    printf("public API linked from the shared library: ok\n");
    return 0;
}

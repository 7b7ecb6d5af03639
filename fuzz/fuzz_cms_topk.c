/* libFuzzer target for the count-min sketch and top-k loaders and what runs
 * on a value they accept.
 *
 * Input: one control byte, then the payload.
 *   bits 0-1  0, 1: the payload is a serial.h blob (bloomery_deserialize);
 *             whatever loads is used, serialized again (same bytes) and
 *             loaded again
 *             2: the payload is a top-k heap image (topk_load_heap, which
 *             no checksum protects from the fuzzer) for a 4-slot value
 *             3: the payload is the counters of a 4 x 2 sketch whose total
 *             is row 0's sum (cms_check decides)
 * An accepted value must answer queries, take adds or increments and
 * merges, keep its invariants (cms_check) and serialize to bytes that load
 * back; a violation aborts so that it is reported like a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bloomery/bloomery.h"

static void check(int cond)
{
    if (!cond)
        abort();
}

/* Serialize o, load it back, serialize again: the same bytes. */
static void round_trip(bloomery_object o)
{
    uint8_t *a = NULL, *b = NULL;
    size_t la, lb;
    if (bloomery_serialize(o, 64, &a, &la) != BLOOMERY_OK)
        return;
    bloomery_object back;
    int rc = bloomery_deserialize(a, la, 1u << 26, &back, NULL);
    check(rc == BLOOMERY_OK || rc == BLOOMERY_ENOMEM);
    if (rc == BLOOMERY_OK) {
        check(back.type == o.type);
        if (bloomery_serialize(back, 64, &b, &lb) == BLOOMERY_OK)
            check(la == lb && memcmp(a, b, la) == 0);
        bloomery_object_free(&back);
    }
    free(a);
    free(b);
}

static void use_cms(cms_t *c, const uint8_t *p, size_t n)
{
    check(cms_check(c) == BLOOMERY_OK);
    for (size_t i = 0; i + 1 < n && i < 64; i += 2) {
        uint32_t before = cms_query(c, p + i, 2), est;
        int rc = cms_incrby(c, p + i, 2, p[i + 1], &est);
        check(rc == BLOOMERY_OK || rc == BLOOMERY_EFULL);
        if (rc == BLOOMERY_OK)
            check(est >= before && est == cms_query(c, p + i, 2));
    }
    const cms_t *srcs[2] = {c, c};
    int64_t w[2] = {1, -1};
    int rc = cms_merge(c, srcs, w, 2);
    check(rc == BLOOMERY_OK || rc == BLOOMERY_EFULL);
    if (rc == BLOOMERY_OK)
        check(cms_count(c) == 0 && cms_query(c, p, n < 3 ? n : 3) == 0);
    check(cms_check(c) == BLOOMERY_OK);
    round_trip((bloomery_object){.type = BLOOMERY_TYPE_CMS, .u.cms = c});
}

static void use_topk(topk_t *t, const uint8_t *p, size_t n)
{
    topk_item *list = malloc(topk_k(t) * sizeof(*list));
    if (list == NULL)
        return;
    for (size_t i = 0; i < n && i < 64; i++) {
        size_t len = p[i] % 4;
        if (len > n - i)
            len = n - i;
        topk_item ex;
        int rc = topk_add(t, p + i, len, p[i] % 3, &ex);
        check(rc == 0 || rc == 1 || rc == BLOOMERY_ENOMEM);
        /* The expelled item left the heap for another one. */
        if (rc == 1)
            check(!topk_query(t, ex.item, ex.len));
    }
    size_t got = topk_list(t, list);
    check(got <= topk_k(t));
    for (size_t i = 0; i < got; i++) {
        check(list[i].count > 0 && topk_query(t, list[i].item, list[i].len));
        if (i)
            check(list[i].count <= list[i - 1].count);
    }
    free(list);
    round_trip((bloomery_object){.type = BLOOMERY_TYPE_TOPK, .u.topk = t});
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned mode = data[0] & 3;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    if (mode == 2) {
        topk_t *t;
        if (topk_create(&t, 4, 8, 3, 0.9, 1) != BLOOMERY_OK)
            return 0;
        int rc = topk_load_heap(t, p, n, 5);
        check(rc == BLOOMERY_OK || rc == BLOOMERY_ECORRUPT || rc == BLOOMERY_ENOMEM);
        use_topk(t, p, n);
        topk_free(t);
        return 0;
    }
    if (mode == 3) {
        cms_t *c;
        if (n < 32 || cms_create(&c, 4, 2) != BLOOMERY_OK)
            return 0;
        memcpy(cms_data_mut(c), p, 32);
        uint64_t sum = 0;
        for (int i = 0; i < 4; i++)
            sum += (uint64_t)p[4 * i] | (uint64_t)p[4 * i + 1] << 8 | (uint64_t)p[4 * i + 2] << 16 |
                   (uint64_t)p[4 * i + 3] << 24;
        cms_set_count(c, sum);
        if (cms_check(c) == BLOOMERY_OK)
            use_cms(c, p + 32, n - 32);
        cms_free(c);
        return 0;
    }
    bloomery_object o;
    const char *msg;
    int rc = bloomery_deserialize(p, n, 1u << 26, &o, &msg);
    if (rc != BLOOMERY_OK) {
        check(o.u.any == NULL && msg != NULL);
        return 0;
    }
    if (o.type == BLOOMERY_TYPE_CMS)
        use_cms(o.u.cms, p, n);
    else if (o.type == BLOOMERY_TYPE_TOPK)
        use_topk(o.u.topk, p, n);
    bloomery_object_free(&o);
    return 0;
}

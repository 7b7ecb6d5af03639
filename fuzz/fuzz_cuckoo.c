/* Fuzz target: the input as a sequence of operations on a small cuckoo
 * filter, checked against an exact multiset of what was added and deleted,
 * and the whole input as a serialized image (which must load as a working
 * filter or be refused).
 *
 *   byte 0..4  shape: bucket size, expansion, fingerprint bits, kicks,
 *              capacity, sub-filter limit
 *   then pairs (op, key): add, add-nx, delete, lookup, compact, image round
 *              trip, change of the sub-filter limit
 *
 * Invariants: an item added and not deleted is always found; the occupied
 * slots equal the item count; a failed add changes no byte; deleting an item
 * the filter does not report changes nothing; an image loads back to the
 * same shape and bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bloomery/bloomery.h"

#define KEYS 64
#define MAX_OPS 1024

static void require(int ok)
{
    if (!ok)
        abort();
}

static bool small_growth(void *ctx, uint64_t bytes)
{
    (void)ctx;
    return bytes <= (1u << 16);
}

static uint8_t *tables(const cf_t *c, size_t *len)
{
    size_t n = (size_t)cf_bytes(c), at = 0;
    uint8_t *p = malloc(n + 1);
    require(p != NULL);
    for (uint32_t i = 0; i < cf_nfilters(c); i++) {
        memcpy(p + at, cf_filter_data(c, i), (size_t)cf_filter_bytes(c, i));
        at += (size_t)cf_filter_bytes(c, i);
    }
    *len = n;
    return p;
}

static bool same_filter(const cf_t *a, const cf_t *b)
{
    cf_shape sa, sb;
    cf_shape_of(a, &sa);
    cf_shape_of(b, &sb);
    if (memcmp(&sa, &sb, sizeof sa) != 0)
        return false;
    for (uint32_t i = 0; i < sa.nfilters; i++)
        if (memcmp(cf_filter_data(a, i), cf_filter_data(b, i), (size_t)cf_filter_bytes(a, i)) != 0)
            return false;
    return true;
}

static size_t key_of(unsigned k, char *buf)
{
    buf[0] = 'k';
    buf[1] = (char)('0' + k / 10);
    buf[2] = (char)('0' + k % 10);
    return 3;
}

static void check(const cf_t *c, const unsigned *counts)
{
    char key[4];
    require(cf_occupied(c) == cf_items(c));
    for (unsigned j = 0; j < KEYS; j++) {
        if (counts[j]) {
            size_t l = key_of(j, key);
            require(cf_exists(c, key, l));
            require(cf_exists_hashed(c, cf_hash(key, l)));
        }
    }
}

static void run_ops(const uint8_t *data, size_t size)
{
    if (size < 5)
        return;
    cf_options o;
    cf_options_init(&o);
    o.bucket_size = 1 + (data[0] & 3);
    o.expansion = (data[0] >> 2) & 7; /* 0..7, rounded up to 0, 1, 2, 4, 8 */
    o.fingerprint_bits = 8 + data[1] % 25;
    o.max_iterations = 1 + data[2] % 40;
    uint64_t capacity = 2 * o.bucket_size + data[3] % 64;
    o.max_filters = 1 + data[4] % 12;
    o.may_allocate = small_growth;
    cf_t *c;
    require(cf_create(&c, capacity, &o) == BLOOMERY_OK);

    unsigned counts[KEYS] = {0}, since_check = 0;
    char key[4];
    if (size > 5 + 2 * MAX_OPS)
        size = 5 + 2 * MAX_OPS;
    for (size_t at = 5; at + 1 < size; at += 2) {
        unsigned op = data[at] % 8, k = data[at + 1] % KEYS;
        size_t len = key_of(k, key);
        switch (op) {
        case 0:
        case 1:
        case 2: {
            size_t n0, n1;
            uint8_t *before = tables(c, &n0);
            uint64_t items = cf_items(c);
            uint32_t nf = cf_nfilters(c);
            bool had = cf_exists(c, key, len);
            int rc = op == 2 ? cf_add_nx(c, key, len) : cf_add(c, key, len);
            if (rc == 1) {
                counts[k]++;
                require(op != 2 || !had);
            } else {
                require(rc == 0 ? op == 2 && had
                                : rc == BLOOMERY_EFULL || rc == BLOOMERY_ENOMEM ||
                                      rc == BLOOMERY_EREFUSED || rc == BLOOMERY_ETOOBIG);
                uint8_t *after = tables(c, &n1);
                require(n0 == n1 && memcmp(before, after, n0) == 0);
                require(cf_items(c) == items && cf_nfilters(c) == nf);
                free(after);
            }
            free(before);
            break;
        }
        case 3:
            if (counts[k]) {
                require(cf_delete(c, key, len));
                counts[k]--;
            } else if (!cf_exists(c, key, len)) {
                /* Absent and not reported: nothing may change. (A false
                 * positive would delete another item's copy.) */
                uint64_t items = cf_items(c);
                require(!cf_delete(c, key, len));
                require(cf_items(c) == items);
            }
            break;
        case 4: require(cf_count(c, key, len) >= (counts[k] ? 1u : 0u)); break;
        case 5:
            cf_compact(c);
            require(cf_deletes(c) == 0);
            break;
        case 6: {
            bloomery_object obj = {.type = BLOOMERY_TYPE_CUCKOO, .u.cf = c}, back;
            uint8_t *blob;
            size_t blen;
            require(bloomery_serialize(obj, 64 + k * 16, &blob, &blen) == BLOOMERY_OK);
            require(bloomery_deserialize(blob, blen, 0, &back, NULL) == BLOOMERY_OK);
            require(back.type == BLOOMERY_TYPE_CUCKOO && same_filter(c, back.u.cf));
            free(blob);
            bloomery_object_free(&back);
            break;
        }
        case 7: require(cf_set_max_filters(c, 1 + k % 12) == BLOOMERY_OK); break;
        }
        /* Full checks after every op while the tables are small. */
        if (cf_slots(c) <= 4096 || ++since_check == 32 || at + 3 >= size) {
            since_check = 0;
            check(c, counts);
        }
    }
    check(c, counts);
    cf_free(c);
}

/* Arbitrary bytes as an image: refused, or a filter that works whatever its
 * tables hold. */
static void run_image(const uint8_t *data, size_t size)
{
    bloomery_object o;
    if (bloomery_deserialize(data, size, 1 << 22, &o, NULL) != BLOOMERY_OK)
        return;
    if (o.type == BLOOMERY_TYPE_CUCKOO) {
        cf_t *c = o.u.cf;
        cf_set_may_allocate(c, small_growth, NULL);
        for (size_t i = 0; i < 8; i++) {
            size_t len = size < i ? size : i;
            if (cf_add(c, data, len) == 1)
                require(cf_exists(c, data, len));
            (void)cf_count(c, data, len);
            (void)cf_delete(c, data + len, size - len < 4 ? size - len : 4);
        }
        cf_compact(c);
        (void)cf_occupied(c);
        (void)cf_info_size(c);
    }
    bloomery_object_free(&o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run_ops(data, size);
    run_image(data, size);
    return 0;
}

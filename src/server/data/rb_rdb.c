/* RedisBloom's RDB encodings; see rb_rdb.h.
 *
 * A Bloom link is checked as RedisBloom's LOADCHUNK checks a SCANDUMP
 * header (classic.h's codec: k against bits per entry, bits = 8 * bytes,
 * error in (0, 1), FORCE64 hashing), by encoding the fields read into that
 * header and decoding it back: one set of rules for both ways in. The whole
 * chain is checked again once every link is read (items sum to the total).
 */
#include "rb_rdb.h"

#include <stdlib.h>
#include <string.h>

/* ---- Bloom ---- */

int rb_chain_assemble(const cbf_rb_header *h, void **links, uint32_t n, sbf_t **out)
{
    const cbf_shape *s0 = &h->links[0].shape;
    bool scaling = !(h->options & CBF_RB_OPT_NO_SCALING);
    uint32_t expansion = scaling ? h->growth : 0;
    /* A scaling chain's first link was built at half the requested rate. */
    double error = scaling ? s0->error_rate * 2 : s0->error_rate;
    if (error >= 1)
        error = s0->error_rate;
    if (expansion > SBF_MAX_EXPANSION)
        return BLOOMERY_ECORRUPT;
    return sbf_assemble(out, BLOOMERY_LAYOUT_CLASSIC, s0->capacity, error, expansion, 0, links, n);
}

typedef struct bloom_read {
    cbf_rb_header h; /* the links read so far, shapes and counts */
    void **links;    /* their filters */
    uint32_t made;
} bloom_read;

static void bloom_read_free(bloom_read *b)
{
    for (uint32_t i = 0; i < b->made; i++)
        cbf_free(b->links[i]);
    free(b->links);
    free(b->h.links);
}

/* The first n links of h, summing to total items, checked by classic.h's
 * rules. */
static int check_header(const cbf_rb_header *h, uint32_t n, uint64_t total, uint64_t max_bytes)
{
    cbf_rb_header t = *h;
    t.nfilters = n;
    t.total_items = total;
    size_t len = cbf_rb_header_size(n);
    uint8_t *buf = malloc(len);
    if (buf == NULL)
        return BLOOMERY_ENOMEM;
    cbf_rb_header_encode(&t, buf);
    cbf_rb_header back;
    int rc = cbf_rb_header_decode(buf, len, max_bytes, &back);
    free(buf);
    if (rc == BLOOMERY_OK)
        cbf_rb_header_release(&back);
    return rc;
}

#define FAIL(code, text)                                                                           \
    do {                                                                                           \
        rc = (code);                                                                               \
        *why = (text);                                                                             \
        goto done;                                                                                 \
    } while (0)

int rb_read_bloom(const rb_reader *r, int encver, uint64_t max_bytes, sbf_t **out, const char **why)
{
    *out = NULL;
    *why = NULL;
    if (encver < 0 || encver > RB_BLOOM_ENCVER) {
        *why = "unknown encoding version of a RedisBloom Bloom filter";
        return BLOOMERY_EVERSION;
    }
    /* Versions 0 and 1 have no options: RedisBloom 1.x hashed them with 32
     * bits, which our classic layout does not. */
    if (encver < 2) {
        *why = "a Bloom filter of RedisBloom 1.x (32-bit hashing) cannot be read";
        return BLOOMERY_EVERSION;
    }
    bloom_read b = {0};
    int rc = BLOOMERY_OK;
    uint64_t total, nfilters, options, growth = SBF_DEFAULT_EXPANSION, bytes = 0;
    if (!r->get_unsigned(r->ctx, &total) || !r->get_unsigned(r->ctx, &nfilters) ||
        !r->get_unsigned(r->ctx, &options) || (encver >= 4 && !r->get_unsigned(r->ctx, &growth)))
        FAIL(BLOOMERY_ETRUNC, "truncated chain header");
    /* RedisBloom refuses a chain of 1000 links or more. */
    if (nfilters == 0 || nfilters >= 1000)
        FAIL(BLOOMERY_ECORRUPT, "bad number of filters");
    if (options > UINT32_MAX || growth > UINT32_MAX)
        FAIL(BLOOMERY_ECORRUPT, "bad options or growth");
    if (!(options & CBF_RB_OPT_FORCE64))
        FAIL(BLOOMERY_EVERSION, "a chain of 32-bit hashing cannot be read");
    b.h.nfilters = (uint32_t)nfilters;
    b.h.options = (uint32_t)options;
    b.h.growth = (uint32_t)growth;
    b.h.links = calloc(nfilters, sizeof(*b.h.links));
    b.links = calloc(nfilters, sizeof(*b.links));
    if (b.h.links == NULL || b.links == NULL)
        FAIL(BLOOMERY_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < b.h.nfilters; i++) {
        cbf_rb_link *l = &b.h.links[i];
        uint64_t capacity, hashes, bits = 0, n2 = 0, items;
        double error, bpe;
        if (!r->get_unsigned(r->ctx, &capacity) || !r->get_double(r->ctx, &error) ||
            !r->get_unsigned(r->ctx, &hashes) || !r->get_double(r->ctx, &bpe))
            FAIL(BLOOMERY_ETRUNC, "truncated filter");
        if (!r->get_unsigned(r->ctx, &bits) || !r->get_unsigned(r->ctx, &n2))
            FAIL(BLOOMERY_ETRUNC, "truncated filter");
        if (hashes > UINT32_MAX || n2 > UINT8_MAX)
            FAIL(BLOOMERY_ECORRUPT, "bad hash count or n2");
        const uint8_t *data;
        size_t len;
        if (!r->get_string(r->ctx, &data, &len))
            FAIL(BLOOMERY_ETRUNC, "truncated bit array");
        if (len > max_bytes - bytes)
            FAIL(BLOOMERY_ETOOBIG, "the bit arrays exceed the memory limit");
        bytes += len;
        l->shape = (cbf_shape){.capacity = capacity,
                               .error_rate = error,
                               .bpe = bpe,
                               .hashes = (unsigned)hashes,
                               .bits = bits,
                               .bytes = len,
                               .n2 = (uint8_t)n2};
        /* This link alone, before its bits are copied (the string lives
         * only until the next read): its shape passes RedisBloom's checks
         * and ours. */
        cbf_rb_header one = {
            .nfilters = 1, .options = b.h.options, .growth = b.h.growth, .links = l};
        if ((rc = check_header(&one, 1, 0, max_bytes)) != BLOOMERY_OK)
            FAIL(rc, rc == BLOOMERY_ENOMEM ? "out of memory" : "invalid filter shape");
        cbf_t *f;
        if ((rc = cbf_create_shape(&f, &l->shape)) != BLOOMERY_OK)
            FAIL(rc, "invalid filter shape");
        b.links[b.made++] = f;
        if (cbf_bytes(f) != len)
            FAIL(BLOOMERY_ECORRUPT, "bit array of the wrong size");
        memcpy(cbf_data_mut(f), data, len);
        if (!r->get_unsigned(r->ctx, &items))
            FAIL(BLOOMERY_ETRUNC, "truncated filter");
        l->items = items;
        cbf_set_count(f, items);
    }
    /* The whole chain: the items of the links sum to the total. */
    if ((rc = check_header(&b.h, b.h.nfilters, total, max_bytes)) != BLOOMERY_OK)
        FAIL(rc, "inconsistent chain");
    if ((rc = rb_chain_assemble(&b.h, b.links, b.made, out)) != BLOOMERY_OK)
        FAIL(rc, "the chain could not be built");
    b.made = 0; /* the chain owns the links */
done:
    bloom_read_free(&b);
    return rc;
}

bool rb_write_bloom(const rb_writer *w, const sbf_t *f)
{
    size_t n = sbf_nlinks(f);
    if (sbf_layout(f) != BLOOMERY_LAYOUT_CLASSIC || n == 0)
        return false;
    w->put_unsigned(w->ctx, sbf_count(f));
    w->put_unsigned(w->ctx, n);
    /* The options every chain RedisBloom 2.x makes has, as BF.SCANDUMP
     * writes them; its default growth on a non-scaling chain. */
    w->put_unsigned(w->ctx, CBF_RB_OPT_NOROUND | CBF_RB_OPT_FORCE64 |
                                (sbf_expansion(f) ? 0 : CBF_RB_OPT_NO_SCALING));
    w->put_unsigned(w->ctx, sbf_expansion(f) ? sbf_expansion(f) : SBF_DEFAULT_EXPANSION);
    for (size_t i = 0; i < n; i++) {
        const cbf_t *l = sbf_link_classic(f, i);
        cbf_shape s;
        cbf_shape_of(l, &s);
        w->put_unsigned(w->ctx, s.capacity);
        w->put_double(w->ctx, s.error_rate);
        w->put_unsigned(w->ctx, s.hashes);
        w->put_double(w->ctx, s.bpe);
        w->put_unsigned(w->ctx, s.bits);
        w->put_unsigned(w->ctx, s.n2);
        w->put_string(w->ctx, cbf_data(l), (size_t)cbf_bytes(l));
        w->put_unsigned(w->ctx, cbf_count(l));
    }
    return true;
}

/* ---- cuckoo ---- */

/* An empty cuckoo filter of 8-bit fingerprints with RedisBloom's fields,
 * each checked, its sub-filters' tables held to max_bytes before any is
 * allocated. */
static int cuckoo_of(const uint64_t f[7], uint64_t max_bytes, unsigned max_filters, cf_t **out,
                     const char **why)
{
    enum { NFILTERS, NBUCKETS, ITEMS, DELETES, BUCKET_SIZE, MAX_ITERATIONS, EXPANSION };
    *out = NULL;
    if (f[NFILTERS] == 0 || f[NFILTERS] > CF_MAX_MAX_FILTERS || f[BUCKET_SIZE] == 0 ||
        f[BUCKET_SIZE] > CF_MAX_BUCKET_SIZE || f[MAX_ITERATIONS] == 0 ||
        f[MAX_ITERATIONS] > CF_MAX_MAX_ITERATIONS || f[EXPANSION] > CF_MAX_EXPANSION) {
        *why = "cuckoo parameters out of range";
        return BLOOMERY_ECORRUPT;
    }
    if (max_filters < f[NFILTERS])
        max_filters = (unsigned)f[NFILTERS];
    cf_shape shape = {.nbuckets = f[NBUCKETS],
                      .bucket_size = (unsigned)f[BUCKET_SIZE],
                      .fingerprint_bits = 8,
                      .max_iterations = (unsigned)f[MAX_ITERATIONS],
                      .expansion = (unsigned)f[EXPANSION],
                      .max_filters = max_filters,
                      .nfilters = (uint32_t)f[NFILTERS],
                      .items = f[ITEMS],
                      .deletes = f[DELETES]};
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < shape.nfilters; i++) {
        uint64_t b = cf_shape_filter_bytes(&shape, i);
        if (b == 0) {
            *why = "invalid cuckoo shape";
            return BLOOMERY_ECORRUPT;
        }
        if (b > max_bytes - bytes) {
            *why = "the sub-filters exceed the memory limit";
            return BLOOMERY_ETOOBIG;
        }
        bytes += b;
    }
    int rc = cf_create_shape(out, &shape);
    if (rc != BLOOMERY_OK)
        *why = rc == BLOOMERY_ENOMEM ? "out of memory" : "invalid cuckoo shape";
    return rc;
}

int rb_read_cuckoo(const rb_reader *r, int encver, uint64_t max_bytes, unsigned max_filters,
                   cf_t **out, const char **why)
{
    *out = NULL;
    *why = NULL;
    if (encver < 0 || encver > RB_CUCKOO_ENCVER) {
        *why = "unknown encoding version of a RedisBloom cuckoo filter";
        return BLOOMERY_EVERSION;
    }
    int rc = BLOOMERY_OK;
    cf_t *c = NULL;
    /* filters, buckets, items, deletes, bucket size, max iterations,
     * expansion: cuckoo_of's order, RDB's too. */
    uint64_t f[7] = {
        0, 0, 0, 0, CF_DEFAULT_BUCKET_SIZE, CF_DEFAULT_MAX_ITERATIONS, CF_DEFAULT_EXPANSION};
    for (int i = 0; i < (encver >= 4 ? 7 : 3); i++)
        if (!r->get_unsigned(r->ctx, &f[i]))
            FAIL(BLOOMERY_ETRUNC, "truncated cuckoo header");
    if ((rc = cuckoo_of(f, max_bytes, max_filters, &c, why)) != BLOOMERY_OK)
        goto done;
    for (uint32_t i = 0; i < cf_nfilters(c); i++) {
        uint64_t nb = f[1];
        if (encver >= 4 && !r->get_unsigned(r->ctx, &nb))
            FAIL(BLOOMERY_ETRUNC, "truncated sub-filter");
        const uint8_t *data;
        size_t len;
        if (!r->get_string(r->ctx, &data, &len))
            FAIL(BLOOMERY_ETRUNC, "truncated sub-filter");
        /* Sub-filter i of RedisBloom has nbuckets * expansion^i buckets, as
         * ours: anything else is not a filter we can hold. */
        if (nb != cf_filter_nbuckets(c, i) || len != cf_filter_bytes(c, i))
            FAIL(BLOOMERY_ECORRUPT, "sub-filter of the wrong size");
        memcpy(cf_filter_data_mut(c, i), data, len);
    }
    *out = c;
    c = NULL;
done:
    cf_free(c);
    return rc;
}

static uint64_t le_get(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int rb_cuckoo_dump_header(const uint8_t *buf, size_t len, uint64_t max_bytes, unsigned max_filters,
                          cf_t **out, const char **why)
{
    *out = NULL;
    *why = NULL;
    if (len != RB_CF_DUMP_HEADER_LEN) {
        *why = "not a RedisBloom cuckoo header";
        return BLOOMERY_EINVAL;
    }
    /* items, buckets, deletes, filters (u64), then bucket size, max
     * iterations, expansion (u16), into cuckoo_of's order. */
    uint64_t f[7] = {le_get(buf + 24, 8), le_get(buf + 8, 8),  le_get(buf, 8),
                     le_get(buf + 16, 8), le_get(buf + 32, 2), le_get(buf + 34, 2),
                     le_get(buf + 36, 2)};
    return cuckoo_of(f, max_bytes, max_filters, out, why);
}

int rb_cuckoo_dump_chunk(cf_t *c, long long iter, const uint8_t *data, size_t len)
{
    /* iter - 1 is where the chunk ends in the sub-filters' tables laid end
     * to end; a chunk lies inside one table. */
    if (cf_fingerprint_bits(c) != 8 || len == 0 || iter < 1 || (uint64_t)iter - 1 < len)
        return BLOOMERY_EINVAL;
    uint64_t off = (uint64_t)iter - 1 - len;
    for (uint32_t i = 0; i < cf_nfilters(c); i++) {
        uint64_t b = cf_filter_bytes(c, i);
        if (off < b)
            return cf_filter_write(c, i, off, data, len);
        off -= b;
    }
    return BLOOMERY_EINVAL;
}

bool rb_write_cuckoo(const rb_writer *w, const cf_t *c)
{
    cf_shape s;
    cf_shape_of(c, &s);
    if (s.fingerprint_bits != 8)
        return false;
    w->put_unsigned(w->ctx, s.nfilters);
    w->put_unsigned(w->ctx, s.nbuckets);
    w->put_unsigned(w->ctx, s.items);
    w->put_unsigned(w->ctx, s.deletes);
    w->put_unsigned(w->ctx, s.bucket_size);
    w->put_unsigned(w->ctx, s.max_iterations);
    w->put_unsigned(w->ctx, s.expansion);
    for (uint32_t i = 0; i < s.nfilters; i++) {
        w->put_unsigned(w->ctx, cf_filter_nbuckets(c, i));
        w->put_string(w->ctx, cf_filter_data(c, i), (size_t)cf_filter_bytes(c, i));
    }
    return true;
}

/* Classic (RedisBloom-compatible) Bloom filter and the SCANDUMP header codec.
 *
 * The vectors in tests/vectors/redisbloom-classic.json were recorded from
 * RedisBloom 2.4.23: for each filter the BF.MADD replies, the BF.SCANDUMP
 * chunks, BF.INFO and BF.MEXISTS of absent probes. Building the same filter
 * here must reproduce all of them byte for byte, and loading the dump must
 * answer as RedisBloom did. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomery/bloomery.h"
#include "bloomery/classic.h"
#include "bloomery/scalable.h"
#include "testutil.h"

/* ---- the recorded cases ---- */

typedef struct blob {
    unsigned char *p;
    size_t len;
} blob;

typedef struct vcase {
    char name[64];
    double p;
    uint64_t capacity;
    bool nonscaling;
    uint32_t expansion; /* as RedisBloom records it: 2 unless EXPANSION n */
    size_t nitems;
    blob *items;
    int *madd;
    size_t nchunks; /* chunk 0 is the header */
    long long *iters;
    blob *chunks;
    long long info_capacity, info_size, info_filters, info_items, info_expansion; /* -1: nil */
    size_t nprobes;
    blob *probes;
    int *probe_replies;
} vcase;

typedef struct vectors {
    size_t n;
    vcase *c;
} vectors;

static char *str_at(const tu_flat *f, size_t *len, const char *fmt, ...)
{
    char path[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    unsigned char *s = tu_flat_str(f, path, len);
    assert_non_null(s);
    char *z = realloc(s, *len + 1);
    z[*len] = '\0';
    return z;
}

static long long int_at(const tu_flat *f, const char *fmt, ...)
{
    char path[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    char kind = tu_flat_kind(f, path);
    if (kind == 'n')
        return -1;
    assert_true(kind == 'i' || kind == 'a' || kind == 'b');
    return tu_flat_int(f, path);
}

static void load_case(const tu_flat *f, size_t i, vcase *c)
{
    size_t len;
    char *s = str_at(f, &len, "filters.%zu.name", i);
    snprintf(c->name, sizeof c->name, "%s", s);
    free(s);

    long long nres = int_at(f, "filters.%zu.reserve", i);
    s = str_at(f, &len, "filters.%zu.reserve.0", i);
    c->p = strtod(s, NULL);
    free(s);
    s = str_at(f, &len, "filters.%zu.reserve.1", i);
    c->capacity = strtoull(s, NULL, 10);
    free(s);
    c->expansion = 2;
    for (long long j = 2; j < nres; j++) {
        s = str_at(f, &len, "filters.%zu.reserve.%lld", i, j);
        if (strcmp(s, "NONSCALING") == 0) {
            c->nonscaling = true;
        } else if (strcmp(s, "EXPANSION") == 0) {
            char *v = str_at(f, &len, "filters.%zu.reserve.%lld", i, ++j);
            c->expansion = (uint32_t)strtoul(v, NULL, 10);
            free(v);
        } else {
            fail_msg("unknown reserve option %s", s);
        }
        free(s);
    }

    bool hex = int_at(f, "filters.%zu.items_are_hex", i) != 0;
    c->nitems = (size_t)int_at(f, "filters.%zu.items", i);
    c->items = calloc(c->nitems, sizeof *c->items);
    c->madd = calloc(c->nitems, sizeof *c->madd);
    assert_int_equal(int_at(f, "filters.%zu.madd_replies", i), (long long)c->nitems);
    for (size_t j = 0; j < c->nitems; j++) {
        s = str_at(f, &len, "filters.%zu.items.%zu", i, j);
        if (hex) {
            c->items[j].p = tu_hex_decode(s, len, &c->items[j].len);
            free(s);
        } else {
            c->items[j] = (blob){(unsigned char *)s, len};
        }
        c->madd[j] = (int)int_at(f, "filters.%zu.madd_replies.%zu", i, j);
    }

    c->nchunks = (size_t)int_at(f, "filters.%zu.scandump", i);
    c->iters = calloc(c->nchunks, sizeof *c->iters);
    c->chunks = calloc(c->nchunks, sizeof *c->chunks);
    for (size_t j = 0; j < c->nchunks; j++) {
        c->iters[j] = int_at(f, "filters.%zu.scandump.%zu.0", i, j);
        s = str_at(f, &len, "filters.%zu.scandump.%zu.1", i, j);
        c->chunks[j].p = tu_hex_decode(s, len, &c->chunks[j].len);
        free(s);
    }

    const char *keys[] = {"Capacity", "Size", "Number of filters", "Number of items inserted",
                          "Expansion rate"};
    long long *vals[] = {&c->info_capacity, &c->info_size, &c->info_filters, &c->info_items,
                         &c->info_expansion};
    for (size_t j = 0; j < 5; j++) {
        s = str_at(f, &len, "filters.%zu.info.%zu", i, 2 * j);
        assert_string_equal(s, keys[j]);
        free(s);
        *vals[j] = int_at(f, "filters.%zu.info.%zu", i, 2 * j + 1);
    }

    c->nprobes = (size_t)int_at(f, "filters.%zu.absent_probes", i);
    c->probes = calloc(c->nprobes, sizeof *c->probes);
    c->probe_replies = calloc(c->nprobes, sizeof *c->probe_replies);
    for (size_t j = 0; j < c->nprobes; j++) {
        s = str_at(f, &len, "filters.%zu.absent_probes.%zu", i, j);
        c->probes[j] = (blob){(unsigned char *)s, len};
        c->probe_replies[j] = (int)int_at(f, "filters.%zu.absent_probe_replies.%zu", i, j);
    }
}

static void free_case(vcase *c)
{
    for (size_t j = 0; j < c->nitems; j++)
        free(c->items[j].p);
    for (size_t j = 0; j < c->nchunks; j++)
        free(c->chunks[j].p);
    for (size_t j = 0; j < c->nprobes; j++)
        free(c->probes[j].p);
    free(c->items);
    free(c->madd);
    free(c->iters);
    free(c->chunks);
    free(c->probes);
    free(c->probe_replies);
}

static int vectors_setup(void **state)
{
    tu_flat *f = tu_flat_load("redisbloom-classic");
    if (!f) {
        fprintf(stderr, "cannot load %s\n", tu_vector_path("redisbloom-classic.flat"));
        return -1;
    }
    vectors *v = calloc(1, sizeof *v);
    v->n = (size_t)tu_flat_int(f, "filters");
    v->c = calloc(v->n, sizeof *v->c);
    for (size_t i = 0; i < v->n; i++)
        load_case(f, i, &v->c[i]);
    tu_flat_free(f);
    *state = v;
    return 0;
}

static int vectors_teardown(void **state)
{
    vectors *v = *state;
    if (!v)
        return 0; /* setup failed and already said why */
    for (size_t i = 0; i < v->n; i++)
        free_case(&v->c[i]);
    free(v->c);
    free(v);
    return 0;
}

/* ---- a chain of classic links, as the vectors need it ----
 *
 * Either a plain list of cbf_t links run with RedisBloom's chain rules (the
 * links are what this suite tests) or the library's sbf_t. Both must give the
 * same answers and the same bytes. */

#define MAX_LINKS 16

typedef struct chain {
    sbf_t *sbf; /* NULL: emulated */
    cbf_t *links[MAX_LINKS];
    size_t n;
    bool nonscaling;
    uint32_t growth;
} chain;

static void chain_init_links(chain *ch, const vcase *c)
{
    memset(ch, 0, sizeof *ch);
    ch->nonscaling = c->nonscaling;
    ch->growth = c->expansion;
}

static void chain_create(chain *ch, const vcase *c, bool use_sbf)
{
    chain_init_links(ch, c);
    if (use_sbf) {
        sbf_options o = {.layout = BLOOMERY_LAYOUT_CLASSIC,
                         .expansion = c->nonscaling ? 0 : c->expansion};
        assert_int_equal(sbf_create(&ch->sbf, c->capacity, c->p, &o), BLOOMERY_OK);
        return;
    }
    /* A scaling chain starts at half the requested error. */
    double p = c->nonscaling ? c->p : c->p * 0.5;
    assert_int_equal(cbf_create(&ch->links[0], c->capacity, p), BLOOMERY_OK);
    ch->n = 1;
}

static void chain_free(chain *ch)
{
    sbf_free(ch->sbf);
    for (size_t i = 0; i < ch->n; i++)
        cbf_free(ch->links[i]);
}

static size_t chain_nlinks(const chain *ch) { return ch->sbf ? sbf_nlinks(ch->sbf) : ch->n; }

static cbf_t *chain_link(const chain *ch, size_t i)
{
    return ch->sbf ? sbf_link_classic(ch->sbf, i) : ch->links[i];
}

static int chain_check(const chain *ch, const blob *item)
{
    if (ch->sbf)
        return sbf_check(ch->sbf, item->p, item->len);
    cbf_hash h = cbf_hash_item(item->p, item->len);
    for (size_t i = ch->n; i-- > 0;)
        if (cbf_check_hashed(ch->links[i], h))
            return 1;
    return 0;
}

static int chain_add(chain *ch, const blob *item)
{
    if (ch->sbf)
        return sbf_add(ch->sbf, item->p, item->len);
    cbf_hash h = cbf_hash_item(item->p, item->len);
    for (size_t i = ch->n; i-- > 0;)
        if (cbf_check_hashed(ch->links[i], h))
            return 0;
    cbf_t *cur = ch->links[ch->n - 1];
    if (cbf_count(cur) >= cbf_capacity(cur)) {
        if (ch->nonscaling)
            return BLOOMERY_EFULL;
        assert_true(ch->n < MAX_LINKS);
        assert_int_equal(cbf_create(&ch->links[ch->n], cbf_capacity(cur) * ch->growth,
                                    cbf_error_rate(cur) * 0.5),
                         BLOOMERY_OK);
        cur = ch->links[ch->n++];
    }
    return cbf_add_hashed(cur, h) ? 1 : 0;
}

static uint64_t chain_count(const chain *ch)
{
    uint64_t n = 0;
    for (size_t i = 0; i < chain_nlinks(ch); i++)
        n += cbf_count(chain_link(ch, i));
    return n;
}

/* The SCANDUMP header RedisBloom writes for this chain. */
static size_t chain_header(const chain *ch, uint8_t **out)
{
    size_t n = chain_nlinks(ch);
    cbf_rb_header h = {
        .total_items = chain_count(ch),
        .nfilters = (uint32_t)n,
        .options =
            CBF_RB_OPT_NOROUND | CBF_RB_OPT_FORCE64 | (ch->nonscaling ? CBF_RB_OPT_NO_SCALING : 0),
        .growth = ch->growth,
        .links = calloc(n, sizeof(cbf_rb_link)),
    };
    for (size_t i = 0; i < n; i++) {
        cbf_shape_of(chain_link(ch, i), &h.links[i].shape);
        h.links[i].items = cbf_count(chain_link(ch, i));
    }
    size_t len = cbf_rb_header_size(h.nfilters);
    *out = malloc(len);
    cbf_rb_header_encode(&h, *out);
    free(h.links);
    return len;
}

/* ---- vector tests ---- */

static void check_built(const vcase *c, const chain *ch)
{
    /* Header, byte for byte. */
    uint8_t *hdr;
    size_t hlen = chain_header(ch, &hdr);
    assert_int_equal(c->iters[0], 1);
    assert_int_equal(hlen, c->chunks[0].len);
    assert_memory_equal(hdr, c->chunks[0].p, hlen);
    free(hdr);

    /* Data chunks: one per link (all are far below the 16 MiB chunk limit),
     * the iterator being 1 + the end offset in the concatenated arrays. */
    size_t n = chain_nlinks(ch);
    assert_int_equal(c->nchunks, n + 1);
    long long end = 0;
    for (size_t i = 0; i < n; i++) {
        cbf_t *l = chain_link(ch, i);
        end += (long long)cbf_bytes(l);
        assert_int_equal(c->iters[i + 1], end + 1);
        assert_int_equal(c->chunks[i + 1].len, cbf_bytes(l));
        assert_memory_equal(cbf_data(l), c->chunks[i + 1].p, cbf_bytes(l));
    }

    /* BF.INFO: Size is RedisBloom's 32-byte chain plus 64 bytes a link. */
    uint64_t cap = 0, bytes = 0;
    for (size_t i = 0; i < n; i++) {
        cap += cbf_capacity(chain_link(ch, i));
        bytes += cbf_bytes(chain_link(ch, i));
    }
    assert_int_equal(cap, c->info_capacity);
    assert_int_equal(32 + 64 * n + bytes, c->info_size);
    assert_int_equal(n, c->info_filters);
    assert_int_equal(chain_count(ch), c->info_items);
    assert_int_equal(c->info_expansion, c->nonscaling ? -1 : (long long)c->expansion);

    for (size_t j = 0; j < c->nitems; j++)
        assert_int_equal(chain_check(ch, &c->items[j]), 1);
    for (size_t j = 0; j < c->nprobes; j++)
        assert_int_equal(chain_check(ch, &c->probes[j]), c->probe_replies[j]);
}

static void build_case(const vcase *c, bool use_sbf)
{
    chain ch;
    chain_create(&ch, c, use_sbf);
    for (size_t j = 0; j < c->nitems; j++) {
        int r = chain_add(&ch, &c->items[j]);
        if (r != c->madd[j])
            fail_msg("%s: item %zu answered %d, RedisBloom %d", c->name, j, r, c->madd[j]);
    }
    check_built(c, &ch);
    chain_free(&ch);
}

static void test_vectors_build_links(void **state)
{
    const vectors *v = *state;
    assert_int_equal(v->n, 4);
    for (size_t i = 0; i < v->n; i++)
        build_case(&v->c[i], false);
}

static void test_vectors_build_sbf(void **state)
{
    const vectors *v = *state;
    for (size_t i = 0; i < v->n; i++)
        build_case(&v->c[i], true);
}

/* What BF.LOADCHUNK does: header first, then each chunk at iter - len - 1. */
static void test_vectors_load(void **state)
{
    const vectors *v = *state;
    for (size_t i = 0; i < v->n; i++) {
        const vcase *c = &v->c[i];
        cbf_rb_header h;
        assert_int_equal(cbf_rb_header_decode(c->chunks[0].p, c->chunks[0].len, 1 << 20, &h),
                         BLOOMERY_OK);
        assert_int_equal(h.nfilters, c->info_filters);
        assert_int_equal(h.total_items, c->info_items);
        assert_int_equal(h.growth, c->expansion);
        assert_int_equal(!!(h.options & CBF_RB_OPT_NO_SCALING), c->nonscaling);

        chain ch;
        chain_init_links(&ch, c);
        for (uint32_t k = 0; k < h.nfilters; k++) {
            assert_int_equal(cbf_create_shape(&ch.links[k], &h.links[k].shape), BLOOMERY_OK);
            cbf_set_count(ch.links[k], h.links[k].items);
            ch.n++;
        }
        for (size_t j = 1; j < c->nchunks; j++) {
            uint64_t off = (uint64_t)c->iters[j] - c->chunks[j].len - 1;
            size_t k = 0;
            while (k < ch.n && off >= cbf_bytes(ch.links[k]))
                off -= cbf_bytes(ch.links[k++]);
            assert_true(k < ch.n);
            assert_true(off + c->chunks[j].len <= cbf_bytes(ch.links[k]));
            memcpy(cbf_data_mut(ch.links[k]) + off, c->chunks[j].p, c->chunks[j].len);
        }
        cbf_rb_header_release(&h);
        assert_null(h.links);

        /* The loaded chain answers, re-dumps and keeps growing as RedisBloom's. */
        check_built(c, &ch);
        for (size_t j = 0; j < c->nitems; j++)
            assert_int_equal(chain_add(&ch, &c->items[j]), 0);
        chain_free(&ch);
    }
}

/* The sizing behind the headers, field by field: bpe must be the very double
 * RedisBloom stored (0.005 -> 11.027753418256411...). */
static void test_vectors_sizing(void **state)
{
    const vectors *v = *state;
    for (size_t i = 0; i < v->n; i++) {
        const vcase *c = &v->c[i];
        cbf_rb_header h;
        assert_int_equal(cbf_rb_header_decode(c->chunks[0].p, c->chunks[0].len, 1 << 20, &h),
                         BLOOMERY_OK);
        double p = c->nonscaling ? c->p : c->p * 0.5;
        uint64_t cap = c->capacity;
        for (uint32_t k = 0; k < h.nfilters; k++) {
            cbf_t *f;
            assert_int_equal(cbf_create(&f, cap, p), BLOOMERY_OK);
            cbf_shape s;
            cbf_shape_of(f, &s);
            const cbf_shape *r = &h.links[k].shape;
            assert_int_equal(s.capacity, r->capacity);
            assert_memory_equal(&s.error_rate, &r->error_rate, sizeof(double));
            assert_memory_equal(&s.bpe, &r->bpe, sizeof(double));
            assert_int_equal(s.hashes, r->hashes);
            assert_int_equal(s.bits, r->bits);
            assert_int_equal(s.bytes, r->bytes);
            assert_int_equal(s.n2, 0);
            assert_int_equal(cbf_bytes_for(cap, p), r->bytes);
            cbf_free(f);
            cap *= c->expansion;
            p *= 0.5;
        }
        cbf_rb_header_release(&h);
    }
}

/* ---- header codec ---- */

static int decode_rc(const uint8_t *buf, size_t len, uint64_t max_bytes)
{
    cbf_rb_header h;
    memset(&h, 0xa5, sizeof h);
    int rc = cbf_rb_header_decode(buf, len, max_bytes, &h);
    if (rc == BLOOMERY_OK) {
        cbf_rb_header_release(&h);
    } else {
        assert_null(h.links);
        assert_int_equal(h.nfilters, 0);
    }
    return rc;
}

static void test_header_roundtrip(void **state)
{
    const vectors *v = *state;
    for (size_t i = 0; i < v->n; i++) {
        const blob *b = &v->c[i].chunks[0];
        cbf_rb_header h;
        assert_int_equal(cbf_rb_header_decode(b->p, b->len, UINT64_MAX, &h), BLOOMERY_OK);
        assert_int_equal(cbf_rb_header_size(h.nfilters), b->len);
        uint8_t *out = malloc(b->len);
        cbf_rb_header_encode(&h, out);
        assert_memory_equal(out, b->p, b->len);
        free(out);
        cbf_rb_header_release(&h);
        cbf_rb_header_release(&h); /* idempotent */
    }
}

static void test_header_truncated(void **state)
{
    const vectors *v = *state;
    for (size_t i = 0; i < v->n; i++) {
        const blob *b = &v->c[i].chunks[0];
        for (size_t len = 0; len < b->len; len++) {
            /* A copy of exactly len bytes, so ASan sees any over-read. */
            uint8_t *cut = malloc(len ? len : 1);
            memcpy(cut, b->p, len);
            int rc = decode_rc(cut, len, UINT64_MAX);
            assert_int_not_equal(rc, BLOOMERY_OK);
            free(cut);
        }
        uint8_t *longer = calloc(1, b->len + 1);
        memcpy(longer, b->p, b->len);
        assert_int_equal(decode_rc(longer, b->len + 1, UINT64_MAX), BLOOMERY_ECORRUPT);
        free(longer);
    }
    assert_int_equal(decode_rc(NULL, 0, UINT64_MAX), BLOOMERY_ETRUNC);
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void putf(uint8_t *p, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    put64(p, v);
}

/* Link field offsets inside a 53-byte link. */
enum {
    L_BYTES = 0,
    L_BITS = 8,
    L_ITEMS = 16,
    L_ERROR = 24,
    L_BPE = 32,
    L_HASHES = 40,
    L_CAP = 44,
    L_N2 = 52
};

static uint8_t *link_at(uint8_t *hdr, size_t k)
{
    return hdr + CBF_RB_HEADER_FIXED + k * CBF_RB_HEADER_LINK;
}

static void expect_corrupt(const blob *b, int expected, void (*mutate)(uint8_t *, void *),
                           void *arg, const char *what)
{
    uint8_t *buf = malloc(b->len);
    memcpy(buf, b->p, b->len);
    mutate(buf, arg);
    int rc = decode_rc(buf, b->len, 1 << 20);
    if (rc != expected)
        fail_msg("%s: decode gave %d, expected %d", what, rc, expected);
    free(buf);
}

typedef struct fieldset {
    size_t link; /* SIZE_MAX: fixed part */
    size_t off;
    int width; /* 1, 4, 8 or 'd' */
    uint64_t u;
    double d;
} fieldset;

static void set_field(uint8_t *buf, void *arg)
{
    const fieldset *fs = arg;
    uint8_t *p = (fs->link == SIZE_MAX ? buf : link_at(buf, fs->link)) + fs->off;
    switch (fs->width) {
    case 1: *p = (uint8_t)fs->u; break;
    case 4: put32(p, (uint32_t)fs->u); break;
    case 8: put64(p, fs->u); break;
    default: putf(p, fs->d); break;
    }
}

static void test_header_corrupt(void **state)
{
    const vectors *v = *state;
    const blob *single = NULL, *multi = NULL;
    for (size_t i = 0; i < v->n; i++) {
        if (v->c[i].info_filters == 1 && !v->c[i].nonscaling)
            single = &v->c[i].chunks[0];
        if (v->c[i].info_filters == 3)
            multi = &v->c[i].chunks[0];
    }
    assert_non_null(single);
    assert_non_null(multi);
    const size_t F = SIZE_MAX;
    const int E = BLOOMERY_ECORRUPT;
    struct {
        fieldset fs;
        int rc;
        const char *what;
    } cases[] = {
        {{F, 8, 4, 0, 0}, E, "nfilters 0"},
        {{F, 8, 4, 2, 0}, BLOOMERY_ETRUNC, "nfilters beyond the buffer"},
        {{F, 8, 4, UINT32_MAX, 0}, BLOOMERY_ETRUNC, "nfilters 2^32-1"},
        {{F, 0, 8, 63, 0}, E, "total differs from the link"},
        {{F, 12, 4, 0, 0}, E, "no options"},
        {{F, 12, 4, CBF_RB_OPT_NOROUND, 0}, E, "32-bit hashing"},
        {{F, 12, 4, 0x15, 0}, E, "unknown option bit"},
        {{F, 12, 4, 0x80000005u, 0}, E, "unknown high option bit"},
        {{F, 16, 4, 0, 0}, E, "scaling chain with growth 0"},
        {{0, L_BYTES, 8, 0, 0}, E, "zero bytes"},
        {{0, L_BYTES, 8, 169, 0}, E, "bits != 8 * bytes"},
        {{0, L_BITS, 8, 0, 0}, E, "zero bits"},
        {{0, L_BITS, 8, 1352, 0}, E, "bits too many"},
        {{0, L_BYTES, 8, (uint64_t)1 << 61, 0}, BLOOMERY_ETOOBIG, "absurd byte count"},
        {{0, L_BYTES, 8, UINT64_MAX, 0}, BLOOMERY_ETOOBIG, "byte count 2^64-1"},
        {{0, L_ITEMS, 8, 65, 0}, E, "link items differ from the total"},
        {{0, L_ERROR, 'd', 0, 0.0}, E, "error 0"},
        {{0, L_ERROR, 'd', 0, 1.0}, E, "error 1"},
        {{0, L_ERROR, 'd', 0, -0.5}, E, "negative error"},
        {{0, L_ERROR, 'd', 0, NAN}, E, "NaN error"},
        {{0, L_ERROR, 'd', 0, INFINITY}, E, "infinite error"},
        {{0, L_BPE, 'd', 0, 0.0}, E, "bpe 0"},
        {{0, L_BPE, 'd', 0, -20.6}, E, "negative bpe"},
        {{0, L_BPE, 'd', 0, NAN}, E, "NaN bpe"},
        {{0, L_BPE, 'd', 0, INFINITY}, E, "infinite bpe"},
        {{0, L_BPE, 'd', 0, 1e300}, E, "huge bpe"},
        {{0, L_BPE, 'd', 0, 30.0}, E, "bpe disagrees with hashes"},
        {{0, L_HASHES, 4, 14, 0}, E, "hashes one short"},
        {{0, L_HASHES, 4, 16, 0}, E, "hashes one over"},
        {{0, L_HASHES, 4, 0, 0}, E, "zero hashes"},
        {{0, L_HASHES, 4, UINT32_MAX, 0}, E, "hashes 2^32-1"},
        {{0, L_CAP, 8, 0, 0}, E, "zero capacity"},
        {{0, L_N2, 1, 64, 0}, E, "n2 64"},
        {{0, L_N2, 1, 255, 0}, E, "n2 255"},
        {{0, L_N2, 1, 11, 0}, E, "n2 beyond the bits"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_corrupt(single, cases[i].rc, set_field, &cases[i].fs, cases[i].what);

    /* The same field checks hold for every link of a chain, not only the first. */
    fieldset last_bpe = {2, L_BPE, 'd', 0, NAN};
    expect_corrupt(multi, E, set_field, &last_bpe, "NaN bpe in link 3");
    fieldset mid_cap = {1, L_CAP, 8, 0, 0};
    expect_corrupt(multi, E, set_field, &mid_cap, "zero capacity in link 2");
    fieldset nfilters2 = {F, 8, 4, 2, 0};
    expect_corrupt(multi, E, set_field, &nfilters2, "nfilters short of the buffer");

    /* A legal power-of-two link: n2 10 over 1024 bits is accepted. */
    {
        uint8_t *buf = malloc(single->len);
        memcpy(buf, single->p, single->len);
        put64(link_at(buf, 0) + L_BYTES, 128);
        put64(link_at(buf, 0) + L_BITS, 1024);
        link_at(buf, 0)[L_N2] = 10;
        assert_int_equal(decode_rc(buf, single->len, 1 << 20), BLOOMERY_OK);
        free(buf);
    }
}

/* Item counts whose sum wraps around 2^64 to the recorded total. */
static void wrap_items(uint8_t *buf, void *arg)
{
    (void)arg;
    /* 100 + 200 + 48 = 348 becomes (2^64 - 51) + 351 + 48 = 348 mod 2^64. */
    assert_int_equal(get64(link_at(buf, 0) + L_ITEMS), 100);
    put64(link_at(buf, 0) + L_ITEMS, UINT64_MAX - 50);
    put64(link_at(buf, 1) + L_ITEMS, get64(link_at(buf, 1) + L_ITEMS) + 151);
}

static void test_header_limits(void **state)
{
    const vectors *v = *state;
    const blob *multi = NULL;
    for (size_t i = 0; i < v->n; i++)
        if (v->c[i].info_filters == 3)
            multi = &v->c[i].chunks[0];
    assert_non_null(multi);
    expect_corrupt(multi, BLOOMERY_ECORRUPT, wrap_items, NULL, "items wrap to the total");

    /* max_bytes bounds the sum of the arrays: 144 + 312 + 696 = 1152. */
    assert_int_equal(decode_rc(multi->p, multi->len, 1152), BLOOMERY_OK);
    assert_int_equal(decode_rc(multi->p, multi->len, 1151), BLOOMERY_ETOOBIG);
    assert_int_equal(decode_rc(multi->p, multi->len, 0), BLOOMERY_ETOOBIG);

    /* Random damage never crashes; whatever is accepted can be built. */
    uint64_t seed = 12345;
    size_t rounds = tu_scale(20000, 2000);
    for (size_t r = 0; r < rounds; r++) {
        const blob *b = &v->c[r % v->n].chunks[0];
        uint8_t *buf = malloc(b->len);
        memcpy(buf, b->p, b->len);
        unsigned flips = 1 + (unsigned)(tu_next(&seed) % 3);
        for (unsigned k = 0; k < flips; k++)
            buf[tu_next(&seed) % b->len] ^= (uint8_t)(1u << (tu_next(&seed) % 8));
        cbf_rb_header h;
        if (cbf_rb_header_decode(buf, b->len, 1 << 20, &h) == BLOOMERY_OK) {
            uint64_t sum = 0;
            for (uint32_t k = 0; k < h.nfilters; k++) {
                cbf_t *f;
                assert_int_equal(cbf_create_shape(&f, &h.links[k].shape), BLOOMERY_OK);
                cbf_add(f, "x", 1);
                assert_true(cbf_check(f, "x", 1));
                cbf_free(f);
                sum += h.links[k].items;
            }
            assert_int_equal(sum, h.total_items);
            cbf_rb_header_release(&h);
        }
        free(buf);
    }
}

/* ---- the filter itself ---- */

static void test_create_args(void **state)
{
    (void)state;
    cbf_t *f = (cbf_t *)&f;
    assert_int_equal(cbf_create(&f, 0, 0.01), BLOOMERY_EINVAL);
    assert_null(f);
    assert_int_equal(cbf_create(&f, 100, 0.0), BLOOMERY_EINVAL);
    assert_int_equal(cbf_create(&f, 100, 1.0), BLOOMERY_EINVAL);
    assert_int_equal(cbf_create(&f, 100, -0.1), BLOOMERY_EINVAL);
    assert_int_equal(cbf_create(&f, 100, NAN), BLOOMERY_EINVAL);
    assert_int_equal(cbf_create(NULL, 100, 0.01), BLOOMERY_EINVAL);
    assert_int_equal(cbf_create(&f, UINT64_MAX, 0.01), BLOOMERY_ETOOBIG);
    assert_int_equal(cbf_create(&f, (uint64_t)1 << 50, 0.01), BLOOMERY_ETOOBIG);
    assert_null(f);
    assert_int_equal(cbf_bytes_for(0, 0.01), 0);
    assert_int_equal(cbf_bytes_for(UINT64_MAX, 0.01), 0);
    /* BF.RESERVE k 0.1 10: the 8-byte array of the docs example. */
    assert_int_equal(cbf_bytes_for(10, 0.1), 8);
    /* 2^30 items at 0.005: RedisBloom's largest default-scaling link. */
    assert_int_equal(cbf_bytes_for((uint64_t)1 << 30, 0.005), 1480120016);

    /* Tiny and extreme rates still size as RedisBloom does. */
    assert_int_equal(cbf_create(&f, 1, 0.999), BLOOMERY_OK);
    assert_int_equal(cbf_bits(f), 64);
    assert_int_equal(cbf_hashes(f), 1);
    cbf_free(f);
    assert_int_equal(cbf_create(&f, 1, 4.9e-324), BLOOMERY_OK);
    assert_int_equal(cbf_hashes(f), CBF_MAX_HASHES);
    assert_true(cbf_add(f, "a", 1));
    assert_true(cbf_check(f, "a", 1));
    cbf_free(f);

    cbf_shape s = {
        .capacity = 10, .error_rate = 0.1, .bpe = 4.79, .hashes = 4, .bits = 64, .bytes = 8};
    assert_int_equal(cbf_create_shape(&f, &s), BLOOMERY_OK);
    cbf_free(f);
    cbf_shape bad = s;
    bad.hashes = 5;
    assert_int_equal(cbf_create_shape(&f, &bad), BLOOMERY_EINVAL);
    assert_null(f);
    bad = s;
    bad.bytes = CBF_MAX_BYTES + 1;
    bad.bits = bad.bytes * 8;
    assert_int_equal(cbf_create_shape(&f, &bad), BLOOMERY_ETOOBIG);
    assert_int_equal(cbf_create_shape(&f, NULL), BLOOMERY_EINVAL);
    cbf_free(NULL);
}

/* Every probe lands where (a + i*b) mod m says, with the sum wrapping at 2^64,
 * for odd sizes, legacy power-of-two moduli and filters big enough for the
 * prefetching insert path (k = 20 also spans two prefetch batches). */
static void test_probe_positions(void **state)
{
    (void)state;
    uint64_t seed = 99;
    uint64_t sizes[] = {1, 3, 7, 8, 9, 13, 120, 125, 1000, 4096, 65536 + 5, (5 << 20) + 3};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        for (int n2 = 0; n2 <= 12; n2 += 3) {
            uint64_t bytes = sizes[si];
            if (n2 && (bytes * 8 < (uint64_t)1 << n2))
                continue;
            cbf_shape s = {.capacity = 100,
                           .error_rate = 1e-6,
                           .bpe = 28.75,
                           .hashes = 20,
                           .bits = bytes * 8,
                           .bytes = bytes,
                           .n2 = (uint8_t)n2};
            uint64_t m = n2 ? (uint64_t)1 << n2 : bytes * 8;
            cbf_t *f;
            assert_int_equal(cbf_create_shape(&f, &s), BLOOMERY_OK);
            uint8_t *want = calloc(bytes, 1);
            int rounds = bytes > 65536 + 5 ? 4 : 50;
            for (int r = 0; r < rounds; r++) {
                cbf_hash h = {tu_next(&seed), tu_next(&seed)};
                if (r == 0)
                    h = (cbf_hash){UINT64_MAX, UINT64_MAX}; /* wraps every step */
                if (r == 1)
                    h = (cbf_hash){0, 0};
                cbf_clear(f);
                memset(want, 0, bytes);
                bool fresh = false;
                for (uint64_t i = 0; i < s.hashes; i++) {
                    uint64_t x = (h.a + i * h.b) % m;
                    fresh |= !(want[x >> 3] & 1u << (x & 7));
                    want[x >> 3] |= (uint8_t)(1u << (x & 7));
                }
                assert_true(fresh);
                assert_true(cbf_add_hashed(f, h));
                assert_memory_equal(cbf_data(f), want, bytes);
                assert_true(cbf_check_hashed(f, h));
                assert_false(cbf_add_hashed(f, h));
                assert_int_equal(cbf_count(f), 1);
            }
            free(want);
            cbf_free(f);
        }
    }
}

static void test_no_false_negatives(void **state)
{
    (void)state;
    uint64_t n = tu_scale(1000000, 50000);
    cbf_t *f;
    assert_int_equal(cbf_create(&f, n, 0.01), BLOOMERY_OK);
    char key[32];
    uint64_t fresh = 0;
    for (uint64_t i = 0; i < n; i++)
        fresh += cbf_add(f, key, tu_key(key, "member:", i));
    assert_int_equal(cbf_count(f), fresh);
    assert_true(fresh > n - n / 50);
    for (uint64_t i = 0; i < n; i++)
        if (!cbf_check(f, key, tu_key(key, "member:", i)))
            fail_msg("false negative for item %llu", (unsigned long long)i);
    cbf_free(f);
}

static void test_fpr_at_capacity(void **state)
{
    (void)state;
    const double ps[] = {1e-2, 1e-3, 1e-4, 1e-5};
    uint64_t n = tu_scale(1000000, 20000);
    uint64_t q = tu_scale(10000000, 200000);
    for (size_t i = 0; i < 4; i++) {
        cbf_t *f;
        assert_int_equal(cbf_create(&f, n, ps[i]), BLOOMERY_OK);
        uint64_t seed = 0x5eed0000 + i;
        uint64_t key;
        for (uint64_t j = 0; j < n; j++) {
            key = tu_next(&seed);
            cbf_add(f, &key, sizeof key);
        }
        /* Queries come from another stream: the chance that one of them
         * equals a member is about n*q/2^64, below 1e-6. */
        uint64_t qseed = 0xabcdef00 + i, fp = 0;
        for (uint64_t j = 0; j < q; j++) {
            key = tu_next(&qseed);
            fp += cbf_check(f, &key, sizeof key);
        }
        double rate = (double)fp / (double)q;
        double bound = tu_fpr_bound(ps[i], q);
        printf("  p=%g n=%llu q=%llu measured %.4g (bound %.4g, estimate %.4g)\n", ps[i],
               (unsigned long long)n, (unsigned long long)q, rate, bound, cbf_fpr_estimate(f));
        assert_true(rate <= bound);
        cbf_free(f);
    }
}

typedef struct race {
    cbf_t *f;
    const uint64_t *keys;
    size_t n;
    unsigned char *fresh;
    atomic_size_t done; /* items this thread has finished */
    atomic_size_t *other_done;
} race;

/* Both threads add the same items in the same order and neither runs more
 * than a few items ahead, so most items are added by both at nearly the same
 * moment. */
static void *race_run(void *arg)
{
    race *r = arg;
    for (size_t i = 0; i < r->n; i++) {
        while (i > atomic_load_explicit(r->other_done, memory_order_acquire) + 2)
            ;
        r->fresh[i] = cbf_check_and_add(r->f, &r->keys[i], sizeof r->keys[i]);
        atomic_store_explicit(&r->done, i + 1, memory_order_release);
    }
    return NULL;
}

static void test_concurrent_check_and_add(void **state)
{
    (void)state;
    size_t n = tu_scale(300000, 20000);
    uint64_t *keys = malloc(n * sizeof *keys);
    uint64_t seed = 777;
    for (size_t i = 0; i < n; i++)
        keys[i] = tu_next(&seed);
    for (int round = 0; round < 3; round++) {
        /* p = 1e-10 makes a false-positive collision among n items (which would
         * leave an item reported by nobody) vanishingly unlikely. */
        cbf_t *f;
        assert_int_equal(cbf_create(&f, n, 1e-10), BLOOMERY_OK);
        race r[2];
        pthread_t t[2];
        for (int k = 0; k < 2; k++) {
            r[k] = (race){
                .f = f, .keys = keys, .n = n, .fresh = calloc(n, 1), .other_done = &r[1 - k].done};
            atomic_init(&r[k].done, 0);
        }
        for (int k = 0; k < 2; k++)
            assert_int_equal(pthread_create(&t[k], NULL, race_run, &r[k]), 0);
        for (int k = 0; k < 2; k++)
            pthread_join(t[k], NULL);
        size_t total = 0;
        for (size_t i = 0; i < n; i++) {
            if (r[0].fresh[i] + r[1].fresh[i] != 1)
                fail_msg("round %d: item %zu reported new %d times", round, i,
                         r[0].fresh[i] + r[1].fresh[i]);
            total += r[0].fresh[i];
        }
        assert_int_equal(cbf_count(f), n);
        printf("  round %d: thread 0 won %zu of %zu\n", round, total, n);
        free(r[0].fresh);
        free(r[1].fresh);
        cbf_free(f);
    }
    free(keys);
}

static void test_merge_clear_estimate(void **state)
{
    (void)state;
    cbf_t *a, *b, *c;
    assert_int_equal(cbf_create(&a, 10000, 0.01), BLOOMERY_OK);
    assert_int_equal(cbf_create(&b, 10000, 0.01), BLOOMERY_OK);
    assert_int_equal(cbf_create(&c, 10000, 0.001), BLOOMERY_OK);
    assert_true(cbf_fpr_estimate(a) == 0.0);
    char key[32];
    for (uint64_t i = 0; i < 5000; i++) {
        cbf_add(a, key, tu_key(key, "a", i));
        cbf_add(b, key, tu_key(key, "b", i));
    }
    uint64_t ca = cbf_count(a), cb = cbf_count(b);
    assert_int_equal(cbf_merge(a, c), BLOOMERY_EINVAL);
    assert_int_equal(cbf_merge(a, b), BLOOMERY_OK);
    assert_int_equal(cbf_merge(a, a), BLOOMERY_OK);
    assert_int_equal(cbf_count(a), ca + cb);
    for (uint64_t i = 0; i < 5000; i++) {
        assert_true(cbf_check(a, key, tu_key(key, "a", i)));
        assert_true(cbf_check(a, key, tu_key(key, "b", i)));
    }
    /* At capacity the estimate is close to the design rate. */
    double e = cbf_fpr_estimate(a);
    assert_true(e > 0.005 && e < 0.02);
    cbf_clear(a);
    assert_int_equal(cbf_count(a), 0);
    assert_true(cbf_fpr_estimate(a) == 0.0);
    assert_false(cbf_check(a, key, tu_key(key, "a", 1)));
    for (uint64_t i = 0; i < cbf_bytes(a); i++)
        assert_int_equal(cbf_data(a)[i], 0);
    cbf_set_count(a, 42);
    assert_int_equal(cbf_count(a), 42);
    cbf_free(a);
    cbf_free(b);
    cbf_free(c);
}

int main(void)
{
    /* One test per line. */
    /* clang-format off */
    const struct CMUnitTest vector_tests[] = {
        cmocka_unit_test(test_vectors_sizing),
        cmocka_unit_test(test_vectors_build_links),
        cmocka_unit_test(test_vectors_build_sbf),
        cmocka_unit_test(test_vectors_load),
        cmocka_unit_test(test_header_roundtrip),
        cmocka_unit_test(test_header_truncated),
        cmocka_unit_test(test_header_corrupt),
        cmocka_unit_test(test_header_limits),
    };
    /* clang-format on */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_args),
        cmocka_unit_test(test_probe_positions),
        cmocka_unit_test(test_no_false_negatives),
        cmocka_unit_test(test_fpr_at_capacity),
        tu_threaded_test(test_concurrent_check_and_add),
        cmocka_unit_test(test_merge_clear_estimate),
    };
    int failed = cmocka_run_group_tests_name("classic_vectors", vector_tests, vectors_setup,
                                             vectors_teardown);
    failed += cmocka_run_group_tests_name("classic", tests, NULL, NULL);
    return failed;
}

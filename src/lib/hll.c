/* HyperLogLog cardinality estimation, byte-compatible with Redis 5 and later.
 *
 * The object *is* the Redis string value: we keep the exact bytes Redis
 * would hold for the key and edit them in place, instead of keeping our own
 * register array and converting on export. That costs a linear walk per
 * update while the value is sparse (as it does in Redis; PFMERGE resumes
 * its walks where the previous register's ended, see sparse_cursor), but it
 * makes byte-for-byte compatibility a property of each edit rather than of
 * a serializer that must re-derive Redis's history-dependent sparse
 * encoding.
 *
 * Header (16 bytes, both encodings):
 *
 *   0      4   5         8                              16
 *   +------+---+---------+------------------------------+
 *   | HYLL | E |  N/U x3 | cached cardinality, LE u64   |
 *   +------+---+---------+------------------------------+
 *
 *   E = 0 dense, 1 sparse. The bit 7 of byte 15 (the top bit of the cached
 *   cardinality) set means "cache invalid"; invalidation sets only that bit,
 *   so the stale low bytes stay in the value and are part of what must match.
 *
 * Dense: 16384 registers x 6 bits, register j at bits 6j..6j+5 of the
 * little-endian bit stream that starts at byte 16 (12304 bytes in all):
 *
 *   byte   16        17        18
 *   +--------+--------+--------+----//
 *   |11000000|22221111|33333322| ...
 *   +--------+--------+--------+----//
 *
 * Sparse: a run-length program whose runs must cover exactly 16384
 * registers, in order:
 *
 *   ZERO   00xxxxxx            xxxxxx + 1 (1..64) registers at 0
 *   XZERO  01xxxxxx yyyyyyyy   14-bit xxxxxxyyyyyyyy + 1 (1..16384) at 0
 *   VAL    1vvvvvxx            vvvvv + 1 (1..32) repeated xx + 1 (1..4) times
 *
 * A new key is the header plus one XZERO of 16384 (7f ff).
 *
 * Updating a sparse register splits the run that covers it into at most
 * three runs (left part, the new VAL, right part), then looks at up to five
 * opcodes starting just before the edit and fuses neighbouring VALs with the
 * same value. The resulting bytes depend on that exact local repair (an
 * "optimal" re-encoding would differ), which is why it is reproduced step
 * for step. The value becomes dense when a register needs more than 32 or
 * when growing would take the string past sparse_max_bytes (header
 * included); the dense copy keeps the old header, stale cache bytes and all.
 *
 * Hash: MurmurHash64A with seed 0xadc83b19. The low 14 bits pick the
 * register; the rest, with bit 50 forced on so the loop ends, gives
 * count = trailing zeros + 1, so 1..51.
 *
 * Estimate: Otmar Ertl, "New cardinality estimation algorithms for
 * HyperLogLog sketches" (arXiv:1702.01284), on the histogram of register
 * values, with Redis's order of floating-point operations (see hll_estimate).
 *
 * Validation is eager: hll_from_bytes walks the whole sparse program once,
 * so every later operation can rely on it. Redis checks lazily and would
 * accept some damaged values until an operation touches the damage; we
 * reject them up front, which is the safer half of that difference.
 */
#include "bloomery/hll.h"

#include "bloomery/bloomery.h"
#include "bloomery/murmur.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Contraction is disabled for this file by the build (-ffp-contract=off);
 * clang also honours the standard pragma, which covers builds that compile
 * this file by hand. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define HDR_SIZE 16
#define ENC_OFF 4
#define CARD_OFF 8
#define ENC_DENSE 0
#define ENC_SPARSE 1

#define HASH_SEED 0xadc83b19ULL
#define HLL_Q (64 - HLL_P) /* hash bits left for the run length */
#define REG_MASK (HLL_REGISTERS - 1)
#define HISTO_SIZE 64 /* a 6-bit register may hold up to 63 */

#define ZERO_MAX_LEN 64
#define XZERO_MAX_LEN 16384
#define VAL_MAX_VALUE 32
#define VAL_MAX_LEN 4

/* clang-format 14 would take "(b) & mask" below for a cast and drop the spaces. */
/* clang-format off */
#define OP_IS_ZERO(b) (((b) & 0xc0) == 0)
#define OP_IS_XZERO(b) (((b) & 0xc0) == 0x40)
#define OP_IS_VAL(b) (((b) & 0x80) != 0)
#define ZERO_LEN(b) (((unsigned)(b) & 0x3f) + 1)
#define XZERO_LEN(b0, b1) (((((unsigned)(b0) & 0x3f) << 8) | (unsigned)(b1)) + 1)
#define VAL_VALUE(b) ((((unsigned)(b) >> 2) & 0x1f) + 1)
#define VAL_LEN(b) (((unsigned)(b) & 0x3) + 1)
/* clang-format on */

struct hll {
    uint8_t *buf; /* the Redis string value */
    size_t len;
    size_t cap;
    size_t sparse_max;
};

/* ---- small encoders ---- */

static uint8_t op_val(unsigned value, unsigned len)
{
    return (uint8_t)(0x80 | ((value - 1) << 2) | (len - 1));
}

/* Writes a zero run of len registers as ZERO or XZERO; returns bytes used.
 * XZERO only when ZERO cannot hold it, since that is what Redis emits. */
static size_t put_zero_run(uint8_t *p, unsigned len)
{
    if (len > ZERO_MAX_LEN) {
        p[0] = (uint8_t)(0x40 | ((len - 1) >> 8));
        p[1] = (uint8_t)((len - 1) & 0xff);
        return 2;
    }
    p[0] = (uint8_t)(len - 1);
    return 1;
}

/* ---- dense registers ---- */

/* 6j mod 8 is 0, 2, 4 or 6: only offsets 4 and 6 spill into the next byte.
 * Testing that (rather than always touching byte+1 as a padded layout
 * could) keeps register 16383 from reading one byte past the value. */
static unsigned dense_get(const uint8_t *regs, unsigned j)
{
    unsigned bit = j * 6, byte = bit >> 3, sh = bit & 7;
    unsigned v = (unsigned)regs[byte] >> sh;
    if (sh > 2)
        v |= (unsigned)regs[byte + 1] << (8 - sh);
    return v & 63;
}

static void dense_put(uint8_t *regs, unsigned j, unsigned v)
{
    unsigned bit = j * 6, byte = bit >> 3, sh = bit & 7;
    regs[byte] = (uint8_t)((regs[byte] & ~(63u << sh)) | (v << sh));
    if (sh > 2)
        regs[byte + 1] = (uint8_t)((regs[byte + 1] & ~(63u >> (8 - sh))) | (v >> (8 - sh)));
}

static int dense_set_max(uint8_t *regs, unsigned j, unsigned v)
{
    if (dense_get(regs, j) >= v)
        return 0;
    dense_put(regs, j, v);
    return 1;
}

/* ---- header ---- */

static int is_dense(const hll_t *h) { return h->buf[ENC_OFF] == ENC_DENSE; }

static void invalidate_cache(hll_t *h) { h->buf[CARD_OFF + 7] |= 0x80; }

static int cache_valid(const hll_t *h) { return (h->buf[CARD_OFF + 7] & 0x80) == 0; }

static uint64_t cache_get(const hll_t *h)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | h->buf[CARD_OFF + i];
    return v;
}

static void cache_put(hll_t *h, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        h->buf[CARD_OFF + i] = (uint8_t)(v >> (8 * i));
}

/* ---- storage ---- */

static int reserve(hll_t *h, size_t need)
{
    if (need <= h->cap)
        return BLOOMERY_OK;
    size_t cap = h->cap * 2;
    if (cap < need)
        cap = need;
    uint8_t *nb = realloc(h->buf, cap);
    if (!nb)
        return BLOOMERY_ENOMEM;
    h->buf = nb;
    h->cap = cap;
    return BLOOMERY_OK;
}

/* ---- sparse program ---- */

/* Walks a sparse program without trusting it: every opcode must be whole
 * and the runs must add up to exactly HLL_REGISTERS. */
static int sparse_check(const uint8_t *p, size_t n)
{
    size_t i = 0;
    unsigned long idx = 0;
    while (i < n) {
        uint8_t b = p[i];
        if (OP_IS_ZERO(b)) {
            idx += ZERO_LEN(b);
            i++;
        } else if (OP_IS_XZERO(b)) {
            if (n - i < 2)
                return BLOOMERY_ECORRUPT;
            idx += XZERO_LEN(b, p[i + 1]);
            i += 2;
        } else {
            idx += VAL_LEN(b);
            i++;
        }
        if (idx > HLL_REGISTERS)
            return BLOOMERY_ECORRUPT;
    }
    return idx == HLL_REGISTERS ? BLOOMERY_OK : BLOOMERY_ECORRUPT;
}

/* Calls fn(ctx, first, len, value) for every run. The program was checked
 * on entry to the library, but the walk stays bounded anyway so that a bug
 * elsewhere surfaces as ECORRUPT and not as a stray read. */
typedef void (*run_fn)(void *ctx, unsigned first, unsigned len, unsigned value);

static int sparse_walk(const hll_t *h, run_fn fn, void *ctx)
{
    const uint8_t *p = h->buf + HDR_SIZE;
    size_t n = h->len - HDR_SIZE, i = 0;
    unsigned idx = 0;
    while (i < n) {
        uint8_t b = p[i];
        unsigned len, value = 0;
        if (OP_IS_ZERO(b)) {
            len = ZERO_LEN(b);
            i++;
        } else if (OP_IS_XZERO(b)) {
            if (n - i < 2)
                return BLOOMERY_ECORRUPT;
            len = XZERO_LEN(b, p[i + 1]);
            i += 2;
        } else {
            len = VAL_LEN(b);
            value = VAL_VALUE(b);
            i++;
        }
        if (len > HLL_REGISTERS - idx)
            return BLOOMERY_ECORRUPT;
        fn(ctx, idx, len, value);
        idx += len;
    }
    return idx == HLL_REGISTERS ? BLOOMERY_OK : BLOOMERY_ECORRUPT;
}

static void run_to_dense(void *ctx, unsigned first, unsigned len, unsigned value)
{
    if (value)
        for (unsigned j = first; j < first + len; j++)
            dense_put(ctx, j, value);
}

static void run_to_histo(void *ctx, unsigned first, unsigned len, unsigned value)
{
    (void)first;
    ((int *)ctx)[value] += (int)len;
}

static void run_to_max(void *ctx, unsigned first, unsigned len, unsigned value)
{
    uint8_t *max = ctx;
    if (value)
        for (unsigned j = first; j < first + len; j++)
            if (value > max[j])
                max[j] = (uint8_t)value;
}

struct reg_query {
    unsigned j;
    int value;
};

static void run_lookup(void *ctx, unsigned first, unsigned len, unsigned value)
{
    struct reg_query *q = ctx;
    if (q->j >= first && q->j < first + len)
        q->value = (int)value;
}

/* Replaces the sparse value by its dense form. The header is carried over
 * unchanged apart from the encoding: Redis copies it whole, cached
 * cardinality bytes included, and the bytes must match. All-or-nothing: on
 * failure the object is untouched. */
static int sparse_to_dense(hll_t *h)
{
    uint8_t *d = calloc(1, HLL_DENSE_SIZE);
    if (!d)
        return BLOOMERY_ENOMEM;
    memcpy(d, h->buf, HDR_SIZE);
    d[ENC_OFF] = ENC_DENSE;
    int rc = sparse_walk(h, run_to_dense, d + HDR_SIZE);
    if (rc != BLOOMERY_OK) {
        free(d);
        return rc;
    }
    free(h->buf);
    h->buf = d;
    h->len = h->cap = HLL_DENSE_SIZE;
    return BLOOMERY_OK;
}

/* Promotion always reports an update: it only happens when the new value
 * cannot be stored sparsely, i.e. when it is larger than anything there. */
static int promote_and_set(hll_t *h, unsigned index, unsigned count)
{
    int rc = sparse_to_dense(h);
    if (rc != BLOOMERY_OK)
        return rc;
    dense_set_max(h->buf + HDR_SIZE, index, count);
    return 1;
}

/* Fuses equal adjacent VALs near an edit. The window (five opcodes from the
 * one before the edit) and the re-examination of the same position after a
 * fusion are what Redis does; a wider or narrower scan gives other bytes. */
static void sparse_fuse(hll_t *h, size_t from)
{
    uint8_t *b = h->buf;
    size_t q = from;
    int budget = 5;
    while (q < h->len && budget-- > 0) {
        if (OP_IS_XZERO(b[q])) {
            q += 2;
            continue;
        }
        if (OP_IS_ZERO(b[q])) {
            q++;
            continue;
        }
        if (q + 1 < h->len && OP_IS_VAL(b[q + 1]) && VAL_VALUE(b[q]) == VAL_VALUE(b[q + 1])) {
            unsigned len = VAL_LEN(b[q]) + VAL_LEN(b[q + 1]);
            if (len <= VAL_MAX_LEN) {
                b[q + 1] = op_val(VAL_VALUE(b[q]), len);
                memmove(b + q, b + q + 1, h->len - q - 1);
                h->len--;
                continue;
            }
        }
        q++;
    }
}

/* An opcode boundary, with the register index where that opcode starts. */
struct sparse_op {
    size_t off;
    unsigned first;
};

/* Where the next sparse_set may start walking instead of at the first
 * opcode. Redis walks from the start for every register; PFMERGE sets up to
 * 16384 registers in increasing order, which makes that quadratic in the
 * length of the value. An update only rewrites bytes from the opcode before
 * the one it edits (the fusion starts there), so that opcode and the one
 * before it stay valid starting points for any later, higher register. The
 * walk still has to name the opcode just before the target exactly, since
 * the fusion starts there; hence the pair. */
struct sparse_cursor {
    struct sparse_op at;     /* start here... */
    struct sparse_op before; /* ...which directly follows this one */
    int has_before;
};

struct sparse_loc {
    struct sparse_op pos; /* the opcode covering the register */
    unsigned span;        /* registers it covers */
    size_t oplen;         /* its size in bytes */
    struct sparse_op prev, pprev;
    int has_prev, has_pprev;
};

/* Finds the opcode that covers register index, starting at cur (or at the
 * first opcode). If the target turns out to be the starting opcode and the
 * one before it is not known, walks again from the beginning. */
static int sparse_locate(const hll_t *h, unsigned index, const struct sparse_cursor *cur,
                         struct sparse_loc *loc)
{
    const uint8_t *b = h->buf;
    int from_start = !cur || cur->at.off == HDR_SIZE;
    for (;;) {
        memset(loc, 0, sizeof *loc);
        loc->pos.off = HDR_SIZE;
        if (!from_start) {
            loc->pos = cur->at;
            loc->prev = cur->before;
            loc->has_prev = cur->has_before;
        }
        size_t pos = loc->pos.off;
        unsigned first = loc->pos.first;
        while (pos < h->len) {
            size_t oplen = 1;
            unsigned span;
            if (OP_IS_ZERO(b[pos])) {
                span = ZERO_LEN(b[pos]);
            } else if (OP_IS_VAL(b[pos])) {
                span = VAL_LEN(b[pos]);
            } else {
                if (h->len - pos < 2)
                    return BLOOMERY_ECORRUPT;
                span = XZERO_LEN(b[pos], b[pos + 1]);
                oplen = 2;
            }
            if (index < first + span) {
                loc->pos = (struct sparse_op){pos, first};
                loc->span = span;
                loc->oplen = oplen;
                break;
            }
            loc->pprev = loc->prev;
            loc->has_pprev = loc->has_prev;
            loc->prev = (struct sparse_op){pos, first};
            loc->has_prev = 1;
            pos += oplen;
            first += span;
        }
        if (pos >= h->len)
            return BLOOMERY_ECORRUPT;
        if (from_start || loc->has_prev || pos == HDR_SIZE)
            return BLOOMERY_OK;
        from_start = 1;
    }
}

/* Register index := max(register, count) on a sparse value. Returns 1 if it
 * changed, 0 if not, < 0 on error (object unchanged). May leave the object
 * dense. cur, when given, is where to start and is moved forward for a
 * following call with a higher index. */
static int sparse_set(hll_t *h, unsigned index, unsigned count, struct sparse_cursor *cur)
{
    if (count > VAL_MAX_VALUE)
        return promote_and_set(h, index, count);

    struct sparse_loc loc;
    int rc = sparse_locate(h, index, cur, &loc);
    if (rc != BLOOMERY_OK)
        return rc;
    if (cur) {
        if (loc.has_prev) {
            cur->at = loc.prev;
            cur->before = loc.pprev;
            cur->has_before = loc.has_pprev;
        } else {
            memset(cur, 0, sizeof *cur);
            cur->at.off = HDR_SIZE;
        }
    }

    /* Offsets, not pointers: the buffer may move when it grows. */
    const uint8_t *b = h->buf;
    size_t pos = loc.pos.off, oplen = loc.oplen;
    unsigned first = loc.pos.first, span = loc.span;
    size_t fuse_from = loc.has_prev ? loc.prev.off : HDR_SIZE;
    uint8_t op = b[pos];
    unsigned last = first + span - 1;

    if (OP_IS_VAL(op)) {
        unsigned old = VAL_VALUE(op);
        if (old >= count)
            return 0;
        if (span == 1) {
            h->buf[pos] = op_val(count, 1);
            sparse_fuse(h, fuse_from);
            return 1;
        }
    } else if (OP_IS_ZERO(op) && span == 1) {
        /* XZERO of one register deliberately takes the general path below,
         * which rewrites its two bytes: Redis special-cases ZERO only. */
        h->buf[pos] = op_val(count, 1);
        sparse_fuse(h, fuse_from);
        return 1;
    }

    /* General case: split the run into [left] VAL(count) [right]. */
    uint8_t seq[5];
    size_t n = 0;
    if (OP_IS_VAL(op)) {
        unsigned cur = VAL_VALUE(op);
        if (index != first)
            seq[n++] = op_val(cur, index - first);
        seq[n++] = op_val(count, 1);
        if (index != last)
            seq[n++] = op_val(cur, last - index);
    } else {
        if (index != first)
            n += put_zero_run(seq + n, index - first);
        seq[n++] = op_val(count, 1);
        if (index != last)
            n += put_zero_run(seq + n, last - index);
    }

    /* The limit counts the header and is only checked when growing, as in
     * Redis: a value already past the limit may still shrink or stay put. */
    if (n > oplen && h->len + (n - oplen) > h->sparse_max)
        return promote_and_set(h, index, count);

    if (n > oplen) {
        rc = reserve(h, h->len + (n - oplen));
        if (rc != BLOOMERY_OK)
            return rc;
    }
    size_t next = pos + oplen;
    memmove(h->buf + pos + n, h->buf + next, h->len - next);
    memcpy(h->buf + pos, seq, n);
    h->len = h->len - oplen + n;
    sparse_fuse(h, fuse_from);
    return 1;
}

/* ---- estimator ---- */

/* Ertl's sigma and tau, iterated to their fixed point in double precision.
 * Every product that feeds a sum here is by a power of two, so it is exact;
 * the loops still depend on the exact rounding of x*x and sqrt, which is why
 * nothing may be reordered. */
static double hll_sigma(double x)
{
    if (x == 1.0)
        return INFINITY;
    double y = 1.0, z = x, zp;
    do {
        x *= x;
        zp = z;
        z += x * y;
        y += y;
    } while (zp != z);
    return z;
}

static double hll_tau(double x)
{
    if (x == 0.0 || x == 1.0)
        return 0.0;
    double y = 1.0, z = 1.0 - x, zp;
    do {
        x = sqrt(x);
        zp = z;
        y *= 0.5;
        z -= pow(1.0 - x, 2.0) * y;
    } while (zp != z);
    return z / 3.0;
}

/* Registers above 51 cannot come from hashing but can from foreign dense
 * bytes; like Redis we histogram them and then leave them out of the sum. */
static uint64_t hll_estimate(const int *histo)
{
    const double m = HLL_REGISTERS;
    double z = m * hll_tau((m - histo[HLL_Q + 1]) / m);
    for (int j = HLL_Q; j >= 1; j--) {
        z += histo[j];
        z *= 0.5;
    }
    z += m * hll_sigma(histo[0] / m);
    return (uint64_t)llroundl(0.721347520444481703680 * m * m / z);
}

static void dense_histo(const uint8_t *regs, int *histo)
{
    /* Three bytes hold exactly four registers. */
    for (size_t i = 0; i < HLL_REGISTERS * 6 / 8; i += 3) {
        unsigned b0 = regs[i], b1 = regs[i + 1], b2 = regs[i + 2];
        histo[b0 & 63]++;
        histo[(b0 >> 6 | b1 << 2) & 63]++;
        histo[(b1 >> 4 | b2 << 4) & 63]++;
        histo[b2 >> 2]++;
    }
}

static int histogram(const hll_t *h, int *histo)
{
    memset(histo, 0, HISTO_SIZE * sizeof *histo);
    if (is_dense(h)) {
        dense_histo(h->buf + HDR_SIZE, histo);
        return BLOOMERY_OK;
    }
    return sparse_walk(h, run_to_histo, histo);
}

/* max[j] = max(max[j], register j of h). */
static int merge_into(uint8_t *max, const hll_t *h)
{
    if (!is_dense(h))
        return sparse_walk(h, run_to_max, max);
    const uint8_t *regs = h->buf + HDR_SIZE;
    for (unsigned j = 0; j < HLL_REGISTERS; j++) {
        unsigned v = dense_get(regs, j);
        if (v > max[j])
            max[j] = (uint8_t)v;
    }
    return BLOOMERY_OK;
}

/* ---- public API ---- */

static size_t sparse_limit(size_t sparse_max_bytes)
{
    return sparse_max_bytes ? sparse_max_bytes : HLL_SPARSE_MAX_BYTES_DEFAULT;
}

void hll_set_sparse_max(hll_t *h, size_t sparse_max_bytes)
{
    h->sparse_max = sparse_limit(sparse_max_bytes);
}

int hll_create(hll_t **out, size_t sparse_max_bytes)
{
    if (!out)
        return BLOOMERY_EINVAL;
    *out = NULL;
    hll_t *h = calloc(1, sizeof *h);
    if (!h)
        return BLOOMERY_ENOMEM;
    h->cap = 64;
    h->buf = calloc(1, h->cap);
    if (!h->buf) {
        free(h);
        return BLOOMERY_ENOMEM;
    }
    memcpy(h->buf, "HYLL", 4);
    h->buf[ENC_OFF] = ENC_SPARSE;
    h->len = HDR_SIZE + put_zero_run(h->buf + HDR_SIZE, HLL_REGISTERS);
    /* Redis never lets a new key be seen with a valid cache: PFADD and
     * PFMERGE both invalidate right after creating it. */
    invalidate_cache(h);
    h->sparse_max = sparse_limit(sparse_max_bytes);
    *out = h;
    return BLOOMERY_OK;
}

void hll_free(hll_t *h)
{
    if (!h)
        return;
    free(h->buf);
    free(h);
}

int hll_from_bytes(hll_t **out, const uint8_t *buf, size_t len, size_t sparse_max_bytes)
{
    if (!out || (!buf && len))
        return BLOOMERY_EINVAL;
    *out = NULL;
    /* The checks and their order are Redis's type check; the three unused
     * header bytes are not looked at there, so not here either. */
    if (len < HDR_SIZE || memcmp(buf, "HYLL", 4) != 0)
        return BLOOMERY_ETYPE;
    if (buf[ENC_OFF] > ENC_SPARSE)
        return BLOOMERY_ETYPE;
    if (buf[ENC_OFF] == ENC_DENSE && len != HLL_DENSE_SIZE)
        return BLOOMERY_ETYPE;
    if (buf[ENC_OFF] == ENC_SPARSE) {
        int rc = sparse_check(buf + HDR_SIZE, len - HDR_SIZE);
        if (rc != BLOOMERY_OK)
            return rc;
    }

    hll_t *h = calloc(1, sizeof *h);
    if (!h)
        return BLOOMERY_ENOMEM;
    /* A sparse value grows by at most three bytes per update; a little
     * headroom avoids a realloc on the first ones. */
    h->cap = buf[ENC_OFF] == ENC_DENSE ? len : len + 64;
    h->buf = malloc(h->cap);
    if (!h->buf) {
        free(h);
        return BLOOMERY_ENOMEM;
    }
    memcpy(h->buf, buf, len);
    h->len = len;
    h->sparse_max = sparse_limit(sparse_max_bytes);
    *out = h;
    return BLOOMERY_OK;
}

uint64_t hll_hash_elem(const void *elem, size_t len)
{
    return bloomery_murmur64a(len ? elem : "", len, HASH_SEED);
}

int hll_add_hashed(hll_t *h, uint64_t hash)
{
    if (!h)
        return BLOOMERY_EINVAL;
    unsigned index = (unsigned)(hash & REG_MASK);
    hash >>= HLL_P;
    hash |= 1ULL << HLL_Q;
    unsigned count = (unsigned)__builtin_ctzll(hash) + 1;

    int rc = is_dense(h) ? dense_set_max(h->buf + HDR_SIZE, index, count)
                         : sparse_set(h, index, count, NULL);
    if (rc == 1)
        invalidate_cache(h);
    return rc;
}

int hll_add(hll_t *h, const void *elem, size_t len)
{
    if (!h || (!elem && len))
        return BLOOMERY_EINVAL;
    return hll_add_hashed(h, hll_hash_elem(elem, len));
}

int hll_count(hll_t *h, uint64_t *card)
{
    if (!h || !card)
        return BLOOMERY_EINVAL;
    if (cache_valid(h)) {
        *card = cache_get(h);
        return BLOOMERY_OK;
    }
    int histo[HISTO_SIZE];
    int rc = histogram(h, histo);
    if (rc != BLOOMERY_OK)
        return rc;
    *card = hll_estimate(histo);
    cache_put(h, *card);
    return BLOOMERY_OK;
}

int hll_count_union(hll_t *const *hs, size_t n, uint64_t *card)
{
    if (!card || (!hs && n))
        return BLOOMERY_EINVAL;
    uint8_t max[HLL_REGISTERS];
    memset(max, 0, sizeof max);
    for (size_t i = 0; i < n; i++) {
        if (!hs[i])
            continue;
        int rc = merge_into(max, hs[i]);
        if (rc != BLOOMERY_OK)
            return rc;
    }
    int histo[HISTO_SIZE] = {0};
    for (unsigned j = 0; j < HLL_REGISTERS; j++)
        histo[max[j]]++;
    *card = hll_estimate(histo);
    return BLOOMERY_OK;
}

int hll_merge(hll_t *dst, hll_t *const *srcs, size_t n)
{
    if (!dst || (!srcs && n))
        return BLOOMERY_EINVAL;
    uint8_t max[HLL_REGISTERS];
    memset(max, 0, sizeof max);

    /* dst takes part like any source (PFMERGE's loop starts at the
     * destination), and one dense input makes the result dense up front. */
    int use_dense = is_dense(dst);
    int rc = merge_into(max, dst);
    if (rc != BLOOMERY_OK)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (!srcs[i])
            continue;
        use_dense |= is_dense(srcs[i]);
        rc = merge_into(max, srcs[i]);
        if (rc != BLOOMERY_OK)
            return rc;
    }

    /* Work on a copy so that running out of memory halfway (a sparse value
     * growing, or being promoted) leaves dst as it was. */
    hll_t w = *dst;
    w.cap = dst->len;
    w.buf = malloc(w.cap);
    if (!w.buf)
        return BLOOMERY_ENOMEM;
    memcpy(w.buf, dst->buf, dst->len);

    if (use_dense && !is_dense(&w))
        rc = sparse_to_dense(&w);
    /* Register by register in index order, through the same sparse update
     * as PFADD: the order decides where a sparse value gets promoted and
     * how its runs come out. */
    struct sparse_cursor cur = {{HDR_SIZE, 0}, {0, 0}, 0};
    for (unsigned j = 0; rc >= 0 && j < HLL_REGISTERS; j++) {
        if (!max[j])
            continue;
        if (is_dense(&w))
            dense_set_max(w.buf + HDR_SIZE, j, max[j]);
        else
            rc = sparse_set(&w, j, max[j], &cur);
    }
    if (rc < 0) {
        free(w.buf);
        return rc;
    }
    invalidate_cache(&w);
    free(dst->buf);
    *dst = w;
    return BLOOMERY_OK;
}

const uint8_t *hll_bytes(const hll_t *h, size_t *len)
{
    if (!h) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = h->len;
    return h->buf;
}

int hll_register(const hll_t *h, unsigned j)
{
    if (!h || j >= HLL_REGISTERS)
        return BLOOMERY_EINVAL;
    if (is_dense(h))
        return (int)dense_get(h->buf + HDR_SIZE, j);
    struct reg_query q = {j, 0};
    int rc = sparse_walk(h, run_lookup, &q);
    return rc != BLOOMERY_OK ? rc : q.value;
}

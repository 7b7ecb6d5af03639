/* bloomery dedup: drop duplicate records, keeping first occurrences in input
 * order.
 *
 * Exact mode (default when every input is a regular file): pass 1 reads the
 * inputs and check-and-adds every key into a blocked Bloom filter; a key the
 * filter calls "maybe seen" is a suspect and its bytes go into an exact set.
 * The filter is then freed. Pass 2 rereads the inputs: a record whose key is
 * not a suspect is unique and written at once; a suspect is written only the
 * first time pass 2 meets it. No unique record is ever dropped, whatever the
 * filter's false-positive rate (a filter too small only makes the suspect set
 * larger), and memory is the filter plus the suspects.
 *
 * stdin is never read twice: it is filtered in one pass by default, and
 * --exact copies it (or any pipe) to an unlinked temporary file first.
 *
 * Filter-only mode (stdin, or --filter-only): one pass, a record is dropped
 * when check-and-add says its key was seen; false positives drop unique
 * records, and the summary states the expected number of them.
 *
 * Threads: a reader thread reads blocks of whole records, extracts and hashes
 * the keys and sorts each block's records into channels by key hash; one
 * thread per channel runs the filter and owns its channel's suspect set (so a
 * key is always handled by one thread, blocks in order, which keeps "first
 * occurrence" exact); the main thread writes each block's decisions in block
 * order. Blocks circulate through a small ring.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bloomery/bloomery.h"
#include "cli.h"
#include "hset.h"
#include "records.h"

#define PROG "bloomery dedup"
#define BLOCK_BYTES ((size_t)1 << 20)
#define MAX_THREADS 64

enum { OP_PASS1, OP_PASS2, OP_FILTER };
enum { DEC_KEEP = 0, DEC_DUP = 1, DEC_NOKEY = 2 };
enum { SLOT_FREE, SLOT_FILLED, SLOT_DONE };

static void dedup_usage(FILE *f)
{
    fprintf(f, "usage: bloomery dedup [options] [FILE...]\n"
               "\n"
               "Writes the first occurrence of every record key, in input order, and drops\n"
               "later occurrences. Reads the FILEs in order, or stdin when there are none\n"
               "(or for '-'). A summary goes to stderr.\n"
               "\n"
               "  -o, --out FILE        write kept records to FILE (default stdout)\n"
               "      --dups FILE       write dropped duplicates to FILE\n"
               "  -k, --key LIST        key fields, 1-based, e.g. 1,3-5 (default: whole record);\n"
               "                        several fields are joined by the delimiter\n"
               "  -d, --delimiter C     field delimiter: one byte, or \\t (default), comma, space\n"
               "  -z, --zero            records end with NUL instead of newline\n"
               "      --exact           two passes, never drops a unique record (default when\n"
               "                        every input is a regular file; stdin or a pipe is\n"
               "                        first copied to a temporary file in $TMPDIR)\n"
               "      --filter-only     one pass with the Bloom filter only (default on stdin)\n"
               "  -n, --capacity N      distinct keys to size the filter for (default: a quick\n"
               "                        count of the input files; 1e7 on stdin)\n"
               "  -e, --error P         filter false-positive rate (default 0.01 exact,\n"
               "                        1e-6 filter-only)\n"
               "  -t, --threads N       filter channels (default: one per core)\n"
               "      --progress        progress bar on stderr (default when it is a terminal)\n"
               "      --no-progress\n"
               "  -q, --quiet           no summary\n"
               "\n"
               "Exact mode: pass 1 check-and-adds every key into a Bloom filter and keeps the\n"
               "keys it calls \"maybe seen\" (true duplicates and false positives) in an\n"
               "exact set; pass 2 rereads the files, writes records whose key is not in that\n"
               "set and, of a suspect key, only its first occurrence. Memory is the filter\n"
               "(freed before pass 2) plus the suspect keys. Filter-only mode drops a record\n"
               "whenever the filter says its key was seen: unique records are lost at about\n"
               "the filter's false-positive rate, and the summary says how many to expect.\n"
               "\n"
               "The input files must not change while dedup runs (it checks their size).\n"
               "Records with fewer fields than --key needs are written unchanged, counted\n"
               "and reported. Records must end with the separator; a missing one at the end\n"
               "of a file is added on output.\n"
               "\n"
               "Exit codes: 0 ok, 1 error (unreadable input, write failure, memory),\n"
               "2 usage.\n");
}

typedef struct rec {
    uint32_t off, len; /* record in block data, separator excluded */
    const char *key;
    uint32_t klen;
    uint8_t dec;
} rec;

typedef struct block {
    uint64_t seq;
    int state;
    int pending;
    char *data;
    size_t cap, len;
    bool unterminated;
    int file;
    char *kbuf;
    size_t kcap;
    rec *recs;
    bloomery_hash *hash;
    uint32_t *chidx; /* record indices grouped by channel */
    size_t chstart[MAX_THREADS + 1];
    size_t n, rcap;
} block;

typedef struct chan_scratch {
    bf_t *bf; /* this channel's filter (pass 1, filter-only) */
    bloomery_hash *h;
    uint8_t *out;
    uint32_t *cand; /* pass 2: records that may be suspects */
    size_t cap;
    uint64_t dups, suspects, fresh;
    hset set;
    uint64_t *bits; /* pass 2: one bit per hashed suspect, 16 bits per key */
    unsigned bits_log2;
    int err;
} chan_scratch;

typedef struct outbuf {
    int fd;
    const char *name;
    char *buf;
    size_t len, cap;
    int err;
} outbuf;

typedef struct dedup {
    /* options */
    char **inputs;
    char **names; /* the inputs as given, for messages */
    int ninputs;
    const char *out_path, *dups_path;
    keyspec ks;
    unsigned char rs;
    int nchan;
    bool progress;
    uint64_t total_bytes; /* of the inputs, 0 if unknown */
    /* state */
    int op;
    const char *pass_name;
    uint64_t seed;
    chan_scratch ch[MAX_THREADS];
    block *ring;
    int nring;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t eof_seq;
    bool eof;
    bool abort;
    rdr rd;
    struct chan_arg {
        struct dedup *d;
        int c;
    } chan_args[MAX_THREADS];
    /* counts */
    uint64_t records, kept, dups, nokey;
    uint64_t first_nokey_line;
    int first_nokey_file;
    uint64_t bytes_done;
    uint64_t bytes_read; /* by the last pass */
    outbuf out, dupout;
    double last_progress;
} dedup;

/* ---- output ---- */

static int ob_flush(outbuf *o)
{
    size_t done = 0;
    while (done < o->len && !o->err) {
        ssize_t n = write(o->fd, o->buf + done, o->len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            o->err = errno;
            fprintf(stderr, PROG ": cannot write %s: %s\n", o->name, strerror(errno));
            break;
        }
        done += (size_t)n;
    }
    o->len = 0;
    return o->err ? -1 : 0;
}

static void ob_write(outbuf *o, const char *p, size_t n)
{
    if (o->err)
        return;
    if (o->len + n > o->cap) {
        ob_flush(o);
        if (n >= o->cap) {
            /* Large spans go straight out. */
            const char *save = o->buf;
            size_t savecap = o->cap;
            o->buf = (char *)p;
            o->len = n;
            ob_flush(o);
            o->buf = (char *)save;
            o->cap = savecap;
            return;
        }
    }
    memcpy(o->buf + o->len, p, n);
    o->len += n;
}

/* ---- reader thread ---- */

static int block_reserve(block *b, size_t n, size_t kneed)
{
    if (n > b->rcap) {
        size_t c = b->rcap ? b->rcap : 4096;
        while (c < n)
            c *= 2;
        rec *r = realloc(b->recs, c * sizeof *r);
        if (!r)
            return -1;
        b->recs = r;
        bloomery_hash *h = realloc(b->hash, c * sizeof *h);
        if (!h)
            return -1;
        b->hash = h;
        uint32_t *x = realloc(b->chidx, c * sizeof *x);
        if (!x)
            return -1;
        b->chidx = x;
        b->rcap = c;
    }
    if (kneed > b->kcap) {
        char *k = realloc(b->kbuf, kneed);
        if (!k)
            return -1;
        b->kbuf = k;
        b->kcap = kneed;
    }
    return 0;
}

/* Splits b->data into records, extracts and hashes keys, groups by channel. */
static int parse_block(dedup *d, block *b, uint64_t *line, int *line_file)
{
    if (block_reserve(b, b->rcap ? b->rcap : 4096, keyspec_scratch(&d->ks, b->len)) != 0)
        return -1;
    size_t counts[MAX_THREADS] = {0};
    size_t n = 0, pos = 0, ko = 0;
    if (*line_file != b->file) {
        *line_file = b->file;
        *line = 0;
    }
    while (pos < b->len) {
        const char *s = b->data + pos;
        const char *e = memchr(s, d->rs, b->len - pos);
        size_t len = e ? (size_t)(e - s) : b->len - pos;
        if (n == b->rcap && block_reserve(b, n * 2, 0) != 0)
            return -1;
        rec *r = &b->recs[n];
        r->off = (uint32_t)pos;
        r->len = (uint32_t)len;
        (*line)++;
        const char *key;
        size_t klen;
        if (keyspec_extract(&d->ks, s, len, b->kbuf + ko, &key, &klen) != 0) {
            r->dec = DEC_NOKEY;
            r->key = NULL;
            r->klen = 0;
            if (d->op != OP_PASS2) {
                if (d->nokey++ == 0) {
                    d->first_nokey_file = b->file;
                    d->first_nokey_line = *line;
                }
            }
        } else {
            if (key == b->kbuf + ko)
                ko += klen;
            r->dec = DEC_KEEP;
            r->key = key;
            r->klen = (uint32_t)klen;
            b->hash[n] = bloomery_hash_item(key, klen, d->seed);
            unsigned c = (unsigned)(((unsigned __int128)b->hash[n].hi * (unsigned)d->nchan) >> 64);
            counts[c]++;
        }
        n++;
        pos += len + 1;
    }
    b->n = n;
    b->chstart[0] = 0;
    for (int c = 0; c < d->nchan; c++)
        b->chstart[c + 1] = b->chstart[c] + counts[c];
    size_t fill[MAX_THREADS];
    memcpy(fill, b->chstart, sizeof(size_t) * (size_t)d->nchan);
    for (size_t i = 0; i < n; i++) {
        if (b->recs[i].dec == DEC_NOKEY)
            continue;
        unsigned c = (unsigned)(((unsigned __int128)b->hash[i].hi * (unsigned)d->nchan) >> 64);
        b->chidx[fill[c]++] = (uint32_t)i;
    }
    return 0;
}

static void *reader_main(void *arg)
{
    dedup *d = arg;
    uint64_t line = 0;
    int line_file = -1;
    for (uint64_t seq = 0;; seq++) {
        block *b = &d->ring[seq % (uint64_t)d->nring];
        pthread_mutex_lock(&d->mu);
        while (b->state != SLOT_FREE && !d->abort)
            pthread_cond_wait(&d->cv, &d->mu);
        bool stop = d->abort;
        pthread_mutex_unlock(&d->mu);
        if (stop)
            break;
        bool unterminated = false;
        int file = 0;
        ssize_t n = rdr_next(&d->rd, &b->data, &b->cap, BLOCK_BYTES, &file, &unterminated);
        int bad = n < 0;
        if (n > 0) {
            b->len = (size_t)n;
            b->unterminated = unterminated;
            b->file = file;
            if (parse_block(d, b, &line, &line_file) != 0) {
                fprintf(stderr, PROG ": out of memory\n");
                bad = 1;
            }
        }
        pthread_mutex_lock(&d->mu);
        if (n <= 0 || bad) {
            d->eof = true;
            d->eof_seq = seq;
            if (bad)
                d->abort = true;
        } else {
            b->seq = seq;
            b->pending = d->nchan;
            b->state = SLOT_FILLED;
        }
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        if (n <= 0 || bad)
            break;
    }
    return NULL;
}

/* ---- channel threads ---- */

typedef struct chan_arg chan_arg;

static uint64_t bit_index(const chan_scratch *cs, uint64_t h)
{
    return (h * 0x9e3779b97f4a7c15ULL) >> (64 - cs->bits_log2);
}

static bool maybe_suspect(const chan_scratch *cs, uint64_t h)
{
    uint64_t i = bit_index(cs, h);
    return cs->bits[i >> 6] >> (i & 63) & 1;
}

/* After pass 1: a bitmap of the suspects' hashes, so pass 2 looks up only
 * about 1 record in 16 that is not a suspect, in a bitmap that fits cache. */
static int build_bits(chan_scratch *cs)
{
    unsigned lg = 9;
    while (lg < 63 && ((uint64_t)1 << lg) < cs->set.count * 16)
        lg++;
    cs->bits_log2 = lg;
    cs->bits = calloc(((size_t)1 << lg) / 64, sizeof(uint64_t));
    if (!cs->bits)
        return -1;
    for (uint64_t i = 0; cs->set.slots && i <= cs->set.mask; i++) {
        uint64_t h = cs->set.slots[i].hash;
        if (h) {
            /* The set stores 1 for a hash of 0; mark both. */
            uint64_t b = bit_index(cs, h);
            cs->bits[b >> 6] |= (uint64_t)1 << (b & 63);
            if (h == 1) {
                b = bit_index(cs, 0);
                cs->bits[b >> 6] |= (uint64_t)1 << (b & 63);
            }
        }
    }
    return 0;
}

static int chan_reserve(chan_scratch *cs, size_t m)
{
    if (m <= cs->cap)
        return 0;
    bloomery_hash *h = realloc(cs->h, m * sizeof *h);
    if (!h)
        return -1;
    cs->h = h;
    uint8_t *o = realloc(cs->out, m);
    if (!o)
        return -1;
    cs->out = o;
    uint32_t *c = realloc(cs->cand, m * sizeof *c);
    if (!c)
        return -1;
    cs->cand = c;
    cs->cap = m;
    return 0;
}

static int chan_block(dedup *d, chan_scratch *cs, block *b, int c)
{
    size_t lo = b->chstart[c], hi = b->chstart[c + 1], m = hi - lo;
    if (m == 0)
        return 0;
    if (chan_reserve(cs, m) != 0)
        return -1;
    if (d->op == OP_PASS2) {
        size_t nc = 0;
        for (size_t j = lo; j < hi; j++) {
            uint32_t i = b->chidx[j];
            if (maybe_suspect(cs, b->hash[i].hi))
                cs->cand[nc++] = i;
        }
        const size_t ahead = 8;
        for (size_t j = 0; j < nc && j < ahead; j++)
            hset_prefetch(&cs->set, b->hash[cs->cand[j]].hi);
        for (size_t j = 0; j < nc; j++) {
            if (j + ahead < nc)
                hset_prefetch(&cs->set, b->hash[cs->cand[j + ahead]].hi);
            uint32_t i = cs->cand[j];
            rec *r = &b->recs[i];
            hset_entry *e = hset_find(&cs->set, r->key, r->klen, b->hash[i].hi);
            if (e) {
                if (e->seen) {
                    r->dec = DEC_DUP;
                    cs->dups++;
                } else {
                    e->seen = 1;
                }
            }
        }
        return 0;
    }
    for (size_t j = 0; j < m; j++)
        cs->h[j] = b->hash[b->chidx[lo + j]];
    /* The channel's filter has one writer, this thread, so "some bit went
     * from 0 to 1" is exactly check-and-add's "new", without its lock: an
     * earlier occurrence, even in this batch, has set every bit. */
    bf_add_many_hashed(cs->bf, cs->h, m, cs->out);
    for (size_t j = 0; j < m; j++) {
        if (cs->out[j]) {
            cs->fresh++;
            continue;
        }
        uint32_t i = b->chidx[lo + j];
        rec *r = &b->recs[i];
        if (d->op == OP_FILTER) {
            r->dec = DEC_DUP;
            cs->dups++;
        } else {
            bool added;
            if (!hset_insert(&cs->set, r->key, r->klen, b->hash[i].hi, &added))
                return -1;
            cs->suspects += added;
        }
    }
    return 0;
}

static void *chan_main(void *arg)
{
    chan_arg *ca = arg;
    dedup *d = ca->d;
    int c = ca->c;
    chan_scratch *cs = &d->ch[c];
    for (uint64_t seq = 0;; seq++) {
        block *b = &d->ring[seq % (uint64_t)d->nring];
        pthread_mutex_lock(&d->mu);
        while (!(b->state == SLOT_FILLED && b->seq == seq) && !(d->eof && seq >= d->eof_seq) &&
               !d->abort)
            pthread_cond_wait(&d->cv, &d->mu);
        bool ready = b->state == SLOT_FILLED && b->seq == seq;
        bool stop = d->abort || !ready;
        pthread_mutex_unlock(&d->mu);
        if (stop)
            break;
        int rc = chan_block(d, cs, b, c);
        pthread_mutex_lock(&d->mu);
        if (rc != 0) {
            cs->err = 1;
            d->abort = true;
        } else if (--b->pending == 0) {
            b->state = SLOT_DONE;
        }
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        if (rc != 0)
            break;
    }
    return NULL;
}

/* ---- writer (main thread) ---- */

static void emit(outbuf *o, block *b, int want)
{
    size_t i = 0;
    while (i < b->n) {
        int dec = b->recs[i].dec == DEC_DUP;
        if (dec != want) {
            i++;
            continue;
        }
        size_t j = i;
        while (j + 1 < b->n && (b->recs[j + 1].dec == DEC_DUP) == want)
            j++;
        size_t start = b->recs[i].off, end = (size_t)b->recs[j].off + b->recs[j].len;
        /* Each record with its separator; the caller adds the one an
         * unterminated last record lacks. */
        bool last = j + 1 == b->n;
        ob_write(o, b->data + start, end - start + !(last && b->unterminated));
        i = j + 1;
    }
}

static void progress(dedup *d, bool final)
{
    double now = cli_now();
    if (!final && now - d->last_progress < 0.2)
        return;
    d->last_progress = now;
    char done[32];
    cli_human_bytes((double)d->bytes_done, done, sizeof done);
    if (d->total_bytes) {
        double f = (double)d->bytes_done / (double)d->total_bytes;
        if (f > 1)
            f = 1;
        int w = 30, k = (int)(f * w);
        char bar[40];
        for (int i = 0; i < w; i++)
            bar[i] = i < k ? '#' : '.';
        bar[w] = 0;
        fprintf(stderr, "\r%s [%s] %5.1f%% %s%s", d->pass_name, bar, f * 100, done,
                final ? "\n" : "");
    } else {
        fprintf(stderr, "\r%s %s, %llu records%s", d->pass_name, done,
                (unsigned long long)d->records, final ? "\n" : "");
    }
}

static int write_block(dedup *d, block *b)
{
    d->bytes_done += b->len;
    if (d->op == OP_PASS1) {
        d->records += b->n;
        return 0;
    }
    if (d->op == OP_FILTER)
        d->records += b->n;
    uint64_t dups = 0;
    for (size_t i = 0; i < b->n; i++)
        dups += b->recs[i].dec == DEC_DUP;
    d->dups += dups;
    d->kept += b->n - dups;
    int sepfix = b->unterminated;
    emit(&d->out, b, 0);
    if (sepfix && b->n && b->recs[b->n - 1].dec != DEC_DUP)
        ob_write(&d->out, (const char *)&d->rs, 1);
    if (d->dupout.fd >= 0) {
        emit(&d->dupout, b, 1);
        if (sepfix && b->n && b->recs[b->n - 1].dec == DEC_DUP)
            ob_write(&d->dupout, (const char *)&d->rs, 1);
    }
    return d->out.err || d->dupout.err ? -1 : 0;
}

/* Runs one pass over the inputs. 0 ok, -1 error (reported). */
static int run_pass(dedup *d, int op, const char *name)
{
    d->op = op;
    d->pass_name = name;
    d->eof = d->abort = false;
    d->eof_seq = 0;
    d->bytes_done = 0;
    for (int i = 0; i < d->nring; i++)
        d->ring[i].state = SLOT_FREE;
    rdr_init(&d->rd, PROG, d->inputs, d->ninputs, d->rs);
    pthread_t rt, ct[MAX_THREADS];
    int started = 0;
    bool reader_started = pthread_create(&rt, NULL, reader_main, d) == 0;
    if (reader_started)
        for (; started < d->nchan; started++)
            if (pthread_create(&ct[started], NULL, chan_main, &d->chan_args[started]) != 0)
                break;
    int rc = 0;
    if (!reader_started || started < d->nchan) {
        fprintf(stderr, PROG ": cannot start threads\n");
        pthread_mutex_lock(&d->mu);
        d->abort = true;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        rc = -1;
    }
    for (uint64_t seq = 0; rc == 0; seq++) {
        block *b = &d->ring[seq % (uint64_t)d->nring];
        pthread_mutex_lock(&d->mu);
        while (!(b->state == SLOT_DONE && b->seq == seq) && !(d->eof && seq >= d->eof_seq) &&
               !d->abort)
            pthread_cond_wait(&d->cv, &d->mu);
        bool ready = b->state == SLOT_DONE && b->seq == seq;
        bool stop = d->abort || !ready;
        if (d->abort)
            rc = -1;
        pthread_mutex_unlock(&d->mu);
        if (stop)
            break;
        int wrc = write_block(d, b);
        if (d->progress)
            progress(d, false);
        pthread_mutex_lock(&d->mu);
        b->state = SLOT_FREE;
        if (wrc != 0) {
            d->abort = true;
            rc = -1;
        }
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
    }
    if (reader_started)
        pthread_join(rt, NULL);
    for (int i = 0; i < started; i++)
        pthread_join(ct[i], NULL);
    d->bytes_read = d->rd.bytes;
    rdr_close(&d->rd);
    if (d->abort)
        rc = -1;
    for (int c = 0; c < d->nchan; c++)
        if (d->ch[c].err) {
            fprintf(stderr, PROG ": out of memory for the suspect set\n");
            break;
        }
    if (d->progress && rc == 0)
        progress(d, true);
    return rc;
}

/* ---- sizing ---- */

/* Records in the inputs: counted exactly in files up to 8 MiB, else
 * estimated from the first 4 MiB and the file size (plus 10%). */
static uint64_t quick_count(char **paths, int n, unsigned char rs)
{
    const size_t sample = (size_t)4 << 20;
    char *buf = malloc(sample);
    uint64_t total = 0;
    if (!buf)
        return 0;
    for (int i = 0; i < n; i++) {
        int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st;
        if (fstat(fd, &st) != 0) {
            close(fd);
            continue;
        }
        size_t got = 0;
        while (got < sample) {
            ssize_t r = read(fd, buf + got, sample - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        close(fd);
        uint64_t recs = 0;
        for (const char *p = buf, *end = buf + got; p < end;) {
            const char *q = memchr(p, rs, (size_t)(end - p));
            recs++;
            if (!q)
                break;
            p = q + 1;
        }
        if ((uint64_t)st.st_size <= got)
            total += recs;
        else if (got)
            total += (uint64_t)((double)st.st_size / (double)got * (double)recs * 1.1) + 1;
    }
    free(buf);
    return total;
}

/* ---- command ---- */

static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0)
        return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static int open_out(outbuf *o, const char *path, const char *dflt_name, int dflt_fd)
{
    o->cap = (size_t)1 << 20;
    o->buf = malloc(o->cap);
    o->len = 0;
    o->err = 0;
    if (!o->buf) {
        fprintf(stderr, PROG ": out of memory\n");
        return -1;
    }
    if (!path) {
        o->fd = dflt_fd;
        o->name = dflt_name;
        return 0;
    }
    o->name = path;
    o->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (o->fd < 0) {
        fprintf(stderr, PROG ": cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int close_out(outbuf *o, bool ours)
{
    int rc = 0;
    if (o->buf && o->fd >= 0)
        rc = ob_flush(o);
    if (ours && o->fd >= 0 && close(o->fd) != 0 && rc == 0) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", o->name, strerror(errno));
        rc = -1;
    }
    free(o->buf);
    o->buf = NULL;
    o->fd = -1;
    return rc;
}

/* --exact on a stream: each input that is not a regular file (stdin, a pipe)
 * is copied to an unlinked temporary file in $TMPDIR, which both passes then
 * read through /proc/self/fd. spooled[i] owns the new path, fds[i] the file. */
static int spool_streams(char **inputs, int ninputs, char **spooled, int *fds)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    char *buf = NULL;
    int rc = -1;
    for (int i = 0; i < ninputs; i++) {
        bool is_stdin = strcmp(inputs[i], "-") == 0;
        struct stat st;
        if (!is_stdin && (stat(inputs[i], &st) != 0 || S_ISREG(st.st_mode)))
            continue; /* a regular file */
        const char *name = is_stdin ? "stdin" : inputs[i];
        if (!buf && !(buf = malloc(BLOCK_BYTES)))
            goto out;
        size_t plen = strlen(tmp) + 32;
        char *path = malloc(plen);
        if (!path)
            goto out;
        snprintf(path, plen, "%s/bloomery-dedup-XXXXXX", tmp);
        int out = mkstemp(path);
        if (out < 0) {
            fprintf(stderr, PROG ": cannot create a temporary file in %s: %s\n", tmp,
                    strerror(errno));
            free(path);
            goto out;
        }
        unlink(path);
        fds[i] = out;
        snprintf(path, plen, "/proc/self/fd/%d", out);
        spooled[i] = path;
        int in = is_stdin ? 0 : open(inputs[i], O_RDONLY | O_CLOEXEC);
        if (in < 0) {
            fprintf(stderr, PROG ": cannot open %s: %s\n", name, strerror(errno));
            goto out;
        }
        for (;;) {
            ssize_t n = read(in, buf, BLOCK_BYTES);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                fprintf(stderr, PROG ": cannot read %s: %s\n", name, strerror(errno));
                if (!is_stdin)
                    close(in);
                goto out;
            }
            if (n == 0)
                break;
            for (ssize_t w = 0; w < n;) {
                ssize_t k = write(out, buf + w, (size_t)(n - w));
                if (k < 0 && errno == EINTR)
                    continue;
                if (k < 0) {
                    fprintf(stderr, PROG ": cannot spool %s to %s: %s\n", name, tmp,
                            strerror(errno));
                    if (!is_stdin)
                        close(in);
                    goto out;
                }
                w += k;
            }
        }
        if (!is_stdin)
            close(in);
        inputs[i] = spooled[i];
    }
    rc = 0;
out:
    free(buf);
    return rc;
}

static int usage_err(const char *fmt, const char *a)
{
    fprintf(stderr, PROG ": ");
    fprintf(stderr, fmt, a);
    fprintf(stderr, "\n(bloomery dedup --help lists the options)\n");
    return CLI_USAGE;
}

int cmd_dedup(int argc, char **argv)
{
    dedup *d = calloc(1, sizeof *d);
    if (!d) {
        fprintf(stderr, PROG ": out of memory\n");
        return CLI_ERROR;
    }
    char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    char **names = calloc((size_t)argc + 1, sizeof *names);
    if (!inputs || !names) {
        free(inputs);
        free(names);
        free(d);
        fprintf(stderr, PROG ": out of memory\n");
        return CLI_ERROR;
    }
    const char *keylist = NULL;
    unsigned char fs = '\t';
    int exact = -1; /* -1: by inputs */
    unsigned long long capacity = 0, threads = 0;
    double error = 0;
    int show_progress = -1;
    bool quiet = false;
    int ninputs = 0, rc = CLI_OK;
    char **spooled = NULL; /* --exact on streams: temporary copies */
    int *spool_fds = NULL, nspool = 0;
    d->rs = '\n';
    d->out.fd = d->dupout.fd = -1;
    bool only_args = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_args || a[0] != '-' || strcmp(a, "-") == 0) {
            inputs[ninputs++] = argv[i];
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_args = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            dedup_usage(stdout);
            goto done;
        }
        if (strcmp(a, "--exact") == 0) {
            exact = 1;
            continue;
        }
        if (strcmp(a, "--filter-only") == 0) {
            exact = 0;
            continue;
        }
        if (strcmp(a, "-z") == 0 || strcmp(a, "--zero") == 0) {
            d->rs = '\0';
            continue;
        }
        if (strcmp(a, "--progress") == 0 || strcmp(a, "--no-progress") == 0) {
            show_progress = a[2] == 'p';
            continue;
        }
        if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = true;
            continue;
        }
        static const char *valued[] = {
            "-o",          "--out", "--dups",     "-k", "--key",   "--fields", "-d",
            "--delimiter", "-n",    "--capacity", "-e", "--error", "-t",       "--threads"};
        bool known = false;
        for (size_t j = 0; j < sizeof valued / sizeof valued[0]; j++)
            known = known || strcmp(a, valued[j]) == 0;
        if (!known) {
            rc = usage_err("unknown option '%s'", a);
            goto done;
        }
        if (i + 1 >= argc) {
            rc = usage_err("%s needs a value", a);
            goto done;
        }
        const char *v = argv[++i];
        bool bad = false;
        if (strcmp(a, "-o") == 0 || strcmp(a, "--out") == 0)
            d->out_path = v;
        else if (strcmp(a, "--dups") == 0)
            d->dups_path = v;
        else if (strcmp(a, "-k") == 0 || strcmp(a, "--key") == 0 || strcmp(a, "--fields") == 0)
            keylist = v;
        else if (strcmp(a, "-d") == 0 || strcmp(a, "--delimiter") == 0)
            bad = cli_parse_delim(v, &fs) != 0;
        else if (strcmp(a, "-n") == 0 || strcmp(a, "--capacity") == 0)
            bad = cli_parse_count(v, &capacity) != 0 || capacity == 0;
        else if (strcmp(a, "-e") == 0 || strcmp(a, "--error") == 0)
            bad = cli_parse_double(v, &error) != 0 || !(error > 0 && error < 1);
        else
            bad = cli_parse_count(v, &threads) != 0 || threads == 0 || threads > MAX_THREADS;
        if (bad) {
            fprintf(stderr, PROG ": bad value for %s: '%s'\n", a, v);
            rc = CLI_USAGE;
            goto done;
        }
    }
    if (keyspec_parse(&d->ks, keylist, fs) != 0) {
        rc = usage_err("bad --key list '%s' (1-based fields like 1,3-5, at most 4096)", keylist);
        goto done;
    }
    if (fs == d->rs && keylist) {
        rc = usage_err("%s", "the field delimiter cannot be the record separator");
        goto done;
    }
    int nstdin = 0;
    for (int i = 0; i < ninputs; i++)
        nstdin += strcmp(inputs[i], "-") == 0;
    if (nstdin > 1) {
        rc = usage_err("%s", "stdin ('-') can be read only once");
        goto done;
    }
    bool all_regular;
    if (rdr_check_inputs(PROG, inputs, ninputs, &all_regular, &d->total_bytes) != 0) {
        rc = CLI_ERROR;
        goto done;
    }
    if (exact == 1 && !all_regular) {
        if (ninputs == 0)
            inputs[ninputs++] = "-";
        memcpy(names, inputs, (size_t)ninputs * sizeof *names);
        spooled = calloc((size_t)ninputs, sizeof *spooled);
        spool_fds = malloc((size_t)ninputs * sizeof *spool_fds);
        if (!spooled || !spool_fds) {
            fprintf(stderr, PROG ": out of memory\n");
            rc = CLI_ERROR;
            goto done;
        }
        for (int i = 0; i < ninputs; i++)
            spool_fds[i] = -1;
        nspool = ninputs;
        if (spool_streams(inputs, ninputs, spooled, spool_fds) != 0 ||
            rdr_check_inputs(PROG, inputs, ninputs, &all_regular, &d->total_bytes) != 0) {
            rc = CLI_ERROR;
            goto done;
        }
    }
    if (exact == -1)
        exact = all_regular;
    for (int i = 0; i < ninputs; i++) {
        if (strcmp(inputs[i], "-") == 0)
            continue;
        if ((d->out_path && same_file(d->out_path, inputs[i])) ||
            (d->dups_path && same_file(d->dups_path, inputs[i]))) {
            fprintf(stderr, PROG ": refusing to overwrite the input %s\n", inputs[i]);
            rc = CLI_USAGE;
            goto done;
        }
    }
    if (!error)
        error = exact ? 0.01 : 1e-6;
    if (!capacity) {
        capacity = all_regular ? quick_count(inputs, ninputs, d->rs) : 10000000;
        if (!capacity)
            capacity = 1;
    }
    if (!threads) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        threads = nc < 1 ? 1 : nc > MAX_THREADS ? MAX_THREADS : (unsigned long long)nc;
    }
    if (!nspool)
        memcpy(names, inputs, (size_t)ninputs * sizeof *names);
    d->inputs = inputs;
    d->names = names;
    d->ninputs = ninputs;
    d->nchan = (int)threads;
    d->progress = show_progress == -1 ? isatty(2) : show_progress;
    d->nring = 2 * d->nchan + 2;
    for (int c = 0; c < d->nchan; c++) {
        d->chan_args[c].d = d;
        d->chan_args[c].c = c;
        hset_init(&d->ch[c].set);
    }
    d->ring = calloc((size_t)d->nring, sizeof *d->ring);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    if (!d->ring) {
        fprintf(stderr, PROG ": out of memory\n");
        rc = CLI_ERROR;
        goto cleanup;
    }
    /* One filter per channel: a channel's keys never meet another's. */
    uint64_t filter_bytes = 0;
    for (int c = 0; c < d->nchan; c++) {
        int e = bf_create(&d->ch[c].bf, (capacity + threads - 1) / threads, error, NULL);
        if (e != BLOOMERY_OK) {
            fprintf(stderr, PROG ": cannot create a filter for %llu keys at %g: %s\n", capacity,
                    error, bloomery_strerror(e));
            rc = CLI_ERROR;
            goto cleanup;
        }
        filter_bytes += bf_bytes(d->ch[c].bf);
    }
    d->seed = bf_seed(d->ch[0].bf);
    if (open_out(&d->out, d->out_path, "stdout", 1) != 0 ||
        (d->dups_path && open_out(&d->dupout, d->dups_path, NULL, -1) != 0)) {
        rc = CLI_ERROR;
        goto cleanup;
    }
    double t0 = cli_now(), t1 = t0;
    double expected_false = 0, fpr_now = 0;
    uint64_t suspects = 0, set_bytes = 0;
    if (exact) {
        if (run_pass(d, OP_PASS1, "pass 1/2") != 0) {
            rc = CLI_ERROR;
            goto cleanup;
        }
        t1 = cli_now();
        for (int c = 0; c < d->nchan; c++) {
            bf_free(d->ch[c].bf);
            d->ch[c].bf = NULL;
            if (build_bits(&d->ch[c]) != 0) {
                fprintf(stderr, PROG ": out of memory\n");
                rc = CLI_ERROR;
                goto cleanup;
            }
            suspects += d->ch[c].suspects;
            set_bytes += hset_bytes(&d->ch[c].set) + ((uint64_t)1 << d->ch[c].bits_log2) / 8;
        }
        uint64_t pass1_bytes = d->bytes_read;
        if (run_pass(d, OP_PASS2, "pass 2/2") != 0) {
            rc = CLI_ERROR;
            goto cleanup;
        }
        if (d->bytes_read != pass1_bytes) {
            fprintf(stderr,
                    PROG ": the input changed between the passes (%llu bytes, then "
                         "%llu); the output may keep duplicates\n",
                    (unsigned long long)pass1_bytes, (unsigned long long)d->bytes_read);
            rc = CLI_ERROR;
            goto cleanup;
        }
    } else {
        if (run_pass(d, OP_FILTER, "dedup") != 0) {
            rc = CLI_ERROR;
            goto cleanup;
        }
        /* A unique key is falsely dropped with at most the final FPR f of
         * its channel's filter; of U unique keys K = U - drops were kept,
         * so U <= K / (1 - f) and the expected drops are <= K f / (1 - f). */
        for (int c = 0; c < d->nchan; c++) {
            double f = bf_fpr_estimate(d->ch[c].bf);
            double g = f < 0.999999 ? f : 0.999999;
            expected_false += (double)d->ch[c].fresh * g / (1 - g);
            if (f > fpr_now)
                fpr_now = f;
        }
    }
    double t2 = cli_now();
    if (close_out(&d->out, d->out_path != NULL) != 0 || close_out(&d->dupout, true) != 0) {
        rc = CLI_ERROR;
        goto cleanup;
    }
    if (d->nokey) {
        char where[64];
        snprintf(where, sizeof where, "%llu", (unsigned long long)d->first_nokey_line);
        const char *f = d->ninputs ? d->names[d->first_nokey_file] : "-";
        fprintf(stderr, PROG ": %llu record%s a key field (first: %s line %s); written unchanged\n",
                (unsigned long long)d->nokey, d->nokey == 1 ? " lacks" : "s lack",
                strcmp(f, "-") == 0 ? "stdin" : f, where);
    }
    if (!quiet) {
        char fb[32], sb[32];
        cli_human_bytes((double)filter_bytes, fb, sizeof fb);
        double secs = t2 - t0;
        fprintf(stderr, "mode          %s, %d channel%s\n",
                exact ? "exact (2 passes)" : "filter-only (1 pass)", d->nchan,
                d->nchan == 1 ? "" : "s");
        fprintf(stderr, "records       %llu\n", (unsigned long long)d->records);
        fprintf(stderr, "unique        %llu\n", (unsigned long long)d->kept);
        fprintf(stderr, "duplicates    %llu\n", (unsigned long long)d->dups);
        if (d->nokey)
            fprintf(stderr, "missing key   %llu (kept)\n", (unsigned long long)d->nokey);
        fprintf(stderr, "filter        %s (%llu bytes; capacity %llu, error %g)\n", fb,
                (unsigned long long)filter_bytes, capacity, error);
        if (exact) {
            cli_human_bytes((double)set_bytes, sb, sizeof sb);
            fprintf(stderr, "suspects      %llu keys, exact set %s\n", (unsigned long long)suspects,
                    sb);
            fprintf(stderr, "false drops   0 (suspects confirmed exactly)\n");
        } else {
            fprintf(stderr,
                    "false drops   expected <= %.3g (from the filters' final FPR, at most %.3g)\n",
                    expected_false, fpr_now);
            if (d->kept - d->nokey > capacity)
                fprintf(stderr,
                        "warning       %llu keys kept, more than --capacity %llu: "
                        "the false-positive rate rose above %g\n",
                        (unsigned long long)(d->kept - d->nokey), capacity, error);
        }
        if (exact)
            fprintf(stderr,
                    "time          %.3f s (pass 1 %.3f s, pass 2 %.3f s), %.1f M records/s\n", secs,
                    t1 - t0, t2 - t1, secs > 0 ? (double)d->records / secs / 1e6 : 0.0);
        else
            fprintf(stderr, "time          %.3f s, %.1f M records/s\n", secs,
                    secs > 0 ? (double)d->records / secs / 1e6 : 0.0);
    }
cleanup:
    if (d->out.buf)
        close_out(&d->out, d->out_path != NULL);
    if (d->dupout.buf)
        close_out(&d->dupout, true);
    for (int c = 0; c < d->nchan; c++) {
        bf_free(d->ch[c].bf);
        free(d->ch[c].cand);
        free(d->ch[c].bits);
        hset_free(&d->ch[c].set);
        free(d->ch[c].h);
        free(d->ch[c].out);
    }
    if (d->ring) {
        for (int i = 0; i < d->nring; i++) {
            block *b = &d->ring[i];
            free(b->data);
            free(b->kbuf);
            free(b->recs);
            free(b->hash);
            free(b->chidx);
        }
        free(d->ring);
    }
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
done:
    for (int i = 0; i < nspool; i++) {
        free(spooled[i]);
        if (spool_fds[i] >= 0)
            close(spool_fds[i]);
    }
    free(spooled);
    free(spool_fds);
    keyspec_free(&d->ks);
    free(inputs);
    free(names);
    free(d);
    return rc;
}

/* Records for the streaming subcommands: block reader and key fields (see
 * records.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "records.h"

void rdr_init(rdr *r, const char *prog, char **paths, int npaths, unsigned char rs)
{
    static char *stdin_only[] = {"-"};
    memset(r, 0, sizeof *r);
    r->prog = prog;
    r->paths = npaths ? paths : stdin_only;
    r->npaths = npaths ? npaths : 1;
    r->cur = -1;
    r->fd = -1;
    r->rs = rs;
}

static void rdr_close_fd(rdr *r)
{
    if (r->fd > 0)
        close(r->fd);
    r->fd = -1;
}

void rdr_close(rdr *r)
{
    rdr_close_fd(r);
    free(r->carry);
    r->carry = NULL;
}

static const char *shown(const char *path) { return strcmp(path, "-") == 0 ? "stdin" : path; }

static int open_input(const char *prog, const char *path, bool *regular, uint64_t *size)
{
    int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot open %s: %s\n", prog, path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        fprintf(stderr, "%s: cannot stat %s: %s\n", prog, shown(path), strerror(errno));
        if (fd > 0)
            close(fd);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "%s: %s is a directory\n", prog, path);
        if (fd > 0)
            close(fd);
        return -1;
    }
    *regular = S_ISREG(st.st_mode);
    if (size)
        *size = *regular ? (uint64_t)st.st_size : 0;
    if (*regular)
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return fd;
}

int rdr_check_inputs(const char *prog, char **paths, int npaths, bool *all_regular, uint64_t *total)
{
    *all_regular = npaths > 0;
    *total = 0;
    for (int i = 0; i < npaths; i++) {
        bool reg;
        uint64_t size;
        int fd = open_input(prog, paths[i], &reg, &size);
        if (fd < 0)
            return -1;
        char probe;
        if (reg && size > 0 && pread(fd, &probe, 1, 0) < 0) {
            fprintf(stderr, "%s: cannot read %s: %s\n", prog, paths[i], strerror(errno));
            close(fd);
            return -1;
        }
        if (fd > 0)
            close(fd);
        /* stdin is a stream even when redirected from a file: its offset
         * is shared with whoever started us, so it is never read twice. */
        *all_regular = *all_regular && reg && strcmp(paths[i], "-") != 0;
        *total += size;
    }
    return 0;
}

static int grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 4096;
    while (c < need)
        c *= 2;
    char *p = realloc(*buf, c);
    if (!p)
        return -1;
    *buf = p;
    *cap = c;
    return 0;
}

/* Last separator in b[0..n), or NULL. */
static char *last_sep(char *b, size_t n, unsigned char rs) { return memrchr(b, rs, n); }

ssize_t rdr_next(rdr *r, char **buf, size_t *cap, size_t want, int *file, bool *unterminated)
{
    if (want < 4096)
        want = 4096;
    size_t len = 0;
    for (;;) {
        if (r->fd < 0) {
            if (r->cur + 1 >= r->npaths)
                return 0;
            r->cur++;
            bool reg;
            r->fd = open_input(r->prog, r->paths[r->cur], &reg, NULL);
            if (r->fd < 0)
                return -1;
            r->regular = reg;
        }
        if (grow(buf, cap, want > r->carrylen ? want : r->carrylen * 2) != 0)
            goto nomem;
        if (r->carrylen) {
            memcpy(*buf, r->carry, r->carrylen);
            len = r->carrylen;
            r->carrylen = 0;
        }
        for (;;) {
            if (len == *cap) {
                /* Full: split after the last separator, else grow. */
                char *p = last_sep(*buf, len, r->rs);
                if (p) {
                    size_t keep = (size_t)(p - *buf) + 1;
                    if (grow(&r->carry, &r->carrycap, len - keep) != 0)
                        goto nomem;
                    if (len > keep)
                        memcpy(r->carry, p + 1, len - keep);
                    r->carrylen = len - keep;
                    *file = r->cur;
                    *unterminated = false;
                    return (ssize_t)keep;
                }
                if (len >= RDR_MAX_RECORD) {
                    fprintf(stderr, "%s: %s: a record is longer than %zu bytes\n", r->prog,
                            shown(r->paths[r->cur]), RDR_MAX_RECORD);
                    return -1;
                }
                if (grow(buf, cap, len * 2) != 0)
                    goto nomem;
            }
            ssize_t n = read(r->fd, *buf + len, *cap - len);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                fprintf(stderr, "%s: cannot read %s: %s\n", r->prog, shown(r->paths[r->cur]),
                        strerror(errno));
                return -1;
            }
            if (n == 0) {
                rdr_close_fd(r);
                if (len == 0)
                    break; /* empty input: on to the next */
                if (len > RDR_MAX_RECORD) {
                    fprintf(stderr, "%s: %s: a record is longer than %zu bytes\n", r->prog,
                            shown(r->paths[r->cur]), RDR_MAX_RECORD);
                    return -1;
                }
                *file = r->cur;
                *unterminated = (unsigned char)(*buf)[len - 1] != r->rs;
                return (ssize_t)len;
            }
            len += (size_t)n;
            r->bytes += (uint64_t)n;
            if (!r->regular && len < *cap) {
                /* A stream: hand over what has arrived, whole records only. */
                char *p = last_sep(*buf + len - n, (size_t)n, r->rs);
                if (p) {
                    size_t keep = (size_t)(p - *buf) + 1;
                    if (grow(&r->carry, &r->carrycap, len - keep) != 0)
                        goto nomem;
                    if (len > keep)
                        memcpy(r->carry, p + 1, len - keep);
                    r->carrylen = len - keep;
                    *file = r->cur;
                    *unterminated = false;
                    return (ssize_t)keep;
                }
            }
        }
    }
nomem:
    fprintf(stderr, "%s: out of memory\n", r->prog);
    return -1;
}

/* ---- key fields ---- */

int keyspec_parse(keyspec *ks, const char *list, unsigned char fs)
{
    memset(ks, 0, sizeof *ks);
    ks->fs = fs;
    if (!list)
        return 0;
    const char *s = list;
    size_t cap = 0;
    for (;;) {
        char *end;
        if (*s < '0' || *s > '9')
            goto bad;
        unsigned long a = strtoul(s, &end, 10), b = a;
        s = end;
        if (*s == '-') {
            s++;
            if (*s < '0' || *s > '9')
                goto bad;
            b = strtoul(s, &end, 10);
            s = end;
        }
        if (a < 1 || b < a || b > 4096)
            goto bad;
        for (unsigned long f = a; f <= b; f++) {
            if (ks->nfields == cap) {
                cap = cap ? cap * 2 : 8;
                unsigned *p = realloc(ks->fields, cap * sizeof *p);
                if (!p)
                    goto bad;
                ks->fields = p;
            }
            ks->fields[ks->nfields++] = (unsigned)(f - 1);
            if (f - 1 > ks->maxfield)
                ks->maxfield = (unsigned)(f - 1);
        }
        if (*s == '\0')
            break;
        if (*s != ',')
            goto bad;
        s++;
    }
    ks->fstart = malloc((ks->maxfield + 1) * sizeof *ks->fstart);
    ks->fend = malloc((ks->maxfield + 1) * sizeof *ks->fend);
    if (!ks->fstart || !ks->fend)
        goto bad;
    return 0;
bad:
    keyspec_free(ks);
    return -1;
}

void keyspec_free(keyspec *ks)
{
    free(ks->fields);
    free(ks->fstart);
    free(ks->fend);
    memset(ks, 0, sizeof *ks);
}

size_t keyspec_scratch(const keyspec *ks, size_t len)
{
    return ks->nfields > 1 ? (len + 1) * ks->nfields : 0;
}

int keyspec_extract(keyspec *ks, const char *rec, size_t len, char *out, const char **key,
                    size_t *klen)
{
    if (ks->nfields == 0) {
        *key = rec;
        *klen = len;
        return 0;
    }
    size_t pos = 0;
    for (unsigned f = 0; f <= ks->maxfield; f++) {
        if (pos > len)
            return -1;
        const char *d = memchr(rec + pos, ks->fs, len - pos);
        size_t e = d ? (size_t)(d - rec) : len;
        ks->fstart[f] = pos;
        ks->fend[f] = e;
        pos = e + 1; /* past the end when this was the last field */
    }
    if (ks->nfields == 1) {
        unsigned f = ks->fields[0];
        *key = rec + ks->fstart[f];
        *klen = ks->fend[f] - ks->fstart[f];
        return 0;
    }
    size_t o = 0;
    for (unsigned i = 0; i < ks->nfields; i++) {
        unsigned f = ks->fields[i];
        if (i)
            out[o++] = (char)ks->fs;
        size_t n = ks->fend[f] - ks->fstart[f];
        memcpy(out + o, rec + ks->fstart[f], n);
        o += n;
    }
    *key = out;
    *klen = o;
    return 0;
}

int cli_parse_delim(const char *s, unsigned char *out)
{
    static const struct {
        const char *name;
        unsigned char c;
    } names[] = {{"\\t", '\t'}, {"tab", '\t'},  {"\\0", '\0'},  {"nul", '\0'},
                 {"\\n", '\n'}, {"comma", ','}, {"space", ' '}, {"\\\\", '\\'}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].c;
            return 0;
        }
    if (strlen(s) != 1)
        return -1;
    *out = (unsigned char)s[0];
    return 0;
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_human_bytes(double bytes, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    unsigned u = 0;
    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%.0f B", bytes);
    else
        snprintf(buf, len, "%.1f %s", bytes, units[u]);
}

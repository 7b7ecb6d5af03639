/* Records for the streaming subcommands (dedup, load, check): a reader that
 * returns whole records from files or stdin in large blocks, and the key of a
 * record picked from its fields.
 *
 * A record ends at a separator byte ('\n', or NUL with -z); the last record of
 * a file may lack it. A block never spans two files and never splits a
 * record; it grows (doubling) for a record larger than the block, so a 1 MB
 * line is read like any other. Plain read(2) into the caller's buffer (no
 * mmap), so the resident memory of a run is its buffers, not its input. */
#ifndef BLOOMERY_CLI_RECORDS_H
#define BLOOMERY_CLI_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Records larger than this are refused (offsets in a block are 32-bit). */
#define RDR_MAX_RECORD ((size_t)1 << 30)

typedef struct rdr {
    char **paths; /* inputs; "-" is stdin */
    int npaths;
    int cur; /* index of the open input, -1 before the first */
    int fd;
    bool regular;     /* the open input is a regular file */
    unsigned char rs; /* record separator */
    char *carry;      /* bytes after the last separator of the previous block */
    size_t carrylen, carrycap;
    uint64_t bytes;   /* bytes read so far, all inputs */
    const char *prog; /* "bloomery dedup", for messages */
} rdr;

/* Prepares to read paths in order (npaths 0: stdin). No I/O yet. */
void rdr_init(rdr *r, const char *prog, char **paths, int npaths, unsigned char rs);
void rdr_close(rdr *r);

/* Reads the next block of whole records into *buf (capacity *cap, grown with
 * realloc when a record does not fit; at least `want` bytes are asked of the
 * input). Returns the block length, 0 after the last input, -1 on an error
 * (reported on stderr). *file gets the input's index, *unterminated whether
 * the block's last record lacks its separator (only at the end of a file). */
ssize_t rdr_next(rdr *r, char **buf, size_t *cap, size_t want, int *file, bool *unterminated);

/* Checks that every input can be opened and read (not a directory); reports
 * the first that cannot. *all_regular: every input is a regular file other
 * than stdin (so it can be read twice); *total: their total size in bytes. */
int rdr_check_inputs(const char *prog, char **paths, int npaths, bool *all_regular,
                     uint64_t *total);

/* Key fields. An empty spec (nfields 0) means the whole record. */
typedef struct keyspec {
    unsigned nfields;
    unsigned *fields;  /* 0-based field numbers, in key order */
    unsigned maxfield; /* largest of them */
    unsigned char fs;  /* field delimiter */
    size_t *fstart;    /* scratch: maxfield + 1 field bounds */
    size_t *fend;
} keyspec;

/* Parses "1,3-5" (1-based, at most 4096); 0 on success, -1 on a bad list. */
int keyspec_parse(keyspec *ks, const char *list, unsigned char fs);
void keyspec_free(keyspec *ks);

/* Bytes the composed key of a record of `len` bytes may need in scratch. */
size_t keyspec_scratch(const keyspec *ks, size_t len);

/* The key of rec[0..len): the whole record, one field (pointing into rec),
 * or several fields joined by the delimiter and written to out (at least
 * keyspec_scratch bytes). Returns 0, or -1 when the record has too few
 * fields. Not thread-safe (uses the spec's scratch). */
int keyspec_extract(keyspec *ks, const char *rec, size_t len, char *out, const char **key,
                    size_t *klen);

/* Parses a delimiter argument: one byte, or \t, \0, \n, tab, comma, space. */
int cli_parse_delim(const char *s, unsigned char *out);

/* Monotonic seconds. */
double cli_now(void);

/* "1.50 GiB" style sizes. */
void cli_human_bytes(double bytes, char *buf, size_t len);

#endif

/* RESP request parser: turns the bytes a client sent into argument vectors.
 *
 * Two request forms, as Redis accepts them:
 *   multibulk  *<argc>\r\n then argc times $<len>\r\n<bytes>\r\n
 *   inline     a line of space-separated words, "double" or 'single' quoted
 *              words with escapes, ended by \n (an optional \r before it)
 *
 * The parser is incremental and keeps no pointers: argument positions are
 * offsets from the start of the request being parsed, so the caller may move
 * its buffer (grow, compact) between calls as long as the request starts at
 * the pointer it passes next time. Bulk payloads are skipped, not scanned,
 * so a request arriving in many reads costs O(arguments), not O(bytes^2).
 *
 * Inline words are unescaped in place (never longer than their source), which
 * is why the buffer is not const. This file has no dependency on the event
 * loop so the fuzz target can link it alone.
 */
#ifndef BLOOMERYD_RESP_H
#define BLOOMERYD_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest inline request and longest *<n> / $<n> header line, as Redis. */
#define RESP_INLINE_MAX (64 * 1024)
/* Before AUTH a client may only send small requests (Redis's limits). */
#define RESP_UNAUTH_MAX_ARGS 10
#define RESP_UNAUTH_MAX_BULK 16384

typedef struct resp_arg {
    size_t off, len;
} resp_arg;

typedef struct resp_limits {
    long long max_bulk; /* proto-max-bulk-len */
    long long max_args; /* cap on a multibulk's argument count */
    bool authenticated;
} resp_limits;

typedef enum resp_status {
    RESP_AGAIN = 0,  /* incomplete: call again with more bytes */
    RESP_DONE = 1,   /* a request is ready (argc may be 0: nothing to run) */
    RESP_ERROR = -1, /* protocol error: reply with the message and close */
} resp_status;

typedef struct resp_parser {
    /* Position of the next unparsed byte, relative to the request start. */
    size_t pos;
    long long args_left; /* multibulk arguments still to read; -1: none started */
    long long bulk_len;  /* length of the bulk being read; -1: header next */
    bool inline_req;
    resp_arg *argv;
    size_t argc, argcap;
    /* Bytes still needed to finish the bulk being read (0 if unknown), so the
     * caller can size its buffer once for a large argument. */
    size_t need;
    const char *error; /* set with RESP_ERROR; static text */
    char errbuf[64];
} resp_parser;

void resp_parser_init(resp_parser *p);
void resp_parser_free(resp_parser *p);

/* Parse from buf (the start of the current request) up to len bytes. On
 * RESP_DONE the request occupies buf[0 .. p->pos) and p->argv[0 .. argc)
 * locate its arguments in buf; call resp_parser_reset() before parsing the
 * next request (which starts at buf + p->pos). On RESP_ERROR p->error holds
 * the text after "ERR Protocol error: ". */
resp_status resp_parse(resp_parser *p, char *buf, size_t len, const resp_limits *lim);
void resp_parser_reset(resp_parser *p);

/* A bulk header of the common form ("$", 1 to 9 digits without a leading
 * zero, "\r" and one more byte, length at most RESP_UNAUTH_MAX_BULK) at the
 * start of buf: returns the payload length and its header's length in
 * *hdrlen. -1 for anything else, which resp_parse then judges. */
long long resp_bulk_header(const char *buf, size_t len, size_t *hdrlen);

/* Split one line into words with the inline rules (quotes, escapes), in
 * place; the words land in p->argv as offsets into line. Returns false on
 * unbalanced quotes or when out of memory. Used for config files too. */
bool resp_split_line(resp_parser *p, char *line, size_t len);

#endif

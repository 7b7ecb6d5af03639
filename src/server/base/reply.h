/* Reply encoding for RESP2 and RESP3 into a growable per-client buffer.
 *
 * Every reply goes through one of these calls so the protocol differences
 * live in one place: booleans are :0/:1 in RESP2 and #f/#t in RESP3, a map is
 * a flat array of 2n elements in RESP2, a null is $-1 or _, a double is a
 * bulk string or ,<d>, a verbatim string is a bulk string or =<len>\r\ntxt:.
 *
 * On allocation failure the buffer is marked failed and further output is
 * dropped; the connection layer then closes the client rather than send a
 * truncated reply.
 *
 * These calls are the handlers' host interface for replies. reply.c is
 * bloomeryd's implementation; bloomery.so links src/module/reply_rm.c in its
 * place, which hands each call to Redis's reply API as it comes (no RESP in
 * between). So a handler replies only through calls below, never by writing
 * the buffer itself; reply_reserve and reply_raw are bloomeryd's alone
 * (the module does not define them).
 */
#ifndef BLOOMERYD_REPLY_H
#define BLOOMERYD_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct reply {
    char *buf;
    size_t len, cap;
    int proto; /* 2 or 3 */
    bool failed;
    void *host; /* the module: the command's RedisModuleCtx */
} reply;

void reply_init(reply *r);
void reply_free(reply *r);
bool reply_reserve(reply *r, size_t extra);
void reply_raw(reply *r, const void *p, size_t n);

void reply_simple(reply *r, const char *s); /* +s */
/* +s of n bytes; s has no NUL, CR or LF. */
void reply_simple_len(reply *r, const char *s, size_t n);
void reply_ok(reply *r);
/* -msg: msg is sent as given (so it carries its own "ERR " when it has one);
 * \r and \n become spaces. */
void reply_error(reply *r, const char *msg);
void reply_errorf(reply *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void reply_int(reply *r, long long v);
/* n integer replies, one after another. */
void reply_ints(reply *r, const int64_t *v, size_t n);
void reply_bool(reply *r, bool v);
/* n booleans at once: v[i] == 1 is true (the library's batch results). */
void reply_bools(reply *r, const int *v, size_t n);
void reply_bulk(reply *r, const void *p, size_t n);
void reply_bulk_str(reply *r, const char *s);
void reply_bulk_ll(reply *r, long long v);
/* A bulk string of n bytes written in place: begin answers where to write
 * them (NULL when out of memory: the reply is failed, do not call end),
 * end sends them. Nothing else is replied in between. */
void *reply_bulk_begin(reply *r, size_t n);
void reply_bulk_end(reply *r, size_t n);
void reply_double(reply *r, double d);
void reply_null(reply *r);
void reply_array(reply *r, long long n);
void reply_map(reply *r, long long n); /* n key/value pairs */
void reply_set(reply *r, long long n);
/* Out-of-band data (Pub/Sub messages): >n in RESP3, an array in RESP2. */
void reply_push(reply *r, long long n);
void reply_verbatim(reply *r, const char *s, size_t n); /* "txt" in RESP3 */
void reply_wrong_arity(reply *r, const char *cmdname);
/* A HELP subcommand's answer: an array of n simple strings. */
void reply_lines(reply *r, const char *const *lines, size_t n);

/* For replies whose length is known only at the end: reserve a header slot,
 * fill it later. Deferred arrays are filled innermost first (the module's
 * host keeps them as a stack, as Redis does). */
size_t reply_defer_len(reply *r);
void reply_set_array_len(reply *r, size_t slot, long long n);

#endif

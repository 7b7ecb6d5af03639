/* What the value commands' handlers share, so each handler keeps only what
 * is its own:
 *
 *   keys    open a key that should hold one of a kind of values, or answer
 *           in the kind's words (WRONGTYPE, RedisBloom's "ERR not found",
 *           "still being loaded"); open it for a change, creating it when
 *           missing;
 *   values  one path to create a value: memory reserved against maxmemory
 *           (else the machine's), the value built, inserted under its key,
 *           its expiry set and its creation logged; and the answer when a
 *           value later refuses to grow;
 *   options one scanner for option lists, driven by a table of option specs
 *           carrying RedisBloom's exact reply for each bad value.
 *
 * It reaches keys through keyspace.h and the log through persist.h, and
 * answers through the command's reply buffer: nothing of a connection.
 */
#ifndef BLOOMERYD_CMDKIT_H
#define BLOOMERYD_CMDKIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd.h"
#include "keyspace.h"
#include "types.h"

/* ---- keys ---- */

/* The values a command expects under its key, and its family's words. */
typedef struct ck_kind {
    const value_type *types[4]; /* accepted, NULL-terminated */
    const value_type *loading;  /* a dump of one being restored (NULL: none) */
    const char *not_found;      /* a key that must exist is missing */
    const char *loading_err;    /* the key holds `loading` */
    const char *nomem;          /* no memory for a new value's object or entry */
    const char *failed;         /* the library refused a new value's parameters */
    /* The machine's memory refused a new value (NULL: "ERR Insufficient
     * memory to create filter"). */
    const char *create_nomem;
} ck_kind;

/* Whether o holds one of k's types. */
bool ck_is(const ck_kind *k, const kv_obj *o);

#define CK_WRITE (1u << 0)      /* lock the key exclusively */
#define CK_MUST_EXIST (1u << 1) /* a missing key answers k->not_found */
#define CK_COUNT_HIT (1u << 2)  /* count a keyspace hit or miss */
#define CK_EXCLUSIVE (1u << 3)  /* read with no change overlapping (ks_open_exclusive) */
#define CK_CHANGE (1u << 4)     /* the command changes the value: a read-only one is refused */

/* What a command that would change a read-only value answers. */
#define CK_READONLY_ERR "ERR filter is read-only (BF.CONFIG key READONLY no allows writes)"

/* A value marked read-only (BF.CONFIG): answered with CK_READONLY_ERR,
 * true. Every path that opens a value to change it calls this with the
 * key still locked: ck_open with CK_CHANGE and ck_open_or_create do, so
 * only commands that open their keys otherwise (merges, restores) call
 * it themselves. */
bool ck_refuse_readonly(cmd_ctx *c, const kv_obj *o);

/* Open key expecting k. True with *e its entry, or NULL when the key is
 * missing (without CK_MUST_EXIST); false after replying. ref is open
 * either way: ks_close it. */
bool ck_open(cmd_ctx *c, ks_ref *ref, const char *key, size_t klen, const ck_kind *k,
             unsigned flags, kv_entry **e);

/* Creates a missing key's value with ref locked exclusively: the entry, or
 * NULL after replying. */
typedef kv_entry *(*ck_create_fn)(cmd_ctx *c, ks_ref *ref, const void *arg);

/* Open key for a change: shared lock, or exclusive while a missing key is
 * created with create(c, ref, arg) (create NULL: k->not_found). Returns
 * its entry, or NULL after replying (a read-only value refused too); ref
 * is open either way. */
kv_entry *ck_open_or_create(cmd_ctx *c, ks_ref *ref, const char *key, size_t klen, const ck_kind *k,
                            ck_create_fn create, const void *arg);

/* Reply st, an error of an operation below the command layer, in k's
 * words. Statuses with words of their command's own (a merge's shapes, a
 * dump's chunks) are the caller's to answer. */
void ck_reply_status(cmd_ctx *c, const ck_kind *k, value_status st);

/* ---- values ---- */

/* A value to create. */
typedef struct ck_value {
    const ck_kind *kind; /* its words for errors */
    const value_type *type;
    /* What creating it allocates; 0: parameters refused; CK_BYTES_TOO_BIG:
     * a size beyond 64 bits, refused as memory. */
    uint64_t bytes;
    /* A growing value reserves every allocation itself, creation included,
     * through kv_obj_may_grow; the others are reserved here, bytes and the
     * entry up front. */
    bool grows;
    int (*build)(kv_obj *o, const void *params); /* sets o->v; a BLOOMERY_* code */
    /* Log the creation: the key is in ref, its entry (expiry set) in e. */
    void (*log)(const ks_ref *ref, const kv_entry *e, const void *params);
    const void *params;
    long long ttl_s; /* 0: no expiry */
    /* Not NULL: parameters that make no value, answered with this error
     * when the call would create one (a key that exists is not refused). */
    const char *refused;
} ck_value;

#define CK_BYTES_TOO_BIG UINT64_MAX

/* Create v under ref (locked exclusively, key missing). Its bytes and its
 * entry's must fit under maxmemory (else the machine's memory) before
 * anything is allocated; a refusal answers as ck_reply_nomem. Returns the
 * entry, or NULL after replying. */
kv_entry *ck_create(cmd_ctx *c, ks_ref *ref, const ck_value *v);

/* RESERVE: create v under key and reply OK; a key that exists answers
 * "ERR item exists" when it holds one of exists' types (or its loading
 * type; exists NULL: whatever it holds), else WRONGTYPE. */
bool ck_reserve(cmd_ctx *c, const char *key, size_t klen, const ck_kind *exists, const ck_value *v);

/* A value refused memory (rc BLOOMERY_EREFUSED from its may_allocate hook,
 * or BLOOMERY_ENOMEM): Redis's OOM error when maxmemory refused it, else
 * nomem. */
void ck_reply_nomem(cmd_ctx *c, int rc, const char *nomem);

/* ---- options ---- */

typedef enum opt_kind {
    OPT_FLAG,    /* present or not */
    OPT_INT,     /* an integer in [lo, hi] */
    OPT_RATE,    /* a number in (0, 1) */
    OPT_CHOICE,  /* one of choices, ignoring case: n is its index */
    OPT_REFUSED, /* not allowed here: answers bad */
    OPT_ITEMS,   /* OPT_SEQUENCE: ends the options, the items follow */
} opt_kind;

/* What the scan found of one option. */
typedef struct opt_val {
    int at;      /* the option's argument (its value follows); 0: absent */
    long long n; /* OPT_INT, OPT_CHOICE */
    double d;    /* OPT_RATE */
    bool late;   /* out of range, answered late (opt_spec.late) */
} opt_val;

typedef struct opt_spec {
    const char *name; /* as documented */
    opt_kind kind;
    int pos;                    /* > 0: the argument at this index, not a named option */
    long long lo, hi;           /* OPT_INT */
    const char *const *choices; /* OPT_CHOICE, NULL-terminated */
    /* Replies, formatted with the option's name, lo and hi (in that order,
     * so a reply may show them): a value that does not parse (OPT_REFUSED:
     * the option itself); a value out of range (NULL: bad); no value at
     * all (NULL: the command's wrong-arity error). */
    const char *bad, *range, *missing;
    /* OPT_SEQUENCE: the letters that recognise the option, bit i for
     * letter i (RedisBloom's BF.INSERT reads one to three); 0: the whole
     * name. A repeat takes the last value, unless once (a repeat is then
     * an unknown argument). */
    unsigned letters;
    bool once;
    /* OPT_SEQUENCE: out of range is answered late (opt_table.late_range). */
    bool late;
    /* Run once the value parsed, before its range is checked, with every
     * option's opt_val: a reply for a conflict, or NULL. */
    const char *(*check)(const opt_val *v, const void *ctx);
} opt_spec;

typedef enum opt_mode {
    /* RedisBloom's RMUtil_ArgIndex: an option is the first argument from
     * `from` that is its name; other arguments are not looked at. Options
     * are checked in the table's order. */
    OPT_SEARCH,
    /* Every argument from `from` is an option, recognised by its letters
     * in the table's order, followed by its value; checked as read. */
    OPT_SEQUENCE,
} opt_mode;

typedef struct opt_table {
    opt_mode mode;
    int from;
    const opt_spec *specs;
    size_t n;
    /* OPT_SEQUENCE: the reply to an argument that is no option (NULL:
     * ERR syntax error). */
    const char *unknown;
    /* OPT_SEARCH: after every option, a check of them all (NULL: none),
     * then, when strict, every argument from `from` must be an option or
     * its value (else ERR syntax error). */
    const char *(*done)(const opt_val *v, const void *ctx);
    bool strict;
    /* OPT_SEQUENCE: a value of a late spec out of its range is answered
     * with this once the options end at OPT_ITEMS, after every option
     * parsed (RedisBloom 2.4's BF.INSERT), not where it is read. */
    const char *late_range;
} opt_table;

/* Scan c's arguments by t into v (t->n entries, in the table's order);
 * false after replying (cmd names the command in a wrong-arity error).
 * ctx is handed to the checks. */
bool ck_scan(cmd_ctx *c, const char *cmd, const opt_table *t, opt_val *v, const void *ctx);

/* RedisBloom's RMUtil_ArgIndex: the first argument from `from` equal to
 * name, ignoring case; -1 when none. */
int ck_arg_index(cmd_ctx *c, int from, const char *name);

#endif

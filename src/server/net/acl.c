/* ACL users: the registry, the rules of ACL SETUSER, the permission check,
 * the rules written back (ACL LIST, GETUSER, the aclfile), the aclfile and
 * ACL LOG. See acl.h. Rules and error texts are Redis 7.0's. */
#include "acl.h"

#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "resp.h"
#include "server.h"
#include "util.h"

_Atomic uint64_t acl_version = 1;

/* The users, in creation order; default first. Changed under the write
 * lock; a snapshot once published is never written again. */
static pthread_rwlock_t users_lock = PTHREAD_RWLOCK_INITIALIZER;
static acl_user **users;
static size_t nusers, capusers;

/* ---- snapshots ---- */

static void user_free(acl_user *u)
{
    if (u == NULL)
        return;
    free(u->name);
    free(u->pass);
    for (size_t i = 0; i < u->nkeys; i++)
        free(u->keys[i].pat);
    free(u->keys);
    for (size_t i = 0; i < u->nchans; i++)
        free(u->chans[i].pat);
    free(u->chans);
    for (size_t i = 0; i < u->nsels; i++)
        user_free(u->sels[i]);
    free(u->sels);
    free(u);
}

acl_user *acl_user_ref(acl_user *u)
{
    if (u)
        atomic_fetch_add_explicit(&u->refs, 1, memory_order_relaxed);
    return u;
}

void acl_user_put(acl_user *u)
{
    if (u && atomic_fetch_sub_explicit(&u->refs, 1, memory_order_acq_rel) == 1)
        user_free(u);
}

static acl_pattern *pats_dup(const acl_pattern *p, size_t n)
{
    if (n == 0)
        return NULL;
    acl_pattern *d = calloc(n, sizeof(*d));
    if (d == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        d[i] = p[i];
        d[i].pat = mem_dup(p[i].pat, p[i].len);
        if (d[i].pat == NULL) {
            for (size_t j = 0; j < i; j++)
                free(d[j].pat);
            free(d);
            return NULL;
        }
    }
    return d;
}

/* A new, writable copy (refs 1). */
static acl_user *user_copy(const acl_user *u)
{
    acl_user *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return NULL;
    atomic_init(&d->refs, 1);
    d->name = u->name ? strdup(u->name) : NULL; /* a selector has none */
    d->flags = u->flags;
    memcpy(d->allowed, u->allowed, sizeof(d->allowed));
    d->npass = u->npass;
    if (u->npass) {
        d->pass = malloc(u->npass * 32);
        if (d->pass)
            memcpy(d->pass, u->pass, u->npass * 32);
    }
    d->nkeys = u->nkeys;
    d->keys = pats_dup(u->keys, u->nkeys);
    d->nchans = u->nchans;
    d->chans = pats_dup(u->chans, u->nchans);
    if (u->nsels) {
        d->sels = calloc(u->nsels, sizeof(*d->sels));
        for (size_t i = 0; d->sels && i < u->nsels; i++) {
            d->sels[i] = user_copy(u->sels[i]);
            if (d->sels[i] == NULL)
                break;
            d->nsels++;
        }
    }
    if (d->nsels != u->nsels || (u->name && d->name == NULL) || (u->npass && d->pass == NULL) ||
        (u->nkeys && d->keys == NULL) || (u->nchans && d->chans == NULL)) {
        user_free(d);
        return NULL;
    }
    return d;
}

static acl_user *user_new(const char *name, size_t len)
{
    acl_user *u = calloc(1, sizeof(*u));
    if (u == NULL)
        return NULL;
    atomic_init(&u->refs, 1);
    u->name = mem_dup(name, len);
    if (u->name == NULL) {
        free(u);
        return NULL;
    }
    /* A new user: off, no password, no keys, no channels (Redis 7.0's
     * acl-pubsub-default resetchannels), no commands. */
    return u;
}

static ssize_t find_locked(const char *name, size_t len)
{
    for (size_t i = 0; i < nusers; i++)
        if (strlen(users[i]->name) == len && memcmp(users[i]->name, name, len) == 0)
            return (ssize_t)i;
    return -1;
}

acl_user *acl_user_get(const char *name, size_t len)
{
    pthread_rwlock_rdlock(&users_lock);
    ssize_t i = find_locked(name, len);
    acl_user *u = i >= 0 ? acl_user_ref(users[i]) : NULL;
    pthread_rwlock_unlock(&users_lock);
    return u;
}

static bool channel_command(const command *cmd)
{
    return cmd->proc == publishCommand || cmd->proc == subscribeCommand ||
           cmd->proc == psubscribeCommand;
}

/* The commands the gate may pass on one bit test. */
static void compute_fast(acl_user *u)
{
    memset(u->fast, 0, sizeof(u->fast));
    for (size_t i = 0; i < commands_count(); i++) {
        const command *cmd = command_at(i);
        int n;
        command_subs(cmd, &n);
        if (!acl_bit(u, cmd->id) || n > 0 ||
            (cmd->first_key > 0 && !(u->flags & ACL_USER_ALLKEYS)) ||
            (channel_command(cmd) && !(u->flags & ACL_USER_ALLCHANNELS)))
            continue;
        u->fast[cmd->id >> 6] |= 1ull << (cmd->id & 63);
    }
}

/* Publish u under its name (the registry takes the caller's reference),
 * the users kept in name order as Redis lists them. */
static bool publish_locked(acl_user *u)
{
    compute_fast(u);
    ssize_t i = find_locked(u->name, strlen(u->name));
    if (i >= 0) {
        acl_user_put(users[i]);
        users[i] = u;
    } else {
        if (nusers == capusers) {
            size_t cap = capusers ? capusers * 2 : 8;
            acl_user **a = realloc(users, cap * sizeof(*a));
            if (a == NULL)
                return false;
            users = a;
            capusers = cap;
        }
        size_t at = 0;
        while (at < nusers && strcmp(users[at]->name, u->name) < 0)
            at++;
        memmove(&users[at + 1], &users[at], (nusers - at) * sizeof(*users));
        users[at] = u;
        nusers++;
    }
    atomic_fetch_add_explicit(&acl_version, 1, memory_order_release);
    return true;
}

/* ---- passwords ---- */

void acl_sha256(const char *s, size_t len, unsigned char out[32])
{
    unsigned int n = 32;
    if (!EVP_Digest(s, len, out, &n, EVP_sha256(), NULL))
        abort();
}

bool acl_user_check_password(const acl_user *u, const char *pass, size_t len)
{
    if (!(u->flags & ACL_USER_ON))
        return false;
    if (u->flags & ACL_USER_NOPASS)
        return true;
    unsigned char h[32];
    acl_sha256(pass, len, h);
    bool ok = false;
    for (size_t i = 0; i < u->npass; i++) {
        /* Every hash compared in full: the time says nothing about which. */
        unsigned d = 0;
        for (int k = 0; k < 32; k++)
            d |= (unsigned)(u->pass[i][k] ^ h[k]);
        ok |= d == 0;
    }
    return ok;
}

bool acl_default_nopass(void)
{
    pthread_rwlock_rdlock(&users_lock);
    ssize_t i = find_locked("default", 7);
    bool r = i >= 0 && (users[i]->flags & ACL_USER_NOPASS) && (users[i]->flags & ACL_USER_ON);
    pthread_rwlock_unlock(&users_lock);
    return r;
}

static ssize_t pass_find(const acl_user *u, const unsigned char h[32])
{
    for (size_t i = 0; i < u->npass; i++)
        if (memcmp(u->pass[i], h, 32) == 0)
            return (ssize_t)i;
    return -1;
}

static bool pass_add(acl_user *u, const unsigned char h[32])
{
    u->flags &= ~(unsigned)ACL_USER_NOPASS;
    if (pass_find(u, h) >= 0)
        return true;
    unsigned char(*p)[32] = realloc(u->pass, (u->npass + 1) * 32);
    if (p == NULL)
        return false;
    u->pass = p;
    memcpy(u->pass[u->npass++], h, 32);
    return true;
}

static bool pass_del(acl_user *u, const unsigned char h[32])
{
    ssize_t i = pass_find(u, h);
    if (i < 0)
        return false;
    memmove(u->pass[i], u->pass[i + 1], (u->npass - (size_t)i - 1) * 32);
    u->npass--;
    return true;
}

static void pass_reset(acl_user *u)
{
    free(u->pass);
    u->pass = NULL;
    u->npass = 0;
}

static bool hex_hash(const char *s, size_t len, unsigned char out[32])
{
    if (len != 64)
        return false;
    for (size_t i = 0; i < 64; i++) {
        char ch = s[i];
        int v = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (v < 0)
            return false;
        if (i % 2 == 0)
            out[i / 2] = (unsigned char)(v << 4);
        else
            out[i / 2] |= (unsigned char)v;
    }
    return true;
}

/* ---- patterns ---- */

static void pats_reset(acl_pattern **p, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        free((*p)[i].pat);
    free(*p);
    *p = NULL;
    *n = 0;
}

static bool pats_add(acl_pattern **p, size_t *n, const char *s, size_t len, unsigned rights)
{
    for (size_t i = 0; i < *n; i++) {
        if ((*p)[i].len == len && memcmp((*p)[i].pat, s, len) == 0) {
            (*p)[i].rights |= rights;
            return true;
        }
    }
    acl_pattern *a = realloc(*p, (*n + 1) * sizeof(*a));
    if (a == NULL)
        return false;
    *p = a;
    a[*n].pat = mem_dup(s, len);
    if (a[*n].pat == NULL)
        return false;
    a[*n].len = len;
    a[*n].rights = rights;
    (*n)++;
    return true;
}

/* ---- commands ---- */

static void bit_set(acl_user *u, int id, bool on)
{
    if (on)
        u->allowed[id >> 6] |= 1ull << (id & 63);
    else
        u->allowed[id >> 6] &= ~(1ull << (id & 63));
}

/* A command with all its subcommands. */
static void command_set(acl_user *u, const command *cmd, bool on)
{
    bit_set(u, cmd->id, on);
    int n;
    const command_sub *s = command_subs(cmd, &n);
    for (int i = 0; i < n; i++)
        bit_set(u, s[i].id, on);
}

static void category_set(acl_user *u, unsigned cat, bool on)
{
    for (int id = 0; id < command_ids(); id++) {
        const command_sub *sub;
        const command *cmd = command_by_id(id, &sub);
        unsigned cats = sub ? sub->cats : command_cats(cmd);
        if (cats & cat)
            bit_set(u, id, on);
    }
}

static void all_set(acl_user *u, bool on)
{
    memset(u->allowed, 0, sizeof(u->allowed));
    if (on)
        for (int id = 0; id < command_ids(); id++)
            bit_set(u, id, true);
}

/* ---- rules ---- */

enum {
    RULE_OK,
    RULE_SYNTAX,
    RULE_UNKNOWN,
    RULE_KEYS_AFTER_ALL,
    RULE_CHANS_AFTER_ALL,
    RULE_NOPASS,
    RULE_HASH,
    RULE_FIRSTARG,
    RULE_NOMEM,
};

static const char *rule_error(int e)
{
    switch (e) {
    case RULE_UNKNOWN: return "Unknown command or category name in ACL";
    case RULE_KEYS_AFTER_ALL:
        return "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and "
               "does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
    case RULE_CHANS_AFTER_ALL:
        return "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid "
               "and does not have any effect. Try 'resetchannels' to start with an empty list of "
               "channels";
    case RULE_NOPASS: return "The password you are trying to remove from the user does not exist";
    case RULE_HASH:
        return "The password hash must be exactly 64 characters and contain only lowercase "
               "hexadecimal characters";
    case RULE_FIRSTARG: return "Allowing first-arg of a subcommand is not supported";
    case RULE_NOMEM: return "Out of memory";
    default: return "Syntax error";
    }
}

static int rule_keys(acl_user *u, const char *r, size_t len)
{
    unsigned rights = ACL_KEY_READ | ACL_KEY_WRITE;
    size_t off = 1;
    if (r[0] == '%') {
        rights = 0;
        for (; off < len && r[off] != '~'; off++) {
            if (r[off] == 'R' || r[off] == 'r')
                rights |= ACL_KEY_READ;
            else if (r[off] == 'W' || r[off] == 'w')
                rights |= ACL_KEY_WRITE;
            else
                return RULE_SYNTAX;
        }
        if (rights == 0 || off == len)
            return RULE_SYNTAX;
        off++;
    }
    if (u->flags & ACL_USER_ALLKEYS)
        return RULE_KEYS_AFTER_ALL;
    const char *p = r + off;
    size_t plen = len - off;
    if (plen == 1 && p[0] == '*' && rights == (ACL_KEY_READ | ACL_KEY_WRITE)) {
        pats_reset(&u->keys, &u->nkeys);
        u->flags |= ACL_USER_ALLKEYS;
        return RULE_OK;
    }
    return pats_add(&u->keys, &u->nkeys, p, plen, rights) ? RULE_OK : RULE_NOMEM;
}

static int rule_channel(acl_user *u, const char *r, size_t len)
{
    if (u->flags & ACL_USER_ALLCHANNELS)
        return RULE_CHANS_AFTER_ALL;
    if (len == 2 && r[1] == '*') {
        pats_reset(&u->chans, &u->nchans);
        u->flags |= ACL_USER_ALLCHANNELS;
        return RULE_OK;
    }
    return pats_add(&u->chans, &u->nchans, r + 1, len - 1, ACL_KEY_READ | ACL_KEY_WRITE)
               ? RULE_OK
               : RULE_NOMEM;
}

static int rule_command(acl_user *u, const char *r, size_t len)
{
    bool on = r[0] == '+';
    const char *name = r + 1;
    size_t nlen = len - 1;
    if (nlen && name[0] == '@') {
        if (str_eq_ci(name + 1, nlen - 1, "all")) {
            all_set(u, on);
            if (on)
                u->flags |= ACL_USER_ALLCOMMANDS;
            else
                u->flags &= ~(unsigned)ACL_USER_ALLCOMMANDS;
            return RULE_OK;
        }
        unsigned cat = acl_cat_by_name(name + 1, nlen - 1);
        if (cat == 0)
            return RULE_UNKNOWN;
        /* Only +@all and -@all say whether commands added later are
         * allowed, as Redis's reserved bit does. */
        category_set(u, cat, on);
        return RULE_OK;
    }
    const char *bar = memchr(name, '|', nlen);
    size_t clen = bar ? (size_t)(bar - name) : nlen;
    const command *cmd = command_lookup(name, clen);
    if (cmd == NULL)
        return RULE_UNKNOWN;
    if (bar == NULL) {
        command_set(u, cmd, on);
    } else {
        const char *sub = bar + 1;
        size_t slen = nlen - clen - 1;
        if (memchr(sub, '|', slen))
            return RULE_FIRSTARG;
        int n;
        command_subs(cmd, &n);
        const command_sub *s = command_sub_lookup(cmd, sub, slen);
        /* Redis 7.0's first-argument rules (+select|0) on commands without
         * subcommands are not kept here. */
        if (s == NULL || slen == 0)
            return RULE_UNKNOWN;
        bit_set(u, s->id, on);
    }
    return RULE_OK;
}

/* The rules a selector takes: keys, channels, commands. */
static int apply_selector_rule(acl_user *u, const char *r, size_t len)
{
    if (len == 0)
        return RULE_SYNTAX;
    if (str_eq_ci(r, len, "allkeys")) {
        pats_reset(&u->keys, &u->nkeys);
        u->flags |= ACL_USER_ALLKEYS;
    } else if (str_eq_ci(r, len, "resetkeys")) {
        pats_reset(&u->keys, &u->nkeys);
        u->flags &= ~(unsigned)ACL_USER_ALLKEYS;
    } else if (str_eq_ci(r, len, "allchannels")) {
        pats_reset(&u->chans, &u->nchans);
        u->flags |= ACL_USER_ALLCHANNELS;
    } else if (str_eq_ci(r, len, "resetchannels")) {
        pats_reset(&u->chans, &u->nchans);
        u->flags &= ~(unsigned)ACL_USER_ALLCHANNELS;
    } else if (str_eq_ci(r, len, "allcommands")) {
        return apply_selector_rule(u, "+@all", 5);
    } else if (str_eq_ci(r, len, "nocommands")) {
        return apply_selector_rule(u, "-@all", 5);
    } else if (r[0] == '~' || r[0] == '%') {
        return rule_keys(u, r, len);
    } else if (r[0] == '&') {
        return rule_channel(u, r, len);
    } else if (r[0] == '+' || r[0] == '-') {
        return rule_command(u, r, len);
    } else {
        return RULE_SYNTAX;
    }
    return RULE_OK;
}

static void sels_clear(acl_user *u)
{
    for (size_t i = 0; i < u->nsels; i++)
        user_free(u->sels[i]);
    free(u->sels);
    u->sels = NULL;
    u->nsels = 0;
}

/* "(rule rule ...)": a new selector, all its rules good or none. */
static int rule_selector(acl_user *u, const char *r, size_t len)
{
    acl_user *sel = calloc(1, sizeof(*sel));
    char *copy = mem_dup(r + 1, len - 2);
    acl_user **a = realloc(u->sels, (u->nsels + 1) * sizeof(*a));
    if (a)
        u->sels = a;
    if (sel == NULL || copy == NULL || a == NULL) {
        free(sel);
        free(copy);
        return RULE_NOMEM;
    }
    resp_parser p;
    resp_parser_init(&p);
    int e = resp_split_line(&p, copy, len - 2) ? RULE_OK : RULE_SYNTAX;
    for (size_t i = 0; e == RULE_OK && i < p.argc; i++)
        e = apply_selector_rule(sel, copy + p.argv[i].off, p.argv[i].len);
    resp_parser_free(&p);
    free(copy);
    if (e != RULE_OK) {
        user_free(sel);
        return e;
    }
    u->sels[u->nsels++] = sel;
    return RULE_OK;
}

static int apply_rule(acl_user *u, const char *r, size_t len)
{
    if (len == 0)
        return RULE_SYNTAX;
    if (str_eq_ci(r, len, "on"))
        u->flags |= ACL_USER_ON;
    else if (str_eq_ci(r, len, "off"))
        u->flags &= ~(unsigned)ACL_USER_ON;
    else if (str_eq_ci(r, len, "skip-sanitize-payload"))
        u->flags = (u->flags & ~(unsigned)ACL_USER_SANITIZE) | ACL_USER_SKIP_SANITIZE;
    else if (str_eq_ci(r, len, "sanitize-payload"))
        u->flags = (u->flags & ~(unsigned)ACL_USER_SKIP_SANITIZE) | ACL_USER_SANITIZE;
    else if (str_eq_ci(r, len, "nopass")) {
        pass_reset(u);
        u->flags |= ACL_USER_NOPASS;
    } else if (str_eq_ci(r, len, "resetpass")) {
        pass_reset(u);
        u->flags &= ~(unsigned)ACL_USER_NOPASS;
    } else if (str_eq_ci(r, len, "clearselectors")) {
        sels_clear(u);
    } else if (str_eq_ci(r, len, "reset")) {
        /* Redis 7.0's: resetpass resetkeys resetchannels off
         * sanitize-payload clearselectors -@all. */
        pass_reset(u);
        pats_reset(&u->keys, &u->nkeys);
        pats_reset(&u->chans, &u->nchans);
        sels_clear(u);
        u->flags = ACL_USER_SANITIZE;
        all_set(u, false);
    } else if (r[0] == '>' || r[0] == '#') {
        unsigned char h[32];
        if (r[0] == '>')
            acl_sha256(r + 1, len - 1, h);
        else if (!hex_hash(r + 1, len - 1, h))
            return RULE_HASH;
        return pass_add(u, h) ? RULE_OK : RULE_NOMEM;
    } else if (r[0] == '<' || r[0] == '!') {
        unsigned char h[32];
        if (r[0] == '<')
            acl_sha256(r + 1, len - 1, h);
        else if (!hex_hash(r + 1, len - 1, h))
            return RULE_HASH;
        return pass_del(u, h) ? RULE_OK : RULE_NOPASS;
    } else if (r[0] == '(' && r[len - 1] == ')' && len >= 2) {
        return rule_selector(u, r, len);
    } else {
        return apply_selector_rule(u, r, len);
    }
    return RULE_OK;
}

/* Redis joins the arguments of a selector given in pieces ("(~a*" "+get)")
 * into one rule. Returns the rules (the caller frees them and the arrays)
 * or NULL with err set: the unmatched piece, or no memory. */
static char **merge_selectors(int n, const char *const *in, const size_t *inl, int *outn,
                              size_t **outl, char *err, size_t errlen)
{
    char **out = calloc((size_t)n + 1, sizeof(*out));
    size_t *lens = calloc((size_t)n + 1, sizeof(*lens));
    *outn = 0;
    if (out == NULL || lens == NULL) {
        free(out);
        free(lens);
        snprintf(err, errlen, "ERR Out of memory");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        int j = i;
        if (inl[i] && in[i][0] == '(' && in[i][inl[i] - 1] != ')') {
            while (j < n && !(inl[j] && in[j][inl[j] - 1] == ')'))
                j++;
            if (j == n) {
                snprintf(err, errlen,
                         "ERR Unmatched parenthesis in acl selector starting at '%.*s'.",
                         (int)(inl[i] < 256 ? inl[i] : 256), in[i]);
                for (int k = 0; k < *outn; k++)
                    free(out[k]);
                free(out);
                free(lens);
                return NULL;
            }
        }
        size_t len = 0;
        for (int k = i; k <= j; k++)
            len += inl[k] + (k > i);
        char *r = malloc(len + 1);
        if (r == NULL) {
            for (int k = 0; k < *outn; k++)
                free(out[k]);
            free(out);
            free(lens);
            snprintf(err, errlen, "ERR Out of memory");
            return NULL;
        }
        size_t o = 0;
        for (int k = i; k <= j; k++) {
            if (k > i)
                r[o++] = ' ';
            memcpy(r + o, in[k], inl[k]);
            o += inl[k];
        }
        r[o] = '\0';
        out[*outn] = r;
        lens[(*outn)++] = o;
        i = j;
    }
    *outl = lens;
    return out;
}

static bool valid_username(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] == ' ' || s[i] == '\0')
            return false;
    return true;
}

/* The user with the rules applied, not published; NULL and err on failure. */
static acl_user *build_user(const char *name, size_t nlen, int nrules, const char *const *rules,
                            const size_t *lens, char *err, size_t errlen)
{
    acl_user *old = acl_user_get(name, nlen);
    acl_user *u = old ? user_copy(old) : user_new(name, nlen);
    acl_user_put(old);
    if (u == NULL) {
        snprintf(err, errlen, "ERR Out of memory");
        return NULL;
    }
    int n;
    size_t *ml;
    char **merged = merge_selectors(nrules, rules, lens, &n, &ml, err, errlen);
    if (merged == NULL) {
        user_free(u);
        return NULL;
    }
    for (int i = 0; i < n && u; i++) {
        int e = apply_rule(u, merged[i], ml[i]);
        if (e != RULE_OK) {
            snprintf(err, errlen, "ERR Error in ACL SETUSER modifier '%.*s': %s",
                     (int)(ml[i] < 256 ? ml[i] : 256), merged[i], rule_error(e));
            user_free(u);
            u = NULL;
        }
    }
    for (int i = 0; i < n; i++)
        free(merged[i]);
    free(merged);
    free(ml);
    return u;
}

bool acl_setuser(const char *name, size_t nlen, int nrules, const char *const *rules,
                 const size_t *lens, char *err, size_t errlen)
{
    if (!valid_username(name, nlen)) {
        snprintf(err, errlen, "ERR Usernames can't contain spaces or null characters");
        return false;
    }
    acl_user *u = build_user(name, nlen, nrules, rules, lens, err, errlen);
    if (u == NULL)
        return false;
    pthread_rwlock_wrlock(&users_lock);
    bool ok = publish_locked(u);
    pthread_rwlock_unlock(&users_lock);
    if (!ok) {
        user_free(u);
        snprintf(err, errlen, "ERR Out of memory");
    }
    return ok;
}

int acl_deluser(const char *name, size_t nlen)
{
    if (str_eq_ci(name, nlen, "default") && nlen == 7 && memcmp(name, "default", 7) == 0)
        return -1;
    pthread_rwlock_wrlock(&users_lock);
    ssize_t i = find_locked(name, nlen);
    if (i >= 0) {
        acl_user_put(users[i]);
        memmove(&users[i], &users[i + 1], (nusers - (size_t)i - 1) * sizeof(*users));
        nusers--;
        atomic_fetch_add_explicit(&acl_version, 1, memory_order_release);
    }
    pthread_rwlock_unlock(&users_lock);
    return i >= 0;
}

/* ---- the check ---- */

static bool keys_allow(const acl_user *u, const char *k, size_t klen, unsigned need)
{
    for (size_t i = 0; i < u->nkeys; i++)
        if ((u->keys[i].rights & need) == need &&
            glob_match(u->keys[i].pat, u->keys[i].len, k, klen, false))
            return true;
    return false;
}

/* Redis 7: a channel must match one of the patterns; a pattern
 * subscription must be one of them, literally. */
static bool chans_allow(const acl_user *u, const char *ch, size_t len, bool literal)
{
    if (u->flags & ACL_USER_ALLCHANNELS)
        return true;
    for (size_t i = 0; i < u->nchans; i++) {
        const acl_pattern *p = &u->chans[i];
        if (literal ? (p->len == len && memcmp(p->pat, ch, len) == 0)
                    : glob_match(p->pat, p->len, ch, len, false))
            return true;
    }
    return false;
}

static int check_one(const acl_user *u, int id, const command *cmd, int argc, const char **argv,
                     const size_t *lens, int *errpos)
{
    *errpos = 0;
    if (!acl_bit(u, id))
        return ACL_DENIED_CMD;
    if (!(u->flags & ACL_USER_ALLKEYS) && cmd->first_key > 0) {
        unsigned need = (cmd->flags & CMD_WRITE) ? ACL_KEY_WRITE : ACL_KEY_READ;
        int last = cmd->last_key < 0 ? argc + cmd->last_key : cmd->last_key;
        int step = cmd->key_step > 0 ? cmd->key_step : 1;
        for (int i = cmd->first_key; i <= last && i < argc; i += step) {
            if (!keys_allow(u, argv[i], lens[i], need)) {
                *errpos = i;
                return ACL_DENIED_KEY;
            }
        }
        /* "MERGE dest numkeys src ...": the sources, read, follow a count
         * the table's positions cannot say. */
        long long n;
        if ((cmd->proc == cmsMergeCommand || cmd->proc == tdigestMergeCommand) && argc > 2 &&
            str_to_ll(argv[2], lens[2], &n) && n > 0) {
            for (int i = 3; i < argc && i - 3 < n; i++) {
                if (!keys_allow(u, argv[i], lens[i], ACL_KEY_READ)) {
                    *errpos = i;
                    return ACL_DENIED_KEY;
                }
            }
        }
    }
    if (!(u->flags & ACL_USER_ALLCHANNELS) && channel_command(cmd)) {
        int first = 0, last = -1;
        bool literal = false;
        if (cmd->proc == publishCommand) {
            first = last = 1;
        } else if (cmd->proc == subscribeCommand || cmd->proc == psubscribeCommand) {
            first = 1;
            last = argc - 1;
            literal = cmd->proc == psubscribeCommand;
        }
        for (int i = first; i <= last && i < argc; i++) {
            if (!chans_allow(u, argv[i], lens[i], literal)) {
                *errpos = i;
                return ACL_DENIED_CHANNEL;
            }
        }
    }
    return ACL_OK;
}

int acl_check(const acl_user *u, const command *cmd, int argc, const char **argv,
              const size_t *lens, int *errpos)
{
    int id = cmd->id;
    if (argc >= 2) {
        const command_sub *s = command_sub_lookup(cmd, argv[1], lens[1]);
        if (s)
            id = s->id;
    }
    int r = check_one(u, id, cmd, argc, argv, lens, errpos);
    /* A selector that allows it all is enough; otherwise the most
     * relevant refusal (channel, then key, then command), as Redis. */
    for (size_t i = 0; r != ACL_OK && i < u->nsels; i++) {
        int pos, e = check_one(u->sels[i], id, cmd, argc, argv, lens, &pos);
        if (e == ACL_OK || e > r) {
            r = e;
            *errpos = pos;
        }
    }
    return r;
}

void acl_command_name(const command *cmd, int argc, const char **argv, const size_t *lens,
                      char *out, size_t outlen)
{
    const command_sub *s = argc >= 2 ? command_sub_lookup(cmd, argv[1], lens[1]) : NULL;
    if (s)
        snprintf(out, outlen, "%s|%s", cmd->name, s->name);
    else
        snprintf(out, outlen, "%s", cmd->name);
}

/* ---- rules written back ---- */

static char *sb_take(strbuf *b)
{
    if (b->failed) {
        free(b->p);
        return NULL;
    }
    if (b->p == NULL)
        return strdup("");
    /* No trailing space. */
    if (b->len && b->p[b->len - 1] == ' ')
        b->p[--b->len] = '\0';
    return b->p;
}

static void count_category(const acl_user *u, unsigned cat, int *on, int *off)
{
    *on = *off = 0;
    for (int id = 0; id < command_ids(); id++) {
        const command_sub *sub;
        const command *cmd = command_by_id(id, &sub);
        if (!((sub ? sub->cats : command_cats(cmd)) & cat))
            continue;
        if (acl_bit(u, id))
            (*on)++;
        else
            (*off)++;
    }
}

/* Redis 7.0's description of a user's commands: +@all or -@all, then,
 * greedily, the category that adds (or removes) the most of the user's
 * commands for the fewest others, until none gains; then the single
 * commands and subcommands still different. */
char *acl_describe_commands(const acl_user *u)
{
    strbuf b = {0};
    acl_user fake, temp;
    memset(&fake, 0, sizeof(fake));
    memcpy(&temp, u, sizeof(temp));
    bool additive = !(u->flags & ACL_USER_ALLCOMMANDS);
    all_set(&fake, !additive);
    strbuf_str(&b, additive ? "-@all " : "+@all ");
    bool applied[ACL_NCATS] = {false};
    for (;;) {
        int best = -1, mindiff = 1 << 30, maxsame = 0;
        for (int c = 0; c < ACL_NCATS; c++) {
            if (applied[c])
                continue;
            int on, off;
            count_category(&temp, 1u << c, &on, &off);
            int diff = additive ? off : on, same = additive ? on : off;
            if (same > diff && (diff < mindiff || (diff == mindiff && same > maxsame))) {
                best = c;
                mindiff = diff;
                maxsame = same;
            }
        }
        if (best < 0)
            break;
        char w[40];
        snprintf(w, sizeof(w), "%c@%s ", additive ? '+' : '-', acl_cat_names[best]);
        strbuf_str(&b, w);
        category_set(&fake, 1u << best, additive);
        category_set(&temp, 1u << best, !additive);
        applied[best] = true;
    }
    for (int id = 0; id < command_ids(); id++) {
        bool want = acl_bit(u, id);
        if (want == acl_bit(&fake, id))
            continue;
        const command_sub *sub;
        const command *cmd = command_by_id(id, &sub);
        char w[96];
        if (sub)
            snprintf(w, sizeof(w), "%c%s|%s ", want ? '+' : '-', cmd->name, sub->name);
        else
            snprintf(w, sizeof(w), "%c%s ", want ? '+' : '-', cmd->name);
        strbuf_str(&b, w);
        /* A whole container set at once: its subcommands follow it. */
        if (sub)
            bit_set(&fake, id, want);
        else
            command_set(&fake, cmd, want);
    }
    return sb_take(&b);
}

static void describe_pats(strbuf *b, const acl_user *u, bool channels)
{
    if (channels) {
        if (u->flags & ACL_USER_ALLCHANNELS) {
            strbuf_str(b, "&* ");
            return;
        }
        for (size_t i = 0; i < u->nchans; i++) {
            strbuf_str(b, "&");
            strbuf_add(b, u->chans[i].pat, u->chans[i].len);
            strbuf_str(b, " ");
        }
        return;
    }
    if (u->flags & ACL_USER_ALLKEYS) {
        strbuf_str(b, "~* ");
        return;
    }
    for (size_t i = 0; i < u->nkeys; i++) {
        unsigned r = u->keys[i].rights;
        strbuf_str(b, r == (ACL_KEY_READ | ACL_KEY_WRITE) ? "~"
                      : r == ACL_KEY_READ                 ? "%R~"
                                                          : "%W~");
        strbuf_add(b, u->keys[i].pat, u->keys[i].len);
        strbuf_str(b, " ");
    }
}

char *acl_describe_patterns(const acl_user *u, bool channels)
{
    strbuf b = {0};
    describe_pats(&b, u, channels);
    return sb_take(&b);
}

/* Keys, channels and commands, as a selector is written. */
static void describe_selector(strbuf *b, const acl_user *u)
{
    describe_pats(b, u, false);
    if (!(u->flags & ACL_USER_ALLCHANNELS))
        strbuf_str(b, "resetchannels ");
    describe_pats(b, u, true);
    char *cmds = acl_describe_commands(u);
    if (cmds)
        strbuf_str(b, cmds);
    else
        b->failed = true;
    free(cmds);
}

static char *describe_user(const acl_user *u)
{
    strbuf b = {0};
    strbuf_str(&b, "user ");
    strbuf_str(&b, u->name);
    strbuf_str(&b, (u->flags & ACL_USER_ON) ? " on " : " off ");
    if (u->flags & ACL_USER_NOPASS)
        strbuf_str(&b, "nopass ");
    if (u->flags & ACL_USER_SKIP_SANITIZE)
        strbuf_str(&b, "skip-sanitize-payload ");
    if (u->flags & ACL_USER_SANITIZE)
        strbuf_str(&b, "sanitize-payload ");
    for (size_t i = 0; i < u->npass; i++) {
        char hex[68];
        hex[0] = '#';
        for (int k = 0; k < 32; k++)
            snprintf(hex + 1 + 2 * k, 3, "%02x", u->pass[i][k]);
        strbuf_str(&b, hex);
        strbuf_str(&b, " ");
    }
    describe_selector(&b, u);
    for (size_t i = 0; i < u->nsels; i++) {
        strbuf_str(&b, " (");
        describe_selector(&b, u->sels[i]);
        strbuf_str(&b, ")");
    }
    return sb_take(&b);
}

char **acl_list(size_t *n)
{
    pthread_rwlock_rdlock(&users_lock);
    char **out = calloc(nusers ? nusers : 1, sizeof(*out));
    *n = 0;
    for (size_t i = 0; out && i < nusers; i++) {
        out[i] = describe_user(users[i]);
        if (out[i])
            (*n)++;
        else
            break;
    }
    pthread_rwlock_unlock(&users_lock);
    return out;
}

char **acl_usernames(size_t *n)
{
    pthread_rwlock_rdlock(&users_lock);
    char **out = calloc(nusers ? nusers : 1, sizeof(*out));
    *n = 0;
    for (size_t i = 0; out && i < nusers; i++) {
        out[i] = strdup(users[i]->name);
        if (out[i])
            (*n)++;
        else
            break;
    }
    pthread_rwlock_unlock(&users_lock);
    return out;
}

/* ---- start-up, requirepass, the aclfile ---- */

/* requirepass is the default user's password, as in Redis: setting it
 * replaces the passwords, "" makes the user nopass. */
static void on_requirepass(const char *pass)
{
    size_t len = strlen(pass);
    char *rule = malloc(len + 2);
    if (rule == NULL)
        return;
    rule[0] = '>';
    memcpy(rule + 1, pass, len);
    const char *rules[2] = {"resetpass", len ? rule : "nopass"};
    size_t lens[2] = {9, len ? len + 1 : 6};
    char err[256];
    if (!acl_setuser("default", 7, 2, rules, lens, err, sizeof(err)))
        server_log(LOG_WARNING, "The default user's password was not updated: %s", err);
    free(rule);
}

/* Why line i is wrong, in Redis's words: an aclfile's "<file>:<n>: <why>. ",
 * a config file's user declaration as its fatal error shows it. */
static void line_error(char *err, size_t errlen, const char *file, int lineno, const char *line,
                       const char *user, size_t ulen, const char *why)
{
    if (file)
        snprintf(err, errlen,
                 "%s:%d%s%s. WARNING: ACL errors detected, no change to the previously active "
                 "ACL rules was performed",
                 file, lineno, why[0] == ' ' ? "" : ": ", why);
    else
        snprintf(err, errlen,
                 "Reading the configuration file, at line %d\n>>> '%s'\nError in user "
                 "declaration '%.*s': %s",
                 lineno, line, (int)ulen, user, why);
}

/* CONFIG SET requirepass, once stored. */
static bool requirepass_set(const char *const *names, int n, char *err, size_t errlen)
{
    (void)names;
    (void)n;
    (void)err;
    (void)errlen;
    char *pass = config_get_str("requirepass");
    if (pass)
        on_requirepass(pass);
    free(pass);
    return true;
}

/* Users from lines "user <name> <rules...>", all or none: the registry is
 * replaced only when every line is good. file names an aclfile for errors;
 * NULL for the config file's lines. */
static bool load_lines(char **lines, const int *linenos, size_t n, const char *file, char *err,
                       size_t errlen)
{
    acl_user **fresh = calloc(n + 1, sizeof(*fresh));
    size_t nfresh = 0;
    bool ok = fresh != NULL;
    if (!ok)
        snprintf(err, errlen, "out of memory");
    resp_parser p;
    resp_parser_init(&p);
    for (size_t i = 0; ok && i < n; i++) {
        char *line = lines[i];
        size_t len = strlen(line);
        if (!resp_split_line(&p, line, len) || p.argc < 2 ||
            !str_eq_ci(line + p.argv[0].off, p.argv[0].len, "user")) {
            line_error(err, errlen, file, linenos[i], line, "", 0,
                       file ? " should start with user keyword followed by the username"
                            : "Syntax error");
            ok = false;
            break;
        }
        const char *name = line + p.argv[1].off;
        size_t nlen = p.argv[1].len;
        if (!valid_username(name, nlen)) {
            line_error(err, errlen, file, linenos[i], line, name, nlen,
                       "Usernames can't contain spaces or null characters");
            ok = false;
            break;
        }
        for (size_t k = 0; ok && k < nfresh; k++) {
            if (strlen(fresh[k]->name) == nlen && memcmp(fresh[k]->name, name, nlen) == 0) {
                char why[300];
                if (file)
                    snprintf(why, sizeof(why), "Duplicate user '%.*s' found", (int)nlen, name);
                else
                    snprintf(why, sizeof(why),
                             "Duplicate user found. A user can only be defined once in config "
                             "files");
                line_error(err, errlen, file, linenos[i], line, name, nlen, why);
                ok = false;
            }
        }
        if (!ok)
            break;
        acl_user *u = user_new(name, nlen);
        if (u == NULL) {
            snprintf(err, errlen, "out of memory");
            ok = false;
            break;
        }
        fresh[nfresh++] = u;
        int nr = (int)p.argc - 2, n = 0;
        const char **rv = calloc((size_t)nr + 1, sizeof(*rv));
        size_t *rl = calloc((size_t)nr + 1, sizeof(*rl)), *ml = NULL;
        for (int a = 0; rv && rl && a < nr; a++) {
            rv[a] = line + p.argv[a + 2].off;
            rl[a] = p.argv[a + 2].len;
        }
        char why[512];
        char **merged = rv && rl ? merge_selectors(nr, rv, rl, &n, &ml, why, sizeof(why)) : NULL;
        if (merged == NULL) {
            /* Without "ERR ": the message as the file's error shows it. */
            line_error(err, errlen, file, linenos[i], line, name, nlen,
                       rv && rl ? why + 4 : "Out of memory");
            ok = false;
        }
        for (int a = 0; ok && a < n; a++) {
            int e = apply_rule(u, merged[a], ml[a]);
            if (e != RULE_OK) {
                line_error(err, errlen, file, linenos[i], line, name, nlen, rule_error(e));
                ok = false;
            }
        }
        for (int a = 0; merged && a < n; a++)
            free(merged[a]);
        free(merged);
        free(ml);
        free(rv);
        free(rl);
    }
    resp_parser_free(&p);
    if (ok) {
        pthread_rwlock_wrlock(&users_lock);
        /* The default user stays, as in Redis: as the lines say, or as it
         * was if they leave it out. */
        bool has_default = false;
        for (size_t k = 0; k < nfresh; k++)
            has_default |= strcmp(fresh[k]->name, "default") == 0;
        acl_user *keep = NULL;
        ssize_t d = find_locked("default", 7);
        if (!has_default && d >= 0)
            keep = acl_user_ref(users[d]);
        for (size_t i = 0; i < nusers; i++)
            acl_user_put(users[i]);
        nusers = 0;
        if (keep)
            publish_locked(keep);
        for (size_t k = 0; k < nfresh; k++)
            publish_locked(fresh[k]);
        pthread_rwlock_unlock(&users_lock);
    } else {
        for (size_t k = 0; k < nfresh; k++)
            user_free(fresh[k]);
    }
    free(fresh);
    return ok;
}

static bool read_lines(const char *path, char ***lines, int **linenos, size_t *n, char *err,
                       size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        snprintf(err, errlen, "Error loading ACLs, opening file '%s': %s", path, strerror(errno));
        return false;
    }
    char *line = NULL;
    size_t cap = 0, ncap = 0;
    ssize_t r;
    int lineno = 0;
    bool ok = true;
    *lines = NULL;
    *linenos = NULL;
    *n = 0;
    while ((r = getline(&line, &cap, f)) >= 0) {
        lineno++;
        size_t len = (size_t)r;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' '))
            len--;
        size_t i = 0;
        while (i < len && (line[i] == ' ' || line[i] == '\t'))
            i++;
        if (i == len)
            continue;
        if (*n == ncap) {
            ncap = ncap ? ncap * 2 : 16;
            char **l = realloc(*lines, ncap * sizeof(*l));
            int *ln = l ? realloc(*linenos, ncap * sizeof(*ln)) : NULL;
            if (l)
                *lines = l;
            if (ln)
                *linenos = ln;
            if (l == NULL || ln == NULL) {
                ok = false;
                break;
            }
        }
        (*lines)[*n] = mem_dup(line + i, len - i);
        (*linenos)[*n] = lineno;
        if ((*lines)[*n] == NULL) {
            ok = false;
            break;
        }
        (*n)++;
    }
    free(line);
    fclose(f);
    if (!ok)
        snprintf(err, errlen, "out of memory");
    return ok;
}

static void free_lines(char **lines, int *linenos, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
    free(linenos);
}

bool acl_load_file(const char *path, char *err, size_t errlen)
{
    char **lines;
    int *linenos;
    size_t n;
    if (!read_lines(path, &lines, &linenos, &n, err, errlen))
        return false;
    bool ok = load_lines(lines, linenos, n, path, err, errlen);
    free_lines(lines, linenos, n);
    return ok;
}

bool acl_save_file(const char *path, char *err, size_t errlen)
{
    size_t n;
    char **l = acl_list(&n);
    if (l == NULL) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    strbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        strbuf_str(&b, l[i]);
        strbuf_str(&b, "\n");
        free(l[i]);
    }
    free(l);
    if (b.failed) {
        free(b.p);
        snprintf(err, errlen, "out of memory");
        return false;
    }
    bool ok = config_write_file(path, b.p ? b.p : "", b.len, err, errlen);
    free(b.p);
    return ok;
}

/* CONFIG REWRITE's user lines, when no aclfile keeps them. */
static char *rewrite_lines(void)
{
    char *aclfile = config_get_str("aclfile");
    bool has_file = aclfile && aclfile[0];
    free(aclfile);
    if (has_file)
        return NULL;
    size_t n;
    char **l = acl_list(&n);
    if (l == NULL)
        return NULL;
    strbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        strbuf_str(&b, l[i]);
        strbuf_str(&b, "\n");
        free(l[i]);
    }
    free(l);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    return b.p ? b.p : strdup("");
}

bool acl_init(char *err, size_t errlen)
{
    acl_user *d = user_new("default", 7);
    if (d == NULL) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    d->flags = ACL_USER_ON | ACL_USER_NOPASS | ACL_USER_ALLKEYS | ACL_USER_ALLCHANNELS |
               ACL_USER_ALLCOMMANDS;
    all_set(d, true);
    pthread_rwlock_wrlock(&users_lock);
    publish_locked(d);
    pthread_rwlock_unlock(&users_lock);
    char *pass = config_get_str("requirepass");
    if (pass && pass[0])
        on_requirepass(pass);
    free(pass);
    config_on_set("requirepass", requirepass_set);
    config_on_rewrite_users(rewrite_lines);

    size_t nlines;
    const int *nos;
    char **lines = config_user_lines(&nlines, &nos);
    char *aclfile = config_get_str("aclfile");
    bool ok = true;
    if (aclfile && aclfile[0] && nlines) {
        snprintf(err, errlen,
                 "Configuring Redis with users defined in redis.conf and at the same setting an "
                 "ACL file path is invalid. This setup is very likely to lead to configuration "
                 "errors and security holes, please define either an ACL file or declare users "
                 "directly in your redis.conf, but not both.");
        ok = false;
    } else if (aclfile && aclfile[0]) {
        ok = acl_load_file(aclfile, err, errlen);
    } else if (nlines) {
        ok = load_lines(lines, nos, nlines, NULL, err, errlen);
    }
    free(aclfile);
    return ok;
}

void acl_free(void)
{
    pthread_rwlock_wrlock(&users_lock);
    for (size_t i = 0; i < nusers; i++)
        acl_user_put(users[i]);
    free(users);
    users = NULL;
    nusers = capusers = 0;
    pthread_rwlock_unlock(&users_lock);
    acl_log_reset();
}

/* ---- ACL LOG ---- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static acl_log_entry *alog; /* newest first */
static size_t nlog;

static void entry_free(acl_log_entry *e)
{
    free(e->object);
    free(e->username);
    free(e->client_info);
}

void acl_log_add(int reason, int context, const char *object, size_t olen, const char *user,
                 size_t ulen, const char *client_info)
{
    size_t max = (size_t)atomic_load_explicit(&cfg.acllog_max_len, memory_order_relaxed);
    int64_t now = now_ms();
    pthread_mutex_lock(&log_lock);
    /* As Redis: the same denial again within a minute counts in its entry. */
    for (size_t i = 0; i < nlog; i++) {
        acl_log_entry *e = &alog[i];
        if (e->reason == reason && e->context == context && strlen(e->object) == olen &&
            memcmp(e->object, object, olen) == 0 && strlen(e->username) == ulen &&
            memcmp(e->username, user, ulen) == 0 && now - e->updated_ms < 60000) {
            char *ci = strdup(client_info);
            if (ci) {
                free(e->client_info);
                e->client_info = ci;
            }
            e->count++;
            e->updated_ms = now;
            acl_log_entry moved = *e;
            memmove(&alog[1], &alog[0], i * sizeof(*alog));
            alog[0] = moved;
            pthread_mutex_unlock(&log_lock);
            return;
        }
    }
    acl_log_entry e = {
        1,   reason, context, mem_dup(object, olen), mem_dup(user, ulen), strdup(client_info),
        now, now};
    acl_log_entry *a = realloc(alog, (nlog + 1) * sizeof(*a));
    if (a == NULL || !e.object || !e.username || !e.client_info) {
        if (a)
            alog = a;
        entry_free(&e);
        pthread_mutex_unlock(&log_lock);
        return;
    }
    alog = a;
    memmove(&alog[1], &alog[0], nlog * sizeof(*alog));
    alog[0] = e;
    nlog++;
    while (nlog > max)
        entry_free(&alog[--nlog]);
    pthread_mutex_unlock(&log_lock);
}

acl_log_entry *acl_log_entries(size_t n, size_t *got)
{
    pthread_mutex_lock(&log_lock);
    size_t k = n < nlog ? n : nlog;
    acl_log_entry *out = calloc(k ? k : 1, sizeof(*out));
    *got = 0;
    for (size_t i = 0; out && i < k; i++) {
        out[i] = alog[i];
        out[i].object = strdup(alog[i].object);
        out[i].username = strdup(alog[i].username);
        out[i].client_info = strdup(alog[i].client_info);
        (*got)++;
        if (!out[i].object || !out[i].username || !out[i].client_info)
            break;
    }
    pthread_mutex_unlock(&log_lock);
    return out;
}

void acl_log_entries_free(acl_log_entry *e, size_t n)
{
    for (size_t i = 0; e && i < n; i++)
        entry_free(&e[i]);
    free(e);
}

void acl_log_reset(void)
{
    pthread_mutex_lock(&log_lock);
    for (size_t i = 0; i < nlog; i++)
        entry_free(&alog[i]);
    free(alog);
    alog = NULL;
    nlog = 0;
    pthread_mutex_unlock(&log_lock);
}

/* ACL users, as Redis 7.0 has them: who may run which commands on which
 * keys and channels.
 *
 * A user is an immutable snapshot: ACL SETUSER builds a new one from a copy
 * of the old, with every rule applied or none, and swaps it into the
 * registry; acl_version then moves on. A client holds a reference to its
 * user's snapshot and looks its user up again (by name) when the version
 * moved, so checking a command is one bit test on memory no other thread
 * writes, and a key pattern match only for users without allkeys.
 *
 * Commands and their subcommands (CONFIG GET, CLIENT LIST ...) share one
 * id space (server.h: command ids, then subcommand ids), so "+config|get"
 * and "+@admin" are both bits of the same map.
 */
#ifndef BLOOMERYD_ACL_H
#define BLOOMERYD_ACL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd.h"

#define ACL_MAX_IDS 512
#define ACL_WORDS (ACL_MAX_IDS / 64)

enum {
    ACL_USER_ON = 1u << 0,
    ACL_USER_NOPASS = 1u << 1,
    ACL_USER_ALLKEYS = 1u << 2,
    ACL_USER_ALLCHANNELS = 1u << 3,
    ACL_USER_ALLCOMMANDS = 1u << 4, /* +@all: commands added later too */
    ACL_USER_SANITIZE = 1u << 5,
    ACL_USER_SKIP_SANITIZE = 1u << 6,
};

/* A key pattern's rights: ~ is both, %R~ read, %W~ write. */
enum { ACL_KEY_READ = 1u << 0, ACL_KEY_WRITE = 1u << 1 };

typedef struct acl_pattern {
    char *pat;
    size_t len;
    unsigned rights; /* ACL_KEY_*; channels: both */
} acl_pattern;

typedef struct acl_user {
    _Atomic long refs;
    char *name;
    unsigned flags;
    unsigned char (*pass)[32]; /* SHA-256 of each password */
    size_t npass;
    uint64_t allowed[ACL_WORDS]; /* by command or subcommand id */
    /* Commands allowed whatever their arguments: no subcommands, and no
     * keys or channels the user's patterns must be matched against. */
    uint64_t fast[ACL_WORDS];
    acl_pattern *keys;
    size_t nkeys;
    acl_pattern *chans;
    size_t nchans;
    /* Selectors "(...)": more sets of commands, keys and channels, each
     * tried when the user's own refuses (their name, passwords unused). */
    struct acl_user **sels;
    size_t nsels;
} acl_user;

/* Moves on whenever any user changes; clients compare it to theirs. */
extern _Atomic uint64_t acl_version;

static inline bool acl_bit(const acl_user *u, int id)
{
    return (u->allowed[id >> 6] >> (id & 63)) & 1;
}

static inline bool acl_fast(const acl_user *u, int id)
{
    return (u->fast[id >> 6] >> (id & 63)) & 1;
}

/* Why a command is refused. */
enum { ACL_OK, ACL_DENIED_CMD, ACL_DENIED_KEY, ACL_DENIED_CHANNEL, ACL_DENIED_AUTH };

/* Start-up, after commands_init and the settings: the default user from
 * requirepass, then the config file's user lines or the aclfile. False,
 * with the reason in err, when a user line or the aclfile is wrong. */
bool acl_init(char *err, size_t errlen);
void acl_free(void);

/* The user of that name with a reference taken, or NULL. */
acl_user *acl_user_get(const char *name, size_t len);
acl_user *acl_user_ref(acl_user *u);
void acl_user_put(acl_user *u);
/* Whether pass opens the user (on, and nopass or one of its passwords). */
bool acl_user_check_password(const acl_user *u, const char *pass, size_t len);
/* Whether new connections start authenticated as default. */
bool acl_default_nopass(void);

/* The check of a command with its arguments; *errpos is the argument
 * refused (key or channel) or 0. The command's id for the bit test is
 * cmd's or its subcommand's. */
int acl_check(const acl_user *u, const command *cmd, int argc, const char **argv,
              const size_t *lens, int *errpos);
/* The command's name as ACL errors give it ("config|get"). */
void acl_command_name(const command *cmd, int argc, const char **argv, const size_t *lens,
                      char *out, size_t outlen);

/* Rules (ACL SETUSER): applied to the user of that name (created off,
 * without rights, if missing) all or none. On failure err holds Redis's
 * full error. */
bool acl_setuser(const char *name, size_t nlen, int nrules, const char *const *rules,
                 const size_t *lens, char *err, size_t errlen);
/* 1 deleted, 0 none of that name, -1 the default user. */
int acl_deluser(const char *name, size_t nlen);
/* "user <name> <rules>" lines, one per user (ACL LIST, ACL SAVE, CONFIG
 * REWRITE). Caller frees each string and the array. */
char **acl_list(size_t *n);
char **acl_usernames(size_t *n);
/* The rules of a user as ACL GETUSER gives them. */
char *acl_describe_commands(const acl_user *u);
char *acl_describe_patterns(const acl_user *u, bool channels);

/* The aclfile: loaded all or nothing, saved atomically. */
bool acl_load_file(const char *path, char *err, size_t errlen);
bool acl_save_file(const char *path, char *err, size_t errlen);

/* ACL LOG. */
typedef struct acl_log_entry {
    long long count;
    int reason;  /* ACL_DENIED_* */
    int context; /* 0 toplevel, 1 multi */
    char *object, *username, *client_info;
    int64_t created_ms, updated_ms;
} acl_log_entry;
void acl_log_add(int reason, int context, const char *object, size_t olen, const char *user,
                 size_t ulen, const char *client_info);
/* Copies of the newest n entries (newest first); caller frees with
 * acl_log_entries_free. */
acl_log_entry *acl_log_entries(size_t n, size_t *got);
void acl_log_entries_free(acl_log_entry *e, size_t n);
void acl_log_reset(void);

/* Password hashing: SHA-256 (OpenSSL's libcrypto). */
void acl_sha256(const char *s, size_t len, unsigned char out[32]);

#endif

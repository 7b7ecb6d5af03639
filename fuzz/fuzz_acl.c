// fuzz-sources: src/server/net/acl.c src/server/base/util.c src/server/base/resp.c
// fuzz-sources: src/web/glob.c -Isrc/web
// fuzz-sources: -Isrc/server/net -Isrc/server/cmd -Isrc/server/base -Isrc/server/data
// fuzz-sources: -Isrc/server/repl -Isrc/server/tls -Isrc/persist -lcrypto
/* Fuzz target: ACL rules and aclfiles, as ACL SETUSER and ACL LOAD take
 * them from a client. The input's first line is a user name and every
 * other line a rule for ACL SETUSER; the same bytes are then loaded as an
 * aclfile. After each step the users are listed (ACL LIST, GETUSER's
 * descriptions) and a command is checked against each, with keys and
 * channels from the input. No input may crash, leak or hang; a refused
 * rule or file must leave the users as they were.
 *
 * The command table here is a small stand-in for bloomeryd's (the real
 * one brings every handler with it): commands with and without
 * subcommands, keys and channels, in the categories the rules name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acl.h"
#include "config.h"
#include "log.h"
#include "server.h"
#include "util.h"

server_config cfg;

bool publishCommand(cmd_ctx *c) { return c != NULL; }
bool subscribeCommand(cmd_ctx *c) { return c != NULL; }
bool psubscribeCommand(cmd_ctx *c) { return c != NULL; }
bool cmsMergeCommand(cmd_ctx *c) { return c != NULL; }
bool tdigestMergeCommand(cmd_ctx *c) { return c != NULL; }
static bool other(cmd_ctx *c) { return c != NULL; }

static const command table[] = {
    {"bf.add", other, 3, CMD_WRITE | CMD_DENYOOM | CMD_FAST, 1, 1, 1, "bf", 0, true, NULL},
    {"bf.exists", other, 3, CMD_READONLY | CMD_FAST, 1, 1, 1, "bf", 1, true, NULL},
    {"cms.merge", cmsMergeCommand, -4, CMD_WRITE | CMD_DENYOOM, 1, 1, 1, "cms", 2, true, NULL},
    {"tdigest.merge", tdigestMergeCommand, -4, CMD_WRITE, 1, 1, 1, "tdigest", 3, true, NULL},
    {"publish", publishCommand, 3, CMD_PUBSUB | CMD_FAST, 0, 0, 0, "pubsub", 4, false, NULL},
    {"subscribe", subscribeCommand, -2, CMD_PUBSUB, 0, 0, 0, "pubsub", 5, false, NULL},
    {"psubscribe", psubscribeCommand, -2, CMD_PUBSUB, 0, 0, 0, "pubsub", 6, false, NULL},
    {"config", other, -2, CMD_ADMIN, 0, 0, 0, "server", 7, false, NULL},
    {"ping", other, -1, CMD_FAST, 0, 0, 0, "connection", 8, false, NULL},
    {"flushall", other, -1, CMD_WRITE, 0, 0, 0, "server", 9, true, NULL},
};
#define NCMD ((int)(sizeof(table) / sizeof(table[0])))
static const unsigned cats[NCMD] = {
    CAT_WRITE | CAT_FAST | (1u << 21),
    CAT_READ | CAT_FAST | (1u << 21),
    CAT_WRITE | CAT_SLOW | (1u << 23),
    CAT_WRITE | CAT_SLOW | (1u << 25),
    CAT_PUBSUB | CAT_FAST,
    CAT_PUBSUB | CAT_SLOW,
    CAT_PUBSUB | CAT_SLOW,
    CAT_SLOW,
    CAT_FAST | CAT_CONNECTION,
    CAT_KEYSPACE | CAT_WRITE | CAT_SLOW | CAT_DANGEROUS,
};
static const command_sub subs[] = {
    {"get", NCMD, CAT_ADMIN | CAT_SLOW | CAT_DANGEROUS, &table[7]},
    {"set", NCMD + 1, CAT_ADMIN | CAT_SLOW | CAT_DANGEROUS, &table[7]},
};

const char *const acl_cat_names[ACL_NCATS] = {ACL_CAT_NAMES};

unsigned acl_cat_by_name(const char *s, size_t len)
{
    for (int i = 0; i < ACL_NCATS; i++)
        if (str_eq_ci(s, len, acl_cat_names[i]))
            return 1u << i;
    return 0;
}

size_t commands_count(void) { return NCMD; }
const command *command_at(size_t i) { return &table[i]; }
int command_ids(void) { return NCMD + 2; }
unsigned command_cats(const command *cmd) { return cats[cmd - table]; }

const command *command_lookup(const char *name, size_t len)
{
    for (int i = 0; i < NCMD; i++)
        if (str_eq_ci(name, len, table[i].name))
            return &table[i];
    return NULL;
}

const command_sub *command_subs(const command *cmd, int *n)
{
    *n = cmd == &table[7] ? 2 : 0;
    return *n ? subs : NULL;
}

const command_sub *command_sub_lookup(const command *cmd, const char *name, size_t len)
{
    if (cmd != &table[7])
        return NULL;
    for (int i = 0; i < 2; i++)
        if (str_eq_ci(name, len, subs[i].name))
            return &subs[i];
    return NULL;
}

const command *command_by_id(int id, const command_sub **sub)
{
    *sub = NULL;
    if (id < NCMD)
        return &table[id];
    *sub = &subs[id - NCMD];
    return &table[7];
}

/* ---- the settings acl.c reads ---- */

static char aclfile[64];

char *config_get_str(const char *name)
{
    return strdup(strcmp(name, "aclfile") == 0 ? aclfile : "");
}

void config_on_set(const char *prefix, config_apply_fn fn) { (void)prefix, (void)fn; }
void config_on_rewrite_users(char *(*fn)(void)) { (void)fn; }

char **config_user_lines(size_t *n, const int **linenos)
{
    *n = 0;
    *linenos = NULL;
    return NULL;
}

bool config_write_file(const char *path, const char *data, size_t len, char *err, size_t errlen)
{
    (void)path, (void)data, (void)len;
    snprintf(err, errlen, "not written");
    return false;
}

void server_log(int level, const char *fmt, ...) { (void)level, (void)fmt; }

/* ---- the run ---- */

/* ACL LIST as one string, to compare the users before and after. */
static char *listing(void)
{
    size_t n, len = 0;
    char **lines = acl_list(&n);
    for (size_t i = 0; i < n; i++)
        len += strlen(lines[i]) + 1;
    char *all = malloc(len + 1), *q = all;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(lines[i]);
        memcpy(q, lines[i], l);
        q[l] = '\n';
        q += l + 1;
        free(lines[i]);
    }
    *q = '\0';
    free(lines);
    return all;
}

/* A refusal changes nothing. */
static void unchanged_unless(bool ok, char *before)
{
    char *after = listing();
    if (!ok && strcmp(before, after) != 0)
        abort();
    free(after);
    free(before);
}

static void list_and_check(const char *argv[], const size_t *lens, int argc)
{
    size_t n;
    char **lines = acl_list(&n);
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
    char **names = acl_usernames(&n);
    for (size_t i = 0; i < n; i++) {
        acl_user *u = acl_user_get(names[i], strlen(names[i]));
        if (u) {
            free(acl_describe_commands(u));
            free(acl_describe_patterns(u, false));
            free(acl_describe_patterns(u, true));
            for (int c = 0; c < NCMD && argc > 0; c++) {
                int errpos;
                acl_check(u, &table[c], argc, argv, lens, &errpos);
            }
            acl_user_put(u);
        }
        free(names[i]);
    }
    free(names);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    if (!ready) {
        char err[256];
        snprintf(aclfile, sizeof(aclfile), "/tmp/fuzz_acl.%d", (int)getpid());
        acl_init(err, sizeof(err));
        ready = true;
    }
    if (size > 4096)
        return 0;
    /* Lines: the first a user name, then rules (at most 64). */
    const char *rules[64];
    size_t lens[64];
    int nrules = 0;
    const char *p = (const char *)data, *end = p + size;
    const char *name = p;
    size_t nlen = 0;
    bool first = true;
    while (p <= end && nrules < 64) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        if (first) {
            name = p;
            nlen = (size_t)(e - p);
            first = false;
        } else {
            rules[nrules] = p;
            lens[nrules++] = (size_t)(e - p);
        }
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    char err[512];
    if (nlen > 0) {
        char *before = listing();
        unchanged_unless(acl_setuser(name, nlen, nrules, rules, lens, err, sizeof(err)), before);
    }
    /* A command's arguments from the same lines: keys, channels, a
     * subcommand's name. */
    const char *argv[8] = {"cmd"};
    size_t alens[8] = {3};
    int argc = 1;
    for (int i = 0; i < nrules && argc < 8; i++, argc++) {
        argv[argc] = rules[i];
        alens[argc] = lens[i];
    }
    list_and_check(argv, alens, argc);

    FILE *f = fopen(aclfile, "w");
    if (f) {
        fwrite(data, 1, size, f);
        fclose(f);
        char *before = listing();
        unchanged_unless(acl_load_file(aclfile, err, sizeof(err)), before);
        list_and_check(argv, alens, argc);
        unlink(aclfile);
    }
    /* Back to the default user alone, so runs do not pile users up. */
    char **names;
    size_t n;
    names = acl_usernames(&n);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(names[i], "default") != 0)
            acl_deluser(names[i], strlen(names[i]));
        free(names[i]);
    }
    free(names);
    return 0;
}

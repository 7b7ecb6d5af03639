/* ACL on connections: the permission gate's slow path, AUTH's user
 * switch, and the ACL command (SETUSER, GETUSER, DELUSER, USERS, LIST,
 * WHOAMI, CAT, LOG, SAVE, LOAD, GENPASS, DRYRUN, HELP), with Redis 7.0's
 * replies and errors. The model (users, rules) is acl.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "acl.h"
#include "server.h"
#include "util.h"

/* ---- the client's user ---- */

void client_set_user(client *c, acl_user *u, uint64_t ver)
{
    pthread_mutex_lock(&clients_lock);
    acl_user *old = c->user;
    c->user = u;
    pthread_mutex_unlock(&clients_lock);
    c->acl_ver = ver;
    acl_user_put(old);
}

/* Its user again after a change; false (and the client closed) when the
 * user is gone, as Redis disconnects the clients of a deleted user. */
static bool refresh(client *c)
{
    uint64_t ver = atomic_load_explicit(&acl_version, memory_order_acquire);
    acl_user *u = acl_user_get(c->user->name, strlen(c->user->name));
    if (u == NULL) {
        client_close(c);
        return false;
    }
    client_set_user(c, u, ver);
    return true;
}

static void log_denial(client *c, int reason, int context, const char *object, size_t olen)
{
    char info[1024];
    pthread_mutex_lock(&clients_lock);
    client_info_line(c, info, sizeof(info));
    const char *name = c->user->name;
    pthread_mutex_unlock(&clients_lock);
    acl_log_add(reason, context, object, olen, name, strlen(name), info);
}

bool acl_gate_slow(client *c, const command *cmd, int mode)
{
    if (c->acl_ver != atomic_load_explicit(&acl_version, memory_order_acquire) && !refresh(c))
        return false;
    if (acl_fast(c->user, cmd->id))
        return true;
    int pos;
    int r = acl_check(c->user, cmd, c->cx.argc, c->cx.argv, c->cx.argvlen, &pos);
    if (r == ACL_OK || mode == ACL_GATE_QUIET)
        return r == ACL_OK;
    char name[160];
    acl_command_name(cmd, c->cx.argc, c->cx.argv, c->cx.argvlen, name, sizeof(name));
    int context = (mode == ACL_GATE_EXEC || client_in_multi(c)) ? 1 : 0;
    if (r == ACL_DENIED_CMD)
        log_denial(c, r, context, name, strlen(name));
    else
        log_denial(c, r, context, c->cx.argv[pos], c->cx.argvlen[pos]);
    if (mode == ACL_GATE_EXEC) {
        reply_errorf(&c->cx.out,
                     "NOPERM ACLs rules changed between the moment the transaction was "
                     "accumulated and the EXEC call. This command is no longer allowed for the "
                     "following reason: %s",
                     r == ACL_DENIED_CMD   ? "no permission to execute the command or subcommand"
                     : r == ACL_DENIED_KEY ? "no permission to touch the specified keys"
                                           : "no permission to access one of the channels used "
                                             "as arguments");
    } else if (r == ACL_DENIED_CMD) {
        reply_errorf(&c->cx.out, "NOPERM this user has no permissions to run the '%s' command",
                     name);
    } else if (r == ACL_DENIED_KEY) {
        reply_error(&c->cx.out,
                    "NOPERM this user has no permissions to access one of the keys used as "
                    "arguments");
    } else {
        reply_error(&c->cx.out, "NOPERM this user has no permissions to access one of the "
                                "channels used as arguments");
    }
    return false;
}

static const char wrongpass[] = "WRONGPASS invalid username-password pair or user is disabled.";

bool acl_authenticate(cmd_ctx *x, const char *user, size_t ulen, const char *pass, size_t plen)
{
    client *c = client_of(x);
    uint64_t ver = atomic_load_explicit(&acl_version, memory_order_acquire);
    acl_user *u = acl_user_get(user, ulen);
    if (u == NULL || !acl_user_check_password(u, pass, plen)) {
        acl_user_put(u);
        char info[1024];
        pthread_mutex_lock(&clients_lock);
        client_info_line(c, info, sizeof(info));
        pthread_mutex_unlock(&clients_lock);
        /* The object is the command as the client spelled it (AUTH,
         * hello ...), as Redis logs it. */
        acl_log_add(ACL_DENIED_AUTH, client_in_multi(c) ? 1 : 0, x->argv[0], x->argvlen[0], user,
                    ulen, info);
        reply_error(&x->out, wrongpass);
        return false;
    }
    client_set_user(c, u, ver);
    c->authenticated = true;
    return true;
}

/* ---- ACL ---- */

/* commands, keys, channels: the user's own or a selector's. */
static void reply_selector(reply *r, const acl_user *u)
{
    char *cmds = acl_describe_commands(u), *keys = acl_describe_patterns(u, false),
         *chans = acl_describe_patterns(u, true);
    reply_bulk_str(r, "commands");
    reply_bulk_str(r, cmds ? cmds : "");
    reply_bulk_str(r, "keys");
    reply_bulk_str(r, keys ? keys : "");
    reply_bulk_str(r, "channels");
    reply_bulk_str(r, chans ? chans : "");
    free(cmds);
    free(keys);
    free(chans);
}

static void reply_user(reply *r, const acl_user *u)
{
    reply_map(r, 6);
    reply_bulk_str(r, "flags");
    const char *flags[4];
    int n = 0;
    flags[n++] = (u->flags & ACL_USER_ON) ? "on" : "off";
    if (u->flags & ACL_USER_NOPASS)
        flags[n++] = "nopass";
    if (u->flags & ACL_USER_SKIP_SANITIZE)
        flags[n++] = "skip-sanitize-payload";
    if (u->flags & ACL_USER_SANITIZE)
        flags[n++] = "sanitize-payload";
    reply_set(r, n);
    for (int i = 0; i < n; i++)
        reply_bulk_str(r, flags[i]);
    reply_bulk_str(r, "passwords");
    reply_array(r, (long long)u->npass);
    for (size_t i = 0; i < u->npass; i++) {
        char hex[65];
        for (int k = 0; k < 32; k++)
            snprintf(hex + 2 * k, 3, "%02x", u->pass[i][k]);
        reply_bulk_str(r, hex);
    }
    reply_selector(r, u);
    reply_bulk_str(r, "selectors");
    reply_array(r, (long long)u->nsels);
    for (size_t i = 0; i < u->nsels; i++) {
        reply_map(r, 3);
        reply_selector(r, u->sels[i]);
    }
}

static void reply_strings(reply *r, char **l, size_t n)
{
    reply_array(r, (long long)n);
    for (size_t i = 0; i < n; i++) {
        reply_bulk_str(r, l[i]);
        free(l[i]);
    }
    free(l);
}

static bool match_user(client *o, const void *arg)
{
    return o->user && strcmp(o->user->name, (const char *)arg) == 0;
}

/* Clients of users no longer there (DELUSER, LOAD) are disconnected, as
 * in Redis. */
static void kill_orphans(client *self, const char *only)
{
    pthread_mutex_lock(&clients_lock);
    for (client *o = all_clients; o; o = o->gnext) {
        if (o->user == NULL)
            continue;
        bool gone;
        if (only) {
            gone = match_user(o, only);
        } else {
            acl_user *u = acl_user_get(o->user->name, strlen(o->user->name));
            gone = u == NULL;
            acl_user_put(u);
        }
        if (!gone)
            continue;
        if (o == self) {
            self->close_after_reply = true;
            continue;
        }
        atomic_store(&o->kill, true);
        uv_async_send(&o->w->wake);
    }
    pthread_mutex_unlock(&clients_lock);
}

static const char *const reasons[] = {"", "command", "key", "channel", "auth"};

static bool acl_log(cmd_ctx *c)
{
    long long count = 10;
    if (c->argc == 3) {
        if (arg_eq(c, 2, "reset")) {
            acl_log_reset();
            reply_ok(&c->out);
            return true;
        }
        if (!str_to_ll(c->argv[2], c->argvlen[2], &count)) {
            reply_error(&c->out, "ERR value is not an integer or out of range");
            return false;
        }
        if (count < 0)
            count = 0;
    }
    size_t n;
    acl_log_entry *e = acl_log_entries((size_t)count, &n);
    int64_t now = now_ms();
    reply_array(&c->out, (long long)n);
    for (size_t i = 0; i < n; i++) {
        reply_map(&c->out, 7);
        reply_bulk_str(&c->out, "count");
        reply_int(&c->out, e[i].count);
        reply_bulk_str(&c->out, "reason");
        reply_bulk_str(&c->out, reasons[e[i].reason]);
        reply_bulk_str(&c->out, "context");
        reply_bulk_str(&c->out, e[i].context ? "multi" : "toplevel");
        reply_bulk_str(&c->out, "object");
        reply_bulk_str(&c->out, e[i].object);
        reply_bulk_str(&c->out, "username");
        reply_bulk_str(&c->out, e[i].username);
        reply_bulk_str(&c->out, "age-seconds");
        reply_double(&c->out, (double)(now - e[i].created_ms) / 1000.0);
        reply_bulk_str(&c->out, "client-info");
        reply_bulk_str(&c->out, e[i].client_info);
    }
    acl_log_entries_free(e, n);
    return true;
}

static bool acl_cat(cmd_ctx *c)
{
    if (c->argc == 2) {
        reply_array(&c->out, ACL_NCATS);
        for (int i = 0; i < ACL_NCATS; i++)
            reply_bulk_str(&c->out, acl_cat_names[i]);
        return true;
    }
    unsigned cat = acl_cat_by_name(c->argv[2], c->argvlen[2]);
    if (cat == 0) {
        reply_errorf(&c->out, "ERR Unknown category '%.*s'",
                     (int)(c->argvlen[2] < 128 ? c->argvlen[2] : 128), c->argv[2]);
        return false;
    }
    size_t slot = reply_defer_len(&c->out);
    long long n = 0;
    for (int id = 0; id < command_ids(); id++) {
        const command_sub *sub;
        const command *cmd = command_by_id(id, &sub);
        if (!((sub ? sub->cats : command_cats(cmd)) & cat))
            continue;
        char name[96];
        if (sub)
            snprintf(name, sizeof(name), "%s|%s", cmd->name, sub->name);
        else
            snprintf(name, sizeof(name), "%s", cmd->name);
        reply_bulk_str(&c->out, name);
        n++;
    }
    reply_set_array_len(&c->out, slot, n);
    return true;
}

static bool acl_genpass(cmd_ctx *c)
{
    long long bits = 256;
    if (c->argc == 3 &&
        (!str_to_ll(c->argv[2], c->argvlen[2], &bits) || bits <= 0 || bits > 4096)) {
        reply_error(&c->out, "ERR ACL GENPASS argument must be the number of bits for the output "
                             "password, a positive number up to 4096");
        return false;
    }
    size_t chars = (size_t)(bits + 3) / 4;
    unsigned char rnd[512];
    size_t got = 0;
    while (got < (chars + 1) / 2) {
        ssize_t r = getrandom(rnd + got, (chars + 1) / 2 - got, 0);
        if (r <= 0) {
            reply_error(&c->out, "ERR no random bytes available");
            return false;
        }
        got += (size_t)r;
    }
    char out[1030];
    for (size_t i = 0; i < got; i++)
        snprintf(out + 2 * i, 3, "%02x", rnd[i]);
    out[chars] = '\0';
    reply_bulk_str(&c->out, out);
    return true;
}

static bool acl_dryrun(cmd_ctx *c)
{
    acl_user *u = acl_user_get(c->argv[2], c->argvlen[2]);
    if (u == NULL) {
        reply_errorf(&c->out, "ERR User '%.*s' not found",
                     (int)(c->argvlen[2] < 128 ? c->argvlen[2] : 128), c->argv[2]);
        return false;
    }
    const command *cmd = command_lookup(c->argv[3], c->argvlen[3]);
    if (cmd == NULL) {
        acl_user_put(u);
        reply_errorf(&c->out, "ERR Command '%.*s' not found",
                     (int)(c->argvlen[3] < 128 ? c->argvlen[3] : 128), c->argv[3]);
        return false;
    }
    int argc = c->argc - 3;
    const char **argv = c->argv + 3;
    const size_t *lens = c->argvlen + 3;
    if ((cmd->arity > 0 && argc != cmd->arity) || argc < -cmd->arity) {
        acl_user_put(u);
        reply_wrong_arity(&c->out, cmd->name);
        return false;
    }
    int pos;
    int r = acl_check(u, cmd, argc, argv, lens, &pos);
    acl_user_put(u);
    char msg[512];
    if (r == ACL_OK) {
        reply_ok(&c->out);
        return true;
    }
    if (r == ACL_DENIED_CMD) {
        char name[160];
        acl_command_name(cmd, argc, argv, lens, name, sizeof(name));
        snprintf(msg, sizeof(msg), "This user has no permissions to run the '%s' command", name);
    } else {
        snprintf(msg, sizeof(msg), "This user has no permissions to access the '%.*s' %s",
                 (int)(lens[pos] < 256 ? lens[pos] : 256), argv[pos],
                 r == ACL_DENIED_KEY ? "key" : "channel");
    }
    reply_bulk_str(&c->out, msg);
    return true;
}

static const char no_aclfile[] =
    "ERR This Redis instance is not configured to use an ACL file. You may want to specify "
    "users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a "
    "Redis configuration file set) in order to store users in the Redis configuration.";

static bool acl_save_load(cmd_ctx *c, bool save)
{
    char *path = config_get_str("aclfile");
    if (path == NULL || path[0] == '\0') {
        free(path);
        reply_error(&c->out, no_aclfile);
        return false;
    }
    char err[2048];
    bool ok = save ? acl_save_file(path, err, sizeof(err)) : acl_load_file(path, err, sizeof(err));
    free(path);
    if (!ok) {
        if (save) {
            server_log(LOG_WARNING, "Saving the ACL users failed: %s", err);
            reply_error(&c->out, "ERR There was an error trying to save the ACLs. Please check "
                                 "the server logs for more information");
        } else {
            reply_errorf(&c->out, "ERR %s", err);
        }
        return false;
    }
    if (!save)
        kill_orphans(client_of(c), NULL);
    reply_ok(&c->out);
    return true;
}

static const char *const help[] = {
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Print this help.",
};

bool aclCommand(cmd_ctx *c)
{
    static const struct {
        const char *name;
        int arity; /* of "ACL <sub> ...", Redis's: negative is a minimum */
        int max;   /* 0: none */
    } subs[] = {{"setuser", -3, 0}, {"getuser", 3, 0}, {"deluser", -3, 0}, {"users", 2, 0},
                {"list", 2, 0},     {"whoami", 2, 0},  {"cat", -2, 3},     {"log", -2, 3},
                {"save", 2, 0},     {"load", 2, 0},    {"genpass", -2, 3}, {"dryrun", -4, 0},
                {"help", 2, 0}};
    size_t k = 0;
    while (k < sizeof(subs) / sizeof(subs[0]) && !arg_eq(c, 1, subs[k].name))
        k++;
    if (k == sizeof(subs) / sizeof(subs[0])) {
        reply_errorf(&c->out, "ERR unknown subcommand '%.*s'. Try ACL HELP.",
                     (int)(c->argvlen[1] < 128 ? c->argvlen[1] : 128), c->argv[1]);
        return false;
    }
    int a = subs[k].arity;
    if ((a > 0 ? c->argc != a : c->argc < -a) || (subs[k].max && c->argc > subs[k].max)) {
        char full[32];
        snprintf(full, sizeof(full), "acl|%s", subs[k].name);
        reply_wrong_arity(&c->out, full);
        return false;
    }
    const char *sub = subs[k].name;
    if (strcmp(sub, "setuser") == 0) {
        char err[1024];
        if (!acl_setuser(c->argv[2], c->argvlen[2], c->argc - 3, c->argv + 3, c->argvlen + 3, err,
                         sizeof(err))) {
            reply_error(&c->out, err);
            return false;
        }
        reply_ok(&c->out);
    } else if (strcmp(sub, "getuser") == 0) {
        acl_user *u = acl_user_get(c->argv[2], c->argvlen[2]);
        if (u == NULL)
            reply_null(&c->out);
        else
            reply_user(&c->out, u);
        acl_user_put(u);
    } else if (strcmp(sub, "deluser") == 0) {
        long long n = 0;
        for (int i = 2; i < c->argc; i++) {
            int r = acl_deluser(c->argv[i], c->argvlen[i]);
            if (r < 0) {
                reply_error(&c->out, "ERR The 'default' user cannot be removed");
                return false;
            }
            if (r > 0) {
                n++;
                char *name = mem_dup(c->argv[i], c->argvlen[i]);
                if (name)
                    kill_orphans(client_of(c), name);
                free(name);
            }
        }
        reply_int(&c->out, n);
    } else if (strcmp(sub, "users") == 0) {
        size_t n;
        char **l = acl_usernames(&n);
        reply_strings(&c->out, l, l ? n : 0);
    } else if (strcmp(sub, "list") == 0) {
        size_t n;
        char **l = acl_list(&n);
        reply_strings(&c->out, l, l ? n : 0);
    } else if (strcmp(sub, "whoami") == 0) {
        reply_bulk_str(&c->out, client_of(c)->user->name);
    } else if (strcmp(sub, "cat") == 0) {
        return acl_cat(c);
    } else if (strcmp(sub, "log") == 0) {
        return acl_log(c);
    } else if (strcmp(sub, "save") == 0 || strcmp(sub, "load") == 0) {
        return acl_save_load(c, strcmp(sub, "save") == 0);
    } else if (strcmp(sub, "genpass") == 0) {
        return acl_genpass(c);
    } else if (strcmp(sub, "dryrun") == 0) {
        return acl_dryrun(c);
    } else {
        reply_lines(&c->out, help, sizeof(help) / sizeof(help[0]));
    }
    return true;
}

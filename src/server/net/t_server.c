/* Connection and server commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT,
 * SHUTDOWN, DBSIZE, FLUSHALL/FLUSHDB, INFO, CLIENT, CONFIG, MEMORY, TIME.
 * Replies and error texts as Redis 7 (see docs/COMMANDS.md). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "exact.h"
#include "persist.h"
#include "repl.h"
#include "server.h"
#include "util.h"

bool pingCommand(cmd_ctx *c)
{
    if (c->argc > 2) {
        reply_wrong_arity(&c->out, "ping");
        return false;
    }
    if (pubsub_restricted(client_of(c))) {
        /* Subscribed RESP2 clients read every reply as a message. */
        reply_array(&c->out, 2);
        reply_bulk_str(&c->out, "pong");
        reply_bulk(&c->out, c->argc == 2 ? c->argv[1] : "", c->argc == 2 ? c->argvlen[1] : 0);
        return true;
    }
    if (c->argc == 2)
        reply_bulk(&c->out, c->argv[1], c->argvlen[1]);
    else
        reply_simple(&c->out, "PONG");
    return true;
}

bool echoCommand(cmd_ctx *c)
{
    reply_bulk(&c->out, c->argv[1], c->argvlen[1]);
    return true;
}

bool selectCommand(cmd_ctx *c)
{
    long long db;
    if (!str_to_ll(c->argv[1], c->argvlen[1], &db)) {
        reply_error(&c->out, "ERR value is not an integer or out of range");
        return false;
    }
    if (db != 0) {
        reply_error(&c->out, "ERR DB index is out of range");
        return false;
    }
    reply_ok(&c->out);
    return true;
}

bool dbsizeCommand(cmd_ctx *c)
{
    reply_int(&c->out, (long long)ks_dbsize());
    return true;
}

bool quitCommand(cmd_ctx *c)
{
    reply_ok(&c->out);
    client_of(c)->close_after_reply = true;
    return true;
}

bool shutdownCommand(cmd_ctx *c)
{
    for (int i = 1; i < c->argc; i++) {
        if (!arg_eq(c, i, "nosave") && !arg_eq(c, i, "save") && !arg_eq(c, i, "now") &&
            !arg_eq(c, i, "force") && !arg_eq(c, i, "abort")) {
            reply_syntax_error(c);
            return false;
        }
        if (arg_eq(c, i, "abort")) {
            reply_error(&c->out, "ERR No shutdown in progress.");
            return false;
        }
    }
    if (arg_eq(c, 1, "nosave") || arg_eq(c, 2, "nosave"))
        atomic_store(&persist_shutdown_save, -1);
    else if (arg_eq(c, 1, "save") || arg_eq(c, 2, "save"))
        atomic_store(&persist_shutdown_save, 1);
    atomic_store(&srv.shutdown_requested, true);
    uv_async_send(&srv.shutdown_async);
    /* As Redis: no reply, the connection closes with the server. */
    client_of(c)->close_after_reply = true;
    return true;
}

bool flushallCommand(cmd_ctx *c)
{
    if (c->argc > 2 || (c->argc == 2 && !arg_eq(c, 1, "async") && !arg_eq(c, 1, "sync"))) {
        reply_syntax_error(c);
        return false;
    }
    /* Every stripe at once, so the log's flush record splits the history
     * exactly: no key is created between the flush and its record. */
    ks_lock_all();
    ks_flush_locked();
    wal_log_flush();
    ks_unlock_all();
    reply_ok(&c->out);
    return true;
}

bool timeCommand(cmd_ctx *c)
{
    int64_t us = now_us();
    reply_array(&c->out, 2);
    reply_bulk_ll(&c->out, us / 1000000);
    reply_bulk_ll(&c->out, us % 1000000);
    return true;
}

/* ---- SLOWLOG and LATENCY ----
 * bloomeryd keeps neither a slow log nor latency events (its per-command
 * latency histograms are in /metrics): both answer as Redis does with
 * nothing recorded, so monitoring tools that ask get an empty answer, not an
 * error. */

bool slowlogCommand(cmd_ctx *c)
{
    if (arg_eq(c, 1, "len") && c->argc == 2) {
        reply_int(&c->out, 0);
    } else if (arg_eq(c, 1, "get") && c->argc <= 3) {
        long long n;
        if (c->argc == 3 && !arg_ll(c, 2, &n))
            return false;
        reply_array(&c->out, 0);
    } else if (arg_eq(c, 1, "reset") && c->argc == 2) {
        reply_ok(&c->out);
    } else {
        reply_errorf(&c->out, "ERR unknown subcommand or wrong number of arguments for '%.*s'",
                     (int)(c->argvlen[1] < 64 ? c->argvlen[1] : 64), c->argv[1]);
        return false;
    }
    return true;
}

bool latencyCommand(cmd_ctx *c)
{
    if ((arg_eq(c, 1, "latest") && c->argc == 2) || (arg_eq(c, 1, "history") && c->argc == 3)) {
        reply_array(&c->out, 0);
    } else if (arg_eq(c, 1, "reset")) {
        reply_int(&c->out, 0);
    } else {
        reply_errorf(&c->out, "ERR unknown subcommand or wrong number of arguments for '%.*s'",
                     (int)(c->argvlen[1] < 64 ? c->argvlen[1] : 64), c->argv[1]);
        return false;
    }
    return true;
}

/* ---- AUTH and HELLO ---- */

/* AUTH [user] pass: the user's password (acl.h); AUTH pass is the default
 * user's, whose password requirepass sets, as in Redis. */
bool authCommand(cmd_ctx *c)
{
    if (c->argc > 3) {
        reply_syntax_error(c);
        return false;
    }
    if (c->argc == 2) {
        /* Redis refuses a password the default user cannot need. */
        if (acl_default_nopass()) {
            reply_error(&c->out, "ERR AUTH <password> called without any password configured for "
                                 "the default user. Are you sure your configuration is correct?");
            return false;
        }
        if (!acl_authenticate(c, "default", 7, c->argv[1], c->argvlen[1]))
            return false;
    } else if (!acl_authenticate(c, c->argv[1], c->argvlen[1], c->argv[2], c->argvlen[2])) {
        return false;
    }
    reply_ok(&c->out);
    return true;
}

static bool valid_client_name(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '!' || s[i] > '~')
            return false;
    return true;
}

static void set_client_name(client *c, const char *s, size_t n)
{
    char *name = n ? strndup(s, n) : NULL;
    pthread_mutex_lock(&clients_lock);
    free(c->name);
    c->name = name;
    pthread_mutex_unlock(&clients_lock);
}

/* The modules as HELLO and MODULE LIST show them: RedisBloom's, built in. */
static void reply_modules(reply *r)
{
    reply_array(r, 1);
    reply_map(r, 4);
    reply_bulk_str(r, "name");
    reply_bulk_str(r, RB_MODULE_NAME);
    reply_bulk_str(r, "ver");
    reply_int(r, RB_MODULE_VERSION);
    reply_bulk_str(r, "path");
    reply_bulk_str(r, "builtin");
    reply_bulk_str(r, "args");
    reply_array(r, 0);
}

bool helloCommand(cmd_ctx *c)
{
    long long ver = 0;
    int next = 1;
    if (c->argc >= 2) {
        if (!str_to_ll(c->argv[1], c->argvlen[1], &ver)) {
            reply_error(&c->out, "ERR Protocol version is not an integer or out of range");
            return false;
        }
        next = 2;
        if (ver < 2 || ver > 3) {
            reply_error(&c->out, "NOPROTO unsupported protocol version");
            return false;
        }
    }
    const char *name = NULL;
    size_t namelen = 0;
    for (int j = next; j < c->argc; j++) {
        int more = c->argc - j - 1;
        if (arg_eq(c, j, "auth") && more >= 2) {
            if (!acl_authenticate(c, c->argv[j + 1], c->argvlen[j + 1], c->argv[j + 2],
                                  c->argvlen[j + 2]))
                return false;
            j += 2;
        } else if (arg_eq(c, j, "setname") && more >= 1) {
            if (!valid_client_name(c->argv[j + 1], c->argvlen[j + 1])) {
                reply_error(&c->out, "ERR Client names cannot contain spaces, newlines or special "
                                     "characters.");
                return false;
            }
            name = c->argv[j + 1];
            namelen = c->argvlen[j + 1];
            j++;
        } else {
            reply_errorf(&c->out, "ERR Syntax error in HELLO option '%.*s'",
                         (int)(c->argvlen[j] < 128 ? c->argvlen[j] : 128), c->argv[j]);
            return false;
        }
    }
    if (!client_of(c)->authenticated) {
        reply_error(&c->out, "NOAUTH HELLO must be called with the client already authenticated, "
                             "otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
                             "authenticate the client and select the RESP protocol version at the "
                             "same time");
        return false;
    }
    if (name)
        set_client_name(client_of(c), name, namelen);
    if (ver) {
        c->out.proto = (int)ver;
        atomic_store(&client_of(c)->resp, (int)ver);
    }
    reply *r = &c->out;
    reply_map(r, 7);
    reply_bulk_str(r, "server");
    reply_bulk_str(r, "redis");
    reply_bulk_str(r, "version");
    reply_bulk_str(r, REDIS_COMPAT_VERSION);
    reply_bulk_str(r, "proto");
    reply_int(r, r->proto);
    reply_bulk_str(r, "id");
    reply_int(r, (long long)client_of(c)->id);
    reply_bulk_str(r, "mode");
    reply_bulk_str(r, "standalone");
    reply_bulk_str(r, "role");
    reply_bulk_str(r, "master");
    reply_bulk_str(r, "modules");
    reply_modules(r);
    return true;
}

/* ---- MODULE ---- */

bool moduleCommand(cmd_ctx *c)
{
    reply *r = &c->out;
    static const struct {
        const char *name;
        int arity; /* Redis's, of the subcommand: negative is a minimum */
    } subs[] = {{"list", 2}, {"help", 2}, {"load", -3}, {"loadex", -3}, {"unload", 3}};
    size_t k = 0;
    while (k < sizeof(subs) / sizeof(subs[0]) && !arg_eq(c, 1, subs[k].name))
        k++;
    if (k == sizeof(subs) / sizeof(subs[0])) {
        reply_errorf(r, "ERR unknown subcommand '%.*s'. Try MODULE HELP.",
                     (int)(c->argvlen[1] < 128 ? c->argvlen[1] : 128), c->argv[1]);
        return false;
    }
    int arity = subs[k].arity;
    if (arity > 0 ? c->argc != arity : c->argc < -arity) {
        reply_errorf(r, "ERR wrong number of arguments for 'module|%s' command", subs[k].name);
        return false;
    }
    if (k == 0) {
        reply_modules(r);
    } else if (k == 1) {
        static const char *help[] = {
            "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "LIST",
            "    The modules loaded: RedisBloom's commands (bf), built in.",
            "LOAD <path> [<arg> ...]",
            "LOADEX <path> [[CONFIG NAME VALUE] ...] [ARGS ...]",
            "UNLOAD <name>",
            "    Refused, as by Redis without enable-module-command.",
            "HELP",
            "    Print this help.",
        };
        reply_lines(r, help, sizeof(help) / sizeof(help[0]));
    } else {
        /* Nothing loads into bloomeryd: Redis's answer when its
         * enable-module-command is "no", its default. */
        reply_error(r, "ERR MODULE command not allowed. If the enable-module-command option is set "
                       "to \"local\", you can run it from a local connection, otherwise you need "
                       "to set this option in the configuration file, and then restart the "
                       "server.");
        return false;
    }
    return true;
}

/* ---- CLIENT ---- */

static client *find_client_by(bool (*match)(client *, const void *), const void *arg, client *skip,
                              int *count, bool kill)
{
    client *found = NULL;
    pthread_mutex_lock(&clients_lock);
    for (client *o = all_clients; o; o = o->gnext) {
        if (o == skip || !match(o, arg))
            continue;
        found = o;
        (*count)++;
        if (kill) {
            atomic_store(&o->kill, true);
            uv_async_send(&o->w->wake);
        }
    }
    pthread_mutex_unlock(&clients_lock);
    return found;
}

static bool match_addr(client *o, const void *arg) { return strcmp(o->addr, arg) == 0; }

static bool client_kill(cmd_ctx *c)
{
    if (c->argc == 3) {
        /* Old form: CLIENT KILL addr:port */
        char addr[128];
        snprintf(addr, sizeof(addr), "%.*s", (int)(c->argvlen[2] < 127 ? c->argvlen[2] : 127),
                 c->argv[2]);
        int n = 0;
        bool self = strcmp(client_of(c)->addr, addr) == 0;
        find_client_by(match_addr, addr, client_of(c), &n, true);
        if (self) {
            client_of(c)->close_after_reply = true;
            n++;
        }
        if (n == 0) {
            reply_error(&c->out, "ERR No such client");
            return false;
        }
        reply_ok(&c->out);
        return true;
    }
    if ((c->argc - 2) % 2 != 0) {
        reply_syntax_error(c);
        return false;
    }
    bool have_id = false, have_addr = false, have_laddr = false, skipme = true;
    int type = -1;
    long long maxage = 0;
    uint64_t id = 0;
    char addr[128] = "", laddr[128] = "", user[128] = "";
    for (int i = 2; i < c->argc; i += 2) {
        int vl = (int)(c->argvlen[i + 1] < 127 ? c->argvlen[i + 1] : 127);
        if (arg_eq(c, i, "id")) {
            long long v;
            if (!str_to_ll(c->argv[i + 1], c->argvlen[i + 1], &v) || v <= 0) {
                reply_error(&c->out, "ERR client-id should be greater than 0");
                return false;
            }
            id = (uint64_t)v;
            have_id = true;
        } else if (arg_eq(c, i, "addr")) {
            snprintf(addr, sizeof(addr), "%.*s", vl, c->argv[i + 1]);
            have_addr = true;
        } else if (arg_eq(c, i, "laddr")) {
            snprintf(laddr, sizeof(laddr), "%.*s", vl, c->argv[i + 1]);
            have_laddr = true;
        } else if (arg_eq(c, i, "skipme")) {
            if (arg_eq(c, i + 1, "yes"))
                skipme = true;
            else if (arg_eq(c, i + 1, "no"))
                skipme = false;
            else {
                reply_syntax_error(c);
                return false;
            }
        } else if (arg_eq(c, i, "type")) {
            type = client_type_by_name(c->argv[i + 1], c->argvlen[i + 1]);
            if (type < 0) {
                reply_errorf(&c->out, "ERR Unknown client type '%.*s'", vl, c->argv[i + 1]);
                return false;
            }
        } else if (arg_eq(c, i, "user")) {
            acl_user *u = acl_user_get(c->argv[i + 1], c->argvlen[i + 1]);
            if (u == NULL) {
                reply_errorf(&c->out, "ERR No such user '%.*s'", vl, c->argv[i + 1]);
                return false;
            }
            snprintf(user, sizeof(user), "%s", u->name);
            acl_user_put(u);
        } else if (arg_eq(c, i, "maxage")) {
            if (!str_to_ll(c->argv[i + 1], c->argvlen[i + 1], &maxage)) {
                reply_syntax_error(c);
                return false;
            }
        } else {
            reply_syntax_error(c);
            return false;
        }
    }
    int n = 0;
    int64_t now = now_ms();
    pthread_mutex_lock(&clients_lock);
    for (client *o = all_clients; o; o = o->gnext) {
        if (have_id && o->id != id)
            continue;
        if (type >= 0 && client_type(o) != type)
            continue;
        /* Connected longer than maxage seconds. */
        if (maxage > 0 && (now - o->ctime_ms) / 1000 < maxage)
            continue;
        if (have_addr && strcmp(o->addr, addr) != 0)
            continue;
        if (have_laddr && strcmp(o->laddr, laddr) != 0)
            continue;
        if (user[0] && (o->user == NULL || strcmp(o->user->name, user) != 0))
            continue;
        if (o == client_of(c)) {
            if (skipme)
                continue;
            client_of(c)->close_after_reply = true;
            n++;
            continue;
        }
        atomic_store(&o->kill, true);
        uv_async_send(&o->w->wake);
        n++;
    }
    pthread_mutex_unlock(&clients_lock);
    /* A replica's link to its master is a thread, not a client: TYPE
     * master drops it, and it reconnects (a partial resync), as in Redis. */
    if (type == CLIENT_TYPE_MASTER && !have_id && !have_addr && !have_laddr &&
        repl_drop_master_link())
        n++;
    reply_int(&c->out, n);
    return true;
}

bool clientCommand(cmd_ctx *c)
{
    reply *r = &c->out;
    if (arg_eq(c, 1, "id") && c->argc == 2) {
        reply_int(r, (long long)client_of(c)->id);
    } else if (arg_eq(c, 1, "setname") && c->argc == 3) {
        if (!valid_client_name(c->argv[2], c->argvlen[2])) {
            reply_error(r,
                        "ERR Client names cannot contain spaces, newlines or special characters.");
            return false;
        }
        set_client_name(client_of(c), c->argv[2], c->argvlen[2]);
        reply_ok(r);
    } else if (arg_eq(c, 1, "getname") && c->argc == 2) {
        pthread_mutex_lock(&clients_lock);
        if (client_of(c)->name)
            reply_bulk_str(r, client_of(c)->name);
        else
            reply_null(r);
        pthread_mutex_unlock(&clients_lock);
    } else if (arg_eq(c, 1, "setinfo") && c->argc == 4) {
        bool isname = arg_eq(c, 2, "lib-name");
        if (!isname && !arg_eq(c, 2, "lib-ver")) {
            reply_errorf(r, "ERR Unrecognized option '%.*s'",
                         (int)(c->argvlen[2] < 64 ? c->argvlen[2] : 64), c->argv[2]);
            return false;
        }
        if (!valid_client_name(c->argv[3], c->argvlen[3])) {
            reply_errorf(r, "ERR %s cannot contain spaces, newlines or special characters.",
                         isname ? "lib-name" : "lib-ver");
            return false;
        }
        char *v = strndup(c->argv[3], c->argvlen[3]);
        pthread_mutex_lock(&clients_lock);
        char **slot = isname ? &client_of(c)->lib_name : &client_of(c)->lib_ver;
        free(*slot);
        *slot = v;
        pthread_mutex_unlock(&clients_lock);
        reply_ok(r);
    } else if (arg_eq(c, 1, "list")) {
        if (c->argc > 2 && !(c->argc == 4 && arg_eq(c, 2, "type")) &&
            !(c->argc >= 4 && arg_eq(c, 2, "id"))) {
            reply_syntax_error(c);
            return false;
        }
        bool by_id = c->argc >= 4 && arg_eq(c, 2, "id");
        int type = -1;
        if (c->argc == 4 && arg_eq(c, 2, "type")) {
            type = client_type_by_name(c->argv[3], c->argvlen[3]);
            if (type < 0) {
                reply_errorf(r, "ERR Unknown client type '%.*s'",
                             (int)(c->argvlen[3] < 127 ? c->argvlen[3] : 127), c->argv[3]);
                return false;
            }
        }
        size_t cap = 4096, len = 0;
        char *out = malloc(cap);
        if (out == NULL) {
            reply_oom(c);
            return false;
        }
        /* A client leaves the registry before its worker frees it, so every
         * client listed while the lock is held is alive. */
        pthread_mutex_lock(&clients_lock);
        for (client *o = all_clients; o; o = o->gnext) {
            if (type >= 0 && client_type(o) != type)
                continue;
            if (by_id) {
                bool want = false;
                for (int i = 3; i < c->argc; i++) {
                    long long v;
                    if (str_to_ll(c->argv[i], c->argvlen[i], &v) && (uint64_t)v == o->id)
                        want = true;
                }
                if (!want)
                    continue;
            }
            char line[1024];
            client_info_line(o, line, sizeof(line));
            size_t ll = strlen(line);
            if (len + ll + 2 > cap) {
                while (len + ll + 2 > cap)
                    cap *= 2;
                char *p = realloc(out, cap);
                if (p == NULL)
                    break;
                out = p;
            }
            memcpy(out + len, line, ll);
            len += ll;
            out[len++] = '\n';
        }
        pthread_mutex_unlock(&clients_lock);
        reply_verbatim(r, out, len);
        free(out);
    } else if (arg_eq(c, 1, "info") && c->argc == 2) {
        char line[1024];
        pthread_mutex_lock(&clients_lock);
        client_info_line(client_of(c), line, sizeof(line));
        pthread_mutex_unlock(&clients_lock);
        size_t ll = strlen(line);
        line[ll++] = '\n';
        reply_verbatim(r, line, ll);
    } else if (arg_eq(c, 1, "kill") && c->argc >= 3) {
        return client_kill(c);
    } else if ((arg_eq(c, 1, "no-evict") || arg_eq(c, 1, "no-touch")) && c->argc == 3) {
        if (!arg_eq(c, 2, "on") && !arg_eq(c, 2, "off")) {
            reply_syntax_error(c);
            return false;
        }
        reply_ok(r);
    } else if (arg_eq(c, 1, "help") && c->argc == 2) {
        static const char *help[] = {
            "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "ID",
            "    Return the ID of the current connection.",
            "GETNAME",
            "    Return the name of the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "SETINFO <LIB-NAME|LIB-VER> <value>",
            "    Set client library name or version.",
            "LIST [TYPE (NORMAL|MASTER|REPLICA|PUBSUB)] [ID id ...]",
            "    Return information about client connections.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port> | KILL [ID id] [ADDR ip:port] [LADDR ip:port] [SKIPME yes|no]",
            "     [TYPE (NORMAL|MASTER|REPLICA|PUBSUB)] [USER default] [MAXAGE seconds]",
            "    Kill connections.",
        };
        reply_lines(r, help, sizeof(help) / sizeof(help[0]));
    } else {
        reply_errorf(r,
                     "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try "
                     "CLIENT HELP.",
                     (int)(c->argvlen[1] < 64 ? c->argvlen[1] : 64), c->argv[1]);
        return false;
    }
    return true;
}

/* ---- CONFIG ---- */

/* The settings CONFIG GET's patterns match, each once, however many the
 * table holds. */
typedef struct cfg_collect {
    const char **names;
    int n, cap;
} cfg_collect;

static void collect_name(void *ctx, const char *name)
{
    cfg_collect *cc = ctx;
    for (int i = 0; i < cc->n; i++)
        if (cc->names[i] == name)
            return;
    if (cc->n == cc->cap) {
        int cap = cc->cap ? cc->cap * 2 : 64;
        const char **p = realloc(cc->names, sizeof(*p) * (size_t)cap);
        if (p == NULL)
            return;
        cc->names = p;
        cc->cap = cap;
    }
    cc->names[cc->n++] = name;
}

bool configCommand(cmd_ctx *c)
{
    reply *r = &c->out;
    /* Redis 7's arities of the subcommands (negative: at least). */
    static const struct {
        const char *name;
        int arity;
    } subs[] = {{"get", -3}, {"set", -4}, {"resetstat", 2}, {"rewrite", 2}};
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
        int a = subs[i].arity;
        if (arg_eq(c, 1, subs[i].name) && (a > 0 ? c->argc != a : c->argc < -a)) {
            reply_errorf(r, "ERR wrong number of arguments for 'config|%s' command", subs[i].name);
            return false;
        }
    }
    if (arg_eq(c, 1, "get") && c->argc >= 3) {
        cfg_collect cc = {.names = NULL};
        for (int i = 2; i < c->argc; i++)
            config_match(c->argv[i], c->argvlen[i], collect_name, &cc);
        reply_map(r, cc.n);
        for (int i = 0; i < cc.n; i++) {
            char *val = config_format_dup(cc.names[i]);
            reply_bulk_str(r, cc.names[i]);
            reply_bulk_str(r, val ? val : "");
            free(val);
        }
        free(cc.names);
    } else if (arg_eq(c, 1, "set") && c->argc % 2 != 0) {
        reply_syntax_error(c);
        return false;
    } else if (arg_eq(c, 1, "set")) {
        char err[256];
        int bad = 0;
        int rc = config_set_pairs((c->argc - 2) / 2, c->argv + 2, c->argvlen + 2, &bad, err,
                                  sizeof(err));
        if (rc != CONFIG_SET_OK) {
            int i = 2 + 2 * bad;
            int nl = (int)(c->argvlen[i] < 127 ? c->argvlen[i] : 127);
            if (rc == CONFIG_SET_UNKNOWN)
                reply_errorf(r, "ERR Unknown option or number of arguments for CONFIG SET - '%.*s'",
                             nl, c->argv[i]);
            else
                reply_errorf(r, "ERR CONFIG SET failed (possibly related to argument '%.*s') - %s",
                             nl, c->argv[i], err);
            return false;
        }
        reply_ok(r);
    } else if (arg_eq(c, 1, "resetstat") && c->argc == 2) {
        for (int i = 0; i < srv.nworkers; i++) {
            worker *w = &srv.workers[i];
            /* Racy against the owner's plain increments; good enough for a
             * statistics reset. */
            for (size_t k = 0; k < commands_count(); k++) {
                atomic_store(&w->stats[k].calls, 0);
                atomic_store(&w->stats[k].usec, 0);
                atomic_store(&w->stats[k].rejected, 0);
                atomic_store(&w->stats[k].failed, 0);
                for (int b = 0; b < CMD_LAT_BUCKETS; b++)
                    atomic_store(&w->stats[k].lat[b], 0);
            }
            atomic_store(&w->hits, 0);
            atomic_store(&w->misses, 0);
            atomic_store(&w->errors, 0);
            atomic_store(&w->commands, 0);
            atomic_store(&w->net_in, 0);
            atomic_store(&w->net_out, 0);
        }
        /* What Redis's RESETSTAT resets and INFO shows here: the stats
         * section's counters, commandstats, the ops/sec samples. */
        atomic_store(&ks_stat_expired, 0);
        atomic_store(&srv.total_connections, 0);
        atomic_store(&srv.rejected_connections, 0);
        atomic_store(&srv.ops_sec, 0);
        atomic_store(&srv.ops_reset, true);
        reply_ok(r);
    } else if (arg_eq(c, 1, "rewrite") && c->argc == 2) {
        char err[256];
        int rc = config_rewrite(err, sizeof(err));
        if (rc == CONFIG_REWRITE_NO_FILE) {
            reply_error(r, "ERR The server is running without a config file");
            return false;
        }
        if (rc != CONFIG_REWRITE_OK) {
            server_log(LOG_WARNING, "CONFIG REWRITE failed: %s", err);
            reply_errorf(r, "ERR Rewriting config file: %s", err);
            return false;
        }
        server_log(LOG_NOTICE, "CONFIG REWRITE executed with success.");
        reply_ok(r);
    } else {
        reply_errorf(r,
                     "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try "
                     "CONFIG HELP.",
                     (int)(c->argvlen[1] < 64 ? c->argvlen[1] : 64), c->argv[1]);
        return false;
    }
    return true;
}

/* ---- MEMORY ---- */

bool memoryCommand(cmd_ctx *c)
{
    reply *r = &c->out;
    if (arg_eq(c, 1, "usage") && (c->argc == 3 || c->argc == 5)) {
        if (c->argc == 5) {
            long long samples;
            if (!arg_eq(c, 3, "samples")) {
                reply_syntax_error(c);
                return false;
            }
            if (!arg_ll(c, 4, &samples))
                return false;
        }
        ks_ref ref;
        kv_entry *e = ks_open(&ref, c->argv[2], c->argvlen[2], false);
        if (e == NULL) {
            ks_close(&ref);
            reply_null(r);
            return true;
        }
        uint64_t bytes = ks_entry_overhead(e->klen);
        if (e->obj->type->locked) {
            pthread_mutex_lock(&e->obj->lock);
            bytes += kv_obj_bytes(e->obj);
            pthread_mutex_unlock(&e->obj->lock);
        } else {
            bytes += kv_obj_bytes(e->obj);
        }
        ks_close(&ref);
        reply_int(r, (long long)bytes);
    } else if (arg_eq(c, 1, "stats") && c->argc == 2) {
        reply_map(r, 3);
        reply_bulk_str(r, "dataset.bytes");
        reply_int(r, (long long)ks_used_memory());
        reply_bulk_str(r, "keys.count");
        reply_int(r, (long long)ks_dbsize());
        reply_bulk_str(r, "clients.normal");
        reply_int(r, (long long)atomic_load(&srv.connected));
    } else {
        reply_errorf(r,
                     "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try "
                     "MEMORY HELP.",
                     (int)(c->argvlen[1] < 64 ? c->argvlen[1] : 64), c->argv[1]);
        return false;
    }
    return true;
}

/* ---- INFO ---- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)n;
        char *p = realloc(b->p, cap);
        if (p == NULL)
            return;
        b->p = p;
        b->cap = cap;
    }
}

static bool want_section(cmd_ctx *c, const char *name, bool is_default)
{
    if (c->argc == 1)
        return is_default;
    for (int i = 1; i < c->argc; i++) {
        if (arg_eq(c, i, name) || arg_eq(c, i, "all") || arg_eq(c, i, "everything"))
            return true;
        if (arg_eq(c, i, "default") && is_default)
            return true;
    }
    return false;
}

static uint64_t sum_worker(size_t off)
{
    uint64_t n = 0;
    for (int i = 0; i < srv.nworkers; i++)
        n += atomic_load_explicit((_Atomic uint64_t *)((char *)&srv.workers[i] + off),
                                  memory_order_relaxed);
    return n;
}

static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return 0;
    unsigned long size = 0, rss = 0;
    if (fscanf(f, "%lu %lu", &size, &rss) != 2)
        rss = 0;
    fclose(f);
    return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

bool infoCommand(cmd_ctx *c)
{
    sbuf b = {malloc(4096), 0, 4096};
    if (b.p == NULL) {
        reply_oom(c);
        return false;
    }
    int64_t now = now_ms();
    char h1[32], h2[32], h3[32];
    bool first = true;
#define SECTION(title)                                                                             \
    do {                                                                                           \
        if (!first)                                                                                \
            sb_printf(&b, "\r\n");                                                                 \
        first = false;                                                                             \
        sb_printf(&b, "# " title "\r\n");                                                          \
    } while (0)

    if (want_section(c, "server", true)) {
        struct utsname u;
        uname(&u);
        char *cfgfile = config_get_str("config-file");
        SECTION("Server");
        sb_printf(&b,
                  "redis_version:%s\r\nbloomery_version:%s\r\nlibbloomery_version:%s\r\n"
                  "redis_mode:standalone\r\nos:%s %s %s\r\narch_bits:64\r\n"
                  "multiplexing_api:libuv\r\nbloomery_filter_kernel:%s\r\nprocess_id:%d\r\n"
                  "run_id:%s\r\ntcp_port:%d\r\nserver_time_usec:%lld\r\nuptime_in_seconds:%lld\r\n"
                  "uptime_in_days:%lld\r\nhz:%lld\r\nio_threads_active:%d\r\nworker_threads:%d\r\n"
                  "executable:%s\r\nconfig_file:%s\r\n",
                  REDIS_COMPAT_VERSION, BLOOMERYD_VERSION, BLOOMERY_VERSION_STRING, u.sysname,
                  u.release, u.machine, bf_kernel_name(), (int)getpid(), srv.run_id,
                  srv.listen_port, (long long)now_us(), (long long)((now - srv.start_ms) / 1000),
                  (long long)((now - srv.start_ms) / 86400000), atomic_load(&cfg.hz),
                  srv.nworkers > 1, srv.nworkers, srv.executable, cfgfile ? cfgfile : "");
        free(cfgfile);
    }
    uint64_t ps_channels, ps_patterns, ps_clients;
    pubsub_stats(&ps_channels, &ps_patterns, &ps_clients);
    if (want_section(c, "clients", true)) {
        SECTION("Clients");
        /* pubsub_clients: Redis 7.2 and later. */
        sb_printf(&b,
                  "connected_clients:%llu\r\ncluster_connections:0\r\nmaxclients:%lld\r\n"
                  "blocked_clients:0\r\ntracking_clients:0\r\npubsub_clients:%llu\r\n",
                  (unsigned long long)atomic_load(&srv.connected), atomic_load(&cfg.maxclients),
                  (unsigned long long)ps_clients);
    }
    if (want_section(c, "memory", true)) {
        uint64_t used = ks_used_memory(), maxm = server_maxmemory(), rss = rss_bytes();
        uint64_t filter_bytes = 0;
        bytes_human(h1, sizeof(h1), used);
        bytes_human(h2, sizeof(h2), maxm);
        bytes_human(h3, sizeof(h3), rss);
        SECTION("Memory");
        sb_printf(&b,
                  "used_memory:%llu\r\nused_memory_human:%s\r\nused_memory_rss:%llu\r\n"
                  "used_memory_rss_human:%s\r\nused_memory_dataset:%llu\r\nmaxmemory:%llu\r\n"
                  "maxmemory_human:%s\r\nmaxmemory_policy:noeviction\r\n"
                  "mem_allocator:libc\r\n",
                  (unsigned long long)used, h1, (unsigned long long)rss, h3,
                  (unsigned long long)used, (unsigned long long)maxm, h2);
        (void)filter_bytes;
    }
    if (want_section(c, "persistence", true)) {
        SECTION("Persistence");
        char pbuf[4096];
        persist_info(pbuf, sizeof(pbuf), repl_loading());
        sb_printf(&b, "%s", pbuf);
    }
    /* Not in the default set: it asks the store for every period's size. */
    if (want_section(c, "exact", false)) {
        SECTION("Exact");
        char xbuf[9000];
        exact_info(xbuf, sizeof(xbuf));
        sb_printf(&b, "%s", xbuf);
    }
    if (want_section(c, "stats", true)) {
        SECTION("Stats");
        sb_printf(&b,
                  "total_connections_received:%llu\r\ntotal_commands_processed:%llu\r\n"
                  "instantaneous_ops_per_sec:%llu\r\ntotal_net_input_bytes:%llu\r\n"
                  "total_net_output_bytes:%llu\r\nrejected_connections:%llu\r\n"
                  "expired_keys:%llu\r\nevicted_keys:0\r\nkeyspace_hits:%llu\r\n"
                  "keyspace_misses:%llu\r\npubsub_channels:%llu\r\npubsub_patterns:%llu\r\n"
                  "pubsubshard_channels:0\r\ntotal_error_replies:%llu\r\n",
                  (unsigned long long)atomic_load(&srv.total_connections),
                  (unsigned long long)sum_worker(offsetof(worker, commands)),
                  (unsigned long long)atomic_load(&srv.ops_sec),
                  (unsigned long long)sum_worker(offsetof(worker, net_in)),
                  (unsigned long long)sum_worker(offsetof(worker, net_out)),
                  (unsigned long long)atomic_load(&srv.rejected_connections),
                  (unsigned long long)atomic_load(&ks_stat_expired),
                  (unsigned long long)sum_worker(offsetof(worker, hits)),
                  (unsigned long long)sum_worker(offsetof(worker, misses)),
                  (unsigned long long)ps_channels, (unsigned long long)ps_patterns,
                  (unsigned long long)sum_worker(offsetof(worker, errors)));
    }
    if (want_section(c, "replication", true)) {
        SECTION("Replication");
        char *r = repl_info();
        sb_printf(&b, "%s", r ? r : "");
        free(r);
    }
    if (want_section(c, "cpu", true)) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        SECTION("CPU");
        sb_printf(&b, "used_cpu_sys:%ld.%06ld\r\nused_cpu_user:%ld.%06ld\r\n",
                  (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec, (long)ru.ru_utime.tv_sec,
                  (long)ru.ru_utime.tv_usec);
    }
    if (want_section(c, "modules", true)) {
        /* As Redis prints RedisBloom's line (filters: command filters). */
        SECTION("Modules");
        sb_printf(&b,
                  "module:name=%s,ver=%d,api=1,filters=0,usedby=[],using=[],"
                  "options=[handle-io-errors]\r\n",
                  RB_MODULE_NAME, RB_MODULE_VERSION);
    }
    if (want_section(c, "commandstats", false)) {
        SECTION("Commandstats");
        for (size_t k = 0; k < commands_count(); k++) {
            uint64_t calls = 0, usec = 0, rej = 0, failed = 0;
            for (int i = 0; i < srv.nworkers; i++) {
                cmd_stat *st = &srv.workers[i].stats[k];
                calls += atomic_load_explicit(&st->calls, memory_order_relaxed);
                usec += atomic_load_explicit(&st->usec, memory_order_relaxed);
                rej += atomic_load_explicit(&st->rejected, memory_order_relaxed);
                failed += atomic_load_explicit(&st->failed, memory_order_relaxed);
            }
            if (calls == 0 && rej == 0)
                continue;
            sb_printf(&b,
                      "cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=%llu,"
                      "failed_calls=%llu\r\n",
                      command_at(k)->name, (unsigned long long)calls, (unsigned long long)usec,
                      calls ? (double)usec / (double)calls : 0.0, (unsigned long long)rej,
                      (unsigned long long)failed);
        }
    }
    if (want_section(c, "cluster", true)) {
        SECTION("Cluster");
        sb_printf(&b, "cluster_enabled:0\r\n");
    }
    if (want_section(c, "keyspace", true)) {
        SECTION("Keyspace");
        uint64_t keys = ks_dbsize();
        if (keys)
            sb_printf(&b, "db0:keys=%llu,expires=%llu,avg_ttl=0\r\n", (unsigned long long)keys,
                      (unsigned long long)ks_expires_count());
    }
#undef SECTION
    reply_verbatim(&c->out, b.p, b.len);
    free(b.p);
    return true;
}

/* bloomery console: the options, protected mode, start and stop. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "console.h"

const char *const cn_mode_names[] = {"nodes", "sentinel", "cluster"};
cn_settings cn_cfg;
volatile int cn_stopping;

static const char usage_text[] =
    "usage: bloomery console (--sentinel HOST:PORT[,HOST:PORT...] --master-name NAME ...\n"
    "                         | --cluster HOST:PORT | --node HOST:PORT ...) [options]\n"
    "Serves a console of a whole deployment over HTTP (docs/CONSOLE.md).\n"
    "  --sentinel LIST       the Sentinels of the next --master-name (repeat both for\n"
    "                        several groups)\n"
    "  --master-name NAME    a group the Sentinels monitor\n"
    "  --cluster HOST:PORT   any node of a Redis Cluster (bloomery.so or RedisBloom)\n"
    "  --node HOST:PORT      a node (repeatable); its replicas are found by INFO\n"
    "  --http-port N         the console's port (default 9130)\n"
    "  --http-bind ADDR      the address to listen on (default 127.0.0.1); off the\n"
    "                        loopback, requests must sign in as a user of the deployment\n"
    "  --http-allowed-hosts \"NAMES\"  Host names answered besides addresses and localhost\n"
    "  --no-protected-mode   listen off the loopback even when the deployment has no\n"
    "                        password\n";

static void on_signal(int sig)
{
    (void)sig;
    cn_stopping = 1;
}

static char **split_list(const char *s, size_t *n)
{
    char *copy = strdup(s);
    char **out = calloc(strlen(s) + 2, sizeof(char *));
    *n = 0;
    if (!copy || !out) {
        free(copy);
        free(out);
        return NULL;
    }
    for (char *save = NULL, *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save))
        out[(*n)++] = w;
    return out;
}

static bool add_seed(const char *addr)
{
    char **s = realloc(cn_cfg.seeds, (cn_cfg.nseeds + 1) * sizeof(char *));
    if (!s)
        return false;
    cn_cfg.seeds = s;
    cn_cfg.seeds[cn_cfg.nseeds++] = (char *)addr;
    return true;
}

/* Whether the deployment answers without a password: listening off the
 * loopback would then hand it to the network (protected mode). */
static bool deployment_open(char *addr, size_t addrlen)
{
    const char *try[64];
    size_t n = 0;
    const cn_topo *t = fleet_lock();
    for (size_t i = 0; t && i < t->nnodes && n < 64; i++)
        try[n++] = t->nodes[i].addr;
    for (size_t i = 0; i < n; i++) {
        char host[CN_ADDR], port[16], err[160];
        rc_conn c = {.fd = -1};
        if (!rc_split_addr(try[i], host, sizeof(host), port, sizeof(port)))
            continue;
        rc_opts o = cn_cfg.opts;
        o.user = o.pass = NULL; /* as anyone on the network would */
        if (rc_open(&c, host, port, &o, err, sizeof(err)) != 0)
            continue;
        rc_value *v = rc_callv(&c, 2000, err, sizeof(err), "PING", NULL);
        bool open = v && v->type == '+';
        rc_value_free(v);
        rc_close(&c);
        if (open) {
            snprintf(addr, addrlen, "%s", try[i]);
            fleet_unlock();
            return true;
        }
    }
    fleet_unlock();
    return false;
}

int cmd_console(int argc, char **argv)
{
    const char *prog = "bloomery console";
    const char *pending_sentinels = NULL;
    bool no_protected = false;
    memset(&cn_cfg, 0, sizeof(cn_cfg));
    cn_cfg.port = 9130;
    cn_cfg.bind = "127.0.0.1";
    int modes = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = rc_opts_arg(&cn_cfg.opts, argc, argv, &i, prog);
        if (r < 0)
            return CLI_USAGE;
        if (r > 0)
            continue;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("%s%s", usage_text, rc_opts_help);
            return CLI_OK;
        }
        if (strcmp(a, "--no-protected-mode") == 0) {
            no_protected = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s: unknown option or missing value: %s\n", prog, a);
            return CLI_USAGE;
        }
        const char *v = argv[++i];
        if (strcmp(a, "--sentinel") == 0) {
            pending_sentinels = v;
            modes |= 1 << CN_MODE_SENTINEL;
        } else if (strcmp(a, "--master-name") == 0) {
            if (!pending_sentinels && cn_cfg.ngroups == 0) {
                fprintf(stderr, "%s: --master-name needs --sentinel before it\n", prog);
                return CLI_USAGE;
            }
            cn_sentinel_group *g =
                realloc(cn_cfg.groups, (cn_cfg.ngroups + 1) * sizeof(cn_sentinel_group));
            if (!g)
                return CLI_ERROR;
            cn_cfg.groups = g;
            cn_sentinel_group *sg = &g[cn_cfg.ngroups];
            sg->name = (char *)v;
            /* The same Sentinels as the group before, unless new ones were given. */
            if (pending_sentinels) {
                sg->sentinels = split_list(pending_sentinels, &sg->nsentinels);
                if (!sg->sentinels)
                    return CLI_ERROR;
            } else {
                sg->sentinels = g[cn_cfg.ngroups - 1].sentinels;
                sg->nsentinels = g[cn_cfg.ngroups - 1].nsentinels;
            }
            pending_sentinels = NULL;
            cn_cfg.ngroups++;
        } else if (strcmp(a, "--cluster") == 0) {
            modes |= 1 << CN_MODE_CLUSTER;
            if (!add_seed(v))
                return CLI_ERROR;
        } else if (strcmp(a, "--node") == 0) {
            modes |= 1 << CN_MODE_NODES;
            if (!add_seed(v))
                return CLI_ERROR;
        } else if (strcmp(a, "--http-port") == 0) {
            unsigned long long p;
            if (cli_parse_count(v, &p) != 0 || p == 0 || p > 65535) {
                fprintf(stderr, "%s: --http-port must be 1..65535\n", prog);
                return CLI_USAGE;
            }
            cn_cfg.port = (int)p;
        } else if (strcmp(a, "--http-bind") == 0) {
            cn_cfg.bind = v;
        } else if (strcmp(a, "--http-allowed-hosts") == 0) {
            cn_cfg.allowed_hosts = v;
        } else {
            fprintf(stderr, "%s: unknown option %s\n", prog, a);
            return CLI_USAGE;
        }
    }
    const char *bad = rc_opts_finish(&cn_cfg.opts);
    if (!bad && (modes == 0 || (modes & (modes - 1))))
        bad = "give one of --sentinel with --master-name, --cluster or --node";
    if (!bad && pending_sentinels)
        bad = "--sentinel needs a --master-name after it";
    if (bad) {
        fprintf(stderr, "%s: %s\n", prog, bad);
        return CLI_USAGE;
    }
    cn_cfg.mode = modes == 1 << CN_MODE_SENTINEL  ? CN_MODE_SENTINEL
                  : modes == 1 << CN_MODE_CLUSTER ? CN_MODE_CLUSTER
                                                  : CN_MODE_NODES;
    cn_cfg.opts.timeout_ms = 2000;
    cn_cfg.need_auth = !cn_bind_is_loopback(cn_cfg.bind);

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    char err[256];
    if (!fleet_start(err, sizeof(err))) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return CLI_ERROR;
    }
    char open_addr[CN_ADDR];
    if (cn_cfg.need_auth && !no_protected && deployment_open(open_addr, sizeof(open_addr))) {
        fprintf(stderr,
                "%s: refusing to listen on %s: the deployment answers without a password (%s "
                "did), so anyone who reaches the console could change it. Set a password on the "
                "servers (requirepass or ACL users), listen on the loopback (--http-bind "
                "127.0.0.1), or pass --no-protected-mode.\n",
                prog, cn_cfg.bind, open_addr);
        cn_stopping = 1;
        fleet_stop();
        pool_close_all();
        return CLI_ERROR;
    }
    int rc = CLI_OK;
    if (!catalog_start(err, sizeof(err)) || !serve_start(err, sizeof(err))) {
        fprintf(stderr, "%s: %s\n", prog, err);
        rc = CLI_ERROR;
    } else {
        fprintf(stderr, "%s: serving the %s console on http://%s:%d/\n", prog,
                cn_mode_names[cn_cfg.mode], cn_cfg.bind, cn_cfg.port);
        while (!cn_stopping) {
            struct timespec ts = {0, 100 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    cn_stopping = 1;
    serve_stop();
    catalog_stop();
    fleet_stop();
    pool_close_all();
    for (size_t i = 0; i < cn_cfg.ngroups; i++)
        if (i == 0 || cn_cfg.groups[i].sentinels != cn_cfg.groups[i - 1].sentinels) {
            free(cn_cfg.groups[i].sentinels ? cn_cfg.groups[i].sentinels[0] : NULL);
            free(cn_cfg.groups[i].sentinels);
        }
    free(cn_cfg.groups);
    free(cn_cfg.seeds);
    return rc;
}

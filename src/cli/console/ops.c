/* The console's writes. Each runs on the key's master (never a replica),
 * as the user the request signed in as, on a connection of its own, so
 * the servers' ACLs decide what that user may do; a request without
 * credentials (the console on the loopback) runs with the console's own.
 * Under a Redis Cluster a MOVED or ASK reply (a reshard or failover the
 * topology has not caught up with) refreshes the topology and the command
 * is sent once more, where the reply says. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_args.h"
#include "console.h"

#define OP_TIMEOUT_MS 10000
#define ITEMS_MAX 100000

bool ops_login(const char *user, const char *pass)
{
    char master[CN_ADDR] = "";
    const cn_topo *t = fleet_lock();
    for (size_t i = 0; t && i < t->nnodes && !master[0]; i++)
        if (t->nodes[i].link != CN_LINK_UNREACHABLE)
            snprintf(master, sizeof(master), "%s", t->nodes[i].addr);
    fleet_unlock();
    char host[CN_ADDR], port[16], err[160];
    if (!master[0] || !rc_split_addr(master, host, sizeof(host), port, sizeof(port)))
        return false;
    rc_opts o = cn_cfg.opts;
    o.user = user;
    o.pass = pass;
    rc_conn c = {.fd = -1};
    if (rc_open(&c, host, port, &o, err, sizeof(err)) != 0)
        return false;
    /* The default user with no password: AUTH was not sent, so ask. */
    rc_value *v = rc_callv(&c, 2000, err, sizeof(err), "AUTH", user, pass, NULL);
    bool ok = v && (v->type == '+' || (v->str && strstr(v->str, "without any password")));
    rc_value_free(v);
    rc_close(&c);
    return ok;
}

/* One command on addr as w; follows one MOVED or ASK. */
static rc_value *run_as(const cn_who *w, const char *addr, size_t argc, const char *const *argv,
                        const size_t *lens, char *err, size_t errlen)
{
    char target[CN_ADDR];
    snprintf(target, sizeof(target), "%s", addr);
    bool asking = false;
    for (int attempt = 0; attempt < 2; attempt++) {
        rc_value *v = NULL;
        if (!w->given) {
            rc_conn *c = pool_get(target, err, errlen);
            if (!c)
                return NULL;
            if (asking) {
                rc_value *a = rc_callv(c, OP_TIMEOUT_MS, err, errlen, "ASKING", NULL);
                rc_value_free(a);
            }
            v = rc_call(c, OP_TIMEOUT_MS, err, errlen, argc, argv, lens);
            pool_put(c, v != NULL);
        } else {
            char host[CN_ADDR], port[16];
            if (!rc_split_addr(target, host, sizeof(host), port, sizeof(port))) {
                snprintf(err, errlen, "malformed address %s", target);
                return NULL;
            }
            rc_opts o = cn_cfg.opts;
            o.user = w->user;
            o.pass = w->pass;
            rc_conn c = {.fd = -1};
            if (rc_open(&c, host, port, &o, err, errlen) != 0)
                return NULL;
            if (asking)
                rc_value_free(rc_callv(&c, OP_TIMEOUT_MS, err, errlen, "ASKING", NULL));
            v = rc_call(&c, OP_TIMEOUT_MS, err, errlen, argc, argv, lens);
            rc_close(&c);
        }
        const char *e = rv_err(v);
        bool moved = e && strncmp(e, "MOVED ", 6) == 0, ask = e && strncmp(e, "ASK ", 4) == 0;
        if (attempt == 1 || !(moved || ask))
            return v;
        const char *sp = strrchr(e, ' ');
        snprintf(target, sizeof(target), "%s", sp ? sp + 1 : addr);
        asking = ask;
        rc_value_free(v);
        if (moved)
            fleet_refresh_now();
    }
    return NULL;
}

/* The reply as {"reply": ...} or {"error": ...} with its status. */
static int answer(textbuf *b, rc_value *v, const char *err, const char *node)
{
    int status;
    if (!v) {
        status = api_error(b, 502, err);
    } else if (v->type == '-') {
        status = api_error(b, strncmp(v->str, "NOPERM", 6) == 0 ? 403 : 400, v->str);
    } else {
        tb_puts(b, "{\"reply\":");
        api_value_json(b, v);
        if (node) {
            tb_puts(b, ",\"node\":");
            tb_json_str(b, node, strlen(node));
        }
        tb_puts(b, "}");
        status = 200;
    }
    rc_value_free(v);
    return status;
}

int ops_create(const cn_who *w, const cn_form *f, textbuf *b)
{
    const char *name = form_get(f, "name");
    if (!name || !*name)
        return api_error(b, 400, "name is required");
    size_t len = strlen(name);
    api_filter_form form = {name,
                            len,
                            form_get(f, "capacity"),
                            form_get(f, "error_rate"),
                            form_get(f, "expiry"),
                            form_get(f, "layout"),
                            form_get(f, "window"),
                            form_get(f, "slices")};
    /* "1e6" as the calculator takes it; BF.RESERVE wants digits. */
    char capacity[32];
    uint64_t cap;
    if (form.capacity && api_parse_count(form.capacity, &cap)) {
        snprintf(capacity, sizeof(capacity), "%llu", (unsigned long long)cap);
        form.capacity = capacity;
    }
    const char *argv[API_RESERVE_MAX_ARGS];
    size_t lens[API_RESERVE_MAX_ARGS];
    char err[160];
    int argc = api_reserve_argv(&form, argv, lens, err, sizeof(err));
    if (argc < 0)
        return api_error(b, 400, err);
    char master[CN_ADDR], group[CN_ADDR], reason[256];
    int slot;
    if (placement_for(name, len, form_get(f, "group"), master, group, reason, sizeof(reason),
                      &slot) < 0 ||
        !master[0])
        return api_error(b, 503, reason);
    rc_value *v = run_as(w, master, (size_t)argc, argv, lens, err, sizeof(err));
    bool ok = v && v->type != '-';
    int status = answer(b, v, err, master);
    if (ok)
        catalog_touch(master, name, len, false);
    return status;
}

int ops_items(const cn_who *w, const cn_form *f, bool add, textbuf *b)
{
    const char *name = form_get(f, "name");
    const char *items = form_get(f, "items");
    if (!name || !*name)
        return api_error(b, 400, "name is required");
    if (!items)
        items = "";
    size_t len = strlen(name);
    char master[CN_ADDR];
    int gi;
    if (!api_key_master(name, len, master, &gi))
        return api_error(b, 503, "the filter's master does not answer, or no such filter");
    catalog_lock();
    cn_filter *row = catalog_find(name, len);
    bool cuckoo = row && row->cuckoo;
    catalog_unlock();
    /* One item a line; "\r\n" as "\n". */
    const char **argv = malloc((ITEMS_MAX + 3) * sizeof(char *));
    size_t *lens = malloc((ITEMS_MAX + 3) * sizeof(size_t));
    if (!argv || !lens) {
        free(argv);
        free(lens);
        return api_error(b, 503, "out of memory");
    }
    size_t argc = 0;
    argv[argc] = cuckoo ? (add ? "CF.INSERT" : "CF.MEXISTS") : (add ? "BF.MADD" : "BF.MEXISTS");
    lens[argc] = strlen(argv[argc]);
    argc++;
    argv[argc] = name;
    lens[argc++] = len;
    if (cuckoo && add) {
        argv[argc] = "ITEMS";
        lens[argc++] = 5;
    }
    size_t first = argc;
    for (const char *p = items; *p && argc < ITEMS_MAX + 3;) {
        size_t n = strcspn(p, "\n");
        size_t m = n && p[n - 1] == '\r' ? n - 1 : n;
        if (m) {
            argv[argc] = p;
            lens[argc++] = m;
        }
        p += n + (p[n] == '\n');
    }
    int status;
    if (argc == first) {
        status = api_error(b, 400, "items are required, one a line");
    } else {
        char err[160];
        rc_value *v = run_as(w, master, argc, argv, lens, err, sizeof(err));
        if (v && v->type == '*') {
            tb_puts(b, "{\"results\":[");
            for (size_t i = 0; i < v->n; i++) {
                const rc_value *e = &v->elem[i];
                if (e->type == '-') { /* e.g. the filter is read-only */
                    textbuf eb = {0};
                    status = api_error(&eb, 400, e->str);
                    b->len = 0;
                    tb_add(b, eb.p, eb.len);
                    tb_free(&eb);
                    rc_value_free(v);
                    goto done;
                }
                tb_printf(b, "%s%lld", i ? "," : "", e->type == ':' ? e->integer : 0);
            }
            tb_puts(b, "]}");
            rc_value_free(v);
            status = 200;
            if (add)
                catalog_touch(master, name, len, false);
        } else {
            status = answer(b, v, err, NULL);
        }
    }
done:
    free(argv);
    free(lens);
    return status;
}

int ops_key(const cn_who *w, const cn_form *f, const char *what, textbuf *b)
{
    const char *name = form_get(f, "name");
    if (!name || !*name)
        return api_error(b, 400, "name is required");
    size_t len = strlen(name);
    char master[CN_ADDR];
    int gi;
    if (!api_key_master(name, len, master, &gi))
        return api_error(b, 503, "the filter's master does not answer, or no such filter");
    const char *argv[4];
    size_t argc;
    if (strcmp(what, "expire") == 0) {
        const char *s = form_get(f, "seconds");
        if (!s || !*s)
            return api_error(b, 400, "seconds is required");
        argv[0] = "EXPIRE", argv[1] = name, argv[2] = s, argc = 3;
    } else if (strcmp(what, "persist") == 0) {
        argv[0] = "PERSIST", argv[1] = name, argc = 2;
    } else if (strcmp(what, "delete") == 0) {
        argv[0] = "DEL", argv[1] = name, argc = 2;
    } else {
        const char *ro = form_get(f, "readonly");
        if (!ro || (strcmp(ro, "yes") != 0 && strcmp(ro, "no") != 0))
            return api_error(b, 400, "readonly must be yes or no");
        argv[0] = "BF.CONFIG", argv[1] = name, argv[2] = "READONLY", argv[3] = ro, argc = 4;
    }
    size_t lens[4];
    for (size_t i = 0; i < argc; i++)
        lens[i] = i == 1 ? len : strlen(argv[i]);
    char err[160];
    rc_value *v = run_as(w, master, argc, argv, lens, err, sizeof(err));
    bool ok = v && v->type != '-';
    int status = answer(b, v, err, NULL);
    if (ok)
        catalog_touch(master, name, len, strcmp(what, "delete") == 0);
    return status;
}

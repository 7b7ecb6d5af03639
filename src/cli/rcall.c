/* One command at a time over an rc_conn, and the shared connection options
 * (rcall.h); the replies are parsed by rvalue.c. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rcall.h"

/* ---- calls ---- */

int rc_send(rc_conn *c, size_t argc, const char *const *argv, const size_t *lens)
{
    if (rc_begin(c, argc) != 0)
        return -1;
    for (size_t i = 0; i < argc; i++)
        if (rc_arg(c, argv[i], lens ? lens[i] : strlen(argv[i])) != 0)
            return -1;
    return 0;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

rc_value *rc_read(rc_conn *c, int timeout_ms, char *err, size_t errlen)
{
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        rc_value *v;
        size_t used = 0;
        int rc = rc_value_parse(c->in.p + c->in.pos, c->in.len - c->in.pos, &used, &v);
        if (rc < 0) {
            snprintf(err, errlen, "cannot parse the server's reply");
            return NULL;
        }
        if (rc > 0) {
            c->in.pos += used;
            if (c->in.pos == c->in.len)
                c->in.pos = c->in.len = 0;
            return v;
        }
        long long left = deadline - now_ms();
        if (left <= 0) {
            snprintf(err, errlen, "no reply within %d ms", timeout_ms);
            return NULL;
        }
        if (rc_pump(c, (int)left, err, errlen) != 0)
            return NULL;
    }
}

rc_value *rc_call(rc_conn *c, int timeout_ms, char *err, size_t errlen, size_t argc,
                  const char *const *argv, const size_t *lens)
{
    if (rc_send(c, argc, argv, lens) != 0) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return rc_read(c, timeout_ms, err, errlen);
}

rc_value *rc_callv(rc_conn *c, int timeout_ms, char *err, size_t errlen, const char *cmd, ...)
{
    const char *argv[64];
    size_t argc = 0;
    argv[argc++] = cmd;
    va_list ap;
    va_start(ap, cmd);
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL && argc < 64)
        argv[argc++] = a;
    va_end(ap);
    return rc_call(c, timeout_ms, err, errlen, argc, argv, NULL);
}

/* ---- connection options ---- */

const char rc_opts_help[] =
    "      --user NAME       ACL user to authenticate as (needs --pass)\n"
    "  -a, --pass PASSWORD   password: AUTH [user] PASSWORD first (default: the\n"
    "                        REDISCLI_AUTH environment variable, as redis-cli)\n"
    "      --tls             connect with TLS\n"
    "      --cacert FILE     CA certificates to check the server's certificate with\n"
    "      --cacertdir DIR   a directory of them (neither: the system's CAs)\n"
    "      --cert FILE       client certificate, for servers that ask for one\n"
    "      --tls-key FILE    its private key (redis-cli's --key)\n"
    "      --sni NAME        server name to ask for and check the certificate\n"
    "                        against (default: the host)\n"
    "      --insecure        do not check the server's certificate\n";

int rc_opts_arg(rc_opts *o, int argc, char **argv, int *i, const char *prog)
{
    const char *a = argv[*i];
    if (strcmp(a, "--tls") == 0) {
        o->tls.on = true;
        return 1;
    }
    if (strcmp(a, "--insecure") == 0) {
        o->tls.insecure = true;
        return 1;
    }
    static const char *const valued[] = {"--user",      "-a",     "--pass",    "--cacert",
                                         "--cacertdir", "--cert", "--tls-key", "--sni"};
    const char **slot[] = {&o->user,          &o->pass,     &o->pass,    &o->tls.cacert,
                           &o->tls.cacertdir, &o->tls.cert, &o->tls.key, &o->tls.sni};
    for (size_t j = 0; j < sizeof valued / sizeof valued[0]; j++) {
        if (strcmp(a, valued[j]) != 0)
            continue;
        if (*i + 1 >= argc) {
            fprintf(stderr, "%s: %s needs a value\n", prog, a);
            return -1;
        }
        *slot[j] = argv[++*i];
        return 1;
    }
    return 0;
}

const char *rc_opts_finish(rc_opts *o)
{
    if (!o->pass)
        o->pass = getenv("REDISCLI_AUTH");
    if (o->timeout_ms <= 0)
        o->timeout_ms = 5000;
    const rc_tls *t = &o->tls;
    return o->user && !o->pass                     ? "--user needs --pass"
           : (t->cert != NULL) != (t->key != NULL) ? "--cert and --tls-key go together"
           : !t->on && (t->cacert || t->cacertdir || t->cert || t->sni || t->insecure)
               ? "TLS options need --tls"
               : NULL;
}

int rc_open(rc_conn *c, const char *host, const char *port, const rc_opts *o, char *err,
            size_t errlen)
{
    if (rc_connect(c, host, port, err, errlen) != 0)
        return -1;
    if (o->tls.on && rc_tls_start(c, host, port, &o->tls, err, errlen) != 0) {
        rc_close(c);
        return -1;
    }
    if (!o->pass)
        return 0;
    /* AUTH [user] password, as redis-cli sends it. */
    const char *args[] = {"AUTH", o->user ? o->user : o->pass, o->pass};
    rc_value *r = rc_call(c, o->timeout_ms > 0 ? o->timeout_ms : 5000, err, errlen, o->user ? 3 : 2,
                          args, NULL);
    if (!r) {
        rc_close(c);
        return -1;
    }
    int rc = 0;
    if (r->type == '-') {
        snprintf(err, errlen, "authentication failed: %s", r->str);
        rc_close(c);
        rc = -1;
    }
    rc_value_free(r);
    return rc;
}

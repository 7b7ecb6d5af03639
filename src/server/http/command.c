/* The console's commands run through a worker like any client's: one end
 * of a socket pair is handed to a worker as a new connection, the request
 * is written on the other end in RESP and its reply read back. So the
 * command goes through the same dispatch as RESP (authentication, arity,
 * maxmemory, the log's reservation, replication refusals) and its reply
 * arrives only once the log is durable when appendfsync always says so.
 * The connection authenticates first as the request's user (AUTH user
 * password, the one the request gave), so the ACL check the worker makes
 * is that user's: the console cannot do what the user could not. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "acl.h"
#include "http.h"
#include "server.h"
#include "util.h"

#define COMMAND_TIMEOUT_MS 30000
#define REPLY_MAX (64u << 20)

static void encode(textbuf *b, int argc, const char *const *argv, const size_t *lens)
{
    tb_printf(b, "*%d\r\n", argc);
    for (int i = 0; i < argc; i++) {
        tb_printf(b, "$%zu\r\n", lens[i]);
        tb_add(b, argv[i], lens[i]);
        tb_add(b, "\r\n", 2);
    }
}

static bool write_all(int fd, const char *p, size_t n, int64_t deadline)
{
    while (n) {
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        int left = (int)(deadline - mono_us() / 1000);
        if (left <= 0 || poll(&pf, 1, left) <= 0)
            return false;
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return false;
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        }
    }
    return true;
}

/* Read replies until `want` of them are whole; each is appended to outs[i]. */
static bool read_replies(int fd, textbuf **outs, int want, int64_t deadline, char *err,
                         size_t errlen)
{
    textbuf in = {0};
    size_t pos = 0;
    int got = 0;
    bool ok = false;
    while (got < want) {
        long r =
            in.len > pos ? resp_reply_json(in.p + pos, in.len - pos, outs[got]) : RESP_INCOMPLETE;
        if (r == RESP_MALFORMED) {
            snprintf(err, errlen, "malformed reply");
            goto done;
        }
        if (r > 0) {
            pos += (size_t)r;
            got++;
            continue;
        }
        if (in.len > REPLY_MAX) {
            snprintf(err, errlen, "reply too large");
            goto done;
        }
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int left = (int)(deadline - mono_us() / 1000);
        if (left <= 0 || poll(&pf, 1, left) <= 0) {
            snprintf(err, errlen, "no reply in time");
            goto done;
        }
        char buf[65536];
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
            snprintf(err, errlen, "connection closed");
            goto done;
        }
        if (n > 0)
            tb_add(&in, buf, (size_t)n);
        if (in.failed) {
            snprintf(err, errlen, "out of memory");
            goto done;
        }
    }
    ok = true;
done:
    tb_free(&in);
    return ok;
}

bool http_command(const http_who *who, int argc, const char *const *argv, const size_t *lens,
                  textbuf *out, char *err, size_t errlen)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(err, errlen, "socketpair: %s", strerror(errno));
        return false;
    }
    /* As the listener counts an accepted connection before handing it over. */
    atomic_fetch_add(&srv.total_connections, 1);
    atomic_fetch_add(&srv.connected, 1);
    worker_adopt(sv[0]);
    int fd = sv[1];
    int64_t deadline = mono_us() / 1000 + COMMAND_TIMEOUT_MS;
    textbuf req = {0}, auth = {0};
    textbuf *outs[2];
    int want = 0;
    if (who->pass) {
        const char *name = who->user->name;
        const char *aargv[] = {"AUTH", name, who->pass};
        size_t alens[] = {4, strlen(name), who->plen};
        encode(&req, 3, aargv, alens);
        outs[want++] = &auth;
    }
    encode(&req, argc, argv, lens);
    outs[want++] = out;
    bool ok = !req.failed && write_all(fd, req.p, req.len, deadline);
    if (!ok)
        snprintf(err, errlen, "could not send the command");
    else
        ok = read_replies(fd, outs, want, deadline, err, errlen);
    if (ok && want == 2 && (auth.p == NULL || strcmp(auth.p, "\"OK\"") != 0)) {
        snprintf(err, errlen, "the server refused the password");
        ok = false;
    }
    if (req.p)
        explicit_bzero(req.p, req.len);
    tb_free(&req);
    tb_free(&auth);
    close(fd);
    return ok;
}

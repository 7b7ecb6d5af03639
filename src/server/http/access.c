/* Who a request is and what it may do (docs/CONSOLE.md, "Users"). The
 * listener has the RESP port's users: HTTP Basic credentials are a user
 * name and password checked as AUTH checks them, and a failure is logged
 * in ACL LOG as a failed AUTH is, its client-info naming the HTTP peer.
 * What a page or a button may do is the ACL check of the command it
 * stands for (docs/CONSOLE.md lists them), so there is no second set of
 * rules to keep in step with the users'. */
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "acl.h"
#include "http.h"
#include "util.h"

/* "ip:port" as Redis writes a peer ("[ip]:port" for IPv6). */
static void format_addr(const struct sockaddr *sa, socklen_t len, char *out, size_t outlen)
{
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (sa == NULL || getnameinfo(sa, len, host, sizeof(host), serv, sizeof(serv),
                                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(out, outlen, "?:0");
        return;
    }
    snprintf(out, outlen, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, serv);
}

/* A client-info line in CLIENT LIST's format for an HTTP request: no
 * client id or RESP state, the peer and local addresses of its
 * connection, lib-name=http. */
static void client_info(struct MHD_Connection *conn, char *out, size_t outlen)
{
    char peer[NI_MAXHOST + NI_MAXSERV + 4] = "?:0", local[sizeof(peer)] = "?:0";
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (i && i->client_addr)
        format_addr(i->client_addr,
                    i->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                          : sizeof(struct sockaddr_in),
                    peer, sizeof(peer));
    int fd = -1;
    i = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (i) {
        fd = i->connect_fd;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
            format_addr((struct sockaddr *)&ss, sl, local, sizeof(local));
    }
    snprintf(out, outlen,
             "id=0 addr=%s laddr=%s fd=%d name= age=0 idle=0 flags=N db=0 sub=0 psub=0 ssub=0 "
             "multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 "
             "tot-mem=0 events=r cmd=NULL user=default redir=-1 resp=2 lib-name=http lib-ver=",
             peer, local, fd);
}

static bool login_as(http_who *who, const char *user, size_t ulen, const char *pass, size_t plen)
{
    acl_user *u = acl_user_get(user, ulen);
    if (u == NULL || !acl_user_check_password(u, pass, plen)) {
        acl_user_put(u);
        return false;
    }
    who->user = u;
    who->pass = mem_dup(pass, plen);
    who->plen = plen;
    if (who->pass == NULL) {
        access_release(who);
        return false;
    }
    return true;
}

bool access_login(struct MHD_Connection *conn, http_who *who)
{
    *who = (http_who){0};
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (h == NULL) {
        /* No credentials: the default user, when it needs no password (a
         * browser's first request, answered with the challenge, is no
         * failed login). */
        if (!acl_default_nopass())
            return false;
        who->user = acl_user_get("default", 7);
        return who->user != NULL;
    }
    const char *user = "default", *pass = NULL;
    char *buser = NULL, *bpass = NULL;
    if (strncmp(h, "Bearer ", 7) == 0) {
        pass = h + 7; /* the default user's password, as requirepass was */
    } else {
        buser = MHD_basic_auth_get_username_password(conn, &bpass);
        if (buser && buser[0])
            user = buser;
        pass = bpass;
    }
    bool ok = pass && login_as(who, user, strlen(user), pass, strlen(pass));
    if (!ok) {
        char info[1024];
        client_info(conn, info, sizeof(info));
        acl_log_add(ACL_DENIED_AUTH, 0, "AUTH", 4, user, strlen(user), info);
    }
    MHD_free(buser);
    MHD_free(bpass);
    return ok;
}

void access_release(http_who *who)
{
    acl_user_put(who->user);
    if (who->pass) {
        explicit_bzero(who->pass, who->plen);
        free(who->pass);
    }
    *who = (http_who){0};
}

bool access_may(const http_who *who, int argc, const char *const *argv, const size_t *lens)
{
    const command *cmd = command_lookup(argv[0], lens[0]);
    int pos;
    return cmd && who->user &&
           acl_check(who->user, cmd, argc, (const char **)argv, lens, &pos) == ACL_OK;
}

bool access_may_cmd(const http_who *who, const char *name)
{
    const char *argv[] = {name};
    size_t lens[] = {strlen(name)};
    return access_may(who, 1, argv, lens);
}

bool access_refuse(struct MHD_Connection *conn, const http_who *who, const char *name, char *msg,
                   size_t msglen)
{
    if (access_may_cmd(who, name))
        return false;
    const command *cmd = command_lookup(name, strlen(name));
    char info[1024];
    client_info(conn, info, sizeof(info));
    const char *uname = who->user ? who->user->name : "default";
    const char *cname = cmd ? cmd->name : name;
    acl_log_add(ACL_DENIED_CMD, 0, cname, strlen(cname), uname, strlen(uname), info);
    snprintf(msg, msglen, "NOPERM this user has no permissions to run the '%s' command", cname);
    return true;
}

const char *access_info_command(const value_type *t)
{
    /* Cuckoo filters answer CF.INFO; the Bloom family (scalable, counting,
     * windowed) BF.INFO. */
    return t && strcmp(t->type_reply, "MBbloomCF") == 0 ? "CF.INFO" : "BF.INFO";
}

bool access_may_read(const http_who *who, const value_type *t, const char *key, size_t klen)
{
    const char *name = access_info_command(t);
    const char *argv[] = {name, key};
    size_t lens[] = {strlen(name), klen};
    return access_may(who, 2, argv, lens);
}

bool access_may_read_key(const http_who *who, const char *key, size_t klen)
{
    ks_ref ref;
    kv_entry *e = ks_open(&ref, key, klen, false);
    const value_type *t = e ? e->obj->type : NULL;
    ks_close(&ref);
    return access_may_read(who, t, key, klen);
}

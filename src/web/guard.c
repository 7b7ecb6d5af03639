/* Who may talk to the HTTP listener (guard.h). The Host check is what stops
 * DNS rebinding: a page of evil.example whose name is made to resolve to
 * 127.0.0.1 is same-origin with the console as far as the browser is
 * concerned, but its requests still say "Host: evil.example". Only names
 * can be rebound, so only names are checked. */
#include "guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#define NAME_MAX_LEN 253

typedef struct hostname {
    char name[NAME_MAX_LEN + 1];
    size_t len;
    int family; /* AF_INET, AF_INET6: an address (in addr); 0: a name */
    unsigned char addr[16];
    int port; /* -1: none given */
} hostname;

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_';
}

/* "name", "name:port", "[v6]", "[v6]:port" (RFC 9110's Host, without the
 * forms no browser sends: empty ports, userinfo, percent-encoding, zones). */
static bool parse_host(const char *s, size_t len, hostname *h)
{
    size_t nend, i;
    const char *n;
    h->port = -1;
    h->family = 0;
    if (len && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (close == NULL)
            return false;
        n = s + 1;
        h->len = (size_t)(close - n);
        nend = (size_t)(close - s) + 1;
    } else {
        n = s;
        for (i = 0; i < len && s[i] != ':'; i++)
            if (!name_char(s[i]))
                return false;
        h->len = i;
        nend = i;
    }
    if (h->len == 0 || h->len > NAME_MAX_LEN)
        return false;
    memcpy(h->name, n, h->len);
    h->name[h->len] = '\0';
    if (memchr(h->name, '\0', h->len))
        return false;
    if (nend < len) {
        if (s[nend] != ':' || len - nend - 1 == 0 || len - nend - 1 > 5)
            return false;
        long port = 0;
        for (i = nend + 1; i < len; i++) {
            if (s[i] < '0' || s[i] > '9')
                return false;
            port = port * 10 + (s[i] - '0');
        }
        if (port > 65535)
            return false;
        h->port = (int)port;
    }
    if (s[0] == '[') {
        if (inet_pton(AF_INET6, h->name, h->addr) != 1)
            return false;
        h->family = AF_INET6;
    } else if (inet_pton(AF_INET, h->name, h->addr) == 1) {
        h->family = AF_INET;
    }
    return true;
}

static bool same_host(const hostname *a, const hostname *b)
{
    if (a->family != b->family)
        return false;
    if (a->family == AF_INET)
        return memcmp(a->addr, b->addr, 4) == 0;
    if (a->family == AF_INET6)
        return memcmp(a->addr, b->addr, 16) == 0;
    return a->len == b->len && strncasecmp(a->name, b->name, a->len) == 0;
}

static bool loopback_addr(int family, const unsigned char *a)
{
    if (family == AF_INET)
        return a[0] == 127;
    if (family == AF_INET6) {
        static const unsigned char one[16] = {[15] = 1};
        static const unsigned char mapped[12] = {[10] = 0xff, [11] = 0xff};
        return memcmp(a, one, 16) == 0 || (memcmp(a, mapped, 12) == 0 && a[12] == 127);
    }
    return false;
}

/* http-bind as a name ("metrics.lan"); false for an address or a wildcard,
 * which need no match (addresses are answered in any case). */
static bool bind_name(const char *bind, hostname *h)
{
    return bind && parse_host(bind, strlen(bind), h) && h->port == -1 && h->family == 0;
}

bool http_host_allowed(const char *host, size_t len, const char *bind, const char *allowed)
{
    hostname h, other;
    if (host == NULL || !parse_host(host, len, &h))
        return false;
    /* An address is no rebinding: a page whose origin is an address was
     * loaded from that address, so only this server's own pages have it. */
    if (h.family || (h.len == 9 && strncasecmp(h.name, "localhost", 9) == 0))
        return true;
    if (bind_name(bind, &other) && same_host(&h, &other))
        return true;
    for (const char *p = allowed ? allowed : ""; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        size_t n = strcspn(p, " \t,");
        if (n && parse_host(p, n, &other) && same_host(&h, &other) &&
            (other.port == -1 || other.port == h.port))
            return true;
        p += n;
    }
    return false;
}

bool http_peer_is_loopback(const struct sockaddr *sa)
{
    if (sa == NULL)
        return false;
    if (sa->sa_family == AF_INET)
        return loopback_addr(AF_INET,
                             (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr);
    if (sa->sa_family == AF_INET6)
        return loopback_addr(AF_INET6, ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr);
    return sa->sa_family == AF_UNIX;
}

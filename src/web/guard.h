/* Who may talk to the HTTP listener (guard.c): the Host allow-list and the
 * loopback test of protected mode. Pure (no settings, no state), fuzzed and
 * unit-tested. */
#ifndef BLOOMERY_WEB_GUARD_H
#define BLOOMERY_WEB_GUARD_H

#include <stdbool.h>
#include <stddef.h>

struct sockaddr;

/* Whether a request naming host (its Host header, "name[:port]" or
 * "[v6]:port") may be answered: an IPv4 or IPv6 address, "localhost", the
 * name the listener is bound to (bind: http-bind), or an entry of allowed
 * (http-allowed-hosts: separated by spaces, "name" for any port or
 * "name:port" for that one); any port unless the entry names one. Names
 * compare without regard to case, addresses by value ("[::1]" is
 * "[0:0::1]"). Anything malformed is refused. */
bool http_host_allowed(const char *host, size_t len, const char *bind, const char *allowed);

/* 127.0.0.0/8, ::1 and ::ffff:127.x: a peer on the loopback interface. */
bool http_peer_is_loopback(const struct sockaddr *sa);

#endif

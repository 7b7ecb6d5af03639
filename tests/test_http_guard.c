/* The HTTP listener's guard (src/web/guard.c): which Host headers
 * are answered (the DNS-rebinding defence) and which peers count as the
 * loopback interface for protected mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "guard.h"

static bool allowed(const char *host, const char *bind, const char *list)
{
    return http_host_allowed(host, strlen(host), bind, list);
}

/* localhost and any address: a page is only ever same-origin with an
 * address by being loaded from it, so addresses cannot be rebound. */
static void test_localhost_and_addresses(void **state)
{
    (void)state;
    const char *ok[] = {"localhost",      "localhost:9121",
                        "LOCALHOST:80",   "127.0.0.1",
                        "127.0.0.1:9121", "127.1.2.3:1",
                        "[::1]",          "[::1]:9121",
                        "[0:0::1]:9121",  "[::ffff:127.0.0.1]:9121",
                        "10.0.0.1:9121",  "[fd00::5]:80",
                        "0.0.0.0"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (!allowed(ok[i], "127.0.0.1", ""))
            fail_msg("%s refused", ok[i]);
}

static void test_rebinding_names_refused(void **state)
{
    (void)state;
    const char *bad[] = {"evil.example",
                         "evil.example:9121",
                         "localhost.evil.example",
                         "127.0.0.1.evil.example:9121",
                         "localhost.",
                         "foo.localhost",
                         "::1",
                         "[::1",
                         "[::1]x",
                         "[::1]:",
                         "[evil.example]:80",
                         "[10.0.0.1]",
                         "10.0.0.1:9121:1",
                         "1.2.3.4.5",
                         "",
                         ":9121",
                         "localhost:",
                         "localhost:65536",
                         "localhost:123456",
                         "localhost:9121x",
                         "localhost:-1",
                         "user@localhost",
                         "local host",
                         "localhost:9121 "};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (allowed(bad[i], "127.0.0.1", ""))
            fail_msg("%s answered", bad[i]);
    /* A NUL inside the value. */
    assert_false(http_host_allowed("localhost\0.evil", 15, "127.0.0.1", ""));
    assert_false(http_host_allowed(NULL, 0, "127.0.0.1", "x"));
}

static void test_bound_name(void **state)
{
    (void)state;
    assert_true(allowed("Metrics.LAN:9121", "metrics.lan", ""));
    assert_true(allowed("metrics.lan", "metrics.lan", ""));
    assert_false(allowed("metrics.lan.evil:9121", "metrics.lan", ""));
    /* An address or a wildcard bound names no host. */
    const char *binds[] = {"0.0.0.0", "::", "*", "", "10.1.2.3", "fd00::5", "[fd00::5]", NULL};
    for (size_t i = 0; i < sizeof(binds) / sizeof(binds[0]); i++)
        assert_false(allowed("evil.example", binds[i], ""));
    assert_false(allowed("evil.example", NULL, NULL));
}

static void test_allowed_list(void **state)
{
    (void)state;
    const char *list = "metrics.example.com  console.lan:8080\tproxy.lan,grafana.lan";
    assert_true(allowed("metrics.example.com", "127.0.0.1", list));
    assert_true(allowed("metrics.example.com:9121", "127.0.0.1", list));
    assert_true(allowed("METRICS.example.com:1", "127.0.0.1", list));
    assert_true(allowed("console.lan:8080", "127.0.0.1", list));
    assert_false(allowed("console.lan", "127.0.0.1", list));
    assert_false(allowed("console.lan:8081", "127.0.0.1", list));
    assert_true(allowed("proxy.lan:443", "127.0.0.1", list));
    assert_true(allowed("grafana.lan", "127.0.0.1", list));
    assert_false(allowed("example.com", "127.0.0.1", list));
    assert_false(allowed("metrics.example.co", "127.0.0.1", list));
    assert_false(allowed("metrics.example.com.evil", "127.0.0.1", list));
    /* A malformed entry matches nothing and spoils no other. */
    assert_true(allowed("ok.example", "127.0.0.1", "bad:port:x ok.example"));
    assert_false(allowed("bad", "127.0.0.1", "bad:port:x"));
}

static void test_peer_loopback(void **state)
{
    (void)state;
    struct sockaddr_in v4 = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &v4.sin_addr);
    assert_true(http_peer_is_loopback((struct sockaddr *)&v4));
    inet_pton(AF_INET, "127.255.0.9", &v4.sin_addr);
    assert_true(http_peer_is_loopback((struct sockaddr *)&v4));
    inet_pton(AF_INET, "10.200.0.1", &v4.sin_addr);
    assert_false(http_peer_is_loopback((struct sockaddr *)&v4));
    inet_pton(AF_INET, "128.0.0.1", &v4.sin_addr);
    assert_false(http_peer_is_loopback((struct sockaddr *)&v4));
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "::1", &v6.sin6_addr);
    assert_true(http_peer_is_loopback((struct sockaddr *)&v6));
    inet_pton(AF_INET6, "::ffff:127.0.0.2", &v6.sin6_addr);
    assert_true(http_peer_is_loopback((struct sockaddr *)&v6));
    inet_pton(AF_INET6, "::ffff:10.0.0.1", &v6.sin6_addr);
    assert_false(http_peer_is_loopback((struct sockaddr *)&v6));
    inet_pton(AF_INET6, "fe80::1", &v6.sin6_addr);
    assert_false(http_peer_is_loopback((struct sockaddr *)&v6));
    inet_pton(AF_INET6, "::", &v6.sin6_addr);
    assert_false(http_peer_is_loopback((struct sockaddr *)&v6));
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    assert_true(http_peer_is_loopback((struct sockaddr *)&un));
    assert_false(http_peer_is_loopback(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_localhost_and_addresses),
        cmocka_unit_test(test_rebinding_names_refused),
        cmocka_unit_test(test_bound_name),
        cmocka_unit_test(test_allowed_list),
        cmocka_unit_test(test_peer_loopback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

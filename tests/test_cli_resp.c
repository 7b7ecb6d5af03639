/* The load/check RESP reply parser (src/cli/rclient.c): every reply type,
 * every prefix of a reply is "incomplete", malformed input is refused, and
 * random bytes never crash it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/rclient.c"

static int parse(const char *s, rc_reply *r, long long *ints, size_t cap, size_t *used)
{
    memset(r, 0, sizeof *r);
    r->ints = ints;
    r->ints_cap = cap;
    return rc_parse(s, strlen(s), used, r);
}

static void test_types(void **state)
{
    (void)state;
    rc_reply r;
    long long ints[8];
    size_t used;
    assert_int_equal(parse("+OK\r\n", &r, NULL, 0, &used), 1);
    assert_int_equal(r.type, '+');
    assert_int_equal(used, 5);
    assert_memory_equal(r.str, "OK", 2);
    assert_int_equal(parse(":-42\r\nrest", &r, NULL, 0, &used), 1);
    assert_int_equal(r.integer, -42);
    assert_int_equal(used, 6);
    assert_int_equal(parse("-ERR non scaling filter is full\r\n", &r, NULL, 0, &used), 1);
    assert_int_equal(r.errlen, strlen("ERR non scaling filter is full"));
    assert_memory_equal(r.err, "ERR non", 7);
    assert_int_equal(parse("$5\r\nab\r\nc\r\n", &r, NULL, 0, &used), 1);
    assert_int_equal(r.len, 5);
    assert_memory_equal(r.str, "ab\r\nc", 5);
    assert_int_equal(parse("$-1\r\n", &r, NULL, 0, &used), 1);
    assert_int_equal(parse("*-1\r\n", &r, NULL, 0, &used), 1);
    assert_int_equal(r.nelem, SIZE_MAX);
    assert_int_equal(parse("*0\r\n", &r, ints, 8, &used), 1);
    assert_int_equal(r.nelem, 0);
    assert_int_equal(parse("*4\r\n:1\r\n:0\r\n$1\r\nx\r\n*1\r\n:5\r\n", &r, ints, 8, &used), 1);
    assert_int_equal(r.nelem, 4);
    assert_int_equal(ints[0], 1);
    assert_int_equal(ints[1], 0);
    assert_int_equal(ints[2], -1);
    assert_int_equal(ints[3], -1);
    assert_int_equal(parse("*3\r\n:1\r\n-ERR full\r\n:0\r\n", &r, ints, 2, &used), 1);
    assert_int_equal(r.nerr, 1);
    assert_memory_equal(r.err, "ERR full", 8);
    /* RESP3 types a server might send. */
    assert_int_equal(parse("_\r\n", &r, NULL, 0, &used), 1);
    assert_int_equal(parse("%1\r\n+a\r\n:1\r\n", &r, ints, 8, &used), 1);
    assert_int_equal(parse("!3\r\nbad\r\n", &r, NULL, 0, &used), 1);
    assert_memory_equal(r.err, "bad", 3);
}

static void test_every_prefix_is_incomplete(void **state)
{
    (void)state;
    const char *replies[] = {"+OK\r\n",
                             ":12345\r\n",
                             "-ERR x y\r\n",
                             "$3\r\nabc\r\n",
                             "*3\r\n:1\r\n$2\r\nhi\r\n*1\r\n-E\r\n",
                             "$0\r\n\r\n"};
    for (size_t i = 0; i < sizeof replies / sizeof replies[0]; i++) {
        size_t n = strlen(replies[i]), used;
        for (size_t k = 0; k < n; k++) {
            rc_reply r = {0};
            assert_int_equal(rc_parse(replies[i], k, &used, &r), 0);
        }
        rc_reply r = {0};
        assert_int_equal(rc_parse(replies[i], n, &used, &r), 1);
        assert_int_equal(used, n);
    }
}

static void test_malformed(void **state)
{
    (void)state;
    const char *bad[] = {
        "?x\r\n",         ":abc\r\n", ":\r\n",       "$-2\r\n",
        "$3\r\nabcd\r\n", "*-5\r\n",  "*1\r\n?\r\n", ":99999999999999999999999\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc_reply r = {0};
        size_t used;
        assert_int_equal(rc_parse(bad[i], strlen(bad[i]), &used, &r), -1);
    }
    /* Nesting deeper than the parser follows. */
    char deep[200];
    size_t n = 0;
    for (int i = 0; i < 40; i++)
        n += (size_t)snprintf(deep + n, sizeof deep - n, "*1\r\n");
    n += (size_t)snprintf(deep + n, sizeof deep - n, ":1\r\n");
    rc_reply r = {0};
    size_t used;
    assert_int_equal(rc_parse(deep, n, &used, &r), -1);
}

static void test_random_bytes(void **state)
{
    (void)state;
    unsigned long long x = 88172645463325252ULL;
    char buf[64];
    long long ints[4];
    const char alphabet[] = "+-:$*_%!#\r\n0123456789-ab";
    for (int iter = 0; iter < 200000; iter++) {
        size_t n = 0;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t len = x % sizeof buf;
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[n++] = alphabet[x % (sizeof alphabet - 1)];
        }
        rc_reply r = {.ints = ints, .ints_cap = 4};
        size_t used = 0;
        int rc = rc_parse(buf, n, &used, &r);
        assert_true(rc >= -1 && rc <= 1);
        if (rc == 1)
            assert_true(used <= n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_every_prefix_is_incomplete),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_random_bytes),
    };
    return cmocka_run_group_tests_name("cli_resp", tests, NULL, NULL);
}

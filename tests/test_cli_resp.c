/* The CLI's RESP reply parsers: load/check's counting one (rclient.c) and
 * the tree the console reads (rvalue.c): every reply type, every prefix of
 * a reply is "incomplete", malformed input is refused, random bytes never
 * crash them, and both end a reply at the same byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/rclient.c"
#include "../src/cli/rvalue.c"

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
        rc_value *v = NULL;
        size_t vused = 0;
        int vrc = rc_value_parse(buf, n, &vused, &v);
        if (vrc == 1) {
            assert_int_equal(rc, 1);
            assert_int_equal(vused, used);
        }
        rc_value_free(v);
    }
}

static rc_value *tree(const char *s, int want)
{
    rc_value *v = NULL;
    size_t used = 0;
    assert_int_equal(rc_value_parse(s, strlen(s), &used, &v), want);
    if (want == 1)
        assert_int_equal(used, strlen(s));
    return v;
}

static void test_tree(void **state)
{
    (void)state;
    /* SCAN's reply: a cursor and a list of names. */
    static const char scan[] = "*2\r\n$2\r\n17\r\n*3\r\n$1\r\na\r\n$0\r\n\r\n$3\r\nb\0c\r\n";
    rc_value *v = NULL;
    size_t used = 0;
    assert_int_equal(rc_value_parse(scan, sizeof scan - 1, &used, &v), 1);
    assert_int_equal(used, sizeof scan - 1);
    assert_int_equal(v->type, '*');
    assert_int_equal(v->n, 2);
    assert_string_equal(v->elem[0].str, "17");
    assert_int_equal(v->elem[1].n, 3);
    assert_int_equal(v->elem[1].elem[1].len, 0);
    assert_int_equal(v->elem[1].elem[2].len, 3);
    assert_memory_equal(v->elem[1].elem[2].str, "b\0c", 3);
    rc_value_free(v);
    /* RESP3: a map as alternating keys and values, null, boolean, double,
     * verbatim text without its format prefix. */
    v = tree("%2\r\n+role\r\n+master\r\n+n\r\n_\r\n", 1);
    assert_int_equal(v->n, 4);
    assert_string_equal(v->elem[1].str, "master");
    assert_int_equal(v->elem[3].type, '_');
    rc_value_free(v);
    v = tree("*3\r\n#t\r\n,1.5\r\n=9\r\ntxt:a:1\r\n\r\n", 1);
    assert_int_equal(v->elem[0].integer, 1);
    assert_string_equal(v->elem[1].str, "1.5");
    assert_string_equal(v->elem[2].str, "a:1\r\n");
    rc_value_free(v);
    v = tree("$-1\r\n", 1);
    assert_int_equal(v->type, '_');
    rc_value_free(v);
    v = tree("-ERR no\r\n", 1);
    assert_int_equal(v->type, '-');
    assert_string_equal(v->str, "ERR no");
    rc_value_free(v);
    for (const char *const *b =
             (const char *const[]){"?x\r\n", ":abc\r\n", "$-2\r\n", "$3\r\nabcd\r\n", "*-5\r\n",
                                   "*1\r\n?\r\n", "\r\n", NULL};
         *b; b++)
        assert_null(tree(*b, -1));
    /* Every prefix of a nested reply is incomplete. */
    const char *whole = "*2\r\n*2\r\n:1\r\n$2\r\nhi\r\n%1\r\n+k\r\n*0\r\n";
    for (size_t k = 0; k < strlen(whole); k++) {
        rc_value *p = NULL;
        assert_int_equal(rc_value_parse(whole, k, &used, &p), 0);
        assert_null(p);
    }
    rc_value_free(tree(whole, 1));
}

static void test_info_and_addr(void **state)
{
    (void)state;
    rc_value *v = tree("$50\r\n# Replication\r\nrole:slave\r\nmaster_port:7001\r\nx:1\r\n\r\n", 1);
    char b[32];
    assert_true(rc_info_field(v, "role", b, sizeof b));
    assert_string_equal(b, "slave");
    assert_int_equal(rc_info_ll(v, "master_port"), 7001);
    assert_false(rc_info_field(v, "master", b, sizeof b));
    assert_false(rc_info_field(v, "ole", b, sizeof b));
    rc_value_free(v);
    char h[64], p[8];
    assert_true(rc_split_addr("10.0.0.1:6379", h, sizeof h, p, sizeof p));
    assert_string_equal(h, "10.0.0.1");
    assert_string_equal(p, "6379");
    assert_true(rc_split_addr("[::1]:7000", h, sizeof h, p, sizeof p));
    assert_string_equal(h, "::1");
    for (const char *const *a =
             (const char *const[]){"x", ":1", "h:", "h:0", "h:65536", "h:1a", "[::1]7000", NULL};
         *a; a++)
        assert_false(rc_split_addr(*a, h, sizeof h, p, sizeof p));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types),     cmocka_unit_test(test_every_prefix_is_incomplete),
        cmocka_unit_test(test_malformed), cmocka_unit_test(test_random_bytes),
        cmocka_unit_test(test_tree),      cmocka_unit_test(test_info_and_addr),
    };
    return cmocka_run_group_tests_name("cli_resp", tests, NULL, NULL);
}

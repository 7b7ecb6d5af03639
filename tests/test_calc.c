/* bloomery calc reproduces the seeds' sizing tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testutil.h"

/* Runs `bloomery <args>`; returns its exit code and output in out. */
static int run(const char *args, char *out, size_t cap)
{
    const char *cli = getenv("BLOOMERY_CLI");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", cli ? cli : "build/bloomery", args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void expect(const char *out, const char *needle)
{
    if (!strstr(out, needle))
        fail_msg("expected '%s' in:\n%s", needle, out);
}

static void test_seed_tables(void **state)
{
    (void)state;
    char out[4096];
    /* n = 1e9, m/n = 50, k = 16: about 1e-9 and 5.82 GiB. */
    assert_int_equal(run("calc --bits-per-key 50 --hashes 16 --capacity 1e9", out, sizeof out), 0);
    expect(out, "classic FPR    1e-09");
    expect(out, "5.82 GiB");
    /* n = 1e8, p = 1e-5: about 2.40e9 bits, k = 17, 0.28 GiB (classic). */
    assert_int_equal(run("calc 1e8 1e-5", out, sizeof out), 0);
    expect(out, "2.396e+09");
    expect(out, "0.28 GiB");
    expect(out, "hashes (k)             16 (8 per block)         17");
    /* The seed's 10-minute window: n = 7e6, m/n = 30, k = 8. */
    assert_int_equal(run("calc --bits-per-key 30 --hashes 8", out, sizeof out), 0);
    expect(out, "classic FPR    9.01e-06");
    /* p = 1%: 9.59 classic bits per key; blocked stays under 10.6. */
    assert_int_equal(run("calc 1000000 0.01", out, sizeof out), 0);
    expect(out, "9.59");
    expect(out, "10.21");
}

static void test_usage_errors(void **state)
{
    (void)state;
    char out[4096];
    assert_int_equal(run("calc", out, sizeof out), 2);
    assert_int_equal(run("calc 100 1.5", out, sizeof out), 2);
    expect(out, "error rate must be in (0, 1)");
    assert_int_equal(run("calc -5 0.01", out, sizeof out), 2);
    assert_int_equal(run("calc 100 0.01 --bogus", out, sizeof out), 2);
    assert_int_equal(run("calc 1e30 0.01", out, sizeof out), 2);
    assert_int_equal(run("nosuchcommand", out, sizeof out), 2);
    assert_int_equal(run("--help", out, sizeof out), 0);
    expect(out, "exit codes");
    assert_int_equal(run("calc --help", out, sizeof out), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_tables),
        cmocka_unit_test(test_usage_errors),
    };
    return cmocka_run_group_tests_name("calc", tests, NULL, NULL);
}

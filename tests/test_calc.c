/* bloomery calc reproduces the seeds' sizing tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
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
    /* p = 1%: 9.59 classic bits per key; blocked stays under 10.6; the
     * prefix filter takes fewer than the classic one. */
    assert_int_equal(run("calc 1000000 0.01", out, sizeof out), 0);
    expect(out, "9.59");
    expect(out, "10.21");
    expect(out, "bits per key           10.21                    9.59                     9.46\n");
    expect(out, "1 (6-bit fingerprint)");
}

/* Capacities past 2^32 (and filters past 2^32 bytes): 1e10 and 6e9 items
 * at 1%. Classic bytes are RedisBloom's, recomputed here: floor(n * bpe)
 * bits rounded up to 64, bpe = -ln p / ln^2 2. Blocked bytes are whole
 * 64-byte blocks, ceil(n * 10.2065 / 512) of them, so the two capacities
 * keep their ratio 5:3. */
static void test_past_32_bits(void **state)
{
    (void)state;
    char out[4096], want[128];
    const struct {
        const char *arg, *capacity;
        unsigned long long blocked;
    } rows[] = {
        {"1e10", "capacity       10000000000\n", 12758124800ULL},
        {"6e9", "capacity       6000000000\n", 7654874880ULL},
    };
    for (size_t i = 0; i < 2; i++) {
        char args[64];
        snprintf(args, sizeof args, "calc %s 0.01", rows[i].arg);
        assert_int_equal(run(args, out, sizeof out), 0);
        expect(out, rows[i].capacity);
        double n = strtod(rows[i].arg, NULL);
        double bpe = -log(0.01) / (log(2) * log(2));
        unsigned long long bits = (unsigned long long)(n * bpe);
        unsigned long long classic = (bits + 63) / 64 * 8;
        snprintf(want, sizeof want, "bytes                  %-24llu %-24llu ", rows[i].blocked,
                 classic);
        expect(out, want);
        expect(out, "bits per key           10.21                    9.59                     9.4");
    }
    assert_int_equal(rows[0].blocked % 64, 0);
    assert_int_equal(rows[0].blocked * 3, rows[1].blocked * 5);
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
        cmocka_unit_test(test_past_32_bits),
    };
    return cmocka_run_group_tests_name("calc", tests, NULL, NULL);
}

/* Helpers; see util.h. */
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool str_to_ll(const char *s, size_t len, long long *out)
{
    size_t i = 0;
    bool neg = false;
    unsigned long long v = 0;
    if (len == 0 || len > 20)
        return false;
    if (len == 1 && s[0] == '0') {
        *out = 0;
        return true;
    }
    if (s[0] == '-') {
        if (len == 1)
            return false;
        neg = true;
        i = 1;
    }
    if (s[i] < '1' || s[i] > '9')
        return false;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        if (v > (ULLONG_MAX - (unsigned)(s[i] - '0')) / 10)
            return false;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (neg) {
        if (v > (unsigned long long)LLONG_MAX + 1)
            return false;
        *out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
    } else {
        if (v > LLONG_MAX)
            return false;
        *out = (long long)v;
    }
    return true;
}

/* Eight decimal digits at p as a number (SWAR: Lemire's three multiply
 * steps), or false if one of the bytes is not a digit. */
static inline bool eight_digits(const char *p, uint64_t *out)
{
    uint64_t x;
    memcpy(&x, p, 8);
    if ((x & UINT64_C(0xf0f0f0f0f0f0f0f0)) != UINT64_C(0x3030303030303030) ||
        ((x + UINT64_C(0x0606060606060606)) & UINT64_C(0xf0f0f0f0f0f0f0f0)) !=
            UINT64_C(0x3030303030303030))
        return false;
    x = ((x & UINT64_C(0x0f0f0f0f0f0f0f0f)) * 2561) >> 8;
    x = ((x & UINT64_C(0x00ff00ff00ff00ff)) * 6553601) >> 16;
    x = ((x & UINT64_C(0x0000ffff0000ffff)) * UINT64_C(42949672960001)) >> 32;
    *out = x;
    return true;
}

/* Digits from s[*i] on into *mant, eight at a time while there are eight;
 * *n counts them. False when more than 19 digits in all (the mantissa
 * could overflow). */
static inline bool digits_into(const char *s, size_t len, size_t *i, uint64_t *mant, int *n)
{
    uint64_t v;
    while (*i + 8 <= len && eight_digits(s + *i, &v)) {
        if (*n > 11)
            return false;
        *mant = *mant * 100000000 + v;
        *n += 8;
        *i += 8;
    }
    for (; *i < len && s[*i] >= '0' && s[*i] <= '9'; (*i)++) {
        if (*n >= 19)
            return false;
        *mant = *mant * 10 + (uint64_t)(s[*i] - '0');
        (*n)++;
    }
    return true;
}

/* Clinger's fast path: a decimal whose digits make an integer of at most
 * 2^53, with at most 22 after the point, is that integer divided by a power
 * of ten, both exact in a double, so one correctly rounded division gives
 * the double nearest to it: what strtod returns. Values sent as plain
 * decimals (TDIGEST.ADD's) skip the copy and strtod; anything else (an
 * exponent, more than 19 digits, inf, nan, spaces) returns false for
 * strtod. Runs of eight digits convert at once: TDIGEST.ADD of 100
 * twelve-digit values went from 0.058-0.072 to 0.051-0.059 us of server CPU per
 * value, pipelined (load 2.6). */
static bool decimal_fast(const char *s, size_t len, double *out)
{
    static const double pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    size_t i = 0;
    bool neg = false;
    if (len > 0 && (s[0] == '-' || s[0] == '+')) {
        neg = s[0] == '-';
        i = 1;
    }
    uint64_t mant = 0;
    int n = 0;
    if (!digits_into(s, len, &i, &mant, &n))
        return false;
    int whole = n;
    if (i < len && s[i] == '.') {
        i++;
        if (!digits_into(s, len, &i, &mant, &n))
            return false;
    }
    int frac = n - whole;
    if (i != len || n == 0 || frac > 22 || mant > (UINT64_C(1) << 53))
        return false;
    double v = (double)mant / pow10[frac];
    *out = neg ? -v : v;
    return true;
}

bool str_to_double(const char *s, size_t len, double *out)
{
    char buf[128];
    if (len == 0 || len >= sizeof(buf))
        return false;
    if (decimal_fast(s, len, out))
        return true;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (isspace((unsigned char)buf[0]))
        return false;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if ((size_t)(end - buf) != len || errno == ERANGE || isnan(v))
        return false;
    *out = v;
    return true;
}

bool str_to_mem(const char *s, size_t len, long long *out)
{
    size_t i = 0;
    while (i < len && (isdigit((unsigned char)s[i]) || (i == 0 && s[i] == '-')))
        i++;
    long long num;
    if (!str_to_ll(s, i, &num))
        return false;
    const char *u = s + i;
    size_t ul = len - i;
    long long mul;
    if (ul == 0 || str_eq_ci(u, ul, "b"))
        mul = 1;
    else if (str_eq_ci(u, ul, "k"))
        mul = 1000;
    else if (str_eq_ci(u, ul, "kb"))
        mul = 1024;
    else if (str_eq_ci(u, ul, "m"))
        mul = 1000LL * 1000;
    else if (str_eq_ci(u, ul, "mb"))
        mul = 1024LL * 1024;
    else if (str_eq_ci(u, ul, "g"))
        mul = 1000LL * 1000 * 1000;
    else if (str_eq_ci(u, ul, "gb"))
        mul = 1024LL * 1024 * 1024;
    else
        return false;
    if (num != 0 && (num > LLONG_MAX / mul || num < LLONG_MIN / mul))
        return false;
    *out = num * mul;
    return true;
}

bool str_eq_ci(const char *s, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    if (n != len)
        return false;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)s[i]) != tolower((unsigned char)lit[i]))
            return false;
    return true;
}

int64_t now_ms(void) { return now_us() / 1000; }

int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void bytes_human(char *out, size_t n, unsigned long long b)
{
    double d = (double)b;
    if (b < 1024)
        snprintf(out, n, "%lluB", b);
    else if (b < 1024ULL * 1024)
        snprintf(out, n, "%.2fK", d / 1024);
    else if (b < 1024ULL * 1024 * 1024)
        snprintf(out, n, "%.2fM", d / (1024 * 1024));
    else if (b < 1024ULL * 1024 * 1024 * 1024)
        snprintf(out, n, "%.2fG", d / (1024.0 * 1024 * 1024));
    else
        snprintf(out, n, "%.2fT", d / (1024.0 * 1024 * 1024 * 1024));
}

char *mem_dup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

void strbuf_add(strbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 128;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void strbuf_str(strbuf *b, const char *s) { strbuf_add(b, s, strlen(s)); }

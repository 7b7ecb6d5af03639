/* Redis's glob patterns (glob.h): KEYS and SCAN MATCH, ACL key and channel
 * patterns, PSUBSCRIBE, CONFIG GET, and the fleet console's search. */
#include "glob.h"

#include <ctype.h>

static int fold(int c, bool nocase) { return nocase ? tolower(c) : c; }

/* Does the single-character token at p (a literal, '?', "\\x" or a [class])
 * match c? *tok receives the token's length. */
static bool match_one(const unsigned char *p, size_t pl, int c, bool nocase, size_t *tok)
{
    if (*p == '?') {
        *tok = 1;
        return true;
    }
    if (*p == '\\' && pl >= 2) {
        *tok = 2;
        return fold(p[1], nocase) == fold(c, nocase);
    }
    if (*p != '[') {
        *tok = 1;
        return fold(*p, nocase) == fold(c, nocase);
    }
    size_t i = 1;
    bool neg = i < pl && p[i] == '^';
    if (neg)
        i++;
    bool hit = false;
    while (i < pl && p[i] != ']') {
        if (p[i] == '\\' && i + 1 < pl) {
            i++;
            if (fold(p[i], nocase) == fold(c, nocase))
                hit = true;
        } else if (i + 2 < pl && p[i + 1] == '-' && p[i + 2] != ']') {
            int a = fold(p[i], nocase), b = fold(p[i + 2], nocase), x = fold(c, nocase);
            if (a > b) {
                int t = a;
                a = b;
                b = t;
            }
            if (x >= a && x <= b)
                hit = true;
            i += 2;
        } else if (fold(p[i], nocase) == fold(c, nocase)) {
            hit = true;
        }
        i++;
    }
    *tok = i < pl ? i + 1 : i; /* an unterminated class runs to the end */
    return neg ? !hit : hit;
}

/* Iterative matching that only ever backtracks to the last '*': O(|p|*|s|)
 * whatever the pattern, so KEYS with a hostile pattern cannot hang a worker. */
bool glob_match(const char *pat, size_t plen, const char *str, size_t slen, bool nocase)
{
    const unsigned char *p = (const unsigned char *)pat, *s = (const unsigned char *)str;
    size_t pi = 0, si = 0, star_p = (size_t)-1, star_s = 0;
    while (si < slen) {
        size_t tok;
        if (pi < plen && p[pi] == '*') {
            while (pi < plen && p[pi] == '*')
                pi++;
            star_p = pi;
            star_s = si;
            continue;
        }
        if (pi < plen && match_one(p + pi, plen - pi, s[si], nocase, &tok)) {
            pi += tok;
            si++;
            continue;
        }
        if (star_p == (size_t)-1)
            return false;
        pi = star_p;
        si = ++star_s;
    }
    while (pi < plen && p[pi] == '*')
        pi++;
    return pi == plen;
}

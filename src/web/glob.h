/* Redis's glob patterns (glob.c), shared by bloomeryd and the CLI. Pure. */
#ifndef BLOOMERY_WEB_GLOB_H
#define BLOOMERY_WEB_GLOB_H

#include <stdbool.h>
#include <stddef.h>

/* Glob match (*, ?, [a-z], [^x], \\x), optionally case-insensitive. */
bool glob_match(const char *pat, size_t plen, const char *s, size_t slen, bool nocase);

#endif

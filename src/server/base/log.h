/* The server's log: Redis's line format, to stdout or the logfile. */
#ifndef BLOOMERYD_LOG_H
#define BLOOMERYD_LOG_H

#include <stdbool.h>

#include "config.h" /* LOG_DEBUG .. LOG_WARNING, loglevel */

/* Append to path instead of stdout; false (errno set) if it can't open. */
bool log_open(const char *path);
void log_close(void);
void server_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

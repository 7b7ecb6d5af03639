/* The server's log: Redis's line format, to stdout or the logfile. */
#ifndef BLOOMERYD_LOG_H
#define BLOOMERYD_LOG_H

#include <stdbool.h>

#include "config.h" /* LOG_DEBUG .. LOG_WARNING, loglevel */

/* Append to path instead of stdout; false (errno set) if it can't open. */
bool log_open(const char *path);
void log_close(void);
void server_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A host with a log of its own (the module: Redis's) takes every line,
 * unfiltered and unformatted, instead of stdout or the logfile. */
void log_set_sink(void (*sink)(int level, const char *msg));

#endif

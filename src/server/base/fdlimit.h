/* maxclients against the open-file limit, as Redis's adjustOpenFilesLimit.
 *
 * Every client holds a descriptor and the server needs some of its own
 * (files, the log, listeners, each event loop's), so maxclients plus those
 * must fit under RLIMIT_NOFILE: otherwise accept fails with EMFILE while
 * maxclients still admits clients. The soft limit is raised as far as
 * needed where the hard one allows (or, with the privilege, past it); what
 * still does not fit lowers maxclients, with Redis's warnings.
 */
#ifndef BLOOMERYD_FDLIMIT_H
#define BLOOMERYD_FDLIMIT_H

#include <stdbool.h>

/* Redis's CONFIG_MIN_RESERVED_FDS: the server's own files, listeners and
 * log; main() adds what its threads hold. */
#define FDLIMIT_MIN_RESERVED 32

/* Descriptors the server keeps for itself (FDLIMIT_MIN_RESERVED until
 * set). */
void fdlimit_set_reserved(long long n);

/* How many of maxclients clients fit, once the soft limit is raised for
 * them where it can be; maxclients when all do. Logs a raise (notice) or
 * a reduction (warnings) in Redis's words. At start, a limit that leaves
 * no client at all is logged as fatal and 0 is returned. */
long long fdlimit_fit(long long maxclients, bool at_start);

#endif

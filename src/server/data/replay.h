/* Replay of one log record (replay.c); see persist.h. */
#ifndef BLOOMERYD_REPLAY_H
#define BLOOMERYD_REPLAY_H

#include "wal_format.h"

void replay_apply(const wal_record *rec, const wal_op *op);
/* Records skipped because they no longer fit the state. */
uint64_t replay_skipped(void);

#endif

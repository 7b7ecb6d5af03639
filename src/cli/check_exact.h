/* bloomery check-data's part for exact filters (check_exact.c). */
#ifndef BLOOMERY_CLI_CHECK_EXACT_H
#define BLOOMERY_CLI_CHECK_EXACT_H

#include "bloomery/bloomery.h"
#include "snapshot_index.h"
#include "wal_format.h"

/* An exact entry's window as the snapshot holds it (takes obj). */
void check_exact_keep(const snap_entry *e, bloomery_object *obj);
/* A log record after the snapshot (the exact puts are kept). */
void check_exact_record(const wal_op *op);
/* The store against what was kept; each problem through problem(). */
void check_exact_run(const char *dir, void (*problem)(const char *));

#endif

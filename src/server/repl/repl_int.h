/* What the replication files share among themselves (repl.h is what the
 * rest of the server sees). */
#ifndef BLOOMERYD_REPL_INT_H
#define BLOOMERYD_REPL_INT_H

#include "repl.h"

/* repl_state.c */
const char *repl_dir(void);
/* Copy the ids under the state's lock. */
void repl_ids(char replid[REPL_ID_LEN + 1], char replid2[REPL_ID_LEN + 1], uint64_t *second);
void repl_new_id(char out[REPL_ID_LEN + 1]);
void repl_count(uint64_t *counter, uint64_t n);
extern uint64_t repl_stat_full, repl_stat_partial_ok, repl_stat_partial_err;
extern uint64_t repl_stat_chunks_fetched, repl_stat_chunks_present, repl_stat_sync_bytes;
void repl_set_loading(bool on);
void repl_update_checks(void);

/* sender.c */
void senders_status(repl_status *s);
void senders_stop_all(void);
unsigned senders_good(int64_t max_lag_ms);
void senders_wake(void);

/* replica.c */
void replica_link_start(const char *host, int port);
void replica_link_stop(void);
void replica_link_status(repl_status *s);
bool replica_link_up(void);
uint64_t replica_applied_lsn(void);

/* repl_state.c: the id of the history this server's log follows (what
 * PSYNC names); a full resync adopts the master's id, a partial one
 * follows a master's new id keeping the old one as the second. */
void replica_master_id(char out[REPL_ID_LEN + 1]);
void repl_adopt_id(const char *id);
void repl_follow_id(const char *id);
/* Before a full resync replaces the data: DIR/replid names no history. */
void repl_forget_id(void);

#endif

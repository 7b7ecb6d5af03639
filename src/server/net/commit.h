/* Group commit of replies (commit.c): the durability contract's one
 * enforcement point, between the connections and the log. */
#ifndef BLOOMERYD_COMMIT_H
#define BLOOMERYD_COMMIT_H

#include <stdbool.h>

struct client;
struct worker;

void commit_worker_init(struct worker *w);
void commit_worker_close(struct worker *w);
/* Around a write command on worker w: changes it makes visible to other
 * workers get their log records before commit_write_end. */
void commit_write_begin(struct worker *w);
void commit_write_end(struct worker *w);
/* Around EXEC's queued commands: no write command of another worker runs
 * in between (they wait in commit_write_begin). */
void commit_exclusive_begin(struct worker *w);
void commit_exclusive_end(struct worker *w);
/* After a client's requests that touched keys ran: true if its replies
 * must wait for the log (appendfsync always and a record its answers may
 * depend on is not durable yet). */
bool commit_defer(struct client *c);
void commit_forget(struct client *c);
/* From the log thread: durable LSN advanced. */
void commit_notify(void);
void commit_free(void);

#endif

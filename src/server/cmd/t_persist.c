/* Persistence commands: SAVE, BGSAVE, BGREWRITEAOF, LASTSAVE.
 * BGREWRITEAOF is a snapshot here: a snapshot rotates the log and deletes
 * what it covers, which is what a rewrite is for. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "persist.h"
#include "snapshot.h"

void saveCommand(cmd_ctx *c) {
    char err[256];
    if (snapshot_run(true, err, sizeof(err))) reply_ok(&c->out);
    else reply_errorf(&c->out, "ERR %s", err);
}

static void background(cmd_ctx *c, const char *started) {
    char err[256];
    if (snapshot_run(false, err, sizeof(err))) reply_simple(&c->out, started);
    else reply_errorf(&c->out, "ERR %s", err);
}

void bgsaveCommand(cmd_ctx *c) {
    if (c->argc > 2 || (c->argc == 2 && !arg_eq(c, 1, "schedule"))) {
        reply_syntax_error(c);
        return;
    }
    background(c, "Background saving started");
}

void bgrewriteaofCommand(cmd_ctx *c) {
    background(c, "Background append only file rewriting started");
}

void lastsaveCommand(cmd_ctx *c) {
    snapshot_stats st;
    snapshot_get_stats(&st);
    reply_int(&c->out, st.last_save_s);
}


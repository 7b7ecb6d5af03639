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

bool saveCommand(cmd_ctx *c)
{
    char err[256];
    if (snapshot_run(true, err, sizeof(err))) {
        reply_ok(&c->out);
        return true;
    }
    reply_errorf(&c->out, "ERR %s", err);
    return false;
}

static bool background(cmd_ctx *c, const char *started)
{
    char err[256];
    if (snapshot_run(false, err, sizeof(err))) {
        reply_simple(&c->out, started);
        return true;
    }
    reply_errorf(&c->out, "ERR %s", err);
    return false;
}

bool bgsaveCommand(cmd_ctx *c)
{
    if (c->argc > 2 || (c->argc == 2 && !arg_eq(c, 1, "schedule"))) {
        reply_syntax_error(c);
        return false;
    }
    return background(c, "Background saving started");
}

bool bgrewriteaofCommand(cmd_ctx *c)
{
    return background(c, "Background append only file rewriting started");
}

bool lastsaveCommand(cmd_ctx *c)
{
    snapshot_stats st;
    snapshot_get_stats(&st);
    reply_int(&c->out, st.last_save_s);
    return true;
}

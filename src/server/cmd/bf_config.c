/* BF.CONFIG key READONLY [yes|no]: a filter's own settings (ours, not
 * RedisBloom's). With yes|no it sets the filter read-only or writable and
 * answers OK; without, it answers "yes" or "no".
 *
 * Read-only is a flag of the value (kv_obj.readonly) for every Bloom-family
 * value (every layout, counting filters, windows) and cuckoo filters: the
 * commands that would change its content refuse it where they open it for
 * a change (cmdkit.h's ck_refuse_readonly), while reads, dumps and the
 * key's own commands (DEL, EXPIRE, PERSIST, RENAME) go on. A change is
 * logged (WAL_VALUE_FLAGS, so replicas and recovery apply it), written to
 * the server log at notice level, and kept by snapshots and, in the
 * module, by the RDB and the AOF rewrite (docs/COMMANDS.md).
 */
#include <stdio.h>

#include "bf.h"
#include "log.h"
#include "persist.h"

static const ck_kind config_kind = {
    .types = {&bloom_type, &counting_type, &window_type, &cuckoo_type},
    .loading = &bf_loading_type,
    .not_found = "ERR not found",
    .loading_err = "ERR filter is still being loaded with BF.LOADCHUNK",
};

/* key, printable for a log line: at most 128 bytes of it, anything but
 * printable ASCII as \xHH. */
static void key_for_log(char *out, size_t cap, const char *key, size_t klen)
{
    size_t o = 0;
    for (size_t i = 0; i < klen && i < 128 && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)key[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\')
            out[o++] = (char)ch;
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
    }
    if (klen > 128 && o + 4 < cap)
        o += (size_t)snprintf(out + o, cap - o, "...");
    out[o] = '\0';
}

bool bfConfigCommand(cmd_ctx *c)
{
    if (c->argc != 3 && c->argc != 4) {
        reply_wrong_arity(&c->out, "bf.config");
        return false;
    }
    if (!arg_eq(c, 2, "readonly")) {
        reply_syntax_error(c);
        return false;
    }
    bool set = c->argc == 4, on = false;
    if (set) {
        if (arg_eq(c, 3, "yes"))
            on = true;
        else if (!arg_eq(c, 3, "no")) {
            reply_error(&c->out, "ERR READONLY must be 'yes' or 'no'");
            return false;
        }
    }
    ks_ref ref;
    kv_entry *e;
    if (!ck_open(c, &ref, c->argv[1], c->argvlen[1], &config_kind,
                 CK_MUST_EXIST | (set ? CK_WRITE : 0), &e)) {
        ks_close(&ref);
        return false;
    }
    kv_obj *o = e->obj;
    if (!set) {
        reply_bulk_str(&c->out, o->readonly ? "yes" : "no");
    } else {
        /* Under the key's exclusive lock: no write is running on it, and
         * every later one sees the flag. Unchanged: nothing to log. */
        if (o->readonly != on) {
            o->readonly = on;
            wal_log_value_flags(c->argv[1], c->argvlen[1], on ? WAL_FLAG_READONLY : 0);
            char name[600];
            key_for_log(name, sizeof(name), c->argv[1], c->argvlen[1]);
            server_log(LOG_NOTICE, "BF.CONFIG: filter '%s' is now %s", name,
                       on ? "read-only" : "writable");
        }
        reply_ok(&c->out);
    }
    ks_close(&ref);
    return true;
}
